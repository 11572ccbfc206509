//! `IDEM_OIDC_*`: sign-in with the company's identity provider, if configured.

use std::time::Duration;

use idem_domain::Role;

use super::{ConfigError, or_default, var};
use crate::auth::{oidc::OidcSettings, proxy::ProxyAuth};

fn invalid(name: &'static str, value: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        value: value.into(),
        reason: reason.into(),
    }
}

/// The provider's settings; `None` when `IDEM_OIDC_ISSUER` is unset.
pub(super) fn oidc() -> Result<Option<OidcSettings>, ConfigError> {
    let Some(issuer) = var("IDEM_OIDC_ISSUER") else {
        return Ok(None);
    };
    let issuer = issuer.trim().to_owned();
    check_issuer(&issuer)?;
    let client_id = var("IDEM_OIDC_CLIENT_ID").ok_or_else(|| {
        invalid(
            "IDEM_OIDC_ISSUER",
            issuer.clone(),
            "set IDEM_OIDC_CLIENT_ID too",
        )
    })?;
    let roles_text = var("IDEM_OIDC_ROLES").unwrap_or_default();
    let roles = ProxyAuth::parse_roles(&roles_text)
        .map_err(|reason| invalid("IDEM_OIDC_ROLES", roles_text.clone(), reason))?;
    let default_role = match var("IDEM_OIDC_DEFAULT_ROLE").as_deref().map(str::trim) {
        None => Some(Role::Viewer),
        Some("none") => None,
        Some(text) => Some(text.parse().map_err(|e: idem_domain::UnknownValue| {
            invalid("IDEM_OIDC_DEFAULT_ROLE", text, e.to_string())
        })?),
    };
    let scopes = var("IDEM_OIDC_SCOPES").unwrap_or_else(|| "openid email profile".into());
    let scopes = scopes
        .split([' ', ','])
        .map(str::trim)
        // `openid` is always asked for.
        .filter(|s| !s.is_empty() && *s != "openid")
        .map(str::to_owned)
        .collect();
    let claim = |name: &'static str, default: &str| {
        var(name).map_or_else(|| default.to_owned(), |v| v.trim().to_owned())
    };
    Ok(Some(OidcSettings {
        client_secret: client_secret()?,
        issuer,
        client_id: client_id.trim().to_owned(),
        scopes,
        name: claim("IDEM_OIDC_NAME", "your identity provider"),
        username_claim: claim("IDEM_OIDC_USERNAME_CLAIM", "email"),
        roles_claim: claim("IDEM_OIDC_ROLES_CLAIM", "groups"),
        roles,
        default_role,
        clock_skew: Duration::from_secs(or_default("IDEM_OIDC_CLOCK_SKEW_SECONDS", 60)?.min(300)),
        sign_in_ttl: crate::auth::oidc::SIGN_IN_TTL,
        recheck: match or_default("IDEM_OIDC_RECHECK_MINUTES", 60)? {
            0 => None,
            minutes => Some(Duration::from_secs(60 * minutes)),
        },
        recheck_grace: Duration::from_secs(60 * or_default("IDEM_OIDC_RECHECK_GRACE_MINUTES", 60)?),
    }))
}

/// Whoever can change the answers of an `http://` issuer can hand Idem
/// their own keys: https, except on this machine (a provider under test).
fn check_issuer(issuer: &str) -> Result<(), ConfigError> {
    match url::Url::parse(issuer) {
        Ok(url) if url.scheme() == "https" => Ok(()),
        Ok(url) if url.scheme() == "http" && is_loopback(&url) => Ok(()),
        _ => Err(invalid(
            "IDEM_OIDC_ISSUER",
            issuer,
            "not an https URL (http only for a provider on this machine)",
        )),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    }
}

/// `IDEM_OIDC_CLIENT_SECRET`, or the first line of `IDEM_OIDC_CLIENT_SECRET_FILE`
/// (a mounted secret); neither for a public client.
fn client_secret() -> Result<Option<String>, ConfigError> {
    if let Some(path) = var("IDEM_OIDC_CLIENT_SECRET_FILE") {
        let text = std::fs::read_to_string(path.trim())
            .map_err(|e| invalid("IDEM_OIDC_CLIENT_SECRET_FILE", path.clone(), e.to_string()))?;
        let secret = text.lines().next().unwrap_or_default().trim().to_owned();
        if secret.is_empty() {
            return Err(invalid(
                "IDEM_OIDC_CLIENT_SECRET_FILE",
                path,
                "the file is empty",
            ));
        }
        return Ok(Some(secret));
    }
    Ok(var("IDEM_OIDC_CLIENT_SECRET").map(|s| s.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_issuer_is_https_unless_it_runs_on_this_machine() {
        for ok in [
            "https://example.okta.com",
            "https://login.microsoftonline.com/7d1c/v2.0",
            "http://127.0.0.1:3951",
            "http://localhost:8080/realms/idem",
            "http://[::1]:9000",
        ] {
            assert!(super::check_issuer(ok).is_ok(), "{ok}");
        }
        for refused in [
            "http://keycloak.internal/realms/idem",
            "http://10.0.0.5",
            "ftp://example.com",
            "example.okta.com",
        ] {
            assert!(super::check_issuer(refused).is_err(), "{refused}");
        }
    }
}
