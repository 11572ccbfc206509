//! The queue: at-least-once delivery with a 45 s visibility timeout,
//! acknowledgements, and a dead-letter queue after `MAX_DELIVERIES`.

use chrono::TimeDelta;
use idem_domain::Metric;
use idem_store::StoreError;
use rand::Rng;

use super::{
    VISIBILITY_TIMEOUT,
    events::Event,
    flows::Fact,
    message::{Delivery, Message},
    simulation::Simulation,
    worker::{self, Abandon, MAX_DELIVERIES},
};

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
