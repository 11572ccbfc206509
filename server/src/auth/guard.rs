//! Authenticates every request and refuses by default.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use idem_app::auth::{CurrentUser, role_for_api_path};
use idem_store::NewAuditEntry;
use tower_sessions::Session;

use super::{
    AuthContext, EPOCH, LOGIN_AT, USER_ID,
    proxy::{self, Asserted, Refused},
};

/// Reachable without signing in.
fn is_public(method: &Method, path: &str) -> bool {
    matches!(
        path,
        "/livez" | "/readyz" | "/favicon.ico" | "/preferences/zone" | "/logout"
    ) || (path == "/metrics" && matches!(*method, Method::GET | Method::HEAD))
        || (path == "/login" && matches!(*method, Method::GET | Method::HEAD | Method::POST))
        || path.starts_with("/pkg/")
}

/// The session's user, if the session is valid: the user exists, is enabled,
/// has not changed standing since sign-in, and the session is younger than
/// the absolute timeout. An invalid session is destroyed.
async fn authenticate(ctx: &AuthContext, session: &Session) -> Result<Option<CurrentUser>, ()> {
    let Some(user_id) = session.get::<i64>(USER_ID).await.map_err(|_| ())? else {
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH).await.map_err(|_| ())?;
    let login_at = session
        .get::<i64>(LOGIN_AT)
        .await
        .map_err(|_| ())?
        .unwrap_or(0);
    // During an outage the account as last confirmed stands in (read-only:
    // nothing can change it or act on anything while the database is down);
    // while the outage is known, the database is not asked at all.
    let remembered = || ctx.known_users.recall(&user_id).map(Some).ok_or(());
    let user = if ctx.database.down_since().is_some() {
        remembered()?
    } else {
        match ctx.store.user_by_id(user_id).await {
            Ok(Some(user)) => {
                ctx.known_users.confirm(user_id, user.clone());
                Some(user)
            }
            Ok(None) => {
                ctx.known_users.forget(&user_id);
                None
            }
            Err(err) if err.is_unavailable() => remembered()?,
            Err(_) => return Err(()),
        }
    };
    let age = chrono::Utc::now().timestamp() - login_at;
    let valid = user.as_ref().filter(|u| {
        !u.disabled
            && Some(u.session_epoch) == epoch
            && age >= 0
            && (age as u64) <= ctx.settings.absolute_timeout.as_secs()
    });
    match valid {
        Some(u) => Ok(Some(CurrentUser {
            id: u.id,
            username: u.username.clone(),
            role: u.role,
        })),
        None => {
            session.flush().await.map_err(|_| ())?;
            Ok(None)
        }
    }
}

/// The person an identity-aware proxy names, when one is configured and the
/// request comes straight from one of the proxy's addresses (the header
/// from anywhere else is ignored). `None`: not a proxy sign-in.
async fn from_proxy(
    ctx: &AuthContext,
    peer: SocketAddr,
    headers: &axum::http::HeaderMap,
    client: &str,
) -> Option<Result<CurrentUser, Response>> {
    let proxy = ctx.settings.proxy.as_ref()?;
    if !proxy.addresses.trusts(peer.ip()) {
        return None;
    }
    let refuse =
        |status, title: &str, text: &str| Some(Err(crate::limits::refusal(status, title, text)));
    match proxy.asserted(headers) {
        Asserted::Nobody => None,
        Asserted::Invalid => refuse(
            StatusCode::BAD_REQUEST,
            "Unusable user name",
            "The identity proxy sent a user name Idem cannot use (empty, too long or with \
             control characters).",
        ),
        Asserted::NoRole { username } => {
            tracing::info!(%username, "identity proxy user has no role in Idem");
            refuse(
                StatusCode::FORBIDDEN,
                "No role in Idem",
                "You are signed in to the company, but none of your groups gives you a role in \
                 Idem. Ask an Idem administrator.",
            )
        }
        Asserted::User { username, role } => {
            if ctx.database.down_since().is_none() {
                match proxy::account(&ctx.store, &username, role, client).await {
                    Ok(user) => {
                        ctx.known_proxy_users.confirm(username, user.clone());
                        return Some(Ok(user));
                    }
                    Err(Refused::Disabled) => {
                        ctx.known_proxy_users.forget(&username);
                        return refuse(
                            StatusCode::FORBIDDEN,
                            "Account disabled",
                            "Your Idem account is disabled. Ask an Idem administrator.",
                        );
                    }
                    Err(Refused::Store(err)) if !err.is_unavailable() => {
                        let _ = idem_app::error::internal(&err);
                        return refuse(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "Sign-in failed",
                            "Idem could not look up your account; the cause is in its log.",
                        );
                    }
                    Err(Refused::Store(_)) => {}
                }
            }
            // The database is down: the account as last confirmed, if
            // recent, with no more than the role the groups give now.
            match ctx.known_proxy_users.recall(&username) {
                Some(user) => Some(Ok(CurrentUser {
                    role: user.role.min(role),
                    ..user
                })),
                None => refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Sign-in is temporarily unavailable",
                    "Idem cannot reach its database, where accounts are kept. Try again in a few \
                     seconds.",
                ),
            }
        }
    }
}

