//! The console's work lists — unknown outcomes, dead letters, unpublished
//! outbox rows — a page at a time, and the [`Window`] that narrows them.

use idem_domain::{
    CappedCount, Claim, ConsumerName, DeadLetter, DeadLetterState, OutboxRow, Page, Within,
};

use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{
        ClaimRow, DeadLetterRow, OutboxDbRow, claim_columns, convert, dead_letter_columns,
        outbox_columns,
    },
    sql::{Sql, bind_all},
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
        let sql = unknown_page(page, window)?;
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(paginate(
            convert(rows)?,
            page.limit,
            UNKNOWN,
            unknown_position,
        ))
    }

    /// When each open unknown outcome became unknown, oldest first, at most
    /// `limit`, for one consumer or all: the partial index alone.
    pub async fn unknown_since(
        &self,
        consumer: Option<&ConsumerName>,
        limit: i64,
    ) -> StoreResult<Vec<Ts>> {
        let window = Window {
            consumer: consumer.cloned(),
            ..Window::default()
        };
        let mut sql = Sql::default();
        sql.push("SELECT status_at FROM claims WHERE status = 'unknown'");
        window.conditions(&mut sql, "status_at");
        let limit = sql.param(limit);
        sql.push(&format!(" ORDER BY status_at LIMIT {limit}"));
        let since = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(since)
    }

    /// How many unknown outcomes became unknown inside `window`, counting
    /// no further than `cap`.
    pub async fn count_unknown_in(&self, window: &Window, cap: u64) -> StoreResult<CappedCount> {
        let mut sql = Sql::default();
        sql.push("SELECT 1 FROM claims WHERE status = 'unknown'");
        window.conditions(&mut sql, "status_at");
        self.capped_count(sql, cap).await
    }

    /// Dead letters in `state`, oldest first.
    pub async fn dead_letters(
        &self,
        state: DeadLetterState,
        page: &PageRequest,
    ) -> StoreResult<Page<DeadLetter>> {
        self.dead_letters_in(state, page, &DeadLetterFilter::default())
            .await
    }

    /// Dead letters in `state` that `filter` lets through, oldest first.
    pub async fn dead_letters_in(
        &self,
        state: DeadLetterState,
        page: &PageRequest,
        filter: &DeadLetterFilter,
    ) -> StoreResult<Page<DeadLetter>> {
        let sql = dead_letter_page(state, page, filter)?;
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(paginate(
            convert(rows)?,
            page.limit,
            &dead_letter_list(state),
            dead_letter_position,
        ))
    }

    /// Dead letters in `state` that `filter` lets through, counting no
    /// further than `cap`.
    pub async fn count_dead_letters_in(
        &self,
        state: DeadLetterState,
        filter: &DeadLetterFilter,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let mut sql = Sql::default();
        sql.push("SELECT 1 FROM dead_letters WHERE ");
        sql.push(dead_letter_state(state));
        filter.conditions(&mut sql);
        self.capped_count(sql, cap).await
    }

    /// Unpublished outbox rows, oldest first.
    pub async fn unpublished_outbox(&self, page: &PageRequest) -> StoreResult<Page<OutboxRow>> {
        self.unpublished_outbox_in(page, &OutboxFilter::default())
            .await
    }

    /// Unpublished outbox rows of one consumer and/or topic, oldest first
    /// (the partial index of unpublished rows, filtered: it stays small).
    pub async fn unpublished_outbox_in(
        &self,
        page: &PageRequest,
        filter: &OutboxFilter,
    ) -> StoreResult<Page<OutboxRow>> {
        let sql = outbox_page(page, filter)?;
        let rows: Vec<OutboxDbRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(paginate(
            convert(rows)?,
            page.limit,
            OUTBOX,
            outbox_position,
        ))
    }
}

/// The lists' names in their cursors.
const UNKNOWN: &str = "unknown";
const OUTBOX: &str = "outbox";

