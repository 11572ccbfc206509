//! Rights limited to teams, over real HTTP on both backends: a person who
//! operates the payments team reads and acts on payments' consumers only.
//! Every server function and every page is asked; none hands them another
//! team's key, count or chart point, and what names another team's
//! consumer is a 403 that names its team, counted for the audit log.

use chrono::TimeDelta;
use idem_domain::{AccountOrigin, Metric, Rights};
use idem_store::{MetricSample, NewDeadLetter, Outcome, Store, Ts, testing::TestDatabase};

use crate::common::{self, Fixture, TestApp, spawn_with};

mod actions;
mod reads;

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
pub(super) const OURS: &str = "pay:EU/2026 💶 #1";
/// Payments' key whose claim failed and was dead-lettered.
pub(super) const OURS_FAILED: &str = "pay:EU/2026 💶 #2 עברית";

/// What growth's consumer counted, in figures no payments figure comes near.
pub(super) const GROWTH_DELIVERIES: f64 = 7777.0;
pub(super) const GROWTH_SENDS: f64 = 5555.0;

/// Idem with the catalogue above, growth's fixture (`orders`: an unknown
/// outcome, dead letters, a redrive), payments' own unknown outcome and dead
/// letter, metrics of both, and `pam` (operator of payments only) and
/// `olga` (operator everywhere).
pub(crate) async fn app_of_two_teams(
    db: TestDatabase,
) -> (TestApp, Fixture, i64, tempfile::TempDir) {
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
        .metrics()
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
    let unknown = Outcome::Unknown { error: "timeout" };
    crate::http::claim(store, "ledger", OURS, Some(unknown)).await;
    payments_letter(store, OURS_FAILED).await
}

/// An open dead letter of payments for `key`, whose claim failed; its id.
pub(super) async fn payments_letter(store: &Store, key: &str) -> i64 {
    let failed = Outcome::Permanent { error: "502" };
    crate::http::claim(store, "ledger", key, Some(failed)).await;
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    let message_id = format!("m-{key}");
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: "ledger",
            queue: "ledger.fifo",
            key,
            message_id: &message_id,
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
pub(super) async fn with_rights(store: &Store, name: &str, rights: &str) {
    let hash = idem::auth::Passwords::new(1)
        .hash(format!("{name}-password"))
        .await
        .unwrap();
    let rights: Rights = rights.parse().unwrap();
    store
        .people()
        .create_account_with(
            &idem_store::testing::account(name),
            &rights,
            Some(&hash),
            AccountOrigin::Password,
        )
        .await
        .unwrap()
        .expect("a new account");
}

/// What in an answer would be growth's: its keys, its figures.
pub(super) fn growth_in(body: &str) -> Vec<&'static str> {
    // 7789: growth's deliveries with payments' 12, a sum over both teams;
    // 5566: growth's sends with payments' 11. Each figure as text or JSON
    // shows it ("7789 deliveries", `"sent":5566`), never bare: bare digits
    // turn up in a timestamp's microseconds.
    [
        "key-1",
        "sent-1",
        "7777 ",
        "7,777",
        "7789 ",
        "7,789",
        ":5555",
        ":5566",
        "5,555",
        "5,566",
        "\"orders\"",
        "growth-orders-delivered",
    ]
    .into_iter()
    .filter(|needle| body.contains(needle))
    .collect()
}

/// A form's fields as the browser sends them, with `changes` typed in.
pub(super) fn filled<'a>(
    form: &'a common::Form,
    changes: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .filter(|(n, _)| !changes.iter().any(|(c, _)| c == n))
        .collect();
    fields.extend_from_slice(changes);
    fields
}

/// Growth's dead letter `id` is still open: nothing pam did reached it.
pub(super) async fn still_open(store: &Store, id: i64) {
    let letter = store.letter(id).await;
    assert_eq!(letter.state, idem_domain::DeadLetterState::Open);
}
