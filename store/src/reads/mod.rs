//! What the console reads. Every query here is answered from an index and
//! touches at most a page of rows (or a capped count): no query scans the
//! claims table, which may hold a hundred million rows.
//!
//! Queries that must use a partial index spell the state as a literal
//! (`status = 'unknown'`), never a bound parameter: both planners can only
//! match a partial index's predicate against literal text.

use idem_domain::{
    AuditEntry, CappedCount, Claim, ClaimStatus, ConsumerName, DeadLetter, DeadLetterId,
    DeadLetterState, IdempotencyKey, OutboxRow, Within,
};

use crate::facets::{Claims, Lists};
use crate::{
    StoreResult,
    dialect::dispatch,
    rows::{
        AuditRow, ClaimRow, DeadLetterRow, OutboxDbRow, audit_columns, claim_columns, convert,
        dead_letter_columns, outbox_columns,
    },
    sql::{Sql, bind_all},
    store::Store,
};

mod consumers;
mod lists;
mod overview;

pub use consumers::OpenByConsumer;
pub(crate) use lists::capped_limit;
pub use lists::{DeadLetterFilter, OutboxFilter, Window};
pub use overview::OverviewRecords;

/// How many rows a key page shows of each kind (a key with more is a bug in
/// a consumer, and the page says there are more).
pub const KEY_PAGE_ROWS: i64 = 200;

/// How many other keys sharing a key's provider reference its page names.
pub const KEY_PAGE_SHARED_REFS: i64 = 5;

/// One claim, by its primary key (`$1` consumer, `$2` key).
const CLAIM_SQL: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM claims WHERE consumer = $1 AND idempotency_key = $2"
);
/// One claim and, after it, at most [`KEY_PAGE_SHARED_REFS`] other claims
/// with the same provider reference of the consumers `scope` reaches, in
/// one statement: the key page's first read.
fn claim_and_shared_ref(consumer: &str, key: &str, scope: &Within) -> Sql {
    let mut sql = Sql::default();
    let (consumer, key, limit) = (
        sql.param(consumer),
        sql.param(key),
        sql.param(KEY_PAGE_SHARED_REFS),
    );
    let only = sql
        .within(scope, "consumer")
        .map(|c| format!(" AND {c}"))
        .unwrap_or_default();
    sql.text = format!(
        "SELECT {columns} FROM claims WHERE consumer = {consumer} AND idempotency_key = {key} \
         UNION ALL SELECT * FROM (SELECT {columns} FROM claims WHERE provider_ref = \
         (SELECT provider_ref FROM claims WHERE consumer = {consumer} AND idempotency_key = {key}) \
         AND NOT (consumer = {consumer} AND idempotency_key = {key}){only} \
         ORDER BY consumer, idempotency_key LIMIT {limit}) AS shared",
        columns = claim_columns!()
    );
    sql
}
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
    /// Other claims (consumer, key) with the claim's provider reference, at
    /// most [`KEY_PAGE_SHARED_REFS`], in order.
    pub shared_ref: Vec<(String, String)>,
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