fn dead_letter_list(state: DeadLetterState) -> String {
    format!("dead_letters/{state}")
}

/// A page (`limit + 1` rows) of unknown outcomes inside `window`, oldest first.
pub(super) fn unknown_page(page: &PageRequest, window: &Window) -> StoreResult<Sql> {
    let after = match &page.after {
        None => None,
        Some(after) => {
            let (at, consumer, key): (i64, String, String) = cursor::decode(UNKNOWN, after)?;
            Some((cursor::instant(at)?, consumer, key))
        }
    };
    let mut sql = Sql::default();
    sql.push(concat!(
        "SELECT ",
        claim_columns!(),
        " FROM claims WHERE status = 'unknown'"
    ));
    if let Some((at, consumer, key)) = after {
        let (a, c, k) = (sql.param(at), sql.param(consumer), sql.param(key));
        sql.push(&format!(
            " AND (status_at, consumer, idempotency_key) > ({a}, {c}, {k})"
        ));
    }
    window.conditions(&mut sql, "status_at");
    let limit = sql.param(page.limit + 1);
    sql.push(&format!(
        " ORDER BY status_at, consumer, idempotency_key LIMIT {limit}"
    ));
    Ok(sql)
}

fn unknown_position(c: &Claim) -> (i64, String, String) {
    (
        c.status_at.timestamp_micros(),
        c.consumer.clone(),
        c.key.clone(),
    )
}

/// A page (`limit + 1` rows) of dead letters in `state` inside `window`,
/// oldest first.
pub(super) fn dead_letter_page(
    state: DeadLetterState,
    page: &PageRequest,
    filter: &DeadLetterFilter,
) -> StoreResult<Sql> {
    let after = cursor::time_and_id(&dead_letter_list(state), page)?;
    let mut sql = Sql::default();
    sql.push(&format!(
        "SELECT {} FROM dead_letters WHERE {}",
        dead_letter_columns!(),
        dead_letter_state(state)
    ));
    if let Some((at, id)) = after {
        let (a, i) = (sql.param(at), sql.param(id));
        sql.push(&format!(" AND (dead_lettered_at, id) > ({a}, {i})"));
    }
    filter.conditions(&mut sql);
    let limit = sql.param(page.limit + 1);
    sql.push(&format!(" ORDER BY dead_lettered_at, id LIMIT {limit}"));
    Ok(sql)
}

fn dead_letter_position(d: &DeadLetter) -> (i64, i64) {
    (d.dead_lettered_at.timestamp_micros(), d.id)
}

/// A page (`limit + 1` rows) of unpublished outbox rows, oldest first.
pub(super) fn outbox_page(page: &PageRequest, filter: &OutboxFilter) -> StoreResult<Sql> {
    let after = cursor::time_and_id(OUTBOX, page)?;
    let mut sql = Sql::default();
    sql.push(concat!(
        "SELECT ",
        outbox_columns!(),
        " FROM outbox WHERE published_at IS NULL"
    ));
    if let Some((at, id)) = after {
        let (a, i) = (sql.param(at), sql.param(id));
        sql.push(&format!(" AND (created_at, id) > ({a}, {i})"));
    }
    filter.conditions(&mut sql);
    let limit = sql.param(page.limit + 1);
    sql.push(&format!(" ORDER BY created_at, id LIMIT {limit}"));
    Ok(sql)
}

/// Which unpublished outbox rows to show: one consumer's, one topic's, or all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OutboxFilter {
    pub consumer: Option<ConsumerName>,
    pub topic: Option<String>,
    /// The consumers the reader may see (rights limited to teams).
    pub within: Within,
}

impl OutboxFilter {
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// ` AND consumer = $n …` for each filter that is set.
    pub(super) fn conditions(&self, sql: &mut Sql) {
        if let Some(consumer) = &self.consumer {
            let p = sql.param(consumer.as_str());
            sql.push(&format!(" AND consumer = {p}"));
        }
        if let Some(topic) = &self.topic {
            let p = sql.param(topic.as_str());
            sql.push(&format!(" AND topic = {p}"));
        }
        sql.and_within(&self.within, "consumer");
    }
}

