//! Sign-in throttling in the database (so every replica sees the same
//! counts): one row per window of an (account, client) pair and of a
//! client, reserved before a password is checked and settled after. The
//! rules are `idem_domain::sign_in`; this module only counts. A client is
//! an address (an IPv6 one by its /64) or, for a browser that signed in to
//! the account before, that browser (`device:…`).
//!
//! Every reservation and settlement takes the client's row first (the
//! upsert that reads it locks it on Postgres; SQLite's write transactions
//! take the database's write lock up front), and a pair belongs to one
//! client, so everything about one client is serialized on that row: a
//! burst of parallel guesses sees each other's reservations and gets no
//! more checks than the limit, and no two transactions take the rows in
//! opposite orders.
//!
//! A pair row exists only once its pair has been checked: an attempt from a
//! client over its limit is counted on the client's row alone, so typing a
//! thousand names creates no rows. Failed attempts are audited in
//! aggregate: when a window is closed (by a later attempt, a successful
//! sign-in or the background sweeper) one audit row says how many attempts
//! failed and how many were refused.

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::sign_in::{Admission, SignInLimits, Window};

use crate::facets::People;
use crate::{NewAuditEntry, StoreResult, dialect::dispatch, store::Tx, ts::Ts};

/// The account and client one sign-in attempt is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInSubject<'a> {
    /// The name typed (or a fixed marker for a name that is not one).
    pub account: &'a str,
    /// The client address, or `device:…` for a known browser.
    pub client: &'a str,
    /// The browser signed in to this account before (see
    /// [`Store::known_device`]).
    pub known_good: bool,
}

/// How a checked attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInResult {
    /// The password was right: the reservation is released and the pair's
    /// window closed.
    Succeeded,
    /// Wrong: the reservation stands as the failure.
    Failed,
    /// The check did not happen (hashing was busy): the reservation is released.
    NotChecked,
}

const PAIR: &str = "pair";
const CLIENT: &str = "address";

/// How many ended windows the sweeper closes per transaction.
const CLOSE_BATCH: i64 = 200;

fn delta(duration: std::time::Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

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
    /// One audit row for a window that saw failures or refusals: a pair's
    /// under its name; a client's (the attempts refused while it was over
    /// its limit, whatever the name) under "(any name)".
    async fn audit(&self, tx: &mut Tx, end: DateTime<Utc>) -> StoreResult<()> {
        let (failures, actor) = match self.scope.as_str() {
            PAIR => (self.failures, self.account.as_str()),
            // A client's failures are its pairs' failures, audited there.
            _ => (0, "(any name)"),
        };
        if failures == 0 && self.throttled == 0 {
            return Ok(());
        }
        let plural = |n: i32, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut parts = Vec::new();
        if failures > 0 {
            parts.push(plural(failures, "failed sign-in", "failed sign-ins"));
        }
        if self.throttled > 0 {
            parts.push(plural(
                self.throttled,
                "attempt refused while throttled",
                "attempts refused while throttled",
            ));
        }
        let reason = format!(
            "{}, between {} and {} UTC",
            parts.join(", and "),
            self.window_start.0.format("%Y-%m-%d %H:%M:%S"),
            end.format("%Y-%m-%d %H:%M:%S")
        );
        let result = if self.throttled > 0 {
            idem_domain::AuditResult::Throttled
        } else {
            idem_domain::AuditResult::Failed
        };
        tx.append_audit(&NewAuditEntry {
            reason: Some(&reason),
            client_addr: Some(&self.client),
            ..NewAuditEntry::new(actor, "anonymous", idem_domain::AuditAction::Login, result)
        })
        .await?;
        Ok(())
    }
}

const CLOSE_ONE: &str = "DELETE FROM login_failures \
     WHERE scope = $1 AND account = $2 AND client = $3 AND ($4 IS NULL OR window_start <= $4) \
     RETURNING scope, account, client, window_start, failures, throttled";

