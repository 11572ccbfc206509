//! Authenticates every request and refuses by default.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use idem_app::auth::{CurrentUser, role_for_api_path};
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
        || (matches!(path, "/auth/oidc/start" | "/auth/oidc/callback")
            && matches!(*method, Method::GET | Method::HEAD))
        || path.starts_with("/pkg/")
}

/// Where the guard's answer about a person came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The database answered just now (for a request that only reads:
    /// within [`super::REUSE_FOR_READS`]).
    Database,
    /// The database is known to be down (the health check declared an
    /// outage): the account as last confirmed, for reading pages only.
    Remembered,
}

/// The session's user, if the session is valid: the user exists, is enabled,
/// has not changed standing since sign-in, and the session is younger than
/// the absolute timeout. An invalid session is destroyed. A request that
/// only reads may take the session and the user as this replica read them
/// within [`super::REUSE_FOR_READS`].
///
/// Memory stands in for the database only while the health check has
/// declared an outage. A database that is merely slow (a busy pool, a
/// statement timeout) is asked and its failure is a 503: a person demoted a
/// moment ago is never served from what was true before.
async fn authenticate(
    ctx: &AuthContext,
    session: &Session,
) -> Result<Option<(CurrentUser, Source)>, ()> {
    let Some(user_id) = session.get::<i64>(USER_ID).await.map_err(|_| ())? else {
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH).await.map_err(|_| ())?;
    let login_at = session
        .get::<i64>(LOGIN_AT)
        .await
        .map_err(|_| ())?
        .unwrap_or(0);
    let (user, source) = if ctx.database.down_since().is_some() {
        let remembered = ctx.known_users.recall(&user_id).ok_or(())?;
        (Some(remembered), Source::Remembered)
    } else if let Some(user) = super::reading()
        .then(|| {
            ctx.known_users
                .recall_within(&user_id, super::REUSE_FOR_READS)
        })
        .flatten()
        // A copy older than the session (it was signed in after a change
        // this replica has not read) cannot judge it: ask the database.
        .filter(|u| epoch.is_none_or(|e| u.session_epoch >= e))
    {
        (Some(user), Source::Database)
    } else {
        match ctx.store.people().user_by_id(user_id).await {
            Ok(Some(user)) => {
                ctx.known_users.confirm(user_id, user.clone());
                (Some(user), Source::Database)
            }
            Ok(None) => {
                ctx.known_users.forget(&user_id);
                (None, Source::Database)
            }
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
    let provider_sign_out = session
        .get::<String>(super::oidc::ID_TOKEN)
        .await
        .ok()
        .flatten()
        .is_some();
    match valid {
        Some(u) => Ok(Some((
            CurrentUser {
                id: u.id,
                username: u.username.clone(),
                role: u.role,
                rights: u.rights.clone(),
                via_token: None,
                provider_sign_out,
                recheck_pending: false,
            },
            source,
        ))),
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
) -> Option<Result<(CurrentUser, Source), Response>> {
    let proxy = ctx.settings.proxy.as_ref()?;
    if !proxy.addresses.trusts(peer.ip()) {
        return None;
    }
    match proxy.asserted(headers) {
        Asserted::Nobody => None,
        Asserted::Invalid(why) => refuse(StatusCode::BAD_REQUEST, "Unusable sign-in", why),
        Asserted::NoRole { username } => {
            tracing::info!(%username, "identity proxy user has no role in Idem");
            refuse(
                StatusCode::FORBIDDEN,
                "No role in Idem",
                "You are signed in to the company, but none of your groups gives you a role in \
                 Idem. Ask an Idem administrator.",
            )
        }
        Asserted::User { username, rights } => {
            if ctx.database.down_since().is_some() {
                return remembered_proxy_user(ctx, username.into(), &rights);
            }
            proxy_user(ctx, username, rights, client).await
        }
    }
}

/// A refusal, as [`from_proxy`] answers it.
fn refuse<T>(status: StatusCode, title: &str, text: &str) -> Option<Result<T, Response>> {
    Some(Err(crate::refusal::refusal(status, title, text)))
}

/// The database is down: the account as last confirmed, if recent, with no
/// more than the role the groups give now.
fn remembered_proxy_user(
    ctx: &AuthContext,
    username: String,
    rights: &idem_domain::Rights,
) -> Option<Result<(CurrentUser, Source), Response>> {
    match ctx.known_proxy_users.recall(&username) {
        Some(user) if user.rights == *rights => Some(Ok((user, Source::Remembered))),
        // Unlimited before and now: no more than the role the groups give now.
        Some(user) if !user.rights.is_limited() && !rights.is_limited() => {
            let role = user.role.min(rights.highest().unwrap_or(user.role));
            Some(Ok((
                CurrentUser {
                    role,
                    rights: idem_domain::Rights::everywhere(role),
                    ..user
                },
                Source::Remembered,
            )))
        }
        // Their teams changed since: nothing is assumed.
        Some(_) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Your groups changed and Idem cannot reach its database to record it. Try again \
             in a few seconds.",
        ),
        None => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database, where accounts are kept. Try again in a \
             few seconds.",
        ),
    }
}

/// The proxy's user's account, as the database has it (created on first sight).
async fn proxy_user(
    ctx: &AuthContext,
    username: idem_domain::AccountName,
    rights: idem_domain::Rights,
    client: &str,
) -> Option<Result<(CurrentUser, Source), Response>> {
    match proxy::account(&ctx.store, &username, rights, client).await {
        Ok(user) => {
            ctx.known_proxy_users
                .confirm(username.to_string(), user.clone());
            Some(Ok((user, Source::Database)))
        }
        Err(Refused::Disabled) => {
            ctx.known_proxy_users.forget(&username.to_string());
            refuse(
                StatusCode::FORBIDDEN,
                "Account disabled",
                "Your Idem account is disabled. Ask an Idem administrator.",
            )
        }
        Err(Refused::PasswordAccount) => {
            tracing::warn!(%username, "identity proxy named a password account; refused");
            count_refusal(
                ctx,
                username.as_str(),
                "identity-proxy",
                "a password account has this name",
                "identity-proxy sign-in",
                client,
            )
            .await;
            refuse(
                StatusCode::FORBIDDEN,
                "This name belongs to another account",
                "Idem has a password account with the name your company sign-in gives \
                 you, and the two are never merged. Ask an Idem administrator to rename \
                 or remove the password account.",
            )
        }
        Err(Refused::Store(err)) if !err.is_unavailable() => {
            let _ = idem_app::error::internal(&err);
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Sign-in failed",
                "Idem could not look up your account; the cause is in its log.",
            )
        }
        Err(Refused::Store(_)) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Idem is busy",
            "Idem's database did not answer in time. Try again in a few seconds.",
        ),
    }
}

