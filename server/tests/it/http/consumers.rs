//! `/consumers` and `/consumers/{name}` over HTTP, on both backends: the
//! catalogue beside what each consumer did, worst first, a team's rows
//! only, hostile names shown as text, and the provider contract on the
//! resolution form.

use chrono::TimeDelta;
use idem::{Application, Config};
use idem_app::links::{consumer_href, key_href};
use idem_domain::{Metric, Role};
use idem_store::{MetricSample, Outcome, Ts, testing::TestDatabase};

use super::{
    claim,
    common::{spawn_with, text, visible},
};

/// A consumer name that would be markup, and reads right to left, if it
/// were not escaped.
const HOSTILE: &str = "legacy/<b>🧾 رسيد</b> #1";

const CATALOGUE: &str = r#"
[[consumer]]
name = "payments"
team = "payments"
description = "Applies <em>webhooks</em> to the ledger."
runbook = "https://wiki.example.com/runbooks/payments"
provider_contract = "honours-key"
claim_retention_days = 90

[[consumer]]
name = "reminders"
team = "growth"
description = "Sends renewal reminders."
provider_contract = "keeps-reference"
queue = "reminders.fifo"
"#;

fn catalogue_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("consumers.toml");
    std::fs::write(&path, CATALOGUE).unwrap();
    (dir, path)
}

