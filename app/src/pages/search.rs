use idem_domain::{CappedCount, Claim, ClaimStatus, DeadLetter};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::Pager;
use crate::{
    api::{KeyQuery, SearchResults, search_keys},
    components::{KeyLink, Loaded, StatusBadge, Time, provide_clock},
    links,
};

/// What the query matched whole, each kind under a heading that says so:
/// the key itself, a provider reference, a dead letter's message id.
#[component]
fn WholeMatches(
    q: String,
    exact: Vec<Claim>,
    by_provider_ref: Vec<Claim>,
    by_message_id: Vec<DeadLetter>,
) -> impl IntoView {
    let exact = (!exact.is_empty()).then(|| {
        view! {
            <h2>"The key " <code class="key"><bdi>{q.clone()}</bdi></code></h2>
            <ClaimTable claims=exact/>
        }
    });
    let by_provider_ref = (!by_provider_ref.is_empty()).then(|| {
        view! {
            <h2>"Claims whose provider reference is " <code><bdi>{q.clone()}</bdi></code></h2>
            <ClaimTable claims=by_provider_ref/>
        }
    });
    let by_message_id = (!by_message_id.is_empty()).then(|| {
        view! {
            <h2>"Dead letters whose message id is " <code><bdi>{q}</bdi></code></h2>
            <DeadLetterTable dead_letters=by_message_id/>
        }
    });
    view! { {exact} {by_provider_ref} {by_message_id} }
}

/// `/keys?q=&consumer=&status=&cursor=`: exact and prefix search over keys.
#[component]
pub fn SearchPage() -> impl IntoView {
    let location = use_location();
    let query = Memo::new(move |_| {
        let search = location.search.get();
        let param = |name| links::query_param(&search, name).unwrap_or_default();
        KeyQuery {
            q: param("q"),
            consumer: param("consumer"),
            status: param("status"),
            cursor: param("cursor"),
            limit: param("limit"),
        }
    });
    let results = Resource::new(move || query.get(), search_keys);
    let q = move || query.get().q;
    let consumer = move || query.get().consumer;
    let status_options = move || {
        let current = query.get().status;
        std::iter::once(("", "any status"))
            .chain(ClaimStatus::ALL.iter().map(|s| (s.as_str(), s.as_str())))
            .map(|(value, label)| view! { <option value=value selected=current == value>{label}</option> })
            .collect_view()
    };
    let render = move |r: SearchResults| {
        provide_clock(r.clock.clone());
        found(r, &query.get_untracked())
    };
    view! {
        <Title text="Keys"/>
        <h1>"Keys"</h1>
        <form class="search-form filters" method="get" action="/keys" role="search">
            <label>
                "Key, start of a key, provider reference, message id or log fingerprint "
                <input type="search" name="q" value=q maxlength="512" autocomplete="off" spellcheck="false"/>
            </label>
            <label>
                "Consumer "
                <input type="text" name="consumer" value=consumer maxlength="128" autocomplete="off" spellcheck="false"/>
            </label>
            <label>"Status " <select name="status">{status_options}</select></label>
            <button type="submit">"Search"</button>
        </form>
        <p class="lede">"Keys match literally and case-sensitively: % and _ are ordinary characters. A provider reference or a message id matches whole."</p>
        <Loaded resource=results render/>
    }
}

