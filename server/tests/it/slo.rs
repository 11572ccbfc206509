//! SLO pages over real HTTP, and the SLO file at start-up.

use crate::common;
use crate::common::{spawn_app, visible};
use chrono::TimeDelta;
use idem::{Application, Config};
use idem_domain::Metric;
use idem_store::{MetricSample, Store, Ts, testing::TestDatabase};

/// The last two hours of one consumer: 100 deliveries a minute, of which
/// `dead_letters_per_minute` end dead-lettered; queue age always 5 s.
async fn two_hours(store: &Store, dead_letters_per_minute: f64) {
    let now = Ts::now();
    let mut samples = Vec::new();
    for minute in 1..=120 {
        let at = now - TimeDelta::minutes(minute);
        let sample = |metric: Metric, value: f64| MetricSample {
            consumer: "payments".into(),
            metric,
            at,
            bucket: String::new(),
            value,
        };
        samples.push(sample(Metric::Deliveries, 100.0));
        samples.push(sample(Metric::DeadLetters, dead_letters_per_minute));
        samples.push(sample(Metric::QueueOldestAgeSeconds, 5.0));
    }
    store.record_metrics(&samples).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slo_page_lists_every_objective_with_a_paging_breach_first() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    // 5% dead letters against a 99.9% objective: a 50× burn, over every tier.
    two_hours(&app.store, 5.0).await;

    let (status, html) = app.get("/slo").await;
    assert_eq!(status, 200, "{html}");
    let page = visible(&html);
    assert!(page.contains("Objectives from built-in defaults"), "{page}");
    for name in [
        "unknown-resolved-15m",
        "not-dead-lettered",
        "transactions-committed",
        "duplicate-claim-rate",
        "queue-age-60s",
        "outbox-age-30s",
        "reconciled-15m",
        "recovery-60m",
    ] {
        assert!(page.contains(name), "{name} is listed");
    }
    // Worst first: the breached SLO leads the table, paging, budget overspent.
    let body = page.split("Valid events").nth(1).unwrap();
    assert!(
        body.trim_start()
            .starts_with("not-dead-lettered page 99.900% 95.00% -4900.0%"),
        "{body}"
    );
    assert!(body.contains("50.00×"), "the burn rate is shown: {body}");
    // Queue age was fine in every minute.
    assert!(body.contains("queue-age-60s ok 99.500% 100.000%"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slo_page_shows_its_tiers_and_an_unknown_name_is_a_404() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    two_hours(&app.store, 0.0).await;

    let (status, html) = app.get("/slo/not-dead-lettered").await;
    assert_eq!(status, 200, "{html}");
    let page = visible(&html);
    assert!(
        page.contains("deliveries without dead_letters, out of all deliveries"),
        "{page}"
    );
    assert!(page.contains("99.900% over 28d"), "{page}");
    assert!(page.contains("12000 of 12000 good"), "{page}");
    // The SLI over the window, drawn on the server: two hours of data in
    // six-hour buckets, the rest left blank.
    assert!(
        html.contains("<title>not-dead-lettered: SLI over 28d</title>"),
        "{html}"
    );
    assert!(
        page.contains("0 of 1 intervals with 100 events or more were below the objective")
            || page.contains("0 of 2 intervals with 100 events or more were below the objective"),
        "{page}"
    );
    assert!(page.contains("intervals had no valid events and are left blank"));
    // The budget as the window filled, and each tier's burn rate with its threshold.
    assert!(html.contains("<title>not-dead-lettered: error budget remaining over 28d</title>"));
    assert!(
        page.contains("100.0% of the error budget remains. It stayed above zero"),
        "{page}"
    );
    for tier in [
        "over 1h (page at 13.44×)",
        "over 6h (page at 5.60×)",
        "over 1d (ticket at 2.80×)",
        "over 3d (ticket at 0.93×)",
    ] {
        assert!(
            html.contains(&format!(
                "<title>not-dead-lettered: burn rate {tier}</title>"
            )),
            "{tier}"
        );
    }
    assert_eq!(
        html.matches("class=\"chart-svg\"").count(),
        6,
        "six charts drawn"
    );
    assert_eq!(
        html.matches("class=\"budget\"").count(),
        1,
        "and the budget's bar"
    );
    // The tiers scaled for 28 days.
    for threshold in ["13.44×", "5.60×", "2.80×", "0.93×"] {
        assert!(page.contains(threshold), "{threshold} in {page}");
    }

    let (status, html) = app.get("/slo/no-such-slo").await;
    assert_eq!(status, 404);
    assert!(visible(&html).contains("There is no SLO named “no-such-slo”"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_a_tile_for_each_slo() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    two_hours(&app.store, 5.0).await;
    let (status, html) = app.get("/").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"href="/slo/not-dead-lettered""#), "{html}");
    assert!(visible(&html).contains("95.00% not-dead-lettered page"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_slo_file_replaces_the_defaults_and_a_bad_one_stops_start_up_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slo.toml");
    std::fs::write(
        &path,
        r#"[[slo]]
name = "payments-delivered"
description = "Payments that are not dead-lettered."
objective = 0.99
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }
"#,
    )
    .unwrap();
    let shown = path.display().to_string();
    let app = common::spawn_with(
        |config| config.slo_file = Some(path.clone()),
        TestDatabase::sqlite().await,
    )
    .await;
    let page = visible(&app.get("/slo").await.1);
    assert!(page.contains(&format!("Objectives from {shown}")), "{page}");
    assert!(page.contains("payments-delivered"));
    assert!(!page.contains("queue-age-60s"), "the defaults are replaced");

    let bad = "[[slo]]\nname = \"x\"\ndescription = \"d\"\nobjective = 2\n\
               sli = { kind = \"counters\", valid = \"deliveries\", bad = \"dead_letters\" }\n";
    std::fs::write(&path, bad).unwrap();
    let db = TestDatabase::sqlite().await;
    let mut config = Config::for_tests(&db.url);
    config.slo_file = Some(path);
    let error = Application::build(config)
        .await
        .err()
        .expect("start-up fails");
    let message = error.to_string();
    assert!(message.starts_with(&format!("{shown}:4:")), "{message}");
    assert!(message.contains("strictly between 0 and 1"), "{message}");
}
