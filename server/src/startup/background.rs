//! The work beside serving: waiting for the database when it was
//! unreachable at start-up, holding the background lease, and the work that
//! runs under it — the demo, the session sweepers, the hourly rollups, the
//! sweep for shared provider references (`/checks`) and the redrives.

use std::{sync::Arc, time::Duration};

use idem_store::{BACKGROUND_LEASE, Store, StoreError};
use tokio::sync::watch;

use super::{Prepared, Replica, StartError, prepare};
use crate::{auth::AuthContext, config::Config, demo, health};

/// How often start-up tries again while the database is unreachable.
const PREPARE_RETRY: Duration = Duration::from_secs(2);

/// The work beside serving: once the database is prepared (at start-up, or
/// here when it was unreachable then), and while this replica holds the
/// background lease, the expired-session sweeper, the hourly rollups and
/// the demo — once across every replica on the database. Returns when told
/// to stop (releasing the lease); a preparation that fails for any reason
/// but an unreachable database is sent to `fatal`, which stops the server.
pub(super) async fn background(
    config: Config,
    auth: Arc<AuthContext>,
    prepared: Option<Prepared>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    replica: Replica,
    fatal: tokio::sync::mpsc::Sender<StartError>,
    mut stop: watch::Receiver<bool>,
) {
    let Replica {
        name: replica,
        running,
        caches,
        log_keys,
    } = replica;
    let prepared = match prepared {
        Some(prepared) => prepared,
        None => match prepare_when_reachable(&config, &auth, &ready, &fatal, &mut stop).await {
            Some(prepared) => {
                log_keys.set_secret(prepared.log_key_secret.as_bytes());
                prepared
            }
            None => return,
        },
    };
    let mut demo = prepared.demo;
    let store = auth.store.clone();
    let lease = Lease::new(&store, &replica, config.background_lease);
    loop {
        // Wait until this replica holds the lease (another may be running the work).
        if !matches!(lease.hold().await, Ok(Ok(true))) {
            tokio::select! {
                () = tokio::time::sleep(lease.renew_every) => continue,
                _ = stop.changed() => return,
            }
        }
        tracing::info!(%replica, "this replica runs the background work");
        let (work_stop_tx, work_stop_rx) = watch::channel(false);
        let mut work = tokio::spawn(background_work(
            auth.clone(),
            demo.clone(),
            caches.clone(),
            Redrives {
                retention: config.claim_retention.clone(),
                per_second: config.redrive_per_second,
            },
            work_stop_rx,
        ));
        running.store(true, std::sync::atomic::Ordering::Release);
        // A later turn (the lease lost and taken back) continues the demo live.
        if let Some(settings) = &mut demo {
            settings.backfill = Duration::ZERO;
        }
        let stopping = lease.keep(&mut stop).await;
        let _ = work_stop_tx.send(true);
        if tokio::time::timeout(lease.renew_every, &mut work)
            .await
            .is_err()
        {
            // Cut off mid-step: a step is one transaction, which rolls back.
            work.abort();
        }
        running.store(false, std::sync::atomic::Ordering::Release);
        if stopping {
            // Hand over at once instead of after the lease expires.
            let _ = store
                .system()
                .release_lease(BACKGROUND_LEASE, &replica)
                .await;
            return;
        }
    }
}

/// Tries the preparation again every [`PREPARE_RETRY`] until the database
/// answers (then marks the server ready). `None`: told to stop, or the
/// database appeared but cannot be used (sent to `fatal`).
async fn prepare_when_reachable(
    config: &Config,
    auth: &AuthContext,
    ready: &std::sync::atomic::AtomicBool,
    fatal: &tokio::sync::mpsc::Sender<StartError>,
    stop: &mut watch::Receiver<bool>,
) -> Option<Prepared> {
    loop {
        tokio::select! {
            () = tokio::time::sleep(PREPARE_RETRY) => {}
            _ = stop.changed() => return None,
        }
        match prepare(config, auth).await {
            Ok(prepared) => {
                ready.store(true, std::sync::atomic::Ordering::Release);
                return Some(prepared);
            }
            Err(StartError::Store(err)) if err.is_unavailable() => {}
            Err(err) => {
                tracing::error!(error = %idem_app::error::cause_chain(&err), "the database appeared, but Idem cannot use it");
                let _ = fatal.send(err).await;
                return None;
            }
        }
    }
}

