//! Server-only support for server functions: the application state they are
//! handed by context, and the plumbing that turns failures into statuses and
//! log lines.

use std::fmt::Write as _;

use leptos::prelude::*;

use crate::error::AppError;

/// What every request handler and server function may use. One per process,
/// provided by context; never a global.
#[derive(Clone, Debug, axum::extract::FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub store: idem_store::Store,
    pub console: crate::api::ConsoleInfo,
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
}

/// Where a page reads from, and the caches its reads go through
/// ([`Reader::cached`] names the database in every entry it keeps).
pub struct Reader {
    pub store: idem_store::Store,
    pub database: crate::cache::Database,
    pub(crate) reads: crate::cache::ReadCache,
    pub(crate) per_interval: crate::cache::ReadCache,
}

impl Reader {
    /// Reads `store`, which is `state`'s `database`.
    fn new(state: &AppState, store: &idem_store::Store, database: crate::cache::Database) -> Self {
        Self {
            store: store.clone(),
            database,
            reads: state.reads.clone(),
            per_interval: state.per_interval.clone(),
        }
    }

    /// Reads the primary, whatever the request.
    pub fn primary(state: &AppState) -> Self {
        Self::new(state, &state.store, crate::cache::Database::Primary)
    }

    /// Whether this reads the read replica, which may lag behind an action
    /// just taken.
    pub fn is_replica(&self) -> bool {
        self.database == crate::cache::Database::Replica
    }
}

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
            Reader::new(state, replica, crate::cache::Database::Replica)
        }
        _ => Reader::primary(state),
    }
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
        console: crate::api::ConsoleInfo,
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
            database: DatabaseStatus::default(),
            password_login: true,
            oidc_name: None,
            oidc_origin: None,
            replica: None,
            read_only: std::sync::Arc::default(),
            log_keys: crate::fingerprint::LogKeys::default(),
        }
    }
}

/// The person the auth middleware signed in for this request.
pub fn current_user() -> Option<crate::auth::CurrentUser> {
    use_context::<http::request::Parts>()?
        .extensions
        .get::<crate::auth::CurrentUser>()
        .cloned()
}

/// The signed-in person, if their role includes `needed`: every server
/// function starts here. Anyone else is refused (deny by default); the auth
/// middleware refuses them before this too.
pub fn require(needed: idem_domain::Role) -> Result<crate::auth::CurrentUser, AppError> {
    let user = current_user().ok_or(AppError::Unauthorized)?;
    if user.role.includes(needed) {
        Ok(user)
    } else {
        Err(AppError::Forbidden {
            role: user.role.to_string(),
            needed: needed.to_string(),
        })
    }
}

/// Sets this page's Content-Security-Policy: scripts only from Idem itself
/// and the inline hydration scripts that carry this response's nonce, WASM
/// allowed to compile, nothing framed, no base or plugin tricks.
pub fn content_security_policy() {
    let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    // A form's redirect counts as its target: the sign-out form goes on to
    // the OpenID provider when someone signs out there too.
    let provider = use_context::<AppState>()
        .and_then(|state| state.oidc_origin)
        .map(|origin| format!(" {origin}"))
        .unwrap_or_default();
    let policy = format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self'; \
         img-src 'self' data:; connect-src 'self'; form-action 'self'{provider}; frame-ancestors 'none'; \
         base-uri 'none'; object-src 'none'"
    );
    if let Ok(value) = http::HeaderValue::from_str(&policy) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

/// The client's address as the guard determined it (trusted proxies applied).
pub fn client_addr() -> Option<String> {
    let parts = use_context::<http::request::Parts>()?;
    parts
        .extensions
        .get::<crate::auth::ClientAddr>()
        .map(|c| c.0.clone())
}

