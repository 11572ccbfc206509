//! Rights limited to teams, over real HTTP on both backends: a person who
//! operates the payments team reads and acts on payments' consumers only.
//! Every server function and every page is asked; none hands them another
//! team's key, count or chart point, and what names another team's
//! consumer is a 403 that names its team, counted for the audit log.

use chrono::TimeDelta;
use idem_domain::{AccountOrigin, Metric, Rights};
use idem_store::{
    Delivery, MetricSample, NewDeadLetter, Outcome, Store, Ts, testing::TestDatabase,
};

use crate::common::{self, Fixture, TestApp, spawn_with, text, visible};

const CATALOGUE: &str = r#"
[[consumer]]
name = "orders"
team = "growth"
description = "Sends order emails."
provider_contract = "keeps-reference"

[[consumer]]
name = "ledger"
team = "payments"
description = "Applies payments to the ledger."
provider_contract = "honours-key"
"#;

/// The built-in objectives over the fleet, and one objective of each team.
const SLOS: &str = r#"
[builtins]
per_consumer = false

[[slo]]
name = "growth-orders-delivered"
description = "Growth's deliveries that are not dead-lettered."
team = "growth"
objective = 0.99
min_events = 1
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }

[[slo]]
name = "payments-ledger-delivered"
description = "Payments' deliveries that are not dead-lettered."
team = "payments"
objective = 0.99
min_events = 1
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }
"#;

/// The payments team's own key: `:`, `/`, a space, an emoji, `#`.
const OURS: &str = "pay:EU/2026 💶 #1";
/// Payments' key whose claim failed and was dead-lettered.
const OURS_FAILED: &str = "pay:EU/2026 💶 #2 עברית";

/// What growth's consumer counted, in figures no payments figure comes near.
const GROWTH_DELIVERIES: f64 = 7777.0;
const GROWTH_SENDS: f64 = 5555.0;

