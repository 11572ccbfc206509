//! Sign-in throttling in the database (so every replica sees the same
//! counts): one row per window of an (account, address) pair and of an
//! address, reserved before a password is checked and settled after. The
//! rules are `idem_domain::sign_in`; this module only counts.
//!
//! Reservations are serialized per row: on Postgres the upsert that reads a
//! row locks it until the transaction ends, and SQLite's write transactions
//! take the database's write lock up front. So a burst of parallel guesses
//! sees each other's reservations and gets no more checks than the limit.
//!
//! Failed attempts are audited in aggregate: when a pair's window is closed
//! (by a later attempt, a successful sign-in or the background sweeper) one
//! audit row says how many attempts failed and how many were refused.

use chrono::{DateTime, Utc};
use idem_domain::sign_in::{Admission, SignInLimits, Window};

use crate::{NewAuditEntry, StoreResult, dialect::dispatch, store::Store, store::Tx, ts::Ts};

/// The account and client address one sign-in attempt is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInSubject<'a> {
    /// The name typed (or a fixed marker for a name that is not one).
    pub account: &'a str,
    pub client: &'a str,
}

/// How a checked attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInResult {
    /// The password was right: the reservation is released, the pair's
    /// window closed and the client remembered as known-good.
    Succeeded,
    /// Wrong: the reservation stands as the failure.
    Failed,
    /// The check did not happen (hashing was busy): the reservation is released.
    NotChecked,
}

const PAIR: &str = "pair";
const ADDRESS: &str = "address";

/// A closed window, as the audit log sums it up.
#[derive(sqlx::FromRow)]
struct Closed {
    scope: String,
    account: String,
    client: String,
    window_start: Ts,
    failures: i32,
    throttled: i32,
}

impl Closed {
    /// One audit row for a pair's window that saw failures or refusals.
    async fn audit(&self, tx: &mut Tx, end: DateTime<Utc>) -> StoreResult<()> {
        if self.scope != PAIR || (self.failures == 0 && self.throttled == 0) {
            return Ok(());
        }
        let plural = |n: i32, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut reason = plural(self.failures, "failed sign-in", "failed sign-ins");
        if self.throttled > 0 {
            reason.push_str(&format!(
                ", and {} while throttled",
                plural(self.throttled, "attempt refused", "attempts refused")
            ));
        }
        reason.push_str(&format!(
            ", between {} and {} UTC",
            self.window_start.0.format("%Y-%m-%d %H:%M:%S"),
            end.format("%Y-%m-%d %H:%M:%S")
        ));
        let result = if self.throttled > 0 {
            "throttled"
        } else {
            "failed"
        };
        tx.append_audit(&NewAuditEntry {
            actor: &self.account,
            actor_role: "anonymous",
            action: "login",
            reason: Some(&reason),
            result,
            client_addr: Some(&self.client),
            ..Default::default()
        })
        .await?;
        Ok(())
    }
}

const CLOSE_ONE: &str = "DELETE FROM login_failures \
     WHERE scope = $1 AND account = $2 AND client = $3 AND ($4 IS NULL OR window_start <= $4) \
     RETURNING scope, account, client, window_start, failures, throttled";

/// Reads a counter row, creating it (a window starting now) if there is
/// none; the upsert locks the row until the transaction ends.
const LOCK_ROW: &str = "INSERT INTO login_failures (scope, account, client, window_start, failures, throttled) \
     VALUES ($1, $2, $3, $4, 0, 0) \
     ON CONFLICT (scope, account, client) DO UPDATE SET failures = login_failures.failures \
     RETURNING window_start, failures, next_check_at";

impl Tx {
    /// Closes the window of one counter if it started by `cutoff` (any
    /// window when `None`).
    async fn close_ended(
        &mut self,
        scope: &str,
        subject: &SignInSubject<'_>,
        cutoff: Option<Ts>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let account = if scope == PAIR { subject.account } else { "" };
        let closed: Option<Closed> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(CLOSE_ONE).bind(scope).bind(account).bind(subject.client).bind(cutoff)
                .fetch_optional(&mut **tx).await?
        });
        if let Some(closed) = closed {
            closed.audit(self, now).await?;
        }
        Ok(())
    }

    async fn lock_row(
        &mut self,
        scope: &str,
        subject: &SignInSubject<'_>,
        now: Ts,
    ) -> StoreResult<Window> {
        let account = if scope == PAIR { subject.account } else { "" };
        let (start, failures, next_check_at): (Ts, i32, Option<Ts>) = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(LOCK_ROW).bind(scope).bind(account).bind(subject.client).bind(now)
                .fetch_one(&mut **tx).await?
        });
        Ok(Window {
            start: Some(start.0),
            failures: failures.max(0) as u32,
            next_check_at: next_check_at.map(|t| t.0),
        })
    }

    /// Adds `by` (+1 or −1) to a counter's failures, never below zero.
    async fn add_failures(
        &mut self,
        scope: &str,
        subject: &SignInSubject<'_>,
        by: i32,
    ) -> StoreResult<()> {
        const SQL: &str = "UPDATE login_failures \
             SET failures = CASE WHEN failures + $4 < 0 THEN 0 ELSE failures + $4 END \
             WHERE scope = $1 AND account = $2 AND client = $3";
        let account = if scope == PAIR { subject.account } else { "" };
        dispatch!(&mut self.inner, tx => {
            sqlx::query(SQL).bind(scope).bind(account).bind(subject.client).bind(by)
                .execute(&mut **tx).await?;
        });
        Ok(())
    }
}

