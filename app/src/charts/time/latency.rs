//! How long things took over time: delivery-to-outcome latency from
//! histograms, and operators' recovery times.

use chrono::{DateTime, Utc};
use idem_domain::Histogram;

use super::{
    Frame, chart, gaps_sentence,
    plot::{Breach, Line, Marks, Plot, Threshold, Unit},
};
use crate::{
    api::Chart,
    charts::{BEYOND, THIRD, WITHIN},
    format::duration,
};

/// Delivery-to-outcome latency per interval (p50, p95, p99) against the
/// reconciliation threshold; intervals whose p99 is over it are shaded.
pub fn outcome_latency(
    frame: &Frame,
    histograms: &[Histogram],
    bounds: &[f64],
    threshold_seconds: Option<f64>,
) -> Chart {
    let id = "outcome-latency";
    let title = format!("Delivery to outcome, {}", frame.label);
    let quantile =
        |q: f64| -> Vec<Option<f64>> { histograms.iter().map(|h| h.quantile(q, bounds)).collect() };
    let (p99, p95, p50) = (quantile(0.99), quantile(0.95), quantile(0.5));
    let with_data = p50.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No outcomes recorded in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let all = Histogram::merged(histograms);
    let overall = |q| {
        all.quantile(q, bounds)
            .map_or("?".to_owned(), |s| duration(s.round() as i64))
    };
    let threshold = threshold_seconds.map(|t| Threshold {
        value: t,
        label: format!("threshold {}", duration(t as i64)),
        breach: Breach::Above,
        min_volume: None,
    });
    let mut summary = format!(
        "Over all {:.0} outcomes in the {}: p50 {}, p95 {}, p99 {}.",
        all.total(),
        frame.label,
        overall(0.5),
        overall(0.95),
        overall(0.99)
    );
    if let Some(t) = &threshold {
        let over = p99.iter().flatten().filter(|v| t.breached_by(**v)).count();
        summary += &format!(
            " {over} of {with_data} intervals had a p99 over {}.",
            duration(t.value as i64)
        );
    }
    summary += &gaps_sentence(p50.len() - with_data);
    let volume = histograms.iter().map(Histogram::total).collect();
    let plot = Plot {
        frame,
        y_desc: "seconds",
        unit: Unit::Seconds,
        marks: Marks::Lines(vec![
            Line {
                label: "p99",
                color: BEYOND,
                values: p99,
            },
            Line {
                label: "p95",
                color: THIRD,
                values: p95,
            },
            Line {
                label: "p50",
                color: WITHIN,
                values: p50,
            },
        ]),
        threshold,
        volume: Some(("outcomes", volume)),
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// How long operators took to recover unknown outcomes and dead letters:
/// the median and the slowest per interval, against the recovery threshold.
pub fn recovery_times(
    frame: &Frame,
    recoveries: &[(DateTime<Utc>, f64)],
    threshold_seconds: Option<f64>,
) -> Chart {
    let id = "recovery-times";
    let title = format!("Recovery times, {}", frame.label);
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); frame.len()];
    for (at, seconds) in recoveries {
        let i = frame.starts.partition_point(|s| s <= at);
        if let Some(slot) = i.checked_sub(1).and_then(|i| per.get_mut(i)) {
            slot.push(seconds / 60.0);
        }
    }
    let total = per.iter().map(Vec::len).sum::<usize>();
    if total == 0 {
        let summary = format!(
            "No unknown outcome or dead letter was recovered in the {}.",
            frame.label
        );
        return chart(id, frame, title, None, summary);
    }
    for minutes in &mut per {
        minutes.sort_by(f64::total_cmp);
    }
    let slowest: Vec<Option<f64>> = per.iter().map(|m| m.last().copied()).collect();
    let median: Vec<Option<f64>> = per.iter().map(|m| m.get(m.len() / 2).copied()).collect();
    let mut all: Vec<f64> = per.iter().flatten().copied().collect();
    all.sort_by(f64::total_cmp);
    let minutes = |m: f64| duration((m * 60.0).round() as i64);
    let mut summary = format!(
        "{total} recoveries in the {}: median {}, slowest {}.",
        frame.label,
        minutes(all[all.len() / 2]),
        minutes(all[all.len() - 1])
    );
    let threshold = threshold_seconds.map(|t| Threshold {
        value: t / 60.0,
        label: format!("threshold {}", duration(t as i64)),
        breach: Breach::Above,
        min_volume: None,
    });
    if let Some(t) = &threshold {
        let late = all.iter().filter(|m| t.breached_by(**m)).count();
        summary += &format!(
            " {late} took longer than {}.",
            duration((t.value * 60.0) as i64)
        );
    }
    let plot = Plot {
        frame,
        y_desc: "minutes",
        unit: Unit::Minutes,
        marks: Marks::Lines(vec![
            Line {
                label: "slowest",
                color: BEYOND,
                values: slowest,
            },
            Line {
                label: "median",
                color: WITHIN,
                values: median,
            },
        ]),
        threshold,
        volume: Some(("recoveries", per.iter().map(|m| m.len() as f64).collect())),
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}
