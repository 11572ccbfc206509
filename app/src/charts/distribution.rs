//! Distribution charts: a bar per bucket, those past a limit in their own
//! colour, the limit dashed and labelled.

use idem_domain::{FIFO_DEDUPE_WINDOW_SECONDS, Metric};
use plotters::{
    coord::{
        ranged1d::SegmentedCoord,
        types::{RangedCoordf64, RangedCoordu32},
    },
    prelude::*,
};

use super::{BEYOND, FONT, HEIGHT, MARKER, WIDTH, WITHIN, accessible, hover_rect, with_hovers};
use crate::api::Chart;

/// The duplicate delay distribution: how long after a key's first delivery
/// each duplicate arrived, with the five-minute FIFO dedupe window marked and
/// the share of duplicates beyond it stated.
pub fn duplicate_delays(range: &str, totals: &idem_domain::Histogram) -> Chart {
    let title = format!("Duplicate delays, {range}");
    let bounds = Metric::DuplicateDelaySeconds.buckets();
    let counts: Vec<f64> = bounds.iter().map(|b| totals.count(*b)).collect();
    let total: f64 = counts.iter().sum();
    if total <= 0.0 {
        return Chart {
            id: "duplicate-delays".into(),
            range: range.to_owned(),
            title,
            svg: None,
            summary: format!("No duplicate deliveries in the {range}."),
            link: None,
        };
    }
    let beyond: f64 = bounds
        .iter()
        .zip(&counts)
        .filter(|(b, _)| **b > FIFO_DEDUPE_WINDOW_SECONDS)
        .map(|(_, c)| c)
        .sum();
    let summary = format!(
        "{beyond:.0} of {total:.0} duplicates ({:.1}%) arrived more than five minutes after the \
         key's first delivery: a FIFO queue's dedupe window would have let them through, and only \
         the idempotency key stopped them.",
        beyond / total * 100.0
    );
    let labels: Vec<String> = bounds.iter().map(|b| delay_label(*b)).collect();
    let window = bounds
        .iter()
        .position(|b| *b == FIFO_DEDUPE_WINDOW_SECONDS)
        .unwrap_or(0);
    let svg = match draw_distribution(&Distribution {
        labels: &labels,
        counts: &counts,
        within: window,
        marker: "FIFO dedupe window (5 min)",
        y_desc: "duplicates",
        x_desc: "time since the key's first delivery",
    }) {
        Ok(svg) => Some(accessible(svg, &title, &summary)),
        Err(err) => {
            tracing::warn!(error = %err, "could not draw the duplicate delay chart");
            None
        }
    };
    Chart {
        id: "duplicate-delays".into(),
        range: range.to_owned(),
        title,
        svg,
        summary,
        link: None,
    }
}

/// Age buckets of open unknown outcomes, in seconds (the last is "older").
const UNKNOWN_AGES: &[f64] = &[
    300.0,
    900.0,
    3600.0,
    21_600.0,
    86_400.0,
    604_800.0,
    f64::INFINITY,
];

