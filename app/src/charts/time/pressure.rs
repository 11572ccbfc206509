//! What the consumers push against and what operators push back with:
//! retryable failures and rate limiting, duplicates found and suppressed,
//! queue depth, and replays — counts per interval, no objective.

use idem_domain::Histogram;
use plotters::style::RGBColor;

use super::{
    Frame, chart, gaps_sentence,
    plot::{Line, Marks, Plot, Unit},
};
use crate::{
    api::Chart,
    charts::{BEYOND, THIRD, WITHIN},
};

/// Retryable failures per interval, with those the provider refused as
/// rate-limited (429) and the retries that waited as its `Retry-After` asked.
pub fn retry_pressure(
    frame: &Frame,
    reported: &[bool],
    retryable: &[f64],
    rate_limited: &[f64],
    honoured: &[f64],
) -> Chart {
    let id = "retries";
    let title = format!("Retryable failures and rate limiting, {}", frame.label);
    let lines = [
        ("retryable failures", WITHIN, retryable),
        ("of them 429", BEYOND, rate_limited),
        ("waited for Retry-After", THIRD, honoured),
    ];
    let Some(plot) = lines_of_counts(frame, "failures", reported, &lines) else {
        let summary = format!("No deliveries reported in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    };
    let [failures, limited, waited] = [retryable, rate_limited, honoured].map(total);
    let mut summary = format!(
        "{failures:.0} retryable failures in the {}, {limited:.0} of them rate-limited (429); \
         {waited:.0} retries waited as the provider's Retry-After asked.",
        frame.label
    );
    if limited > 0.0 && failures > 0.0 && limited / failures >= 0.5 {
        summary +=
            " Most failures are rate limiting: the consumers send faster than the provider takes.";
    }
    summary += &gaps_sentence(plot.gaps);
    plot.plot.into_chart(id, title, summary)
}

/// Duplicate deliveries per interval, and those acknowledged without
/// repeating the effect (the key's outcome already recorded).
pub fn duplicates_suppressed(
    frame: &Frame,
    reported: &[bool],
    duplicates: &[f64],
    suppressed: &[f64],
) -> Chart {
    let id = "duplicates-suppressed";
    let title = format!("Duplicates found and suppressed, {}", frame.label);
    let lines = [
        ("found their key claimed", WITHIN, duplicates),
        ("suppressed", THIRD, suppressed),
    ];
    let Some(plot) = lines_of_counts(frame, "deliveries", reported, &lines) else {
        let summary = format!("No deliveries reported in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    };
    let [found, kept_out] = [duplicates, suppressed].map(total);
    let summary = format!(
        "{found:.0} deliveries found their key already claimed in the {}; {} acknowledged \
         without repeating the effect (the rest found the key's attempt still under way or in \
         doubt).{}",
        frame.label,
        were(kept_out),
        gaps_sentence(plot.gaps)
    );
    plot.plot.into_chart(id, title, summary)
}

/// Replays published per interval (operators' and redrives').
pub fn replays(frame: &Frame, reported: &[bool], replays: &[f64]) -> Chart {
    let id = "replays";
    let title = format!("Replays published, {}", frame.label);
    let values = reported_values(reported, replays);
    let with_data = values.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No deliveries reported in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let summary = format!(
        "{} published in the {}.{}",
        match total(replays) {
            0.0 => "No replays".to_owned(),
            1.0 => "1 replay".to_owned(),
            n => format!("{n:.0} replays"),
        },
        frame.label,
        gaps_sentence(values.len() - with_data)
    );
    let plot = Plot {
        frame,
        y_desc: "replays",
        unit: Unit::Count("replays"),
        marks: Marks::Bars(values),
        threshold: None,
        volume: None,
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// The deepest queue per interval, from the consumer-minutes counted per
/// slice bound: known to the bound ("at most 300 messages").
pub fn queue_depth(frame: &Frame, slices: &[Histogram]) -> Chart {
    let id = "queue-depth";
    let title = format!("Queue depth, {}", frame.label);
    let worst = super::deliveries::worst_slices(slices);
    let with_data = worst.iter().flatten().count();
    if with_data == 0 {
        let summary = format!(
            "No consumer reported its queue depth in the {}.",
            frame.label
        );
        return chart(id, frame, title, None, summary);
    }
    let deepest = worst.iter().flatten().copied().fold(0.0, f64::max);
    let reads = if deepest.is_infinite() {
        "more than 3,600 messages".to_owned()
    } else {
        format!("at most {deepest:.0} messages")
    };
    let summary = format!(
        "The deepest queue held {reads} in the {}.{}",
        frame.label,
        gaps_sentence(worst.len() - with_data)
    );
    let plot = Plot {
        frame,
        y_desc: "messages waiting",
        unit: Unit::Count("messages"),
        marks: Marks::Lines(vec![Line {
            label: "deepest",
            color: WITHIN,
            values: worst
                .iter()
                .map(|w| w.map(|w| w.min(super::deliveries::BEYOND_SLICES)))
                .collect(),
        }]),
        threshold: None,
        volume: None,
        y_range: None,
    };
    plot.into_chart(id, title, summary)
}

/// A plot of several count lines, and how many intervals had no data.
struct CountPlot<'a> {
    plot: Plot<'a>,
    gaps: usize,
}

/// Lines of counts per interval, blank where no consumer reported
/// deliveries; `None` when nothing was reported in the whole span.
fn lines_of_counts<'a>(
    frame: &'a Frame,
    noun: &'static str,
    reported: &[bool],
    lines: &[(&'static str, RGBColor, &[f64])],
) -> Option<CountPlot<'a>> {
    let with_data = reported.iter().filter(|r| **r).count();
    if with_data == 0 {
        return None;
    }
    let lines = lines
        .iter()
        .map(|(label, color, counts)| Line {
            label,
            color: *color,
            values: reported_values(reported, counts),
        })
        .collect();
    Some(CountPlot {
        plot: Plot {
            frame,
            y_desc: noun,
            unit: Unit::Count(noun),
            marks: Marks::Lines(lines),
            threshold: None,
            volume: None,
            y_range: None,
        },
        gaps: reported.len() - with_data,
    })
}

/// Each interval's count where some consumer reported, else nothing.
fn reported_values(reported: &[bool], counts: &[f64]) -> Vec<Option<f64>> {
    reported
        .iter()
        .enumerate()
        .map(|(i, r)| r.then(|| counts.get(i).copied().unwrap_or(0.0)))
        .collect()
}

/// A span's count (never "-0": an empty sum of floats is negative zero).
fn total(counts: &[f64]) -> f64 {
    counts.iter().sum::<f64>() + 0.0
}

/// "1 was", "3 were".
fn were(n: f64) -> String {
    if n == 1.0 {
        "1 was".to_owned()
    } else {
        format!("{n:.0} were")
    }
}
