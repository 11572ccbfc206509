//! `GET /auth/oidc/start` and `GET /auth/oidc/callback`.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use chrono::Utc;
use idem_app::links;
use openidconnect::{
    AuthenticationFlow, AuthorizationCode, CsrfToken, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, Scope, TokenResponse,
    core::{CoreAuthPrompt, CoreResponseType},
};
use serde::Deserialize;
use tower_sessions::Session;

use super::{
    Provider,
    account::{self, Refused},
    claims,
    pending::{Pending, PendingSignIns},
    refusals::{Failure, answer, provider_error},
    token::{NO_KEY, check_access_token, token_error, verified},
};
use crate::auth::AuthContext;

/// The ID token of the sign-in, kept for RP-initiated logout's hint when
/// the provider has an end-session endpoint.
pub(crate) const ID_TOKEN: &str = "oidc_id_token";
/// When the provider last confirmed the session (its sign-in or recheck).
const CHECKED_AT: &str = "oidc_checked_at";
/// When a recheck last found the provider unreachable.
const RECHECK_FAILED_AT: &str = "oidc_recheck_failed_at";
/// While the provider is unreachable, how long pages go on before one is
/// sent through a recheck again.
const RECHECK_RETRY_SECONDS: i64 = 60;

#[derive(Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    next: String,
    /// `1`: a recheck of a session, not a sign-in.
    silent: Option<String>,
}

/// Where a session that came through the provider stands with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recheck {
    /// Not a provider session, or confirmed within `IDEM_OIDC_RECHECK_MINUTES`.
    NotDue,
    /// Due: a page goes to the provider (silently) first, and a request
    /// that changes anything is refused until it has.
    Due,
    /// Due, but the provider could not be reached and the grace
    /// (`IDEM_OIDC_RECHECK_GRACE_MINUTES`) has not run out: pages and
    /// actions go on with the claims last confirmed, and pages say so.
    /// `retry`: the last try was over a minute ago; a page tries again.
    Pending { retry: bool },
}

/// Where this session's person stands with the provider (see [`Recheck`]).
pub(crate) async fn recheck(ctx: &AuthContext, session: &Session) -> Recheck {
    let Some(settings) = provider(ctx).map(|p| &p.settings) else {
        return Recheck::NotDue;
    };
    let Some(every) = settings.recheck else {
        return Recheck::NotDue;
    };
    let Some(checked) = session.get::<i64>(CHECKED_AT).await.ok().flatten() else {
        return Recheck::NotDue;
    };
    let now = Utc::now().timestamp();
    let due_at = checked + every.as_secs() as i64;
    if now < due_at {
        return Recheck::NotDue;
    }
    let failed = session.get::<i64>(RECHECK_FAILED_AT).await.ok().flatten();
    let in_grace = now < due_at + settings.recheck_grace.as_secs() as i64;
    match failed.filter(|at| *at >= checked) {
        Some(at) if in_grace => Recheck::Pending {
            retry: now - at >= RECHECK_RETRY_SECONDS,
        },
        _ => Recheck::Due,
    }
}

/// Whether the provider's grace for this session's recheck still runs.
async fn within_grace(provider: &Provider, session: &Session) -> bool {
    let (Some(every), Some(checked)) = (
        provider.settings.recheck,
        session.get::<i64>(CHECKED_AT).await.ok().flatten(),
    ) else {
        return false;
    };
    let until = checked + (every + provider.settings.recheck_grace).as_secs() as i64;
    Utc::now().timestamp() < until
}

pub(super) fn provider(ctx: &AuthContext) -> Option<&Provider> {
    ctx.oidc.as_deref()
}

fn not_configured() -> Response {
    (
        StatusCode::NOT_FOUND,
        "Sign-in through OpenID Connect is not configured.\n",
    )
        .into_response()
}

fn client_of(ctx: &AuthContext, peer: SocketAddr, headers: &HeaderMap) -> String {
    ctx.settings
        .trusted_proxies
        .client(peer, headers)
        .to_string()
}

