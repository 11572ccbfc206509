//! `/metrics` over real HTTP, read back with a Prometheus text-format parser.

use crate::common;
use crate::common::spawn_bare;
use chrono::TimeDelta;
use idem::metrics::MetricsToken;
use idem_domain::Metric;
use idem_store::{Delivery, MetricSample, Outcome, Store, Ts, testing::TestDatabase};
use prometheus_parse::{Sample, Scrape, Value};

const TOKEN: &str = "scrape-token-for-tests";

async fn unknown_outcome(store: &Store, consumer: &str, key: &str) {
    attempt(
        store,
        consumer,
        key,
        Outcome::Unknown { error: "timeout" },
        20,
    )
    .await;
}

/// A claim of `key` whose one attempt ended in `outcome` `minutes_ago`.
async fn attempt(store: &Store, consumer: &str, key: &str, outcome: Outcome<'_>, minutes_ago: i64) {
    let at = Ts::now() - TimeDelta::minutes(minutes_ago);
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: None,
        at,
    })
    .await
    .unwrap();
    tx.lease(consumer, key, at, at).await.unwrap();
    tx.record(consumer, key, outcome, at).await.unwrap();
    tx.commit().await.unwrap();
}

/// An hour of `payments` with 5% of deliveries dead-lettered.
async fn an_hour_of_dead_letters(store: &Store) {
    let now = Ts::now();
    let mut samples = Vec::new();
    for minute in 1..=60 {
        for (metric, value) in [(Metric::Deliveries, 100.0), (Metric::DeadLetters, 5.0)] {
            samples.push(MetricSample {
                consumer: "payments".into(),
                metric,
                at: now - TimeDelta::minutes(minute),
                bucket: String::new(),
                value,
            });
        }
    }
    store.metrics().record_metrics(&samples).await.unwrap();
}

