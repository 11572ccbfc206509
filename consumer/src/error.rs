//! The library's one error type.

use idem_domain::KeyError;

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    /// A key or consumer name outside the contract (empty, too long, a
    /// control character).
    #[error(transparent)]
    BadKey(#[from] KeyError),
    /// An outcome was recorded for a key this consumer never claimed.
    #[error("the key {key:?} is not claimed by consumer {consumer:?}")]
    NotClaimed { consumer: String, key: String },
    /// A row holds a value outside the contract.
    #[error("the database holds a value outside the data contract: {0}")]
    Contract(String),
    /// The database refused or failed the statement; the transaction is
    /// best rolled back and the message handed back to the queue.
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

pub type ConsumerResult<T> = Result<T, ConsumerError>;
