//! How a chart over time is drawn: what it shows ([`Plot`]) and the steps
//! that draw it with plotters.

use std::{error::Error, ops::Range};

use plotters::{coord::Shift, coord::types::RangedCoordf64, prelude::*};

use super::{Frame, chart};
use crate::{
    api::Chart,
    charts::{
        BREACH, FONT, GOOD, HEIGHT, MARKER, VOLUME, WIDTH, WITHIN, accessible, hover_rect,
        with_hovers,
    },
};

/// Intervals without data are filled with this, so a gap reads as a gap.
pub(super) const NO_DATA: RGBColor = RGBColor(238, 238, 238);

/// A drawing area of the SVG being drawn.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A chart with intervals along x and values up y.
type Ctx<'a, 's> = ChartContext<'a, SVGBackend<'s>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What a chart's values are, for the words a hover shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Unit {
    Percent,
    Seconds,
    Minutes,
    /// A burn rate: how many times the budget's even pace.
    Times,
    /// A count of the thing named.
    Count(&'static str),
}

impl Unit {
    /// `value` as a person reads it, with its unit.
    pub(super) fn text(self, value: f64) -> String {
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
pub(super) enum Marks {
    /// One or more lines; the first decides which intervals breach.
    Lines(Vec<Line>),
    /// A count per interval.
    Bars(Vec<Option<f64>>),
    /// Bars green above zero and red below.
    Signed(Vec<Option<f64>>),
}

/// One line of a chart: its legend label, colour and value per interval.
pub(super) struct Line {
    pub(super) label: &'static str,
    pub(super) color: RGBColor,
    pub(super) values: Vec<Option<f64>>,
}

/// Which side of a threshold is a breach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Breach {
    Above,
    Below,
}

/// A dashed line across the chart, and the side of it that breaches.
pub(super) struct Threshold {
    pub(super) value: f64,
    pub(super) label: String,
    pub(super) breach: Breach,
    /// An interval with less traffic than this is too small to judge: it
    /// is drawn, but never shaded as a breach (one duplicate in forty
    /// deliveries at night is noise, not a 2.5% duplicate rate).
    pub(super) min_volume: Option<f64>,
}

impl Threshold {
    /// Whether `value` is on the breaching side.
    pub(super) fn breached_by(&self, value: f64) -> bool {
        match self.breach {
            Breach::Above => value > self.value,
            Breach::Below => value < self.value,
        }
    }
}

/// A chart over time: what it draws, and against what.
pub(super) struct Plot<'a> {
    pub(super) frame: &'a Frame,
    pub(super) y_desc: &'a str,
    /// What the values are, for each interval's hover text.
    pub(super) unit: Unit,
    pub(super) marks: Marks,
    pub(super) threshold: Option<Threshold>,
    /// The traffic behind a ratio, drawn underneath: its name and values.
    pub(super) volume: Option<(&'a str, Vec<f64>)>,
    /// Fixed bounds of the value axis, where the data should not decide them.
    pub(super) y_range: Option<(f64, f64)>,
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
        // Counts are whole: a span of zeros still gets an axis up to one.
        let hi = match self.unit {
            Unit::Count(_) => hi.max(1.0),
            _ => hi,
        };
        let pad = ((hi - lo) * 0.15).max(1e-9);
        (if lo < 0.0 { lo - pad } else { 0.0 }, hi + pad)
    }

    /// The chart with its title and summary, drawn (or, if drawing fails,
    /// just the summary).
    pub(super) fn into_chart(self, id: &str, title: String, summary: String) -> Chart {
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

    /// Draws the chart as an SVG, with a hover target over every interval.
    fn draw(&self) -> Result<String, Box<dyn Error>> {
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
            let (lo, hi) = self.y_range();
            let mut chart = self.main_chart(&upper, lo, hi)?;
            hovers = self.hovers(&chart, lo, hi);
            self.draw_bands(&mut chart, lo, hi)?;
            match &self.marks {
                Marks::Lines(lines) => draw_lines(&mut chart, lines)?,
                Marks::Bars(values) => draw_bars(&mut chart, values, false)?,
                Marks::Signed(values) => draw_bars(&mut chart, values, true)?,
            }
            if let Some(threshold) = &self.threshold {
                draw_threshold(&mut chart, threshold, self.frame.len())?;
            }
            if let Some((name, volume)) = &self.volume {
                self.draw_volume(&lower, name, volume)?;
            }
            root.present()?;
        }
        with_hovers(&mut svg, &hovers);
        Ok(svg)
    }

