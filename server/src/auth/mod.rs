//! Who may do what: password sign-in, database-backed sessions, the guard
//! that authenticates every request and refuses by default, cross-site
//! request checks and security headers.
//!
//! Order of layers, outermost first: security headers → CSRF check →
//! session cookie → guard → routes. Every rule is enforced here, on the
//! server; pages only hide what a person may not use.

mod client;
mod csrf;
mod device;
mod guard;
mod headers;
mod login;
pub mod oidc;
pub mod outage;
pub mod password;
pub mod proxy;
mod sessions;

use std::{sync::Arc, time::Duration};

use idem_store::Store;
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

pub use client::TrustedProxies;
pub use csrf::csrf;
pub use guard::guard;
pub use headers::security_headers;
pub use login::{login, logout};
pub use password::Passwords;
pub use sessions::DbSessionStore;

/// How long a request that only reads (GET or HEAD) may reuse the session
/// and the account this replica last read from the database, instead of
/// reading them again (two round trips of every page). A change made
/// elsewhere (another replica, `idem user`, SQL) reaches pages within this;
/// a request that changes anything always asks the database, so a demoted
/// operator never acts on what was true before.
pub const REUSE_FOR_READS: Duration = Duration::from_secs(1);

tokio::task_local! {
    /// Set while the guard authenticates a request that only reads.
    static READING: ();
}

/// Runs `authenticate` (of a GET or HEAD) letting it reuse what was read
/// within [`REUSE_FOR_READS`].
async fn while_reading<F: std::future::Future>(authenticate: F) -> F::Output {
    READING.scope((), authenticate).await
}

/// Whether the running task authenticates a request that only reads.
fn reading() -> bool {
    READING.try_with(|_| ()).is_ok()
}

/// Session keys.
const USER_ID: &str = "user_id";
const EPOCH: &str = "epoch";
const LOGIN_AT: &str = "login_at";

/// Starts the signed-in session of `user`: a fresh id, and nothing of what
/// the session held before (another person's ID token, sign-ins still at a
/// provider). Every way of signing in starts here.
async fn start_session(
    session: &tower_sessions::Session,
    user: &idem_store::UserRecord,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.clear().await;
    session.insert(USER_ID, user.id).await?;
    session.insert(EPOCH, user.session_epoch).await?;
    session
        .insert(LOGIN_AT, chrono::Utc::now().timestamp())
        .await?;
    Ok(())
}

/// Audits what a sign-in source (`actor`: the identity proxy, OpenID
/// Connect) did to an account: made it, or changed its role.
async fn audit_account_change(
    store: &Store,
    actor: &str,
    username: &idem_domain::AccountName,
    action: idem_domain::AuditAction,
    before: &str,
    after: &idem_domain::Rights,
    client: &str,
) {
    let entry = idem_store::NewAuditEntry {
        target: Some(username.as_str()),
        state_before: Some(idem_domain::AuditState::Words(before.to_owned())),
        state_after: Some(idem_domain::AuditState::Words(after.to_string())),
        client_addr: Some(client),
        ..idem_store::NewAuditEntry::new(actor, "admin", action, idem_domain::AuditResult::Ok)
    };
    if let Err(err) = store.audit().append_audit(&entry).await {
        tracing::error!(error = %idem_app::error::cause_chain(&err), actor, %action, "could not audit an account change");
    }
}

