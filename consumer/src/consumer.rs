//! The pattern: claim, decide, act, record.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{ClaimStatus, ConsumerName, IdempotencyKey, OutboxOrigin};

use crate::{
    Backoff, ConsumerResult, Ts,
    conn::Conn,
    writes::{self, Delivery, NewDeadLetter, NewOutboxRow, Outcome},
};

/// One consumer (a worker group reading one queue) and how it handles
/// failure. Cheap to clone; share one between workers.
#[derive(Debug, Clone)]
pub struct Consumer {
    name: ConsumerName,
    lease: TimeDelta,
    max_deliveries: u32,
    backoff: Backoff,
}

/// What claiming a delivery's key found, and what to do about it. (Not
/// the stored claim, which is `idem_domain::Claim`, nor the store's
/// `Claimed`: this is the consumer's decision about one delivery.)
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimDecision {
    /// The key was not claimed before this delivery.
    pub new: bool,
    /// When the key was first delivered (for a new claim, now).
    pub first_delivery_at: DateTime<Utc>,
    /// Deliveries of this key so far, this one included.
    pub deliveries: i64,
    pub decision: Decision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// This delivery owns the attempt; the claim is leased to it. An effect
    /// inside the database: apply it in this same transaction, then
    /// [`Consumer::record_sent`], then commit. An external effect: commit
    /// now, call the provider, then record the outcome in a new transaction.
    Proceed,
    /// The effect already happened (`sent`), may have (`unknown`, for an
    /// operator to resolve), or will not succeed as sent (`failed`; only an
    /// operator's redrive tries it again): acknowledge and do nothing.
    AlreadyDone { status: ClaimStatus },
    /// Another worker holds the lease right now: hand the message back to
    /// the queue without acting.
    Busy { until: DateTime<Utc> },
    /// A worker took the lease, called out, and never recorded how it
    /// ended (it crashed, or stalled past the lease). The provider may have
    /// acted, so the claim is now `unknown`: acknowledge, do not call again.
    LeaseExpired,
}

/// How an attempt at the effect failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure<'a> {
    /// Worth retrying: a 429 (with its `Retry-After`, if any), a 503, a timeout
    /// before the request was sent.
    Retryable {
        error: &'a str,
        retry_after: Option<Duration>,
    },
    /// Will never succeed as sent: a 400, a closed account.
    Permanent { error: &'a str },
}

/// What to do with the message after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Hand it back to the queue to be delivered again after this long.
    RetryIn(Duration),
    /// It has had its deliveries: move it to the dead letters
    /// ([`Consumer::dead_letter`]) and acknowledge it.
    DeadLetter,
    /// Acknowledge it; the claim says `failed` for an operator to see.
    Acknowledge,
}

/// A message being given up on.
#[derive(Debug, Clone, Copy)]
pub struct GiveUp<'a> {
    pub key: &'a IdempotencyKey,
    pub queue: &'a str,
    pub message_id: &'a str,
    pub payload: &'a str,
    /// Deliveries before giving up.
    pub deliveries: u32,
    pub first_failure_at: DateTime<Utc>,
    pub error: &'a str,
}

impl Consumer {
    /// Defaults: a 60 s lease, 5 deliveries, backoff from 1 s to 5 min.
    pub fn new(name: &str) -> ConsumerResult<Consumer> {
        Ok(Consumer {
            name: ConsumerName::parse(name)?,
            lease: TimeDelta::seconds(60),
            max_deliveries: 5,
            backoff: Backoff::default(),
        })
    }

    /// How long an attempt holds the key. Make it longer than the queue's
    /// visibility timeout, so a redelivery during a slow call finds the
    /// lease instead of calling the provider a second time.
    pub fn with_lease(mut self, lease: TimeDelta) -> Self {
        self.lease = lease;
        self
    }

    /// Deliveries after which a still-failing message is dead-lettered.
    pub fn with_max_deliveries(mut self, deliveries: u32) -> Self {
        self.max_deliveries = deliveries.max(1);
        self
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Step 1, in the caller's transaction: claim the key (or count this
    /// delivery as a duplicate) and decide. With [`Decision::Proceed`] the
    /// claim is leased to this delivery; with [`Decision::LeaseExpired`]
    /// the claim has been marked `unknown`. Either way, commit what this
    /// wrote together with the caller's own writes.
    ///
    /// A `failed` key is not tried again by an ordinary delivery (a
    /// publisher's retry, a redelivery): `failed` means it will not succeed
    /// as sent. Only an operator's redrive does that; see
    /// [`Consumer::claim_redrive`].
    pub async fn claim<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        payload_hash: Option<&str>,
        at: DateTime<Utc>,
    ) -> ConsumerResult<ClaimDecision> {
        self.claim_as(conn.into(), key, payload_hash, at, false)
            .await
    }