impl Store {
    /// Decides whether one sign-in attempt may be checked and, if so,
    /// reserves a failure against its pair and address (released by
    /// [`Store::settle_sign_in`] if the password is right). A refused
    /// attempt is counted as throttled and moves no window.
    pub async fn reserve_sign_in(
        &self,
        limits: &SignInLimits,
        subject: &SignInSubject<'_>,
        now: Ts,
    ) -> StoreResult<Admission> {
        const KNOWN: &str = "SELECT COUNT(*) FROM login_known_clients \
             WHERE username = $1 AND client = $2 AND last_ok_at > $3";
        const CHECKED: &str = "UPDATE login_failures SET failures = failures + 1, \
             next_check_at = COALESCE($4, next_check_at) \
             WHERE scope = $1 AND account = $2 AND client = $3";
        const THROTTLED: &str = "UPDATE login_failures SET throttled = throttled + 1 \
             WHERE scope = $1 AND account = $2 AND client = $3";
        let window = chrono::TimeDelta::from_std(limits.window).unwrap_or(chrono::TimeDelta::MAX);
        let known_since = Ts::from(
            now.0 - chrono::TimeDelta::from_std(limits.known_for).unwrap_or(chrono::TimeDelta::MAX),
        );
        let cutoff = Ts::from(now.0 - window);
        let mut tx = self.begin().await?;
        tx.close_ended(PAIR, subject, Some(cutoff), now.0).await?;
        tx.close_ended(ADDRESS, subject, Some(cutoff), now.0)
            .await?;
        let pair = tx.lock_row(PAIR, subject, now).await?;
        let address = tx.lock_row(ADDRESS, subject, now).await?;
        let known: i64 = dispatch!(&mut tx.inner, t => {
            sqlx::query_scalar(KNOWN).bind(subject.account).bind(subject.client).bind(known_since)
                .fetch_one(&mut **t).await?
        });
        let admission = limits.admit(&pair, &address, known > 0, now.0);
        match admission {
            Admission::Check { next_check_at } => {
                let next = next_check_at.map(Ts::from);
                dispatch!(&mut tx.inner, t => {
                    sqlx::query(CHECKED).bind(PAIR).bind(subject.account).bind(subject.client).bind(next)
                        .execute(&mut **t).await?;
                    sqlx::query(CHECKED).bind(ADDRESS).bind("").bind(subject.client).bind(None::<Ts>)
                        .execute(&mut **t).await?;
                });
            }
            Admission::Throttled { .. } => {
                dispatch!(&mut tx.inner, t => {
                    sqlx::query(THROTTLED).bind(PAIR).bind(subject.account).bind(subject.client)
                        .execute(&mut **t).await?;
                });
            }
        }
        tx.commit().await?;
        Ok(admission)
    }

    /// Settles a reserved attempt (see [`SignInResult`]).
    pub async fn settle_sign_in(
        &self,
        subject: &SignInSubject<'_>,
        result: SignInResult,
        now: Ts,
    ) -> StoreResult<()> {
        const KNOWN: &str = "INSERT INTO login_known_clients (username, client, last_ok_at) \
             VALUES ($1, $2, $3) ON CONFLICT (username, client) DO UPDATE SET last_ok_at = $3";
        if result == SignInResult::Failed {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        tx.add_failures(PAIR, subject, -1).await?;
        tx.add_failures(ADDRESS, subject, -1).await?;
        // An address counter left with nothing to count goes at once: a
        // normal sign-in leaves no row behind.
        const CLEAN: &str = "DELETE FROM login_failures \
             WHERE scope = 'address' AND account = '' AND client = $1 AND failures = 0 AND throttled = 0";
        dispatch!(&mut tx.inner, t => {
            sqlx::query(CLEAN).bind(subject.client).execute(&mut **t).await?;
        });
        if result == SignInResult::Succeeded {
            // The pair's window ends with the right password: what failed
            // before it is summed up now.
            tx.close_ended(PAIR, subject, None, now.0).await?;
            dispatch!(&mut tx.inner, t => {
                sqlx::query(KNOWN).bind(subject.account).bind(subject.client).bind(now)
                    .execute(&mut **t).await?;
            });
        }
        tx.commit().await
    }

    /// Closes every window that ended by `now` (one audit row for each
    /// pair's that saw failures) and forgets known-good clients not seen
    /// for `limits.known_for`. Returns how many windows were closed.
    pub async fn close_sign_in_windows(
        &self,
        limits: &SignInLimits,
        now: Ts,
    ) -> StoreResult<usize> {
        const CLOSE: &str = "DELETE FROM login_failures WHERE window_start <= $1 \
             RETURNING scope, account, client, window_start, failures, throttled";
        const FORGET: &str = "DELETE FROM login_known_clients WHERE last_ok_at <= $1";
        let window = chrono::TimeDelta::from_std(limits.window).unwrap_or(chrono::TimeDelta::MAX);
        let known_for =
            chrono::TimeDelta::from_std(limits.known_for).unwrap_or(chrono::TimeDelta::MAX);
        let mut tx = self.begin().await?;
        let closed: Vec<Closed> = dispatch!(&mut tx.inner, t => {
            sqlx::query_as(CLOSE).bind(Ts::from(now.0 - window)).fetch_all(&mut **t).await?
        });
        for row in &closed {
            row.audit(&mut tx, now.0).await?;
        }
        dispatch!(&mut tx.inner, t => {
            sqlx::query(FORGET).bind(Ts::from(now.0 - known_for)).execute(&mut **t).await?;
        });
        tx.commit().await?;
        Ok(closed.len())
    }
}
