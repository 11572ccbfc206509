//! The workers' side of the simulation: a delivery claimed (two at once for
//! twins), the provider called, and how the call ended recorded.

use std::{collections::VecDeque, time::Duration};

use chrono::TimeDelta;
use idem_consumer::{Decision, Failure, Next};
use idem_domain::Metric;
use idem_store::StoreError;
use rand::Rng;

use super::{
    BUSY_BACKOFF, STALL,
    events::Event,
    flows::Flow,
    provider::{self, Call},
    simulation::Simulation,
    worker::{self, MAX_DELIVERIES, Step},
};

/// The prefix of the references `flow`'s provider gives.
fn reference_prefix(flow: Flow) -> &'static str {
    match flow {
        Flow::Reminders | Flow::Push => "msg",
        Flow::Shipments => "shp",
        _ => "ful",
    }
}

impl Simulation {
    pub(super) async fn deliver(&mut self, id: u64) -> Result<(), StoreError> {
        let Some(delivery) = self.hand_out(id) else {
            return Ok(());
        };
        let ledger = self.ledger_ref();
        let flow = delivery.flow;
        let fail_tx = !flow.is_external() && self.rng.random_bool(self.fleet().transaction_failure);
        let work = delivery.work(self.now);
        let step = worker::claim(&self.store, &work, &ledger, fail_tx).await?;
        self.after_claim(id, flow, step);
        Ok(())
    }

    pub(super) async fn deliver_twins(&mut self, a: u64, b: u64) -> Result<(), StoreError> {
        let (Some(delivery), Some(_)) = (self.hand_out(a), self.hand_out(b)) else {
            return Ok(());
        };
        let (ledger_a, ledger_b) = (self.ledger_ref(), self.ledger_ref());
        let work = delivery.work(self.now);
        // Two workers, one key, one instant: the unique constraint picks the winner.
        let (first, second) = tokio::join!(
            worker::claim(&self.store, &work, &ledger_a, false),
            worker::claim(&self.store, &work, &ledger_b, false),
        );
        self.after_claim(a, delivery.flow, first?);
        self.after_claim(b, delivery.flow, second?);
        Ok(())
    }

    fn after_claim(&mut self, id: u64, flow: Flow, step: Step) {
        let now = self.now;
        let consumer = flow.consumer();
        let claim = match step {
            Step::RolledBack => {
                self.meter.count(consumer, Metric::TransactionFailures, now);
                self.retry_later(
                    id,
                    "could not serialize access due to concurrent update; transaction rolled back",
                    TimeDelta::seconds(5),
                );
                return;
            }
            Step::Applied(claim) => {
                self.meter.claimed(consumer, &claim, now);
                self.meter.count(consumer, Metric::Sends, now);
                self.observe_outcome(id, flow);
                self.ack(id);
                return;
            }
            Step::Decided(claim) => claim,
        };
        self.meter.claimed(consumer, &claim, now);
        match claim.decision {
            Decision::Proceed => self.call_provider(id, flow),
            // Counted by `Meter::claimed`: a suppressed duplicate, or an
            // attempt whose lease ran out (now `unknown`, for the on-call).
            Decision::AlreadyDone { .. } => self.ack(id),
            Decision::LeaseExpired => {
                if let Some(key) = self.messages.get(&id).map(|m| m.key.clone()) {
                    self.call_on_call(flow, key);
                }
                self.ack(id);
            }
            Decision::Busy { .. } => {
                self.retry_later(id, "another worker holds the key's lease", BUSY_BACKOFF)
            }
        }
    }

    /// The claim says go: the worker calls the provider (as scripted for
    /// the tour's keys), and the call completes after its latency.
    fn call_provider(&mut self, id: u64, flow: Flow) {
        let key = self
            .messages
            .get(&id)
            .map(|m| m.key.clone())
            .unwrap_or_default();
        let scripted = self.scripts.get_mut(&key).and_then(VecDeque::pop_front);
        let is_scripted = scripted.is_some();
        let limited = self.rate_limited.contains(&key);
        let weather = self.provider_weather(flow);
        let prefix = reference_prefix(flow);
        let call =
            scripted.unwrap_or_else(|| provider::call(&mut self.rng, &weather, prefix, limited));
        let stall = self.fleet().stall;
        let latency = if !is_scripted && self.rng.random_bool(stall) {
            STALL
        } else {
            TimeDelta::milliseconds((provider::latency_seconds(&mut self.rng) * 1000.0) as i64)
        };
        let (generation, payload) = self
            .messages
            .get(&id)
            .map_or((0, String::new()), |m| (m.generation, m.payload.clone()));
        self.after(
            latency,
            Event::Complete {
                message: id,
                generation,
                flow,
                key,
                payload,
                call,
            },
        );
    }