/// Counts a refusal towards its aggregated audit row (see
/// `idem_store::Refusal`); a failure to count it is logged, not answered.
async fn count_refusal(
    ctx: &AuthContext,
    actor: &str,
    role: &str,
    reason: &str,
    target: &str,
    client: &str,
) {
    let refusal = idem_store::Refusal {
        actor,
        actor_role: role,
        reason,
        target,
        client_addr: Some(client),
    };
    if let Err(err) = ctx
        .store
        .people()
        .count_refusal(&refusal, idem_store::Ts::now())
        .await
    {
        tracing::error!(error = %idem_app::error::cause_chain(&err), "could not count a refused request");
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
    let back = crate::refusal::back_link(req.method(), req.headers());
    let signed_in = match from_proxy(&ctx, peer, req.headers(), &client).await {
        Some(Ok(user)) => Some(user),
        Some(Err(refusal)) => return refusal,
        None if matches!(*req.method(), Method::GET | Method::HEAD) => {
            match super::while_reading(authenticate(&ctx, &session)).await {
                Ok(user) => user,
                Err(()) => return lookup_failed(&ctx, &back),
            }
        }
        None => match authenticate(&ctx, &session).await {
            Ok(user) => user,
            Err(()) => return lookup_failed(&ctx, &back),
        },
    };
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    // Changing anything needs the database's current word on who is asking
    // and their role; what was remembered for an outage only reads pages.
    if let Some((_, Source::Remembered)) = &signed_in
        && !matches!(method, Method::GET | Method::HEAD)
        && !is_public(&method, &path)
    {
        return crate::refusal::refusal_to(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not while the database is down",
            "Idem cannot reach its database, so it cannot check your role now. Nothing was \
             done; try again when the outage banner is gone.",
            &back,
        );
    }
    let user = signed_in.map(|(user, _)| user);
    if let Some(user) = &user {
        req.extensions_mut().insert(user.clone());
    }
    req.extensions_mut()
        .insert(idem_app::auth::ClientAddr(client.clone()));
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
        return sign_in_first(&ctx, &req, &method, &path);
    };
    let target = req
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    match recheck(&ctx, &session, &method, &target, &back).await {
        Ok(false) => {}
        Ok(true) => {
            if let Some(user) = req.extensions_mut().get_mut::<CurrentUser>() {
                user.recheck_pending = true;
            }
        }
        Err(answer) => return answer,
    }
    match needed {
        Some(role) if user.role.includes(role) => next.run(req).await,
        _ => forbidden(&ctx, &user, &path, &client, needed).await,
    }
}

