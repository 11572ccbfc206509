//! RP-initiated logout: where a person who signs out of Idem and of the
//! provider goes.

use tower_sessions::Session;

use super::{ID_TOKEN, provider};
use crate::auth::AuthContext;

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
