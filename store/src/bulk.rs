//! Bulk loading for seeded data sets (benchmarks, plan checks): Postgres
//! `COPY`, SQLite multi-row inserts (sqlx's `QueryBuilder::push_values`) in
//! large transactions. Only under the `bulk` feature, which idem-tools turns
//! on: the console never bulk-loads.

use std::fmt::Write as _;

use idem_domain::{Claim, DeadLetter, OutboxRow};
use sqlx::postgres::PgPoolCopyExt;

use crate::{StoreResult, dialect::Backend, store::Store, ts::Ts};

/// Rows per SQLite statement (16 columns × 500 stays under SQLite's limit on
/// bound parameters).
const SQLITE_ROWS_PER_INSERT: usize = 500;

fn csv(out: &mut String, field: Option<&str>) {
    if let Some(value) = field {
        out.push('"');
        for c in value.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    }
}

fn csv_time(out: &mut String, at: Option<chrono::DateTime<chrono::Utc>>) {
    if let Some(at) = at {
        let _ = write!(
            out,
            "{}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        );
    }
}

macro_rules! csv_row {
    ($out:expr; $($kind:ident $value:expr),+ $(,)?) => {{
        let mut first = true;
        $(
            if !first { $out.push(','); }
            first = false;
            csv_row!(@field $out, $kind, $value);
        )+
        let _ = first;
        $out.push('\n');
    }};
    (@field $out:expr, text, $v:expr) => { csv($out, $v) };
    (@field $out:expr, time, $v:expr) => { csv_time($out, $v) };
    (@field $out:expr, int, $v:expr) => { { let _ = write!($out, "{}", $v); } };
    (@field $out:expr, opt_int, $v:expr) => { if let Some(v) = $v { let _ = write!($out, "{}", v); } };
}

/// Streams CSV `data` into Postgres with `statement` (a `COPY … FROM STDIN`).
async fn copy_csv(pool: &sqlx::PgPool, statement: &str, data: String) -> StoreResult<()> {
    let mut copy = pool.copy_in_raw(statement).await?;
    copy.send(data.as_bytes()).await?;
    copy.finish().await?;
    Ok(())
}

/// Inserts `rows` into SQLite in one write transaction, as multi-row
/// `INSERT`s that start with `head` (`INSERT INTO t (a, b) `).
async fn insert_chunks<'a, T>(
    pool: &sqlx::SqlitePool,
    head: &'static str,
    rows: &'a [T],
    mut push: impl FnMut(sqlx::query_builder::Separated<'_, 'a, sqlx::Sqlite, &'static str>, &'a T),
) -> StoreResult<()> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    for chunk in rows.chunks(SQLITE_ROWS_PER_INSERT) {
        let mut query = sqlx::QueryBuilder::new(head);
        query.push_values(chunk, &mut push);
        query.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

impl Store {
    /// Appends claims (none may exist yet under the same primary key).
    pub async fn bulk_insert_claims(&self, claims: &[Claim]) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                let mut data = String::with_capacity(claims.len() * 200);
                for c in claims {
                    csv_row!(&mut data;
                        text Some(&c.consumer), text Some(&c.key), text Some(c.status.as_str()),
                        time Some(c.status_at), time Some(c.first_delivery_at), time Some(c.last_delivery_at),
                        int c.delivery_count, int c.duplicate_count, int c.attempts,
                        text c.provider_ref.as_deref(), text c.last_error.as_deref(), time c.outcome_at,
                        text c.payload_hash.as_deref(), text c.last_payload_hash.as_deref(), time c.lease_until,
                        int c.version,
                    );
                }
                const COPY: &str = concat!(
                    "COPY claims (",
                    crate::rows::claim_columns!(),
                    ") FROM STDIN (FORMAT csv)"
                );
                copy_csv(pool, COPY, data).await?;
            }
            Backend::Sqlite(pool) => {
                const INSERT: &str =
                    concat!("INSERT INTO claims (", crate::rows::claim_columns!(), ") ");
                insert_chunks(pool, INSERT, claims, |mut row, c| {
                    row.push_bind(&c.consumer)
                        .push_bind(&c.key)
                        .push_bind(c.status.as_str())
                        .push_bind(Ts(c.status_at))
                        .push_bind(Ts(c.first_delivery_at))
                        .push_bind(Ts(c.last_delivery_at))
                        .push_bind(c.delivery_count)
                        .push_bind(c.duplicate_count)
                        .push_bind(c.attempts)
                        .push_bind(&c.provider_ref)
                        .push_bind(&c.last_error)
                        .push_bind(c.outcome_at.map(Ts))
                        .push_bind(&c.payload_hash)
                        .push_bind(&c.last_payload_hash)
                        .push_bind(c.lease_until.map(Ts))
                        .push_bind(c.version);
                })
                .await?;
            }
        }
        Ok(())
    }

    /// Appends outbox rows (their ids are assigned by the database).
    pub async fn bulk_insert_outbox(&self, rows: &[OutboxRow]) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                let mut data = String::with_capacity(rows.len() * 160);
                for r in rows {
                    csv_row!(&mut data;
                        text Some(&r.consumer), text Some(&r.topic), text Some(&r.key), text Some(&r.payload),
                        time Some(r.created_at), time r.published_at, int r.attempts, text r.last_error.as_deref(),
                        text Some(r.origin.as_str()),
                    );
                }
                copy_csv(pool, "COPY outbox (consumer, topic, idempotency_key, payload, created_at, published_at, \
                         attempts, last_error, origin) FROM STDIN (FORMAT csv)", data).await?;
            }
            Backend::Sqlite(pool) => {
                insert_chunks(pool, "INSERT INTO outbox (consumer, topic, idempotency_key, payload, created_at, published_at, \
                         attempts, last_error, origin) ", rows, |mut row, r| {
                        row.push_bind(&r.consumer)
                            .push_bind(&r.topic)
                            .push_bind(&r.key)
                            .push_bind(&r.payload)
                            .push_bind(Ts(r.created_at))
                            .push_bind(r.published_at.map(Ts))
                            .push_bind(r.attempts)
                            .push_bind(&r.last_error)
                            .push_bind(r.origin.as_str());
                    })
                .await?;
            }
        }
        Ok(())
    }

    /// Appends dead letters (their ids are assigned by the database).
    pub async fn bulk_insert_dead_letters(&self, rows: &[DeadLetter]) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                let mut data = String::with_capacity(rows.len() * 200);
                for d in rows {
                    csv_row!(&mut data;
                        text Some(&d.consumer), text Some(&d.queue), text Some(&d.key), text Some(&d.message_id),
                        text Some(&d.payload), int d.delivery_count, time Some(d.first_failure_at),
                        time Some(d.dead_lettered_at), text d.last_error.as_deref(), text Some(d.state.as_str()),
                        text d.resolved_by.as_deref(), time d.resolved_at,
                    );
                }
                copy_csv(pool, "COPY dead_letters (consumer, queue, idempotency_key, message_id, payload, delivery_count, \
                         first_failure_at, dead_lettered_at, last_error, state, resolved_by, resolved_at) \
                         FROM STDIN (FORMAT csv)", data).await?;
            }
            Backend::Sqlite(pool) => {
                insert_chunks(pool, "INSERT INTO dead_letters (consumer, queue, idempotency_key, message_id, payload, \
                         delivery_count, first_failure_at, dead_lettered_at, last_error, state, resolved_by, resolved_at) ", rows, |mut row, d| {
                        row.push_bind(&d.consumer)
                            .push_bind(&d.queue)
                            .push_bind(&d.key)
                            .push_bind(&d.message_id)
                            .push_bind(&d.payload)
                            .push_bind(d.delivery_count)
                            .push_bind(Ts(d.first_failure_at))
                            .push_bind(Ts(d.dead_lettered_at))
                            .push_bind(&d.last_error)
                            .push_bind(d.state.as_str())
                            .push_bind(&d.resolved_by)
                            .push_bind(d.resolved_at.map(Ts));
                    })
                .await?;
            }
        }
        Ok(())
    }

    /// Appends per-minute metric rows (each sample's minute must be new).
    pub async fn bulk_insert_metrics(&self, samples: &[crate::MetricSample]) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                let mut data = String::with_capacity(samples.len() * 80);
                for m in samples {
                    csv_row!(&mut data;
                        text Some(&m.consumer), text Some(m.metric.name()), time Some(m.at.minute().0),
                        text Some(&m.bucket), int m.value,
                    );
                }
                copy_csv(pool, "COPY consumer_metrics (consumer, metric, minute, bucket, value) FROM STDIN (FORMAT csv)", data).await?;
            }
            Backend::Sqlite(pool) => {
                insert_chunks(
                    pool,
                    "INSERT INTO consumer_metrics (consumer, metric, minute, bucket, value) ",
                    samples,
                    |mut row, m| {
                        row.push_bind(&m.consumer)
                            .push_bind(m.metric.name())
                            .push_bind(m.at.minute())
                            .push_bind(&m.bucket)
                            .push_bind(m.value);
                    },
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Appends audit entries (seeded trails; the console writes its own one by one).
    pub async fn bulk_insert_audit(&self, rows: &[idem_domain::AuditEntry]) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                let mut data = String::with_capacity(rows.len() * 160);
                for a in rows {
                    let (before, after) = states(a);
                    csv_row!(&mut data;
                        text a.action_id.as_deref(), time Some(a.at), text Some(&a.actor), text Some(&a.actor_role),
                        text Some(a.action.as_str()), text a.consumer.as_deref(), text a.key.as_deref(), text a.target.as_deref(),
                        text before.as_deref(), text after.as_deref(), text a.reason.as_deref(),
                        text Some(a.result.as_str()), text a.client_addr.as_deref(),
                    );
                }
                copy_csv(pool, "COPY audit_log (action_id, at, actor, actor_role, action, consumer, idempotency_key, target, \
                         state_before, state_after, reason, result, client_addr) FROM STDIN (FORMAT csv)", data).await?;
            }
            Backend::Sqlite(pool) => {
                insert_chunks(pool, "INSERT INTO audit_log (action_id, at, actor, actor_role, action, consumer, idempotency_key, \
                         target, state_before, state_after, reason, result, client_addr) ", rows, |mut row, a| {
                        let (before, after) = states(a);
                        row.push_bind(&a.action_id)
                            .push_bind(Ts(a.at))
                            .push_bind(&a.actor)
                            .push_bind(&a.actor_role)
                            .push_bind(a.action.as_str())
                            .push_bind(&a.consumer)
                            .push_bind(&a.key)
                            .push_bind(&a.target)
                            .push_bind(before)
                            .push_bind(after)
                            .push_bind(&a.reason)
                            .push_bind(a.result.as_str())
                            .push_bind(&a.client_addr);
                    })
                .await?;
            }
        }
        Ok(())
    }

    /// After a bulk load: refreshes the planner's statistics and (Postgres)
    /// the visibility map, as autovacuum eventually would, so index-only scans
    /// do not visit the table.
    pub async fn analyze(&self) -> StoreResult<()> {
        match &self.pools {
            Backend::Postgres(pool) => {
                sqlx::query("VACUUM ANALYZE").execute(pool).await?;
            }
            Backend::Sqlite(pool) => {
                sqlx::query("ANALYZE").execute(pool).await?;
            }
        }
        Ok(())
    }
}

/// An audit entry's states as the audit log spells them.
fn states(entry: &idem_domain::AuditEntry) -> (Option<String>, Option<String>) {
    let spelled = |s: &Option<idem_domain::AuditState>| s.as_ref().map(ToString::to_string);
    (spelled(&entry.state_before), spelled(&entry.state_after))
}
