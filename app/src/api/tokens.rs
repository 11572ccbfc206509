//! `/tokens`: the API's tokens, for admins: listed (never their secrets)
//! and revoked here. A token is created by a plain form posting to
//! `/tokens/create` (the server's own route), which answers with a page
//! showing the secret once: a server function's answer to a plain form
//! would wait in the session, and a secret is not kept anywhere.

use idem_domain::action::ActionOutcome;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// One token as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRow {
    pub name: String,
    pub owner: String,
    /// `operator`, `viewer operator@payments`, …
    pub rights: String,
    /// `live`, `revoked` or `expired`.
    pub state: String,
    pub created_by: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Every token, and what the page's forms need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenList {
    pub clock: Clock,
    pub tokens: Vec<TokenRow>,
    /// A fresh id for the revoke forms.
    pub action_id: String,
}

/// Every token, live or not, by name (admins only).
#[server(prefix = "/api/admin", input = server_fn::codec::GetUrl)]
pub async fn list_tokens() -> Result<TokenList, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Admin)?;
        let state = crate::serving::state()?;
        let now = chrono::Utc::now();
        let tokens = state
            .store
            .tokens()
            .list()
            .await?
            .into_iter()
            .map(|t| TokenRow {
                state: match (t.revoked_at, t.is_live(now)) {
                    (Some(_), _) => "revoked",
                    (None, false) => "expired",
                    (None, true) => "live",
                }
                .to_owned(),
                rights: t.rights.to_string(),
                name: t.name,
                owner: t.owner,
                created_by: t.created_by,
                created_at: t.created_at,
                expires_at: t.expires_at,
                last_used_at: t.last_used_at,
            })
            .collect();
        Ok(TokenList {
            clock: crate::serving::clock(now),
            tokens,
            action_id: crate::serving::new_action_id(),
        })
    })
    .await
}

/// Revokes a live token (admins only): refused at its next request, on
/// every replica. Audited with the admin's name.
#[server(prefix = "/api/admin")]
pub async fn revoke_token(name: String, action_id: String) -> Result<ActionOutcome, AppError> {
    super::actions::ssr::act(&action_id, async {
        let admin = crate::serving::require(idem_domain::Role::Admin)?;
        let token = idem_domain::TokenName::parse(&name)
            .map_err(|e| AppError::BadRequest(e.to_string()))?;
        let client = crate::serving::client_addr();
        let state = crate::serving::state()?;
        let revoked = state
            .store
            .tokens()
            .revoke_token(&token, &admin.username, client.as_deref())
            .await?;
        Ok(match revoked {
            Some(audit_id) => ActionOutcome::Done {
                audit_id,
                outbox_id: None,
                summary: format!("Token “{name}” is revoked: it opens nothing from now on."),
            },
            None => ActionOutcome::Refused {
                reason: format!("No live token is named “{name}” (revoked or expired already?)."),
            },
        })
    })
    .await
}
