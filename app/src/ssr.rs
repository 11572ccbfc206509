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
    pub reads: crate::cache::ReadCache,
}

/// How long one dashboard read serves every viewer of the same list, by default.
pub const READ_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

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
    let policy = format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self'; \
         img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
         base-uri 'none'; object-src 'none'"
    );
    if let Ok(value) = http::HeaderValue::from_str(&policy) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
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

/// Runs a server function body; a failure also sets the response status (of
/// the page being rendered, or of the server function call).
pub async fn serve<T>(body: impl Future<Output = Result<T, AppError>>) -> Result<T, AppError> {
    let result = body.await;
    if let Err(err) = &result {
        set_status(err.status());
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
