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
    AccessTokenHash, AuthenticationFlow, AuthorizationCode, CsrfToken, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RequestTokenError, Scope, TokenResponse,
    core::{CoreJwsSigningAlgorithm, CoreResponseType},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use super::{
    Discovered, Provider,
    account::{self, Refused},
    claims::{self, Claims},
    refusals::{Failure, answer},
};
use crate::auth::{AuthContext, EPOCH, LOGIN_AT, USER_ID};

/// Sign-ins started in this session and not yet come back.
const PENDING: &str = "oidc_pending";
/// The ID token of the sign-in, kept for RP-initiated logout's hint when
/// the provider has an end-session endpoint.
pub(crate) const ID_TOKEN: &str = "oidc_id_token";
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
}

#[derive(Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    next: String,
}

fn provider(ctx: &AuthContext) -> Option<&Provider> {
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

/// The error a provider sent back in the redirect.
fn provider_error(code: &str) -> Failure {
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
    // read it again rather than reuse what they read a moment ago.
    ctx.known_users.forget(&user.id);
    let hint = found.end_session.is_some().then(|| token.to_string());
    start_session(session, &user, hint)
        .await
        .map_err(|_| Failure::Unavailable)?;
    signed_in_audit(ctx, &user, client).await;
    Ok(())
}

const NO_KEY: &str = "it is signed with a key the provider does not publish";

/// Signatures only the provider's private keys make. An HMAC signed with
/// the client secret (`HS256`, which some providers list) would be a token
/// anyone holding Idem's own secret could make.
const SIGNED_BY_THE_PROVIDER: [CoreJwsSigningAlgorithm; 10] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EcdsaP521Sha512,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// The ID token's claims, if its signature, issuer, audience, expiry (within
/// the allowed clock skew), issue time and nonce check out.
fn verified(
    provider: &Provider,
    found: &Discovered,
    token: &openidconnect::IdToken<
        super::OtherClaims,
        openidconnect::core::CoreGenderClaim,
        openidconnect::core::CoreJweContentEncryptionAlgorithm,
        openidconnect::core::CoreJwsSigningAlgorithm,
    >,
    nonce: &Nonce,
) -> Result<Claims, Failure> {
    use openidconnect::{ClaimsVerificationError as E, SignatureVerificationError as S};
    let skew = chrono::Duration::from_std(provider.settings.clock_skew)
        .unwrap_or(chrono::Duration::seconds(60));
    let verifier = found
        .client
        .id_token_verifier()
        .set_allowed_algs(SIGNED_BY_THE_PROVIDER)
        .set_time_fn(move || Utc::now() - skew)
        .set_issue_time_verifier_fn(move |issued| {
            if issued > Utc::now() + skew {
                Err("issued in the future".into())
            } else {
                Ok(())
            }
        });
    token.claims(&verifier, nonce).cloned().map_err(|err| {
        Failure::TokenRejected(match err {
            E::SignatureVerification(S::NoMatchingKey) => NO_KEY,
            E::SignatureVerification(S::DisallowedAlg(_)) => {
                "it is not signed with one of the provider's own keys"
            }
            E::SignatureVerification(_) => "its signature is not the provider's",
            E::InvalidAudience(_) => "it was issued for another application (audience)",
            E::InvalidIssuer(_) => "it was issued by another provider (issuer)",
            // The issue-time check above answers as `Expired` too.
            E::Expired(_) => "it has expired, or was issued in the future",
            E::InvalidNonce(_) => "it belongs to another sign-in (nonce)",
            _ => "it is not valid",
        })
    })
}

/// When the ID token carries `at_hash`, the access token must match it.
fn check_access_token(
    found: &Discovered,
    token: &openidconnect::IdToken<
        super::OtherClaims,
        openidconnect::core::CoreGenderClaim,
        openidconnect::core::CoreJweContentEncryptionAlgorithm,
        openidconnect::core::CoreJwsSigningAlgorithm,
    >,
    claims: &Claims,
    access: &openidconnect::AccessToken,
) -> Result<(), Failure> {
    let Some(expected) = claims.access_token_hash() else {
        return Ok(());
    };
    let verifier = found
        .client
        .id_token_verifier()
        .set_allowed_algs(SIGNED_BY_THE_PROVIDER);
    let rejected = Failure::TokenRejected("its access token hash does not match");
    let alg = token.signing_alg().map_err(|_| rejected_again())?;
    let key = token.signing_key(&verifier).map_err(|_| rejected_again())?;
    let actual = AccessTokenHash::from_token(access, alg, key).map_err(|_| rejected_again())?;
    if actual == *expected {
        Ok(())
    } else {
        Err(rejected)
    }
}

fn rejected_again() -> Failure {
    Failure::TokenRejected("its access token hash does not match")
}

/// The token endpoint's refusal, as a person can act on it.
fn token_error<RE: std::error::Error + 'static>(
    err: RequestTokenError<
        RE,
        openidconnect::StandardErrorResponse<openidconnect::core::CoreErrorResponseType>,
    >,
) -> Failure {
    use openidconnect::core::CoreErrorResponseType as T;
    match err {
        RequestTokenError::ServerResponse(answer) => match answer.error() {
            T::InvalidClient | T::UnauthorizedClient => {
                tracing::error!(
                    "the OpenID provider refused Idem's client credentials (invalid_client)"
                );
                Failure::ClientRejected
            }
            T::InvalidGrant => Failure::CodeRejected,
            other => provider_error(other.as_ref()),
        },
        RequestTokenError::Request(err) => {
            tracing::warn!(error = %idem_app::ssr::cause_chain(&err), "OpenID token endpoint unreachable");
            Failure::Unreachable
        }
        RequestTokenError::Parse(..) | RequestTokenError::Other(_) => {
            Failure::ProviderSaid("an answer Idem could not read".into())
        }
    }
}

/// A fresh session id for the account, as password sign-in starts one.
async fn start_session(
    session: &Session,
    user: &idem_store::UserRecord,
    id_token: Option<String>,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    // Nothing of a session from before carries over (another person's ID
    // token, sign-ins still at the provider).
    session.clear().await;
    session.insert(USER_ID, user.id).await?;
    session.insert(EPOCH, user.session_epoch).await?;
    session.insert(LOGIN_AT, Utc::now().timestamp()).await?;
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

/// Where a person who signs out of Idem and of the provider goes
/// (RP-initiated logout), when the provider advertises an end-session
/// endpoint and the session came through it; `None` otherwise.
pub struct ProviderLogout {
    pub url: String,
    /// The endpoint is on the issuer's origin, which pages allow as a form
    /// target, so the sign-out form may be redirected there; otherwise the
    /// browser would block that redirect and a page links to it instead.
    pub redirect: bool,
    pub provider: String,
}

pub async fn provider_logout_url(ctx: &AuthContext, session: &Session) -> Option<ProviderLogout> {
    let provider = provider(ctx)?;
    let id_token: String = session.get(ID_TOKEN).await.ok().flatten()?;
    let found = provider.discovered(false).await.ok()?;
    let mut url = found.end_session.as_ref()?.url().clone();
    let redirect = url.origin() == provider.issuer.url().origin();
    url.query_pairs_mut()
        .append_pair("id_token_hint", &id_token)
        .append_pair("client_id", &provider.settings.client_id)
        .append_pair("post_logout_redirect_uri", &provider.after_logout);
    Some(ProviderLogout {
        url: url.into(),
        redirect,
        provider: provider.settings.name.clone(),
    })
}
