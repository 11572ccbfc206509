//! Charts over time: one value per interval, drawn the same way for every
//! metric. A threshold (objective) is a dashed line, intervals that breach it
//! are shaded, intervals without data are marked as such (never drawn as a
//! zero), and ratios carry their traffic in a strip underneath.
//!
//! Each builder takes numbers already read and returns a [`Chart`]: the SVG,
//! and a summary in words that says what a person would look for.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{
    le_label,
    slo::{Events, Slo, Tier},
};
use plotters::prelude::*;

use super::{
    BEYOND, BREACH, FONT, GOOD, HEIGHT, MARKER, THIRD, VOLUME, WIDTH, WITHIN, accessible,
    hover_rect, with_hovers,
};
use crate::{api::Chart, format::duration};

/// Intervals without data are filled with this, so a gap reads as a gap.
const NO_DATA: RGBColor = RGBColor(238, 238, 238);
/// Gauge readings above the largest slice bound are drawn at this many seconds.
const BEYOND_SLICES: f64 = 7200.0;

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

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    fn axis_label(&self, i: usize) -> String {
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
    fn intervals(&self, first: usize, last: usize) -> String {
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

/// What a chart's values are, for the words a hover shows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Percent,
    Seconds,
    Minutes,
    /// A burn rate: how many times the budget's even pace.
    Times,
    /// A count of the thing named.
    Count(&'static str),
}

impl Unit {
    fn text(self, value: f64) -> String {
        // Never "-0".
        let value = if value == 0.0 { 0.0 } else { value };
        let number = if self == Unit::Percent && value > 99.0 && value < 100.0 {
            // Near 100% the gap is the news: 99.9996 must not read "100.00".
            // One digit past the gap's first significant digit, at most six.
            let gap_digits = (-(100.0 - value).log10()).ceil() as usize;
            let decimals = (gap_digits + 1).clamp(2, 6);
            let text = format!("{value:.decimals$}");
            if text.starts_with("100") {
                format!("{:.6}", value.min(99.999_999))
            } else {
                text
            }
        } else if value.abs() >= 100.0 || value.fract() == 0.0 {
            format!("{value:.0}")
        } else if value.abs() >= 1.0 {
            format!("{value:.2}")
        } else {
            format!("{value:.3}")
        };
        match self {
            Unit::Percent => format!("{number}%"),
            Unit::Seconds => format!("{number} s"),
            Unit::Minutes => format!("{number} min"),
            Unit::Times => format!("{number}×"),
            Unit::Count(noun) => format!("{number} {noun}"),
        }
    }
}

/// What a chart draws in its main area.
enum Marks {
    /// One or more lines; the first decides which intervals breach.
    Lines(Vec<Line>),
    /// A count per interval.
    Bars(Vec<Option<f64>>),
    /// Bars green above zero and red below.
    Signed(Vec<Option<f64>>),
}

struct Line {
    label: &'static str,
    color: RGBColor,
    values: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Breach {
    Above,
    Below,
}

struct Threshold {
    value: f64,
    label: String,
    breach: Breach,
    /// An interval with less traffic than this is too small to judge: it
    /// is drawn, but never shaded as a breach (one duplicate in forty
    /// deliveries at night is noise, not a 2.5% duplicate rate).
    min_volume: Option<f64>,
}

impl Threshold {
    fn breached_by(&self, value: f64) -> bool {
        match self.breach {
            Breach::Above => value > self.value,
            Breach::Below => value < self.value,
        }
    }
}

struct Plot<'a> {
    frame: &'a Frame,
    y_desc: &'a str,
    /// What the values are, for each interval's hover text.
    unit: Unit,
    marks: Marks,
    threshold: Option<Threshold>,
    /// The traffic behind a ratio, drawn underneath: its name and values.
    volume: Option<(&'a str, Vec<f64>)>,
    /// Fixed bounds of the value axis, where the data should not decide them.
    y_range: Option<(f64, f64)>,
}

impl Plot<'_> {
    /// Whether interval `i` has the traffic a breach needs to be judged.
    fn judged(&self, i: usize) -> bool {
        let min = self.threshold.as_ref().and_then(|t| t.min_volume);
        match (min, &self.volume) {
            (Some(min), Some((_, volume))) => volume.get(i).is_some_and(|v| *v >= min),
            _ => true,
        }
    }

    fn primary(&self) -> &[Option<f64>] {
        match &self.marks {
            Marks::Lines(lines) => lines.first().map_or(&[], |l| &l.values),
            Marks::Bars(values) | Marks::Signed(values) => values,
        }
    }

    fn all_values(&self) -> impl Iterator<Item = f64> + '_ {
        let lines: Vec<&[Option<f64>]> = match &self.marks {
            Marks::Lines(lines) => lines.iter().map(|l| l.values.as_slice()).collect(),
            Marks::Bars(values) | Marks::Signed(values) => vec![values.as_slice()],
        };
        lines.into_iter().flatten().flatten().copied()
    }

    fn y_range(&self) -> (f64, f64) {
        if let Some(range) = self.y_range {
            return range;
        }
        let threshold = self.threshold.as_ref().map(|t| t.value);
        let values = self.all_values().chain(threshold);
        let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let pad = ((hi - lo) * 0.15).max(1e-9);
        (if lo < 0.0 { lo - pad } else { 0.0 }, hi + pad)
    }

    /// The chart with its title and summary, drawn (or, if drawing fails,
    /// just the summary).
    fn into_chart(self, id: &str, title: String, summary: String) -> Chart {
        let svg = self.render(&title, &summary);
        chart(id, self.frame, title, svg, summary)
    }

    /// Draws the chart and gives it its title and summary, or logs why it could not.
    fn render(&self, title: &str, summary: &str) -> Option<String> {
        match self.draw() {
            Ok(svg) => Some(accessible(svg, title, summary)),
            Err(err) => {
                tracing::warn!(error = %err, chart = title, "could not draw a chart");
                None
            }
        }
    }

    fn draw(&self) -> Result<String, Box<dyn std::error::Error>> {
        let mut svg = String::new();
        let hovers: String;
        {
            let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
            root.fill(&WHITE)?;
            let split = if self.volume.is_some() {
                HEIGHT * 7 / 10
            } else {
                HEIGHT
            };
            let (upper, lower) = root.split_vertically(split);
            let n = self.frame.len();
            let x = 0f64..n.max(1) as f64;
            let (lo, hi) = self.y_range();
            let label = |v: &f64| self.frame.axis_label(*v as usize);
            let mut chart = ChartBuilder::on(&upper)
                .margin(12)
                .x_label_area_size(if self.volume.is_some() { 0 } else { X_LABELS })
                .y_label_area_size(Y_LABELS)
                .build_cartesian_2d(x.clone(), lo..hi)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .max_light_lines(0)
                .y_labels(5)
                .label_style(("sans-serif", FONT))
                .axis_desc_style(("sans-serif", FONT))
                .x_labels(if self.volume.is_some() { 0 } else { 5 })
                .x_label_formatter(&label)
                .y_desc(self.y_desc)
                .x_desc(if self.volume.is_some() { "" } else { "UTC" })
                .draw()?;
            // One hover target per interval, or per run of intervals where
            // single ones would be narrower than a pointer can find.
            let plot_width =
                chart.backend_coord(&(n as f64, lo)).0 - chart.backend_coord(&(0.0, lo)).0;
            let targets = n.min((plot_width.max(0) as usize / MIN_HOVER_PX).max(1));
            hovers = (0..targets)
                .map(|t| {
                    // Runs of equal length, give or take one interval.
                    let (start, end) = (t * n / targets, (t + 1) * n / targets);
                    let from = chart.backend_coord(&(start as f64, hi));
                    let to = chart.backend_coord(&(end as f64, lo));
                    hover_rect(from, to, &self.hover_text(start..end))
                })
                .collect();
            let band = |i: usize, color: RGBColor| {
                Rectangle::new([(i as f64, lo), (i as f64 + 1.0, hi)], color.filled())
            };
            // No data: a grey band, so a gap never reads as a zero.
            let primary = self.primary();
            chart.draw_series(
                primary
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_none())
                    .map(|(i, _)| band(i, NO_DATA)),
            )?;
            // Breaches: shaded behind the data.
            if let Some(threshold) = &self.threshold {
                chart.draw_series(primary.iter().enumerate().filter_map(|(i, v)| {
                    v.filter(|v| threshold.breached_by(*v) && self.judged(i))
                        .map(|_| band(i, BREACH))
                }))?;
            }
            match &self.marks {
                Marks::Lines(lines) => {
                    for line in lines {
                        let color = line.color;
                        for (first, run) in runs(&line.values).into_iter().enumerate() {
                            if run.len() == 1 {
                                chart.draw_series(
                                    run.iter().map(|p| Circle::new(*p, 3, color.filled())),
                                )?;
                                continue;
                            }
                            let series =
                                chart.draw_series(LineSeries::new(run, color.stroke_width(2)))?;
                            if first == 0 && lines.len() > 1 {
                                series.label(line.label).legend(move |(x, y)| {
                                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                                });
                            }
                        }
                    }
                    if lines.len() > 1 {
                        chart
                            .configure_series_labels()
                            .position(SeriesLabelPosition::UpperLeft)
                            .label_font(("sans-serif", FONT))
                            .background_style(WHITE.mix(0.85))
                            .border_style(VOLUME)
                            .draw()?;
                    }
                }
                Marks::Bars(values) | Marks::Signed(values) => {
                    let signed = matches!(self.marks, Marks::Signed(_));
                    chart.draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                        v.map(|v| {
                            let color = match () {
                                _ if !signed => WITHIN,
                                _ if v >= 0.0 => GOOD,
                                _ => MARKER,
                            };
                            Rectangle::new(
                                [(i as f64 + 0.1, 0.0), (i as f64 + 0.9, v)],
                                color.filled(),
                            )
                        })
                    }))?;
                }
            }
            if let Some(threshold) = &self.threshold {
                let at = threshold.value;
                chart.draw_series(DashedLineSeries::new(
                    [(0.0, at), (n as f64, at)],
                    8,
                    5,
                    MARKER.stroke_width(2),
                ))?;
                chart.draw_series(std::iter::once(Text::new(
                    threshold.label.clone(),
                    (n as f64 * 0.62, at),
                    ("sans-serif", FONT).into_font().color(&MARKER),
                )))?;
            }
            if let Some((name, volume)) = &self.volume {
                let top = volume.iter().copied().fold(0.0, f64::max).max(1.0);
                let mut strip = ChartBuilder::on(&lower)
                    .margin(12)
                    .x_label_area_size(X_LABELS)
                    .y_label_area_size(Y_LABELS)
                    .build_cartesian_2d(x, 0f64..top)?;
                strip
                    .configure_mesh()
                    .disable_x_mesh()
                    .disable_y_mesh()
                    .y_labels(2)
                    .label_style(("sans-serif", FONT))
                    .axis_desc_style(("sans-serif", FONT))
                    .y_desc(*name)
                    .x_labels(5)
                    .x_label_formatter(&label)
                    .x_desc("UTC")
                    .draw()?;
                strip.draw_series(volume.iter().enumerate().map(|(i, v)| {
                    Rectangle::new(
                        [(i as f64 + 0.1, 0.0), (i as f64 + 0.9, *v)],
                        VOLUME.filled(),
                    )
                }))?;
            }
            root.present()?;
        }
        with_hovers(&mut svg, &hovers);
        Ok(svg)
    }

    /// Interval `i` when hovered: when, each line's value (or "no data"),
    /// and the traffic behind a ratio.
    fn hover_text(&self, intervals: std::ops::Range<usize>) -> String {
        let (first, last) = (intervals.start, intervals.end.saturating_sub(1));
        // One interval's value, or a run's lowest and highest.
        let value = |values: &[Option<f64>]| {
            let known: Vec<f64> = values
                .get(intervals.clone())
                .unwrap_or_default()
                .iter()
                .flatten()
                .copied()
                .collect();
            let lowest = known.iter().copied().fold(f64::INFINITY, f64::min);
            let highest = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            match known.len() {
                0 => "no data".to_owned(),
                _ if lowest == highest => self.unit.text(lowest),
                _ => format!("{} to {}", self.unit.text(lowest), self.unit.text(highest)),
            }
        };
        let values = match &self.marks {
            Marks::Lines(lines) if lines.len() > 1 => lines
                .iter()
                .map(|l| format!("{} {}", l.label, value(&l.values)))
                .collect::<Vec<_>>()
                .join(", "),
            Marks::Lines(lines) => lines.first().map_or_else(String::new, |l| value(&l.values)),
            Marks::Bars(values) | Marks::Signed(values) => value(values),
        };
        let traffic = match &self.volume {
            Some((name, volume)) => {
                // Folded from +0: an empty sum of floats is -0, "-0 outcomes".
                let total = volume
                    .get(intervals.clone())
                    .unwrap_or_default()
                    .iter()
                    .fold(0.0, |sum, v| sum + v);
                format!(" ({total:.0} {name})")
            }
            None => String::new(),
        };
        format!("{}: {values}{traffic}", self.frame.intervals(first, last))
    }
}

