//! What sign-in remembers so that people already signed in keep seeing
//! pages while the database (where sessions and accounts live) is down.
//!
//! Every successful session load and account check is remembered for
//! [`OUTAGE_GRACE`]; the memory is consulted only when the database fails to
//! answer, never instead of it. During an outage nothing can change an
//! account or act on the data anyway, so an operator who was signed in a
//! minute ago sees the pages (with the outage banner) rather than a sign-in
//! form that cannot work. Nobody can sign in during an outage.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

/// How long a session or account checked against the database is honoured
/// while the database does not answer.
pub const OUTAGE_GRACE: Duration = Duration::from_secs(15 * 60);

/// At most this many entries are kept; when full, the memory starts over.
const CAPACITY: usize = 10_000;

/// A bounded memory of values last confirmed by the database.
#[derive(Debug)]
pub struct Recent<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            entries: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash, V: Clone> Recent<K, V> {
    /// Remembers `value` as confirmed now.
    pub fn confirm(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY && !entries.contains_key(&key) {
            let now = Instant::now();
            entries.retain(|_, (at, _)| now.duration_since(*at) < OUTAGE_GRACE);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// The value confirmed within [`OUTAGE_GRACE`], if there is one.
    pub fn recall(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < OUTAGE_GRACE)
            .map(|(_, value)| value.clone())
    }

    /// The value confirmed within `max_age` (at most [`OUTAGE_GRACE`]), if
    /// there is one: what a request that only reads may reuse while the
    /// database answers (see [`super::reading`]).
    pub fn recall_within(&self, key: &K, max_age: Duration) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < max_age.min(OUTAGE_GRACE))
            .map(|(_, value)| value.clone())
    }

    /// Forgets `key` (a session ended, an account changed).
    pub fn forget(&self, key: &K) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmed_value_is_recalled_and_a_forgotten_one_is_not() {
        let recent = Recent::default();
        recent.confirm("session-a", 1);
        assert_eq!(recent.recall(&"session-a"), Some(1));
        assert_eq!(recent.recall(&"session-b"), None);
        recent.forget(&"session-a");
        assert_eq!(recent.recall(&"session-a"), None);
    }

    #[test]
    fn a_value_is_reused_only_within_the_age_asked_for() {
        let recent = Recent::default();
        recent.confirm("session-a", 1);
        assert_eq!(
            recent.recall_within(&"session-a", Duration::from_secs(1)),
            Some(1)
        );
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            recent.recall_within(&"session-a", Duration::from_millis(20)),
            None
        );
        assert_eq!(
            recent.recall(&"session-a"),
            Some(1),
            "still there for an outage"
        );
    }

    #[test]
    fn the_memory_never_holds_more_than_its_capacity() {
        let recent = Recent::default();
        for n in 0..CAPACITY + 10 {
            recent.confirm(n, n);
        }
        let held = recent.entries.lock().unwrap().len();
        assert!(held <= CAPACITY, "{held} entries held");
        assert_eq!(recent.recall(&(CAPACITY + 9)), Some(CAPACITY + 9));
    }
}