/// The background lease as this replica holds it.
struct Lease<'a> {
    store: &'a Store,
    replica: &'a str,
    ttl: Duration,
    /// Renewed every quarter of its life; a renewal and a stop may take a
    /// quarter each, so even a slow renewal followed by a failed one ends
    /// the work before the lease can expire.
    renew_every: Duration,
}

impl<'a> Lease<'a> {
    fn new(store: &'a Store, replica: &'a str, ttl: Duration) -> Self {
        Lease {
            store,
            replica,
            ttl,
            renew_every: ttl / 4,
        }
    }

    /// Takes or renews the lease. A renewal that takes longer than
    /// `renew_every` counts as failed, and the work then gets as long again
    /// to stop: both within the lease's life, so the work has stopped before
    /// another replica can take the lease.
    async fn hold(&self) -> Result<Result<bool, StoreError>, tokio::time::error::Elapsed> {
        let now = idem_store::Ts::now();
        let until =
            idem_store::Ts::from(now.0 + chrono::TimeDelta::from_std(self.ttl).unwrap_or_default());
        let system = self.store.system();
        let held = system.hold_lease(BACKGROUND_LEASE, self.replica, now, until);
        tokio::time::timeout(self.renew_every, held).await
    }

    /// Renews the lease every `renew_every` while the work runs. Returns
    /// true when told to stop, false when the lease was lost (or could not
    /// be renewed).
    async fn keep(&self, stop: &mut watch::Receiver<bool>) -> bool {
        let replica = self.replica;
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.renew_every) => {}
                _ = stop.changed() => return true,
            }
            match self.hold().await.unwrap_or(Ok(false)) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(%replica, "the background lease was lost or not renewed in time; stopping the background work here");
                    return false;
                }
                Err(err) => {
                    // Without a renewal another replica may take over after
                    // the lease expires; stop first, so it is never both.
                    tracing::warn!(%replica, error = %idem_app::error::cause_chain(&err), "cannot renew the background lease; stopping the background work here");
                    return false;
                }
            }
        }
    }
}

/// The work that runs once across replicas: the demo (if any), the session
/// sweeper, the hourly rollups and the redrives, until `stop` turns true.
async fn background_work(
    auth: Arc<AuthContext>,
    demo: Option<demo::Settings>,
    caches: Vec<idem_app::cache::ReadCache>,
    redrives: Redrives,
    stop: watch::Receiver<bool>,
) {
    // Without a demo the sender is dropped at once, which lets rollups start.
    let (history_tx, history_rx) = tokio::sync::oneshot::channel();
    let demo = {
        let (store, stop) = (auth.store.clone(), stop.clone());
        async move {
            match demo {
                Some(settings) => demo::run(store, settings, stop, history_tx).await,
                None => drop(history_tx),
            }
        }
    };
    tokio::join!(
        demo,
        sweep_expired_sessions(auth.clone(), stop.clone()),
        housekeeping(auth.clone(), stop.clone()),
        maintain_rollups(auth.store.clone(), history_rx, caches, stop.clone()),
        sweep_shared_provider_refs(auth.store.clone(), stop.clone()),
        run_redrives(auth.store.clone(), redrives, stop),
    );
}

/// How the redrives are run: the retention their verdicts use, and their pace.
struct Redrives {
    retention: idem_domain::ClaimRetention,
    per_second: u32,
}

