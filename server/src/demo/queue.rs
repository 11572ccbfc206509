//! The queue: at-least-once delivery with a 45 s visibility timeout,
//! acknowledgements, and a dead-letter queue after `MAX_DELIVERIES`.

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::Metric;
use idem_store::StoreError;
use rand::Rng;
use sha2::{Digest, Sha256};

use super::{
    VISIBILITY_TIMEOUT,
    events::Event,
    flows::{Fact, Flow},
    simulation::Simulation,
    worker::{self, Abandon, MAX_DELIVERIES, Work},
};

pub(super) struct Message {
    pub(super) id: String,
    pub(super) flow: Flow,
    pub(super) key: String,
    pub(super) payload: String,
    pub(super) payload_hash: String,
    pub(super) enqueued_at: DateTime<Utc>,
    pub(super) deliveries: u32,
    /// Bumped by every delivery, ack or nack: a stale timer or a stale
    /// worker's acknowledgement no longer applies.
    pub(super) generation: u32,
    pub(super) first_failure_at: Option<DateTime<Utc>>,
    pub(super) last_error: Option<String>,
    pub(super) redrive: bool,
}

impl Message {
    /// `fact` as the queue's message number `number`, its broker id tagged
    /// with `tag`, enqueued at `now`.
    fn new(fact: &Fact, number: u64, tag: u32, now: DateTime<Utc>) -> Self {
        let hash = Sha256::digest(fact.payload.as_bytes());
        Message {
            id: format!("m-{tag:08x}-{number}"),
            flow: fact.flow,
            key: fact.key.clone(),
            payload: fact.payload.clone(),
            payload_hash: hex::encode(&hash[..8]),
            enqueued_at: now,
            deliveries: 0,
            generation: 0,
            first_failure_at: None,
            last_error: None,
            redrive: fact.redrive,
        }
    }

    /// What a worker is handed with the message.
    fn delivery(&self) -> Delivery {
        Delivery {
            flow: self.flow,
            key: self.key.clone(),
            payload: self.payload.clone(),
            payload_hash: self.payload_hash.clone(),
            redrive: self.redrive,
        }
    }
}

/// What a worker is handed with one delivery of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Delivery {
    pub(super) flow: Flow,
    pub(super) key: String,
    pub(super) payload: String,
    pub(super) payload_hash: String,
    /// An operator sent it again: a `failed` claim is tried once more.
    pub(super) redrive: bool,
}

impl Delivery {
    /// The worker's view of it, at `at`.
    pub(super) fn work(&self, at: DateTime<Utc>) -> Work<'_> {
        Work {
            flow: self.flow,
            key: &self.key,
            payload: &self.payload,
            payload_hash: &self.payload_hash,
            redrive: self.redrive,
            at,
        }
    }
}

/// How many of `flow`'s messages wait, and the age in seconds of the
/// oldest (zero when none does).
pub(super) fn backlog<'a>(
    messages: impl Iterator<Item = &'a Message>,
    flow: Flow,
    now: DateTime<Utc>,
) -> (usize, f64) {
    let waiting = messages.filter(|m| m.flow == flow);
    let (depth, oldest) = waiting.fold((0usize, None::<DateTime<Utc>>), |(n, oldest), m| {
        (
            n + 1,
            Some(oldest.map_or(m.enqueued_at, |o| o.min(m.enqueued_at))),
        )
    });
    let age = oldest.map_or(0.0, |o| (now - o).num_milliseconds() as f64 / 1000.0);
    (depth, age.max(0.0))
}

impl Simulation {
    pub(super) fn enqueue(&mut self, fact: &Fact) -> u64 {
        self.next_message += 1;
        let id = self.next_message;
        let message = Message::new(fact, id, self.rng.random::<u32>(), self.now);
        self.messages.insert(id, message);
        id
    }

    /// Marks a message delivered; returns what the worker needs.
    pub(super) fn hand_out(&mut self, id: u64) -> Option<Delivery> {
        let now = self.now;
        let message = self.messages.get_mut(&id)?;
        message.deliveries += 1;
        message.generation += 1;
        let generation = message.generation;
        let delivery = message.delivery();
        self.meter
            .count(delivery.flow.consumer(), Metric::Deliveries, now);
        self.after(
            VISIBILITY_TIMEOUT,
            Event::VisibilityTimeout {
                message: id,
                generation,
            },
        );
        Some(delivery)
    }