/// Idem with the catalogue above, growth's fixture (`orders`: an unknown
/// outcome, dead letters, a redrive), payments' own unknown outcome and dead
/// letter, metrics of both, and `pam` (operator of payments only) and
/// `olga` (operator everywhere).
async fn app_of_two_teams(db: TestDatabase) -> (TestApp, Fixture, i64, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("consumers.toml");
    std::fs::write(&path, CATALOGUE).unwrap();
    let slos = dir.path().join("slo.toml");
    std::fs::write(&slos, SLOS).unwrap();
    let app = spawn_with(
        |config| {
            config.consumers_file = Some(path);
            config.slo_file = Some(slos);
        },
        db,
    )
    .await;
    let fixture = Fixture::write(&app.store).await;
    let mut tx = app.store.begin().await.unwrap();
    tx.enqueue(&idem_store::NewOutboxRow {
        consumer: "orders",
        topic: "order.confirmed",
        key: &fixture.key,
        payload: "{}",
        origin: idem_domain::OutboxOrigin::Application,
        dead_letter_id: None,
        audit_id: None,
        at: Ts::now(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let ours = payments_rows(&app.store).await;
    let now = Ts::now();
    let sample = |consumer: &str, metric, minutes, value| MetricSample {
        consumer: consumer.into(),
        metric,
        at: now - TimeDelta::minutes(minutes),
        bucket: String::new(),
        value,
    };
    app.store
        .record_metrics(&[
            sample("orders", Metric::Deliveries, 3, GROWTH_DELIVERIES),
            sample("orders", Metric::Deliveries, 150, GROWTH_DELIVERIES),
            sample("orders", Metric::Sends, 3, GROWTH_SENDS),
            sample("ledger", Metric::Deliveries, 3, 12.0),
            sample("ledger", Metric::Deliveries, 150, 12.0),
            sample("ledger", Metric::Sends, 3, 11.0),
        ])
        .await
        .unwrap();
    with_rights(&app.store, "pam", "operator@payments").await;
    with_rights(&app.store, "olga", "operator").await;
    (app, fixture, ours, dir)
}

/// Payments' keys: an unknown outcome (`OURS`), and a claim that failed
/// with an open dead letter (safe to replay); the dead letter's id.
async fn payments_rows(store: &Store) -> i64 {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    for (key, outcome) in [
        (OURS, Outcome::Unknown { error: "timeout" }),
        (
            OURS_FAILED,
            Outcome::Permanent {
                error: "502 from the bank",
            },
        ),
    ] {
        tx.claim(&Delivery {
            consumer: "ledger",
            key,
            payload_hash: None,
            at: now,
        })
        .await
        .unwrap();
        tx.lease("ledger", key, now, now).await.unwrap();
        tx.record("ledger", key, outcome, now).await.unwrap();
    }
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: "ledger",
            queue: "ledger.fifo",
            key: OURS_FAILED,
            message_id: "m-ledger-1",
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some("502 from the bank"),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// A password account `name` (password `{name}-password`) with `rights`.
async fn with_rights(store: &Store, name: &str, rights: &str) {
    let hash = idem::auth::Passwords::new(1)
        .hash(format!("{name}-password"))
        .await
        .unwrap();
    let rights: Rights = rights.parse().unwrap();
    store
        .create_account_with(name, &rights, Some(&hash), AccountOrigin::Password)
        .await
        .unwrap()
        .expect("a new account");
}

/// What in an answer would be growth's: its keys, its figures.
fn growth_in(body: &str) -> Vec<&'static str> {
    // 7789: growth's deliveries with payments' 12, a sum over both teams.
    [
        "key-1",
        "sent-1",
        "7777",
        "7,777",
        "7789",
        "7,789",
        "5555",
        "5,555",
        "\"orders\"",
        "growth-orders-delivered",
    ]
    .into_iter()
    .filter(|needle| body.contains(needle))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_of_payments_never_receives_growth_s_keys_counts_or_chart_points() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, _, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;
        let olga = app.sign_in("olga").await;

        // Every server function, with arguments that name growth's
        // consumer, key, dead letter and redrive where it takes them.
        for (name, fields) in fixture.valid_calls("pam") {
            let response = common::call(&app, &pam, name, &fields).await;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            // A lookup says which key it did not find: the one pam typed.
            if name != "lookup_key" {
                assert_eq!(growth_in(&body), Vec::<&str>::new(), "{name}: {body:.400}");
            }
            let names_growth = fields.iter().any(|(_, v)| v == "orders")
                || matches!(
                    name,
                    "get_dead_letter"
                        | "replay_dead_letter"
                        | "discard_dead_letter"
                        | "get_redrive"
                        | "stop_redrive"
                );
            // Fleet-wide objectives count growth's consumers too.
            let fleet_slo = matches!(name, "get_slo" | "get_slo_charts");
            if names_growth || fleet_slo {
                assert_eq!(status, 403, "{name}: {body:.400}");
                let whose = if fleet_slo {
                    "counts the consumers of teams your rights do not cover"
                } else {
                    "belongs to the team “growth”"
                };
                assert!(
                    body.contains(whose),
                    "the refusal says whose it is: {name}: {body:.400}"
                );
            } else if name == "lookup_key" {
                assert_eq!(status, 404, "{name}: {body:.400}");
                assert!(body.contains("No consumer of your teams"), "{body}");
            } else {
                assert_eq!(status, 200, "{name}: {body:.400}");
            }
        }

        // The same reads without a consumer named: only payments' rows.
        let read =
            |client: &reqwest::Client, name: &'static str, fields: Vec<(&'static str, String)>| {
                let app = &app;
                let client = client.clone();
                async move {
                    let response = common::call(app, &client, name, &fields).await;
                    assert_eq!(response.status().as_u16(), 200, "{name}");
                    response.text().await.unwrap()
                }
            };
        let search = |q: &str| {
            vec![
                ("query[q]", q.to_owned()),
                ("query[consumer]", String::new()),
                ("query[status]", String::new()),
                ("query[cursor]", String::new()),
                ("query[limit]", "50".to_owned()),
            ]
        };
        let audit = vec![
            ("query[actor]", String::new()),
            ("query[action]", String::new()),
            ("query[key]", String::new()),
            ("query[from]", String::new()),
            ("query[to]", String::new()),
            ("query[recoveries]", String::new()),
            ("query[cursor]", String::new()),
        ];
        let reads: Vec<(&'static str, Vec<(&'static str, String)>)> = vec![
            ("get_overview", vec![]),
            ("list_unknown", vec![]),
            ("list_dead_letters", vec![("state", "open".into())]),
            ("list_outbox", vec![]),
            ("search_keys", search("key")),
            ("search_keys", search("sent-1")),
            (
                "get_checks",
                vec![("check", "dead-letter-already-sent".into())],
            ),
            ("get_consumers", vec![]),
            ("list_audit", audit),
            ("get_charts", vec![("range", "24h".into())]),
            ("get_slos", vec![]),
        ];
        for (name, fields) in reads {
            let mine = read(&pam, name, fields.clone()).await;
            assert_eq!(growth_in(&mine), Vec::<&str>::new(), "{name}: {mine:.600}");
            // Olga, whose rights are not limited, sees growth's rows: the
            // assertion above could fail.
            let everyone = read(&olga, name, fields).await;
            assert!(
                !growth_in(&everyone).is_empty(),
                "{name} as olga shows growth's rows: {everyone:.600}"
            );
        }
        let board = read(&pam, "get_slos", vec![]).await;
        assert!(board.contains("payments-ledger-delivered"), "{board:.600}");
        let unknown = read(&pam, "list_unknown", vec![]).await;
        assert!(
            unknown.contains("\"ledger\""),
            "payments' own list: {unknown:.400}"
        );
        let overview = read(&pam, "get_overview", vec![]).await;
        let overview: serde_json::Value = serde_json::from_str(&overview).unwrap();
        assert_eq!(overview["unknown_count"]["value"], 1, "{overview}");
        assert_eq!(overview["last_hour"]["sent"], 11, "{overview}");
        let charts = read(&pam, "get_charts", vec![("range", "24h".into())]).await;
        assert!(
            charts.contains("one consumer at a time: ledger"),
            "{charts:.600}"
        );

        // Nothing of growth's was changed by the refused actions.
        let orders = idem_store::testing::consumer("orders");
        let claim = app
            .store
            .claim(&orders, &idem_store::testing::key(&fixture.key))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claim.status, idem_domain::ClaimStatus::Unknown);
        let letter = app
            .store
            .dead_letter(fixture.dead_letter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(letter.state, idem_domain::DeadLetterState::Open);

        // The refusals are audited: one row per reason once its window ends.
        app.store
            .close_refusal_windows(Ts::now() + idem_store::REFUSAL_WINDOW * 2)
            .await
            .unwrap();
        let log = app
            .store
            .audit_log(
                &idem_store::AuditFilter {
                    actor: Some("pam".into()),
                    ..Default::default()
                },
                &idem_store::PageRequest::first(50),
            )
            .await
            .unwrap();
        assert!(
            log.items.iter().any(|e| e.action.contains("refused")
                && e.state_after
                    .as_deref()
                    .unwrap_or_default()
                    .contains("team growth")
                || format!("{e:?}").contains("operator on team growth")),
            "{:#?}",
            log.items
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_of_payments_replays_payments_dead_letter_and_is_refused_growth_s_page() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, ours, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;

        // Growth's dead letter: a page that says whose it is, and no key.
        let (status, html) = common::get(
            &pam,
            &app.url(&format!("/dead-letters/{}", fixture.dead_letter)),
        )
        .await;
        assert_eq!(status, 403);
        let page = text(&visible(&html));
        assert!(
            page.contains("“orders” belongs to the team “growth”"),
            "{page}"
        );
        assert_eq!(growth_in(&html), Vec::<&str>::new());

        // Payments' own: the replay form is there and works, once.
        let (status, html) = common::get(&pam, &app.url(&format!("/dead-letters/{ours}"))).await;
        assert_eq!(status, 200, "{html:.400}");
        assert!(text(&visible(&html)).contains(OURS_FAILED));
        let replay = common::forms(&html)
            .into_iter()
            .find(|f| f.action.contains("replay_dead_letter"))
            .expect("a replay form for payments' own dead letter");
        let page = format!("/dead-letters/{ours}");
        let reason = ("reason", "the bank confirmed nothing happened");
        let fields = filled(&replay, &[reason]);
        let response = common::post_as_browser(&app, &pam, &page, &replay.action, &fields).await;
        assert_eq!(response.status().as_u16(), 303);
        let letter = app.store.dead_letter(ours).await.unwrap().unwrap();
        assert_eq!(letter.state, idem_domain::DeadLetterState::Replayed);

        // The same form aimed at growth's dead letter is refused, and says whose it is.
        let growth_id = fixture.dead_letter.to_string();
        let aimed = filled(
            &replay,
            &[
                reason,
                ("id", &growth_id),
                ("action_id", "pam-aimed-elsewhere-1"),
            ],
        );
        let response = common::post_as_browser(&app, &pam, &page, &replay.action, &aimed).await;
        let shown = match response.status().as_u16() {
            303 => {
                let (_, html) = common::get(&pam, &app.url(&common::location(&response))).await;
                common::answer_shown(&html).unwrap_or_default()
            }
            status => format!("{status}: {}", response.text().await.unwrap()),
        };
        assert!(shown.contains("belongs to the team “growth”"), "{shown}");
        let letter = app
            .store
            .dead_letter(fixture.dead_letter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(letter.state, idem_domain::DeadLetterState::Open);

        // The header says what pam may do.
        let (_, html) = common::get(&pam, &app.url("/")).await;
        let page = text(&visible(&html));
        let at = page.find("Signed in as").unwrap_or(0);
        assert!(
            page[at..].starts_with("Signed in as pam ( operator of payments )"),
            "{}",
            &page[at..]
        );
    }
}

/// A form's fields as the browser sends them, with `changes` typed in.
fn filled<'a>(form: &'a common::Form, changes: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .filter(|(n, _)| !changes.iter().any(|(c, _)| c == n))
        .collect();
    fields.extend_from_slice(changes);
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_a_person_limited_to_payments_only_payments() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, ours, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;
        let our_key = idem_app::links::key_href("ledger", OURS);
        for path in [
            "/",
            "/keys?q=key",
            "/unknown",
            "/dead-letters",
            "/outbox",
            "/consumers",
            "/slo",
            "/audit",
            "/checks",
            "/checks/dead-letter-already-sent",
            &format!("/dead-letters/{ours}"),
            &our_key,
        ] {
            let (status, html) = common::get(&pam, &app.url(path)).await;
            assert_eq!(status, 200, "{path}");
            assert_eq!(growth_in(&html), Vec::<&str>::new(), "{path}");
        }
        let (_, unknown) = common::get(&pam, &app.url("/unknown")).await;
        assert!(text(&visible(&unknown)).contains(OURS), "payments' own key");

        for path in [
            idem_app::links::key_href("orders", &fixture.key),
            "/consumers/orders".to_owned(),
            format!("/dead-letters/{}", fixture.dead_letter),
            format!("/redrives/{}", fixture.redrive),
            "/slo/duplicate-claim-rate".to_owned(),
        ] {
            let (status, html) = common::get(&pam, &app.url(&path)).await;
            assert_eq!(status, 403, "{path}");
            // The address pam typed may be repeated (the key page's
            // heading); nothing that was read is.
            let read = html.replace(&fixture.key, "");
            assert_eq!(growth_in(&read), Vec::<&str>::new(), "{path}");
            assert!(!html.contains("503 from the provider"), "{path}");
        }
    }
}