/// The narrowest a hover target is drawn, in the drawing's pixels (give or
/// take one for rounding).
const MIN_HOVER_PX: usize = 5;

/// Room for the axes' labels at [`FONT`].
const X_LABELS: u32 = 44;
const Y_LABELS: u32 = 80;

/// The runs of consecutive values, as points at the middle of their
/// intervals: a line is drawn per run, so it breaks where data is missing.
fn runs(values: &[Option<f64>]) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(v) => run.push((i as f64 + 0.5, *v)),
            None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
            None => {}
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

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

fn percent(share: f64) -> String {
    match share {
        0.0 => "0%".to_owned(),
        s if s < 0.001 => format!("{:.3}%", s * 100.0),
        s if s < 0.01 => format!("{:.2}%", s * 100.0),
        s => format!("{:.1}%", s * 100.0),
    }
}

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

fn gaps_sentence(gaps: usize) -> String {
    match gaps {
        0 => String::new(),
        1 => " 1 interval had no data and is left blank.".to_owned(),
        n => format!(" {n} intervals had no data and are left blank."),
    }
}

/// The worst reading of a gauge (an oldest age) per interval, from the
/// consumer-minutes counted per slice bound, against a threshold. Readings
/// are known to the slice bound: "at most 2 min".
pub fn gauge_worst(
    id: &str,
    title: &str,
    frame: &Frame,
    what: &str,
    slices: &[HashMap<String, f64>],
    threshold_seconds: Option<f64>,
) -> Chart {
    let title = format!("{title}, {}", frame.label);
    let worst: Vec<Option<f64>> = slices
        .iter()
        .map(|s| {
            s.iter()
                .filter(|(_, minutes)| **minutes > 0.0)
                .map(|(bound, _)| bound.parse().unwrap_or(f64::INFINITY))
                .fold(None, |w: Option<f64>, b| Some(w.map_or(b, |w| w.max(b))))
        })
        .collect();
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

/// The `q` quantile of a histogram held as per-bucket counts (not
/// cumulative), interpolated linearly inside its bucket as Prometheus's
/// `histogram_quantile` does; in the `+Inf` bucket, the largest finite bound.
pub fn histogram_quantile(q: f64, counts: &HashMap<String, f64>, bounds: &[f64]) -> Option<f64> {
    let total: f64 = counts.values().sum();
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut below = 0.0;
    let mut lower = 0.0;
    for bound in bounds {
        let here = counts.get(&le_label(*bound)).copied().unwrap_or(0.0);
        if below + here >= rank && here > 0.0 {
            if bound.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (bound - lower) * (rank - below) / here);
        }
        below += here;
        if bound.is_finite() {
            lower = *bound;
        }
    }
    Some(lower)
}

