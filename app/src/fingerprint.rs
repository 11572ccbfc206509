//! Keys out of ordinary logs, still traceable: a request about a key logs a
//! keyed fingerprint of its consumer and key (`kf_` and 16 hex digits of an
//! HMAC-SHA256) instead of the key. The key page shows the fingerprint, so
//! an operator can grep the logs for it; searching a fingerprint found in a
//! log finds its key: when a signed-in person reads a key that Idem holds
//! something about, its fingerprint is kept in `key_fingerprints` (at most
//! once a day per process, and for `FINGERPRINT_KEEP_DAYS` after). A
//! request nobody was let in for, or about a key Idem holds nothing of,
//! stores nothing. `IDEM_LOG_KEYS=full` logs keys as they are instead.
//!
//! The secret is `IDEM_LOG_KEY_SECRET`, or one generated per install and
//! kept in the database; without it (the database not reached yet) a
//! request logs neither key nor fingerprint.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How every fingerprint starts.
pub const PREFIX: &str = "kf_";
/// Hex digits after the prefix (64 bits).
const DIGITS: usize = 16;
/// The most fingerprints a process remembers having stored; past it, it
/// forgets them all (storing one again is harmless).
const REMEMBERED: usize = 100_000;
/// How long a process remembers having stored one: the stored row's "last
/// logged" moves on about this often while the key is read.
const REMEMBER_FOR: Duration = Duration::from_secs(24 * 3600);

/// How keys appear in the logs, and the secret that fingerprints them.
#[derive(Clone, Debug, Default)]
pub struct LogKeys {
    /// `IDEM_LOG_KEYS=full`: keys as they are.
    full: bool,
    secret: Arc<OnceLock<Vec<u8>>>,
    stored: Arc<Mutex<Stored>>,
}

/// The fingerprints this process stored, since when.
#[derive(Debug)]
struct Stored {
    since: Instant,
    fingerprints: HashSet<String>,
}

impl Default for Stored {
    fn default() -> Self {
        Stored {
            since: Instant::now(),
            fingerprints: HashSet::new(),
        }
    }
}

/// What a request's log says about its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Logged {
    Key(String),
    Fingerprint(String),
    /// The secret is not known yet: neither.
    Withheld,
}

impl LogKeys {
    pub fn new(full: bool) -> Self {
        Self {
            full,
            ..Self::default()
        }
    }

    /// Sets the secret (once; later calls change nothing).
    pub fn set_secret(&self, secret: &[u8]) {
        let _ = self.secret.set(secret.to_vec());
    }

    /// The fingerprint of `key` of `consumer`, once the secret is known.
    pub fn fingerprint(&self, consumer: &str, key: &str) -> Option<String> {
        let secret = self.secret.get()?;
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
        // Length-prefixed, so ("a:b", "c") and ("a", "b:c") differ.
        mac.update(&(consumer.len() as u64).to_be_bytes());
        mac.update(consumer.as_bytes());
        mac.update(key.as_bytes());
        let digest = hex::encode(mac.finalize().into_bytes());
        Some(format!("{PREFIX}{}", &digest[..DIGITS]))
    }

    /// What the log says about `key` of `consumer`.
    pub fn logged(&self, consumer: &str, key: &str) -> Logged {
        if self.full {
            return Logged::Key(key.to_owned());
        }
        match self.fingerprint(consumer, key) {
            Some(fingerprint) => Logged::Fingerprint(fingerprint),
            None => Logged::Withheld,
        }
    }

    /// Whether `fingerprint` still has to be stored (true once per process
    /// and fingerprint, as long as it is remembered: a day, and at most
    /// [`REMEMBERED`] of them).
    pub fn first_time(&self, fingerprint: &str) -> bool {
        let mut stored = self.stored.lock().unwrap_or_else(|e| e.into_inner());
        if stored.fingerprints.len() >= REMEMBERED || stored.since.elapsed() >= REMEMBER_FOR {
            *stored = Stored::default();
        }
        stored.fingerprints.insert(fingerprint.to_owned())
    }

    /// After a signed-in person read `key` of `consumer` (an empty consumer
    /// for a link that names none) and Idem holds something about it: keeps
    /// which key the fingerprint logged for it stands for, so searching the
    /// fingerprint finds it. In the background, off the request's path.
    pub fn remember(&self, store: &idem_store::Store, consumer: &str, key: &str) {
        let Logged::Fingerprint(fingerprint) = self.logged(consumer, key) else {
            return;
        };
        if !self.first_time(&fingerprint) {
            return;
        }
        let (store, consumer, key) = (store.clone(), consumer.to_owned(), key.to_owned());
        tokio::spawn(async move {
            let at = idem_store::Ts::now();
            if let Err(err) = store
                .system()
                .record_key_fingerprint(&fingerprint, &consumer, &key, at)
                .await
            {
                tracing::debug!(error = %err, %fingerprint, "could not store a key fingerprint");
            }
        });
    }
}

/// Whether `text` is shaped like a fingerprint (`kf_` and 16 hex digits).
pub fn looks_like(text: &str) -> bool {
    text.strip_prefix(PREFIX)
        .is_some_and(|hex| hex.len() == DIGITS && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(secret: &[u8]) -> LogKeys {
        let keys = LogKeys::new(false);
        keys.set_secret(secret);
        keys
    }

    #[test]
    fn a_fingerprint_depends_on_the_secret_the_consumer_and_the_key() {
        let a = keys(b"secret one");
        let fp = a.fingerprint("payments", "refund:EU/2026/Ø-1842").unwrap();
        assert!(looks_like(&fp), "{fp}");
        assert_eq!(
            a.fingerprint("payments", "refund:EU/2026/Ø-1842").unwrap(),
            fp
        );
        assert_ne!(
            a.fingerprint("refunds", "refund:EU/2026/Ø-1842").unwrap(),
            fp
        );
        assert_ne!(
            a.fingerprint("payments", "refund:EU/2026/Ø-1843").unwrap(),
            fp
        );
        assert_ne!(a.fingerprint("a:b", "c"), a.fingerprint("a", "b:c"));
        assert_ne!(
            keys(b"secret two")
                .fingerprint("payments", "refund:EU/2026/Ø-1842")
                .unwrap(),
            fp
        );
    }

    #[test]
    fn without_a_secret_nothing_about_the_key_is_logged_and_full_logs_it_as_is() {
        let none = LogKeys::new(false);
        assert_eq!(none.logged("payments", "k"), Logged::Withheld);
        let full = LogKeys::new(true);
        full.set_secret(b"s");
        assert_eq!(full.logged("payments", "k 🧾"), Logged::Key("k 🧾".into()));
    }

    #[test]
    fn only_fingerprint_shaped_text_looks_like_one() {
        assert!(looks_like("kf_0123456789abcdef"));
        assert!(!looks_like("kf_0123456789abcde"));
        assert!(!looks_like("kf_0123456789abcdeg"));
        assert!(!looks_like("renewal:account-1842"));
        assert!(!looks_like("kf_ß123456789abcdef"));
    }

    #[test]
    fn a_fingerprint_is_stored_once_per_process() {
        let keys = keys(b"s");
        assert!(keys.first_time("kf_0123456789abcdef"));
        assert!(!keys.first_time("kf_0123456789abcdef"));
    }
}
