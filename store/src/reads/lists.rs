//! The console's work lists — unknown outcomes, dead letters, unpublished
//! outbox rows — a page at a time, and the [`Window`] that narrows them.

use idem_domain::{
    CappedCount, Claim, ConsumerName, DeadLetter, DeadLetterState, OutboxRow, Page, Within,
};

use crate::facets::Lists;
use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{
        ClaimRow, DeadLetterRow, OutboxDbRow, claim_columns, convert, dead_letter_columns,
        outbox_columns,
    },
    sql::{Sql, bind_all},
    ts::Ts,
};

impl Lists<'_> {
    /// Unknown outcomes that became unknown inside `window`, oldest first:
    /// a range of `claims_unknown_since`, or per consumer of
    /// `claims_unknown_by_consumer` for a reader limited to some.
    pub async fn unknown_claims_in(
        self,
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
    /// `limit`, of the consumers `window` reaches: the partial indexes alone.
    pub async fn unknown_since(self, window: &Window, limit: i64) -> StoreResult<Vec<Ts>> {
        let mut sql = Sql::default();
        let limit = sql.param(limit);
        let parts = sql.each_consumer(&window.reach(), "consumer", |sql, only| {
            let bounds = window.bounds(sql, "status_at");
            format!(
                "SELECT status_at FROM claims WHERE status = 'unknown'{only}{bounds} \
                 ORDER BY status_at LIMIT {limit}"
            )
        });
        sql.text =
            format!("SELECT status_at FROM ({parts}) AS scoped ORDER BY status_at LIMIT {limit}");
        let since = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(since)
    }

    /// How many unknown outcomes became unknown inside `window`, counting
    /// no further than `cap`.
    pub async fn count_unknown_in(self, window: &Window, cap: u64) -> StoreResult<CappedCount> {
        let mut sql = Sql::default();
        let limit = capped_limit(&mut sql, cap);
        sql.text = window.scoped(&mut sql, "status_at", |_, only, bounds| {
            format!("SELECT 1 FROM claims WHERE status = 'unknown'{only}{bounds} LIMIT {limit}")
        });
        self.capped_count(sql, cap).await
    }

    /// Dead letters in `state` that `filter` lets through, oldest first.
    pub async fn dead_letters_in(
        self,
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
        self,
        state: DeadLetterState,
        filter: &DeadLetterFilter,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let mut sql = Sql::default();
        let limit = capped_limit(&mut sql, cap);
        sql.text = filter.scoped(&mut sql, |_, only, conditions| {
            format!(
                "SELECT 1 FROM dead_letters WHERE {}{only}{conditions} LIMIT {limit}",
                dead_letter_state(state)
            )
        });
        self.capped_count(sql, cap).await
    }

    /// Unpublished outbox rows of one consumer and/or topic, oldest first
    /// (the partial index of unpublished rows, or per consumer of
    /// `outbox_unpublished_by_consumer`: it stays small).
    pub async fn unpublished_outbox_in(
        self,
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

    /// Unpublished outbox rows of one consumer and/or topic, counting no
    /// further than `cap`.
    pub async fn count_unpublished_outbox_in(
        self,
        filter: &OutboxFilter,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let mut sql = Sql::default();
        let limit = capped_limit(&mut sql, cap);
        sql.text = filter.scoped(&mut sql, |_, only, topic| {
            format!("SELECT 1 FROM outbox WHERE published_at IS NULL{only}{topic} LIMIT {limit}")
        });
        self.capped_count(sql, cap).await
    }
}

/// The parameter a capped count's every part stops at: `cap + 1`.
pub(crate) fn capped_limit(sql: &mut Sql, cap: u64) -> String {
    sql.param(i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX))
}

/// The lists' names in their cursors.
const UNKNOWN: &str = "unknown";
const OUTBOX: &str = "outbox";

fn dead_letter_list(state: DeadLetterState) -> String {
    format!("dead_letters/{state}")
}

/// A page (`limit + 1` rows) of unknown outcomes inside `window`, oldest
/// first: each consumer's page, then the first of them all.
pub(super) fn unknown_page(page: &PageRequest, window: &Window) -> StoreResult<Sql> {
    let after = match &page.after {
        None => None,
        Some(after) => {
            let (at, consumer, key): (i64, String, String) = cursor::decode(UNKNOWN, after)?;
            Some((cursor::instant(at)?, consumer, key))
        }
    };
    const ORDER: &str = "ORDER BY status_at, consumer, idempotency_key";
    let mut sql = Sql::default();
    let limit = sql.param(page.limit + 1);
    let parts = window.scoped(&mut sql, "status_at", |sql, only, bounds| {
        let keyset = match &after {
            Some((at, consumer, key)) => {
                let (a, c, k) = (
                    sql.param(*at),
                    sql.param(consumer.as_str()),
                    sql.param(key.as_str()),
                );
                format!(" AND (status_at, consumer, idempotency_key) > ({a}, {c}, {k})")
            }
            None => String::new(),
        };
        format!(
            "SELECT {} FROM claims WHERE status = 'unknown'{only}{keyset}{bounds} {ORDER} LIMIT {limit}",
            claim_columns!()
        )
    });
    sql.text = format!("SELECT * FROM ({parts}) AS scoped {ORDER} LIMIT {limit}");
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
    const ORDER: &str = "ORDER BY dead_lettered_at, id";
    let mut sql = Sql::default();
    let limit = sql.param(page.limit + 1);
    let parts = filter.scoped(&mut sql, |sql, only, conditions| {
        let keyset = match after {
            Some((at, id)) => {
                let (a, i) = (sql.param(at), sql.param(id));
                format!(" AND (dead_lettered_at, id) > ({a}, {i})")
            }
            None => String::new(),
        };
        format!(
            "SELECT {} FROM dead_letters WHERE {}{only}{keyset}{conditions} {ORDER} LIMIT {limit}",
            dead_letter_columns!(),
            dead_letter_state(state)
        )
    });
    sql.text = format!("SELECT * FROM ({parts}) AS scoped {ORDER} LIMIT {limit}");
    Ok(sql)
}