/// Settings that decide how sign-in and sessions behave.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// Where people reach Idem. `https://…` makes cookies `Secure` (and
    /// `__Host-` prefixed) and turns on HSTS; its origin is what a
    /// state-changing request without `Sec-Fetch-Site` must come from.
    pub public_url: url::Url,
    /// A session unused this long ends (reads count as use).
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however busy.
    pub absolute_timeout: Duration,
    pub trusted_proxies: TrustedProxies,
    /// Password hashes computed at once.
    pub hash_concurrency: usize,
    /// How long a sign-in waits for its turn to hash before it is told
    /// "busy, try again".
    pub hash_wait: Duration,
    /// Sign-in through an identity-aware proxy, believed only on
    /// connections from the proxy's own addresses.
    pub proxy: Option<proxy::ProxyAuth>,
    /// Sign-in with the company's identity provider through OpenID Connect.
    pub oidc: Option<oidc::OidcSettings>,
    /// `POST /login` with a password is accepted (off when only the proxy signs in).
    pub password_login: bool,
    /// How failed sign-ins are throttled (see `idem_domain::sign_in`).
    pub sign_in: idem_domain::sign_in::SignInLimits,
}

impl AuthSettings {
    /// The idle timeout, as the session layer counts it.
    pub fn idle(&self) -> time::Duration {
        time::Duration::try_from(self.idle_timeout).unwrap_or(time::Duration::minutes(30))
    }

    pub fn secure(&self) -> bool {
        self.public_url.scheme() == "https"
    }

    /// `scheme://host[:port]`, as browsers send it in `Origin`.
    pub fn origin(&self) -> String {
        self.public_url.origin().ascii_serialization()
    }

    pub fn cookie_name(&self) -> &'static str {
        if self.secure() {
            "__Host-idem_session"
        } else {
            "idem_session"
        }
    }
}

/// What the auth layers and handlers share.
pub struct AuthContext {
    pub settings: AuthSettings,
    pub store: Store,
    pub passwords: Passwords,
    /// Accounts as the database last confirmed them, for outages.
    pub known_users: outage::Recent<i64, idem_store::UserRecord>,
    /// People the identity proxy named, as last confirmed, for outages.
    pub known_proxy_users: outage::Recent<String, idem_app::auth::CurrentUser>,
    /// The session store; one per process, so its outage memory is shared.
    sessions: DbSessionStore,
    /// While the database is known to be down, sign-in answers from memory
    /// at once instead of waiting for a connection that will not come.
    pub database: idem_app::serving::DatabaseStatus,
    /// The OpenID provider, when one is configured.
    pub oidc: Option<Arc<oidc::Provider>>,
}

impl AuthContext {
    pub fn new(
        settings: AuthSettings,
        store: Store,
        database: idem_app::serving::DatabaseStatus,
    ) -> Arc<Self> {
        let passwords = Passwords::waiting(settings.hash_concurrency, settings.hash_wait);
        // The settings were checked when read (see `config::env`).
        let oidc = settings.oidc.clone().and_then(|oidc| {
            oidc::Provider::new(oidc, &settings.public_url)
                .inspect_err(|reason| tracing::error!(reason, "OpenID Connect sign-in is off"))
                .ok()
                .map(Arc::new)
        });
        Arc::new(AuthContext {
            oidc,
            sessions: DbSessionStore::new(&store, database.clone(), settings.idle()),
            database,
            settings,
            store,
            passwords,
            known_users: outage::Recent::default(),
            known_proxy_users: outage::Recent::default(),
        })
    }

    /// The session store (the sweeper deletes expired sessions through it).
    pub fn sessions(&self) -> &DbSessionStore {
        &self.sessions
    }

    /// The session cookie: HttpOnly, `SameSite=Lax` (Strict would drop the
    /// session when someone follows an alert link from chat), `Secure` and
    /// `__Host-` when served over HTTPS, refreshed on every request so the
    /// idle timeout counts reads.
    pub fn session_layer(&self) -> SessionManagerLayer<DbSessionStore> {
        let idle = self.settings.idle();
        SessionManagerLayer::new(self.sessions.clone())
            .with_name(self.settings.cookie_name())
            .with_http_only(true)
            .with_same_site(SameSite::Lax)
            .with_secure(self.settings.secure())
            .with_path("/")
            .with_expiry(Expiry::OnInactivity(idle))
            .with_always_save(true)
    }
}