/// Reads the client's row, creating it (a window starting now) if there is
/// none; the upsert locks the row until the transaction ends.
const LOCK_CLIENT: &str = "INSERT INTO login_failures (scope, account, client, window_start, failures, throttled) \
     VALUES ('address', '', $1, $2, 0, 0) \
     ON CONFLICT (scope, account, client) DO UPDATE SET failures = login_failures.failures \
     RETURNING window_start, failures, next_check_at";

const READ_PAIR: &str = "SELECT window_start, failures, next_check_at FROM login_failures \
     WHERE scope = 'pair' AND account = $1 AND client = $2";

impl Tx {
    /// Closes the window of one counter if it started by `cutoff` (any
    /// window when `None`).
    async fn close_window(
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

    /// The client's window, locked.
    async fn lock_client(&mut self, client: &str, now: Ts) -> StoreResult<Window> {
        let row: (Ts, i32, Option<Ts>) = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(LOCK_CLIENT).bind(client).bind(now).fetch_one(&mut **tx).await?
        });
        Ok(window(Some(row)))
    }

    /// The pair's window, if the pair has one (under the client's lock).
    async fn pair(&mut self, subject: &SignInSubject<'_>) -> StoreResult<Option<Window>> {
        let row: Option<(Ts, i32, Option<Ts>)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(READ_PAIR).bind(subject.account).bind(subject.client)
                .fetch_optional(&mut **tx).await?
        });
        Ok(row.map(|row| window(Some(row))))
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

fn window(row: Option<(Ts, i32, Option<Ts>)>) -> Window {
    match row {
        Some((start, failures, next_check_at)) => Window {
            start: Some(start.0),
            failures: failures.max(0) as u32,
            next_check_at: next_check_at.map(|t| t.0),
        },
        None => Window::default(),
    }
}