/// What the search found for `current`: what matched whole, then the keys
/// starting with the text — left out when something matched whole and no
/// key starts with it (an empty list under a match would only say "no match").
fn found(r: SearchResults, current: &KeyQuery) -> AnyView {
    let on_first_page = current.cursor.is_empty();
    let keep = kept_filters(current);
    if r.from_fingerprint {
        return view! {
            <h2>"The key Idem's logs call " <code>{current.q.clone()}</code></h2>
            <ClaimTable claims=r.exact/>
        }
        .into_any();
    }
    let found_whole =
        !(r.exact.is_empty() && r.by_provider_ref.is_empty() && r.by_message_id.is_empty());
    let whole = view! {
        <WholeMatches
            q=current.q.clone()
            exact=r.exact
            by_provider_ref=r.by_provider_ref
            by_message_id=r.by_message_id
        />
    };
    if found_whole && r.claims.is_empty() && on_first_page {
        return whole.into_any();
    }
    let summary = order_line(r.matches, &current.q, r.by_status_change);
    let list = if r.claims.is_empty() {
        view! { <p class="empty">"No key matches."</p> }.into_any()
    } else {
        view! { <ClaimTable claims=r.claims/> }.into_any()
    };
    view! {
        {whole}
        <h2>{if current.q.is_empty() { "Keys" } else { "Keys starting with the text" }}</h2>
        <p class="count-line">{summary}</p>
        {list}
        <Pager path="/keys" next=r.next on_first_page keep/>
    }
    .into_any()
}

/// The filters a next page keeps (all but the cursor), those set only.
fn kept_filters(query: &KeyQuery) -> Vec<(&'static str, String)> {
    [
        ("q", query.q.clone()),
        ("consumer", query.consumer.clone()),
        ("status", query.status.clone()),
        ("limit", query.limit.clone()),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect()
}

/// The line over the list: how many keys start with `q` (when searching)
/// and in what order they are shown.
fn order_line(matches: Option<CappedCount>, q: &str, by_status_change: bool) -> String {
    match (&matches, q.is_empty()) {
        (Some(m), false) if m.capped => format!(
            "More than {} keys start with this text; showing the newest activity among the first {} in key order. Type more of the key to narrow it down.",
            m, m
        ),
        (Some(m), false) => format!("{m} keys start with this text, newest activity first."),
        _ if by_status_change => "Newest status change first.".to_owned(),
        _ => "Newest activity first.".to_owned(),
    }
}

/// The claims found, a row each.
#[component]
fn ClaimTable(claims: Vec<Claim>) -> impl IntoView {
    let rows = claims
        .into_iter()
        .map(|c| {
            view! {
                <tr>
                    <td><KeyLink consumer=c.consumer.clone() key=c.key/></td>
                    <td>{c.consumer}</td>
                    <td><StatusBadge status=c.status/></td>
                    <td><Time at=c.last_delivery_at/></td>
                    <td class="num">{c.delivery_count}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Status"</th><th>"Last delivery"</th><th class="num">"Deliveries"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// The dead letters found by their message id, a row each.
#[component]
fn DeadLetterTable(dead_letters: Vec<DeadLetter>) -> impl IntoView {
    let rows = dead_letters
        .into_iter()
        .map(|d| {
            let href = format!("/dead-letters/{}", d.id);
            view! {
                <tr>
                    <td><a href=href>"#" {d.id}</a></td>
                    <td><KeyLink consumer=d.consumer.clone() key=d.key/></td>
                    <td>{d.consumer}</td>
                    <td>{d.state.to_string()}</td>
                    <td><Time at=d.dead_lettered_at/></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Dead letter"</th><th>"Key"</th><th>"Consumer"</th><th>"State"</th><th>"Dead-lettered"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_page_keeps_the_filters_that_are_set_but_not_the_cursor() {
        let query = KeyQuery {
            q: "renewal:".into(),
            status: "unknown".into(),
            cursor: "abc".into(),
            ..KeyQuery::default()
        };
        assert_eq!(
            kept_filters(&query),
            [
                ("q", "renewal:".to_owned()),
                ("status", "unknown".to_owned())
            ]
        );
    }

    #[test]
    fn the_order_line_says_how_many_keys_match_and_how_they_are_ordered() {
        let exact = CappedCount::from_limited(12, 100);
        let capped = CappedCount::from_limited(101, 100);
        assert_eq!(
            order_line(Some(exact), "renewal:", false),
            "12 keys start with this text, newest activity first."
        );
        assert!(
            order_line(Some(capped), "renewal:", false)
                .ends_with("Type more of the key to narrow it down.")
        );
        assert_eq!(
            order_line(Some(exact), "", true),
            "Newest status change first."
        );
        assert_eq!(order_line(None, "", false), "Newest activity first.");
    }
}