    pub(super) fn observe_outcome(&mut self, id: u64, flow: Flow) {
        if let Some(m) = self.messages.get(&id) {
            let seconds = (self.now - m.enqueued_at).num_milliseconds() as f64 / 1000.0;
            self.meter.observe(
                flow.consumer(),
                Metric::OutcomeLatencySeconds,
                self.now,
                seconds,
            );
        }
    }

    pub(super) async fn complete(
        &mut self,
        id: u64,
        generation: u32,
        (flow, key, payload): (Flow, String, String),
        call: Call,
    ) -> Result<(), StoreError> {
        // A worker whose delivery was taken away (visibility timeout) or
        // given up on (dead-lettered meanwhile) still records how its call
        // ended — it holds the lease, so no other worker called meanwhile —
        // but no longer acknowledges the message.
        let current = self
            .messages
            .get(&id)
            .is_some_and(|m| m.generation == generation);
        let now = self.now;
        match call {
            Call::Accepted { provider_ref } => {
                worker::record_sent(&self.store, flow, &key, &payload, &provider_ref, now).await?;
                self.meter.count(flow.consumer(), Metric::Sends, now);
                self.rate_limited.remove(&key);
                if current {
                    self.observe_outcome(id, flow);
                    self.ack(id);
                }
            }
            Call::RateLimited {
                retry_after_seconds,
            } => {
                self.rate_limited.insert(key.clone());
                let error = format!("429 Too Many Requests (Retry-After: {retry_after_seconds} s)");
                let retry_after = Some(Duration::from_secs(u64::from(retry_after_seconds)));
                self.retryable((id, flow, &key), current, &error, retry_after)
                    .await?;
            }
            Call::Unavailable => {
                let error = "503 Service Unavailable from the provider";
                self.retryable((id, flow, &key), current, error, None)
                    .await?;
            }
            Call::Rejected { reason } => {
                let failure = Failure::Permanent { error: reason };
                let deliveries = self.messages.get(&id).map_or(1, |m| m.deliveries);
                worker::record_failure(&self.store, flow, &key, failure, deliveries, now).await?;
                self.meter
                    .count(flow.consumer(), Metric::PermanentFailures, now);
                if current {
                    self.ack(id);
                }
            }
            Call::LostResponse => {
                let error = "no response within 30 s (connection reset after the request was sent): the provider may have acted";
                worker::record_unknown(&self.store, flow, &key, error, now).await?;
                self.meter
                    .count(flow.consumer(), Metric::UnknownOutcomes, now);
                self.call_on_call(flow, key.clone());
                if current {
                    self.ack(id);
                }
            }
            // The worker died after the provider acted: nothing is recorded,
            // the lease runs out, and the visibility timeout redelivers.
            Call::CrashAfterAcceptance => {}
        }
        Ok(())
    }

    async fn retryable(
        &mut self,
        (id, flow, key): (u64, Flow, &str),
        current: bool,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<(), StoreError> {
        // A message already given up on has had all its deliveries.
        let deliveries = self
            .messages
            .get(&id)
            .map_or(MAX_DELIVERIES, |m| m.deliveries);
        self.meter
            .count(flow.consumer(), Metric::RetryableFailures, self.now);
        let failure = Failure::Retryable { error, retry_after };
        let next =
            worker::record_failure(&self.store, flow, key, failure, deliveries, self.now).await?;
        // Only the demo's 429s carry a Retry-After.
        if let Some(asked) = retry_after {
            let waited = matches!(next, Next::RetryIn(wait) if wait == asked);
            self.meter.rate_limited(flow.consumer(), waited, self.now);
        }
        if current {
            // Out of deliveries, `retry_later` gives the message up at once.
            let delay = match next {
                Next::RetryIn(wait) => TimeDelta::from_std(wait).unwrap_or(BUSY_BACKOFF),
                Next::DeadLetter | Next::Acknowledge => TimeDelta::zero(),
            };
            self.retry_later(id, error, delay);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messaging_references_start_msg_and_fulfilment_references_ful() {
        assert_eq!(reference_prefix(Flow::Reminders), "msg");
        assert_eq!(reference_prefix(Flow::Orders), "ful");
        assert_eq!(reference_prefix(Flow::Payments), "ful");
    }
}
