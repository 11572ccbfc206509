//! One SLO's charts over its window, from one hourly read.

use chrono::TimeDelta;
use idem_domain::slo::{Events, Instance, TIERS};
use idem_store::{Store, Ts};

use super::Chart;
use crate::{
    charts::{self, Frame},
    error::AppError,
};

/// The SLI and budget in about a hundred intervals over the SLO's window
/// (the instance's consumers summed, or the fleet's),
/// and each tier's burn rate hour by hour, all from one hourly read. A
/// window longer than the data (a new install, the demo's two days) is
/// drawn from the first hour with events (a day at the least), so the
/// data fill the chart instead of its last few pixels.
pub async fn slo_charts(
    store: Store,
    instance: Instance,
    until: Ts,
) -> Result<Vec<Chart>, AppError> {
    let mut slo = instance.slo;
    if let Some(consumer) = instance.scope.consumer() {
        slo.name = format!("{} · {consumer}", slo.name);
    }
    let window_start = (until - TimeDelta::seconds(slo.window.as_seconds())).hour();
    let hourly = store
        .metrics()
        .indicator_buckets(
            &slo.sli,
            window_start,
            until,
            TimeDelta::hours(1),
            instance.consumers.as_deref(),
        )
        .await?;
    let mut events: Vec<Events> = hourly.iter().map(|(_, e)| *e).collect();
    let first = first_with_data(&events, 24);
    events.drain(..first);
    let from = Ts(window_start.0 + TimeDelta::hours(first as i64));
    let label = if first == 0 {
        format!("last {}", slo.window)
    } else {
        format!("{} hours with data", events.len())
    };
    let hours = Frame::new(label, from.0, until.0, TimeDelta::hours(1));
    // About a hundred intervals for the SLI and the budget.
    let per = (events.len() / 112).max(1);
    let coarse = Frame::new(
        hours.label.clone(),
        from.0,
        until.0,
        TimeDelta::hours(per as i64),
    );
    let summed: Vec<Events> = events
        .chunks(per)
        .map(|chunk| {
            chunk.iter().fold(Events::default(), |a, e| {
                Events::new(a.good + e.good, a.valid + e.valid)
            })
        })
        .collect();
    let mut list = vec![
        charts::sli_over_time(&slo, &coarse, &summed),
        charts::budget_over_time(&slo, &coarse, &summed),
    ];
    list.extend(
        TIERS
            .iter()
            .map(|tier| charts::burn_rate(&slo, tier, &hours, &events)),
    );
    Ok(list)
}

/// Where a chart of `events` starts: at the first with valid events, but
/// never leaving fewer than `at_least` (nor skipping any when none has).
fn first_with_data(events: &[Events], at_least: usize) -> usize {
    let first = events.iter().position(|e| e.valid > 0.0).unwrap_or(0);
    first.min(events.len().saturating_sub(at_least))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_slo_chart_starts_at_its_first_data_and_shows_a_day_at_the_least() {
        let none = Events::default();
        let some = Events::new(9.0, 10.0);
        let mut events = vec![none; 600];
        events.extend(vec![some; 48]);
        assert_eq!(first_with_data(&events, 24), 600);
        let late = [vec![none; 640], vec![some; 8]].concat();
        assert_eq!(first_with_data(&late, 24), 624, "a day at the least");
        assert_eq!(
            first_with_data(&[none; 30], 24),
            0,
            "no data: the whole window"
        );
        assert_eq!(first_with_data(&[some; 30], 24), 0);
    }
}
