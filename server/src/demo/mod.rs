//! The demo: a small fleet of consumers that behaves like real ones.
//!
//! A discrete-event simulation of three flows (renewal reminders, payment
//! webhooks, order events), each a queue with at-least-once delivery and a
//! 45 s visibility timeout, and workers that follow the idempotent-consumer
//! pattern against the real database (see `worker`). It produces every case
//! the console exists for: publisher retries inside and after the five-minute
//! FIFO window, redelivery after a visibility timeout, two workers claiming
//! one key at once, crashes after provider acceptance, lost responses, 429s
//! with Retry-After (in streaks), permanent 400s, dead letters after three
//! deliveries, rolled-back transactions, an outbox relay that also
//! republishes replays, and per-minute metrics.
//!
//! History is the same simulation run faster: on first start the clock
//! begins `backfill` ago and events in the past run without waiting, so the
//! history's rows and metrics are as consistent as the live ones.
//!
//! The fleet is healthy most of the time, with incidents at known times of
//! the history (`incidents`): a publisher retry storm, a provider outage, a
//! stuck outbox relay, and a degraded email provider still open when the
//! history ends. A simulated on-call settles unknown outcomes within
//! minutes — late after the outage, not yet for the open incident.

mod flows;
pub mod incidents;
mod provider;
mod worker;

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap, HashSet, VecDeque},
    time::Duration,
};

use chrono::{DateTime, Days, TimeDelta, Utc};
use idem_consumer::{Decision, Failure, Meter, Next};
use idem_domain::{Metric, OutboxOrigin};
use idem_store::{Store, StoreError, Ts};
use rand::{Rng, SeedableRng, rngs::StdRng};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use flows::{Fact, Flow};
use provider::Call;
use worker::{Abandon, MAX_DELIVERIES, Step, Work};

/// The tour: stories with fixed keys written at the start of the history,
/// so the demo (and its tests) always have one of each case to open.
pub mod tour {
    /// Reminder account whose renewal is sent, then published again six
    /// minutes later: a duplicate outside a five-minute FIFO window.
    pub const LATE_DUPLICATE_ACCOUNT: &str = "account-1842";
    /// Webhook delivered twice within 40 seconds.
    pub const WEBHOOK_DUPLICATE: &str = "pay_7f3";
    /// Reminder account whose worker crashes after the provider accepted.
    pub const CRASHED_ACCOUNT: &str = "account-2210";
    /// Order event rate limited three times, then dead-lettered; a replay succeeds.
    pub const DEAD_LETTERED: &str = "refund:EU/2026/Ø-1842";
    /// Order event dead-lettered, then redriven by the team's own queue
    /// tooling and sent: an open dead letter whose key is already sent.
    pub const DEAD_LETTER_ALREADY_SENT: &str = "ship:EU/2026/K-2210";
    /// Order event whose response is lost.
    pub const LOST_RESPONSE: &str = "return:DK/2026/Ø-PO #7 50%";
    /// Order event rate limited into the dead-letter queue twice (the team
    /// redrove it once in between): two open dead letters on one key page.
    pub const TWO_DEAD_LETTERS: &str = "refund:EU/2026/Ø-1843";
    /// Order event rate limited into the dead-letter queue, then redriven
    /// by the team and its response lost: an unknown outcome beside an open
    /// dead letter.
    pub const UNKNOWN_BESIDE_DEAD_LETTER: &str = "charge:EU/2026/Ø-77";

    use chrono::{DateTime, TimeDelta, Utc};

    /// When the tour begins in a history from `start` to `end`: three hours
    /// before the end (its stories take an hour and a half), or ten
    /// minutes after the start of a shorter one — recent, so the overview's
    /// oldest unknown outcomes are not days old.
    pub fn starts_at(start: DateTime<Utc>, end: DateTime<Utc>) -> DateTime<Utc> {
        (start + TimeDelta::minutes(10)).max(end - TimeDelta::hours(3))
    }
}

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    /// How much history to write before going live (zero on a restart).
    pub backfill: Duration,
}

