//! A message on the demo's queue, what a worker is handed with one delivery
//! of it, and how long a flow's messages have waited.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{
    flows::{Fact, Flow},
    worker::Work,
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
    pub(super) fn new(fact: &Fact, number: u64, tag: u32, now: DateTime<Utc>) -> Self {
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
    pub(super) fn delivery(&self) -> Delivery {
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

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

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
