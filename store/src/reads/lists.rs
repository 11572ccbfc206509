//! The console's work lists — unknown outcomes, dead letters, unpublished
//! outbox rows — a page at a time, and the [`Window`] that narrows them.

use idem_domain::{CappedCount, Claim, DeadLetter, DeadLetterState, OutboxRow, Page};

use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{
        ClaimRow, DeadLetterRow, OutboxDbRow, claim_columns, convert, dead_letter_columns,
        outbox_columns,
    },
    store::Store,
    ts::Ts,
};

impl Store {
    /// Claims whose outcome is unknown, oldest first ("unknown since").
    pub async fn unknown_claims(&self, page: &PageRequest) -> StoreResult<Page<Claim>> {
        self.unknown_claims_in(page, &Window::default()).await
    }

    /// Unknown outcomes that became unknown inside `window`, oldest first:
    /// a range of the partial index `claims_unknown_since`.
    pub async fn unknown_claims_in(
        &self,
        page: &PageRequest,
        window: &Window,
    ) -> StoreResult<Page<Claim>> {
        const LIST: &str = "unknown";
        let after = match &page.after {
            None => None,
            Some(after) => {
                let (at, consumer, key): (i64, String, String) = cursor::decode(LIST, after)?;
                let at = cursor::instant(at)?;
                Some((at, consumer, key))
            }
        };
        let mut sql = format!(
            "SELECT {} FROM claims WHERE status = 'unknown'",
            claim_columns!()
        );
        let mut next = 2;
        if after.is_some() {
            sql += " AND (status_at, consumer, idempotency_key) > ($2, $3, $4)";
            next = 5;
        }
        sql += &window.conditions("status_at", next);
        sql += " ORDER BY status_at, consumer, idempotency_key LIMIT $1";
        let fetch = page.limit + 1;
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            let mut query = sqlx::query_as(&sql).bind(fetch);
            if let Some((at, consumer, key)) = &after {
                query = query.bind(*at).bind(consumer).bind(key);
            }
            bind_window!(query, window).fetch_all(pool).await?
        });
        Ok(paginate(convert(rows)?, page.limit, LIST, |c: &Claim| {
            (
                c.status_at.timestamp_micros(),
                c.consumer.clone(),
                c.key.clone(),
            )
        }))
    }

    /// When each open unknown outcome became unknown, oldest first, at most
    /// `limit`, for one consumer or all: the partial index alone.
    pub async fn unknown_since(&self, consumer: Option<&str>, limit: i64) -> StoreResult<Vec<Ts>> {
        let window = Window {
            consumer: consumer.map(str::to_owned),
            ..Window::default()
        };
        let sql = format!(
            "SELECT status_at FROM claims WHERE status = 'unknown'{} ORDER BY status_at LIMIT $1",
            window.conditions("status_at", 2)
        );
        let since = dispatch!(&self.pools, pool => {
            bind_window!(sqlx::query_scalar(&sql).bind(limit), &window).fetch_all(pool).await?
        });
        Ok(since)
    }

    /// How many unknown outcomes became unknown inside `window`, counting
    /// no further than `cap`.
    pub async fn count_unknown_in(&self, window: &Window, cap: u64) -> StoreResult<CappedCount> {
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM claims WHERE status = 'unknown'{} LIMIT $1) AS capped",
            window.conditions("status_at", 2)
        );
        self.capped_count_in(&sql, window, cap).await
    }

    /// Dead letters in `state`, oldest first.
    pub async fn dead_letters(
        &self,
        state: DeadLetterState,
        page: &PageRequest,
    ) -> StoreResult<Page<DeadLetter>> {
        self.dead_letters_in(state, page, &Window::default()).await
    }

    /// Dead letters in `state` dead-lettered inside `window`, oldest first.
    pub async fn dead_letters_in(
        &self,
        state: DeadLetterState,
        page: &PageRequest,
        window: &Window,
    ) -> StoreResult<Page<DeadLetter>> {
        let list = &format!("dead_letters/{state}");
        let after = cursor::time_and_id(list, page)?;
        let mut sql = format!(
            "SELECT {} FROM dead_letters WHERE {}",
            dead_letter_columns!(),
            dead_letter_state(state)
        );
        let mut next = 2;
        if after.is_some() {
            sql += " AND (dead_lettered_at, id) > ($2, $3)";
            next = 4;
        }
        sql += &window.conditions("dead_lettered_at", next);
        sql += " ORDER BY dead_lettered_at, id LIMIT $1";
        let fetch = page.limit + 1;
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            let mut query = sqlx::query_as(&sql).bind(fetch);
            if let Some((at, id)) = &after {
                query = query.bind(*at).bind(*id);
            }
            bind_window!(query, window).fetch_all(pool).await?
        });
        Ok(paginate(
            convert(rows)?,
            page.limit,
            list,
            |d: &DeadLetter| (d.dead_lettered_at.timestamp_micros(), d.id),
        ))
    }

    /// Dead letters in `state` dead-lettered inside `window`, counting no
    /// further than `cap`.
    pub async fn count_dead_letters_in(
        &self,
        state: DeadLetterState,
        window: &Window,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters WHERE {}{} LIMIT $1) AS capped",
            dead_letter_state(state),
            window.conditions("dead_lettered_at", 2)
        );
        self.capped_count_in(&sql, window, cap).await
    }

    async fn capped_count_in(
        &self,
        sql: &str,
        window: &Window,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let limit = i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX);
        let counted: i64 = dispatch!(&self.pools, pool => {
            bind_window!(sqlx::query_scalar(sql).bind(limit), window).fetch_one(pool).await?
        });
        Ok(CappedCount::from_limited(
            u64::try_from(counted).unwrap_or(0),
            cap,
        ))
    }

    /// Unpublished outbox rows, oldest first.
    pub async fn unpublished_outbox(&self, page: &PageRequest) -> StoreResult<Page<OutboxRow>> {
        const LIST: &str = "outbox";
        const FIRST: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             ORDER BY created_at, id LIMIT $1"
        );
        const AFTER: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $1"
        );
        let fetch = page.limit + 1;
        let rows: Vec<OutboxDbRow> = match cursor::time_and_id(LIST, page)? {
            None => dispatch!(&self.pools, pool => {
                sqlx::query_as(FIRST).bind(fetch).fetch_all(pool).await?
            }),
            Some((at, id)) => dispatch!(&self.pools, pool => {
                sqlx::query_as(AFTER).bind(fetch).bind(at).bind(id).fetch_all(pool).await?
            }),
        };
        Ok(paginate(
            convert(rows)?,
            page.limit,
            LIST,
            |o: &OutboxRow| (o.created_at.timestamp_micros(), o.id),
        ))
    }
}