pub async fn guard(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    session: Session,
    mut req: Request,
    next: Next,
) -> Response {
    // The client as the trusted proxies say, worked out once per request.
    let client = ctx
        .settings
        .trusted_proxies
        .client(peer, req.headers())
        .to_string();
    let user = match from_proxy(&ctx, peer, req.headers(), &client).await {
        Some(Ok(user)) => Some(user),
        Some(Err(refusal)) => return refusal,
        None => match authenticate(&ctx, &session).await {
            Ok(user) => user,
            Err(()) => {
                // The store's own error was logged where it happened (sqlx,
                // tower-sessions); the outage itself by the database check.
                tracing::debug!("session or account lookup failed");
                return crate::limits::refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Sign-in is temporarily unavailable",
                    "Idem cannot reach its database, where sign-ins are kept. Pages come back by \
                     themselves when it answers again; try again in a few seconds.",
                );
            }
        },
    };
    if let Some(user) = &user {
        req.extensions_mut().insert(user.clone());
    }
    req.extensions_mut()
        .insert(idem_app::auth::ClientAddr(client.clone()));
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    if is_public(&method, &path) {
        return next.run(req).await;
    }

    let needed = if path.starts_with("/api/") {
        match role_for_api_path(&path) {
            Ok(None) => return next.run(req).await,
            Ok(Some(role)) => Some(role),
            // No rule covers this server function: refused, whoever asks.
            Err(()) => None,
        }
    } else {
        Some(idem_domain::Role::Viewer)
    };

    let Some(user) = user else {
        if !path.starts_with("/api/") && matches!(method, Method::GET | Method::HEAD) {
            let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
            let next = idem_app::links::safe_next(target);
            return Redirect::to(&idem_app::links::with_query("/login", &[("next", &next)]))
                .into_response();
        }
        return (StatusCode::UNAUTHORIZED, "Sign in first.\n").into_response();
    };
    match needed {
        Some(role) if user.role.includes(role) => next.run(req).await,
        _ => {
            let audited = ctx
                .store
                .append_audit(&NewAuditEntry {
                    actor: &user.username,
                    actor_role: user.role.as_str(),
                    action: "denied",
                    target: Some(&path),
                    result: "forbidden",
                    client_addr: Some(&client),
                    ..Default::default()
                })
                .await;
            if let Err(err) = audited {
                tracing::error!(error = %idem_app::ssr::cause_chain(&err), "could not audit a denied request");
            }
            let needed = needed.map_or("no role (nothing grants it)".to_owned(), |r| r.to_string());
            (
                StatusCode::FORBIDDEN,
                format!(
                    "Your role ({}) may not do this; it needs {needed}.\n",
                    user.role
                ),
            )
                .into_response()
        }
    }
}
