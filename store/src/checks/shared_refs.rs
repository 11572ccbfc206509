//! The sweep that finds provider references recorded on two keys.
//!
//! Nearly every claim has a reference, so no index range holds only the
//! shared ones. Instead the sweep walks the outcomes recorded since it last
//! ran (`claims_by_outcome`, from a watermark in `idem_meta`) and looks each
//! one's reference up in `claims_by_provider_ref`: its cost follows the
//! outcomes written, not the size of the table. What it finds goes to
//! `shared_provider_refs`, which the check reads; findings whose claim no
//! longer records the reference, or that no other key shares any more, are
//! pruned on every run.
//!
//! An outcome committed more than [`SWEEP_SETTLE`] after the time it records
//! is behind the watermark already and is missed; consumers record
//! `outcome_at` when they commit, so that takes a transaction held open for
//! minutes.

use chrono::TimeDelta;

use crate::facets::Checks;
use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

/// `idem_meta` name of the outcome time up to which the sweep has looked.
pub const SHARED_REFS_WATERMARK: &str = "shared_refs_swept_through";

/// How long after an outcome's time the sweep waits before looking at it,
/// so outcomes still being committed are not passed over.
pub const SWEEP_SETTLE: TimeDelta = TimeDelta::minutes(5);

/// The outcome time one transaction covers, and how many such steps one
/// run takes at most (a first run over a month of history spreads over
/// several runs).
const STEP: TimeDelta = TimeDelta::hours(1);
const MOST_STEPS: usize = 48;

/// What one run of the sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SharedRefSweep {
    /// Outcomes up to here have been looked at.
    pub through: Option<Ts>,
    /// Findings added and removed.
    pub found: u64,
    pub pruned: u64,
}

/// Every key holding the reference of an outcome recorded in `[$1, $2)`,
/// when another key holds it too.
const FIND: &str = "INSERT INTO shared_provider_refs (provider_ref, consumer, idempotency_key, found_at) \
     SELECT c.provider_ref, c.consumer, c.idempotency_key, $3 FROM claims c \
     WHERE c.provider_ref IN ( \
         SELECT n.provider_ref FROM claims n \
         WHERE n.provider_ref IS NOT NULL AND n.outcome_at >= $1 AND n.outcome_at < $2 \
           AND EXISTS (SELECT 1 FROM claims o WHERE o.provider_ref = n.provider_ref \
                       AND (o.consumer <> n.consumer OR o.idempotency_key <> n.idempotency_key))) \
     ON CONFLICT DO NOTHING";

const MARK: &str = "INSERT INTO idem_meta (name, value) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET value = excluded.value";

/// Findings whose claim is gone or records another reference now.
const PRUNE_CHANGED: &str = "DELETE FROM shared_provider_refs WHERE NOT EXISTS ( \
     SELECT 1 FROM claims c WHERE c.consumer = shared_provider_refs.consumer \
     AND c.idempotency_key = shared_provider_refs.idempotency_key \
     AND c.provider_ref = shared_provider_refs.provider_ref)";

/// Findings left alone with their reference.
const PRUNE_ALONE: &str = "DELETE FROM shared_provider_refs WHERE provider_ref IN ( \
     SELECT provider_ref FROM shared_provider_refs GROUP BY provider_ref HAVING COUNT(*) < 2)";

impl Checks<'_> {
    /// Looks at the outcomes recorded since the last run (up to
    /// [`SWEEP_SETTLE`] before `now`, at most a couple of days of them) for
    /// references another key also records, then prunes what no longer holds.
    pub async fn sweep_shared_provider_refs(self, now: Ts) -> StoreResult<SharedRefSweep> {
        let settled = now - SWEEP_SETTLE;
        let mut sweep = SharedRefSweep {
            through: self.shared_refs_watermark().await?,
            ..SharedRefSweep::default()
        };
        let mut from = match sweep.through {
            Some(through) => Some(through),
            None => self.earliest_outcome_with_ref().await?,
        };
        for _ in 0..MOST_STEPS {
            let Some(start) = from.filter(|f| *f < settled) else {
                break;
            };
            let end = (start + STEP).min(settled);
            let mut tx = self.begin().await?;
            let found = dispatch!(&mut tx.inner, tx => {
                let found = sqlx::query(FIND).bind(start).bind(end).bind(now)
                    .execute(&mut **tx).await?.rows_affected();
                sqlx::query(MARK).bind(SHARED_REFS_WATERMARK).bind(end.micros().to_string())
                    .execute(&mut **tx).await?;
                found
            });
            tx.commit().await?;
            sweep.found += found;
            sweep.through = Some(end);
            from = Some(end);
        }
        sweep.pruned = dispatch!(&self.pools, pool => {
            let changed = sqlx::query(PRUNE_CHANGED).execute(pool).await?.rows_affected();
            changed + sqlx::query(PRUNE_ALONE).execute(pool).await?.rows_affected()
        });
        Ok(sweep)
    }
}

impl Store {
    async fn shared_refs_watermark(&self) -> StoreResult<Option<Ts>> {
        Ok(self
            .system()
            .meta(SHARED_REFS_WATERMARK)
            .await?
            .and_then(|v| v.parse().ok())
            .and_then(Ts::from_micros))
    }

    /// The first outcome that recorded a reference (one probe of `claims_by_outcome`).
    async fn earliest_outcome_with_ref(&self) -> StoreResult<Option<Ts>> {
        const SQL: &str = "SELECT MIN(outcome_at) FROM claims WHERE provider_ref IS NOT NULL";
        let first = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_one(pool).await?
        });
        Ok(first)
    }
}
