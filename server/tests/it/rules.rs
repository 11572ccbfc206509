//! The generated alerting rules, checked by Prometheus's own `promtool`: the
//! file loads, a burn-rate tier fires only with both windows over its
//! threshold, and a stuck key's alert links to that key's page.

use std::{path::PathBuf, process::Command};

use idem::rules::{RuleLinks, render};
use idem_domain::{IdempotencyKey, slo::SloSet};

const PUBLIC_URL: &str = "https://idem.example.com";

fn links() -> RuleLinks {
    RuleLinks {
        public_url: PUBLIC_URL.into(),
        runbook_url: None,
    }
}

fn defaults() -> SloSet {
    idem::slo_config::load(None).unwrap()
}

/// promtool from `IDEM_PROMTOOL` (set by the Makefile), `.tools/` (where
/// scripts/tools.sh unpacks it) or PATH. Missing is a failure, not a skip.
fn promtool() -> PathBuf {
    let unpacked = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/promtool");
    std::env::var_os("IDEM_PROMTOOL")
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .or_else(|| unpacked.exists().then_some(unpacked))
        .or_else(|| {
            Command::new("promtool")
                .arg("--version")
                .output()
                .ok()
                .map(|_| PathBuf::from("promtool"))
        })
        .expect("promtool is installed: run scripts/tools.sh test (or make test)")
}

fn run(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[test]
fn the_committed_rules_file_is_what_idem_rules_generates() {
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus/idem-rules.yml"),
    )
    .unwrap();
    assert_eq!(
        committed,
        render(&defaults(), &links()),
        "regenerate it: IDEM_PUBLIC_URL={PUBLIC_URL} idem rules > deploy/prometheus/idem-rules.yml"
    );
}

