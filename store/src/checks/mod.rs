//! Fleet-wide consistency checks ([`idem_domain::Check`]): one list and one
//! capped count per check, each a range of an index that stays small in a
//! healthy fleet (partial indexes on the odd states, open dead letters, the
//! shared-reference findings), never a scan of `claims`. `idem-tools plans`
//! shows each plan.
//!
//! References on two keys cannot be found that way (nearly every claim has
//! one); a sweep keeps them in `shared_provider_refs` (`shared_refs`).

use chrono::TimeDelta;
use idem_domain::{CappedCount, Check, ClaimRetention, Finding, Page};

use crate::facets::Checks;
use crate::{
    StoreError, StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    sql::{Sql, bind_all},
    ts::Ts,
};

mod shared_refs;

pub use shared_refs::{SHARED_REFS_WATERMARK, SharedRefSweep};

/// What the checks measure against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLimits {
    pub now: Ts,
    /// How long an unknown outcome may stay unknown (the resolution objective).
    pub unknown_objective: TimeDelta,
    /// How long consumers keep claims.
    pub claim_retention: ClaimRetention,
    /// The consumers whose findings count (rights limited to teams).
    pub within: idem_domain::Within,
}

/// The rows a check finds and the order its list takes: a `FROM … WHERE …`
/// over aliases `c` (claims), `d` (dead letters), `f` (shared references),
/// the columns of a [`FindingRow`], and the sort key (time, then a tie-break).
struct Shape {
    from: String,
    columns: String,
    at: &'static str,
    tie_break: &'static [&'static str],
}

/// The column a check's findings name their consumer by.
fn consumer_column(check: Check) -> &'static str {
    match check {
        Check::SharedProviderRef => "f.consumer",
        _ if check.lists_dead_letters() => "d.consumer",
        _ => "c.consumer",
    }
}

/// Whether a check is read consumer by consumer for a reader limited to
/// some: those whose rows an index leading with the consumer holds (the
/// unknown outcomes, the open dead letters), which a large backlog of
/// another team's fills. The others read a partial index that holds only
/// anomalies (abandoned leases, sent claims without a reference, payload
/// drift, shared references) and filter it by consumer.
fn per_consumer(check: Check) -> bool {
    matches!(
        check,
        Check::UnknownPastObjective
            | Check::DeadLetterAlreadySent
            | Check::DeadLetterBeyondRetention
    )
}

/// `part(sql, shape, only)` for the consumers `limits.within` reaches: once
/// per consumer (see [`Sql::each_consumer`]), or once filtered.
fn scoped(
    check: Check,
    limits: &CheckLimits,
    sql: &mut Sql,
    mut part: impl FnMut(&mut Sql, &Shape, &str) -> String,
) -> String {
    let column = consumer_column(check);
    if per_consumer(check) {
        return sql.each_consumer(&limits.within, column, |sql, only| {
            let shape = every_consumer_shape(check, limits, sql);
            part(sql, &shape, only)
        });
    }
    let shape = every_consumer_shape(check, limits, sql);
    let only = sql
        .within(&limits.within, column)
        .map(|c| format!(" AND {c}"))
        .unwrap_or_default();
    part(sql, &shape, &only)
}

/// The columns of a finding about a claim, from alias `c`, ordered by `at`.
fn claim_columns(at: &str, extra: &str) -> String {
    format!(
        "c.consumer, c.idempotency_key, {at} AS at, CAST(NULL AS BIGINT) AS dead_letter_id, \
         c.version, {extra}"
    )
}

/// A finding's columns that a check does not fill.
const NO_REF: &str = "CAST(NULL AS TEXT) AS provider_ref";
const NO_HASHES: &str =
    "CAST(NULL AS TEXT) AS payload_hash, CAST(NULL AS TEXT) AS last_payload_hash";
const NO_LEASE: &str = "CAST(NULL AS TIMESTAMPTZ) AS lease_until";
const CLAIM_ORDER: &[&str] = &["c.consumer", "c.idempotency_key"];