impl People<'_> {
    /// Decides whether one sign-in attempt may be checked and, if so,
    /// reserves a failure against its pair and client (released by
    /// [`Store::settle_sign_in`] if the password is right). A refused
    /// attempt is counted as throttled — on its pair's row when the pair
    /// has one, else on the client's — and moves no window.
    pub async fn reserve_sign_in(
        self,
        limits: &SignInLimits,
        subject: &SignInSubject<'_>,
        now: Ts,
    ) -> StoreResult<Admission> {
        const CHECKED_PAIR: &str = "INSERT INTO login_failures \
             (scope, account, client, window_start, failures, throttled, next_check_at) \
             VALUES ('pair', $1, $2, $3, 1, 0, $4) \
             ON CONFLICT (scope, account, client) DO UPDATE SET \
             failures = login_failures.failures + 1, \
             next_check_at = COALESCE($4, login_failures.next_check_at)";
        const CHECKED_CLIENT: &str = "UPDATE login_failures SET failures = failures + 1 \
             WHERE scope = 'address' AND account = '' AND client = $1";
        const THROTTLED: &str = "UPDATE login_failures SET throttled = throttled + 1 \
             WHERE scope = $1 AND account = $2 AND client = $3";
        let cutoff = Ts::from(now.0 - delta(limits.window));
        let mut tx = self.begin().await?;
        tx.close_window(CLIENT, subject, Some(cutoff), now.0)
            .await?;
        let client = tx.lock_client(subject.client, now).await?;
        tx.close_window(PAIR, subject, Some(cutoff), now.0).await?;
        let pair = tx.pair(subject).await?;
        let admission = limits.admit(
            &pair.unwrap_or_default(),
            &client,
            subject.known_good,
            now.0,
        );
        match admission {
            Admission::Check { next_check_at } => {
                let next = next_check_at.map(Ts::from);
                dispatch!(&mut tx.inner, t => {
                    sqlx::query(CHECKED_PAIR).bind(subject.account).bind(subject.client).bind(now)
                        .bind(next).execute(&mut **t).await?;
                    sqlx::query(CHECKED_CLIENT).bind(subject.client).execute(&mut **t).await?;
                });
            }
            Admission::Throttled { .. } => {
                let (scope, account) = match pair {
                    Some(_) => (PAIR, subject.account),
                    None => (CLIENT, ""),
                };
                dispatch!(&mut tx.inner, t => {
                    sqlx::query(THROTTLED).bind(scope).bind(account).bind(subject.client)
                        .execute(&mut **t).await?;
                });
            }
        }
        tx.commit().await?;
        Ok(admission)
    }

    /// Settles a reserved attempt (see [`SignInResult`]).
    pub async fn settle_sign_in(
        self,
        subject: &SignInSubject<'_>,
        result: SignInResult,
        now: Ts,
    ) -> StoreResult<()> {
        // A client counter left with nothing to count goes at once: a
        // normal sign-in leaves no row behind.
        const CLEAN: &str = "DELETE FROM login_failures \
             WHERE scope = 'address' AND account = '' AND client = $1 AND failures = 0 AND throttled = 0";
        if result == SignInResult::Failed {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        // The client's row first, as every reservation takes it.
        tx.add_failures(CLIENT, subject, -1).await?;
        tx.add_failures(PAIR, subject, -1).await?;
        if result == SignInResult::Succeeded {
            // The pair's window ends with the right password: what failed
            // before it is summed up now.
            tx.close_window(PAIR, subject, None, now.0).await?;
        }
        dispatch!(&mut tx.inner, t => {
            sqlx::query(CLEAN).bind(subject.client).execute(&mut **t).await?;
        });
        tx.commit().await
    }

    /// Whether the browser whose device token hashes to `device` signed in
    /// to `username` within `limits.known_for`.
    pub async fn known_device(
        self,
        limits: &SignInLimits,
        username: &str,
        device: &str,
        now: Ts,
    ) -> StoreResult<bool> {
        const SQL: &str = "SELECT COUNT(*) FROM login_devices \
             WHERE username = $1 AND device = $2 AND last_ok_at > $3";
        let since = Ts::from(now.0 - delta(limits.known_for));
        let known: i64 = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(username).bind(device).bind(since).fetch_one(pool).await?
        });
        Ok(known > 0)
    }

    /// Remembers that the browser whose device token hashes to `device`
    /// signed in to `username` now.
    pub async fn remember_device(self, username: &str, device: &str, now: Ts) -> StoreResult<()> {
        const SQL: &str = "INSERT INTO login_devices (username, device, last_ok_at) VALUES ($1, $2, $3) \
             ON CONFLICT (username, device) DO UPDATE SET last_ok_at = $3";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username).bind(device).bind(now).execute(pool).await?;
        });
        Ok(())
    }

    /// Closes every window that ended by `now` (one audit row for each that
    /// saw failures or refusals), a batch per transaction — clients' rows
    /// before pairs', the order reservations take them in — and forgets
    /// browsers not seen for `limits.known_for`. Returns how many windows
    /// were closed.
    pub async fn close_sign_in_windows(self, limits: &SignInLimits, now: Ts) -> StoreResult<usize> {
        const CLOSE: &str = "DELETE FROM login_failures WHERE (scope, account, client) IN ( \
             SELECT scope, account, client FROM login_failures \
             WHERE scope = $1 AND window_start <= $2 LIMIT $3) \
             RETURNING scope, account, client, window_start, failures, throttled";
        const FORGET: &str = "DELETE FROM login_devices WHERE last_ok_at <= $1";
        let cutoff = Ts::from(now.0 - delta(limits.window));
        let mut closed = 0;
        for scope in [CLIENT, PAIR] {
            loop {
                let mut tx = self.begin().await?;
                let batch: Vec<Closed> = dispatch!(&mut tx.inner, t => {
                    sqlx::query_as(CLOSE).bind(scope).bind(cutoff).bind(CLOSE_BATCH)
                        .fetch_all(&mut **t).await?
                });
                for row in &batch {
                    row.audit(&mut tx, now.0).await?;
                }
                tx.commit().await?;
                closed += batch.len();
                if (batch.len() as i64) < CLOSE_BATCH {
                    break;
                }
            }
        }
        let forget_before = Ts::from(now.0 - delta(limits.known_for));
        dispatch!(&self.pools, pool => {
            sqlx::query(FORGET).bind(forget_before).execute(pool).await?;
        });
        Ok(closed)
    }
}
