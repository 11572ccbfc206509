//! The charts over time: what they draw and what their summaries say.

use chrono::{DateTime, TimeDelta};
use idem_domain::{
    Histogram, Metric,
    slo::{Events, Slo, TIERS},
};
use plotters::style::RGBColor;

use super::{
    plot::{NO_DATA, Unit, hover_runs},
    *,
};
use crate::charts::{BREACH, GOOD, MARKER, VOLUME, WITHIN};

/// A histogram from `bucket` column labels and counts.
fn labelled(pairs: &[(&str, f64)]) -> Histogram {
    let mut h = Histogram::new();
    for (label, n) in pairs {
        h.add_label(label, *n);
    }
    h
}

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
        "41 of 2540 deliveries (1.61%) hit an existing claim in the last 7h. \
         1 of 3 intervals with 100 deliveries or more were over the objective of 1.00%. \
         1 interval had no data and is left blank."
    );
    let svg = chart.svg.expect("a chart");
    assert!(dashes(&svg) > 5, "the objective is a dashed line");
    assert!(svg.contains("objective ≤ 1.00%"));
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
    let slices = labelled;
    let chart = gauge_worst(
        "queue-age",
        "Oldest queued message",
        &frame(3),
        "oldest queued message",
        &[
            slices(&[("5", 50.0), ("30", 10.0)]),
            Histogram::new(),
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
    let histogram = labelled;
    let chart = outcome_latency(
        &frame(3),
        &[
            histogram(&[("1", 100.0)]),
            Histogram::new(),
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

#[test]
fn hover_targets_are_one_per_interval_or_even_runs_a_pointer_can_find() {
    let runs = |n, width| hover_runs(n, width).collect::<Vec<_>>();
    assert_eq!(runs(3, 600), [0..1, 1..2, 2..3], "one per interval");
    assert_eq!(runs(10, 20), [0..2, 2..5, 5..7, 7..10], "4 targets of 5 px");
    let narrow = runs(4, 0);
    assert_eq!(
        (narrow.len(), narrow[0].clone()),
        (1, 0..4),
        "at least one target"
    );
    assert!(runs(0, 600).is_empty(), "nothing to hover");
}

#[test]
fn a_span_without_replays_says_so_and_still_has_a_readable_axis() {
    let chart = replays(&frame(3), &[true, true, false], &[0.0, 0.0, 0.0]);
    assert_eq!(
        chart.summary,
        "No replays published in the last 7h. 1 interval had no data and is left blank."
    );
    let svg = chart
        .svg
        .expect("zeros are drawn: deliveries were reported");
    assert!(svg.contains("1.0\n</text>"), "an axis up to one: {svg}");
    assert!(!svg.contains("\n-0"), "never a negative zero on the axis");
}

#[test]
fn rate_limiting_is_told_apart_from_other_retryable_failures() {
    let chart = retry_pressure(
        &frame(2),
        &[true, true],
        &[3.0, 1.0],
        &[3.0, 0.0],
        &[1.0, 0.0],
    );
    assert_eq!(
        chart.summary,
        "4 retryable failures in the last 7h, 3 of them rate-limited (429); 1 retries waited as \
         the provider's Retry-After asked. Most failures are rate limiting: the consumers send \
         faster than the provider takes."
    );
    let suppressed = duplicates_suppressed(&frame(2), &[true, true], &[2.0, 0.0], &[1.0, 0.0]);
    assert!(
        suppressed.summary.contains("; 1 was acknowledged"),
        "{}",
        suppressed.summary
    );
}