/// The `<tbody>` rows' first cells, in order, as a person reads them.
fn row_names(html: &str) -> Vec<String> {
    let body = html.split("<tbody>").nth(1).unwrap_or_default();
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            let cell = row.split("</td>").next().unwrap_or_default();
            text(&visible(cell)).trim().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_table_puts_the_catalogue_beside_each_consumer_s_figures_worst_first() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (_dir, path) = catalogue_file();
        let app = spawn_with(|config| config.consumers_file = Some(path.clone()), db).await;
        // payments: two unknown outcomes; reminders: none; the hostile
        // consumer, not in the catalogue: one.
        let unknown = || Some(Outcome::Unknown { error: "timeout" });
        claim(&app.store, "payments", "pay:1", unknown()).await;
        claim(&app.store, "payments", "pay/2", unknown()).await;
        claim(
            &app.store,
            "reminders",
            "rem 1",
            Some(Outcome::Sent { provider_ref: None }),
        )
        .await;
        claim(&app.store, HOSTILE, "x#1", unknown()).await;
        let now = Ts::now();
        let sample = |consumer: &str, metric, value| MetricSample {
            consumer: consumer.into(),
            metric,
            at: now - TimeDelta::minutes(3),
            bucket: String::new(),
            value,
        };
        app.store
            .metrics()
            .record_metrics(&[
                sample("reminders", Metric::Deliveries, 400.0),
                sample("reminders", Metric::DuplicateClaims, 8.0),
                sample("payments", Metric::Deliveries, 50.0),
                sample("payments", Metric::QueueOldestAgeSeconds, 95.0),
            ])
            .await
            .unwrap();

        let (status, html) = app.get("/consumers").await;
        assert_eq!(status, 200, "{html}");
        assert!(
            !html.contains("<b>🧾"),
            "a consumer name is text, not markup"
        );
        assert_eq!(
            row_names(&html),
            [HOSTILE, "payments", "reminders"],
            "by name"
        );
        let page = text(&visible(&html));
        assert!(page.contains("3 consumers"), "{page}");
        assert!(
            page.contains("reminders growth 400 2.00% (8) —"),
            "reminders' hour and rate: {page}"
        );
        assert!(
            page.contains("payments payments 50 0% (0) 1 min 2 0 honours the key"),
            "{page}"
        );
        assert!(page.contains("not in the catalogue"), "{page}");
        assert!(html.contains(&format!("href=\"{}\"", consumer_href(HOSTILE))));

        // The overview names the consumers with open work, the most first.
        let (_, html) = app.get("/").await;
        let overview = text(&visible(&html));
        assert!(
            overview.contains("Consumers with open work: 2 of 3."),
            "{overview}"
        );
        let panel = html
            .split(r#"id="consumers-heading""#)
            .nth(1)
            .unwrap_or_default();
        assert_eq!(row_names(panel), ["payments", HOSTILE]);

        // Worst first by each column a person sorts by.
        let sorted = |sort: &'static str| {
            let app = &app;
            async move { row_names(&app.get(&format!("/consumers?sort={sort}")).await.1) }
        };
        assert_eq!(sorted("unknown").await, ["payments", HOSTILE, "reminders"]);
        assert_eq!(sorted("duplicate-rate").await[0], "reminders");
        assert_eq!(sorted("queue-age").await[0], "payments");
        assert_eq!(
            sorted("team").await,
            ["reminders", "payments", HOSTILE],
            "growth, payments, none"
        );

        // One team's consumers only; the filter remembers the sort.
        let (status, html) = app.get("/consumers?team=growth&sort=unknown").await;
        assert_eq!(status, 200);
        assert_eq!(row_names(&html), ["reminders"]);
        assert!(visible(&html).contains("1 of team growth"));

        // What cannot be a team or a column is a 400 that says why.
        let (status, html) = app.get("/consumers?team=%3Cscript%3E").await;
        assert_eq!(status, 400, "{html}");
        assert!(
            text(&visible(&html)).contains("team `<script>` must be"),
            "{html}"
        );
        assert!(!html.contains("<script>`"), "escaped");
        let (status, html) = app.get("/consumers?sort=everything").await;
        assert_eq!(status, 400);
        assert!(visible(&html).contains("not a column to sort by"), "{html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_s_page_shows_its_entry_or_says_it_is_not_in_the_catalogue() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (_dir, path) = catalogue_file();
        let app = spawn_with(|config| config.consumers_file = Some(path.clone()), db).await;
        claim(
            &app.store,
            "payments",
            "pay:1",
            Some(Outcome::Unknown { error: "timeout" }),
        )
        .await;
        claim(&app.store, HOSTILE, "x#1", None).await;

        let (status, html) = app.get("/consumers/payments").await;
        assert_eq!(status, 200, "{html}");
        let page = text(&visible(&html));
        for expected in [
            "Team payments",
            "Applies <em>webhooks</em> to the ledger.",
            "honours the key",
            "retrying is safe",
            "Claims kept 90 days",
            "1 open unknown outcome",
        ] {
            assert!(page.contains(expected), "{expected:?} in {page}");
        }
        assert!(!html.contains("<em>webhooks"), "a description is text");
        assert!(html.contains(r#"href="https://wiki.example.com/runbooks/payments""#));
        assert!(
            html.contains(r#"href="/unknown?consumer=payments""#),
            "{html}"
        );

        let (status, html) = app.get(&consumer_href(HOSTILE)).await;
        assert_eq!(status, 200, "{html}");
        let page = text(&visible(&html));
        assert!(page.contains(&format!("Consumer {HOSTILE}")), "{page}");
        assert!(page.contains("Not in the catalogue"), "{page}");
        assert!(page.contains("Claims kept 30 days"), "the default: {page}");

        let (status, html) = app.get("/consumers/nobody").await;
        assert_eq!(status, 404, "{html}");
        assert!(visible(&html).contains("No consumer named “nobody”"));
        let (status, _) = app.get("/consumers/%FF%FE").await;
        assert_eq!(status, 400, "not UTF-8");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolution_form_says_what_the_provider_s_contract_means_for_a_retry() {
    let (_dir, path) = catalogue_file();
    let app = spawn_with(
        |config| config.consumers_file = Some(path.clone()),
        TestDatabase::sqlite().await,
    )
    .await;
    app.create_user("ops", Role::Operator).await;
    let operator = app.sign_in("ops").await;
    let unknown = || Some(Outcome::Unknown { error: "timeout" });
    claim(&app.store, "reminders", "rem:1", unknown()).await;
    claim(&app.store, "ledger", "led:1", unknown()).await;

    let (status, html) =
        super::common::get(&operator, &app.url(&key_href("reminders", "rem:1"))).await;
    assert_eq!(status, 200);
    let page = text(&visible(&html));
    assert!(
        page.contains("Provider contract: keeps a durable reference."),
        "{page}"
    );
    assert!(
        page.contains("Retry only if the provider has no record of it"),
        "{page}"
    );

    let (_, html) = super::common::get(&operator, &app.url(&key_href("ledger", "led:1"))).await;
    let page = text(&visible(&html));
    assert!(
        page.contains("Provider contract: not in the catalogue."),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalogue_that_cannot_be_right_stops_start_up_with_its_line() {
    let (_dir, path) = catalogue_file();
    let shown = path.display().to_string();
    std::fs::write(
        &path,
        CATALOGUE.replace("\"keeps-reference\"", "\"sometimes\""),
    )
    .unwrap();
    let db = TestDatabase::sqlite().await;
    let mut config = Config::for_tests(&db.url);
    config.consumers_file = Some(path.clone());
    let message = Application::build(config)
        .await
        .err()
        .expect("start-up fails")
        .to_string();
    assert!(message.starts_with(&format!("{shown}:14:")), "{message}");
    assert!(message.contains("honours-key"), "{message}");

    // A retention given twice has no one answer.
    std::fs::write(&path, CATALOGUE).unwrap();
    let mut config = Config::for_tests(&db.url);
    config.consumers_file = Some(path);
    config.claim_retention = idem_domain::ClaimRetention::parse("30, payments=60").unwrap();
    let message = Application::build(config)
        .await
        .err()
        .expect("start-up fails")
        .to_string();
    assert!(
        message.contains("`payments`'s claim retention is set both"),
        "{message}"
    );
}