fn every_consumer_shape(check: Check, limits: &CheckLimits, sql: &mut Sql) -> Shape {
    let claim = |from: String, at: &'static str, extra: String| Shape {
        columns: claim_columns(at, &extra),
        from,
        at,
        tie_break: CLAIM_ORDER,
    };
    let dead_letter = |from: String, provider_ref: &str| Shape {
        columns: format!(
            "d.consumer, d.idempotency_key, d.dead_lettered_at AS at, d.id AS dead_letter_id, \
             CAST(NULL AS BIGINT) AS version, {provider_ref}, {NO_HASHES}, {NO_LEASE}, d.last_error"
        ),
        from,
        at: "d.dead_lettered_at",
        tie_break: &["d.id"],
    };
    const JOIN_CLAIM: &str =
        "JOIN claims c ON c.consumer = d.consumer AND c.idempotency_key = d.idempotency_key";
    match check {
        Check::AbandonedLease => {
            let now = sql.param(limits.now);
            claim(
                format!(
                    "claims c WHERE c.status = 'pending' AND c.lease_until IS NOT NULL \
                     AND c.lease_until < {now}"
                ),
                "c.lease_until",
                format!("{NO_REF}, {NO_HASHES}, c.lease_until, c.last_error"),
            )
        }
        Check::UnknownPastObjective => {
            let cutoff = sql.param(limits.now - limits.unknown_objective);
            claim(
                format!("claims c WHERE c.status = 'unknown' AND c.status_at < {cutoff}"),
                "c.status_at",
                format!("{NO_REF}, {NO_HASHES}, {NO_LEASE}, c.last_error"),
            )
        }
        Check::SentWithoutProviderRef => claim(
            "claims c WHERE c.status = 'sent' AND c.provider_ref IS NULL".into(),
            "c.status_at",
            format!("{NO_REF}, {NO_HASHES}, {NO_LEASE}, c.last_error"),
        ),
        Check::PayloadDrift => claim(
            "claims c WHERE c.last_payload_hash IS NOT NULL".into(),
            "c.last_delivery_at",
            format!("{NO_REF}, c.payload_hash, c.last_payload_hash, {NO_LEASE}, c.last_error"),
        ),
        Check::SharedProviderRef => Shape {
            columns: format!(
                "f.consumer, f.idempotency_key, f.found_at AS at, CAST(NULL AS BIGINT) AS dead_letter_id, \
                 c.version, f.provider_ref, {NO_HASHES}, {NO_LEASE}, c.last_error"
            ),
            from: "shared_provider_refs f JOIN claims c ON c.consumer = f.consumer \
                   AND c.idempotency_key = f.idempotency_key AND c.provider_ref = f.provider_ref \
                   WHERE 1 = 1"
                .into(),
            at: "f.found_at",
            tie_break: &["f.consumer", "f.idempotency_key"],
        },
        Check::DeadLetterAlreadySent => dead_letter(
            format!("dead_letters d {JOIN_CLAIM} WHERE d.state = 'open' AND c.status = 'sent'"),
            "c.provider_ref",
        ),
        Check::DeadLetterBeyondRetention => {
            // The replay verdict's rule: a claim that is neither sent nor
            // unknown and older than the retention, or none at all (deleted
            // by the retention) for a letter that old.
            let cutoff = retention_cutoff(&limits.claim_retention, limits.now, sql);
            dead_letter(
                format!(
                    "dead_letters d LEFT {JOIN_CLAIM} WHERE d.state = 'open' \
                     AND (c.status IS NULL OR c.status IN ('pending', 'failed')) \
                     AND COALESCE(c.first_delivery_at, d.first_failure_at) < {cutoff}"
                ),
                NO_REF,
            )
        }
    }
}

/// The instant before which a dead letter's claim is past its consumer's
/// retention: `CASE d.consumer WHEN … THEN … ELSE … END` over the consumers
/// with their own horizon (just the default's when none has).
fn retention_cutoff(retention: &ClaimRetention, now: Ts, sql: &mut Sql) -> String {
    let mut whens = String::new();
    for (consumer, horizon) in retention.overrides() {
        let (name, cutoff) = (sql.param(consumer), sql.param(now - horizon));
        whens += &format!(" WHEN {name} THEN {cutoff}");
    }
    let default = sql.param(now - retention.default_horizon());
    if whens.is_empty() {
        default
    } else {
        format!("CASE d.consumer{whens} ELSE {default} END")
    }
}

/// A check's list in cursors ("checks/payload-drift").
fn list_name(check: Check) -> String {
    format!("checks/{}", check.slug())
}

/// The position after which a page starts: the time, then the tie-break
/// (consumer and key, or a dead letter's id).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Position {
    Claim(i64, String, String),
    DeadLetter(i64, i64),
}

fn position(check: Check, f: &Finding) -> Position {
    let at = f.at.timestamp_micros();
    match f.dead_letter_id {
        Some(id) if check.lists_dead_letters() => Position::DeadLetter(at, id),
        _ => Position::Claim(at, f.consumer.clone(), f.key.clone()),
    }
}