/// The session or account could not be looked up: 503. The store's own
/// error was logged where it happened (sqlx, tower-sessions); an outage by
/// the database check.
fn lookup_failed(ctx: &AuthContext, back: &str) -> Response {
    tracing::debug!("session or account lookup failed");
    let (title, text) = if ctx.database.down_since().is_some() {
        (
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database, where sign-ins are kept. Pages come \
             back by themselves when it answers again; try again in a few seconds.",
        )
    } else {
        (
            "Idem is busy",
            "Idem's database did not answer in time, so it could not check who you \
             are. Nothing was done; try again in a few seconds.",
        )
    };
    crate::refusal::refusal_to(StatusCode::SERVICE_UNAVAILABLE, title, text, back)
}

/// Nobody is signed in: a page goes to the sign-in form (and back after
/// it), anything else is answered 401. Where the OpenID provider is the
/// only way in, a page goes straight to it: an alert link is one click on
/// the company's sign-in away from its page.
fn sign_in_first(ctx: &AuthContext, req: &Request, method: &Method, path: &str) -> Response {
    if !path.starts_with("/api/") && matches!(*method, Method::GET | Method::HEAD) {
        let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let next = idem_app::links::safe_next(target);
        let only_oidc =
            ctx.oidc.is_some() && !ctx.settings.password_login && ctx.settings.proxy.is_none();
        let sign_in = if only_oidc {
            "/auth/oidc/start"
        } else {
            "/login"
        };
        return Redirect::to(&idem_app::links::with_query(sign_in, &[("next", &next)]))
            .into_response();
    }
    (StatusCode::UNAUTHORIZED, "Sign in first.\n").into_response()
}

/// A request from a person the OpenID provider signed in, whose session is
/// due a recheck: a page goes to the provider and back without a prompt
/// (their role follows the claims again; a session the provider ended
/// ends); a request that changes anything is refused with "sign in again",
/// never carried out on claims nobody confirmed; a read of a server
/// function passes. While the provider cannot be reached, within the
/// grace, everything goes on: `Ok(true)`, and the page says so.
async fn recheck(
    ctx: &AuthContext,
    session: &Session,
    method: &Method,
    target: &str,
    back: &str,
) -> Result<bool, Response> {
    use super::oidc::Recheck;
    let reads = matches!(*method, Method::GET | Method::HEAD);
    let page = reads && !target.starts_with("/api/");
    let state = super::oidc::recheck(ctx, session).await;
    let to_provider = |silent: bool, next: &str| {
        let next = idem_app::links::safe_next(next);
        let mut pairs = vec![("next", next.as_str())];
        if silent {
            pairs.push(("silent", "1"));
        }
        idem_app::links::with_query("/auth/oidc/start", &pairs)
    };
    match state {
        Recheck::NotDue => Ok(false),
        Recheck::Pending { retry: true } if page => {
            Err(Redirect::to(&to_provider(true, target)).into_response())
        }
        Recheck::Pending { .. } => Ok(true),
        Recheck::Due if page => Err(Redirect::to(&to_provider(true, target)).into_response()),
        Recheck::Due if reads => Ok(false),
        Recheck::Due => {
            let name = ctx
                .oidc
                .as_ref()
                .map_or("your identity provider", |p| p.settings.name.as_str());
            let back = if back.is_empty() { "/" } else { back };
            Err(crate::refusal::refusal_with_link(
                StatusCode::UNAUTHORIZED,
                "Sign in again",
                &format!(
                    "It is time to confirm your sign-in with {name}, and Idem does not act on a \
                     sign-in it has not confirmed. Nothing was done. Sign in again, then act \
                     again."
                ),
                &to_provider(false, back),
                "Sign in again",
            ))
        }
    }
}

/// The user's role does not include the `needed` one (`None`: nothing
/// grants it): counted for the audit log (one row per person, reason and
/// window), and answered 403.
async fn forbidden(
    ctx: &AuthContext,
    user: &CurrentUser,
    path: &str,
    client: &str,
    needed: Option<idem_domain::Role>,
) -> Response {
    let needed = needed.map_or("no role (nothing grants it)".to_owned(), |r| r.to_string());
    let reason = format!("forbidden: needs {needed}");
    count_refusal(
        ctx,
        &user.username,
        user.role.as_str(),
        &reason,
        path,
        client,
    )
    .await;
    (
        StatusCode::FORBIDDEN,
        format!(
            "Your role ({}) may not do this; it needs {needed}.\n",
            user.role
        ),
    )
        .into_response()
}