/// Delivery-to-outcome latency per interval (p50, p95, p99) against the
/// reconciliation threshold; intervals whose p99 is over it are shaded.
pub fn outcome_latency(
    frame: &Frame,
    histograms: &[HashMap<String, f64>],
    bounds: &[f64],
    threshold_seconds: Option<f64>,
) -> Chart {
    let id = "outcome-latency";
    let title = format!("Delivery to outcome, {}", frame.label);
    let quantile = |q: f64| -> Vec<Option<f64>> {
        histograms
            .iter()
            .map(|h| histogram_quantile(q, h, bounds))
            .collect()
    };
    let (p99, p95, p50) = (quantile(0.99), quantile(0.95), quantile(0.5));
    let with_data = p50.iter().flatten().count();
    if with_data == 0 {
        let summary = format!("No outcomes recorded in the {}.", frame.label);
        return chart(id, frame, title, None, summary);
    }
    let mut all: HashMap<String, f64> = HashMap::new();
    for h in histograms {
        for (bucket, n) in h {
            *all.entry(bucket.clone()).or_default() += n;
        }
    }
    let overall = |q| {
        histogram_quantile(q, &all, bounds).map_or("?".to_owned(), |s| duration(s.round() as i64))
    };
    let threshold = threshold_seconds.map(|t| Threshold {
        value: t,
        label: format!("threshold {}", duration(t as i64)),
        breach: Breach::Above,
        min_volume: None,
    });
    let mut summary = format!(
        "Over all {:.0} outcomes in the {}: p50 {}, p95 {}, p99 {}.",
        all.values().sum::<f64>(),
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
    let volume = histograms.iter().map(|h| h.values().sum()).collect();
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

#[cfg(test)]
mod tests {
    use idem_domain::{Metric, slo::TIERS};

    use super::*;

    fn frame(n: usize) -> Frame {
        let start = DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z")
            .unwrap()
            .to_utc();
        Frame::new(
            "last 7h",
            start,
            start + TimeDelta::hours(n as i64),
            TimeDelta::hours(1),
        )
    }

    #[test]
    fn a_percentage_just_short_of_100_never_reads_as_100() {
        assert_eq!(Unit::Percent.text(99.9996), "99.99960%");
        assert_eq!(Unit::Percent.text(99.95), "99.950%");
        assert_eq!(Unit::Percent.text(99.5), "99.50%");
        assert_eq!(Unit::Percent.text(100.0), "100%");
        assert_eq!(Unit::Percent.text(87.25), "87.25%");
        assert!(!Unit::Percent.text(99.999_999_9).starts_with("100"));
        assert_eq!(Unit::Seconds.text(-0.0), "0 s");
    }

    fn slo(name: &str) -> Slo {
        idem_domain::slo::default_slos()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap()
    }

    fn events(pairs: &[Option<(f64, f64)>]) -> Vec<Events> {
        pairs
            .iter()
            .map(|e| {
                let (good, valid) = e.unwrap_or((0.0, 0.0));
                Events::new(good, valid)
            })
            .collect()
    }

    /// How many times a colour fills a shape (`fill="#…"`), as plotters writes it.
    fn fills(svg: &str, color: RGBColor) -> usize {
        let RGBColor(r, g, b) = color;
        svg.matches(&format!("fill=\"#{r:02X}{g:02X}{b:02X}\""))
            .count()
    }

    fn polylines(svg: &str, color: RGBColor) -> usize {
        let RGBColor(r, g, b) = color;
        let stroke = format!("#{r:02X}{g:02X}{b:02X}");
        svg.split("<polyline")
            .skip(1)
            .filter(|p| p.split('>').next().unwrap_or_default().contains(&stroke))
            .count()
    }

    fn dashes(svg: &str) -> usize {
        let RGBColor(r, g, b) = MARKER;
        svg.matches(&format!("stroke=\"#{r:02X}{g:02X}{b:02X}\""))
            .count()
    }

    #[test]
    fn an_sli_chart_has_its_objective_dashed_breaches_shaded_and_gaps_left_blank() {
        let ok = Some((1000.0, 1000.0));
        let bad = Some((950.0, 1000.0));
        let chart = sli_over_time(
            &slo("not-dead-lettered"),
            &frame(7),
            &events(&[ok, ok, bad, None, None, ok, ok]),
        );
        assert_eq!(
            chart.summary,
            "1 of 5 intervals with 100 events or more were below the objective of 99.900%; \
             2 intervals had no valid events and are left blank."
        );
        let svg = chart.svg.expect("a chart");
        assert!(svg.contains("<title>not-dead-lettered: SLI over 28d</title>"));
        assert!(dashes(&svg) > 5, "the objective is a dashed line");
        assert_eq!(fills(&svg, BREACH), 1, "one breach shaded");
        assert_eq!(fills(&svg, NO_DATA), 2, "two intervals marked as no data");
        assert_eq!(polylines(&svg, WITHIN), 2, "the line breaks at the gap");
    }

    #[test]
    fn every_interval_says_when_it_was_its_value_and_its_traffic_on_hover() {
        let slo = slo("not-dead-lettered");
        let chart = sli_over_time(
            &slo,
            &frame(3),
            &events(&[Some((995.0, 1000.0)), None, Some((1000.0, 1000.0))]),
        );
        let svg = chart.svg.expect("a chart");
        let titles: Vec<&str> = svg
            .split("<rect class=\"hover\"")
            .skip(1)
            .map(|r| {
                r.split("<title>")
                    .nth(1)
                    .unwrap()
                    .split("</title>")
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(titles.len(), 3, "one per interval");
        assert!(
            titles[0].starts_with("2026-11-01 00:00–01:00 UTC"),
            "{}",
            titles[0]
        );
        assert!(
            titles[0].ends_with("UTC: 99.50% (1000 events)"),
            "{}",
            titles[0]
        );
        assert!(
            titles[1].ends_with("UTC: no data (0 events)"),
            "{}",
            titles[1]
        );
        assert!(titles[2].contains("100%"), "{}", titles[2]);
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>')?.1.split("</text>").next())
            .map(str::trim)
            .collect();
        assert!(
            texts.contains(&"UTC"),
            "the time axis names its zone: {texts:?}"
        );
    }

    #[test]
    fn a_long_chart_groups_its_intervals_into_hover_targets_a_pointer_can_find() {
        let slo = slo("not-dead-lettered");
        let start = DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let frame = Frame::new(
            "last 28d",
            start,
            start + TimeDelta::days(28),
            TimeDelta::hours(1),
        );
        let events: Vec<Events> = (0..672)
            .map(|i| Events::new(999.0 - (i % 3) as f64, 1000.0))
            .collect();
        let svg = sli_over_time(&slo, &frame, &events).svg.unwrap();
        let targets: Vec<(i32, &str)> = svg
            .split("<rect class=\"hover\"")
            .skip(1)
            .map(|r| {
                let width = r
                    .split("width=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let title = r
                    .split("<title>")
                    .nth(1)
                    .unwrap()
                    .split("</title>")
                    .next()
                    .unwrap();
                (width.parse().unwrap(), title)
            })
            .collect();
        assert!(
            targets.len() < 672 && targets.len() >= 100,
            "{} targets",
            targets.len()
        );
        assert!(targets.iter().all(|(width, _)| *width >= 4), "{targets:?}");
        assert!(
            targets[0].1.starts_with("2026-11-01 00:00–"),
            "{}",
            targets[0].1
        );
        assert!(
            targets[0].1.contains(" to "),
            "a run states its range: {}",
            targets[0].1
        );
    }

    #[test]
    fn an_sli_chart_without_events_is_a_sentence() {
        let chart = sli_over_time(&slo("not-dead-lettered"), &frame(2), &events(&[None, None]));
        assert_eq!(chart.svg, None);
        assert_eq!(chart.summary, "No valid events in the last 28d.");
    }

    #[test]
    fn the_duplicate_share_marks_its_objective_and_the_intervals_over_it() {
        let valid = [Some(1000.0), Some(1000.0), None, Some(500.0), Some(40.0)];
        let bad = [5.0, 30.0, 0.0, 5.0, 1.0];
        let chart = bad_share(
            "duplicate-rate",
            "Duplicate claims",
            &frame(5),
            "hit an existing claim",
            &valid,
            &bad,
            Some(Allowed {
                share: 0.01,
                min_deliveries: 100.0,
            }),
        );
        assert_eq!(
            chart.summary,
            "41 of 2540 deliveries (1.6%) hit an existing claim in the last 7h. \
             1 of 3 intervals with 100 deliveries or more were over the objective of 1.0%. \
             1 interval had no data and is left blank."
        );
        let svg = chart.svg.expect("a chart");
        assert!(dashes(&svg) > 5, "the objective is a dashed line");
        assert!(svg.contains("objective ≤ 1.0%"));
        assert_eq!(
            fills(&svg, BREACH),
            1,
            "the 3% interval is shaded; one duplicate in forty deliveries is too few to judge"
        );
        assert_eq!(fills(&svg, NO_DATA), 1, "a gap, not a zero");
        assert_eq!(fills(&svg, VOLUME), 5, "traffic beside the ratio");
    }

    #[test]
    fn a_gauge_chart_reads_the_worst_slice_and_shades_minutes_over_the_threshold() {
        let slices = |pairs: &[(&str, f64)]| -> HashMap<String, f64> {
            pairs.iter().map(|(b, n)| ((*b).to_owned(), *n)).collect()
        };
        let chart = gauge_worst(
            "queue-age",
            "Oldest queued message",
            &frame(3),
            "oldest queued message",
            &[
                slices(&[("5", 50.0), ("30", 10.0)]),
                HashMap::new(),
                slices(&[("5", 50.0), ("120", 1.0)]),
            ],
            Some(60.0),
        );
        assert_eq!(
            chart.summary,
            "The oldest queued message was at most 2 min at its worst in the last 7h. \
             1 of 2 intervals with readings went over 1 min. \
             1 interval had no data and is left blank."
        );
        let svg = chart.svg.expect("a chart");
        assert_eq!(fills(&svg, BREACH), 1);
        assert_eq!(fills(&svg, NO_DATA), 1);
        assert!(dashes(&svg) > 5);
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let bounds = Metric::OutcomeLatencySeconds.buckets();
        let counts: HashMap<String, f64> = [("1", 50.0), ("5", 40.0), ("900", 9.0), ("+Inf", 1.0)]
            .iter()
            .map(|(b, n)| ((*b).to_owned(), *n))
            .collect();
        // 50 at ≤1 s: the median is the top of the first bucket.
        assert_eq!(histogram_quantile(0.5, &counts, bounds), Some(1.0));
        // p90: rank 90 is the last of the ≤5 s bucket.
        assert_eq!(histogram_quantile(0.9, &counts, bounds), Some(5.0));
        // p95: 5 of 9 into (300, 900].
        let p95 = histogram_quantile(0.95, &counts, bounds).unwrap();
        assert!((p95 - (300.0 + 600.0 * 5.0 / 9.0)).abs() < 1e-9, "{p95}");
        // p100 falls in +Inf: the largest finite bound.
        assert_eq!(histogram_quantile(1.0, &counts, bounds), Some(3600.0));
        assert_eq!(histogram_quantile(0.5, &HashMap::new(), bounds), None);
    }

    #[test]
    fn budget_remaining_is_green_above_zero_and_red_below() {
        // Objective 99.9%: 1000 deliveries allow one bad one.
        let chart = budget_over_time(
            &slo("not-dead-lettered"),
            &frame(3),
            &events(&[
                Some((1000.0, 1000.0)),
                Some((999.0, 1000.0)),
                Some((997.0, 1000.0)),
            ]),
        );
        // After 3000 events with 4 bad: 4 / 3 allowed → −33.3% left.
        assert!(
            chart.summary.starts_with(
                "-33.3% of the error budget remains. It was overspent from 2026-11-01 02:00"
            ),
            "{}",
            chart.summary
        );
        let svg = chart.svg.expect("a chart");
        assert_eq!(fills(&svg, GOOD), 2, "two intervals with budget left");
        assert_eq!(fills(&svg, MARKER), 1, "one overspent");
    }

    #[test]
    fn a_burn_rate_chart_shows_its_tier_threshold_scaled_to_the_window() {
        let slo = slo("not-dead-lettered");
        let page = TIERS[0];
        let chart = burn_rate(
            &slo,
            &page,
            &frame(3),
            &events(&[Some((1000.0, 1000.0)), Some((980.0, 1000.0)), None]),
        );
        // 28-day window: 14.4 × 28 / 30 = 13.44; 2% errors is 20× the 0.1% budget.
        assert!(chart.title.ends_with("(page at 13.44×)"), "{}", chart.title);
        assert!(
            chart
                .summary
                .starts_with("The 1h burn rate was over 13.44× at 1 of 2 hourly readings"),
            "{}",
            chart.summary
        );
        let svg = chart.svg.expect("a chart");
        assert_eq!(fills(&svg, BREACH), 1);
        assert_eq!(fills(&svg, NO_DATA), 1);
    }

    #[test]
    fn recovery_times_state_the_median_and_the_slowest() {
        let f = frame(3);
        let at = |h: i64| f.starts[0] + TimeDelta::hours(h) + TimeDelta::minutes(10);
        let chart = recovery_times(
            &f,
            &[(at(0), 600.0), (at(0), 1200.0), (at(2), 7200.0)],
            Some(3600.0),
        );
        assert_eq!(
            chart.summary,
            "3 recoveries in the last 7h: median 20 min, slowest 2 h. 1 took longer than 1 h."
        );
        let svg = chart.svg.expect("a chart");
        assert_eq!(fills(&svg, BREACH), 1);
        assert_eq!(fills(&svg, NO_DATA), 1);
    }

    #[test]
    fn outcome_latency_draws_three_quantiles_and_shades_a_p99_over_the_threshold() {
        let bounds = Metric::OutcomeLatencySeconds.buckets();
        let histogram = |pairs: &[(&str, f64)]| -> HashMap<String, f64> {
            pairs.iter().map(|(b, n)| ((*b).to_owned(), *n)).collect()
        };
        let chart = outcome_latency(
            &frame(3),
            &[
                histogram(&[("1", 100.0)]),
                HashMap::new(),
                histogram(&[("1", 90.0), ("3600", 10.0)]),
            ],
            bounds,
            Some(900.0),
        );
        assert!(
            chart
                .summary
                .starts_with("Over all 200 outcomes in the last 7h: p50 "),
            "{}",
            chart.summary
        );
        assert!(
            chart
                .summary
                .contains("1 of 2 intervals had a p99 over 15 min.")
        );
        let svg = chart.svg.expect("a chart");
        for quantile in ["p50", "p95", "p99"] {
            assert!(svg.contains(quantile), "{quantile} in the legend");
        }
        assert!(
            svg.contains("UTC: p99 no data, p95 no data, p50 no data (0 outcomes)</title>"),
            "an interval without outcomes says so, not \"-0 outcomes\""
        );
        assert_eq!(fills(&svg, BREACH), 1);
        assert_eq!(fills(&svg, NO_DATA), 1);
        assert!(dashes(&svg) > 5);
    }

    #[test]
    fn unknown_outcomes_mark_unreported_intervals_as_gaps_not_zeros() {
        let chart = new_unknown_outcomes(&frame(3), &[true, false, true], &[2.0, 0.0, 0.0]);
        assert_eq!(
            chart.summary,
            "2 outcomes became unknown in the last 7h. 1 interval had no data and is left blank."
        );
        let svg = chart.svg.expect("a chart");
        assert_eq!(fills(&svg, NO_DATA), 1, "the unreported interval");
        assert_eq!(
            fills(&svg, WITHIN),
            2,
            "a bar for 2 and a zero-height bar for 0"
        );
    }
}
