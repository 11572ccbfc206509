//! The application state every request handler and server function is
//! handed by context, and whether the database answers.

use leptos::prelude::*;

/// What every request handler and server function may use. One per process,
/// provided by context; never a global.
#[derive(Clone, Debug, axum::extract::FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub store: idem_store::Store,
    pub console: crate::console::ConsoleInfo,
    /// Dashboard reads shared between requests for a moment (live refresh).
    /// Reads reach it, and `per_interval`, only through [`Reader::cached`],
    /// whose `ReadKey` decides which of the two keeps them.
    pub reads: crate::cache::ReadCache,
    /// Reads that change only when an interval completes — rendered charts
    /// (their last interval), the SLO board (its last minute) — keyed by
    /// that interval: each is computed once per interval, then served until
    /// the next one completes.
    #[from_ref(skip)]
    pub per_interval: crate::cache::ReadCache,
    /// How long consumers keep claims (a replay of an older key may not be deduplicated).
    pub claim_retention: idem_domain::ClaimRetention,
    /// The consumer catalogue (`IDEM_CONSUMERS_FILE`, the demo's, or empty).
    #[from_ref(skip)]
    pub catalogue: std::sync::Arc<idem_domain::Catalogue>,
    /// The SLOs in force (from `IDEM_SLO_FILE` or the built-in defaults).
    pub slos: std::sync::Arc<idem_domain::slo::SloSet>,
    /// Whether the database answers, and since when it has not.
    #[from_ref(skip)]
    pub database: DatabaseStatus,
    /// Password sign-in is on (`IDEM_PASSWORD_LOGIN`).
    #[from_ref(skip)]
    pub password_login: bool,
    /// The OpenID provider's name for the sign-in button, when configured.
    #[from_ref(skip)]
    pub oidc_name: Option<String>,
    /// The OpenID provider's origin: the sign-out form may be sent on to it
    /// (RP-initiated logout), so pages allow it as a form target.
    #[from_ref(skip)]
    pub oidc_origin: Option<String>,
    /// A read replica for read-only pages and charts
    /// (`IDEM_READ_DATABASE_URL`); actions, audit and sessions always use
    /// `store`, the primary.
    #[from_ref(skip)]
    pub replica: Option<idem_store::Store>,
    /// Consumers read through an adapter (`IDEM_READ_ONLY_CONSUMERS`):
    /// their pages work, their actions are refused.
    #[from_ref(skip)]
    pub read_only: std::sync::Arc<idem_domain::ReadOnlyConsumers>,
    /// How keys appear in the logs (`IDEM_LOG_KEYS`), and their fingerprints.
    #[from_ref(skip)]
    pub log_keys: crate::fingerprint::LogKeys,
    /// Publishes the replays of dead letters a broker kept (`idem::brokers`).
    #[from_ref(skip)]
    pub republisher: crate::republish::Republisher,
}

/// Whether the database answers, and if not, since when it has not. Read by
/// every request; written only by the background check
/// (`idem::health::watch_database`).
#[derive(Clone, Debug, Default)]
pub struct DatabaseStatus(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl DatabaseStatus {
    /// When the database first failed to answer, if it is down now.
    pub fn down_since(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            micros => chrono::DateTime::from_timestamp_micros(micros),
        }
    }

    /// Records a failure; the outage keeps the time of its first one.
    pub fn mark_down(&self) {
        let now = chrono::Utc::now().timestamp_micros().max(1);
        let _ = self.0.compare_exchange(
            0,
            now,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
    }

    /// Records an answer; returns when the outage it ends began, if one did.
    pub fn mark_up(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self.0.swap(0, std::sync::atomic::Ordering::AcqRel) {
            0 => None,
            micros => chrono::DateTime::from_timestamp_micros(micros),
        }
    }
}

/// How long one dashboard read serves every viewer of the same list, by default.
pub const READ_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a per-interval read may be kept at most (the longest chart interval).
pub const CHART_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(6 * 3600);

impl AppState {
    pub fn new(
        leptos_options: LeptosOptions,
        store: idem_store::Store,
        console: crate::console::ConsoleInfo,
        read_cache_ttl: std::time::Duration,
    ) -> Self {
        Self {
            leptos_options,
            store,
            console,
            reads: crate::cache::ReadCache::new(read_cache_ttl, 1024),
            // The key says when a chart is stale; the time to live only frees
            // memory. No read cache (tests) means no chart cache either.
            per_interval: crate::cache::ReadCache::new(
                if read_cache_ttl.is_zero() {
                    read_cache_ttl
                } else {
                    CHART_CACHE_TTL
                },
                256,
            ),
            claim_retention: idem_domain::ClaimRetention::default(),
            slos: std::sync::Arc::default(),
            catalogue: std::sync::Arc::default(),
            database: DatabaseStatus::default(),
            password_login: true,
            oidc_name: None,
            oidc_origin: None,
            replica: None,
            read_only: std::sync::Arc::default(),
            log_keys: crate::fingerprint::LogKeys::default(),
            republisher: crate::republish::Republisher::default(),
        }
    }
}