    /// Notes the failure; hands the message back unless it is out of deliveries
    /// (then the caller gives up on it).
    pub(super) fn retry_later(&mut self, id: u64, error: &str, delay: TimeDelta) {
        let now = self.now;
        let Some(message) = self.messages.get_mut(&id) else {
            return;
        };
        message.first_failure_at.get_or_insert(now);
        message.last_error = Some(error.to_owned());
        if message.deliveries < MAX_DELIVERIES {
            self.nack(id, delay);
        } else {
            // Out of deliveries: the next timer gives up on it.
            message.generation += 1;
            let generation = message.generation;
            self.after(
                TimeDelta::zero(),
                Event::VisibilityTimeout {
                    message: id,
                    generation,
                },
            );
        }
    }

    pub(super) async fn visibility_timeout(
        &mut self,
        id: u64,
        generation: u32,
    ) -> Result<(), StoreError> {
        let Some(message) = self.messages.get_mut(&id) else {
            return Ok(());
        };
        if message.generation != generation {
            return Ok(());
        }
        if message.deliveries >= MAX_DELIVERIES {
            message.first_failure_at.get_or_insert(self.now);
            message.last_error.get_or_insert_with(|| {
                "the worker did not acknowledge within the 45 s visibility timeout".into()
            });
            return self.give_up(id).await;
        }
        self.after(TimeDelta::zero(), Event::Deliver(id));
        Ok(())
    }

    async fn give_up(&mut self, id: u64) -> Result<(), StoreError> {
        let Some(message) = self.messages.remove(&id) else {
            return Ok(());
        };
        let give_up = Abandon {
            flow: message.flow,
            key: &message.key,
            message_id: &message.id,
            payload: &message.payload,
            deliveries: message.deliveries,
            first_failure_at: message.first_failure_at.unwrap_or(self.now),
            error: message
                .last_error
                .as_deref()
                .unwrap_or("delivery limit reached"),
            at: self.now,
        };
        let dead_letter = worker::dead_letter(&self.store, &give_up).await?;
        self.meter
            .count(message.flow.consumer(), Metric::DeadLetters, self.now);
        if let Some(at) = self.on_call_at(&message.key) {
            self.schedule(at, Event::Replay(dead_letter));
        }
        Ok(())
    }

    pub(super) fn ack(&mut self, id: u64) {
        self.messages.remove(&id);
    }

    fn nack(&mut self, id: u64, delay: TimeDelta) {
        if let Some(message) = self.messages.get_mut(&id) {
            message.generation += 1;
            self.after(delay, Event::Deliver(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::flows;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-14T12:00:00Z")
            .unwrap()
            .to_utc()
            + TimeDelta::seconds(seconds)
    }

    #[test]
    fn a_message_carries_its_fact_and_a_short_digest_of_its_payload() {
        let fact = flows::order_event("ship", "EU/2026/K-2210");
        let message = Message::new(&fact, 7, 0xbeef, at(0));
        assert_eq!(message.id, "m-0000beef-7");
        assert_eq!(message.payload_hash.len(), 16);
        assert_eq!(
            message.payload_hash,
            hex::encode(&Sha256::digest(fact.payload.as_bytes())[..8])
        );
        assert_eq!((message.deliveries, message.generation), (0, 0));
        let delivery = message.delivery();
        assert_eq!(delivery.flow, Flow::Orders);
        assert_eq!(delivery.key, "ship:EU/2026/K-2210");
        assert_eq!(delivery.payload, fact.payload);
        assert!(!delivery.redrive);
        let work = delivery.work(at(5));
        assert_eq!((work.key, work.at), (delivery.key.as_str(), at(5)));
    }

    #[test]
    fn the_backlog_counts_one_flows_messages_and_ages_the_oldest() {
        let reminder = flows::reminder("account-1", "2026-04-13");
        let order = flows::order_event("ship", "EU/2026/K-1");
        let messages = [
            Message::new(&reminder, 1, 0, at(10)),
            Message::new(&order, 2, 0, at(0)),
            Message::new(&reminder, 3, 0, at(40)),
        ];
        assert_eq!(backlog(messages.iter(), Flow::Reminders, at(70)), (2, 60.0));
        assert_eq!(backlog(messages.iter(), Flow::Orders, at(70)), (1, 70.0));
        assert_eq!(backlog(messages.iter(), Flow::Payments, at(70)), (0, 0.0));
        // A clock behind the queue's never shows a negative age.
        assert_eq!(backlog(messages.iter(), Flow::Orders, at(-5)), (1, 0.0));
    }
}
