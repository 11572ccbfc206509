//! What the console reads. Every query here is answered from an index and
//! touches at most a page of rows (or a capped count): no query scans the
//! claims table, which may hold a hundred million rows.
//!
//! Queries that must use a partial index spell the state as a literal
//! (`status = 'unknown'`), never a bound parameter: both planners can only
//! match a partial index's predicate against literal text.

use idem_domain::{
    AuditEntry, CappedCount, Claim, ClaimStatus, DeadLetter, DeadLetterState, OutboxRow, Page,
};

use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{
        AuditRow, ClaimRow, DeadLetterRow, OutboxDbRow, audit_columns, claim_columns, convert,
        dead_letter_columns, outbox_columns,
    },
    store::Store,
    ts::Ts,
};

/// How many rows a key page shows of each kind (a key with more is a bug in
/// a consumer, and the page says there are more).
pub const KEY_PAGE_ROWS: i64 = 200;

/// One claim, by its primary key (`$1` consumer, `$2` key).
const CLAIM_SQL: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM claims WHERE consumer = $1 AND idempotency_key = $2"
);
/// One key's outbox rows, oldest first, at most `$3`.
const OUTBOX_FOR_KEY_SQL: &str = concat!(
    "SELECT ",
    outbox_columns!(),
    " FROM outbox WHERE consumer = $1 AND idempotency_key = $2 \
     ORDER BY created_at, id LIMIT $3"
);
/// One key's dead letters, oldest first, at most `$3`.
const DEAD_LETTERS_FOR_KEY_SQL: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters WHERE consumer = $1 AND idempotency_key = $2 \
     ORDER BY dead_lettered_at, id LIMIT $3"
);
/// The audit entries about one key, oldest first, at most `$3`.
const AUDIT_FOR_KEY_SQL: &str = concat!(
    "SELECT ",
    audit_columns!(),
    " FROM audit_log WHERE consumer = $1 AND idempotency_key = $2 \
     ORDER BY at, id LIMIT $3"
);

/// Everything stored about one key (each list at most [`KEY_PAGE_ROWS`],
/// oldest first).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecords {
    pub claim: Option<Claim>,
    pub outbox: Vec<OutboxRow>,
    pub dead_letters: Vec<DeadLetter>,
    pub audit: Vec<AuditEntry>,
}

impl KeyRecords {
    /// Nothing at all is stored under the key.
    pub fn is_empty(&self) -> bool {
        self.claim.is_none()
            && self.outbox.is_empty()
            && self.dead_letters.is_empty()
            && self.audit.is_empty()
    }
}

/// `count(*)` over at most `cap + 1` rows of a selection, as a capped count.
macro_rules! capped_count_sql {
    ($from_where:literal) => {
        concat!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM ",
            $from_where,
            " LIMIT $1) AS capped"
        )
    };
}