/// The unknown outcomes open now by how long they have been unknown, with
/// the resolution objective marked: everything right of the line is late.
/// `ages` are in seconds, oldest first; `capped` when there are more.
pub fn open_unknown_outcomes(ages: &[f64], capped: bool, objective_seconds: f64) -> Chart {
    let chart = |svg, summary| Chart {
        id: "unknown-open".into(),
        range: "now".into(),
        title: "Open unknown outcomes by age".into(),
        svg,
        summary,
        link: None,
    };
    if ages.is_empty() {
        return chart(None, "No unknown outcomes are open.".into());
    }
    let mut bounds: Vec<f64> = UNKNOWN_AGES.to_vec();
    if !bounds.contains(&objective_seconds) {
        bounds.push(objective_seconds);
        bounds.sort_by(f64::total_cmp);
    }
    let counts: Vec<f64> = bounds
        .iter()
        .enumerate()
        .map(|(i, upper)| {
            let lower = if i == 0 {
                f64::NEG_INFINITY
            } else {
                bounds[i - 1]
            };
            ages.iter().filter(|a| **a > lower && **a <= *upper).count() as f64
        })
        .collect();
    let within = bounds
        .iter()
        .position(|b| *b == objective_seconds)
        .unwrap_or(0);
    let late = ages.iter().filter(|a| **a > objective_seconds).count();
    let oldest = ages.iter().copied().fold(0.0, f64::max);
    let more = if capped { "+" } else { "" };
    // The ages are the oldest first: if any of them is on time, every newer
    // one is too, so the late count is exact unless all of them are late.
    let late_more = if capped && late == ages.len() {
        "+"
    } else {
        ""
    };
    let summary = format!(
        "{}{more} unknown outcomes are open, {late}{late_more} of them longer than the {} \
         objective; the oldest for {}.",
        ages.len(),
        crate::format::duration(objective_seconds as i64),
        crate::format::duration(oldest as i64),
    );
    let labels: Vec<String> = bounds.iter().map(|b| delay_label(*b)).collect();
    let marker = format!(
        "resolve within {}",
        crate::format::duration(objective_seconds as i64)
    );
    let svg = match draw_distribution(&Distribution {
        labels: &labels,
        counts: &counts,
        within,
        marker: &marker,
        y_desc: "open unknown outcomes",
        x_desc: "unknown for",
    }) {
        Ok(svg) => Some(accessible(svg, "Open unknown outcomes by age", &summary)),
        Err(err) => {
            tracing::warn!(error = %err, "could not draw the open unknown outcomes");
            None
        }
    };
    chart(svg, summary)
}

/// `≤5m`, `≤1h`, `>1d`: a bucket's upper bound as a person reads it.
fn delay_label(bound: f64) -> String {
    let s = bound as i64;
    match () {
        _ if bound.is_infinite() => ">1d".to_owned(),
        _ if s >= 86_400 && s % 86_400 == 0 => format!("≤{}d", s / 86_400),
        _ if s >= 3600 && s % 3600 == 0 => format!("≤{}h", s / 3600),
        _ if s >= 60 && s % 60 == 0 => format!("≤{}m", s / 60),
        _ => format!("≤{s}s"),
    }
}

/// The axes and the marked edge of a distribution chart.
struct Distribution<'a> {
    labels: &'a [String],
    counts: &'a [f64],
    /// The last bar inside the limit; a dashed line follows it.
    within: usize,
    marker: &'a str,
    y_desc: &'a str,
    x_desc: &'a str,
}

/// Bars per bucket, those past the limit in their own colour, the limit
/// dashed and labelled.
fn draw_distribution(d: &Distribution) -> Result<String, Box<dyn std::error::Error>> {
    let Distribution {
        labels,
        counts,
        within: window,
        marker,
        y_desc,
        x_desc,
    } = *d;
    let mut svg = String::new();
    let hovers: String;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let top = counts.iter().copied().fold(0.0, f64::max).max(1.0) * 1.2;
        let n = counts.len() as u32;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((0u32..n).into_segmented(), 0f64..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_max_light_lines(0)
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .x_labels(labels.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc(y_desc)
            .x_desc(x_desc)
            .draw()?;
        let bars = |keep: fn(usize, usize) -> bool| {
            counts
                .iter()
                .enumerate()
                .filter(move |(i, _)| keep(*i, window))
                .map(|(i, c)| (i as u32, *c))
        };
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(WITHIN.filled())
                .margin(6)
                .data(bars(|i, w| i <= w)),
        )?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(BEYOND.filled())
                .margin(6)
                .data(bars(|i, w| i > w)),
        )?;
        draw_limit(&mut chart, window, top, marker)?;
        hovers = bar_hovers(&chart, labels, counts, top, y_desc);
        root.present()?;
    }
    with_hovers(&mut svg, &hovers);
    Ok(svg)
}

/// A distribution chart: a segment per bucket along x, counts up y.
type Bars<'a, 's> =
    ChartContext<'a, SVGBackend<'s>, Cartesian2d<SegmentedCoord<RangedCoordu32>, RangedCoordf64>>;

