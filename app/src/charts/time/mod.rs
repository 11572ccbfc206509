//! Charts over time: one value per interval, drawn the same way for every
//! metric. A threshold (objective) is a dashed line, intervals that breach it
//! are shaded, intervals without data are marked as such (never drawn as a
//! zero), and ratios carry their traffic in a strip underneath.
//!
//! Each builder takes numbers already read and returns a [`Chart`]: the SVG,
//! and a summary in words that says what a person would look for. The
//! drawing is in [`plot`]; the builders are grouped by what they chart.

mod deliveries;
mod frame;
mod latency;
mod plot;
mod pressure;
mod slo;
#[cfg(test)]
mod tests;

pub use deliveries::{Allowed, bad_share, gauge_worst, new_unknown_outcomes};
pub use frame::Frame;
pub use latency::{outcome_latency, recovery_times};
pub use pressure::{duplicates_suppressed, queue_depth, replays, retry_pressure};
pub use slo::{budget_over_time, burn_rate, sli_over_time};

use crate::api::Chart;

/// A chart over `frame`, drawn (`svg`) or not.
fn chart(id: &str, frame: &Frame, title: String, svg: Option<String>, summary: String) -> Chart {
    Chart {
        id: id.to_owned(),
        range: frame.label.clone(),
        title,
        svg,
        summary,
        link: None,
    }
}

/// The sentence a summary ends with when `gaps` intervals had no data.
fn gaps_sentence(gaps: usize) -> String {
    match gaps {
        0 => String::new(),
        1 => " 1 interval had no data and is left blank.".to_owned(),
        n => format!(" {n} intervals had no data and are left blank."),
    }
}