async fn scrape(app: &common::TestApp, token: Option<&str>) -> (u16, String) {
    let mut request = app.client.get(app.url("/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
            _ => panic!("{name} is not a plain value"),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_export_is_off_without_a_token_and_refuses_a_wrong_one() {
    let off = spawn_bare(|_| {}, TestDatabase::sqlite().await).await;
    assert_eq!(scrape(&off, Some(TOKEN)).await.0, 404);

    let on = spawn_bare(
        |config| config.metrics_token = Some(MetricsToken::new(TOKEN.into())),
        TestDatabase::sqlite().await,
    )
    .await;
    assert_eq!(scrape(&on, None).await.0, 401);
    assert_eq!(scrape(&on, Some("guess")).await.0, 401);
    assert_eq!(scrape(&on, Some(TOKEN)).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_parses_as_prometheus_text_with_slos_burn_rates_and_stuck_keys() {
    // payments is in the catalogue, reminders is not.
    let dir = tempfile::tempdir().unwrap();
    let catalogue = dir.path().join("consumers.toml");
    std::fs::write(
        &catalogue,
        "[[consumer]]\nname = \"payments\"\nteam = \"payments-core\"\nprovider_contract = \"honours-key\"\n",
    )
    .unwrap();
    let app = spawn_bare(
        |config| {
            config.metrics_token = Some(MetricsToken::new(TOKEN.into()));
            config.consumers_file = Some(catalogue.clone());
        },
        TestDatabase::sqlite().await,
    )
    .await;
    an_hour_of_dead_letters(&app.store).await;
    let odd_key = "refund:EU/2026/Ø-1842 #7 %2F שלום 🧾";
    unknown_outcome(&app.store, "payments", odd_key).await;
    for n in 0..5 {
        unknown_outcome(&app.store, "reminders", &format!("remind:{n}")).await;
    }
    // The last hour: two failed and one retrying; a failure of two hours ago
    // is outside it.
    let rejected = Outcome::Permanent {
        error: "400 invalid iban",
    };
    attempt(&app.store, "payments", "pay:1", rejected, 10).await;
    attempt(&app.store, "payments", "pay:2", rejected, 50).await;
    attempt(&app.store, "payments", "pay:old", rejected, 120).await;
    let busy = Outcome::Retryable { error: "503" };
    attempt(&app.store, "payments", "pay:3", busy, 5).await;

    let (status, text) = scrape(&app, Some(TOKEN)).await;
    assert_eq!(status, 200, "{text}");
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("valid exposition");
    let samples = &scrape.samples;

    let slo = [("slo", "not-dead-lettered")];
    assert_eq!(
        value(samples, "idem_slo_objective_ratio", &slo),
        Some(0.999)
    );
    assert_eq!(value(samples, "idem_slo_sli_ratio", &slo), Some(0.95));
    let burn = value(
        samples,
        "idem_slo_burn_rate",
        &[("slo", "not-dead-lettered"), ("window", "1h")],
    );
    assert!((burn.unwrap() - 50.0).abs() < 1e-6, "{burn:?}");
    assert_eq!(
        value(
            samples,
            "idem_slo_alert_firing",
            &[
                ("slo", "not-dead-lettered"),
                ("severity", "page"),
                ("long_window", "1h")
            ]
        ),
        Some(1.0)
    );
    // No data is absent, never a false 100%.
    assert_eq!(
        value(samples, "idem_slo_sli_ratio", &[("slo", "outbox-age-30s")]),
        None
    );

    assert_eq!(
        value(samples, "idem_claims", &[("status", "unknown")]),
        Some(6.0)
    );
    let last_hour = |status| value(samples, "idem_claims_last_hour", &[("status", status)]);
    assert_eq!(last_hour("failed"), Some(2.0));
    assert_eq!(last_hour("pending"), Some(1.0));
    let age = value(
        samples,
        "idem_stuck_key_age_seconds",
        &[
            ("consumer", "payments"),
            ("idempotency_key", odd_key),
            ("reason", "unknown_outcome"),
        ],
    )
    .expect("the stuck key is named exactly");
    assert!((1195.0..1300.0).contains(&age), "{age}");
    // A catalogued consumer's series carry its team, for Alertmanager to route on.
    let teams = |consumer| {
        samples
            .iter()
            .filter(|s| s.labels.get("consumer") == Some(consumer))
            .map(|s| s.labels.get("team"))
            .collect::<Vec<_>>()
    };
    let payments = teams("payments");
    assert!(!payments.is_empty());
    assert!(
        payments.iter().all(|t| *t == Some("payments-core")),
        "{payments:?}"
    );
    assert!(
        teams("reminders").iter().all(Option::is_none),
        "not in the catalogue"
    );
    // Bounded: five stuck reminders, three exported.
    let reminders = samples
        .iter()
        .filter(|s| {
            s.metric == "idem_stuck_key_age_seconds"
                && s.labels.get("consumer") == Some("reminders")
        })
        .count();
    assert_eq!(reminders, 3);
    // Every unknown outcome is past the 15-minute objective: a finding each.
    let check = |name| value(samples, "idem_check_findings", &[("check", name)]);
    assert_eq!(check("unknown-past-objective"), Some(6.0));
    assert_eq!(check("abandoned-lease"), Some(0.0));
    // Every capped count says whether it stopped at its cap (none did).
    let capped = |name, labels: &[(&str, &str)]| value(samples, name, labels);
    assert_eq!(
        capped("idem_claims_capped", &[("status", "unknown")]),
        Some(0.0)
    );
    let drift = [("check", "payload-drift")];
    assert_eq!(capped("idem_check_findings_capped", &drift), Some(0.0));
    assert!(text.contains("# TYPE idem_slo_burn_rate gauge"));
    assert!(text.contains("# TYPE idem_consumer_events_total counter"));
    assert!(value(samples, "idem_build_info", &[]).is_some());
}

/// One counter sample of `billing` at `at`.
fn counted(metric: Metric, at: Ts, value: f64) -> MetricSample {
    MetricSample {
        consumer: "billing".into(),
        metric,
        at,
        bucket: String::new(),
        value,
    }
}

/// The consumers' counters as Prometheus counters: from this replica's
/// first scrape on, each minute added once it settles, never twice.
async fn consumer_counters_count_settled_minutes_once(db: TestDatabase) {
    let app = spawn_bare(|_| {}, db).await;
    let store = &app.store;
    let totals = idem::consumer_events::EventTotals::default();
    let t0 = Ts::now() - TimeDelta::hours(1);
    let minute = |n: i64| Ts::from(t0.0 + TimeDelta::minutes(n));
    // Written before the first scrape: before this replica's count began.
    store
        .metrics()
        .record_metrics(&[counted(Metric::Deliveries, minute(-10), 500.0)])
        .await
        .unwrap();
    assert!(totals.advance(store, t0).await.unwrap().is_empty());

    store
        .metrics()
        .record_metrics(&[
            counted(Metric::Deliveries, minute(-4), 10.0),
            counted(Metric::DuplicateClaims, minute(-4), 2.0),
            counted(Metric::QueueDepth, minute(-4), 40.0),
            // Not settled yet at the next scrape: counted by the one after.
            counted(Metric::Deliveries, minute(8), 7.0),
        ])
        .await
        .unwrap();
    let now = |n: i64| Ts::from(t0.0 + TimeDelta::minutes(n));
    let first = totals.advance(store, now(10)).await.unwrap();
    let again = totals.advance(store, now(10)).await.unwrap();
    assert_eq!(first, again, "a second scrape adds nothing twice");
    assert_eq!(
        first,
        [
            ("billing".to_owned(), Metric::Deliveries, 10.0),
            ("billing".to_owned(), Metric::DuplicateClaims, 2.0),
        ],
        "counters only, from the first scrape on"
    );
    let later = totals.advance(store, now(20)).await.unwrap();
    assert_eq!(later[0], ("billing".to_owned(), Metric::Deliveries, 17.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_counters_count_settled_minutes_once_on_sqlite() {
    consumer_counters_count_settled_minutes_once(TestDatabase::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_counters_count_settled_minutes_once_on_postgres() {
    consumer_counters_count_settled_minutes_once(TestDatabase::postgres().await).await;
}

/// A per-consumer SLO exports each consumer's series with `consumer` and
/// its `team`; a team's SLO carries the team; the fleet's carries neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slo_series_carry_the_consumer_and_team_they_are_about() {
    let dir = tempfile::tempdir().unwrap();
    let (catalogue, slos) = (
        dir.path().join("consumers.toml"),
        dir.path().join("slo.toml"),
    );
    std::fs::write(
        &catalogue,
        "[[consumer]]\nname = \"payments\"\nteam = \"payments-core\"\nprovider_contract = \"honours-key\"\n",
    )
    .unwrap();
    let slo = |name: &str, selects: &str| {
        format!(
            "[[slo]]\nname = \"{name}\"\ndescription = \"d\"\nobjective = 0.999\n{selects}\
             sli = {{ kind = \"counters\", valid = \"deliveries\", bad = \"dead_letters\" }}\n"
        )
    };
    std::fs::write(
        &slos,
        [
            slo("each", "team = \"payments-core\"\nper_consumer = true\n"),
            slo("together", "team = \"payments-core\"\n"),
            slo("fleet", ""),
        ]
        .concat(),
    )
    .unwrap();
    let app = spawn_bare(
        |config| {
            config.metrics_token = Some(MetricsToken::new(TOKEN.into()));
            config.consumers_file = Some(catalogue.clone());
            config.slo_file = Some(slos.clone());
        },
        TestDatabase::sqlite().await,
    )
    .await;
    an_hour_of_dead_letters(&app.store).await;
    let (status, text) = scrape(&app, Some(TOKEN)).await;
    assert_eq!(status, 200);
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let labels_of = |slo: &str| {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == "idem_slo_burn_rate" && s.labels.get("slo") == Some(slo))
            .unwrap_or_else(|| panic!("{slo} has a burn rate"));
        (s.labels.get("consumer"), s.labels.get("team"))
    };
    assert_eq!(labels_of("each"), (Some("payments"), Some("payments-core")));
    assert_eq!(labels_of("together"), (None, Some("payments-core")));
    assert_eq!(labels_of("fleet"), (None, None));
    // 5% dead letters against 99.9%: 50× over the hour, for the consumer.
    assert_eq!(
        value(
            &scrape.samples,
            "idem_slo_burn_rate",
            &[("slo", "each"), ("consumer", "payments"), ("window", "1h")]
        )
        .map(|v| v.round()),
        Some(50.0)
    );
}
