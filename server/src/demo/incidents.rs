//! The demo's weather: a healthy fleet most of the time, and a few scripted
//! incidents at known times before the history's end, one of them still
//! open then — so the console shows what normal looks like, and what it
//! looks like when it is not.
//!
//! Healthy means inside every default SLO with some noise: duplicates a few
//! tenths of a percent of deliveries, 429s and 503s rare, a dead letter now
//! and then, unknown outcomes rare and settled by the on-call within minutes,
//! the outbox relay publishing within seconds.

use chrono::{DateTime, TimeDelta, Utc};

use super::flows::Flow;

/// A scripted incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// For 40 minutes publishers time out and retry a fifth of their
    /// messages, most after six to thirty minutes — outside a FIFO queue's
    /// five-minute window.
    RetryStorm,
    /// For 15 minutes the email and fulfilment providers answer 429 with
    /// minute-long Retry-Afters and 503, and lose responses: retries, dead
    /// letters, unknown outcomes the on-call settles only after it.
    ProviderOutage,
    /// For 10 minutes the outbox relay publishes nothing.
    StuckRelay,
    /// The email provider loses responses and rate-limits: unknown outcomes
    /// pile up, and nobody has settled them yet. Still open when the
    /// history ends.
    EmailProviderDegraded,
}

impl Incident {
    pub const ALL: [Incident; 4] = [
        Incident::RetryStorm,
        Incident::ProviderOutage,
        Incident::StuckRelay,
        Incident::EmailProviderDegraded,
    ];

    /// When the incident happens in a history from `start` to `end` (the
    /// demo's start): the storm and the outage four fifths and a little
    /// over half of the way back (so in a two-day history they are over a
    /// day before its end, and a day's windows no longer see them; a
    /// history of one day or less is taken as a day), the stuck relay five
    /// hours before the end, the open incident across it. A history under
    /// a day holds only the incidents that fit in it.
    pub fn span(self, start: DateTime<Utc>, end: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let length = (end - start).max(TimeDelta::days(1));
        let back =
            |share: f64| end - TimeDelta::seconds((length.num_seconds() as f64 * share) as i64);
        let minutes = TimeDelta::minutes;
        match self {
            Incident::RetryStorm => (back(0.8), back(0.8) + minutes(40)),
            Incident::ProviderOutage => (back(0.55), back(0.55) + minutes(15)),
            Incident::StuckRelay => (end - minutes(300), end - minutes(290)),
            Incident::EmailProviderDegraded => (end - minutes(35), end + minutes(25)),
        }
    }
}

/// How a provider answers, as shares of calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderWeather {
    pub rate_limited: f64,
    pub unavailable: f64,
    pub rejected: f64,
    pub lost_response: f64,
    pub crash_after_acceptance: f64,
    /// After a 429, the share of the key's next calls that are 429s too
    /// (quotas are per account or merchant).
    pub streak: f64,
    /// The Retry-After a 429 asks for, in seconds (lowest, highest).
    pub retry_after: (u32, u32),
}

/// How publishers, the queue and the workers behave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetWeather {
    /// Shares of published facts published again: within the five-minute
    /// window, after it, and after it with a re-serialised payload.
    pub retry_within: f64,
    pub retry_after: f64,
    pub retry_drifted: f64,
    /// Share of messages the broker hands to two workers at once.
    pub twins: f64,
    /// Share of calls a worker stalls past its visibility timeout on.
    pub stall: f64,
    /// Share of in-transaction deliveries whose transaction rolls back.
    pub transaction_failure: f64,
}

const HEALTHY_PROVIDER: ProviderWeather = ProviderWeather {
    rate_limited: 0.0005,
    unavailable: 0.0002,
    rejected: 0.001,
    lost_response: 0.0008,
    crash_after_acceptance: 0.0003,
    streak: 0.3,
    retry_after: (5, 40),
};

const HEALTHY_FLEET: FleetWeather = FleetWeather {
    retry_within: 0.0005,
    retry_after: 0.0002,
    retry_drifted: 0.0001,
    twins: 0.0002,
    stall: 0.0001,
    transaction_failure: 0.0002,
};

/// The incidents of one history: where it starts and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

impl Timeline {
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Self {
        Timeline { start, end }
    }

    /// When `incident` happens in this history.
    pub fn span(&self, incident: Incident) -> (DateTime<Utc>, DateTime<Utc>) {
        incident.span(self.start, self.end)
    }

    /// The fleet without incidents (the demo after a restart).
    pub fn healthy_fleet() -> FleetWeather {
        HEALTHY_FLEET
    }

    pub fn healthy_provider() -> ProviderWeather {
        HEALTHY_PROVIDER
    }

