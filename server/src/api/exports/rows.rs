//! What an export's rows look like as CSV: a header, and each row's cells,
//! quoted as CSV quotes them and never run as a spreadsheet formula.

use idem_domain::{AuditEntry, Claim, DeadLetter, OutboxRow};
use serde::Serialize;

/// A row as a CSV line's cells.
pub trait Row: Serialize + Send + 'static {
    const HEADER: &'static [&'static str];
    fn cells(&self) -> Vec<String>;
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

impl Row for Claim {
    const HEADER: &'static [&'static str] = &[
        "consumer",
        "key",
        "status",
        "status_at",
        "first_delivery_at",
        "last_delivery_at",
        "delivery_count",
        "duplicate_count",
        "attempts",
        "provider_ref",
        "last_error",
        "version",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            self.consumer.clone(),
            self.key.clone(),
            self.status.to_string(),
            time(self.status_at),
            time(self.first_delivery_at),
            time(self.last_delivery_at),
            self.delivery_count.to_string(),
            self.duplicate_count.to_string(),
            self.attempts.to_string(),
            opt(self.provider_ref.as_ref()),
            opt(self.last_error.as_ref()),
            self.version.to_string(),
        ]
    }
}

impl Row for DeadLetter {
    const HEADER: &'static [&'static str] = &[
        "id",
        "consumer",
        "queue",
        "key",
        "message_id",
        "delivery_count",
        "first_failure_at",
        "dead_lettered_at",
        "last_error",
        "state",
        "resolved_by",
        "resolved_at",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.consumer.clone(),
            self.queue.clone(),
            self.key.clone(),
            self.message_id.clone(),
            self.delivery_count.to_string(),
            time(self.first_failure_at),
            time(self.dead_lettered_at),
            opt(self.last_error.as_ref()),
            self.state.to_string(),
            opt(self.resolved_by.as_ref()),
            opt(self.resolved_at.map(time)),
        ]
    }
}

impl Row for OutboxRow {
    const HEADER: &'static [&'static str] = &[
        "id",
        "consumer",
        "topic",
        "key",
        "created_at",
        "published_at",
        "attempts",
        "last_error",
        "origin",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            self.consumer.clone(),
            self.topic.clone(),
            self.key.clone(),
            time(self.created_at),
            opt(self.published_at.map(time)),
            self.attempts.to_string(),
            opt(self.last_error.as_ref()),
            self.origin.to_string(),
        ]
    }
}

impl Row for AuditEntry {
    const HEADER: &'static [&'static str] = &[
        "id",
        "at",
        "actor",
        "actor_role",
        "action",
        "consumer",
        "key",
        "target",
        "state_before",
        "state_after",
        "reason",
        "result",
        "client_addr",
    ];
    fn cells(&self) -> Vec<String> {
        vec![
            self.id.to_string(),
            time(self.at),
            self.actor.clone(),
            self.actor_role.clone(),
            self.action.to_string(),
            opt(self.consumer.as_ref()),
            opt(self.key.as_ref()),
            opt(self.target.as_ref()),
            opt(self.state_before.as_ref()),
            opt(self.state_after.as_ref()),
            opt(self.reason.as_ref()),
            self.result.to_string(),
            opt(self.client_addr.as_ref()),
        ]
    }
}

/// One CSV cell: quoted when it holds a comma, quote or line break; a cell
/// a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a
/// carriage return first) starts with `'`.
pub fn csv_cell(text: &str) -> String {
    let guarded = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

pub fn csv_line(cells: impl IntoIterator<Item = String>) -> String {
    let mut line = cells
        .into_iter()
        .map(|c| csv_cell(&c))
        .collect::<Vec<_>>()
        .join(",");
    line.push_str("\r\n");
    line
}

#[cfg(test)]
mod tests {
    use super::csv_cell;

    #[test]
    fn a_cell_is_quoted_when_it_must_be_and_never_runs_as_a_formula() {
        assert_eq!(csv_cell("refund:EU/2026"), "refund:EU/2026");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("-1"), "'-1");
        assert_eq!(csv_cell("@sum"), "'@sum");
        assert_eq!(csv_cell("💶 עברית"), "💶 עברית");
    }
}
