//! Password hashing: Argon2id with the OWASP minimum (m = 19456 KiB, t = 2,
//! p = 1), PHC strings, off the async runtime and bounded in concurrency.

use std::{sync::Arc, time::Duration};

use argon2::{
    Algorithm, Argon2, Params, Version,
    password_hash::{PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng},
};
use idem_store::PasswordHash;
use tokio::sync::Semaphore;

const MEMORY_KIB: u32 = 19_456;
const ITERATIONS: u32 = 2;
const PARALLELISM: u32 = 1;

/// The longest password Idem hashes; longer ones fail like wrong ones.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// Hashing and verifying takes ~20 MiB and tens of milliseconds of CPU each;
/// a few run at once and the rest wait (briefly) or are refused.
#[derive(Clone)]
pub struct Passwords {
    permits: Arc<Semaphore>,
    /// How long a check waits for a permit before it is refused as busy.
    wait: Duration,
    /// Verified when the name is unknown, so both cases cost the same.
    dummy: Arc<PasswordHash>,
    /// Passwords checked against a hash since start (sign-in's cost).
    checks: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("too many sign-ins at once; try again in a moment")]
    Busy,
    #[error("password hashing failed: {0}")]
    Hashing(String),
}

fn argon2() -> Argon2<'static> {
    let params =
        Params::new(MEMORY_KIB, ITERATIONS, PARALLELISM, None).expect("valid Argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

fn hash_now(password: &str) -> Result<PasswordHash, PasswordError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| PasswordHash::new(h.to_string()))
        .map_err(|e| PasswordError::Hashing(e.to_string()))
}

/// Whether `password` matches, and whether the stored hash should be redone
/// with the current parameters.
fn verify_now(password: &str, stored: &PasswordHash) -> (bool, bool) {
    let Ok(parsed) = argon2::PasswordHash::new(stored.expose()) else {
        return (false, false);
    };
    let ok = password.len() <= MAX_PASSWORD_BYTES
        && argon2()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
    let current = parsed.algorithm.as_str() == "argon2id"
        && Params::try_from(&parsed).is_ok_and(|p| {
            p.m_cost() == MEMORY_KIB && p.t_cost() == ITERATIONS && p.p_cost() == PARALLELISM
        });
    (ok, ok && !current)
}

impl Passwords {
    pub fn new(concurrency: usize) -> Self {
        Self::waiting(concurrency, Duration::from_secs(5))
    }

    /// At most `concurrency` hashes at once; a check waits `wait` for its
    /// turn and is then refused as busy.
    pub fn waiting(concurrency: usize, wait: Duration) -> Self {
        let dummy = hash_now("idem-dummy-password").expect("hashing a constant works");
        Self {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            wait,
            dummy: Arc::new(dummy),
            checks: Arc::default(),
        }
    }

    /// How many passwords have been checked against a hash since start.
    pub fn checks(&self) -> u64 {
        self.checks.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PasswordError> {
        let permit = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| PasswordError::Busy)?
            .map_err(|_| PasswordError::Busy)?;
        let result = tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| PasswordError::Hashing(e.to_string()));
        drop(permit);
        result
    }

    pub async fn hash(&self, password: String) -> Result<PasswordHash, PasswordError> {
        self.run(move || hash_now(&password)).await?
    }

    /// Verifies against `stored`, or against a dummy hash when there is none
    /// (unknown user): equal work either way. Returns (matches, needs rehash).
    pub async fn verify(
        &self,
        password: String,
        stored: Option<PasswordHash>,
    ) -> Result<(bool, bool), PasswordError> {
        let real = stored.is_some();
        let hash = stored.unwrap_or_else(|| (*self.dummy).clone());
        let checks = self.checks.clone();
        let (ok, rehash) = self
            .run(move || {
                checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                verify_now(&password, &hash)
            })
            .await?;
        Ok((ok && real, rehash && real))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_is_an_argon2id_phc_string_with_the_owasp_minimum() {
        let passwords = Passwords::new(2);
        let hash = passwords.hash("correct horse".into()).await.unwrap();
        assert!(
            hash.expose().starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{}",
            hash.expose()
        );
        assert_eq!(format!("{hash:?}"), "PasswordHash(<redacted>)");
        assert_eq!(
            passwords
                .verify("correct horse".into(), Some(hash.clone()))
                .await
                .unwrap(),
            (true, false)
        );
        assert_eq!(
            passwords.verify("wrong".into(), Some(hash)).await.unwrap(),
            (false, false)
        );
        assert_eq!(
            passwords.verify("anything".into(), None).await.unwrap(),
            (false, false)
        );
    }

    #[tokio::test]
    async fn a_hash_made_with_weaker_parameters_is_redone_after_a_successful_sign_in() {
        let weak = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8192, 1, 1, None).unwrap(),
        );
        let salt = SaltString::generate(&mut OsRng);
        let old = PasswordHash::new(weak.hash_password(b"pw", &salt).unwrap().to_string());
        let passwords = Passwords::new(1);
        assert_eq!(
            passwords
                .verify("pw".into(), Some(old.clone()))
                .await
                .unwrap(),
            (true, true)
        );
        assert_eq!(
            passwords.verify("nope".into(), Some(old)).await.unwrap(),
            (false, false)
        );
    }
}