fn dead_letter_position(d: &DeadLetter) -> (i64, i64) {
    (d.dead_lettered_at.timestamp_micros(), d.id)
}

/// A page (`limit + 1` rows) of unpublished outbox rows, oldest first.
pub(super) fn outbox_page(page: &PageRequest, filter: &OutboxFilter) -> StoreResult<Sql> {
    let after = cursor::time_and_id(OUTBOX, page)?;
    const ORDER: &str = "ORDER BY created_at, id";
    let mut sql = Sql::default();
    let limit = sql.param(page.limit + 1);
    let parts = filter.scoped(&mut sql, |sql, only, topic| {
        let keyset = match after {
            Some((at, id)) => {
                let (a, i) = (sql.param(at), sql.param(id));
                format!(" AND (created_at, id) > ({a}, {i})")
            }
            None => String::new(),
        };
        format!(
            "SELECT {} FROM outbox WHERE published_at IS NULL{only}{keyset}{topic} {ORDER} LIMIT {limit}",
            outbox_columns!()
        )
    });
    sql.text = format!("SELECT * FROM ({parts}) AS scoped {ORDER} LIMIT {limit}");
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

    /// `part(sql, only, topic)` once per consumer the filter reaches (see
    /// [`Sql::each_consumer`]), `topic` the topic's condition.
    pub(super) fn scoped(
        &self,
        sql: &mut Sql,
        mut part: impl FnMut(&mut Sql, &str, &str) -> String,
    ) -> String {
        let reach = self.within.narrowed_to(self.consumer.as_ref());
        sql.each_consumer(&reach, "consumer", |sql, only| {
            let topic = match &self.topic {
                Some(topic) => format!(" AND topic = {}", sql.param(topic.as_str())),
                None => String::new(),
            };
            part(sql, only, &topic)
        })
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

    /// The consumers it reaches: its one consumer if the reader may see
    /// it, else those they may.
    pub fn reach(&self) -> Within {
        self.within.narrowed_to(self.consumer.as_ref())
    }

    /// ` AND column >= $n …` for each time bound that is set.
    pub(crate) fn bounds(&self, sql: &mut Sql, column: &str) -> String {
        let mut text = String::new();
        if let Some(from) = self.from {
            text += &format!(" AND {column} >= {}", sql.param(from));
        }
        if let Some(to) = self.to {
            text += &format!(" AND {column} < {}", sql.param(to));
        }
        text
    }

    /// `part(sql, only, bounds)` once per consumer the window reaches (see
    /// [`Sql::each_consumer`]), `bounds` its times on `column`.
    pub(crate) fn scoped(
        &self,
        sql: &mut Sql,
        column: &str,
        mut part: impl FnMut(&mut Sql, &str, &str) -> String,
    ) -> String {
        sql.each_consumer(&self.reach(), "consumer", |sql, only| {
            let bounds = self.bounds(sql, column);
            part(sql, only, &bounds)
        })
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

    /// ` AND …` for each part of the filter but its consumers.
    fn conditions(&self, sql: &mut Sql) -> String {
        let mut text = self.window.bounds(sql, "dead_lettered_at");
        if let Some(error) = self.error.as_deref().filter(|e| !e.is_empty()) {
            // "Contains", the same on both backends (SQLite has no strpos,
            // Postgres no instr, and LIKE would read % and _ in the text and
            // ignore case on SQLite): removing the text changes the error.
            let p = sql.param(error);
            text += &format!(" AND replace(last_error, {p}, '') <> last_error");
        }
        text
    }

    /// The consumers it reaches: the window's, but those left out.
    pub fn reach(&self) -> Within {
        match self.window.reach() {
            // Every consumer but some is not read consumer by consumer: the
            // ones left out are `scoped`'s condition.
            Within::Every => Within::Every,
            Within::Only(names) => Within::Only(
                names
                    .into_iter()
                    .filter(|n| !self.except.contains(n))
                    .collect(),
            ),
        }
    }

    /// `part(sql, only, conditions)` once per consumer the filter reaches
    /// (see [`Sql::each_consumer`]), `conditions` the rest of the filter.
    pub(crate) fn scoped(
        &self,
        sql: &mut Sql,
        mut part: impl FnMut(&mut Sql, &str, &str) -> String,
    ) -> String {
        let reach = self.reach();
        let every = reach.is_every();
        sql.each_consumer(&reach, "consumer", |sql, only| {
            let mut conditions = self.conditions(sql);
            if every && !self.except.is_empty() {
                let names: Vec<String> =
                    self.except.iter().map(|c| sql.param(c.as_str())).collect();
                conditions += &format!(" AND consumer NOT IN ({})", names.join(", "));
            }
            part(sql, only, &conditions)
        })
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