fn outbox_position(o: &OutboxRow) -> (i64, i64) {
    (o.created_at.timestamp_micros(), o.id)
}

/// The state of a dead letter as literal SQL, so the partial index on open
/// letters matches.
pub(super) fn dead_letter_state(state: DeadLetterState) -> &'static str {
    match state {
        DeadLetterState::Open => "state = 'open'",
        DeadLetterState::Replayed => "state = 'replayed'",
        DeadLetterState::Discarded => "state = 'discarded'",
    }
}

/// Which part of a work list to show: since and until when (by the list's
/// own time column) and for which consumer. The default is all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Window {
    pub from: Option<Ts>,
    pub to: Option<Ts>,
    pub consumer: Option<ConsumerName>,
    /// The consumers the reader may see (rights limited to teams).
    pub within: Within,
}

impl Window {
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// ` AND column >= $n …` for each bound that is set.
    pub(crate) fn conditions(&self, sql: &mut Sql, column: &str) {
        if let Some(from) = self.from {
            let p = sql.param(from);
            sql.push(&format!(" AND {column} >= {p}"));
        }
        if let Some(to) = self.to {
            let p = sql.param(to);
            sql.push(&format!(" AND {column} < {p}"));
        }
        if let Some(consumer) = &self.consumer {
            let p = sql.param(consumer.as_str());
            sql.push(&format!(" AND consumer = {p}"));
        }
        sql.and_within(&self.within, "consumer");
    }
}

/// Which dead letters a list shows and a redrive takes: those dead-lettered
/// inside `window` (for its consumer), whose last error contains `error`
/// (exactly, case and all). The default is all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DeadLetterFilter {
    pub window: Window,
    pub error: Option<String>,
    /// Consumers left out (a bulk discard over every consumer leaves out
    /// those read through an adapter, which Idem does not act on).
    pub except: Vec<ConsumerName>,
}

impl DeadLetterFilter {
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// ` AND …` for each part of the filter that is set.
    pub(crate) fn conditions(&self, sql: &mut Sql) {
        self.window.conditions(sql, "dead_lettered_at");
        if let Some(error) = self.error.as_deref().filter(|e| !e.is_empty()) {
            // "Contains", the same on both backends (SQLite has no strpos,
            // Postgres no instr, and LIKE would read % and _ in the text and
            // ignore case on SQLite): removing the text changes the error.
            let p = sql.param(error);
            sql.push(&format!(" AND replace(last_error, {p}, '') <> last_error"));
        }
        if !self.except.is_empty() {
            let names: Vec<String> = self.except.iter().map(|c| sql.param(c.as_str())).collect();
            sql.push(&format!(" AND consumer NOT IN ({})", names.join(", ")));
        }
    }

    /// The filter in words, for a redrive's page and its audit row.
    pub fn describe(&self) -> String {
        let mut parts = vec!["open dead letters".to_owned()];
        if let Some(c) = &self.window.consumer {
            parts.push(format!("of {c}"));
        } else if let Within::Only(names) = &self.window.within {
            let names: Vec<&str> = names.iter().map(ConsumerName::as_str).collect();
            parts.push(format!("of {}", names.join(", ")));
        }
        if !self.except.is_empty() {
            let names: Vec<&str> = self.except.iter().map(ConsumerName::as_str).collect();
            parts.push(format!("except {}'s", names.join("'s, ")));
        }
        if let Some(e) = &self.error {
            parts.push(format!("whose last error contains “{e}”"));
        }
        if let Some(from) = self.window.from {
            parts.push(format!("from {}", from.0.format("%Y-%m-%d %H:%M UTC")));
        }
        if let Some(to) = self.window.to {
            parts.push(format!("until {}", to.0.format("%Y-%m-%d %H:%M UTC")));
        }
        parts.join(" ")
    }
}
