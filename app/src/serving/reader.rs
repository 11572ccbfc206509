//! Which database a page reads: the read replica when there is one, unless
//! the person acted within the last minute; the caches go with it.

use super::{request::cookie, state::AppState};
use crate::cache::{Database, Reader};

/// Set on an action's answer: its author's pages read the primary for
/// [`READ_PRIMARY_SECONDS`], so they see what they just did even while the
/// replica lags.
pub const READ_PRIMARY_COOKIE: &str = "idem_read_primary";
pub const READ_PRIMARY_SECONDS: u32 = 60;

/// The store this request's read-only page reads: the replica when there
/// is one, unless the person acted within the last minute.
pub fn reader(state: &AppState) -> Reader {
    match &state.replica {
        Some(replica) if cookie(READ_PRIMARY_COOKIE).is_none() => {
            reading(state, replica, Database::Replica)
        }
        _ => primary(state),
    }
}

/// Reads the primary, whatever the request.
pub fn primary(state: &AppState) -> Reader {
    reading(state, &state.store, Database::Primary)
}

/// Reads `store`, which is `state`'s `database`, through `state`'s caches.
fn reading(state: &AppState, store: &idem_store::Store, database: Database) -> Reader {
    Reader {
        store: store.clone(),
        database,
        reads: state.reads.clone(),
        per_interval: state.per_interval.clone(),
    }
}
