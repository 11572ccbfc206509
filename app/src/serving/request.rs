//! What a server function knows of the request it serves: who is signed in
//! (and may they), from where, their cookies and time zone, the state.

use leptos::prelude::*;

use super::state::AppState;
use crate::error::AppError;

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

/// The consumers on which the signed-in person holds `needed`: every one,
/// or their teams' (the catalogue says which consumer is whose). Every
/// list, count and chart a page reads is narrowed to them.
pub fn within(needed: idem_domain::Role) -> Result<idem_domain::Within, AppError> {
    let user = require(needed)?;
    Ok(user.rights.within(&state()?.catalogue, needed))
}

/// The signed-in person, if they hold `needed` on `consumer`. Anyone whose
/// rights stop at other teams gets a 403 naming the consumer's team, counted
/// for the audit log like every refusal.
pub async fn require_on(
    consumer: &str,
    needed: idem_domain::Role,
) -> Result<crate::auth::CurrentUser, AppError> {
    let user = require(needed)?;
    let state = state()?;
    let Err(other) = user.rights.check(&state.catalogue, consumer, needed) else {
        return Ok(user);
    };
    let reason = match &other.team {
        Some(team) => format!("forbidden: {needed} on team {team}"),
        None => format!("forbidden: {needed} on a consumer of no team"),
    };
    Err(refused_elsewhere(&user, &reason, other.to_string()).await)
}

/// A 403 for something outside the person's teams (`message` says whose
/// it is), counted for the audit log like every refusal; `reason` is the
/// count's ("forbidden: viewer on team growth").
pub async fn refused_elsewhere(
    user: &crate::auth::CurrentUser,
    reason: &str,
    message: String,
) -> AppError {
    let path = use_context::<http::request::Parts>().map(|p| p.uri.path().to_owned());
    let addr = client_addr();
    let refusal = idem_store::Refusal {
        actor: &user.username,
        actor_role: user.role.as_str(),
        reason,
        target: path.as_deref().unwrap_or(""),
        client_addr: addr.as_deref(),
    };
    // The refusal stands whether or not it could be counted.
    match state() {
        Ok(state) => {
            if let Err(err) = state
                .store
                .people()
                .count_refusal(&refusal, idem_store::Ts::now())
                .await
            {
                tracing::warn!(error = %crate::error::cause_chain(&err), "could not count a refusal");
            }
        }
        Err(err) => tracing::warn!(error = %err, "could not count a refusal"),
    }
    AppError::OtherTeam(message)
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
    hex::encode(rand::random::<[u8; 12]>())
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