impl Store {
    /// One claim, by its primary key.
    pub async fn claim(&self, consumer: &str, key: &str) -> StoreResult<Option<Claim>> {
        let row: Option<ClaimRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(CLAIM_SQL).bind(consumer).bind(key).fetch_optional(pool).await?
        });
        row.map(Claim::try_from).transpose()
    }

    /// Everything stored about one key, for its page: the same four reads
    /// as [`Store::claim`], [`Store::outbox_for_key`],
    /// [`Store::dead_letters_for_key`] and [`Store::audit_for_key`], on one
    /// connection. Each trip through the pool costs sqlx a ping when the
    /// connection goes back; the key page pays it once instead of four times.
    pub async fn key_records(&self, consumer: &str, key: &str) -> StoreResult<KeyRecords> {
        let (claim, outbox, dead_letters, audit): (
            Option<ClaimRow>,
            Vec<OutboxDbRow>,
            Vec<DeadLetterRow>,
            Vec<AuditRow>,
        ) = dispatch!(&self.pools, pool => {
            let mut conn = pool.acquire().await?;
            let claim = sqlx::query_as(CLAIM_SQL).bind(consumer).bind(key)
                .fetch_optional(&mut *conn).await?;
            let outbox = sqlx::query_as(OUTBOX_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            let dead_letters = sqlx::query_as(DEAD_LETTERS_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            let audit = sqlx::query_as(AUDIT_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            (claim, outbox, dead_letters, audit)
        });
        Ok(KeyRecords {
            claim: claim.map(Claim::try_from).transpose()?,
            outbox: convert(outbox)?,
            dead_letters: convert(dead_letters)?,
            audit: convert(audit)?,
        })
    }

    /// Every consumer's claim of one key (for links that carry only the key),
    /// at most `limit`.
    pub async fn claims_with_key(&self, key: &str, limit: i64) -> StoreResult<Vec<Claim>> {
        const SQL: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE idempotency_key = $1 ORDER BY consumer LIMIT $2"
        );
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(key).bind(limit).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// Claims whose key starts with `prefix` (any consumer), in key order.
    /// The prefix is matched literally — it is a range over the key index,
    /// not a `LIKE` pattern, so `%` and `_` are ordinary characters.
    pub async fn claims_with_key_prefix(
        &self,
        prefix: &str,
        limit: i64,
    ) -> StoreResult<Vec<Claim>> {
        const BOUNDED: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE idempotency_key >= $1 AND idempotency_key < $2 \
             ORDER BY idempotency_key, consumer LIMIT $3"
        );
        const UNBOUNDED: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE idempotency_key >= $1 \
             ORDER BY idempotency_key, consumer LIMIT $2"
        );
        let rows: Vec<ClaimRow> = match prefix_upper_bound(prefix) {
            Some(upper) => dispatch!(&self.pools, pool => {
                sqlx::query_as(BOUNDED).bind(prefix).bind(&upper).bind(limit).fetch_all(pool).await?
            }),
            None => dispatch!(&self.pools, pool => {
                sqlx::query_as(UNBOUNDED).bind(prefix).bind(limit).fetch_all(pool).await?
            }),
        };
        convert(rows)
    }

    /// The outbox rows of one key, oldest first.
    pub async fn outbox_for_key(&self, consumer: &str, key: &str) -> StoreResult<Vec<OutboxRow>> {
        let rows: Vec<OutboxDbRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(OUTBOX_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The dead letters of one key, oldest first.
    pub async fn dead_letters_for_key(
        &self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Vec<DeadLetter>> {
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(DEAD_LETTERS_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The audit entries about one key, oldest first.
    pub async fn audit_for_key(&self, consumer: &str, key: &str) -> StoreResult<Vec<AuditEntry>> {
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(AUDIT_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The newest audit entries, newest first.
    pub async fn latest_audit(&self, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        const SQL: &str = concat!(
            "SELECT ",
            audit_columns!(),
            " FROM audit_log ORDER BY at DESC, id DESC LIMIT $1"
        );
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(limit).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// How many claims are in `status`, counting no further than `cap`.
    /// `pending`, `failed` and `unknown` are counted from their partial
    /// indexes; `sent` is the bulk of the table, so its first `cap + 1` rows
    /// are found at once by any scan.
    pub async fn count_claims(&self, status: ClaimStatus, cap: u64) -> StoreResult<CappedCount> {
        let sql = match status {
            ClaimStatus::Pending => capped_count_sql!("claims WHERE status = 'pending'"),
            ClaimStatus::Sent => capped_count_sql!("claims WHERE status = 'sent'"),
            ClaimStatus::Failed => capped_count_sql!("claims WHERE status = 'failed'"),
            ClaimStatus::Unknown => capped_count_sql!("claims WHERE status = 'unknown'"),
        };
        self.capped_count(sql, cap).await
    }

    /// Unpublished outbox rows, counting no further than `cap`.
    pub async fn count_unpublished_outbox(&self, cap: u64) -> StoreResult<CappedCount> {
        self.capped_count(capped_count_sql!("outbox WHERE published_at IS NULL"), cap)
            .await
    }

    /// Dead letters in `state`, counting no further than `cap`.
    pub async fn count_dead_letters(
        &self,
        state: DeadLetterState,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let sql = match state {
            DeadLetterState::Open => capped_count_sql!("dead_letters WHERE state = 'open'"),
            DeadLetterState::Replayed => capped_count_sql!("dead_letters WHERE state = 'replayed'"),
            DeadLetterState::Discarded => {
                capped_count_sql!("dead_letters WHERE state = 'discarded'")
            }
        };
        self.capped_count(sql, cap).await
    }

    async fn capped_count(&self, sql: &'static str, cap: u64) -> StoreResult<CappedCount> {
        let limit = i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX);
        let counted: i64 = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(sql).bind(limit).fetch_one(pool).await?
        });
        Ok(CappedCount::from_limited(
            u64::try_from(counted).unwrap_or(0),
            cap,
        ))
    }

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

    /// One dead letter.
    pub async fn dead_letter(&self, id: i64) -> StoreResult<Option<DeadLetter>> {
        const SQL: &str = concat!(
            "SELECT ",
            dead_letter_columns!(),
            " FROM dead_letters WHERE id = $1"
        );
        let row: Option<DeadLetterRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(id).fetch_optional(pool).await?
        });
        row.map(DeadLetter::try_from).transpose()
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

    /// Whether any claim exists (the demo starts on an empty database only).
    pub async fn has_claims(&self) -> StoreResult<bool> {
        const SQL: &str = "SELECT EXISTS (SELECT 1 FROM claims)";
        let exists: bool = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_one(pool).await?
        });
        Ok(exists)
    }
}

/// The smallest string greater than every string that starts with `prefix`
/// (in byte order, which is code point order for UTF-8), or `None` when no
/// such string exists (a prefix of only U+10FFFF).
pub(crate) fn prefix_upper_bound(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::prefix_upper_bound;

    #[test]
    fn the_upper_bound_of_a_prefix_is_just_past_every_key_that_starts_with_it() {
        assert_eq!(prefix_upper_bound("renewal:").as_deref(), Some("renewal;"));
        assert_eq!(prefix_upper_bound("a%").as_deref(), Some("a&"));
        assert_eq!(prefix_upper_bound("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_upper_bound("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper_bound("\u{10FFFF}"), None);
        for key in ["renewal:x", "renewal:\u{10FFFF}", "renewal:💸"] {
            assert!(key > "renewal:" && key < prefix_upper_bound("renewal:").unwrap().as_str());
        }
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
