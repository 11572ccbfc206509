//! The idempotent-consumer pattern, written against Idem's data contract
//! (`docs/CONTRACT.md`), for Postgres and SQLite.
//!
//! A queue delivers at least once. For each delivery a consumer built on
//! this crate:
//!
//! 1. derives the key from the business identity ([`derive_key`]), never
//!    from the delivery;
//! 2. in its own transaction, [`Consumer::claim`]s the key and gets a
//!    [`Decision`]: proceed, already done, busy (another worker holds the
//!    lease), or lease expired (a crashed attempt: now `unknown`); a
//!    `failed` key is tried again only by an operator's redrive
//!    ([`Consumer::claim_redrive`]);
//! 3. applies the effect — in that same transaction when it is a database
//!    write, or after committing the lease when it is a call to a provider;
//! 4. records the outcome: [`Consumer::record_sent`] with the provider's
//!    reference, [`Consumer::record_failure`] (retryable with a
//!    `Retry-After`-aware, bounded [`Backoff`], or permanent), or
//!    [`Consumer::record_unknown`] when the call's fate cannot be known;
//! 5. writes outbox rows with the same key ([`Consumer::enqueue`]) and,
//!    after its deliveries run out, moves the message with its key to the
//!    dead letters ([`Consumer::dead_letter`]);
//! 6. counts what happened in a [`Meter`] and flushes it every few seconds
//!    ([`write_metrics`]) as per-minute rows, never a shared counter row.
//!
//! Every write goes through the caller's connection ([`Conn`], made from
//! `&mut *tx`), so it commits or rolls back with the caller's own writes.
//! On SQLite begin write transactions with `BEGIN IMMEDIATE` (sqlx:
//! `pool.begin_with("BEGIN IMMEDIATE")`), so concurrent workers queue on
//! the busy timeout instead of failing to upgrade a read lock.
//!
//! `examples/reminders.rs` is a whole worker: `cargo run -p idem-consumer
//! --example reminders`.

mod backoff;
mod conn;
mod consumer;
mod error;
mod key;
mod meter;
mod ts;
pub mod writes;

pub use backoff::Backoff;
pub use conn::{Backend, Conn};
pub use consumer::{ClaimDecision, Consumer, Decision, Failure, GiveUp, Next};
pub use error::{ConsumerError, ConsumerResult};
pub use idem_domain::{ClaimStatus, IdempotencyKey, KeyError, Metric};
pub use key::derive_key;
pub use meter::Meter;
pub use ts::Ts;
pub use writes::{MetricSample, write_metrics};
