//! A key's page: what it shows, in what order, and keys of any character
//! that round-trip through it.

use chrono::{TimeDelta, Utc};
use idem_app::links::key_href;
use idem_domain::OutboxOrigin;
use idem_store::{
    Delivery, NewDeadLetter, NewOutboxRow, Outcome, Store, Ts, testing::TestDatabase,
};
use proptest::{
    strategy::{Strategy, ValueTree},
    test_runner::TestRunner,
};

use super::{
    claim,
    common::{spawn_app, text, visible},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_page_shows_the_claim_its_outbox_rows_and_its_dead_letters() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "refund:EU/2026/Ø-1842";
    claim(
        &app.store,
        "order-events",
        key,
        Some(Outcome::Unknown {
            error: "connection reset after send",
        }),
    )
    .await;
    let now = Ts::now();
    let mut tx = app.store.begin().await.unwrap();
    tx.enqueue(&NewOutboxRow {
        consumer: "order-events",
        topic: "order.forwarded",
        key,
        payload: "{}",
        origin: OutboxOrigin::Application,
        dead_letter_id: None,
        audit_id: None,
        at: now,
    })
    .await
    .unwrap();
    let letter = tx
        .dead_letter(&NewDeadLetter {
            consumer: "order-events",
            queue: "order-events.fifo",
            key,
            message_id: "m-1",
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some("429 Too Many Requests"),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let (status, html) = app.get(&key_href("order-events", key)).await;
    assert_eq!(status, 200);
    let page = text(&html);
    assert!(page.contains(key), "the page names the key");
    assert!(
        page.contains("status-unknown"),
        "the claim's status is shown"
    );
    assert!(page.contains("connection reset after send"));
    assert!(page.contains("order.forwarded"), "the outbox row is listed");
    assert!(
        page.contains(&format!("/dead-letters/{letter}")),
        "the dead letter is linked"
    );
}

/// Pages are islands: what the server rendered is the page, and no script
/// on it carries a second, serialized copy of the data for hydration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_page_sends_its_data_once_with_no_copy_for_the_browser_to_hydrate() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "refund:EU/2026/Ø-1842";
    let error = "provider said 409 at the second attempt";
    claim(
        &app.store,
        "order-events",
        key,
        Some(Outcome::Unknown { error }),
    )
    .await;

    let (status, html) = app.get(&key_href("order-events", key)).await;
    assert_eq!(status, 200);
    assert!(text(&html).contains(error), "the page shows the error");
    let scripts: Vec<&str> = html
        .split("<script")
        .skip(1)
        .filter_map(|s| s.split_once("</script>").map(|(script, _)| script))
        .collect();
    assert!(!scripts.is_empty(), "the page loads its islands");
    for script in scripts {
        assert!(
            !script.contains(error) && !script.contains("order-events"),
            "a script carries the page's data: {script:.300}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_with_url_metacharacters_and_any_unicode_round_trip_through_their_page() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let keys = [
        "renewal:account-1842:2026-09-30",
        "a%2Fb",
        "x%20y",
        "50% off #7?a=b&c=d",
        "plus+and space",
        "quote\"s and 'apostrophes'",
        "💸 pay_7f3",
        "حساب-1842",
        "\u{202E}gnp.exe",
        "cafe\u{301}",
        "<script>alert(1)</script>",
    ];
    for key in keys {
        claim(&app.store, "orders", key, None).await;
    }
    for key in keys {
        let (status, html) = app.get(&key_href("orders", key)).await;
        assert_eq!(status, 200, "{key:?}");
        assert!(
            text(&html).contains(&format!("<bdi>{key}</bdi>"))
                || html.contains(&format!(
                    "<bdi>{}</bdi>",
                    key.replace('&', "&amp;")
                        .replace('<', "&lt;")
                        .replace('>', "&gt;")
                )),
            "{key:?} is shown exactly"
        );
        assert!(
            !html.contains("<script>alert(1)"),
            "markup in a key is escaped"
        );
    }
    // The NFC spelling is a different key: not found.
    let (status, _) = app.get(&key_href("orders", "caf\u{e9}")).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_a_404_page_that_says_so() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let (status, html) = app.get("/keys/reminders/renewal:nobody").await;
    assert_eq!(status, 404);
    assert!(text(&html).contains("No consumer named “reminders” has a claim, outbox row or dead letter for the key “renewal:nobody”."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_are_a_400_page_never_a_500() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let long = "k".repeat(513);
    for (path, says) in [
        (
            "/keys/orders/%FF%FE".to_owned(),
            "not valid percent-encoded UTF-8",
        ),
        (
            "/keys/orders/a%00b".to_owned(),
            "control character (U+0000)",
        ),
        (
            "/keys/orders/a%0Ab".to_owned(),
            "control character (U+000A)",
        ),
        (
            format!("/keys/orders/{long}"),
            "513 bytes long; the limit is 512 bytes",
        ),
        ("/keys/%FF/key".to_owned(), "consumer name is not valid"),
    ] {
        let (status, html) = app.get(&path).await;
        assert_eq!(status, 400, "{path}");
        assert!(text(&html).contains(says), "{path} says {says:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_only_link_finds_the_one_consumer_or_offers_a_choice() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    claim(&app.store, "payment-webhooks", "pay_7f3", None).await;
    claim(&app.store, "orders", "shared/key", None).await;
    claim(&app.store, "billing", "shared/key", None).await;

    let (status, html) = app.get("/keys/pay_7f3").await;
    assert_eq!(status, 200);
    assert!(text(&html).contains("payment-webhooks"));

    let (status, html) = app.get("/keys/shared%2Fkey").await;
    assert_eq!(status, 200);
    assert!(text(&html).contains("Several consumers have claimed this key"));
    assert!(
        html.contains(&key_href("orders", "shared/key"))
            && html.contains(&key_href("billing", "shared/key"))
    );

    let (status, html) = app.get("/keys/nobody").await;
    assert_eq!(status, 404);
    assert!(text(&html).contains("No consumer has claimed the key “nobody”."));
}

async fn deliver_at(store: &Store, consumer: &str, key: &str, at: Ts, payload_hash: &str) {
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: Some(payload_hash),
        at,
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_page_tells_the_story_in_time_order_with_its_flags_and_what_would_apply() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let (consumer, key) = ("reminders", "renewal:account-1842:2026-09-30");
    let first = Ts(Utc::now() - TimeDelta::hours(1));
    deliver_at(&app.store, consumer, key, first, "aaaa").await;
    let mut tx = app.store.begin().await.unwrap();
    tx.lease(consumer, key, first, first).await.unwrap();
    tx.record(
        consumer,
        key,
        Outcome::Sent { provider_ref: None },
        Ts(first.0 + TimeDelta::seconds(2)),
    )
    .await
    .unwrap();
    let letter = tx
        .dead_letter(&NewDeadLetter {
            consumer,
            queue: "reminders.fifo",
            key,
            message_id: "m-9",
            payload: "{}",
            delivery_count: 3,
            first_failure_at: first,
            last_error: Some("429 Too Many Requests"),
            at: Ts(first.0 + TimeDelta::minutes(3)),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    deliver_at(
        &app.store,
        consumer,
        key,
        Ts(first.0 + TimeDelta::minutes(6)),
        "bbbb",
    )
    .await;

    let (status, html) = app.get(&key_href(consumer, key)).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    let order = [
        "First delivered; the consumer claimed the key.",
        "Sent after 1 attempt; no provider reference recorded.",
        &format!("Dead-lettered after 3 deliveries (letter #{letter}): 429 Too Many Requests."),
        "Duplicate delivery 6 min after the first — outside a 5-minute FIFO window: only the claim caught it.",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|t| page.find(t).unwrap_or_else(|| panic!("{t:?} in {page}")))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "the timeline is in time order"
    );
    for flag in [
        "Payload drift",
        "Sent without a provider reference",
        "Dead letter for a key already sent",
    ] {
        assert!(page.contains(flag), "{flag}");
    }
    assert!(page.contains(&format!(
        "Discard dead letter #{letter}: the effect already happened."
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_provider_reference_on_two_keys_is_flagged_on_both_pages() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    for key in ["renewal:a", "renewal:b"] {
        claim(
            &app.store,
            "reminders",
            key,
            Some(Outcome::Sent {
                provider_ref: Some("msg_same"),
            }),
        )
        .await;
    }
    let (_, html) = app.get(&key_href("reminders", "renewal:a")).await;
    let page = visible(&html);
    assert!(page.contains("Provider reference shared with another key"));
    assert!(
        html.contains(&key_href("reminders", "renewal:b")),
        "links the other key"
    );
}

/// Keys drawn from every kind of character a key may hold: URL and HTML
/// metacharacters, spaces, emoji, combining marks, right-to-left text.
fn generated_keys(count: usize) -> Vec<String> {
    let strategy = proptest::collection::vec(
        proptest::prop_oneof![
            proptest::string::string_regex("[a-z0-9:._-]{1,8}").unwrap(),
            proptest::string::string_regex("[/%#?+& '\"<>=;@\\\\]{1,3}").unwrap(),
            proptest::string::string_regex("[\u{e9}\u{301}\u{d8}\u{5d0}-\u{5ea}\u{627}-\u{64a}\u{202e}\u{200f}\u{1f4b8}\u{1f600}-\u{1f64f}\u{4e00}-\u{4e10}]{1,3}").unwrap(),
            proptest::string::string_regex("[^\\p{Cc}]{1,4}").unwrap(),
        ],
        1..6,
    )
    .prop_map(|parts| parts.concat())
    .prop_filter("a key is at most 512 bytes and not a dot segment", |k| k.len() <= 512 && k != "." && k != "..");
    let mut runner = TestRunner::deterministic();
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_generated_key_round_trips_byte_exactly_through_its_page_and_a_key_only_link() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let keys = generated_keys(150);
    for key in &keys {
        claim(&app.store, "orders", key, None).await;
    }
    for key in &keys {
        let (status, html) = app.get(&key_href("orders", key)).await;
        assert_eq!(status, 200, "{key:?}");
        let shown = text(&html);
        assert!(
            shown.contains(&format!("<bdi>{key}</bdi>")),
            "{key:?} is shown byte for byte"
        );
        let (status, _) = app.get(&idem_app::links::key_only_href(key)).await;
        assert_eq!(status, 200, "{key:?} by key alone");
    }
}