    /// [`Consumer::claim`] for a delivery an operator sent again: a
    /// replayed dead letter or an unknown outcome resolved as "failed,
    /// retry" (Idem's outbox rows whose `origin` is `replay` or
    /// `resolution`). A `failed` claim is then tried once more; `sent` and
    /// `unknown` are still never repeated.
    pub async fn claim_redrive<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        payload_hash: Option<&str>,
        at: DateTime<Utc>,
    ) -> ConsumerResult<ClaimDecision> {
        self.claim_as(conn.into(), key, payload_hash, at, true)
            .await
    }

    async fn claim_as(
        &self,
        mut conn: Conn<'_>,
        key: &IdempotencyKey,
        payload_hash: Option<&str>,
        at: DateTime<Utc>,
        redrive: bool,
    ) -> ConsumerResult<ClaimDecision> {
        let now = Ts::from(at);
        let (new, state) = writes::claim(
            conn.by_ref(),
            &Delivery {
                consumer: self.name(),
                key: key.as_str(),
                payload_hash,
                at: now,
            },
        )
        .await?;
        let decision = match state.status {
            ClaimStatus::Sent | ClaimStatus::Unknown => Decision::AlreadyDone {
                status: state.status,
            },
            ClaimStatus::Pending => match state.lease_until {
                Some(until) if until > now => Decision::Busy { until: until.0 },
                Some(_) => Decision::LeaseExpired,
                None => Decision::Proceed,
            },
            // A replayed dead letter or an operator's "failed, retry".
            ClaimStatus::Failed if redrive => Decision::Proceed,
            ClaimStatus::Failed => Decision::AlreadyDone {
                status: ClaimStatus::Failed,
            },
        };
        match decision {
            Decision::Proceed => {
                writes::lease(conn, self.name(), key.as_str(), now + self.lease, now).await?;
            }
            Decision::LeaseExpired => {
                let error = "a worker's lease expired after it called the provider, with no \
                             outcome recorded: the provider may have acted";
                writes::record(
                    conn,
                    self.name(),
                    key.as_str(),
                    Outcome::Unknown { error },
                    now,
                )
                .await?;
            }
            Decision::AlreadyDone { .. } | Decision::Busy { .. } => {}
        }
        Ok(ClaimDecision {
            new,
            first_delivery_at: state.first_delivery_at.0,
            deliveries: state.delivery_count,
            decision,
        })
    }

    /// The provider confirmed the effect (or the in-transaction effect is
    /// applied): `sent`, with the provider's reference for the effect.
    pub async fn record_sent<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        provider_ref: Option<&str>,
        at: DateTime<Utc>,
    ) -> ConsumerResult<()> {
        let outcome = Outcome::Sent { provider_ref };
        self.record(conn.into(), key, outcome, at).await?;
        Ok(())
    }

    /// The call's outcome cannot be known (the response was lost after the
    /// request went out): `unknown`, for an operator to resolve. Never retry
    /// such a call blindly.
    pub async fn record_unknown<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        error: &str,
        at: DateTime<Utc>,
    ) -> ConsumerResult<()> {
        let outcome = Outcome::Unknown { error };
        self.record(conn.into(), key, outcome, at).await?;
        Ok(())
    }

    /// Records a failed attempt and says what to do with the message, given
    /// how many times the queue has delivered it (`deliveries`, this one
    /// included). Retryable: the claim stays `pending` with its lease
    /// released, and the wait grows with the key's attempts and honours
    /// `Retry-After`. Permanent: the claim becomes `failed`.
    pub async fn record_failure<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        failure: Failure<'_>,
        deliveries: u32,
        at: DateTime<Utc>,
    ) -> ConsumerResult<Next> {
        let outcome = match failure {
            Failure::Retryable { error, .. } => Outcome::Retryable { error },
            Failure::Permanent { error } => Outcome::Permanent { error },
        };
        let state = self.record(conn.into(), key, outcome, at).await?;
        Ok(match failure {
            Failure::Permanent { .. } => Next::Acknowledge,
            Failure::Retryable { .. } if deliveries >= self.max_deliveries => Next::DeadLetter,
            Failure::Retryable { retry_after, .. } => {
                let attempts = u32::try_from(state.attempts.max(1)).unwrap_or(u32::MAX);
                Next::RetryIn(self.backoff.delay(attempts, retry_after))
            }
        })
    }

    /// One outcome for `key`, written through `conn`.
    async fn record(
        &self,
        conn: Conn<'_>,
        key: &IdempotencyKey,
        outcome: Outcome<'_>,
        at: DateTime<Utc>,
    ) -> ConsumerResult<writes::ClaimState> {
        writes::record(conn, self.name(), key.as_str(), outcome, Ts::from(at)).await
    }

    /// Writes an outbox row under the claim's key, in the caller's
    /// transaction (the event that announces the effect); returns its id.
    pub async fn enqueue<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        key: &IdempotencyKey,
        topic: &str,
        payload: &str,
        at: DateTime<Utc>,
    ) -> ConsumerResult<i64> {
        let row = NewOutboxRow {
            consumer: self.name(),
            topic,
            key: key.as_str(),
            payload,
            origin: OutboxOrigin::Application,
            dead_letter_id: None,
            audit_id: None,
            at: Ts::from(at),
        };
        writes::enqueue(conn.into(), &row).await
    }

    /// Gives up on a message: the message, with its key and payload, goes to
    /// the dead letters, where an operator can replay it under the same key,
    /// and its claim becomes `failed` — unless the claim says more than that
    /// (`sent`, `unknown`, or `pending` under another worker's live lease,
    /// whose call will record its own outcome). Returns the dead letter's id.
    pub async fn dead_letter<'c>(
        &self,
        conn: impl Into<Conn<'c>>,
        give_up: &GiveUp<'_>,
        at: DateTime<Utc>,
    ) -> ConsumerResult<i64> {
        let mut conn = conn.into();
        let now = Ts::from(at);
        let key = give_up.key.as_str();
        let reason = format!(
            "dead-lettered after {} deliveries: {}",
            give_up.deliveries, give_up.error
        );
        // A key never claimed (its transaction kept rolling back), already
        // settled, or under another worker's live lease is left as it is.
        writes::give_up(conn.by_ref(), self.name(), key, &reason, now).await?;
        let dead_letter = NewDeadLetter {
            consumer: self.name(),
            queue: give_up.queue,
            key,
            message_id: give_up.message_id,
            payload: give_up.payload,
            delivery_count: i64::from(give_up.deliveries),
            first_failure_at: Ts::from(give_up.first_failure_at),
            last_error: Some(give_up.error),
            at: now,
        };
        writes::dead_letter(conn, &dead_letter).await
    }
}