    /// The incidents happening at `at`.
    pub fn incidents(&self, at: DateTime<Utc>) -> impl Iterator<Item = Incident> + '_ {
        Incident::ALL
            .into_iter()
            .filter(move |i| self.during(*i, at))
    }

    fn during(&self, incident: Incident, at: DateTime<Utc>) -> bool {
        let (from, to) = self.span(incident);
        from <= at && at < to
    }

    pub fn fleet(&self, at: DateTime<Utc>) -> FleetWeather {
        if self.during(Incident::RetryStorm, at) {
            FleetWeather {
                retry_within: 0.03,
                retry_after: 0.15,
                retry_drifted: 0.01,
                ..HEALTHY_FLEET
            }
        } else {
            HEALTHY_FLEET
        }
    }

    pub fn provider(&self, flow: Flow, at: DateTime<Utc>) -> ProviderWeather {
        let external = flow.is_external();
        if external && self.during(Incident::ProviderOutage, at) {
            ProviderWeather {
                rate_limited: 0.5,
                unavailable: 0.1,
                lost_response: 0.12,
                streak: 0.7,
                // An overloaded provider asks for minute-long pauses: every
                // message it turns away waits in the queue past a minute.
                retry_after: (60, 120),
                ..HEALTHY_PROVIDER
            }
        } else if flow == Flow::Reminders && self.during(Incident::EmailProviderDegraded, at) {
            ProviderWeather {
                rate_limited: 0.08,
                lost_response: 0.08,
                streak: 0.5,
                ..HEALTHY_PROVIDER
            }
        } else {
            HEALTHY_PROVIDER
        }
    }

    /// The relay publishes nothing at `at`.
    pub fn relay_stuck(&self, at: DateTime<Utc>) -> bool {
        self.during(Incident::StuckRelay, at)
    }

    /// When the on-call settles an unknown outcome that appeared at `at`,
    /// `jitter` (0–1) into its usual delay: within minutes normally; only
    /// after a provider outage is over, when it happened during one; not
    /// yet, when it belongs to the incident still open.
    pub fn settled_at(&self, at: DateTime<Utc>, jitter: f64) -> Option<DateTime<Utc>> {
        let minutes = |m: f64| TimeDelta::milliseconds((m * 60_000.0) as i64);
        if self.during(Incident::EmailProviderDegraded, at) {
            return None;
        }
        if self.during(Incident::ProviderOutage, at) {
            let (_, over) = self.span(Incident::ProviderOutage);
            return Some(over + minutes(18.0 + 17.0 * jitter));
        }
        Some(at + minutes(2.0 + 8.0 * jitter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T16:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn hours_ago(h: f64) -> DateTime<Utc> {
        end() - TimeDelta::milliseconds((h * 3_600_000.0) as i64)
    }

    /// A day of history, as the end-to-end tests write.
    fn timeline() -> Timeline {
        Timeline::new(end() - TimeDelta::days(1), end())
    }

    #[test]
    fn every_incident_lies_within_its_history_and_only_the_last_is_still_open() {
        for days in [1, 2] {
            let start = end() - TimeDelta::days(days);
            for incident in Incident::ALL {
                let (from, to) = incident.span(start, end());
                assert!(from < to && from >= start, "{incident:?} in {days} days");
                let open = incident == Incident::EmailProviderDegraded;
                assert_eq!(to > end(), open, "{incident:?}");
            }
        }
        // In two days, the storm and the outage are over a day before the end.
        let two_days = end() - TimeDelta::days(2);
        for incident in [Incident::RetryStorm, Incident::ProviderOutage] {
            let (_, to) = incident.span(two_days, end());
            assert!(to < end() - TimeDelta::days(1), "{incident:?}");
        }
        // A short history holds only what fits.
        let (from, _) = Incident::RetryStorm.span(end() - TimeDelta::hours(2), end());
        assert!(from < end() - TimeDelta::hours(2));
    }

    #[test]
    fn the_fleet_is_healthy_outside_its_incidents() {
        let timeline = timeline();
        for at in [
            hours_ago(23.0),
            hours_ago(16.0),
            hours_ago(8.0),
            hours_ago(2.0),
        ] {
            assert_eq!(timeline.incidents(at).count(), 0, "{at}");
            assert_eq!(timeline.fleet(at), HEALTHY_FLEET);
            for flow in Flow::ALL {
                assert_eq!(timeline.provider(flow, at), HEALTHY_PROVIDER);
            }
            assert!(!timeline.relay_stuck(at));
        }
        // Healthy noise stays inside the duplicate objective (1%) and the
        // dead-letter one (0.1%, three 429s in a row).
        let f = HEALTHY_FLEET;
        let p = HEALTHY_PROVIDER;
        let duplicates = f.retry_within
            + f.retry_after
            + f.retry_drifted
            + f.twins
            + f.stall
            + p.rate_limited
            + p.unavailable;
        assert!(duplicates < 0.01, "{duplicates}");
        assert!(p.rate_limited * p.streak * p.streak < 0.001);
    }

    #[test]
    fn each_incident_changes_what_it_says_and_nothing_else() {
        let timeline = timeline();
        let storm = hours_ago(18.8);
        assert_eq!(
            timeline.incidents(storm).collect::<Vec<_>>(),
            [Incident::RetryStorm]
        );
        assert!(timeline.fleet(storm).retry_after > 0.1);
        assert_eq!(timeline.provider(Flow::Orders, storm), HEALTHY_PROVIDER);

        let outage = hours_ago(13.0);
        assert!(timeline.provider(Flow::Orders, outage).rate_limited > 0.2);
        assert!(timeline.provider(Flow::Reminders, outage).rate_limited > 0.2);
        assert_eq!(
            timeline.provider(Flow::Payments, outage),
            HEALTHY_PROVIDER,
            "payments never call out"
        );

        assert!(timeline.relay_stuck(hours_ago(4.9)));
        let degraded = hours_ago(0.25);
        assert!(timeline.provider(Flow::Reminders, degraded).lost_response > 0.05);
        assert_eq!(timeline.provider(Flow::Orders, degraded), HEALTHY_PROVIDER);
    }

    #[test]
    fn the_on_call_settles_within_minutes_after_an_outage_or_not_yet() {
        let timeline = timeline();
        let calm = hours_ago(3.0);
        let settled = timeline.settled_at(calm, 1.0).unwrap();
        assert!(settled - calm <= TimeDelta::minutes(10));
        let (from, over) = timeline.span(Incident::ProviderOutage);
        let at = from + TimeDelta::minutes(10);
        let during = timeline.settled_at(at, 0.0).unwrap();
        assert!(during >= over + TimeDelta::minutes(18));
        assert!(during - at > TimeDelta::minutes(15), "too late for the SLO");
        assert_eq!(timeline.settled_at(hours_ago(0.2), 0.5), None);
    }
}
