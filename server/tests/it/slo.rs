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
    store.metrics().record_metrics(&samples).await.unwrap();
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
            .starts_with("not-dead-lettered every consumer page 99.900% 95.00% -4900.0%"),
        "{body}"
    );
    assert!(body.contains("50.00×"), "the burn rate is shown: {body}");
    // Queue age was fine in every minute.
    assert!(
        body.contains("queue-age-60s every consumer ok 99.500% 100.000%"),
        "{body}"
    );
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

/// Two teams' consumers in the catalogue, one of them named as nothing in a
/// page may be taken for markup; objectives per consumer and per team.
const TEAMS_CATALOGUE: &str = r#"
[[consumer]]
name = "payments"
team = "payments"
description = "Ledger webhooks."
provider_contract = "honours-key"

[[consumer]]
name = "refunds <b>🧾 رد</b>"
team = "payments"
description = "Refunds."
provider_contract = "keeps-reference"

[[consumer]]
name = "reminders"
team = "growth"
description = "Reminders."
provider_contract = "neither"
"#;

const TEAM_SLOS: &str = r#"
[[slo]]
name = "payments-not-dead-lettered"
description = "Each payments consumer's deliveries not dead-lettered."
team = "payments"
per_consumer = true
objective = 0.99
objectives = { "refunds <b>🧾 رد</b>" = 0.9 }
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }

[[slo]]
name = "growth-delivered"
description = "Growth's deliveries, together."
team = "growth"
objective = 0.999
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }

[[slo]]
name = "fleet-delivered"
description = "Every consumer's deliveries."
objective = 0.999
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }
"#;

/// The last hour: `payments` 100 deliveries a minute, 20 dead-lettered
/// (a 20% error ratio, 20× its 1% budget: it pages); the refunds consumer
/// 10, half a one dead-lettered (5%: half its own 10% budget); reminders
/// 100, none.
async fn an_hour_of_three_consumers(store: &Store) {
    let now = Ts::now();
    let mut samples = Vec::new();
    for minute in 1..=60 {
        let at = now - TimeDelta::minutes(minute);
        for (consumer, deliveries, dead) in [
            ("payments", 100.0, 20.0),
            ("refunds <b>🧾 رد</b>", 10.0, 0.5),
            ("reminders", 100.0, 0.0),
        ] {
            let sample = |metric, value| MetricSample {
                consumer: consumer.into(),
                metric,
                at,
                bucket: String::new(),
                value,
            };
            samples.push(sample(Metric::Deliveries, deliveries));
            samples.push(sample(Metric::DeadLetters, dead));
        }
    }
    store.metrics().record_metrics(&samples).await.unwrap();
}

fn team_files() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (slos, consumers) = (
        dir.path().join("slo.toml"),
        dir.path().join("consumers.toml"),
    );
    std::fs::write(&slos, TEAM_SLOS).unwrap();
    std::fs::write(&consumers, TEAMS_CATALOGUE).unwrap();
    (dir, slos, consumers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_consumer_and_each_team_has_its_own_objective_grouped_by_team_worst_first() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (_dir, slos, consumers) = team_files();
        let app = common::spawn_with(
            |config| {
                config.slo_file = Some(slos.clone());
                config.consumers_file = Some(consumers.clone());
            },
            db,
        )
        .await;
        an_hour_of_three_consumers(&app.store).await;

        let (status, html) = app.get("/slo").await;
        assert_eq!(status, 200, "{html}");
        assert!(!html.contains("<b>🧾"), "a consumer's name is text");
        let page = common::text(&visible(&html));
        // The fleet's objectives first, then each team's.
        let fleet = page.find("Every consumer").unwrap();
        let payments = page.find("Team payments").unwrap();
        let growth = page.find("Team growth").unwrap();
        assert!(fleet < payments && payments < growth, "{page}");
        // Each payments consumer its own SLI and objective: payments burns
        // 20×; refunds spends half its own, looser budget, so every team at
        // once lists it only as met.
        let team = &page[payments..growth];
        assert!(
            team.contains("payments-not-dead-lettered payments page 99.000% 80.00%"),
            "{team}"
        );
        assert!(!team.contains("refunds"), "{team}");
        assert!(
            team.contains("1 more consumer objective is met and not listed here: see every objective of team payments"),
            "{team}"
        );
        assert!(
            page[growth..].contains("growth-delivered team growth ok 99.900% 100.000%"),
            "{page}"
        );
        // The team's own page lists every one of its consumers, worst first.
        let (_, html) = app.get("/slo?team=payments").await;
        let team = common::text(&visible(&html));
        assert!(
            team.contains("payments-not-dead-lettered refunds <b>🧾 رد</b> ok 90.00% 95.00%"),
            "{team}"
        );
        assert!(team.find("payments page").unwrap() < team.find("refunds").unwrap());

        // A team's page holds its objectives only.
        let (status, html) = app.get("/slo?team=growth").await;
        assert_eq!(status, 200);
        let page = common::text(&visible(&html));
        assert!(page.contains("1 objective of team growth"), "{page}");
        assert!(!page.contains("payments-not-dead-lettered"), "{page}");
        let (status, html) = app.get("/slo?team=billing").await;
        assert_eq!(status, 404);
        assert!(
            visible(&html).contains("the teams are: growth, payments"),
            "{html}"
        );

        // One consumer's objective has its own page, charts and alert tiers.
        let href =
            idem_app::links::slo_href("payments-not-dead-lettered", Some("refunds <b>🧾 رد</b>"));
        assert!(html_links_to(&app.get("/slo?team=payments").await.1, &href));
        let (status, html) = app.get(&href).await;
        assert_eq!(status, 200, "{html}");
        let page = common::text(&visible(&html));
        assert!(
            page.contains("90.00% over 28d"),
            "its own objective: {page}"
        );
        assert!(page.contains("570 of 600 good"), "{page}");
        assert!(page.contains("(team payments)"), "{page}");
        assert!(
            html.contains(
                "payments-not-dead-lettered · refunds &lt;b&gt;🧾 رد&lt;/b&gt;: SLI over 28d"
            ),
            "the charts are the consumer's"
        );
        // The SLO's own page lists its consumers; another team's consumer,
        // or a name that is no consumer name, is no page of it.
        let (status, html) = app.get("/slo/payments-not-dead-lettered").await;
        assert_eq!(status, 200);
        let page = common::text(&visible(&html));
        assert!(page.contains("each consumer of team payments"), "{page}");
        assert!(page.contains("payments page"), "{page}");
        let (status, html) = app.get("/slo/payments-not-dead-lettered/reminders").await;
        assert_eq!(status, 404);
        assert!(visible(&html).contains("has no objective for the consumer “reminders”"));
        let (status, _) = app.get("/slo/payments-not-dead-lettered/%FF").await;
        assert_eq!(status, 400);
    }
}