/// A fresh action id for a page's confirmation forms: each form adds its
/// own name to it (`…-replay-42`), so no two forms carry the same id.
pub fn new_action_id() -> String {
    let bytes: [u8; 12] = rand::random();
    bytes.iter().fold(String::with_capacity(24), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The session entry holding the answer to the person's latest action from
/// a plain form post, until the page it was sent back to shows it.
const ACTION_ANSWER: &str = "action_answer";

/// The query parameter naming the action whose answer a page shows.
pub const ANSWER_PARAM: &str = "answer";

/// An action's answer, as kept in the session for the page to show.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredAnswer {
    action_id: String,
    answer: Result<idem_domain::action::ActionOutcome, AppError>,
}

fn session() -> Option<tower_sessions::Session> {
    use_context::<http::request::Parts>()?
        .extensions
        .get::<tower_sessions::Session>()
        .cloned()
}

/// The page a plain form's answer is shown on, when it is not the form's
/// own page (a started redrive answers on the run's page).
#[derive(Clone)]
struct AnswerOn(String);

/// Shows this action's answer on `path` (a local path) instead of the page
/// the form was on.
pub fn answer_on(path: &str) {
    provide_context(AnswerOn(crate::links::safe_next(path)));
}

/// Whether this request is a browser's own form post (it asks for HTML;
/// the page's code asks for data).
fn plain_form() -> bool {
    use_context::<http::request::Parts>().is_some_and(|parts| {
        parts
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
    })
}

/// The page a plain form was posted from (a local path, never another
/// site), without any earlier answer or Leptos error parameters.
fn form_page() -> String {
    let referer = use_context::<http::request::Parts>()
        .and_then(|p| {
            p.headers
                .get(http::header::REFERER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .and_then(|r| url::Url::parse(&r).ok())
        .map(|u| {
            let query: Vec<(String, String)> = u
                .query_pairs()
                .filter(|(k, _)| {
                    ![ANSWER_PARAM, "outcome", "__err", "__path"].contains(&k.as_ref())
                })
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let pairs: Vec<(&str, &str)> = query
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            crate::links::with_query(u.path(), &pairs)
        })
        .unwrap_or_else(|| "/".to_owned());
    crate::links::safe_next(&referer)
}

/// An action's answer. From the page's own code it is returned as data,
/// with its status. From a plain form post (no JavaScript) the person is
/// sent back (303) to the page the form was on with `?answer=<action id>`,
/// and the answer waits in their session until that page shows it, once.
/// Nothing a page shows comes from its address: an `answer` that does not
/// name the session's latest action shows nothing.
pub async fn answer_form(
    action_id: &str,
    result: Result<idem_domain::action::ActionOutcome, AppError>,
) -> Result<idem_domain::action::ActionOutcome, AppError> {
    // With a read replica, the author reads the primary for a while.
    if result.is_ok()
        && use_context::<AppState>().is_some_and(|s| s.replica.is_some())
        && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        && let Ok(cookie) = http::HeaderValue::from_str(&format!(
            "{READ_PRIMARY_COOKIE}=1; Max-Age={READ_PRIMARY_SECONDS}; Path=/; HttpOnly; SameSite=Lax"
        ))
    {
        response.append_header(http::header::SET_COOKIE, cookie);
    }
    if !plain_form() {
        return result;
    }
    // The id names the answer in the address; anything but a well-formed
    // id (which was refused anyway) is kept under a fixed name.
    let well_formed = (8..=64).contains(&action_id.len())
        && action_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let action_id = if well_formed { action_id } else { "malformed" };
    let stored = StoredAnswer {
        action_id: action_id.to_owned(),
        answer: result.clone(),
    };
    let kept = match session() {
        Some(session) => match session.insert(ACTION_ANSWER, &stored).await {
            // Saved now, not after the answer has gone: if the session
            // cannot be written (the database refused it just after the
            // action committed), the answer is a page that says what was
            // done, not an empty 500 from the session layer.
            Ok(()) => match session.save().await {
                Ok(()) => true,
                Err(err) => {
                    tracing::warn!(error = %err, "could not keep an action's answer in the session; answering with a page");
                    let _ = session.remove_value(ACTION_ANSWER).await;
                    answer_in_place(&result);
                    return result;
                }
            },
            Err(_) => false,
        },
        None => false,
    };
    let back = use_context::<AnswerOn>()
        .map(|page| page.0)
        .unwrap_or_else(form_page);
    let separator = if back.contains('?') { '&' } else { '?' };
    leptos_axum::redirect(&if kept {
        format!("{back}{separator}{ANSWER_PARAM}={action_id}")
    } else {
        back
    });
    // See Other: the browser follows with a GET, whatever the status the
    // answer itself would have had.
    set_status(303);
    result
}

/// The header that asks the server to turn this answer into a page of its
/// own (see `server/src/fn_errors.rs`), carrying it (JSON, URL-safe base64):
/// the session that would have carried it to the form's page could not be
/// written.
pub const ANSWER_IN_PLACE_HEADER: &str = "idem-answer-in-place";

fn answer_in_place(result: &Result<idem_domain::action::ActionOutcome, AppError>) {
    use base64::Engine;
    let Ok(json) = serde_json::to_vec(result) else {
        return;
    };
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        && let Ok(value) = http::HeaderValue::from_str(&encoded)
    {
        response.insert_header(http::HeaderName::from_static(ANSWER_IN_PLACE_HEADER), value);
    }
}

/// The answer to the action `action_id`, if it is the one this person's
/// session holds; it is shown once.
pub async fn take_answer(
    action_id: &str,
) -> Option<Result<idem_domain::action::ActionOutcome, AppError>> {
    let session = session()?;
    let stored: StoredAnswer = session.get(ACTION_ANSWER).await.ok()??;
    if stored.action_id != action_id {
        return None;
    }
    let _ = session.remove_value(ACTION_ANSWER).await;
    Some(stored.answer)
}

/// The value of one cookie of the current request, if it has one.
pub fn cookie(name: &str) -> Option<String> {
    let parts = use_context::<http::request::Parts>()?;
    parts
        .headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The viewer's zone: the one they chose (a cookie), else UTC.
pub fn viewer_zone() -> idem_domain::ZoneInfo {
    cookie(crate::zones::COOKIE)
        .and_then(|name| crate::zones::resolve(&name))
        .unwrap_or_default()
}

/// A clock for data read at `as_of`, in the viewer's zone.
pub fn clock(as_of: chrono::DateTime<chrono::Utc>) -> crate::format::Clock {
    crate::format::Clock {
        as_of,
        zone: viewer_zone(),
    }
}

/// The state, from context.
pub fn state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or_else(|| {
        let missing = std::io::Error::other("AppState is not in the reactive context");
        crate::error::internal(&missing)
    })
}

/// How long a client is asked to wait before retrying while the database is down.
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// Runs a server function body; a failure also sets the response status (of
/// the page being rendered, or of the server function call).
///
/// While the database is known to be down the body is not run: the answer
/// is 503 at once rather than after a wait for a connection that will not
/// come. Only the background check decides that the database is down: a
/// database that did not answer in time otherwise (a busy pool, one slow
/// statement) is "busy", not "unavailable". Both say when to retry.
pub async fn serve<T>(body: impl Future<Output = Result<T, AppError>>) -> Result<T, AppError> {
    let known_down = use_context::<AppState>().is_some_and(|s| s.database.down_since().is_some());
    let result = if known_down {
        Err(AppError::Unavailable)
    } else {
        body.await.map_err(|err| match err {
            AppError::Unavailable => AppError::Busy,
            other => other,
        })
    };
    if let Err(err) = &result {
        set_status(err.status());
        if matches!(err, AppError::Unavailable | AppError::Busy)
            && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        {
            response.insert_header(
                http::header::RETRY_AFTER,
                http::HeaderValue::from(RETRY_AFTER_SECONDS),
            );
        }
    }
    result
}

/// Sets the status of the current response, if there is one.
pub fn set_status(status: u16) {
    if let (Some(options), Ok(code)) = (
        use_context::<leptos_axum::ResponseOptions>(),
        http::StatusCode::from_u16(status),
    ) {
        options.set_status(code);
    }
}

/// A short random id that ties an error page to its log line.
pub fn correlation_id() -> String {
    let bytes: [u8; 6] = rand::random();
    bytes.iter().fold(String::with_capacity(12), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// `error: cause: cause`, for one log line.
pub fn cause_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}
