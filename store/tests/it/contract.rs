//! docs/CONTRACT.md against the migrated schema, on both backends: every
//! column of a contract table is described, and every described column
//! exists; every metric name and kind is listed.

use std::collections::BTreeSet;

use idem_domain::{Metric, MetricKind};
use idem_store::{Store, testing::column_names};

const CONTRACT: &str = include_str!("../../../docs/CONTRACT.md");
const TABLES: &[&str] = &[
    "claims",
    "outbox",
    "dead_letters",
    "consumer_metrics",
    "adapter_counters",
];

/// The first cell (in backticks) of each row of the table under `heading`.
fn documented(heading_start: &str) -> BTreeSet<String> {
    let section = CONTRACT
        .split("\n## ")
        .find(|s| s.starts_with(heading_start))
        .unwrap_or_else(|| panic!("CONTRACT.md has no section {heading_start}"));
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

idem_store::on_both_backends!(
    every_contract_column_is_documented_and_every_documented_column_exists
);

async fn every_contract_column_is_documented_and_every_documented_column_exists(store: &Store) {
    for table in TABLES {
        let schema: BTreeSet<String> = column_names(store, table)
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert!(!schema.is_empty(), "{table} has no columns");
        let mut doc = documented(&format!("`{table}`"));
        if *table == "consumer_metrics" {
            // The same section lists the metric names.
            doc.retain(|name| schema.contains(name) || Metric::from_name(name).is_none());
        }
        let undocumented: Vec<_> = schema.difference(&doc).collect();
        let missing: Vec<_> = doc.difference(&schema).collect();
        assert!(
            undocumented.is_empty(),
            "{table}: not in CONTRACT.md: {undocumented:?}"
        );
        assert!(
            missing.is_empty(),
            "{table}: in CONTRACT.md, not in the schema: {missing:?}"
        );
    }
}

#[test]
fn every_metric_is_listed_with_its_kind() {
    let section = CONTRACT
        .split("\n## ")
        .find(|s| s.starts_with("`consumer_metrics`"))
        .unwrap();
    for metric in Metric::ALL {
        let kind = match metric.kind() {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        };
        let row = format!("| `{}` | {kind} |", metric.name());
        assert!(section.contains(&row), "CONTRACT.md lacks {row}");
    }
}
