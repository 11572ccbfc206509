//! Requests refused to someone who is signed in (a role short of what a
//! page or action needs) or named by the identity proxy (a name that
//! belongs to a password account), audited in aggregate: one counter row
//! per actor, reason and [`REFUSAL_WINDOW`], and one audit row for it once
//! the window has ended ("37 requests refused: …"), as failed sign-ins are.
//! A person who reloads a page they may not see a thousand times adds one
//! row, not a thousand, to a log that keeps every row for good.

use chrono::TimeDelta;

use crate::facets::People;
use crate::{NewAuditEntry, StoreResult, dialect::dispatch, ts::Ts};

/// How long one counter counts.
pub const REFUSAL_WINDOW: TimeDelta = TimeDelta::minutes(15);

/// How many ended windows are audited per transaction.
const CLOSE_BATCH: i64 = 200;

/// One refused request.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    pub actor: &'a str,
    pub actor_role: &'a str,
    /// Why, in words ("forbidden: needs operator").
    pub reason: &'a str,
    /// What was asked for (a path).
    pub target: &'a str,
    pub client_addr: Option<&'a str>,
}

/// An ended window, as its audit row sums it up.
#[derive(sqlx::FromRow)]
struct Ended {
    actor: String,
    actor_role: String,
    reason: String,
    window_start: Ts,
    refused: i32,
    first_target: String,
    client_addr: Option<String>,
}

impl People<'_> {
    /// Counts one refused request in its window (the window starts at the
    /// first refusal).
    pub async fn count_refusal(self, refusal: &Refusal<'_>, now: Ts) -> StoreResult<()> {
        const COUNT: &str = "UPDATE refusal_counts SET refused = refused + 1 \
             WHERE actor = $1 AND reason = $2 AND window_start > $3";
        const OPEN: &str = "INSERT INTO refusal_counts \
             (actor, actor_role, reason, window_start, refused, first_target, client_addr) \
             VALUES ($1, $2, $3, $4, 1, $5, $6) \
             ON CONFLICT (actor, reason, window_start) DO UPDATE \
             SET refused = refusal_counts.refused + 1";
        let open_since = Ts::from(now.0 - REFUSAL_WINDOW);
        let mut tx = self.begin().await?;
        let counted = dispatch!(&mut tx.inner, t => {
            sqlx::query(COUNT).bind(refusal.actor).bind(refusal.reason).bind(open_since)
                .execute(&mut **t).await?.rows_affected()
        });
        if counted == 0 {
            dispatch!(&mut tx.inner, t => {
                sqlx::query(OPEN).bind(refusal.actor).bind(refusal.actor_role)
                    .bind(refusal.reason).bind(now).bind(refusal.target)
                    .bind(refusal.client_addr).execute(&mut **t).await?;
            });
        }
        tx.commit().await
    }

    /// Audits every window that ended by `now` (one row each) and deletes
    /// its counter; how many.
    pub async fn close_refusal_windows(self, now: Ts) -> StoreResult<usize> {
        const CLOSE: &str = "DELETE FROM refusal_counts WHERE (actor, reason, window_start) IN ( \
             SELECT actor, reason, window_start FROM refusal_counts \
             WHERE window_start <= $1 LIMIT $2) \
             RETURNING actor, actor_role, reason, window_start, refused, first_target, client_addr";
        let ended_by = Ts::from(now.0 - REFUSAL_WINDOW);
        let mut closed = 0;
        loop {
            let mut tx = self.begin().await?;
            let batch: Vec<Ended> = dispatch!(&mut tx.inner, t => {
                sqlx::query_as(CLOSE).bind(ended_by).bind(CLOSE_BATCH).fetch_all(&mut **t).await?
            });
            for window in &batch {
                let end = window.window_start.0 + REFUSAL_WINDOW;
                let requests = match window.refused {
                    1 => "1 request refused".to_owned(),
                    n => format!("{n} requests refused"),
                };
                let reason = format!(
                    "{requests} ({}), between {} and {} UTC; the first: {}",
                    window.reason,
                    window.window_start.0.format("%Y-%m-%d %H:%M:%S"),
                    end.format("%Y-%m-%d %H:%M:%S"),
                    window.first_target,
                );
                tx.append_audit_at(
                    &NewAuditEntry {
                        target: Some(&window.first_target),
                        reason: Some(&reason),
                        client_addr: window.client_addr.as_deref(),
                        ..NewAuditEntry::new(
                            &window.actor,
                            &window.actor_role,
                            idem_domain::AuditAction::Denied,
                            idem_domain::AuditResult::Refused,
                        )
                    },
                    now,
                )
                .await?;
            }
            tx.commit().await?;
            closed += batch.len();
            if (batch.len() as i64) < CLOSE_BATCH {
                return Ok(closed);
            }
        }
    }
}
