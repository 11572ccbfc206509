//! What an ID token's claims say about a person: their name in Idem and
//! their role.

use idem_domain::Rights;
use openidconnect::{AdditionalClaims, IdTokenClaims, core::CoreGenderClaim};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::OidcSettings;

/// The claims beyond the standard ones (`groups`, `roles`, a custom one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherClaims {
    #[serde(flatten)]
    pub claims: serde_json::Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

pub type Claims = IdTokenClaims<OtherClaims, CoreGenderClaim>;

/// The rights the claims map to (each mapped group's together); `None`
/// when nothing grants one.
pub fn rights(settings: &OidcSettings, claims: &Claims) -> Option<Rights> {
    let groups = values(claims.additional_claims().claims.get(&settings.roles_claim));
    crate::auth::proxy::ProxyAuth::rights_of(
        &settings.roles,
        settings.default_role,
        groups.iter().map(String::as_str),
    )
}

/// A claim's values: an array of strings, one string, or a
/// space- or comma-separated string (as some providers send roles).
fn values(claim: Option<&Value>) -> Vec<String> {
    match claim {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(text)) => text
            .split([',', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The account name: the configured claim (`email`, `preferred_username`,
/// `sub` or any other that holds a string). `None` when the token does not
/// carry it or it is not a usable name, and for an email the provider does
/// not say it verified (where people type their own address, the first to
/// claim someone else's would take their name).
pub fn username(settings: &OidcSettings, claims: &Claims) -> Option<idem_domain::AccountName> {
    let text = match settings.username_claim.as_str() {
        "email" => claims
            .email()
            .filter(|_| claims.email_verified() == Some(true))
            .map(|e| e.as_str().to_owned()),
        "preferred_username" => claims.preferred_username().map(|n| n.as_str().to_owned()),
        "sub" => Some(claims.subject().as_str().to_owned()),
        other => claims
            .additional_claims()
            .claims
            .get(other)
            .and_then(Value::as_str)
            .map(str::to_owned),
    }?;
    idem_domain::AccountName::parse(&text).ok()
}

/// Who the provider says this is, for good: issuer and subject.
pub fn subject(claims: &Claims) -> String {
    format!("{} {}", claims.issuer().as_str(), claims.subject().as_str())
}

#[cfg(test)]
mod tests {
    use idem_domain::Role;

    use super::*;

    fn settings() -> OidcSettings {
        OidcSettings {
            issuer: "https://idp.example.com".into(),
            client_id: "idem".into(),
            client_secret: None,
            scopes: Vec::new(),
            name: "Example".into(),
            username_claim: "email".into(),
            roles_claim: "groups".into(),
            roles: crate::auth::proxy::ProxyAuth::parse_roles(
                "sre=operator, idem-admins=admin, payments-oncall=operator@payments",
            )
            .unwrap(),
            default_role: Some(Role::Viewer),
            clock_skew: std::time::Duration::from_secs(60),
            sign_in_ttl: std::time::Duration::from_secs(600),
            recheck: None,
            recheck_grace: std::time::Duration::from_secs(3600),
        }
    }

    fn claims(extra: Value) -> Claims {
        let mut token = serde_json::json!({
            "iss": "https://idp.example.com",
            "sub": "00u1",
            "aud": "idem",
            "exp": 2_000_000_000,
            "iat": 1_700_000_000,
            "email": "alice@example.com",
            "email_verified": true,
        });
        token
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(token).unwrap()
    }

    #[test]
    fn the_highest_mapped_group_wins_and_others_get_the_default_role() {
        let s = settings();
        let role = |s: &OidcSettings, c: &Claims| rights(s, c).and_then(|r| r.highest());
        let with = |groups: Value| role(&s, &claims(serde_json::json!({ "groups": groups })));
        assert_eq!(
            with(serde_json::json!(["payments", "sre"])),
            Some(Role::Operator)
        );
        assert_eq!(
            with(serde_json::json!(["sre", "idem-admins"])),
            Some(Role::Admin)
        );
        assert_eq!(
            with(serde_json::json!("sre idem-admins")),
            Some(Role::Admin)
        );
        assert_eq!(with(serde_json::json!(["payments"])), Some(Role::Viewer));
        let on_payments = rights(
            &s,
            &claims(serde_json::json!({ "groups": ["payments-oncall"] })),
        );
        assert_eq!(on_payments.unwrap().to_string(), "operator@payments");
        assert_eq!(role(&s, &claims(serde_json::json!({}))), Some(Role::Viewer));
        let strict = OidcSettings {
            default_role: None,
            ..settings()
        };
        assert_eq!(
            role(
                &strict,
                &claims(serde_json::json!({ "groups": ["payments"] }))
            ),
            None
        );
    }

    #[test]
    fn the_name_comes_from_the_configured_claim_and_must_be_usable() {
        let mut s = settings();
        let c = claims(serde_json::json!({ "upn": "alice@corp.example", "blank": "  " }));
        assert_eq!(
            username(&s, &c)
                .as_ref()
                .map(idem_domain::AccountName::as_str),
            Some("alice@example.com")
        );
        s.username_claim = "sub".into();
        assert_eq!(
            username(&s, &c)
                .as_ref()
                .map(idem_domain::AccountName::as_str),
            Some("00u1")
        );
        s.username_claim = "upn".into();
        assert_eq!(
            username(&s, &c)
                .as_ref()
                .map(idem_domain::AccountName::as_str),
            Some("alice@corp.example")
        );
        s.username_claim = "blank".into();
        assert_eq!(username(&s, &c), None);
        s.username_claim = "preferred_username".into();
        assert_eq!(username(&s, &c), None);
        s.username_claim = "email".into();
        let unverified = claims(serde_json::json!({ "email_verified": false }));
        assert_eq!(
            username(&s, &unverified),
            None,
            "an unverified email names nobody"
        );
        assert_eq!(subject(&c), "https://idp.example.com 00u1");
    }
}
