//! `POST /login` and `POST /logout`.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Form,
    extract::{ConnectInfo, State},
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
};
use idem_app::{auth::CurrentUser, links};
use idem_domain::{AccountOrigin, AuditAction, AuditResult, sign_in::Admission};
use idem_store::{NewAuditEntry, SignInResult, SignInSubject, StoreResult, Ts, UserRecord};
use serde::Deserialize;
use tower_sessions::Session;

use super::{
    AuthContext,
    device::{self, DeviceToken},
    password::{MAX_PASSWORD_BYTES, PasswordError},
};

/// What a name that is not one (empty, too long, control characters) is
/// counted under: every such attempt from an address shares one counter.
const INVALID_NAME: &str = "(invalid name)";

#[derive(Deserialize)]
pub struct LoginForm {
    username: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// Back to the sign-in form with `flag` (`failed`, `throttled`) in the
/// address and, for the page to trust, in a short-lived cookie of its own
/// (`idem_app::api::LOGIN_NOTE_COOKIE`): a link someone sends with
/// `?failed=1` shows nothing.
fn back_to_login(ctx: &AuthContext, next: &str, flag: &str) -> Response {
    let mut response = Redirect::to(&links::with_query(
        "/login",
        &[(flag, "1"), ("next", &links::safe_next(next))],
    ))
    .into_response();
    let secure = if ctx.settings.secure() {
        "; Secure"
    } else {
        ""
    };
    if let Ok(cookie) = axum::http::HeaderValue::from_str(&format!(
        "{}={flag}; Max-Age=60; Path=/login; HttpOnly; SameSite=Lax{secure}",
        idem_app::api::LOGIN_NOTE_COOKIE
    )) {
        response
            .headers_mut()
            .append(axum::http::header::SET_COOKIE, cookie);
    }
    response
}

fn unavailable(err: &(dyn std::error::Error + 'static)) -> Response {
    tracing::error!(error = %idem_app::error::cause_chain(err), "sign-in failed on the server");
    refused()
}

fn refused() -> Response {
    crate::refusal::refusal_to(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in is temporarily unavailable",
        "Idem cannot reach its database, where accounts are kept. Try again in a few seconds.",
        "/login",
    )
}

fn busy() -> Response {
    crate::refusal::refusal_to(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in is busy",
        "Many people are signing in at this moment, and each password takes a while to check. \
         Nothing was checked; try again in a few seconds.",
        "/login",
    )
}

/// Signs in. A wrong password, an unknown name and a disabled account get
/// the same answer and cost the same work. Too many failures for one name
/// from one address (or from one address over all names) are refused
/// without a check (see `idem_domain::sign_in`); the failure is reserved
/// before the password hash is computed, so parallel guesses cannot get
/// past the limit, and released when the password is right. A browser that
/// signed in to the name before (its device cookie) is counted on its own.
pub async fn login(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    if !ctx.settings.password_login {
        return password_login_off();
    }
    if ctx.database.down_since().is_some() {
        return refused();
    }
    let address = ctx.settings.trusted_proxies.client(peer, &headers);
    let client = address.to_string();
    // A name is text like a consumer name (bounded, no control characters)
    // and reads as what it is (no invisible or text-direction characters).
    let username = idem_domain::AccountName::parse(&form.username).ok();
    let account = username
        .as_ref()
        .map_or(INVALID_NAME, idem_domain::AccountName::as_str);
    let limits = &ctx.settings.sign_in;
    let device = DeviceToken::from_request(&ctx.settings, &headers);
    let known_device =
        match is_known_device(&ctx, device.as_ref(), username.as_ref().map(|u| u.as_str())).await {
            Ok(known) => known,
            Err(err) => return unavailable(&err),
        };
    let counted_as = match (&device, known_device) {
        (Some(device), true) => device.client(),
        _ => device::counted_as(address),
    };
    let subject = SignInSubject {
        account,
        client: &counted_as,
        known_good: known_device,
    };
    match ctx
        .store
        .people()
        .reserve_sign_in(limits, &subject, Ts::now())
        .await
    {
        Ok(Admission::Check { .. }) => {}
        Ok(Admission::Throttled { .. }) => return back_to_login(&ctx, &form.next, "throttled"),
        Err(err) => return unavailable(&err),
    }
    // From here a failure is reserved: it stands if the password is wrong,
    // and is released if it is right or was never checked.
    let verified = match check(&ctx, &subject, username.as_ref(), form.password).await {
        Ok(Some(verified)) => verified,
        Ok(None) => return back_to_login(&ctx, &form.next, "failed"),
        Err(answer) => return answer,
    };
    if let Err(err) = super::start_session(&session, &verified.user).await {
        release(&ctx, &subject).await;
        return unavailable(&err);
    }
    // This browser is known to this account from now on (a new token only
    // for a browser that has none).
    let device = device.unwrap_or_default();
    signed_in(&ctx, &subject, verified, &device, &client).await;
    let mut response = Redirect::to(&links::safe_next(&form.next)).into_response();
    response.headers_mut().append(
        axum::http::header::SET_COOKIE,
        device.set_cookie(&ctx.settings, limits.known_for),
    );
    response
}

fn password_login_off() -> Response {
    crate::refusal::refusal_to(
        axum::http::StatusCode::FORBIDDEN,
        "Password sign-in is off",
        "This Idem signs people in through the company's sign-in (its identity proxy or \
         provider), not with passwords. Open the sign-in page and use the company's sign-in.",
        "/login",
    )
}

/// Whether this browser signed in to `name` before (by its device cookie).
async fn is_known_device(
    ctx: &AuthContext,
    device: Option<&DeviceToken>,
    name: Option<&str>,
) -> StoreResult<bool> {
    match (device, name) {
        (Some(device), Some(name)) => {
            let limits = &ctx.settings.sign_in;
            ctx.store
                .people()
                .known_device(limits, name, &device.digest(), Ts::now())
                .await
        }
        _ => Ok(false),
    }
}

/// Releases a reserved failure: the password was right, or never checked.
async fn release(ctx: &AuthContext, subject: &SignInSubject<'_>) {
    let released = ctx
        .store
        .people()
        .settle_sign_in(subject, SignInResult::NotChecked, Ts::now())
        .await;
    if let Err(err) = released {
        tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not release a sign-in reservation");
    }
}

/// An enabled password account whose password was given.
struct Verified {
    user: UserRecord,
    /// The password as checked (to rehash it with).
    password: String,
    /// Its hash is due an upgrade.
    rehash: bool,
}

/// Checks `password` against the account named `username`, with the same
/// work whether or not there is one. `Ok(None)`: no such account, or a
/// wrong password; `Err`: the answer (the reservation released).
async fn check(
    ctx: &AuthContext,
    subject: &SignInSubject<'_>,
    username: Option<&idem_domain::AccountName>,
    password: String,
) -> Result<Option<Verified>, Response> {
    let user = match username {
        Some(name) => match ctx.store.people().user_by_name(name).await {
            Ok(user) => user.filter(|u| !u.disabled && u.origin == AccountOrigin::Password),
            Err(err) => {
                release(ctx, subject).await;
                return Err(unavailable(&err));
            }
        },
        None => None,
    };
    let password = if password.len() > MAX_PASSWORD_BYTES {
        String::new()
    } else {
        password
    };
    let verified = ctx
        .passwords
        .verify(
            password.clone(),
            user.as_ref().and_then(|u| u.password_hash.clone()),
        )
        .await;
    let (matches, rehash) = match verified {
        Ok(v) => v,
        Err(PasswordError::Busy) => {
            release(ctx, subject).await;
            return Err(busy());
        }
        Err(err) => {
            release(ctx, subject).await;
            return Err(unavailable(&err));
        }
    };
    Ok(user.filter(|_| matches).map(|user| Verified {
        user,
        password,
        rehash,
    }))
}

/// The sign-in succeeded: settled as such, the password's hash upgraded if
/// due, the browser remembered for the account, and audited.
async fn signed_in(
    ctx: &AuthContext,
    subject: &SignInSubject<'_>,
    verified: Verified,
    device: &DeviceToken,
    client: &str,
) {
    let Verified {
        user,
        password,
        rehash,
    } = verified;
    if let Err(err) = ctx
        .store
        .people()
        .settle_sign_in(subject, SignInResult::Succeeded, Ts::now())
        .await
    {
        tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not settle a successful sign-in");
    }
    if rehash && let Ok(hash) = ctx.passwords.hash(password).await {
        let _ = ctx
            .store
            .people()
            .upgrade_password_hash(user.id, &hash)
            .await;
    }
    if let Err(err) = ctx
        .store
        .people()
        .remember_device(&user.username, &device.digest(), Ts::now())
        .await
    {
        tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not remember the browser of a sign-in");
    }
    audit(
        ctx,
        &user.username,
        user.role.as_str(),
        AuditAction::Login,
        AuditResult::Ok,
        client,
    )
    .await;
}

/// Signs out: the session is destroyed on the server, not just forgotten by
/// the browser. With `provider=1` (the second button of a session that came
/// through an OpenID provider with an end-session endpoint) the browser goes
/// on to sign out there too, and the provider sends it back to `/login`.
pub async fn logout(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    user: Option<axum::Extension<CurrentUser>>,
    body: String,
) -> Response {
    let at_provider = url::form_urlencoded::parse(body.as_bytes())
        .any(|(name, value)| name == "provider" && value == "1");
    let provider_logout = if at_provider {
        super::oidc::provider_logout_url(&ctx, &session).await
    } else {
        None
    };
    // During an outage the entry cannot be written (the sign-out itself
    // still takes effect: see `DbSessionStore::delete`).
    if let Some(axum::Extension(user)) = user.filter(|_| ctx.database.down_since().is_none()) {
        let client = ctx
            .settings
            .trusted_proxies
            .client(peer, &headers)
            .to_string();
        audit(
            &ctx,
            &user.username,
            user.role.as_str(),
            AuditAction::Logout,
            AuditResult::Ok,
            &client,
        )
        .await;
    }
    if let Err(err) = session.flush().await {
        return unavailable(&err);
    }
    match provider_logout {
        None => Redirect::to("/login").into_response(),
        Some(out) if out.redirect => Redirect::to(&out.url).into_response(),
        Some(out) => crate::refusal::refusal_with_link(
            axum::http::StatusCode::OK,
            "Signed out of Idem",
            &format!(
                "You are signed out of Idem. To sign out of {} too, continue there.",
                out.provider
            ),
            &out.url,
            &format!("Sign out of {}", out.provider),
        ),
    }
}

async fn audit(
    ctx: &AuthContext,
    actor: &str,
    role: &str,
    action: AuditAction,
    result: AuditResult,
    client: &str,
) {
    let entry = NewAuditEntry {
        client_addr: Some(client),
        ..NewAuditEntry::new(actor, role, action, result)
    };
    if let Err(err) = ctx.store.audit().append_audit(&entry).await {
        tracing::error!(error = %idem_app::error::cause_chain(&err), %action, "could not write the audit entry");
    }
}