const VISIBILITY_TIMEOUT: TimeDelta = TimeDelta::seconds(45);
const BUSY_BACKOFF: TimeDelta = TimeDelta::seconds(30);
const RELAY_EVERY: TimeDelta = TimeDelta::seconds(2);
const FLUSH_EVERY: TimeDelta = TimeDelta::seconds(10);
const STALL: TimeDelta = TimeDelta::seconds(50);
/// Who settles unknown outcomes in the demo, as the audit log names them.
pub const ON_CALL: &str = "on-call";

/// Runs the simulation until `stop` turns true: history first (when
/// `settings.backfill` is not zero), then live.
/// `history_written` is told once the backfilled history is in the database
/// (hourly rollups wait for it, so they do not seal hours still being written).
pub async fn run(
    store: Store,
    settings: Settings,
    mut stop: watch::Receiver<bool>,
    history_written: tokio::sync::oneshot::Sender<()>,
) {
    let started = Utc::now();
    tracing::info!(
        seed = settings.seed,
        backfill_hours = settings.backfill.as_secs() / 3600,
        "demo simulator starting"
    );
    let mut sim = Simulation::start(store, &settings, started);
    while !*stop.borrow() {
        let Some(at) = sim.next_at() else { break };
        if at > Utc::now() {
            break;
        }
        sim.step().await;
    }
    if !settings.backfill.is_zero() {
        tracing::info!(
            facts = sim.facts,
            seconds = (Utc::now() - started).num_seconds(),
            "demo history written"
        );
    }
    sim.flush().await;
    let _ = history_written.send(());
    while !*stop.borrow() {
        let Some(at) = sim.next_at() else { break };
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        tokio::select! {
            () = tokio::time::sleep(wait) => sim.step().await,
            _ = stop.changed() => break,
        }
    }
    sim.flush().await;
    tracing::info!("demo simulator stopped");
}

/// Writes `settings.backfill` of history ending at `end` (not after now),
/// and returns how many business facts it published. With `end` now, this is
/// the history [`run`] writes on first start. Traffic follows the time of
/// day, so a caller that counts on a busy history picks an afternoon `end`.
pub async fn write_history(store: Store, settings: &Settings, end: DateTime<Utc>) -> u64 {
    let end = end.min(Utc::now());
    let mut sim = Simulation::start(store, settings, end);
    while sim.next_at().is_some_and(|at| at <= end) {
        sim.step().await;
    }
    sim.flush().await;
    sim.facts
}

enum Event {
    NextFact(Flow),
    Publish {
        fact: Fact,
        retry: bool,
    },
    Deliver(u64),
    /// The queue hands one message's two copies to two workers at the same instant.
    DeliverTwins(u64, u64),
    Complete {
        message: u64,
        generation: u32,
        /// What was called for, so the outcome is recorded even when the
        /// message has meanwhile been given up on.
        flow: Flow,
        key: String,
        payload: String,
        call: Call,
    },
    VisibilityTimeout {
        message: u64,
        generation: u32,
    },
    Relay,
    Flush,
    /// The on-call settles a key's unknown outcome with the provider.
    Settle {
        flow: Flow,
        key: String,
    },
    /// The on-call replays a dead letter.
    Replay(i64),
}

