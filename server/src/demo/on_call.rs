//! The simulated on-call: settles unknown outcomes with the provider and
//! replays dead letters, within minutes on calm days, late after an outage,
//! not yet for the open incident — and the lost responses scheduled for it
//! on purpose, so its work lists have something in them whatever the hour.

use std::collections::VecDeque;

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{ConsumerName, IdempotencyKey, action::ActionId};
use idem_store::{StoreError, Ts};
use rand::Rng;

use super::{
    ON_CALL,
    events::Event,
    flows::{self, Fact, Flow},
    incidents,
    provider::{self, Call},
    simulation::Simulation,
};

/// When the on-call sees to something on a calm day: two to ten minutes
/// after `now`, by `jitter` (uniform in 0..1).
fn calm_response(now: DateTime<Utc>, jitter: f64) -> DateTime<Utc> {
    now + TimeDelta::seconds(120 + (480.0 * jitter) as i64)
}

fn on_call_actor() -> idem_store::Actor<'static> {
    idem_store::Actor {
        name: ON_CALL,
        role: "operator",
        client_addr: None,
    }
}

impl Simulation {
    /// An unknown outcome or a dead letter for the on-call (unless it is
    /// left for people): when it will be seen to.
    pub(super) fn on_call_at(&mut self, key: &str) -> Option<DateTime<Utc>> {
        if self.left_for_people.contains(key) {
            return None;
        }
        let jitter = self.rng.random::<f64>();
        match &self.timeline {
            Some(timeline) => timeline.settled_at(self.now, jitter),
            None => Some(calm_response(self.now, jitter)),
        }
    }

    /// An unknown outcome for the on-call.
    pub(super) fn call_on_call(&mut self, flow: Flow, key: String) {
        if let Some(at) = self.on_call_at(&key) {
            self.schedule(at, Event::Settle { flow, key });
        }
    }

    /// The id of one of the on-call's actions.
    fn action_id(&mut self) -> Result<ActionId, StoreError> {
        let id = format!("on-call-{}-{}", self.seq, self.rng.random::<u32>());
        ActionId::parse(&id).map_err(|e| StoreError::Contract(e.to_string()))
    }

    /// The on-call replays a dead letter once the provider is back (a
    /// replay its verdict blocks is left for people).
    pub(super) async fn replay(&mut self, dead_letter_id: i64) -> Result<(), StoreError> {
        let action_id = self.action_id()?;
        let reason = said("the provider is back (simulated on-call)")?;
        let request = idem_store::ReplayRequest {
            dead_letter_id: idem_domain::DeadLetterId::of_row(dead_letter_id),
            action_id: &action_id,
            actor: on_call_actor(),
            // The simulated on-call operates every team.
            scope: &idem_domain::Within::Every,
            override_verdict: false,
            reason: Some(&reason),
            retention: &idem_domain::ClaimRetention::days(30),
        };
        self.store
            .actions()
            .replay_dead_letter_at(&request, Ts::from(self.now))
            .await?;
        Ok(())
    }

