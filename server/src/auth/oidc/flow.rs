//! `GET /auth/oidc/start` and `GET /auth/oidc/callback`.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use chrono::Utc;
use idem_app::links;
use openidconnect::{
    AuthenticationFlow, AuthorizationCode, CsrfToken, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, Scope, TokenResponse,
    core::{CoreAuthPrompt, CoreResponseType},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use super::{
    Provider,
    account::{self, Refused},
    claims,
    refusals::{Failure, answer},
    token::{NO_KEY, check_access_token, token_error, verified},
};
use crate::auth::AuthContext;

/// Sign-ins started in this session and not yet come back.
const PENDING: &str = "oidc_pending";
/// The ID token of the sign-in, kept for RP-initiated logout's hint when
/// the provider has an end-session endpoint.
pub(crate) const ID_TOKEN: &str = "oidc_id_token";
/// When the provider last confirmed the session (its sign-in or recheck).
const CHECKED_AT: &str = "oidc_checked_at";
/// At most this many sign-ins wait at once per browser (several tabs).
const MAX_PENDING: usize = 4;

/// One started sign-in: what must come back, and where to go after.
#[derive(Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    next: String,
    started: i64,
    /// A recheck (`prompt=none`): the provider answers without asking.
    #[serde(default)]
    silent: bool,
}

#[derive(Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    next: String,
    /// `1`: a recheck of a session, not a sign-in.
    silent: Option<String>,
}

/// Whether this session's person is due to be asked about again: it came
/// through the provider, and the provider last confirmed it longer ago
/// than `IDEM_OIDC_RECHECK_MINUTES`.
pub async fn recheck_due(ctx: &AuthContext, session: &Session) -> bool {
    let Some(every) = provider(ctx).and_then(|p| p.settings.recheck) else {
        return false;
    };
    match session.get::<i64>(CHECKED_AT).await.ok().flatten() {
        Some(at) => Utc::now().timestamp() - at >= every.as_secs() as i64,
        None => false,
    }
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

/// Sends the browser to the provider, remembering `state`, `nonce` and the
/// PKCE verifier in the session.
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
    let found = match provider.discovered(false).await {
        Ok(found) => found,
        Err(err) => {
            tracing::warn!(error = %idem_app::ssr::cause_chain(&err), "OpenID provider unreachable");
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
    let mut pending: Vec<Pending> = session
        .get(PENDING)
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    pending.push(Pending {
        state: state.secret().clone(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
        next,
        started: Utc::now().timestamp(),
        silent,
    });
    let keep_from = pending.len().saturating_sub(MAX_PENDING);
    pending.drain(..keep_from);
    if session.insert(PENDING, pending).await.is_err() {
        return answer(
            &ctx.store,
            &provider.settings.name,
            Failure::Unavailable,
            &client,
            "/",
        )
        .await;
    }
    Redirect::to(url.as_str()).into_response()
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    /// Who answered (RFC 9207), from providers that say.
    iss: Option<String>,
}

/// Takes the started sign-in `state` names out of the session: each is
/// used once, and only within `ttl`.
async fn take_pending(
    session: &Session,
    state: Option<&str>,
    ttl: std::time::Duration,
) -> Result<Pending, Failure> {
    let mut pending: Vec<Pending> = session
        .get(PENDING)
        .await
        .map_err(|_| Failure::Unavailable)?
        .unwrap_or_default();
    // Whether this browser has a sign-in under way at all (then a stale
    // state is a person's, worth an audit row; else anyone's request).
    let started = !pending.is_empty();
    let state = state.ok_or(Failure::StaleState { started })?;
    let index = pending
        .iter()
        .position(|p| constant_time_eq(p.state.as_bytes(), state.as_bytes()))
        .ok_or(Failure::StaleState { started })?;
    let found = pending.remove(index);
    session
        .insert(PENDING, pending)
        .await
        .map_err(|_| Failure::Unavailable)?;
    // Saved now, so a second request with the same state finds nothing
    // even while this one is still at the provider's token endpoint.
    session.save().await.map_err(|_| Failure::Unavailable)?;
    let age = Utc::now().timestamp() - found.started;
    if age < 0 || age as u64 >= ttl.as_secs() {
        return Err(Failure::StaleState { started: true });
    }
    Ok(found)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The provider sent the browser back: check everything, then sign in.
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
    let pending = match take_pending(&session, query.state.as_deref(), ttl).await {
        Ok(pending) => pending,
        Err(failure) => return answer(&ctx.store, &name, failure, &client, "/").await,
    };
    let next = pending.next.clone();
    if pending.silent
        && let Some(error) = query.error.as_deref().filter(|e| needs_the_person(e))
    {
        return signed_out_by_the_provider(&session, &next, error).await;
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
        (None, Some(code)) => sign_in(&ctx, provider, &session, pending, code, &client).await,
    };
    match signed_in {
        Ok(()) => Redirect::to(&next).into_response(),
        Err(failure) => answer(&ctx.store, &name, failure, &client, &next).await,
    }
}

/// The answers of a recheck that mean "the person must sign in again".
fn needs_the_person(error: &str) -> bool {
    matches!(
        error,
        "login_required"
            | "interaction_required"
            | "consent_required"
            | "account_selection_required"
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
        return crate::limits::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database. Try again in a few seconds.",
        );
    }
    Redirect::to(&links::with_query("/login", &[("next", next)])).into_response()
}

/// The error a provider sent back in the redirect.
pub(super) fn provider_error(code: &str) -> Failure {
    if code == "access_denied" {
        return Failure::Denied;
    }
    // Shown on a page: only the characters an error code has.
    let code: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    Failure::ProviderSaid(code)
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
        tracing::warn!(error = %idem_app::ssr::cause_chain(&err), "OpenID provider unreachable");
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
    let Some(role) = claims::role(settings, &claims) else {
        let ended = account::no_role(&ctx.store, &username, &subject)
            .await
            .map_err(|_| Failure::Unavailable)?;
        // This replica's pages must not serve the account as it was.
        if let Some(id) = ended {
            ctx.known_users.forget(&id);
        }
        return Err(Failure::NoRole(username));
    };
    let user = account::account(&ctx.store, &username, &subject, role, client)
        .await
        .map_err(|refused| match refused {
            Refused::Store(err) => {
                tracing::error!(error = %idem_app::ssr::cause_chain(&err), "OpenID Connect sign-in could not reach the database");
                Failure::Unavailable
            }
            refused => Failure::Account(username.clone(), refused),
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
        actor: &user.username,
        actor_role: user.role.as_str(),
        action: "login",
        target: Some("OpenID Connect"),
        result: "ok",
        client_addr: Some(client),
        ..Default::default()
    };
    if let Err(err) = ctx.store.append_audit(&entry).await {
        tracing::error!(error = %idem_app::ssr::cause_chain(&err), "could not audit a sign-in");
    }
}
