//! `POST /login` and `POST /logout`.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Form,
    extract::{ConnectInfo, State},
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
};
use chrono::{TimeDelta, Utc};
use idem_app::{auth::CurrentUser, links};
use idem_domain::ConsumerName;
use idem_store::{NewAuditEntry, Ts};
use serde::Deserialize;
use tower_sessions::Session;

use super::{AuthContext, EPOCH, LOGIN_AT, USER_ID, password::MAX_PASSWORD_BYTES};

/// Failed sign-ins allowed per account, and per client address, in the window.
const ACCOUNT_LIMIT: i64 = 5;
const ADDRESS_LIMIT: i64 = 20;
const WINDOW: TimeDelta = TimeDelta::minutes(15);

#[derive(Deserialize)]
pub struct LoginForm {
    username: String,
    password: String,
    #[serde(default)]
    next: String,
}

fn failed(next: &str) -> Response {
    Redirect::to(&links::with_query(
        "/login",
        &[("failed", "1"), ("next", &links::safe_next(next))],
    ))
    .into_response()
}

fn unavailable(err: &(dyn std::error::Error + 'static)) -> Response {
    tracing::error!(error = %idem_app::ssr::cause_chain(err), "sign-in failed on the server");
    refused()
}

fn refused() -> Response {
    crate::limits::refusal(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in is temporarily unavailable",
        "Idem cannot reach its database, where accounts are kept. Try again in a few seconds.",
    )
}

/// Signs in. Every failure — unknown name, wrong password, disabled account,
/// too many recent failures — gets the same answer and costs the same work.
pub async fn login(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    if !ctx.settings.password_login {
        return crate::limits::refusal(
            axum::http::StatusCode::FORBIDDEN,
            "Password sign-in is off",
            "This Idem signs people in through the company's identity proxy. Open it through \
             its usual address and sign in there.",
        );
    }
    if ctx.database.down_since().is_some() {
        return refused();
    }
    let client = ctx
        .settings
        .trusted_proxies
        .client(peer, &headers)
        .to_string();
    // A name is text like a consumer name: bounded, no control characters.
    let username = ConsumerName::parse(form.username.trim())
        .map(|n| n.to_string())
        .ok();
    let account = format!("account:{}", username.as_deref().unwrap_or("(invalid)"));
    let address = format!("address:{client}");
    let since = Ts::from(Utc::now() - WINDOW);

    let throttled = async {
        let by_account = ctx
            .store
            .login_failures_since(&account, since, ACCOUNT_LIMIT)
            .await?;
        let by_address = ctx
            .store
            .login_failures_since(&address, since, ADDRESS_LIMIT)
            .await?;
        Ok::<_, idem_store::StoreError>(by_account >= ACCOUNT_LIMIT || by_address >= ADDRESS_LIMIT)
    }
    .await;
    let throttled = match throttled {
        Ok(t) => t,
        Err(err) => return unavailable(&err),
    };
    let user = match &username {
        Some(name) => match ctx.store.user_by_name(name).await {
            Ok(user) => user.filter(|u| !u.disabled),
            Err(err) => return unavailable(&err),
        },
        None => None,
    };
    let password = if form.password.len() > MAX_PASSWORD_BYTES {
        String::new()
    } else {
        form.password
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
        Err(err) => return unavailable(&err),
    };

    let actor = username.clone().unwrap_or_else(|| "(invalid name)".into());
    match (user, matches && !throttled) {
        (Some(user), true) => {
            // A fresh id: whatever session existed before sign-in is gone.
            let started = async {
                session.cycle_id().await?;
                session.insert(USER_ID, user.id).await?;
                session.insert(EPOCH, user.session_epoch).await?;
                session.insert(LOGIN_AT, Utc::now().timestamp()).await?;
                Ok::<_, tower_sessions::session::Error>(())
            }
            .await;
            if let Err(err) = started {
                return unavailable(&err);
            }
            if rehash && let Ok(hash) = ctx.passwords.hash(password).await {
                let _ = ctx.store.upgrade_password_hash(user.id, &hash).await;
            }
            audit(
                &ctx,
                &user.username,
                user.role.as_str(),
                "login",
                "ok",
                &client,
            )
            .await;
            Redirect::to(&links::safe_next(&form.next)).into_response()
        }
        _ => {
            let result = if throttled { "throttled" } else { "failed" };
            if let Err(err) = ctx
                .store
                .record_login_failure(&[&account, &address], Ts::now())
                .await
            {
                return unavailable(&err);
            }
            audit(&ctx, &actor, "anonymous", "login", result, &client).await;
            failed(&form.next)
        }
    }
}

/// Signs out: the session is destroyed on the server, not just forgotten by the browser.
pub async fn logout(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    user: Option<axum::Extension<CurrentUser>>,
) -> Response {
    if let Some(axum::Extension(user)) = user {
        let client = ctx
            .settings
            .trusted_proxies
            .client(peer, &headers)
            .to_string();
        audit(
            &ctx,
            &user.username,
            user.role.as_str(),
            "logout",
            "ok",
            &client,
        )
        .await;
    }
    if let Err(err) = session.flush().await {
        return unavailable(&err);
    }
    Redirect::to("/login").into_response()
}

async fn audit(
    ctx: &AuthContext,
    actor: &str,
    role: &str,
    action: &str,
    result: &str,
    client: &str,
) {
    let entry = NewAuditEntry {
        actor,
        actor_role: role,
        action,
        result,
        client_addr: Some(client),
        ..Default::default()
    };
    if let Err(err) = ctx.store.append_audit(&entry).await {
        tracing::error!(error = %idem_app::ssr::cause_chain(&err), action, "could not write the audit entry");
    }
}
