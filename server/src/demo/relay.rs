//! The outbox relay, and the queue and outbox gauges flushed with the
//! meter's samples.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{Metric, OutboxOrigin};
use idem_store::{StoreError, Ts};
use rand::Rng;

use super::{
    RELAY_EVERY,
    events::Event,
    flows::{Fact, Flow},
    message,
    simulation::Simulation,
};

impl Simulation {
    /// The outbox relay: publishes the oldest rows; replays and resolutions go
    /// back onto their consumer's queue with the same key and payload.
    pub(super) async fn relay(&mut self) -> Result<(), StoreError> {
        self.after(RELAY_EVERY, Event::Relay);
        let now = self.now;
        let stuck = self.timeline.is_some_and(|t| t.relay_stuck(now));
        let mut tx = self.store.begin().await?;
        let rows = tx.claim_unpublished(25).await?;
        let mut oldest: HashMap<Flow, f64> = HashMap::new();
        let mut republish = Vec::new();
        for row in &rows {
            let flow = Flow::from_consumer(&row.consumer);
            if let Some(flow) = flow {
                let age = (now - row.created_at).num_milliseconds() as f64 / 1000.0;
                oldest.entry(flow).or_insert(age.max(0.0));
            }
            if stuck {
                // The relay reads its rows and publishes none of them.
                continue;
            }
            if self.rng.random_bool(0.03) {
                tx.mark_publish_attempt(
                    row.id,
                    Some("broker unavailable: connection refused"),
                    Ts::from(now),
                )
                .await?;
                continue;
            }
            tx.mark_publish_attempt(row.id, None, Ts::from(now)).await?;
            if let (Some(flow), true) = (flow, row.origin != OutboxOrigin::Application) {
                republish.push(Fact {
                    flow,
                    key: row.key.clone(),
                    payload: row.payload.clone(),
                    redrive: true,
                });
            }
        }
        tx.commit().await?;
        for flow in Flow::ALL {
            let age = oldest.get(&flow).copied().unwrap_or(0.0);
            self.meter
                .gauge(flow.consumer(), Metric::OutboxOldestAgeSeconds, now, age);
        }
        for fact in republish {
            self.meter.count(fact.flow.consumer(), Metric::Replays, now);
            let id = self.enqueue(&fact);
            self.after(TimeDelta::milliseconds(100), Event::Deliver(id));
        }
        Ok(())
    }

    /// Gauges the queues, then writes the meter's samples.
    pub(super) async fn flush(&mut self) {
        let now = self.now;
        for flow in Flow::ALL {
            let (depth, age) = message::backlog(self.messages.values(), flow, now);
            self.meter
                .gauge(flow.consumer(), Metric::QueueDepth, now, depth as f64);
            self.meter
                .gauge(flow.consumer(), Metric::QueueOldestAgeSeconds, now, age);
        }
        let samples = self.meter.drain();
        if let Err(err) = self.store.metrics().record_metrics(&samples).await {
            self.warn(&err);
        }
    }
}