/// Takes the items of running redrives one at a time, oldest run first, at
/// most `per_second` a second (a provider that just recovered is not
/// flooded again). Each step is its own transaction and replays through
/// an action id derived from the run and the dead letter, so a step cut off
/// here, or taken again by the next lease holder, replays nothing twice.
/// Looks for newly started runs every second.
async fn run_redrives(store: Store, redrives: Redrives, mut stop: watch::Receiver<bool>) {
    let pause = Duration::from_secs(1) / redrives.per_second.max(1);
    loop {
        let running = store.runs().running_redrives().await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "could not read the running redrives");
            Vec::new()
        });
        for redrive in running {
            loop {
                match store
                    .runs()
                    .redrive_step(redrive, &redrives.retention)
                    .await
                {
                    Ok(idem_store::RedriveStep::Item(_)) => {}
                    Ok(idem_store::RedriveStep::Ended) => {
                        tracing::info!(redrive = redrive.get(), "redrive ended");
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(redrive = redrive.get(), error = %err, "a redrive step failed; trying again later");
                        break;
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stop.changed() => return,
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Looks for provider references recorded on two keys among the outcomes
/// of the last minute (a first run catches up a couple of days at a time),
/// for the consistency checks (`/checks`).
async fn sweep_shared_provider_refs(store: Store, mut stop: watch::Receiver<bool>) {
    loop {
        match store
            .checks()
            .sweep_shared_provider_refs(idem_store::Ts::now())
            .await
        {
            Ok(sweep) if sweep.found + sweep.pruned > 0 => {
                tracing::info!(
                    found = sweep.found,
                    pruned = sweep.pruned,
                    "provider references shared by two keys swept"
                );
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "could not sweep for shared provider references")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Every minute: closes ended sign-in windows (one audit row for each pair
/// that saw failures) and forgets known-good clients not seen for months;
/// audits the refusal windows that ended (one row per person, reason and
/// window); deletes the key fingerprints not logged for a month and the
/// API's Idempotency-Keys past their keeping (`idem_store::IDEMPOTENCY_KEEP`).
async fn housekeeping(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    loop {
        let (store, now) = (&auth.store, idem_store::Ts::now());
        match store
            .people()
            .close_sign_in_windows(&auth.settings.sign_in, now)
            .await
        {
            Ok(0) => {}
            Ok(closed) => tracing::debug!(closed, "sign-in windows closed"),
            Err(err) => tracing::warn!(error = %err, "could not close sign-in windows"),
        }
        match store.people().close_refusal_windows(now).await {
            Ok(0) => {}
            Ok(closed) => tracing::debug!(closed, "refusal windows audited"),
            Err(err) => tracing::warn!(error = %err, "could not audit refusal windows"),
        }
        match store.system().prune_key_fingerprints(now).await {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "old key fingerprints deleted"),
            Err(err) => tracing::warn!(error = %err, "could not delete old key fingerprints"),
        }
        match store
            .tokens()
            .sweep_idempotency(now - idem_store::IDEMPOTENCY_KEEP)
            .await
        {
            Ok(0) => {}
            Ok(swept) => tracing::debug!(swept, "old Idempotency-Keys of the API deleted"),
            Err(err) => tracing::warn!(error = %err, "could not delete old Idempotency-Keys"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// On every replica: deletes the rows of sessions that ended (signed out)
/// while the database could not be written, as soon as it answers again.
pub(super) async fn delete_ended_sessions(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(health::CHECK_EVERY) => {}
            _ = stop.changed() => return,
        }
        if auth.database.down_since().is_none() {
            auth.sessions().retry_deletes().await;
        }
    }
}

/// Deletes expired sessions every ten minutes (they are refused anyway).
async fn sweep_expired_sessions(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    let sessions = auth.sessions().clone();
    loop {
        if let Err(err) = sessions.delete_expired().await {
            tracing::warn!(error = %err, "could not delete expired sessions");
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(600)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Samples the adapters' counters and rolls up settled hours of consumer
/// metrics every minute, once the demo's history (if any) is written (and
/// then empties the read caches). Both are safe beside a second replica
/// doing the same: the rollup's upsert is idempotent, and a sample locks
/// the counters it moves.
async fn maintain_rollups(
    store: Store,
    history_written: tokio::sync::oneshot::Receiver<()>,
    caches: Vec<idem_app::cache::ReadCache>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = history_written => {}
        _ = stop.changed() => return,
    }
    // Whatever was read while the demo's history was being written showed
    // too little of it.
    for cache in &caches {
        cache.clear();
    }
    loop {
        // First what the adapters counted outside their writers' transactions,
        // so a minute's duplicates are in before its hour is rolled up.
        match store
            .metrics()
            .sample_adapter_counters(idem_store::Ts::now())
            .await
        {
            Ok(0) => {}
            Ok(moved) => tracing::debug!(moved, "adapter counters sampled"),
            Err(err) => tracing::warn!(error = %err, "could not sample the adapters' counters"),
        }
        match store.metrics().roll_up_hours(idem_store::Ts::now()).await {
            Ok(0) => {}
            Ok(hours) => tracing::debug!(hours, "consumer metrics rolled up"),
            Err(err) => tracing::warn!(error = %err, "could not roll up consumer metrics"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}