fn html_links_to(html: &str, href: &str) -> bool {
    html.contains(&format!("href=\"{}\"", href.replace('&', "&amp;")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_that_owns_no_consumer_stops_start_up_naming_the_slo() {
    let (_dir, slos, consumers) = team_files();
    std::fs::write(
        &slos,
        TEAM_SLOS.replace("team = \"growth\"", "team = \"grwoth\""),
    )
    .unwrap();
    let db = TestDatabase::sqlite().await;
    let mut config = Config::for_tests(&db.url);
    config.slo_file = Some(slos);
    config.consumers_file = Some(consumers);
    let error = Application::build(config)
        .await
        .err()
        .expect("start-up fails");
    let message = error.to_string();
    assert!(message.contains("SLO `growth-delivered`"), "{message}");
    assert!(message.contains("team `grwoth`"), "{message}");
}

/// The built-ins per consumer over every consumer: an instance for each
/// consumer in the metrics, none for a row written without a name (which
/// the rollups count only in the fleet's sums), and no charts for a name
/// that is no consumer of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_consumer_s_own_built_ins_and_no_consumer_without_a_name() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let dir = tempfile::tempdir().unwrap();
        let slos = dir.path().join("slo.toml");
        std::fs::write(&slos, "[builtins]\nper_consumer = true\n").unwrap();
        let app = common::spawn_with(|config| config.slo_file = Some(slos.clone()), db).await;
        two_hours(&app.store, 0.0).await;
        let nameless = MetricSample {
            consumer: String::new(),
            metric: Metric::Deliveries,
            at: Ts::now() - TimeDelta::minutes(5),
            bucket: String::new(),
            value: 7.0,
        };
        app.store
            .metrics()
            .record_metrics(&[nameless])
            .await
            .unwrap();

        let (status, html) = app.get("/slo/not-dead-lettered").await;
        assert_eq!(status, 200, "{html}");
        let page = common::text(&visible(&html));
        assert!(page.contains("not-dead-lettered payments ok"), "{page}");
        assert_eq!(html.matches("class=\"slo-row").count(), 1, "{page}");
        let (status, html) = app.get("/slo/not-dead-lettered/payments").await;
        assert_eq!(status, 200);
        assert!(common::text(&visible(&html)).contains("12000 of 12000 good"));

        let charts = |consumer: &str| {
            let fields = [
                ("name", "not-dead-lettered".to_owned()),
                ("consumer", consumer.to_owned()),
            ];
            let client = app.client.clone();
            let app = &app;
            async move {
                common::call(app, &client, "get_slo_charts", &fields)
                    .await
                    .status()
            }
        };
        assert_eq!(charts("payments").await, 200);
        assert_eq!(charts("nobody").await, 404);
    }
}
