//! One SLO over its window: its SLI, the error budget left, and each
//! alerting tier's burn rate.

use idem_domain::slo::{Events, Slo, Tier};

use super::{
    Frame, chart, gaps_sentence,
    plot::{Breach, Line, Marks, Plot, Threshold, Unit},
};
use crate::{api::Chart, charts::WITHIN};

/// One SLO's SLI per interval over its window.
pub fn sli_over_time(slo: &Slo, frame: &Frame, events: &[Events]) -> Chart {
    let id = "sli";
    let title = format!("{}: SLI over {}", slo.name, slo.window);
    let objective = slo.objective.get();
    let ratios: Vec<Option<f64>> = events.iter().map(|e| e.ratio()).collect();
    let with_data = ratios.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No valid events in the last {}.", slo.window);
        return chart(id, frame, title, None, summary);
    }
    // Judged as the shading is: only intervals with the events the SLO
    // needs before it judges at all.
    let judged: Vec<f64> = events
        .iter()
        .filter(|e| e.valid >= slo.min_events as f64)
        .filter_map(|e| e.ratio())
        .collect();
    let breached = judged.iter().filter(|r| **r < objective).count();
    let gaps = ratios.len() - with_data;
    let summary = format!(
        "{breached} of {} intervals with {} events or more were below the objective of {:.3}%; \
         {gaps} intervals had no valid events and are left blank.",
        judged.len(),
        slo.min_events.max(1),
        objective * 100.0
    );
    let lowest = ratios.iter().flatten().copied().fold(objective, f64::min);
    let floor = (lowest - (1.0 - objective)).max(0.0) * 100.0;
    let plot = Plot {
        frame,
        y_desc: "SLI %",
        unit: Unit::Percent,
        marks: Marks::Lines(vec![Line {
            label: "SLI",
            color: WITHIN,
            values: ratios.iter().map(|r| r.map(|r| r * 100.0)).collect(),
        }]),
        threshold: Some(Threshold {
            value: objective * 100.0,
            label: format!("objective {:.3}%", objective * 100.0),
            breach: Breach::Below,
            min_volume: Some(slo.min_events as f64),
        }),
        volume: Some(("events", events.iter().map(|e| e.valid).collect())),
        y_range: Some((floor, 100.0)),
    };
    plot.into_chart(id, title, summary)
}

/// The error budget left as the window fills: after each interval, the
/// share of the budget the errors so far have not spent. Green above zero,
/// red below; the last bar is the budget left now.
pub fn budget_over_time(slo: &Slo, frame: &Frame, events: &[Events]) -> Chart {
    let id = "budget";
    let title = format!("{}: error budget remaining over {}", slo.name, slo.window);
    let mut so_far = Events::default();
    let remaining: Vec<Option<f64>> = events
        .iter()
        .map(|e| {
            so_far = Events::new(so_far.good + e.good, so_far.valid + e.valid);
            so_far.budget_remaining(slo.objective).map(|b| b * 100.0)
        })
        .collect();
    let Some(now) = remaining.iter().rev().flatten().next().copied() else {
        let summary = format!("No valid events in the last {}.", slo.window);
        return chart(id, frame, title, None, summary);
    };
    let first_below = remaining
        .iter()
        .position(|r| r.is_some_and(|r| r < 0.0))
        .and_then(|i| frame.starts.get(i));
    let mut summary = format!("{now:.1}% of the error budget remains.");
    summary += &match first_below {
        Some(at) => format!(
            " It was overspent from {} UTC.",
            at.format("%Y-%m-%d %H:%M")
        ),
        None => " It stayed above zero over the window.".to_owned(),
    };
    let plot = Plot {
        frame,
        y_desc: "budget left %",
        unit: Unit::Percent,
        marks: Marks::Signed(remaining),
        threshold: None,
        volume: None,
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// One tier's burn rate over its long window, evaluated at the end of every
/// interval of an hourly `frame`, against the tier's threshold.
pub fn burn_rate(slo: &Slo, tier: &Tier, frame: &Frame, events: &[Events]) -> Chart {
    let id = format!("burn-{}", tier.long);
    let threshold = tier.threshold(slo.window);
    let title = format!(
        "{}: burn rate over {} ({} at {threshold:.2}×)",
        slo.name,
        tier.long,
        tier.severity.as_str()
    );
    let per_window = (tier.long.as_seconds() / frame.step.num_seconds().max(1)).max(1) as usize;
    let burns: Vec<Option<f64>> = (0..events.len())
        .map(|i| {
            let window = &events[(i + 1).saturating_sub(per_window)..=i];
            let sum = window.iter().fold(Events::default(), |a, e| {
                Events::new(a.good + e.good, a.valid + e.valid)
            });
            sum.burn_rate(slo.objective)
        })
        .collect();
    let with_data = burns.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No valid events in the last {}.", slo.window);
        return chart(&id, frame, title, None, summary);
    }
    let over = burns.iter().flatten().filter(|b| **b > threshold).count();
    let summary = format!(
        "The {} burn rate was over {threshold:.2}× at {over} of {with_data} hourly readings; \
         the tier fires only when the {} window is over it too.{}",
        tier.long,
        tier.short,
        gaps_sentence(burns.len() - with_data)
    );
    let plot = Plot {
        frame,
        y_desc: "burn rate ×",
        unit: Unit::Times,
        marks: Marks::Lines(vec![Line {
            label: "burn rate",
            color: WITHIN,
            values: burns,
        }]),
        threshold: Some(Threshold {
            value: threshold,
            label: format!("{} at {threshold:.2}×", tier.severity.as_str()),
            breach: Breach::Above,
            min_volume: None,
        }),
        volume: Some(("events", events.iter().map(|e| e.valid).collect())),
        y_range: None,
    };
    plot.into_chart(&id, title, summary)
}