struct Scheduled {
    at: DateTime<Utc>,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Earliest first (the heap is a max-heap).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

struct Message {
    id: String,
    flow: Flow,
    key: String,
    payload: String,
    payload_hash: String,
    enqueued_at: DateTime<Utc>,
    deliveries: u32,
    /// Bumped by every delivery, ack or nack: a stale timer or a stale
    /// worker's acknowledgement no longer applies.
    generation: u32,
    first_failure_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    redrive: bool,
}

struct Simulation {
    store: Store,
    rng: StdRng,
    now: DateTime<Utc>,
    events: BinaryHeap<Scheduled>,
    seq: u64,
    messages: HashMap<u64, Message>,
    next_message: u64,
    meter: Meter,
    /// Keys whose last call was rate limited (429s come in streaks).
    rate_limited: HashSet<String>,
    /// Scripted provider answers for the tour's keys.
    scripts: HashMap<String, VecDeque<Call>>,
    /// The history's incidents (none once the demo runs on after a restart).
    timeline: Option<incidents::Timeline>,
    /// Keys the simulated on-call leaves for people: the tour's, the open
    /// incident's.
    left_for_people: HashSet<String>,
    facts: u64,
    ledger: u64,
    last_warning: Option<DateTime<Utc>>,
}

impl Simulation {
    /// A simulation whose clock starts `backfill` before `now`, with the tour
    /// scheduled when there is history to write.
    fn start(store: Store, settings: &Settings, now: DateTime<Utc>) -> Self {
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
        let date = (self.now + Days::new(30)).format("%Y-%m-%d").to_string();
        let minutes = |m: i64| base + TimeDelta::minutes(m);

        // Sent, then a publisher retry six minutes later: outside a FIFO dedupe window.
        let renewal = flows::reminder(tour::LATE_DUPLICATE_ACCOUNT, &date);
        self.scripts.insert(
            renewal.key.clone(),
            VecDeque::from([Call::Accepted {
                provider_ref: "msg_01J8Q3Z6".into(),
            }]),
        );
        self.schedule(
            minutes(0),
            Event::Publish {
                fact: renewal.clone(),
                retry: false,
            },
        );
        self.schedule(
            minutes(6) + TimeDelta::seconds(10),
            Event::Publish {
                fact: renewal,
                retry: true,
            },
        );

        // A webhook delivered twice within 40 seconds: inside the window.
        let webhook = flows::payment(tour::WEBHOOK_DUPLICATE, 4_200);
        self.schedule(
            minutes(10),
            Event::Publish {
                fact: webhook.clone(),
                retry: false,
            },
        );
        self.schedule(
            minutes(10) + TimeDelta::seconds(40),
            Event::Publish {
                fact: webhook,
                retry: true,
            },
        );

        // The worker crashes after the provider accepted: unknown on redelivery.
        let crashed = flows::reminder(tour::CRASHED_ACCOUNT, &date);
        self.scripts.insert(
            crashed.key.clone(),
            VecDeque::from([Call::CrashAfterAcceptance]),
        );
        self.schedule(
            minutes(20),
            Event::Publish {
                fact: crashed,
                retry: false,
            },
        );

        // Rate limited three times: dead-lettered, key kept.
        let refund = flows::order_event("refund", "EU/2026/Ø-1842");
        debug_assert_eq!(refund.key, tour::DEAD_LETTERED);
        // …and a replay of it goes through.
        let three_429s_then_accepted = |reference: &str| {
            VecDeque::from([
                Call::RateLimited {
                    retry_after_seconds: 20,
                },
                Call::RateLimited {
                    retry_after_seconds: 30,
                },
                Call::RateLimited {
                    retry_after_seconds: 30,
                },
                Call::Accepted {
                    provider_ref: reference.to_owned(),
                },
            ])
        };
        self.scripts.insert(
            refund.key.clone(),
            three_429s_then_accepted("ful_replayed01"),
        );
        self.schedule(
            minutes(30),
            Event::Publish {
                fact: refund,
                retry: false,
            },
        );

        // Dead-lettered, then redriven by the team and sent: Idem's dead
        // letter is safe to discard.
        let shipped = flows::order_event("ship", "EU/2026/K-2210");
        debug_assert_eq!(shipped.key, tour::DEAD_LETTER_ALREADY_SENT);
        self.scripts.insert(
            shipped.key.clone(),
            three_429s_then_accepted("ful_second01"),
        );
        self.schedule(
            minutes(45),
            Event::Publish {
                fact: shipped.clone(),
                retry: false,
            },
        );
        // The team's own queue tooling redrives the dead-lettered message
        // (outside Idem): a redrive, so the failed claim is tried again.
        self.schedule(
            minutes(60),
            Event::Publish {
                fact: Fact {
                    redrive: true,
                    ..shipped
                },
                retry: true,
            },
        );

        // Rate limited into the dead-letter queue, redriven by the team, and
        // rate limited into it again: two open dead letters. A replay meets
        // one more 429 (30 s), then goes through.
        let twice = flows::order_event("refund", "EU/2026/Ø-1843");
        debug_assert_eq!(twice.key, tour::TWO_DEAD_LETTERS);
        let mut script = three_429s_then_accepted("unused");
        script.pop_back();
        script.extend(three_429s_then_accepted("unused"));
        script.pop_back();
        script.push_back(Call::RateLimited {
            retry_after_seconds: 30,
        });
        script.extend(
            ["ful_twice01", "ful_twice02"].map(|reference| Call::Accepted {
                provider_ref: reference.to_owned(),
            }),
        );
        self.scripts.insert(twice.key.clone(), script);
        self.schedule(
            minutes(50),
            Event::Publish {
                fact: twice.clone(),
                retry: false,
            },
        );
        self.schedule(
            minutes(65),
            Event::Publish {
                fact: Fact {
                    redrive: true,
                    ..twice
                },
                retry: true,
            },
        );

        // Rate limited into the dead-letter queue, then the team's redrive
        // loses its response: unknown, with the dead letter still open.
        let charge = flows::order_event("charge", "EU/2026/Ø-77");
        debug_assert_eq!(charge.key, tour::UNKNOWN_BESIDE_DEAD_LETTER);
        let mut script = three_429s_then_accepted("unused");
        script.pop_back();
        script.push_back(Call::LostResponse);
        self.scripts.insert(charge.key.clone(), script);
        self.schedule(
            minutes(55),
            Event::Publish {
                fact: charge.clone(),
                retry: false,
            },
        );
        self.schedule(
            minutes(70),
            Event::Publish {
                fact: Fact {
                    redrive: true,
                    ..charge
                },
                retry: true,
            },
        );

        // The response is lost: unknown at once.
        let lost = flows::order_event("return", "DK/2026/Ø-PO #7 50%");
        debug_assert_eq!(lost.key, tour::LOST_RESPONSE);
        self.scripts
            .insert(lost.key.clone(), VecDeque::from([Call::LostResponse]));
        self.schedule(
            minutes(40),
            Event::Publish {
                fact: lost,
                retry: false,
            },
        );
    }

