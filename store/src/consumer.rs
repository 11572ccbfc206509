//! The consumer side of the contract on Idem's own transactions. The SQL is
//! `idem_consumer::writes` (the library consumers use); these wrappers give
//! Idem's tests, seeding and relay the same writes with whole claims back.

use idem_consumer::{Conn, ConsumerError, writes};
use idem_domain::Claim;

pub use idem_consumer::writes::{Delivery, NewDeadLetter, NewOutboxRow, Outcome};

use crate::{StoreError, StoreResult, dialect::dispatch, store::Tx, ts::Ts};

/// What claiming a key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The key was not claimed before: this delivery owns it (status `pending`).
    New(Claim),
    /// The key was already claimed; the claim after counting this delivery.
    Duplicate(Claim),
}

impl Claimed {
    pub fn claim(&self) -> &Claim {
        match self {
            Claimed::New(c) | Claimed::Duplicate(c) => c,
        }
    }
}

impl From<ConsumerError> for StoreError {
    fn from(err: ConsumerError) -> Self {
        match err {
            ConsumerError::Database(e) => StoreError::from(e),
            other => StoreError::Contract(other.to_string()),
        }
    }
}

impl Tx {
    /// The transaction's connection, for `idem_consumer`'s writes.
    pub fn conn(&mut self) -> Conn<'_> {
        dispatch!(&mut self.inner, tx => Conn::from(&mut **tx))
    }

    /// The whole claim, which a write in this transaction just touched.
    async fn claim_record(&mut self, consumer: &str, key: &str) -> StoreResult<Claim> {
        self.read_claim(consumer, key).await?.ok_or_else(|| {
            StoreError::Contract(format!(
                "claim ({consumer}, {key}) vanished inside its transaction"
            ))
        })
    }

    /// Claims `delivery.key` for `delivery.consumer` exactly as a consumer
    /// does (`idem_consumer::writes::claim`). Exactly one of any number of
    /// concurrent deliveries of one key gets [`Claimed::New`]; the others
    /// count as duplicates.
    pub async fn claim(&mut self, delivery: &Delivery<'_>) -> StoreResult<Claimed> {
        let (new, _) = writes::claim(self.conn(), delivery).await?;
        let claim = self.claim_record(delivery.consumer, delivery.key).await?;
        Ok(if new {
            Claimed::New(claim)
        } else {
            Claimed::Duplicate(claim)
        })
    }

    /// Takes the claim for one attempt at an external effect
    /// (`idem_consumer::writes::lease`).
    pub async fn lease(
        &mut self,
        consumer: &str,
        key: &str,
        until: Ts,
        at: Ts,
    ) -> StoreResult<Claim> {
        writes::lease(self.conn(), consumer, key, until, at).await?;
        self.claim_record(consumer, key).await
    }

    /// Records how an attempt ended and releases the lease
    /// (`idem_consumer::writes::record`).
    pub async fn record(
        &mut self,
        consumer: &str,
        key: &str,
        outcome: Outcome<'_>,
        at: Ts,
    ) -> StoreResult<Claim> {
        writes::record(self.conn(), consumer, key, outcome, at).await?;
        self.claim_record(consumer, key).await
    }

    /// Writes an outbox row; returns its id.
    pub async fn enqueue(&mut self, row: &NewOutboxRow<'_>) -> StoreResult<i64> {
        Ok(writes::enqueue(self.conn(), row).await?)
    }

    /// Moves a message to the dead letters, keeping its key; returns the id.
    pub async fn dead_letter(&mut self, dl: &NewDeadLetter<'_>) -> StoreResult<i64> {
        Ok(writes::dead_letter(self.conn(), dl).await?)
    }

    /// The oldest unpublished outbox rows, for a relay. On Postgres the rows
    /// are locked and rows locked by another relay are skipped, so relays on
    /// several replicas never publish one row twice.
    pub async fn claim_unpublished(
        &mut self,
        limit: i64,
    ) -> StoreResult<Vec<idem_domain::OutboxRow>> {
        use crate::rows::{OutboxDbRow, convert, outbox_columns};
        const SQLITE: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             ORDER BY created_at, id LIMIT $1"
        );
        const POSTGRES: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED"
        );
        let sql = if self.inner.is_postgres() {
            POSTGRES
        } else {
            SQLITE
        };
        let rows: Vec<OutboxDbRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(sql).bind(limit).fetch_all(&mut **tx).await?
        });
        convert(rows)
    }

    /// Marks an outbox row published (`error: None`) or records a failed attempt.
    pub async fn mark_publish_attempt(
        &mut self,
        id: i64,
        error: Option<&str>,
        at: Ts,
    ) -> StoreResult<()> {
        const PUBLISHED: &str = "UPDATE outbox SET published_at = $2, attempts = attempts + 1, last_error = NULL WHERE id = $1";
        const FAILED: &str =
            "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1";
        dispatch!(&mut self.inner, tx => {
            match error {
                None => sqlx::query(PUBLISHED).bind(id).bind(at).execute(&mut **tx).await?,
                Some(error) => sqlx::query(FAILED).bind(id).bind(error).execute(&mut **tx).await?,
            };
        });
        Ok(())
    }
}