/// A page (`limit + 1` rows) of a check's findings, oldest first.
fn findings_page(check: Check, limits: &CheckLimits, page: &PageRequest) -> StoreResult<Sql> {
    let position: Option<Position> = match &page.after {
        Some(after) => Some(cursor::decode(&list_name(check), after)?),
        None => None,
    };
    let mut sql = Sql::default();
    let limit = sql.param(page.limit + 1);
    let mut bad_cursor = false;
    let parts = scoped(check, limits, &mut sql, |sql, shape, only| {
        let keyset = match (&position, check.lists_dead_letters()) {
            (None, _) => String::new(),
            (Some(Position::Claim(t, consumer, key)), false) => match cursor::instant(*t) {
                Ok(t) => {
                    let t = sql.param(t);
                    format!(
                        " AND ({}, {}) > ({t}, {}, {})",
                        shape.at,
                        shape.tie_break.join(", "),
                        sql.param(consumer.as_str()),
                        sql.param(key.as_str())
                    )
                }
                Err(_) => {
                    bad_cursor = true;
                    String::new()
                }
            },
            (Some(Position::DeadLetter(t, id)), true) => match cursor::instant(*t) {
                Ok(t) => {
                    let t = sql.param(t);
                    format!(
                        " AND ({}, {}) > ({t}, {})",
                        shape.at,
                        shape.tie_break.join(", "),
                        sql.param(*id)
                    )
                }
                Err(_) => {
                    bad_cursor = true;
                    String::new()
                }
            },
            _ => {
                bad_cursor = true;
                String::new()
            }
        };
        format!(
            "SELECT {} FROM {}{only}{keyset} ORDER BY {}, {} LIMIT {limit}",
            shape.columns,
            shape.from,
            shape.at,
            shape.tie_break.join(", ")
        )
    });
    if bad_cursor {
        return Err(StoreError::BadCursor);
    }
    // The outer order names the columns the parts select.
    let order = match check.lists_dead_letters() {
        true => "at, dead_letter_id",
        false => "at, consumer, idempotency_key",
    };
    sql.text = format!("SELECT * FROM ({parts}) AS scoped ORDER BY {order} LIMIT {limit}");
    Ok(sql)
}

/// Every check's count in one statement, each stopping after `cap + 1`.
fn counts(limits: &CheckLimits, cap: u64) -> Sql {
    let mut sql = Sql::default();
    let limit = crate::reads::capped_limit(&mut sql, cap);
    let columns: Vec<String> = Check::ALL
        .into_iter()
        .map(|check| {
            let parts = scoped(check, limits, &mut sql, |_, shape, only| {
                format!("SELECT 1 FROM {}{only} LIMIT {limit}", shape.from)
            });
            format!(
                "(SELECT COUNT(*) FROM (SELECT 1 FROM ({parts}) AS counted LIMIT {limit}) AS capped)"
            )
        })
        .collect();
    sql.push(&format!("SELECT {}", columns.join(", ")));
    sql
}

#[derive(sqlx::FromRow)]
struct FindingRow {
    consumer: String,
    idempotency_key: String,
    at: Ts,
    dead_letter_id: Option<i64>,
    version: Option<i64>,
    provider_ref: Option<String>,
    payload_hash: Option<String>,
    last_payload_hash: Option<String>,
    lease_until: Option<Ts>,
    last_error: Option<String>,
}

impl From<FindingRow> for Finding {
    fn from(row: FindingRow) -> Self {
        Finding {
            consumer: row.consumer,
            key: row.idempotency_key,
            at: row.at.0,
            dead_letter_id: row.dead_letter_id,
            version: row.version,
            provider_ref: row.provider_ref,
            payload_hashes: row.payload_hash.zip(row.last_payload_hash),
            lease_until: row.lease_until.map(|t| t.0),
            last_error: row.last_error,
        }
    }
}

type Counted = (i64, i64, i64, i64, i64, i64, i64);

impl Checks<'_> {
    /// One page of what `check` finds, oldest first.
    pub async fn check_findings(
        self,
        check: Check,
        limits: &CheckLimits,
        page: &PageRequest,
    ) -> StoreResult<Page<Finding>> {
        let sql = findings_page(check, limits, page)?;
        let rows: Vec<FindingRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        let findings = rows.into_iter().map(Finding::from).collect();
        Ok(paginate(findings, page.limit, &list_name(check), |f| {
            position(check, f)
        }))
    }

    /// How many findings each check has, counting no further than `cap`,
    /// in [`Check::ALL`]'s order.
    pub async fn count_check_findings(
        self,
        limits: &CheckLimits,
        cap: u64,
    ) -> StoreResult<Vec<(Check, CappedCount)>> {
        let sql = counts(limits, cap);
        let counted: Counted = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_one(pool).await?
        });
        let (a, b, c, d, e, f, g) = counted;
        Ok(Check::ALL
            .into_iter()
            .zip([a, b, c, d, e, f, g])
            .map(|(check, n)| {
                let n = u64::try_from(n).unwrap_or(0);
                (check, CappedCount::from_limited(n, cap))
            })
            .collect())
    }
}
