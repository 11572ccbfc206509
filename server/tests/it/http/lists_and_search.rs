//! The overview, the work lists and key search: counts, links, and cursors
//! that cannot be forged.

use idem_app::links::key_href;
use idem_domain::Metric;
use idem_store::{MetricSample, Outcome, Ts, testing::TestDatabase};

use super::{
    claim,
    common::{spawn_app, text, visible},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_counts_unknown_outcomes_and_what_the_last_hour_brought_and_links_each() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    claim(
        &app.store,
        "reminders",
        "renewal:account-7:2026-12-28",
        None,
    )
    .await;
    claim(
        &app.store,
        "reminders",
        "renewal:account-8:2026-12-28",
        Some(Outcome::Permanent {
            error: "400 invalid address",
        }),
    )
    .await;
    claim(
        &app.store,
        "reminders",
        "renewal:account-2210:2026-12-28",
        Some(Outcome::Unknown {
            error: "lease expired",
        }),
    )
    .await;
    claim(
        &app.store,
        "reminders",
        "renewal:account-1:2026-12-28",
        Some(Outcome::Sent {
            provider_ref: Some("msg_1"),
        }),
    )
    .await;
    claim(
        &app.store,
        "reminders",
        "renewal:account-2:2026-12-28",
        Some(Outcome::Sent {
            provider_ref: Some("msg_2"),
        }),
    )
    .await;
    // The consumers' own count of confirmed sends: 1,250 in the last hour
    // (the two sent claims above are not what the tile counts).
    let sends = |minutes_ago: i64, value: f64| MetricSample {
        consumer: "reminders".into(),
        metric: Metric::Sends,
        at: Ts::now() - chrono::TimeDelta::minutes(minutes_ago),
        bucket: String::new(),
        value,
    };
    app.store
        .metrics()
        .record_metrics(&[sends(5, 1000.0), sends(50, 250.0), sends(90, 7.0)])
        .await
        .unwrap();

    let (status, html) = app.get("/").await;
    assert_eq!(status, 200);
    let href = key_href("reminders", "renewal:account-2210:2026-12-28");
    assert!(
        html.contains(&format!("href=\"{href}\"")),
        "the unknown outcome links to its key"
    );
    let page = visible(&html);
    assert!(
        page.contains(
            "Claims 1 unknown waiting for a person 1,250 sent in the last hour \
             1 failed in the last hour 1 pending in the last hour"
        ),
        "{page}"
    );
    assert!(
        html.contains("href=\"/keys?status=failed\""),
        "the failed tile links to the failed keys"
    );
    let (status, key_page) = app.get(&href).await;
    assert_eq!(status, 200);
    assert!(key_page.contains("status-unknown"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_lists_page_with_opaque_cursors_and_refuse_forged_ones() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    for i in 0..3 {
        claim(
            &app.store,
            "reminders",
            &format!("u{i}"),
            Some(Outcome::Unknown { error: "timeout" }),
        )
        .await;
    }
    let (status, html) = app.get("/unknown").await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("3 unknown"));
    let (status, html) = app
        .get("/unknown?cursor=%27%3B%20DROP%20TABLE%20claims%3B%20--")
        .await;
    assert_eq!(status, 400);
    assert!(text(&html).contains("That page link is invalid or out of date"));
    assert_eq!(app.get("/dead-letters?state=bogus").await.0, 400);
    assert_eq!(app.get("/dead-letters/not-a-number").await.0, 400);
    assert_eq!(app.get("/dead-letters/99").await.0, 404);
    assert_eq!(app.get("/outbox").await.0, 200);
    assert_eq!(app.get("/no/such/page").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_search_input_is_a_400_that_says_what_was_wrong() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let long = "k".repeat(513);
    for (path, says) in [
        ("/keys?q=a%00b".to_owned(), "control character"),
        (format!("/keys?q={long}"), "513 bytes long"),
        (
            "/keys?status=done".to_owned(),
            "\"done\" is not a valid claim status",
        ),
        ("/keys?consumer=%0A".to_owned(), "control character"),
        ("/keys?limit=many".to_owned(), "is not a page size"),
        (
            "/keys?cursor=bm90LWEtY3Vyc29y".to_owned(),
            "That page link is invalid or out of date",
        ),
    ] {
        let (status, html) = app.get(&path).await;
        assert_eq!(status, 400, "{path}");
        assert!(visible(&html).contains(says), "{path} says {says:?}");
    }
    assert_eq!(
        app.get("/keys?q=%25_%25").await.0,
        200,
        "LIKE metacharacters are fine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_search_filters_and_pages_with_opaque_cursors() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    for i in 0..7 {
        claim(
            &app.store,
            "reminders",
            &format!("renewal:account-{i}"),
            None,
        )
        .await;
    }
    claim(&app.store, "orders", "renewal:account-x", None).await;
    claim(&app.store, "reminders", "other", None).await;
    let (status, html) = app
        .get("/keys?q=renewal%3A&consumer=reminders&limit=3")
        .await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(page.contains("7 keys start with this text"), "{page}");
    let next = html
        .split("href=\"")
        .find(|h| h.contains("cursor="))
        .map(|h| h.split('"').next().unwrap().replace("&amp;", "&"))
        .expect("a next-page link");
    assert!(
        next.contains("q=renewal%3A")
            && next.contains("consumer=reminders")
            && next.contains("limit=3")
    );
    let (status, second) = app.get(&next).await;
    assert_eq!(status, 200);
    assert!(
        !visible(&second).contains("account-x"),
        "the consumer filter holds on page two"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_offers_a_search_pre_filled_with_it() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let (status, html) = app.get(&key_href("orders", "refund:EU/2026/nope")).await;
    assert_eq!(status, 404);
    assert!(
        html.contains(r#"name="q""#) && text(&html).contains(r#"value="refund:EU/2026/nope""#),
        "{html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_narrows_to_a_consumer_and_a_topic_and_says_how_long_the_oldest_waited() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_app(db).await;
        let mut tx = app.store.begin().await.unwrap();
        for (consumer, topic, key, minutes_ago) in [
            ("orders", "order.shipped", "ship:<b>1</b> 🧾", 7),
            ("orders", "order.refunded", "refund:1", 5),
            ("refunds", "order.refunded", "refund:2", 3),
        ] {
            tx.enqueue(&idem_store::NewOutboxRow {
                consumer,
                topic,
                key,
                payload: "{}",
                origin: idem_domain::OutboxOrigin::Application,
                dead_letter_id: None,
                audit_id: None,
                at: Ts::now() - chrono::TimeDelta::minutes(minutes_ago),
            })
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();

        let (status, html) = app.get("/outbox?consumer=orders").await;
        assert_eq!(status, 200, "{html}");
        let page = visible(&html);
        assert!(page.contains("2 waiting"), "{page}");
        assert!(
            page.contains("publish lag: the oldest has waited 7 min"),
            "{page}"
        );
        assert!(text(&html).contains("ship:<b>1</b> 🧾") && !html.contains("<b>1</b>"));
        assert!(!page.contains("refund:2"), "{page}");

        let (_, html) = app.get("/outbox?topic=order.refunded").await;
        let page = visible(&html);
        assert!(
            page.contains("2 waiting") && page.contains("waited 5 min"),
            "{page}"
        );
        assert!(
            page.contains("refund:1") && page.contains("refund:2"),
            "{page}"
        );

        let (_, html) = app
            .get("/outbox?consumer=refunds&topic=order.shipped")
            .await;
        assert!(visible(&html).contains("0 waiting"), "{}", visible(&html));

        for bad in ["/outbox?topic=a%0Ab", "/outbox?consumer=%00"] {
            let (status, html) = app.get(bad).await;
            assert_eq!(status, 400, "{bad}: {html:.300}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_search_finds_a_key_by_the_provider_reference_or_message_id_support_quotes() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_app(db).await;
        // A reference as hostile as a provider's support may paste it.
        let quoted = "<b>msg_01J8</b> 50%_ #🙂";
        claim(
            &app.store,
            "reminders",
            "renewal:account-1842",
            Some(Outcome::Sent {
                provider_ref: Some(quoted),
            }),
        )
        .await;
        claim(
            &app.store,
            "reminders",
            "renewal:account-1843",
            Some(Outcome::Sent {
                provider_ref: Some("msg_01J8"),
            }),
        )
        .await;
        let letter = super::common::dead_letter(&app.store, "order:77").await;
        let message_id = app.store.letter(letter).await.message_id;

        let q = |text: &str| {
            format!(
                "/keys?{}",
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("q", text)
                    .finish()
            )
        };
        let (status, html) = app.get(&q(quoted)).await;
        assert_eq!(status, 200, "{html}");
        assert!(
            !html.contains("<b>msg_01J8</b>"),
            "the reference is text, not markup"
        );
        let page = visible(&html);
        assert!(
            page.contains("Claims whose provider reference is"),
            "it says what matched: {page}"
        );
        assert!(
            !page.contains("No key matches"),
            "no empty key list under what matched: {page}"
        );
        assert!(html.contains(&key_href("reminders", "renewal:account-1842")));
        assert!(
            !html.contains(&key_href("reminders", "renewal:account-1843")),
            "an exact match, not a part of one"
        );

        let (status, html) = app.get(&q(&message_id)).await;
        assert_eq!(status, 200);
        let page = visible(&html);
        assert!(page.contains("Dead letters whose message id is"), "{page}");
        assert!(html.contains(&format!("/dead-letters/{letter}")), "{page}");
    }
}
