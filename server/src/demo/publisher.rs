//! The publishers: new facts at the pace of the time of day, and their
//! retries — inside the five-minute FIFO window, after it, and now and then
//! with a re-serialised payload — and twin deliveries.

use chrono::Utc;
use rand::Rng;

use super::{
    events::Event,
    flows::{self, Fact, Flow},
    incidents::FleetWeather,
    simulation::Simulation,
};

/// How busy the fleet is at `hour` (UTC), from 0.1 at night to 1 in the
/// afternoon: charts have a shape.
fn daily_traffic(hour: u32) -> f64 {
    let hour = f64::from(hour);
    0.55 + 0.45 * ((hour - 8.0) / 24.0 * std::f64::consts::TAU).sin()
}

/// How a publisher publishes a fact again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Republish {
    /// Inside the five-minute window.
    Within,
    /// After the window.
    After,
    /// After the window, with a re-serialised payload.
    Drifted,
}

/// Whether a fact is published again, by `roll` (uniform in 0..1) and the
/// fleet's shares of retries.
fn republish(roll: f64, fleet: &FleetWeather) -> Option<Republish> {
    let within = fleet.retry_within;
    let after = within + fleet.retry_after;
    let drifted = after + fleet.retry_drifted;
    match roll {
        r if r < within => Some(Republish::Within),
        r if r < after => Some(Republish::After),
        r if r < drifted => Some(Republish::Drifted),
        _ => None,
    }
}

impl Simulation {
    pub(super) fn next_fact(&mut self, flow: Flow) {
        let backfill = self.now < Utc::now() - chrono::TimeDelta::seconds(5);
        let daily = daily_traffic(chrono::Timelike::hour(&self.now));
        let mean = flow.mean_interval_seconds(backfill) / daily.max(0.15);
        let fact = flows::random_fact(flow, self.now, &mut self.rng);
        self.publish(fact, false);
        let gap = self.seconds(0.2 * mean..1.8 * mean);
        self.after(gap, Event::NextFact(flow));
    }

    pub(super) fn publish(&mut self, fact: Fact, retry: bool) {
        // The tour's keys follow their script alone: no random retries or twins.
        let scripted = self.scripts.contains_key(&fact.key);
        if !retry {
            self.facts += 1;
        }
        let fleet = self.fleet();
        if !retry && !scripted {
            self.maybe_publish_again(&fact, &fleet);
        }
        let first = self.enqueue(&fact);
        let delay = self.seconds(0.05..1.0);
        if !retry && !scripted && self.rng.random_bool(fleet.twins) {
            // At-least-once: the broker hands the same message to two workers at once.
            let twin = self.enqueue(&fact);
            self.after(delay, Event::DeliverTwins(first, twin));
        } else {
            self.after(delay, Event::Deliver(first));
        }
    }

    /// Publishers retry: inside the five-minute window, after it, and now
    /// and then with a re-serialised payload.
    fn maybe_publish_again(&mut self, fact: &Fact, fleet: &FleetWeather) {
        let roll: f64 = self.rng.random();
        let again = match republish(roll, fleet) {
            Some(Republish::Within) => Some((self.seconds(15.0..240.0), fact.payload.clone())),
            Some(Republish::After) => Some((self.seconds(360.0..1800.0), fact.payload.clone())),
            Some(Republish::Drifted) => {
                Some((self.seconds(360.0..900.0), flows::drifted(&fact.payload)))
            }
            None => None,
        };
        if let Some((delay, payload)) = again {
            let fact = Fact {
                payload,
                ..fact.clone()
            };
            self.after(delay, Event::Publish { fact, retry: true });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::incidents::Timeline;

    #[test]
    fn traffic_peaks_in_the_afternoon_and_is_lowest_at_night() {
        assert!((daily_traffic(14) - 1.0).abs() < 1e-9);
        assert!((daily_traffic(2) - 0.1).abs() < 1e-9);
        for hour in 0..24 {
            let traffic = daily_traffic(hour);
            assert!(
                (0.1 - 1e-9..=1.0 + 1e-9).contains(&traffic),
                "{hour}: {traffic}"
            );
        }
    }

    #[test]
    fn a_roll_picks_a_retry_by_the_fleets_shares() {
        let fleet = FleetWeather {
            retry_within: 0.1,
            retry_after: 0.2,
            retry_drifted: 0.3,
            ..Timeline::healthy_fleet()
        };
        assert_eq!(republish(0.0, &fleet), Some(Republish::Within));
        assert_eq!(republish(0.09, &fleet), Some(Republish::Within));
        assert_eq!(republish(0.15, &fleet), Some(Republish::After));
        assert_eq!(republish(0.29, &fleet), Some(Republish::After));
        assert_eq!(republish(0.31, &fleet), Some(Republish::Drifted));
        assert_eq!(republish(0.59, &fleet), Some(Republish::Drifted));
        assert_eq!(republish(0.61, &fleet), None);
        assert_eq!(republish(0.99, &fleet), None);
    }
}
