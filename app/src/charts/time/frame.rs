//! The intervals a chart over time is drawn on.

use chrono::{DateTime, TimeDelta, Utc};

/// The intervals a chart shows: equal steps, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// How the span reads in a title: "last 24h", "2026-11-01 00:00 – 2026-11-02 00:00 UTC".
    pub label: String,
    pub starts: Vec<DateTime<Utc>>,
    pub step: TimeDelta,
}

impl Frame {
    /// Intervals of `step` from `from` until `to` (the last may end past `to`).
    pub fn new(
        label: impl Into<String>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        step: TimeDelta,
    ) -> Self {
        let mut starts = Vec::new();
        let mut at = from;
        while at < to && step > TimeDelta::zero() {
            starts.push(at);
            at += step;
        }
        Self {
            label: label.into(),
            starts,
            step,
        }
    }

    /// How many intervals.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// The time axis label at interval `i`: the time, and the date too
    /// when the frame spans more than two days.
    pub(super) fn axis_label(&self, i: usize) -> String {
        let Some(at) = self.starts.get(i) else {
            return String::new();
        };
        let span = self.step * self.starts.len() as i32;
        if span <= TimeDelta::days(2) {
            at.format("%H:%M").to_string()
        } else {
            at.format("%m-%d %H:%M").to_string()
        }
    }

    /// Intervals `first` to `last` in words: `2026-11-30 14:00–15:00 UTC`.
    pub(super) fn intervals(&self, first: usize, last: usize) -> String {
        let (Some(start), Some(last_start)) = (self.starts.get(first), self.starts.get(last))
        else {
            return String::new();
        };
        let end = *last_start + self.step;
        let end_format = if end.date_naive() == start.date_naive() {
            "%H:%M"
        } else {
            "%Y-%m-%d %H:%M"
        };
        format!(
            "{}–{} UTC",
            start.format("%Y-%m-%d %H:%M"),
            end.format(end_format)
        )
    }
}