    /// The on-call checks with the provider and records what it says: most
    /// often that it acted (sent, with its reference), else that it did not
    /// (failed, retried through the outbox with the same key).
    pub(super) async fn settle(&mut self, flow: Flow, key: &str) -> Result<(), StoreError> {
        let contract = |e: idem_domain::KeyError| StoreError::Contract(e.to_string());
        let consumer = ConsumerName::parse(flow.consumer()).map_err(contract)?;
        let key = IdempotencyKey::parse(key).map_err(contract)?;
        let Some(claim) = self.store.claims().claim(&consumer, &key).await? else {
            return Ok(());
        };
        if claim.status != idem_domain::ClaimStatus::Unknown {
            return Ok(());
        }
        let acted = self.rng.random_bool(0.7);
        let reference = provider::reference(&mut self.rng, "chk");
        let action_id = self.action_id()?;
        let resolution = if acted {
            idem_domain::action::Resolution::Sent {
                provider_ref: idem_domain::action::ProviderRef::parse(&reference)
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        StoreError::Contract(format!("{reference:?} is no reference"))
                    })?,
            }
        } else {
            idem_domain::action::Resolution::FailedRetry
        };
        let reason = said("checked with the provider (simulated on-call)")?;
        let request = idem_store::ResolveRequest {
            scope: &idem_domain::Within::Every,
            consumer: &consumer,
            key: &key,
            version: claim.version,
            resolution,
            action_id: &action_id,
            actor: on_call_actor(),
            reason: Some(&reason),
        };
        self.store
            .actions()
            .resolve_unknown_at(&request, Ts::from(self.now))
            .await?;
        Ok(())
    }

    /// The incident still open when the history ends: besides its random
    /// lost responses, six reminders whose responses are lost for sure, so
    /// the unknown-outcome queue has work in it whatever the time of day —
    /// and four rate limited into the dead-letter queue, waiting for the
    /// redrive after the fix (the provider accepts them then).
    pub(super) fn schedule_open_incident(&mut self, end: DateTime<Utc>) {
        let (from, _) = incidents::Incident::EmailProviderDegraded.span(self.now, end);
        let date = flows::renewal_date(end);
        for n in 0..6 {
            let fact = self.lost_reminder(5_000_000, &date);
            self.left_for_people.insert(fact.key.clone());
            self.schedule(
                from + TimeDelta::minutes(3 + 4 * n),
                Event::Publish { fact, retry: false },
            );
        }
        for n in 0..4 {
            let account = format!(
                "account-{}",
                8_000_000 + self.rng.random_range(0..1_000_000)
            );
            let fact = flows::reminder(&account, &date);
            let accepted = Call::Accepted {
                provider_ref: provider::reference(&mut self.rng, "sms"),
            };
            self.scripts
                .insert(fact.key.clone(), super::tour::three_429s_then([accepted]));
            self.left_for_people.insert(fact.key.clone());
            self.schedule(
                from + TimeDelta::minutes(5 + 3 * n),
                Event::Publish { fact, retry: false },
            );
        }
    }

    /// A lost response now and then on calm hours (besides the random
    /// ones), each settled by the on-call within minutes: what a healthy
    /// day's unknown outcomes look like.
    pub(super) fn schedule_calm_unknowns(&mut self, end: DateTime<Utc>) {
        let date = flows::renewal_date(end);
        for hours_ago in [16, 13, 8, 3, 2] {
            let at = end - TimeDelta::hours(hours_ago) + TimeDelta::minutes(10);
            if at < self.now {
                // Before a short history starts.
                continue;
            }
            let fact = self.lost_reminder(6_000_000, &date);
            self.schedule(at, Event::Publish { fact, retry: false });
        }
    }

    /// Besides the provider outage's random lost responses, two reminders
    /// whose responses it loses for sure: at night it sees few messages, and
    /// its unknown outcomes — settled by the on-call only after it, so late
    /// for their SLO — must be there whatever the hour.
    pub(super) fn schedule_outage_unknowns(&mut self, end: DateTime<Utc>) {
        let (from, _) = incidents::Incident::ProviderOutage.span(self.now, end);
        if from < self.now {
            // Before a short history starts.
            return;
        }
        let date = flows::renewal_date(end);
        for minutes in [2, 6] {
            let fact = self.lost_reminder(7_000_000, &date);
            self.schedule(
                from + TimeDelta::minutes(minutes),
                Event::Publish { fact, retry: false },
            );
        }
    }

    /// A reminder for a random account numbered from `first` (a million of
    /// them), for `date`, whose one call is scripted to lose its response.
    fn lost_reminder(&mut self, first: u64, date: &str) -> Fact {
        let account = format!("account-{}", first + self.rng.random_range(0..1_000_000));
        let fact = flows::reminder(&account, date);
        self.scripts
            .insert(fact.key.clone(), VecDeque::from([Call::LostResponse]));
        fact
    }
}

/// A reason the simulated on-call gives (always a valid one).
fn said(text: &str) -> Result<idem_domain::action::Reason, StoreError> {
    idem_domain::action::Reason::parse(text)
        .ok()
        .flatten()
        .ok_or_else(|| StoreError::Contract(format!("{text:?} is no reason")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_a_calm_day_the_on_call_responds_within_two_to_ten_minutes() {
        let now = DateTime::parse_from_rfc3339("2026-03-14T12:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(calm_response(now, 0.0), now + TimeDelta::minutes(2));
        assert_eq!(calm_response(now, 0.5), now + TimeDelta::minutes(6));
        assert!(calm_response(now, 0.999_999) < now + TimeDelta::minutes(10));
    }
}