/// The limit as a dashed line after bar `window`, labelled `marker`.
fn draw_limit(
    chart: &mut Bars<'_, '_>,
    window: usize,
    top: f64,
    marker: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    // The limit falls between the last bar inside it and the next one.
    let edge = SegmentValue::Exact(window as u32 + 1);
    chart.draw_series(DashedLineSeries::new(
        [(edge.clone(), 0.0), (edge.clone(), top)],
        6,
        4,
        MARKER.stroke_width(2),
    ))?;
    chart.draw_series(std::iter::once(Text::new(
        format!(" {marker}"),
        (edge, top * 0.95),
        ("sans-serif", FONT).into_font().color(&MARKER),
    )))?;
    Ok(())
}

/// A hover target over each bar that says its count.
fn bar_hovers(
    chart: &Bars<'_, '_>,
    labels: &[String],
    counts: &[f64],
    top: f64,
    y_desc: &str,
) -> String {
    labels
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (label, count))| {
            let (x0, y0) = chart.backend_coord(&(SegmentValue::Exact(i as u32), top));
            let (x1, y1) = chart.backend_coord(&(SegmentValue::Exact(i as u32 + 1), 0.0));
            hover_rect((x0, y0), (x1, y1), &format!("{label}: {count:.0} {y_desc}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Not plotters' `Histogram`, which the module's drawing uses.
    use idem_domain::Histogram as Counts;

    fn totals(pairs: &[(&str, f64)]) -> Counts {
        let mut h = Counts::new();
        for (label, v) in pairs {
            h.add_label(label, *v);
        }
        h
    }

    #[test]
    fn the_delay_chart_marks_the_window_and_states_the_share_beyond_it() {
        let chart = duplicate_delays(
            "last 24h",
            &totals(&[("10", 60.0), ("300", 30.0), ("3600", 10.0)]),
        );
        assert!(
            chart
                .summary
                .starts_with("10 of 100 duplicates (10.0%) arrived more than five minutes")
        );
        let svg = chart.svg.expect("a chart");
        assert!(svg.contains("<title>Duplicate delays, last 24h</title>"));
        assert!(svg.contains("<desc>10 of 100 duplicates"));
        assert!(
            svg.contains("FIFO dedupe window (5 min)"),
            "the window is labelled"
        );
        for label in ["≤10s", "≤5m", "≤1h", "&gt;1d"] {
            assert!(svg.contains(label), "{label} labels a bar");
        }
        // Bars on both sides of the window, each in its own colour.
        assert!(svg.contains("#0550AE") && svg.contains("#BC4C00"), "{svg}");
    }

    #[test]
    fn no_duplicates_is_a_sentence_not_a_chart_of_zeros() {
        let chart = duplicate_delays("last 1h", &Counts::new());
        assert_eq!(chart.svg, None);
        assert_eq!(chart.summary, "No duplicate deliveries in the last 1h.");
    }

    #[test]
    fn delay_labels_read_as_durations() {
        let labels: Vec<String> = Metric::DuplicateDelaySeconds
            .buckets()
            .iter()
            .map(|b| delay_label(*b))
            .collect();
        assert_eq!(
            labels,
            [
                "≤1s", "≤10s", "≤30s", "≤1m", "≤2m", "≤5m", "≤10m", "≤30m", "≤1h", "≤6h", "≤1d",
                ">1d"
            ]
        );
    }

    #[test]
    fn open_unknown_outcomes_are_counted_by_age_against_the_objective() {
        let chart = open_unknown_outcomes(&[7200.0, 1000.0, 600.0, 60.0], false, 900.0);
        assert_eq!(
            chart.summary,
            "4 unknown outcomes are open, 2 of them longer than the 15 min objective; \
             the oldest for 2 h."
        );
        let svg = chart.svg.expect("a chart");
        assert!(
            svg.contains("resolve within 15 min"),
            "the objective is marked"
        );
        assert!(
            svg.contains("#0550AE") && svg.contains("#BC4C00"),
            "late bars in their own colour"
        );
        assert_eq!(
            open_unknown_outcomes(&[], false, 900.0).summary,
            "No unknown outcomes are open."
        );
        assert!(
            open_unknown_outcomes(&[60.0; 3], true, 900.0)
                .summary
                .starts_with("3+ unknown outcomes are open, 0 of them longer")
        );
    }
}