    /// The incident still open when the history ends: besides its random
    /// lost responses, six reminders whose responses are lost for sure, so
    /// the unknown-outcome queue has work in it whatever the time of day.
    fn schedule_open_incident(&mut self, end: DateTime<Utc>) {
        let (from, _) = incidents::Incident::EmailProviderDegraded.span(self.now, end);
        let date = (end + Days::new(30)).format("%Y-%m-%d").to_string();
        for n in 0..6 {
            let fact = self.lost_reminder(5_000_000, &date);
            self.left_for_people.insert(fact.key.clone());
            self.schedule(
                from + TimeDelta::minutes(3 + 4 * n),
                Event::Publish { fact, retry: false },
            );
        }
    }

    /// A lost response now and then on calm hours (besides the random
    /// ones), each settled by the on-call within minutes: what a healthy
    /// day's unknown outcomes look like.
    fn schedule_calm_unknowns(&mut self, end: DateTime<Utc>) {
        let date = (end + Days::new(30)).format("%Y-%m-%d").to_string();
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
    fn schedule_outage_unknowns(&mut self, end: DateTime<Utc>) {
        let (from, _) = incidents::Incident::ProviderOutage.span(self.now, end);
        if from < self.now {
            // Before a short history starts.
            return;
        }
        let date = (end + Days::new(30)).format("%Y-%m-%d").to_string();
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

    /// How publishers, the queue and workers behave now.
    fn fleet(&self) -> incidents::FleetWeather {
        match &self.timeline {
            Some(timeline) => timeline.fleet(self.now),
            None => incidents::Timeline::healthy_fleet(),
        }
    }

    /// How `flow`'s provider answers now.
    fn provider_weather(&self, flow: Flow) -> incidents::ProviderWeather {
        match &self.timeline {
            Some(timeline) => timeline.provider(flow, self.now),
            None => incidents::Timeline::healthy_provider(),
        }
    }

    /// An unknown outcome or a dead letter for the on-call (unless it is
    /// left for people): when it will be seen to.
    fn on_call_at(&mut self, key: &str) -> Option<DateTime<Utc>> {
        if self.left_for_people.contains(key) {
            return None;
        }
        let jitter = self.rng.random::<f64>();
        match &self.timeline {
            Some(timeline) => timeline.settled_at(self.now, jitter),
            None => Some(self.now + TimeDelta::seconds(120 + (480.0 * jitter) as i64)),
        }
    }

    /// An unknown outcome for the on-call.
    fn call_on_call(&mut self, flow: Flow, key: String) {
        if let Some(at) = self.on_call_at(&key) {
            self.schedule(at, Event::Settle { flow, key });
        }
    }

    /// The on-call replays a dead letter once the provider is back (a
    /// replay its verdict blocks is left for people).
    async fn replay(&mut self, dead_letter_id: i64) -> Result<(), StoreError> {
        let action_id = format!("on-call-{}-{}", self.seq, self.rng.random::<u32>());
        let request = idem_store::ReplayRequest {
            dead_letter_id,
            action_id: &action_id,
            actor: idem_store::Actor {
                name: ON_CALL,
                role: "operator",
                client_addr: None,
            },
            override_verdict: false,
            reason: Some("the provider is back (simulated on-call)"),
            retention: TimeDelta::days(30),
        };
        self.store
            .replay_dead_letter_at(&request, Ts::from(self.now))
            .await?;
        Ok(())
    }

    /// The on-call checks with the provider and records what it says: most
    /// often that it acted (sent, with its reference), else that it did not
    /// (failed, retried through the outbox with the same key).
    async fn settle(&mut self, flow: Flow, key: &str) -> Result<(), StoreError> {
        let Some(claim) = self.store.claim(flow.consumer(), key).await? else {
            return Ok(());
        };
        if claim.status != idem_domain::ClaimStatus::Unknown {
            return Ok(());
        }
        let acted = self.rng.random_bool(0.7);
        let reference = provider::reference(&mut self.rng, "chk");
        let action_id = format!("on-call-{}-{}", self.seq, self.rng.random::<u32>());
        let resolution = if acted {
            idem_domain::action::Resolution::Sent {
                provider_ref: reference,
            }
        } else {
            idem_domain::action::Resolution::FailedRetry
        };
        let request = idem_store::ResolveRequest {
            consumer: flow.consumer(),
            key,
            version: claim.version,
            resolution,
            action_id: &action_id,
            actor: idem_store::Actor {
                name: ON_CALL,
                role: "operator",
                client_addr: None,
            },
            reason: Some("checked with the provider (simulated on-call)"),
        };
        self.store
            .resolve_unknown_at(&request, Ts::from(self.now))
            .await?;
        Ok(())
    }

    fn schedule(&mut self, at: DateTime<Utc>, event: Event) {
        self.seq += 1;
        self.events.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn after(&mut self, delay: TimeDelta, event: Event) {
        self.schedule(self.now + delay, event);
    }

    fn next_at(&self) -> Option<DateTime<Utc>> {
        self.events.peek().map(|s| s.at)
    }

    fn seconds(&mut self, range: std::ops::Range<f64>) -> TimeDelta {
        TimeDelta::milliseconds((self.rng.random_range(range) * 1000.0) as i64)
    }

    async fn step(&mut self) {
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

    fn warn(&mut self, err: &StoreError) {
        let wall = Utc::now();
        if self
            .last_warning
            .is_none_or(|last| wall - last > TimeDelta::seconds(30))
        {
            self.last_warning = Some(wall);
            tracing::warn!(error = %idem_app::ssr::cause_chain(err), "demo step failed; the simulation carries on");
        }
    }

    fn next_fact(&mut self, flow: Flow) {
        let backfill = self.now < Utc::now() - TimeDelta::seconds(5);
        // Busier in the afternoon (UTC), quieter at night: charts have a shape.
        let hour = f64::from(chrono::Timelike::hour(&self.now));
        let daily = 0.55 + 0.45 * ((hour - 8.0) / 24.0 * std::f64::consts::TAU).sin();
        let mean = flow.mean_interval_seconds(backfill) / daily.max(0.15);
        let fact = flows::random_fact(flow, self.now, &mut self.rng);
        self.publish(fact, false);
        let gap = self.seconds(0.2 * mean..1.8 * mean);
        self.after(gap, Event::NextFact(flow));
    }

    fn publish(&mut self, fact: Fact, retry: bool) {
        // The tour's keys follow their script alone: no random retries or twins.
        let scripted = self.scripts.contains_key(&fact.key);
        if !retry {
            self.facts += 1;
        }
        let fleet = self.fleet();
        if !retry && !scripted {
            // Publishers retry: inside the five-minute window, after it, and now and then with a re-serialised payload.
            let roll: f64 = self.rng.random();
            let within = fleet.retry_within;
            let after = within + fleet.retry_after;
            let drifted = after + fleet.retry_drifted;
            let again = match roll {
                r if r < within => Some((self.seconds(15.0..240.0), fact.payload.clone())),
                r if r < after => Some((self.seconds(360.0..1800.0), fact.payload.clone())),
                r if r < drifted => {
                    Some((self.seconds(360.0..900.0), flows::drifted(&fact.payload)))
                }
                _ => None,
            };
            if let Some((delay, payload)) = again {
                let fact = Fact {
                    payload,
                    ..fact.clone()
                };
                self.after(delay, Event::Publish { fact, retry: true });
            }
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

    fn enqueue(&mut self, fact: &Fact) -> u64 {
        self.next_message += 1;
        let id = self.next_message;
        let hash = Sha256::digest(fact.payload.as_bytes());
        self.messages.insert(
            id,
            Message {
                id: format!("m-{:08x}-{id}", self.rng.random::<u32>()),
                flow: fact.flow,
                key: fact.key.clone(),
                payload: fact.payload.clone(),
                payload_hash: hex::encode(&hash[..8]),
                enqueued_at: self.now,
                deliveries: 0,
                generation: 0,
                first_failure_at: None,
                last_error: None,
                redrive: fact.redrive,
            },
        );
        id
    }

    /// Marks a message delivered; returns what the worker needs.
    fn hand_out(&mut self, id: u64) -> Option<(Flow, String, String, String, bool)> {
        let now = self.now;
        let message = self.messages.get_mut(&id)?;
        message.deliveries += 1;
        message.generation += 1;
        let (generation, flow) = (message.generation, message.flow);
        let work = (
            flow,
            message.key.clone(),
            message.payload.clone(),
            message.payload_hash.clone(),
            message.redrive,
        );
        self.meter.count(flow.consumer(), Metric::Deliveries, now);
        self.after(
            VISIBILITY_TIMEOUT,
            Event::VisibilityTimeout {
                message: id,
                generation,
            },
        );
        Some(work)
    }

    fn ledger_ref(&mut self) -> String {
        self.ledger += 1;
        format!("ledger:{}", 100_000 + self.ledger)
    }

    async fn deliver(&mut self, id: u64) -> Result<(), StoreError> {
        let Some((flow, key, payload, hash, redrive)) = self.hand_out(id) else {
            return Ok(());
        };
        let ledger = self.ledger_ref();
        let fail_tx = !flow.is_external() && self.rng.random_bool(self.fleet().transaction_failure);
        let work = Work {
            flow,
            key: &key,
            payload: &payload,
            payload_hash: &hash,
            redrive,
            at: self.now,
        };
        let step = worker::claim(&self.store, &work, &ledger, fail_tx).await?;
        self.after_claim(id, flow, step);
        Ok(())
    }

    async fn deliver_twins(&mut self, a: u64, b: u64) -> Result<(), StoreError> {
        let (Some((flow, key, payload, hash, redrive)), Some(_)) =
            (self.hand_out(a), self.hand_out(b))
        else {
            return Ok(());
        };
        let (ledger_a, ledger_b) = (self.ledger_ref(), self.ledger_ref());
        let work = Work {
            flow,
            key: &key,
            payload: &payload,
            payload_hash: &hash,
            redrive,
            at: self.now,
        };
        // Two workers, one key, one instant: the unique constraint picks the winner.
        let (first, second) = tokio::join!(
            worker::claim(&self.store, &work, &ledger_a, false),
            worker::claim(&self.store, &work, &ledger_b, false),
        );
        self.after_claim(a, flow, first?);
        self.after_claim(b, flow, second?);
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
            Decision::Proceed => {
                let key = self
                    .messages
                    .get(&id)
                    .map(|m| m.key.clone())
                    .unwrap_or_default();
                let scripted = self.scripts.get_mut(&key).and_then(VecDeque::pop_front);
                let is_scripted = scripted.is_some();
                let prefix = if flow == Flow::Reminders {
                    "msg"
                } else {
                    "ful"
                };
                let limited = self.rate_limited.contains(&key);
                let weather = self.provider_weather(flow);
                let call = scripted
                    .unwrap_or_else(|| provider::call(&mut self.rng, &weather, prefix, limited));
                let stall = self.fleet().stall;
                let latency = if !is_scripted && self.rng.random_bool(stall) {
                    STALL
                } else {
                    TimeDelta::milliseconds(
                        (provider::latency_seconds(&mut self.rng) * 1000.0) as i64,
                    )
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

    fn observe_outcome(&mut self, id: u64, flow: Flow) {
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

    async fn complete(
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

    /// Notes the failure; hands the message back unless it is out of deliveries
    /// (then the caller gives up on it).
    fn retry_later(&mut self, id: u64, error: &str, delay: TimeDelta) {
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

    async fn visibility_timeout(&mut self, id: u64, generation: u32) -> Result<(), StoreError> {
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

    fn ack(&mut self, id: u64) {
        self.messages.remove(&id);
    }

    fn nack(&mut self, id: u64, delay: TimeDelta) {
        if let Some(message) = self.messages.get_mut(&id) {
            message.generation += 1;
            self.after(delay, Event::Deliver(id));
        }
    }

    /// The outbox relay: publishes the oldest rows; replays and resolutions go
    /// back onto their consumer's queue with the same key and payload.
    async fn relay(&mut self) -> Result<(), StoreError> {
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

    async fn flush(&mut self) {
        let now = self.now;
        for flow in Flow::ALL {
            let waiting = self.messages.values().filter(|m| m.flow == flow);
            let (depth, oldest) =
                waiting.fold((0usize, None::<DateTime<Utc>>), |(n, oldest), m| {
                    (
                        n + 1,
                        Some(oldest.map_or(m.enqueued_at, |o| o.min(m.enqueued_at))),
                    )
                });
            self.meter
                .gauge(flow.consumer(), Metric::QueueDepth, now, depth as f64);
            let age = oldest.map_or(0.0, |o| (now - o).num_milliseconds() as f64 / 1000.0);
            self.meter.gauge(
                flow.consumer(),
                Metric::QueueOldestAgeSeconds,
                now,
                age.max(0.0),
            );
        }
        let samples = self.meter.drain();
        if let Err(err) = self.store.record_metrics(&samples).await {
            self.warn(&err);
        }
    }
}