    /// The x range: one unit per interval (at least one).
    fn x_range(&self) -> Range<f64> {
        0f64..self.frame.len().max(1) as f64
    }

    /// The main area's axes, drawn; the time axis only when no volume
    /// strip is drawn under it.
    fn main_chart<'a, 's>(
        &self,
        area: &'a Area<'s>,
        lo: f64,
        hi: f64,
    ) -> Result<Ctx<'a, 's>, Box<dyn Error>> {
        let label = |v: &f64| self.frame.axis_label(*v as usize);
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(if self.volume.is_some() { 0 } else { X_LABELS })
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(self.x_range(), lo..hi)?;
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
        Ok(chart)
    }

    /// One hover target per interval, or per run of intervals where single
    /// ones would be narrower than a pointer can find.
    fn hovers(&self, chart: &Ctx<'_, '_>, lo: f64, hi: f64) -> String {
        let n = self.frame.len();
        let plot_width = chart.backend_coord(&(n as f64, lo)).0 - chart.backend_coord(&(0.0, lo)).0;
        hover_runs(n, plot_width)
            .map(|run| {
                let from = chart.backend_coord(&(run.start as f64, hi));
                let to = chart.backend_coord(&(run.end as f64, lo));
                hover_rect(from, to, &self.hover_text(run))
            })
            .collect()
    }

    /// Grey bands where the primary values have no data, and shaded bands
    /// behind the intervals that breach the threshold.
    fn draw_bands(&self, chart: &mut Ctx<'_, '_>, lo: f64, hi: f64) -> Result<(), Box<dyn Error>> {
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
        Ok(())
    }

    /// The traffic behind a ratio, as bars in a strip under the main area,
    /// with the time axis.
    fn draw_volume(
        &self,
        area: &Area<'_>,
        name: &str,
        volume: &[f64],
    ) -> Result<(), Box<dyn Error>> {
        let label = |v: &f64| self.frame.axis_label(*v as usize);
        let top = volume.iter().copied().fold(0.0, f64::max).max(1.0);
        let mut strip = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(X_LABELS)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(self.x_range(), 0f64..top)?;
        strip
            .configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .y_labels(2)
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .y_desc(name)
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
        Ok(())
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

/// Each line, broken where data is missing (a lone value is a dot), with a
/// legend when there is more than one.
fn draw_lines<'a, 's: 'a>(chart: &mut Ctx<'a, 's>, lines: &[Line]) -> Result<(), Box<dyn Error>> {
    for line in lines {
        let color = line.color;
        for (first, run) in runs(&line.values).into_iter().enumerate() {
            if run.len() == 1 {
                chart.draw_series(run.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
                continue;
            }
            let series = chart.draw_series(LineSeries::new(run, color.stroke_width(2)))?;
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
    Ok(())
}

/// A bar per interval with a value; when `signed`, green above zero and red
/// below.
fn draw_bars(
    chart: &mut Ctx<'_, '_>,
    values: &[Option<f64>],
    signed: bool,
) -> Result<(), Box<dyn Error>> {
    chart.draw_series(values.iter().enumerate().filter_map(|(i, v)| {
        v.map(|v| {
            let color = match () {
                _ if !signed => WITHIN,
                _ if v >= 0.0 => GOOD,
                _ => MARKER,
            };
            Rectangle::new([(i as f64 + 0.1, 0.0), (i as f64 + 0.9, v)], color.filled())
        })
    }))?;
    Ok(())
}

/// The threshold as a dashed line across `n` intervals, labelled.
fn draw_threshold(
    chart: &mut Ctx<'_, '_>,
    threshold: &Threshold,
    n: usize,
) -> Result<(), Box<dyn Error>> {
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
    Ok(())
}

/// The intervals each hover target covers: `n` intervals in runs of equal
/// length (give or take one), as many as fit `width_px` at
/// [`MIN_HOVER_PX`] each, and never more than one per interval.
pub(super) fn hover_runs(n: usize, width_px: i32) -> impl Iterator<Item = Range<usize>> {
    let targets = n.min((width_px.max(0) as usize / MIN_HOVER_PX).max(1));
    (0..targets).map(move |t| t * n / targets..(t + 1) * n / targets)
}
