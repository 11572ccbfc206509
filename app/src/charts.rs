//! Charts drawn on the server with plotters' SVG backend (server only).
//!
//! Each chart gets a `<title>` and a `<desc>` inside its SVG, and the same
//! summary in words beside it, so it is readable without JavaScript, without
//! colour and to a screen reader. Nothing to draw means no chart and a
//! sentence saying so, never a chart of zeros.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use idem_domain::{
    FIFO_DEDUPE_WINDOW_SECONDS, Metric, le_label,
    slo::{Events, Slo},
};
use plotters::prelude::*;

use crate::api::Chart;

const WIDTH: u32 = 760;
const HEIGHT: u32 = 320;
const WITHIN: RGBColor = RGBColor(5, 80, 174);
const BEYOND: RGBColor = RGBColor(188, 76, 0);
const MARKER: RGBColor = RGBColor(164, 14, 38);
const BREACH: RGBColor = RGBColor(255, 205, 210);
const VOLUME: RGBColor = RGBColor(175, 184, 193);

/// The duplicate delay distribution: how long after a key's first delivery
/// each duplicate arrived, with the five-minute FIFO dedupe window marked and
/// the share of duplicates beyond it stated.
pub fn duplicate_delays(range: &str, totals: &HashMap<String, f64>) -> Chart {
    let title = format!("Duplicate delays, last {range}");
    let bounds = Metric::DuplicateDelaySeconds.buckets();
    let counts: Vec<f64> = bounds
        .iter()
        .map(|b| totals.get(&le_label(*b)).copied().unwrap_or(0.0))
        .collect();
    let total: f64 = counts.iter().sum();
    if total <= 0.0 {
        return Chart {
            range: range.to_owned(),
            title,
            svg: None,
            summary: format!("No duplicate deliveries in the last {range}."),
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
    let svg = match draw_delays(&labels, &counts, window) {
        Ok(svg) => Some(accessible(svg, &title, &summary)),
        Err(err) => {
            tracing::warn!(error = %err, "could not draw the duplicate delay chart");
            None
        }
    };
    Chart {
        range: range.to_owned(),
        title,
        svg,
        summary,
    }
}

/// One SLO's SLI per bucket over its window: the objective dashed, buckets
/// below it shaded, buckets without events left as gaps (never a zero), and
/// the traffic behind each ratio in a strip underneath.
pub fn sli_over_time(slo: &Slo, buckets: &[(DateTime<Utc>, Events)]) -> Chart {
    let title = format!("{}: SLI over {}", slo.name, slo.window);
    let objective = slo.objective.get();
    let ratios: Vec<Option<f64>> = buckets.iter().map(|(_, e)| e.ratio()).collect();
    let with_data = ratios.iter().flatten().count();
    if with_data == 0 {
        return Chart {
            range: slo.window.to_string(),
            title,
            svg: None,
            summary: format!("No valid events in the last {}.", slo.window),
        };
    }
    let breached = ratios.iter().flatten().filter(|r| **r < objective).count();
    let gaps = ratios.len() - with_data;
    let summary = format!(
        "{breached} of {with_data} intervals with traffic were below the objective of {:.3}%; \
         {gaps} intervals had no valid events and are left blank.",
        objective * 100.0
    );
    let svg = match draw_sli(buckets, &ratios, objective) {
        Ok(svg) => Some(accessible(svg, &title, &summary)),
        Err(err) => {
            tracing::warn!(error = %err, "could not draw an SLI chart");
            None
        }
    };
    Chart {
        range: slo.window.to_string(),
        title,
        svg,
        summary,
    }
}

fn draw_sli(
    buckets: &[(DateTime<Utc>, Events)],
    ratios: &[Option<f64>],
    objective: f64,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let (upper, lower) = root.split_vertically(HEIGHT * 7 / 10);
        let n = buckets.len();
        let lowest = ratios.iter().flatten().copied().fold(objective, f64::min);
        let floor = (lowest - (1.0 - objective)).max(0.0) * 100.0;
        let mut chart = ChartBuilder::on(&upper)
            .margin(12)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, floor..100.0)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("SLI %")
            .draw()?;
        // Breaches shaded behind the line.
        chart.draw_series(ratios.iter().enumerate().filter_map(|(i, r)| {
            r.filter(|r| *r < objective).map(|_| {
                Rectangle::new(
                    [(i as f64, floor), (i as f64 + 1.0, 100.0)],
                    BREACH.filled(),
                )
            })
        }))?;
        // The objective, dashed.
        chart.draw_series(DashedLineSeries::new(
            [(0.0, objective * 100.0), (n as f64, objective * 100.0)],
            8,
            5,
            MARKER.stroke_width(2),
        ))?;
        // The SLI, one line per run of buckets with data: a gap is a gap.
        let mut run: Vec<(f64, f64)> = Vec::new();
        let mut runs = Vec::new();
        for (i, r) in ratios.iter().enumerate() {
            match r {
                Some(r) => run.push((i as f64 + 0.5, r * 100.0)),
                None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
                None => {}
            }
        }
        if !run.is_empty() {
            runs.push(run);
        }
        for run in runs {
            chart.draw_series(LineSeries::new(run, WITHIN.stroke_width(2)))?;
        }
        // Traffic: valid events per bucket.
        let top = buckets
            .iter()
            .map(|(_, e)| e.valid)
            .fold(0.0, f64::max)
            .max(1.0);
        let mut volume = ChartBuilder::on(&lower)
            .margin(12)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
        let first = buckets.first().map(|(t, _)| *t);
        let step = buckets
            .get(1)
            .zip(first)
            .map(|((t, _), f)| *t - f)
            .unwrap_or_default();
        volume
            .configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .y_labels(3)
            .y_desc("events")
            .x_labels(6)
            .x_label_formatter(&|x| {
                first
                    .map(|f| (f + step * (*x as i32)).format("%m-%d %H:%M").to_string())
                    .unwrap_or_default()
            })
            .draw()?;
        volume.draw_series(buckets.iter().enumerate().map(|(i, (_, e))| {
            Rectangle::new(
                [(i as f64 + 0.1, 0.0), (i as f64 + 0.9, e.valid)],
                VOLUME.filled(),
            )
        }))?;
        root.present()?;
    }
    Ok(svg)
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

fn draw_delays(
    labels: &[String],
    counts: &[f64],
    window: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let top = counts.iter().copied().fold(0.0, f64::max).max(1.0) * 1.2;
        let n = counts.len() as u32;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0u32..n).into_segmented(), 0f64..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(labels.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("duplicates")
            .x_desc("time since the key's first delivery")
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
        // The window ends between the ≤5m bar and the next one.
        let edge = SegmentValue::Exact(window as u32 + 1);
        chart.draw_series(DashedLineSeries::new(
            [(edge.clone(), 0.0), (edge.clone(), top)],
            6,
            4,
            MARKER.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            " FIFO dedupe window (5 min)",
            (edge, top * 0.95),
            ("sans-serif", 13).into_font().color(&MARKER),
        )))?;
        root.present()?;
    }
    Ok(svg)
}