/// The state of a dead letter as literal SQL, so the partial index on open
/// letters matches.
fn dead_letter_state(state: DeadLetterState) -> &'static str {
    match state {
        DeadLetterState::Open => "state = 'open'",
        DeadLetterState::Replayed => "state = 'replayed'",
        DeadLetterState::Discarded => "state = 'discarded'",
    }
}

/// Which part of a work list to show: since and until when (by the list's
/// own time column) and for which consumer. The default is all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    pub from: Option<Ts>,
    pub to: Option<Ts>,
    pub consumer: Option<String>,
}

impl Window {
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// ` AND column >= $n …` for the bounds that are set, numbered from `first`.
    fn conditions(&self, column: &str, first: usize) -> String {
        let mut sql = String::new();
        let mut n = first;
        if self.from.is_some() {
            sql += &format!(" AND {column} >= ${n}");
            n += 1;
        }
        if self.to.is_some() {
            sql += &format!(" AND {column} < ${n}");
            n += 1;
        }
        if self.consumer.is_some() {
            sql += &format!(" AND consumer = ${n}");
        }
        sql
    }
}

/// Binds a [`Window`]'s bounds to a query, in the order
/// [`Window::conditions`] named them (a macro: the query's type differs per
/// backend and per kind of query).
macro_rules! bind_window {
    ($query:expr, $window:expr) => {{
        let mut query = $query;
        let window: &Window = $window;
        if let Some(from) = window.from {
            query = query.bind(from);
        }
        if let Some(to) = window.to {
            query = query.bind(to);
        }
        if let Some(consumer) = &window.consumer {
            query = query.bind(consumer);
        }
        query
    }};
}
use bind_window;
