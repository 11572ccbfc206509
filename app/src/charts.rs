//! Charts drawn on the server with plotters' SVG backend (server only).
//!
//! Each chart gets a `<title>` and a `<desc>` inside its SVG, and the same
//! summary in words beside it, so it is readable without JavaScript, without
//! colour and to a screen reader. Nothing to draw means no chart and a
//! sentence saying so, never a chart of zeros.

mod distribution;
mod time;

use plotters::style::RGBColor;

pub use distribution::{duplicate_delays, open_unknown_outcomes};
pub use time::{
    Allowed, Frame, bad_share, budget_over_time, burn_rate, duplicates_suppressed, gauge_worst,
    new_unknown_outcomes, outcome_latency, queue_depth, recovery_times, replays, retry_pressure,
    sli_over_time,
};

pub(crate) const WIDTH: u32 = 760;
pub(crate) const HEIGHT: u32 = 320;
/// Every text in a chart, as plotters sizes fonts (it draws size `n` at
/// `n / 1.24` pixels of the drawing). A chart is shown at 560 CSS px at the
/// least (it scrolls inside its box on a narrower screen), so text is never
/// shown smaller than 19 / 1.24 × 560 / 760 ≈ 11.3 CSS px.
pub(crate) const FONT: u32 = 19;

/// The pixels of the drawing plotters gives a font of size 1.
#[cfg(test)]
const PLOTTERS_PX_PER_SIZE: f64 = 1.0 / 1.24;
/// The narrowest a chart is shown, in CSS px (`style/main.css` keeps it).
#[cfg(test)]
const MIN_SHOWN_WIDTH: u32 = 560;
pub(crate) const WITHIN: RGBColor = RGBColor(5, 80, 174);
pub(crate) const BEYOND: RGBColor = RGBColor(188, 76, 0);
pub(crate) const MARKER: RGBColor = RGBColor(164, 14, 38);
pub(crate) const BREACH: RGBColor = RGBColor(255, 205, 210);
pub(crate) const VOLUME: RGBColor = RGBColor(175, 184, 193);
pub(crate) const GOOD: RGBColor = RGBColor(26, 127, 55);
pub(crate) const THIRD: RGBColor = RGBColor(130, 80, 223);

/// An invisible rectangle over one interval or bar whose `<title>` the
/// browser shows on hover: what that part of the chart holds, in words.
pub(crate) fn hover_rect(from: (i32, i32), to: (i32, i32), text: &str) -> String {
    let (x, y) = (from.0.min(to.0), from.1.min(to.1));
    let (width, height) = ((to.0 - from.0).abs(), (to.1 - from.1).abs());
    format!(
        "<rect class=\"hover\" x=\"{x}\" y=\"{y}\" width=\"{width}\" height=\"{height}\" \
         fill=\"#000\" fill-opacity=\"0\"><title>{}</title></rect>",
        crate::format::html_escape(text)
    )
}

/// Puts `hovers` last in the drawing (on top, so they take the pointer).
pub(crate) fn with_hovers(svg: &mut String, hovers: &str) {
    if let Some(end) = svg.rfind("</svg>") {
        svg.insert_str(end, hovers);
    }
}

/// Gives an SVG a title and a description (read by screen readers and shown
/// as a tooltip), and lets it scale to its container.
pub(crate) fn accessible(svg: String, title: &str, summary: &str) -> String {
    let Some(open_end) = svg
        .find("<svg")
        .and_then(|at| svg[at..].find('>').map(|e| at + e))
    else {
        return svg;
    };
    format!(
        "{} role=\"img\"><title>{}</title><desc>{}</desc>{}",
        &svg[..open_end],
        crate::format::html_escape(title),
        crate::format::html_escape(summary),
        &svg[open_end + 1..]
    )
}

#[cfg(test)]
mod tests {
    use idem_domain::Histogram;

    use super::*;

    #[test]
    fn the_stylesheet_shows_charts_no_narrower_than_their_text_allows() {
        let css = include_str!("../../style/main.css");
        assert!(
            css.contains(&format!("min-width: {MIN_SHOWN_WIDTH}px")),
            "style/main.css keeps a chart at least {MIN_SHOWN_WIDTH} px wide"
        );
    }

    #[test]
    fn chart_text_is_at_least_eleven_css_pixels_at_the_narrowest_a_chart_is_shown() {
        let drawn = f64::from(FONT) * PLOTTERS_PX_PER_SIZE;
        let shown = drawn * f64::from(MIN_SHOWN_WIDTH) / f64::from(WIDTH);
        assert!(shown >= 11.0, "{shown:.1} px");
        // And that is what plotters writes into the SVG.
        let totals = Histogram::from_iter([(60.0, 3.0), (600.0, 1.0)]);
        let chart = duplicate_delays("last 24h", &totals);
        let svg = chart.svg.unwrap();
        let sizes: Vec<f64> = svg
            .split("font-size=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next()?.parse().ok())
            .collect();
        assert!(!sizes.is_empty());
        for size in sizes {
            assert!(
                (size - drawn).abs() < 1e-6,
                "text drawn at {size} px, not {drawn}"
            );
        }
    }
}
