//! Counts per delivery over time: the share of deliveries that went wrong,
//! the worst reading of a gauge, and new unknown outcomes.

use idem_domain::Histogram;

use super::{
    Frame, chart, gaps_sentence,
    plot::{Breach, Line, Marks, Plot, Threshold, Unit},
};
use crate::{
    api::Chart,
    charts::WITHIN,
    format::{duration, percent},
};

/// Gauge readings above the largest slice bound are drawn at this many seconds.
pub(super) const BEYOND_SLICES: f64 = 7200.0;

/// The most a bad count may be of deliveries, under its SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Allowed {
    pub share: f64,
    /// Deliveries an interval needs before its share is judged (the SLO's
    /// minimum events).
    pub min_deliveries: f64,
}

/// The share of a count over time — duplicates, dead letters, failed
/// transactions per delivery — against the most the objective allows.
/// `valid` is `None` for intervals no consumer reported.
pub fn bad_share(
    id: &str,
    title: &str,
    frame: &Frame,
    noun: &str,
    valid: &[Option<f64>],
    bad: &[f64],
    allowed: Option<Allowed>,
) -> Chart {
    let title = format!("{title}, {}", frame.label);
    let shares: Vec<Option<f64>> = valid
        .iter()
        .zip(bad)
        .map(|(v, b)| v.filter(|v| *v > 0.0).map(|v| b / v * 100.0))
        .collect();
    let with_data = shares.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No deliveries reported in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let (total_bad, total_valid) = (bad.iter().sum::<f64>(), valid.iter().flatten().sum::<f64>());
    let threshold = allowed.map(|a| Threshold {
        value: a.share * 100.0,
        label: format!("objective ≤ {}", percent(a.share)),
        breach: Breach::Above,
        min_volume: Some(a.min_deliveries),
    });
    let mut summary = format!(
        "{total_bad:.0} of {total_valid:.0} deliveries ({}) {noun} in the {}.",
        percent(total_bad / total_valid.max(1.0)),
        frame.label
    );
    if let (Some(a), Some(t)) = (allowed, &threshold) {
        let judged: Vec<f64> = shares
            .iter()
            .zip(valid)
            .filter_map(|(s, v)| s.filter(|_| v.is_some_and(|v| v >= a.min_deliveries)))
            .collect();
        let breached = judged.iter().filter(|s| t.breached_by(**s)).count();
        summary += &format!(
            " {breached} of {} intervals with {:.0} deliveries or more were over the objective \
             of {}.",
            judged.len(),
            a.min_deliveries,
            percent(a.share)
        );
    }
    summary += &gaps_sentence(shares.len() - with_data);
    let plot = Plot {
        frame,
        y_desc: "% of deliveries",
        unit: Unit::Percent,
        marks: Marks::Lines(vec![Line {
            label: "share",
            color: WITHIN,
            values: shares,
        }]),
        threshold,
        volume: Some((
            "deliveries",
            valid.iter().map(|v| v.unwrap_or(0.0)).collect(),
        )),
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// The worst reading per interval of a gauge counted into slices: the
/// highest slice bound any consumer-minute read into (bounds come in
/// ascending order); `None` where nobody reported.
pub(super) fn worst_slices(slices: &[Histogram]) -> Vec<Option<f64>> {
    slices
        .iter()
        .map(|s| {
            s.iter()
                .filter(|(_, minutes)| *minutes > 0.0)
                .map(|(bound, _)| bound)
                .last()
        })
        .collect()
}

/// The worst reading of a gauge (an oldest age) per interval, from the
/// consumer-minutes counted per slice bound, against a threshold. Readings
/// are known to the slice bound: "at most 2 min".
pub fn gauge_worst(
    id: &str,
    title: &str,
    frame: &Frame,
    what: &str,
    slices: &[Histogram],
    threshold_seconds: Option<f64>,
) -> Chart {
    let title = format!("{title}, {}", frame.label);
    let worst = worst_slices(slices);
    let with_data = worst.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No consumer reported {what} in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let minutes = worst.iter().flatten().copied().fold(0.0, f64::max);
    let reads = |seconds: f64| {
        if seconds.is_infinite() {
            "more than an hour".to_owned()
        } else {
            format!("at most {}", duration(seconds as i64))
        }
    };
    let threshold = threshold_seconds.map(|t| Threshold {
        value: t,
        label: format!("threshold {}", duration(t as i64)),
        breach: Breach::Above,
        min_volume: None,
    });
    let mut summary = format!(
        "The {what} was {} at its worst in the {}.",
        reads(minutes),
        frame.label
    );
    if let Some(t) = &threshold {
        let over = worst
            .iter()
            .flatten()
            .filter(|w| t.breached_by(**w))
            .count();
        summary += &format!(
            " {over} of {with_data} intervals with readings went over {}.",
            duration(t.value as i64)
        );
    }
    summary += &gaps_sentence(worst.len() - with_data);
    let plot = Plot {
        frame,
        y_desc: "seconds",
        unit: Unit::Seconds,
        marks: Marks::Lines(vec![Line {
            label: "worst",
            color: WITHIN,
            values: worst
                .iter()
                .map(|w| w.map(|w| w.min(BEYOND_SLICES)))
                .collect(),
        }]),
        threshold,
        volume: None,
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// New unknown outcomes per interval (the open ones now are their own chart).
pub fn new_unknown_outcomes(frame: &Frame, reported: &[bool], counts: &[f64]) -> Chart {
    let id = "unknown-outcomes";
    let title = format!("New unknown outcomes, {}", frame.label);
    let values: Vec<Option<f64>> = reported
        .iter()
        .zip(counts)
        .map(|(r, c)| r.then_some(*c))
        .collect();
    let with_data = values.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No deliveries reported in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let total: f64 = counts.iter().sum();
    let summary = format!(
        "{total:.0} outcomes became unknown in the {}.{}",
        frame.label,
        gaps_sentence(values.len() - with_data)
    );
    let plot = Plot {
        frame,
        y_desc: "new unknown outcomes",
        unit: Unit::Count("new unknown outcomes"),
        marks: Marks::Bars(values),
        threshold: None,
        volume: None,
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}