impl Claims<'_> {
    /// One claim, by its primary key.
    pub async fn claim(
        self,
        consumer: &ConsumerName,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<Claim>> {
        let (consumer, key) = (consumer.as_str(), key.as_str());
        let row: Option<ClaimRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(CLAIM_SQL).bind(consumer).bind(key).fetch_optional(pool).await?
        });
        row.map(Claim::try_from).transpose()
    }

    /// Everything stored about one key, for its page, if `scope` reaches
    /// its consumer (else nothing, as for a key nobody wrote): the claim
    /// and the keys of `scope`'s consumers that share its provider
    /// reference, its outbox rows, dead letters and audit, in four
    /// statements on one connection (the claim and its shared provider
    /// reference in one). Each trip through the pool costs sqlx a ping when
    /// the connection goes back; the key page pays it once.
    pub async fn key_records(
        self,
        consumer: &ConsumerName,
        key: &IdempotencyKey,
        scope: &Within,
    ) -> StoreResult<KeyRecords> {
        if !scope.allows(consumer.as_str()) {
            return Ok(KeyRecords {
                claim: None,
                shared_ref: Vec::new(),
                outbox: Vec::new(),
                dead_letters: Vec::new(),
                audit: Vec::new(),
            });
        }
        let (consumer, key) = (consumer.as_str(), key.as_str());
        let shared = claim_and_shared_ref(consumer, key, scope);
        let (claims, outbox, dead_letters, audit): (
            Vec<ClaimRow>,
            Vec<OutboxDbRow>,
            Vec<DeadLetterRow>,
            Vec<AuditRow>,
        ) = dispatch!(&self.pools, pool => {
            let mut conn = pool.acquire().await?;
            let claims = bind_all!(sqlx::query_as(&shared.text), &shared.binds)
                .fetch_all(&mut *conn).await?;
            let outbox = sqlx::query_as(OUTBOX_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            let dead_letters = sqlx::query_as(DEAD_LETTERS_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            let audit = sqlx::query_as(AUDIT_FOR_KEY_SQL).bind(consumer).bind(key)
                .bind(KEY_PAGE_ROWS).fetch_all(&mut *conn).await?;
            (claims, outbox, dead_letters, audit)
        });
        // The key's own claim is the one row with its consumer and key.
        let (own, shared): (Vec<Claim>, Vec<Claim>) = convert::<ClaimRow, Claim>(claims)?
            .into_iter()
            .partition(|c| c.consumer == consumer && c.key == key);
        Ok(KeyRecords {
            claim: own.into_iter().next(),
            shared_ref: shared.into_iter().map(|c| (c.consumer, c.key)).collect(),
            outbox: convert(outbox)?,
            dead_letters: convert(dead_letters)?,
            audit: convert(audit)?,
        })
    }

    /// The claims of one key (for links that carry only the key) of the
    /// consumers `scope` reaches, at most `limit`, by consumer: `scope` is
    /// applied before the limit, so a key many teams hold still lists every
    /// one of the reader's.
    pub async fn claims_with_key(
        self,
        key: &IdempotencyKey,
        limit: i64,
        scope: &Within,
    ) -> StoreResult<Vec<Claim>> {
        let mut sql = Sql::default();
        let k = sql.param(key.as_str());
        sql.push(&format!(
            "SELECT {} FROM claims WHERE idempotency_key = {k}",
            claim_columns!()
        ));
        sql.and_within(scope, "consumer");
        let limit = sql.param(limit);
        sql.push(&format!(" ORDER BY consumer LIMIT {limit}"));
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The outbox rows of one key, oldest first.
    pub async fn outbox_for_key(
        self,
        consumer: &ConsumerName,
        key: &IdempotencyKey,
    ) -> StoreResult<Vec<OutboxRow>> {
        let (consumer, key) = (consumer.as_str(), key.as_str());
        let rows: Vec<OutboxDbRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(OUTBOX_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The dead letters of one key, oldest first.
    pub async fn dead_letters_for_key(
        self,
        consumer: &ConsumerName,
        key: &IdempotencyKey,
    ) -> StoreResult<Vec<DeadLetter>> {
        let (consumer, key) = (consumer.as_str(), key.as_str());
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(DEAD_LETTERS_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The audit entries about one key, oldest first.
    pub async fn audit_for_key(
        self,
        consumer: &ConsumerName,
        key: &IdempotencyKey,
    ) -> StoreResult<Vec<AuditEntry>> {
        let (consumer, key) = (consumer.as_str(), key.as_str());
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(AUDIT_FOR_KEY_SQL).bind(consumer).bind(key).bind(KEY_PAGE_ROWS).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// One dead letter, if it is of a consumer `scope` reaches: another's
    /// is, to this reader, none at all.
    pub async fn dead_letter(
        self,
        id: DeadLetterId,
        scope: &Within,
    ) -> StoreResult<Option<DeadLetter>> {
        let mut sql = Sql::default();
        let p = sql.param(id.get());
        sql.push(&format!(
            "SELECT {} FROM dead_letters WHERE id = {p}",
            dead_letter_columns!()
        ));
        sql.and_within(scope, "consumer");
        let row: Option<DeadLetterRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_optional(pool).await?
        });
        row.map(DeadLetter::try_from).transpose()
    }

    /// Whether any claim exists (the demo starts on an empty database only).
    pub async fn has_claims(self) -> StoreResult<bool> {
        const SQL: &str = "SELECT EXISTS (SELECT 1 FROM claims)";
        let exists: bool = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_one(pool).await?
        });
        Ok(exists)
    }
}

impl Lists<'_> {
    /// How many claims are in `status`, counting no further than `cap`.
    /// `pending`, `failed` and `unknown` are counted from their partial
    /// indexes; `sent` is the bulk of the table, so its first `cap + 1` rows
    /// are found at once by any scan.
    pub async fn count_claims(self, status: ClaimStatus, cap: u64) -> StoreResult<CappedCount> {
        // The status is an enum: spelled as a literal, so a partial index serves it.
        let rows = format!("SELECT 1 FROM claims WHERE status = '{}'", status.as_str());
        self.capped_count(Sql::from(rows), cap).await
    }

    /// Dead letters in `state`, counting no further than `cap`.
    pub async fn count_dead_letters(
        self,
        state: DeadLetterState,
        cap: u64,
    ) -> StoreResult<CappedCount> {
        let rows = format!(
            "SELECT 1 FROM dead_letters WHERE {}",
            lists::dead_letter_state(state)
        );
        self.capped_count(Sql::from(rows), cap).await
    }
}

impl Store {
    /// Counts the rows `rows` (a `SELECT 1 …`) yields, no further than `cap`.
    pub(super) async fn capped_count(&self, rows: Sql, cap: u64) -> StoreResult<CappedCount> {
        let mut sql = rows;
        let limit = sql.param(i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX));
        sql.text = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM ({}) AS counted LIMIT {limit}) AS capped",
            sql.text
        );
        let counted: i64 = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_one(pool).await?
        });
        Ok(CappedCount::from_limited(
            u64::try_from(counted).unwrap_or(0),
            cap,
        ))
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
