//! The simulation's state and its clock: what is scheduled, and one step
//! at a time.

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};
use idem_consumer::Meter;
use idem_store::{Store, StoreError};
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::{
    FLUSH_EVERY, RELAY_EVERY, Settings,
    events::{Event, Scheduled},
    flows::{self, Flow},
    incidents,
    message::Message,
    provider::Call,
    tour,
};

pub(super) struct Simulation {
    pub(super) store: Store,
    pub(super) rng: StdRng,
    pub(super) now: DateTime<Utc>,
    pub(super) events: BinaryHeap<Scheduled>,
    pub(super) seq: u64,
    pub(super) messages: HashMap<u64, Message>,
    pub(super) next_message: u64,
    pub(super) meter: Meter,
    /// Keys whose last call was rate limited (429s come in streaks).
    pub(super) rate_limited: HashSet<String>,
    /// Scripted provider answers for the tour's keys.
    pub(super) scripts: HashMap<String, VecDeque<Call>>,
    /// The history's incidents (none once the demo runs on after a restart).
    pub(super) timeline: Option<incidents::Timeline>,
    /// Keys the simulated on-call leaves for people: the tour's, the open
    /// incident's.
    pub(super) left_for_people: HashSet<String>,
    pub(super) facts: u64,
    pub(super) ledger: u64,
    pub(super) last_warning: Option<DateTime<Utc>>,
}

impl Simulation {
    /// A simulation whose clock starts `backfill` before `now`, with the tour
    /// scheduled when there is history to write.
    pub(super) fn start(store: Store, settings: &Settings, now: DateTime<Utc>) -> Self {
        let backfill = TimeDelta::from_std(settings.backfill).unwrap_or_default();
        let mut sim = Simulation::new(store, settings.seed, now - backfill);
        if !backfill.is_zero() {
            sim.timeline = Some(incidents::Timeline::new(now - backfill, now));
            sim.schedule_tour(now);
            sim.left_for_people = sim.scripts.keys().cloned().collect();
            sim.schedule_open_incident(now);
            sim.schedule_calm_unknowns(now);
            sim.schedule_outage_unknowns(now);
        }
        sim
    }

    fn new(store: Store, seed: u64, start: DateTime<Utc>) -> Self {
        let mut sim = Simulation {
            store,
            rng: StdRng::seed_from_u64(seed),
            now: start,
            events: BinaryHeap::new(),
            seq: 0,
            messages: HashMap::new(),
            next_message: 0,
            meter: Meter::default(),
            rate_limited: HashSet::new(),
            scripts: HashMap::new(),
            timeline: None,
            left_for_people: HashSet::new(),
            facts: 0,
            ledger: 0,
            last_warning: None,
        };
        for flow in Flow::ALL {
            let jitter = TimeDelta::milliseconds(sim.rng.random_range(0..2000));
            sim.schedule(start + jitter, Event::NextFact(flow));
        }
        sim.schedule(start + RELAY_EVERY, Event::Relay);
        sim.schedule(start + FLUSH_EVERY, Event::Flush);
        sim
    }

    /// Schedules the [`tour`] at the start of the history.
    fn schedule_tour(&mut self, end: DateTime<Utc>) {
        let base = tour::starts_at(self.now, end);
        let plan = tour::plan(base, &flows::renewal_date(self.now));
        self.scripts.extend(plan.scripts);
        for tour::Publication { at, fact, retry } in plan.publications {
            self.schedule(at, Event::Publish { fact, retry });
        }
    }

    /// How publishers, the queue and workers behave now.
    pub(super) fn fleet(&self) -> incidents::FleetWeather {
        match &self.timeline {
            Some(timeline) => timeline.fleet(self.now),
            None => incidents::Timeline::healthy_fleet(),
        }
    }

    /// How `flow`'s provider answers now.
    pub(super) fn provider_weather(&self, flow: Flow) -> incidents::ProviderWeather {
        match &self.timeline {
            Some(timeline) => timeline.provider(flow, self.now),
            None => incidents::Timeline::healthy_provider(),
        }
    }

    pub(super) fn schedule(&mut self, at: DateTime<Utc>, event: Event) {
        self.seq += 1;
        self.events.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    pub(super) fn after(&mut self, delay: TimeDelta, event: Event) {
        self.schedule(self.now + delay, event);
    }

    pub(super) fn next_at(&self) -> Option<DateTime<Utc>> {
        self.events.peek().map(|s| s.at)
    }

    pub(super) fn seconds(&mut self, range: std::ops::Range<f64>) -> TimeDelta {
        TimeDelta::milliseconds((self.rng.random_range(range) * 1000.0) as i64)
    }

    pub(super) async fn step(&mut self) {
        let Some(Scheduled { at, event, .. }) = self.events.pop() else {
            return;
        };
        self.now = self.now.max(at);
        let result = match event {
            Event::NextFact(flow) => {
                self.next_fact(flow);
                Ok(())
            }
            Event::Publish { fact, retry } => {
                self.publish(fact, retry);
                Ok(())
            }
            Event::Deliver(id) => self.deliver(id).await,
            Event::DeliverTwins(a, b) => self.deliver_twins(a, b).await,
            Event::Complete {
                message,
                generation,
                flow,
                key,
                payload,
                call,
            } => {
                self.complete(message, generation, (flow, key, payload), call)
                    .await
            }
            Event::VisibilityTimeout {
                message,
                generation,
            } => self.visibility_timeout(message, generation).await,
            Event::Relay => self.relay().await,
            Event::Settle { flow, key } => self.settle(flow, &key).await,
            Event::Replay(dead_letter) => self.replay(dead_letter).await,
            Event::Flush => {
                self.flush().await;
                self.after(FLUSH_EVERY, Event::Flush);
                Ok(())
            }
        };
        if let Err(err) = result {
            self.warn(&err);
        }
    }

    pub(super) fn warn(&mut self, err: &StoreError) {
        let wall = Utc::now();
        if self
            .last_warning
            .is_none_or(|last| wall - last > TimeDelta::seconds(30))
        {
            self.last_warning = Some(wall);
            tracing::warn!(error = %idem_app::error::cause_chain(err), "demo step failed; the simulation carries on");
        }
    }

    pub(super) fn ledger_ref(&mut self) -> String {
        self.ledger += 1;
        format!("ledger:{}", 100_000 + self.ledger)
    }
}
