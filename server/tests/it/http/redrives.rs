//! A guarded redrive over HTTP, as an operator runs one after an incident:
//! filter the dead letters, press "Redrive these" (a plain form), land on
//! the run's page and watch the server replay the safe ones and skip the
//! rest with why — on both backends.

use idem_domain::{DeadLetterState, Role};
use idem_store::{NewDeadLetter, Outcome, Store, Ts, testing::TestDatabase};

use super::{
    claim,
    common::{Form, TestApp, forms, get, location, post_as_browser, spawn_with, visible},
    ended,
};

const CONSUMER: &str = "reminders";

/// An open dead letter of `key` whose last error is `error`.
async fn dead_letter(store: &Store, key: &str, error: &str) -> i64 {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: CONSUMER,
            queue: "reminders.fifo",
            key,
            message_id: key,
            payload: "{}",
            delivery_count: 4,
            first_failure_at: now,
            last_error: Some(error),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_redrives_the_429s_and_only_the_safe_ones_are_replayed_on_sqlite() {
    an_operator_redrives_the_429s_and_only_the_safe_ones_are_replayed(TestDatabase::sqlite().await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_redrives_the_429s_and_only_the_safe_ones_are_replayed_on_postgres() {
    an_operator_redrives_the_429s_and_only_the_safe_ones_are_replayed(
        TestDatabase::postgres().await,
    )
    .await;
}

async fn an_operator_redrives_the_429s_and_only_the_safe_ones_are_replayed(db: TestDatabase) {
    let app = spawn_with(
        |c| {
            c.redrive_per_second = 100;
            // The list is read again right after the run: not from the cache.
            c.read_cache_ttl = std::time::Duration::ZERO;
        },
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let failed = Outcome::Retryable {
        error: "429 Too Many Requests",
    };
    // Two rate-limited keys that never went out, one that did before its
    // message was dead-lettered, and one that failed for another reason.
    for key in ["remind:7/🧾 #1", "remind:8"] {
        claim(&app.store, CONSUMER, key, Some(failed)).await;
    }
    claim(
        &app.store,
        CONSUMER,
        "remind:9",
        Some(Outcome::Sent {
            provider_ref: Some("msg_1"),
        }),
    )
    .await;
    claim(&app.store, CONSUMER, "remind:10", Some(failed)).await;
    let safe = [
        dead_letter(&app.store, "remind:7/🧾 #1", "429 Too Many Requests").await,
        dead_letter(&app.store, "remind:8", "429 Too Many Requests").await,
    ];
    let sent = dead_letter(&app.store, "remind:9", "429 Too Many Requests").await;
    let other = dead_letter(&app.store, "remind:10", "400 invalid phone number").await;

    let list = "/dead-letters?consumer=reminders&error=429";
    let (status, html) = get(&olga, &app.url(list)).await;
    assert_eq!(status, 200);
    assert!(
        visible(&html).contains("3 dead letters"),
        "{}",
        visible(&html)
    );
    let form = forms(&html)
        .into_iter()
        .find(|f| f.action.contains("start_redrive"))
        .expect("an operator is offered the redrive");
    assert_eq!(
        form.field("error"),
        Some("429"),
        "the form takes what the list shows"
    );
    let fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let response = post_as_browser(&app, &olga, list, &form.action, &fields).await;
    assert_eq!(response.status().as_u16(), 303);
    let run = location(&response);
    assert!(
        run.starts_with("/redrives/") && run.contains("answer="),
        "{run}"
    );
    let (_, html) = get(&olga, &app.url(&run)).await;
    assert!(
        visible(&html).contains("started: 3 dead letters to go through"),
        "{}",
        visible(&html)
    );

    let page = run.split('?').next().unwrap().to_owned();
    let shown = ended(&app, &olga, &page).await;
    assert!(shown.contains("State finished"), "{shown}");
    assert!(
        shown.contains("2 replayed, 1 skipped, 0 waiting"),
        "{shown}"
    );
    assert!(
        shown.contains("Blocked: the effect already happened"),
        "why the sent one was skipped: {shown}"
    );
    for id in safe {
        let letter = app.store.letter(id).await;
        assert_eq!(letter.state, DeadLetterState::Replayed, "#{id}");
        assert_eq!(
            letter.resolved_by.as_deref(),
            Some("olga"),
            "replayed in olga's name"
        );
    }
    for id in [sent, other] {
        let letter = app.store.letter(id).await;
        assert_eq!(letter.state, DeadLetterState::Open, "#{id} is left alone");
    }

    // The same form sent again (a double click, a retry) starts nothing new.
    let again = post_as_browser(&app, &olga, list, &form.action, &fields).await;
    assert_eq!(location(&again).split('?').next(), Some(page.as_str()));
    let (_, html) = get(
        &olga,
        &app.url("/dead-letters?consumer=reminders&error=429"),
    )
    .await;
    assert!(
        visible(&html).contains("1 dead letter "),
        "{}",
        visible(&html)
    );

    // A viewer reads the run but is offered no redrive and no stop.
    let (status, html) = get(&app.client, &app.url(&page)).await;
    assert_eq!(status, 200);
    assert!(!html.contains("stop_redrive"));
    let (_, html) = get(&app.client, &app.url(list)).await;
    assert!(!html.contains("start_redrive"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_takes_what_its_page_showed_and_a_changed_list_is_refused_on_the_page_on_sqlite()
{
    a_redrive_takes_what_its_page_showed_and_a_changed_list_is_refused_on_the_page(
        TestDatabase::sqlite().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_takes_what_its_page_showed_and_a_changed_list_is_refused_on_the_page_on_postgres()
 {
    a_redrive_takes_what_its_page_showed_and_a_changed_list_is_refused_on_the_page(
        TestDatabase::postgres().await,
    )
    .await;
}

/// The redrive form of `list` as `client` sees it, and the words on its button.
async fn redrive_form(app: &TestApp, client: &reqwest::Client, list: &str) -> (Form, String) {
    let (status, html) = get(client, &app.url(list)).await;
    assert_eq!(status, 200, "{list}");
    let form = forms(&html)
        .into_iter()
        .find(|f| f.action.contains("start_redrive"))
        .unwrap_or_else(|| panic!("no redrive form on {list}: {}", visible(&html)));
    let heading = visible(&html)
        .split("Redrive ")
        .nth(1)
        .map(|rest| {
            rest.split(" Each dead letter")
                .next()
                .unwrap_or(rest)
                .to_owned()
        })
        .unwrap_or_default();
    (form, heading)
}

async fn press(app: &TestApp, client: &reqwest::Client, list: &str, form: &Form) -> String {
    let fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let response = post_as_browser(app, client, list, &form.action, &fields).await;
    assert_eq!(response.status().as_u16(), 303);
    location(&response)
}

async fn a_redrive_takes_what_its_page_showed_and_a_changed_list_is_refused_on_the_page(
    db: TestDatabase,
) {
    let app = spawn_with(|c| c.redrive_per_second = 100, db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let failed = Outcome::Retryable {
        error: "429 Too Many Requests",
    };
    for n in 1..=3 {
        let key = format!("remind:{n} ‏שלום/🧾");
        claim(&app.store, CONSUMER, &key, Some(failed)).await;
        dead_letter(&app.store, &key, "429 Too Many Requests").await;
    }
    let list = "/dead-letters?consumer=reminders&error=429";
    let (form, button) = redrive_form(&app, &olga, list).await;
    assert_eq!(button, "these 3");

    // Forty more arrive while Olga reads the page.
    for n in 4..=43 {
        let key = format!("remind:{n}");
        claim(&app.store, CONSUMER, &key, Some(failed)).await;
        dead_letter(&app.store, &key, "429 Too Many Requests").await;
    }
    let run = press(&app, &olga, list, &form).await;
    assert!(run.starts_with("/redrives/"), "{run}");
    let (_, html) = get(&olga, &app.url(&run)).await;
    assert!(
        visible(&html).contains("Redrive #1 started: 3 dead letters to go through"),
        "{}",
        visible(&html)
    );
    let shown = ended(&app, &olga, run.split('?').next().unwrap()).await;
    assert!(
        shown.contains("3 replayed, 0 skipped, 0 waiting"),
        "{shown}"
    );

    // The page drawn again offers the forty; one of them is replayed by
    // hand before Olga presses: nothing starts, and the list says why.
    let (form, button) = redrive_form(&app, &olga, list).await;
    assert_eq!(button, "these 40");
    let one = app
        .store
        .lists()
        .dead_letters_in(
            DeadLetterState::Open,
            &idem_store::PageRequest::new(1, None),
            &idem_store::DeadLetterFilter::default(),
        )
        .await
        .unwrap()
        .items[0]
        .id;
    let discard = format!("UPDATE dead_letters SET state = 'discarded' WHERE id = {one}");
    idem_store::testing::execute_raw(&app.store, &discard, &discard)
        .await
        .unwrap();
    let back = press(&app, &olga, list, &form).await;
    assert!(
        back.starts_with("/dead-letters?"),
        "back to the list: {back}"
    );
    let (_, html) = get(&olga, &app.url(&back)).await;
    let page = visible(&html);
    assert!(
        page.contains(
            "The list changed after the page was drawn: it offered 40 dead letters, and now \
             39 match. Nothing was started"
        ),
        "{page}"
    );
    let (_, button) = redrive_form(&app, &olga, &back).await;
    assert_eq!(button, "these 39", "the page offers the new list");
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "redrives").await,
        1
    );
}