#[test]
fn promtool_accepts_the_rules_and_their_alerts_fire_as_designed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("idem-rules.yml"),
        render(&defaults(), &links()),
    )
    .unwrap();
    let checked = run(dir.path(), &["check", "rules", "idem-rules.yml"]);
    assert!(checked.contains("SUCCESS: 35 rules found"), "{checked}");

    // A key with everything a path must escape: space, slash, plus, percent, emoji.
    let key = "inv 1/2+3% ✓";
    let segment = "inv%201%2F2%2B3%25%20%E2%9C%93";
    assert_eq!(
        IdempotencyKey::from_segment(segment).unwrap().as_str(),
        key,
        "Idem reads the alert's link back as the same key"
    );
    let slo = defaults()
        .slos
        .into_iter()
        .find(|s| s.name == "not-dead-lettered")
        .unwrap();
    let tests = format!(
        r#"rule_files: ["idem-rules.yml"]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: {stuck}
        values: "1000x10"
      - series: 'idem_slo_burn_rate{{slo="not-dead-lettered",window="1h"}}'
        values: "20x10"
      - series: 'idem_slo_burn_rate{{slo="not-dead-lettered",window="5m"}}'
        values: "20x10"
      - series: 'idem_slo_alert_firing{{slo="not-dead-lettered",severity="page",long_window="1h",short_window="5m"}}'
        values: "1x10"
      - series: 'idem_slo_burn_rate{{slo="transactions-committed",window="1h"}}'
        values: "20x10"
      - series: 'idem_slo_burn_rate{{slo="transactions-committed",window="5m"}}'
        values: "2x10"
      - series: 'idem_check_findings{{check="payload-drift"}}'
        values: "3x30"
      - series: 'idem_check_findings{{check="abandoned-lease"}}'
        values: "0x30"
    alert_rule_test:
      - eval_time: 5m
        alertname: IdemUnknownOutcomeStuck
        exp_alerts:
          - exp_labels:
              severity: page
              consumer: payments
              team: payments-core
              idempotency_key: {key}
              reason: unknown_outcome
            exp_annotations:
              summary: {summary}
              dashboard_url: "{PUBLIC_URL}/keys/payments/{segment}"
              runbook_url: "{PUBLIC_URL}/unknown"
      - eval_time: 5m
        alertname: IdemSloBurnRate
        exp_alerts:
          - exp_labels:
              severity: page
              slo: not-dead-lettered
              long_window: 1h
              window: 1h
            exp_annotations:
              summary: "SLO not-dead-lettered is spending its error budget 13.44× too fast over 1h and 5m"
              description: {description}
              dashboard_url: "{PUBLIC_URL}/slo/not-dead-lettered"
              runbook_url: "{PUBLIC_URL}/slo/not-dead-lettered"
      - eval_time: 20m
        alertname: IdemCheckFindings
        exp_alerts:
          - exp_labels:
              severity: ticket
              check: payload-drift
            exp_annotations:
              summary: "Consistency check payload-drift found 3 keys"
              dashboard_url: "{PUBLIC_URL}/checks/payload-drift"
              runbook_url: "{PUBLIC_URL}/checks"
"#,
        stuck = quoted(&format!(
            // As /metrics writes it for a consumer in the catalogue: the
            // alert keeps the team, for Alertmanager to route on.
            r#"idem_stuck_key_age_seconds{{consumer="payments",idempotency_key={},reason="unknown_outcome",team="payments-core"}}"#,
            quoted(key)
        )),
        key = quoted(key),
        summary = quoted(&format!(
            "Key {key} of payments has had an unknown outcome for 16m 40s"
        )),
        description = quoted(&slo.description),
    );
    std::fs::write(dir.path().join("tests.yml"), tests).unwrap();
    // transactions-committed burns 20× over 1h but only 2× over 5m: no page.
    let tested = run(dir.path(), &["test", "rules", "tests.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// A per-consumer SLO's rules page per consumer: the alert keeps the
/// series' `consumer` and `team`, so Alertmanager routes it to the team, and
/// links to that consumer's page of the SLO — a name with a space, a slash
/// and an emoji included.
#[test]
fn a_per_consumer_slo_alerts_per_consumer_with_its_team_and_its_page() {
    let slos = idem::slo_config::parse(
        r#"
[[slo]]
name = "payments-not-dead-lettered"
description = "Each payments consumer's deliveries not dead-lettered."
team = "payments"
per_consumer = true
objective = 0.999
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }
"#,
        "slo.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("idem-rules.yml"), render(&slos, &links())).unwrap();
    let checked = run(dir.path(), &["check", "rules", "idem-rules.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");

    let consumer = "refunds/EU ✓";
    let segment = "refunds%2FEU%20%E2%9C%93";
    let series = |name: &str, consumer: &str, labels: &str| {
        quoted(&format!(
            r#"{name}{{slo="payments-not-dead-lettered",consumer={},team="payments",{labels}}}"#,
            quoted(consumer)
        ))
    };
    let tests = format!(
        r#"rule_files: ["idem-rules.yml"]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: {burning_1h}
        values: "20x10"
      - series: {burning_5m}
        values: "20x10"
      - series: {burning_firing}
        values: "1x10"
      - series: {calm_1h}
        values: "0.5x10"
      - series: {calm_5m}
        values: "20x10"
      - series: {calm_firing}
        values: "0x10"
    alert_rule_test:
      - eval_time: 5m
        alertname: IdemSloBurnRate
        exp_alerts:
          - exp_labels:
              severity: page
              slo: payments-not-dead-lettered
              consumer: {consumer}
              team: payments
              long_window: 1h
              window: 1h
            exp_annotations:
              summary: {summary}
              description: "Each payments consumer's deliveries not dead-lettered."
              dashboard_url: "{PUBLIC_URL}/slo/payments-not-dead-lettered/{segment}"
              runbook_url: "{PUBLIC_URL}/slo/payments-not-dead-lettered/{segment}"
"#,
        burning_1h = series("idem_slo_burn_rate", consumer, r#"window="1h""#),
        burning_5m = series("idem_slo_burn_rate", consumer, r#"window="5m""#),
        burning_firing = series(
            "idem_slo_alert_firing",
            consumer,
            r#"severity="page",long_window="1h",short_window="5m""#
        ),
        calm_1h = series("idem_slo_burn_rate", "payments", r#"window="1h""#),
        calm_5m = series("idem_slo_burn_rate", "payments", r#"window="5m""#),
        calm_firing = series(
            "idem_slo_alert_firing",
            "payments",
            r#"severity="page",long_window="1h",short_window="5m""#
        ),
        consumer = quoted(consumer),
        summary = quoted(&format!(
            "SLO payments-not-dead-lettered for {consumer} is spending its error budget 13.44× too fast over 1h and 5m"
        )),
    );
    std::fs::write(dir.path().join("tests.yml"), tests).unwrap();
    let tested = run(dir.path(), &["test", "rules", "tests.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