/// `response` with the browser's pending sign-ins rewritten to `pending`.
fn with_pending(ctx: &AuthContext, pending: &PendingSignIns, mut response: Response) -> Response {
    let ttl = provider(ctx).map_or(super::SIGN_IN_TTL, |p| p.settings.sign_in_ttl);
    if let Some(cookie) = pending.set_cookie(ctx.settings.secure(), ttl) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// Sends the browser to the provider, keeping `state`, `nonce` and the
/// PKCE verifier in the browser's own cookie (see [`super::pending`]). A
/// recheck (`silent=1`) that finds the provider unreachable within its
/// grace goes back to the page instead, marked pending.
pub async fn start(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Query(query): Query<StartQuery>,
) -> Response {
    let Some(provider) = provider(&ctx) else {
        return not_configured();
    };
    let next = links::safe_next(&query.next);
    let silent = query.silent.as_deref() == Some("1");
    let client = client_of(&ctx, peer, &headers);
    let discovered = match silent {
        true => provider.answers_now().await,
        false => provider.discovered(false).await,
    };
    let found = match discovered {
        Ok(found) => found,
        Err(err) => {
            tracing::warn!(error = %idem_app::error::cause_chain(&err), "OpenID provider unreachable");
            if silent && within_grace(provider, &session).await {
                return recheck_pending(&session, &next).await;
            }
            return answer(
                &ctx.store,
                &provider.settings.name,
                Failure::Unreachable,
                &client,
                &next,
            )
            .await;
        }
    };
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = found
        .client
        .authorize_url(
            AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .set_pkce_challenge(challenge);
    for scope in &provider.settings.scopes {
        request = request.add_scope(Scope::new(scope.clone()));
    }
    if silent {
        request = request.add_prompt(CoreAuthPrompt::None);
    }
    let (url, state, nonce) = request.url();
    let mut pending = PendingSignIns::from_request(&headers, ctx.settings.secure());
    pending.push(Pending {
        state: state.secret().clone(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
        next,
        started: Utc::now().timestamp(),
        silent,
    });
    with_pending(&ctx, &pending, Redirect::to(url.as_str()).into_response())
}

/// A recheck that could not reach the provider, within its grace: the
/// session notes when (pages say the recheck is pending, and try again a
/// minute later), and the browser goes back to its page.
async fn recheck_pending(session: &Session, next: &str) -> Response {
    // Only a signed-in session is written to: a visitor without one gets
    // no row for asking.
    if session
        .get::<i64>(CHECKED_AT)
        .await
        .ok()
        .flatten()
        .is_some()
        && session
            .insert(RECHECK_FAILED_AT, Utc::now().timestamp())
            .await
            .is_err()
    {
        return crate::refusal::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database. Try again in a few seconds.",
        );
    }
    tracing::info!("the OpenID provider is unreachable; a recheck waits, within its grace");
    Redirect::to(next).into_response()
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    /// Who answered (RFC 9207), from providers that say.
    iss: Option<String>,
}

/// Takes the started sign-in `state` names out of the browser's pending
/// sign-ins: each is used once, and only within `ttl`. A state this browser
/// never started is anyone's request (`started: false`: logged, not
/// audited); one it started that has expired is its own (audited).
fn take_pending(
    pending: &mut PendingSignIns,
    state: Option<&str>,
    ttl: std::time::Duration,
) -> Result<Pending, Failure> {
    let found = state
        .and_then(|state| pending.take(state))
        .ok_or(Failure::StaleState { started: false })?;
    let age = Utc::now().timestamp() - found.started;
    if age < 0 || age as u64 >= ttl.as_secs() {
        return Err(Failure::StaleState { started: true });
    }
    Ok(found)
}

/// The provider sent the browser back: check everything, then sign in.
/// Every answer rewrites the browser's pending sign-ins without this one.
pub async fn callback(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let Some(provider) = provider(&ctx) else {
        return not_configured();
    };
    let client = client_of(&ctx, peer, &headers);
    let name = provider.settings.name.clone();
    let ttl = provider.settings.sign_in_ttl;
    let mut pending = PendingSignIns::from_request(&headers, ctx.settings.secure());
    let taken = take_pending(&mut pending, query.state.as_deref(), ttl);
    let response = match taken {
        Ok(started) => finish(&ctx, provider, &session, started, query, &client).await,
        Err(failure) => answer(&ctx.store, &name, failure, &client, "/").await,
    };
    with_pending(&ctx, &pending, response)
}

/// A callback for a sign-in this browser started: the provider's error, or
/// its code exchanged and checked.
async fn finish(
    ctx: &AuthContext,
    provider: &Provider,
    session: &Session,
    pending: Pending,
    query: CallbackQuery,
    client: &str,
) -> Response {
    let next = pending.next.clone();
    if pending.silent
        && let Some(error) = query.error.as_deref().filter(|e| needs_the_person(e))
    {
        return signed_out_by_the_provider(session, &next, error).await;
    }
    let signed_in = match (query.error, query.code) {
        // A mix-up: another provider answered a sign-in started here.
        _ if query
            .iss
            .as_deref()
            .is_some_and(|iss| iss != provider.issuer.as_str()) =>
        {
            Err(Failure::TokenRejected(
                "the answer came from another provider (iss)",
            ))
        }
        (Some(error), _) => Err(provider_error(&error)),
        (None, None) => Err(Failure::ProviderSaid("no code".into())),
        (None, Some(code)) => sign_in(ctx, provider, session, pending, code, client).await,
    };
    match signed_in {
        Ok(()) => Redirect::to(&next).into_response(),
        Err(failure) => answer(&ctx.store, &provider.settings.name, failure, client, &next).await,
    }
}

/// The answers of a recheck that mean "the person must sign in again":
/// the provider wants to ask them something, or no longer lets them in
/// (`access_denied`: what Okta answers for a person unassigned from the
/// application).
fn needs_the_person(error: &str) -> bool {
    matches!(
        error,
        "login_required"
            | "interaction_required"
            | "consent_required"
            | "account_selection_required"
            | "access_denied"
    )
}

/// A recheck found the person no longer signed in at the provider (or it
/// wants to ask them something): Idem's session ends too, and the sign-in
/// page leads back to the page they were on.
async fn signed_out_by_the_provider(session: &Session, next: &str, error: &str) -> Response {
    tracing::info!(
        error,
        "the OpenID provider no longer vouches for a session; it ends"
    );
    if session.flush().await.is_err() {
        return crate::refusal::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database. Try again in a few seconds.",
        );
    }
    Redirect::to(&links::with_query("/login", &[("next", next)])).into_response()
}

/// Exchanges the code, checks the ID token and starts Idem's session.
async fn sign_in(
    ctx: &AuthContext,
    provider: &Provider,
    session: &Session,
    pending: Pending,
    code: String,
    client: &str,
) -> Result<(), Failure> {
    let found = provider.discovered(false).await.map_err(|err| {
        tracing::warn!(error = %idem_app::error::cause_chain(&err), "OpenID provider unreachable");
        Failure::Unreachable
    })?;
    let answer = found
        .client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|_| Failure::Unreachable)?
        .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
        .request_async(&provider.http)
        .await
        .map_err(token_error)?;
    let token = answer
        .id_token()
        .ok_or(Failure::TokenRejected("it sent no ID token"))?;
    let nonce = Nonce::new(pending.nonce);
    let (claims, found) = match verified(provider, &found, token, &nonce) {
        // The provider may have rotated its keys since discovery.
        Err(Failure::TokenRejected(NO_KEY)) => {
            let fresh = provider
                .discovered(true)
                .await
                .map_err(|_| Failure::Unreachable)?;
            (verified(provider, &fresh, token, &nonce)?, fresh)
        }
        other => (other?, found),
    };
    check_access_token(&found, token, &claims, answer.access_token())?;
    let settings = &provider.settings;
    let username = claims::username(settings, &claims).ok_or(Failure::NoName)?;
    let subject = claims::subject(&claims);
    let Some(rights) = claims::rights(settings, &claims) else {
        let ended = account::no_role(&ctx.store, &username, &subject)
            .await
            .map_err(|_| Failure::Unavailable)?;
        // This replica's pages must not serve the account as it was.
        if let Some(id) = ended {
            ctx.known_users.forget(&id);
        }
        return Err(Failure::NoRole(username.into()));
    };
    let user = account::account(&ctx.store, &username, &subject, rights, client)
        .await
        .map_err(|refused| match refused {
            Refused::Store(err) => {
                tracing::error!(error = %idem_app::error::cause_chain(&err), "OpenID Connect sign-in could not reach the database");
                Failure::Unavailable
            }
            refused => Failure::Account(username.to_string(), refused),
        })?;
    // Its role (and epoch) may have changed just now: this replica's pages
    // read it again, so the person's other sessions end at once here, not
    // within `REUSE_FOR_READS` (the guard already re-reads an account copy
    // older than the session it judges, so the new session stands anyway).
    ctx.known_users.forget(&user.id);
    let hint = found.end_session.is_some().then(|| token.to_string());
    start_session(session, &user, hint)
        .await
        .map_err(|_| Failure::Unavailable)?;
    signed_in_audit(ctx, &user, client).await;
    Ok(())
}

/// The session of a person the provider signed in: as every sign-in
/// starts one, and when the provider confirmed them (and their ID token,
/// for signing out there).
async fn start_session(
    session: &Session,
    user: &idem_store::UserRecord,
    id_token: Option<String>,
) -> Result<(), tower_sessions::session::Error> {
    crate::auth::start_session(session, user).await?;
    session.insert(CHECKED_AT, Utc::now().timestamp()).await?;
    if let Some(token) = id_token {
        session.insert(ID_TOKEN, token).await?;
    }
    Ok(())
}

async fn signed_in_audit(ctx: &AuthContext, user: &idem_store::UserRecord, client: &str) {
    let entry = idem_store::NewAuditEntry {
        target: Some("OpenID Connect"),
        client_addr: Some(client),
        ..idem_store::NewAuditEntry::new(
            &user.username,
            user.role.as_str(),
            idem_domain::AuditAction::Login,
            idem_domain::AuditResult::Ok,
        )
    };
    if let Err(err) = ctx.store.audit().append_audit(&entry).await {
        tracing::error!(error = %idem_app::error::cause_chain(&err), "could not audit a sign-in");
    }
}