/// Gives an SVG a title and a description (read by screen readers and shown
/// as a tooltip), and lets it scale to its container.
fn accessible(svg: String, title: &str, summary: &str) -> String {
    let Some(open_end) = svg
        .find("<svg")
        .and_then(|at| svg[at..].find('>').map(|e| at + e))
    else {
        return svg;
    };
    format!(
        "{} role=\"img\"><title>{}</title><desc>{}</desc>{}",
        &svg[..open_end],
        xml_escape(title),
        xml_escape(summary),
        &svg[open_end + 1..]
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
        pairs.iter().map(|(b, v)| ((*b).to_owned(), *v)).collect()
    }

    #[test]
    fn the_delay_chart_marks_the_window_and_states_the_share_beyond_it() {
        let chart = duplicate_delays(
            "24h",
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
        let chart = duplicate_delays("1h", &HashMap::new());
        assert_eq!(chart.svg, None);
        assert_eq!(chart.summary, "No duplicate deliveries in the last 1h.");
    }

    fn slo() -> Slo {
        idem_domain::slo::default_slos()
            .into_iter()
            .find(|s| s.name == "not-dead-lettered")
            .unwrap()
    }

    fn hours(events: &[Option<(f64, f64)>]) -> Vec<(DateTime<Utc>, Events)> {
        let start = DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z")
            .unwrap()
            .to_utc();
        events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let (good, valid) = e.unwrap_or((0.0, 0.0));
                (
                    start + chrono::TimeDelta::hours(i as i64),
                    Events::new(good, valid),
                )
            })
            .collect()
    }

    #[test]
    fn an_sli_chart_has_its_objective_dashed_breaches_shaded_and_gaps_left_blank() {
        let ok = Some((1000.0, 1000.0));
        let bad = Some((950.0, 1000.0));
        let chart = sli_over_time(&slo(), &hours(&[ok, ok, bad, None, None, ok, ok]));
        assert_eq!(
            chart.summary,
            "1 of 5 intervals with traffic were below the objective of 99.900%; \
             2 intervals had no valid events and are left blank."
        );
        let svg = chart.svg.expect("a chart");
        assert!(svg.contains("<title>not-dead-lettered: SLI over 28d</title>"));
        // The dashed objective is drawn as many short strokes in its colour.
        assert!(svg.matches("#A40E26").count() > 5, "dashed objective line");
        // One shaded breach.
        assert_eq!(svg.matches("#FFCDD2").count(), 1, "one breach shaded");
        // The SLI line breaks at the gap: two separate polylines.
        let sli_lines = svg
            .split("<polyline")
            .skip(1)
            .filter(|p| p.contains("#0550AE"))
            .count();
        assert_eq!(sli_lines, 2, "a gap, not a zero");
    }

    #[test]
    fn an_sli_chart_without_events_is_a_sentence() {
        let chart = sli_over_time(&slo(), &hours(&[None, None]));
        assert_eq!(chart.svg, None);
        assert_eq!(chart.summary, "No valid events in the last 28d.");
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
}
