//! Who calls the API: a token sent as `Authorization: Bearer <secret>`,
//! and nothing else. The API's routes sit outside the session layer, so a
//! session cookie opens nothing here (and a token opens no page: the guard
//! never reads `Authorization`). Every request reads the token's row and its
//! owner's account, in one statement, so a revocation or an expiry holds at
//! once on every replica.
//!
//! A token acts with what both it and its owner's account hold now
//! (`Rights::meet`): an owner demoted or disabled takes the token down too.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{StatusCode, header},
    middleware::Next,
    response::Response,
};
use idem_app::auth::{ClientAddr, CurrentUser, ViaToken};
use sha2::{Digest, Sha256};

use super::problem::Problem;
use crate::auth::AuthContext;

/// What a secret starts with: a token is recognisable in a leaked file.
pub const SECRET_PREFIX: &str = "idem_";

/// The token a request came with, for the Idempotency-Key records.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: i64,
}

/// A new secret: the prefix and 32 random bytes, URL-safe base64.
pub fn new_secret() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The SHA-256 of a secret, hex: all the database keeps of it.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The name the audit log gives a token's actions: its owner and itself.
pub fn actor_name(owner: &str, token: &str) -> String {
    format!("{owner} (token {token})")
}

fn unauthorized(detail: &str) -> Response {
    Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "Sign in", detail).answer()
}

/// Authenticates the API's requests; anything without a live token is 401.
pub async fn authenticate(
    State(ctx): State<Arc<AuthContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let client = ctx
        .settings
        .trusted_proxies
        .client(peer, req.headers())
        .to_string();
    let Some(secret) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|s| s.starts_with(SECRET_PREFIX))
    else {
        return unauthorized(
            "Send a token: Authorization: Bearer idem_… (an admin creates one with `idem token create`).",
        );
    };
    if ctx.database.down_since().is_some() {
        return Problem::from(&idem_app::error::AppError::Unavailable).answer();
    }
    let live = match ctx
        .store
        .tokens()
        .token_by_secret(&secret_hash(secret), idem_store::Ts::now())
        .await
    {
        Ok(Some(live)) => live,
        Ok(None) => {
            return unauthorized(
                "This token opens nothing: it is unknown, revoked or expired, or its owner's account is disabled.",
            );
        }
        Err(err) => return Problem::from(err).answer(),
    };
    let token = &live.token;
    let Some(rights) = token.rights.meet(&live.owner_rights) else {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Not allowed",
            format!(
                "This token's owner, {}, no longer holds any role it grants.",
                token.owner
            ),
        )
        .answer();
    };
    let user = CurrentUser {
        id: live.owner_id,
        username: actor_name(&token.owner, &token.name),
        role: rights.highest().unwrap_or(idem_domain::Role::Viewer),
        rights,
        via_token: Some(ViaToken {
            id: token.id,
            owner: token.owner.clone(),
            owner_rights: live.owner_rights.clone(),
        }),
        provider_sign_out: false,
        recheck_pending: false,
    };
    req.extensions_mut().insert(user);
    req.extensions_mut().insert(ClientAddr(client));
    req.extensions_mut().insert(Caller { token_id: token.id });
    next.run(req).await
}
