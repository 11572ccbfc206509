//! The demo: a small fleet of consumers that behaves like real ones.
//!
//! A discrete-event simulation of seven flows of three teams (renewal
//! reminders, payment webhooks and order events carry the stories; invoices,
//! shipments, stock levels and push notifications run quietly beside them),
//! each a queue with at-least-once delivery and a
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
//!
//! Where things are: `simulation` (state, clock, one step at a time) runs
//! `events`; `publisher` makes facts and their retries, `queue` delivers
//! them (`message` is what it holds), `delivery` is the workers' side (claim, call, record, through
//! `worker`), `relay` the outbox relay and the gauges, `on_call` the
//! simulated on-call; `tour` scripts the stories with fixed keys, and
//! `incidents`, `flows` and `provider` say how the world behaves.

mod delivery;
mod events;
mod flows;
pub mod incidents;
mod message;
mod on_call;
mod provider;
mod provider_log;
mod publisher;
mod queue;
mod relay;
mod simulation;
pub mod tour;
mod worker;

pub use provider_log::provider_log;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idem_store::Store;
use tokio::sync::watch;

use simulation::Simulation;

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
