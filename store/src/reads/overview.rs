//! The overview's reads, on one connection in four statements: every count
//! in one, then the first page of each work list. Each trip through the
//! pool costs a round trip when the connection goes back (sqlx pings it);
//! the landing page pays that once.

use idem_domain::{CappedCount, Claim, DeadLetter, DeadLetterState, Metric, OutboxRow, Within};

use super::{
    Window,
    lists::{dead_letter_page, dead_letter_state, outbox_page, unknown_page},
};
use crate::facets::Lists;
use crate::{
    StoreResult,
    cursor::PageRequest,
    dialect::dispatch,
    rows::{ClaimRow, DeadLetterRow, OutboxDbRow, convert},
    sql::{Sql, bind_all},
    ts::Ts,
};

/// What the overview shows: what the last hour brought (claims that went
/// pending or failed, sends the providers confirmed), capped counts of what
/// waits for a person, and the oldest items of each list.
///
/// Pending and failed are counted over the last hour, not in all: failed
/// claims stay in the table for their retention and pending ones pile up
/// wherever a consumer holds no lease, so at production size a count of
/// either always read "10,000+" and walked ten thousand index entries to
/// say so. The last hour is a range of their partial index, and it is what
/// moves during an incident.
#[derive(Debug, Clone, PartialEq)]
pub struct OverviewRecords {
    /// Claims that went pending (were claimed, or re-claimed for a retry)
    /// in the hour before `now` and are still pending.
    pub pending_last_hour: CappedCount,
    /// Claims that failed in the hour before `now`.
    pub failed_last_hour: CappedCount,
    pub unknown: CappedCount,
    pub open_dead_letters: CappedCount,
    pub unpublished_outbox: CappedCount,
    /// Effects the providers confirmed (the consumers' `sends` metric) in
    /// the hour before `now`. Not a count of `sent` claims: that is nearly
    /// the whole table, so a capped count of it always read "10,000+".
    pub sends_last_hour: u64,
    pub oldest_unknown: Vec<Claim>,
    pub oldest_dead_letters: Vec<DeadLetter>,
    pub oldest_outbox: Vec<OutboxRow>,
}

impl Lists<'_> {
    /// The overview's reads: counts up to `cap`, `rows` of each list, what
    /// the hour before `now` brought, of the consumers `within` allows.
    pub async fn overview(
        self,
        rows: u32,
        cap: u64,
        now: Ts,
        within: &Within,
    ) -> StoreResult<OverviewRecords> {
        let counts = counts(cap, now, within);
        let page = PageRequest::first(rows);
        let all = Window {
            within: within.clone(),
            ..Window::default()
        };
        let unknown = unknown_page(&page, &all)?;
        let dead = dead_letter_page(
            DeadLetterState::Open,
            &page,
            &super::DeadLetterFilter {
                window: all.clone(),
                ..Default::default()
            },
        )?;
        let outbox = outbox_page(
            &page,
            &super::OutboxFilter {
                within: within.clone(),
                ..Default::default()
            },
        )?;
        let (counted, unknown, dead, outbox): (
            Counts,
            Vec<ClaimRow>,
            Vec<DeadLetterRow>,
            Vec<OutboxDbRow>,
        ) = dispatch!(&self.pools, pool => {
            let mut conn = pool.acquire().await?;
            let counted = bind_all!(sqlx::query_as(&counts.text), &counts.binds)
                .fetch_one(&mut *conn).await?;
            let unknown = bind_all!(sqlx::query_as(&unknown.text), &unknown.binds)
                .fetch_all(&mut *conn).await?;
            let dead = bind_all!(sqlx::query_as(&dead.text), &dead.binds)
                .fetch_all(&mut *conn).await?;
            let outbox = bind_all!(sqlx::query_as(&outbox.text), &outbox.binds)
                .fetch_all(&mut *conn).await?;
            (counted, unknown, dead, outbox)
        });
        let capped = |n: i64| CappedCount::from_limited(u64::try_from(n).unwrap_or(0), cap);
        Ok(OverviewRecords {
            pending_last_hour: capped(counted.0),
            failed_last_hour: capped(counted.1),
            unknown: capped(counted.2),
            open_dead_letters: capped(counted.3),
            unpublished_outbox: capped(counted.4),
            // A sum of per-minute counters: whole, never negative.
            sends_last_hour: counted.5.max(0.0).round() as u64,
            oldest_unknown: oldest(convert(unknown)?, rows),
            oldest_dead_letters: oldest(convert(dead)?, rows),
            oldest_outbox: oldest(convert(outbox)?, rows),
        })
    }
}

/// The first `rows` of a page fetched with one more.
fn oldest<T>(mut items: Vec<T>, rows: u32) -> Vec<T> {
    items.truncate(rows as usize);
    items
}

/// Pending and failed in the last hour, unknown, open dead letters,
/// unpublished outbox, sends in the last hour.
type Counts = (i64, i64, i64, i64, i64, f64);

/// Every count of the overview in one statement: each capped count stops
/// after `cap + 1` entries of its partial index (pending and failed read
/// only the last hour of theirs), read per consumer for a reader limited
/// to some; the sends are at most 60 per-minute rows per consumer. Each
/// only of the consumers `within` allows.
fn counts(cap: u64, now: Ts, within: &Within) -> Sql {
    let mut sql = Sql::default();
    let since = sql.param(now - chrono::TimeDelta::hours(1));
    let limit = super::lists::capped_limit(&mut sql, cap);
    let mut capped = |rows: &dyn Fn(&str) -> String| {
        let parts = sql.each_consumer(within, "consumer", |_, only| {
            format!("{} LIMIT {limit}", rows(only))
        });
        format!(
            "(SELECT COUNT(*) FROM (SELECT 1 FROM ({parts}) AS counted LIMIT {limit}) AS capped)"
        )
    };
    let columns = [
        capped(&|only| {
            format!("SELECT 1 FROM claims WHERE status = 'pending' AND status_at >= {since}{only}")
        }),
        capped(&|only| {
            format!("SELECT 1 FROM claims WHERE status = 'failed' AND status_at >= {since}{only}")
        }),
        capped(&|only| format!("SELECT 1 FROM claims WHERE status = 'unknown'{only}")),
        capped(&|only| {
            format!(
                "SELECT 1 FROM dead_letters WHERE {}{only}",
                dead_letter_state(DeadLetterState::Open)
            )
        }),
        capped(&|only| format!("SELECT 1 FROM outbox WHERE published_at IS NULL{only}")),
    ];
    let metric = sql.param(Metric::Sends.name());
    let only = sql
        .within(within, "consumer")
        .map(|c| format!(" AND {c}"))
        .unwrap_or_default();
    sql.push(&format!(
        "SELECT {}, (SELECT COALESCE(SUM(value), 0.0) FROM consumer_metrics \
         WHERE metric = {metric} AND minute >= {since}{only}) AS sends",
        columns.join(", ")
    ));
    sql
}
