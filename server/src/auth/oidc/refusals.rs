//! Every way a sign-in through the provider can fail, each with a page a
//! person can act on (never a 500) and, when a person was turned away, an
//! audit row.

use axum::{http::StatusCode, response::Response};
use idem_app::links;
use idem_domain::AccountOrigin;
use idem_store::{NewAuditEntry, Store};

use super::account::Refused;

/// Why a sign-in through the provider did not end in a session.
#[derive(Debug)]
pub enum Failure {
    /// Discovery, the keys or the token endpoint did not answer.
    Unreachable,
    /// The token endpoint refused Idem's client id or secret.
    ClientRejected,
    /// The person declined, or the provider refused them (`access_denied`).
    Denied,
    /// Another error the provider sent back (its code, sanitised).
    ProviderSaid(String),
    /// No sign-in was started with this `state` in this browser, or it is
    /// older than the sign-in may take, or it was already used. `started`:
    /// this browser did start it (it expired).
    StaleState { started: bool },
    /// The provider no longer accepts the code (`invalid_grant`).
    CodeRejected,
    /// The ID token failed a check (signature, issuer, audience, expiry,
    /// nonce, access token hash); the text says which.
    TokenRejected(&'static str),
    /// The token carries no usable account name.
    NoName,
    /// The claims give this person no role.
    NoRole(String),
    /// The account cannot be used (disabled, another kind, another subject).
    Account(String, Refused),
    /// Idem's database could not start the session.
    Unavailable,
}

impl Failure {
    /// Whether a person was turned away (audited), rather than Idem or the
    /// provider being out of order.
    ///
    /// A callback whose `state` this browser did not start is logged, not
    /// audited: anyone can send one, and the audit log keeps every row for
    /// good. Every refusal audited needs a sign-in this browser started (a
    /// trip to the provider) or a token the provider signed.
    fn refuses_someone(&self) -> bool {
        !matches!(
            self,
            Failure::Unreachable | Failure::Unavailable | Failure::StaleState { started: false }
        )
    }

    fn page(&self, provider: &str) -> (StatusCode, String, String) {
        use Failure::*;
        let (status, title, text) = match self {
            Unreachable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "The identity provider did not answer",
                format!("Idem could not reach {provider} to sign you in. Nothing was changed; try again in a minute. If it keeps happening, the provider is down or Idem cannot reach it (IDEM_OIDC_ISSUER)."),
            ),
            ClientRejected => (
                StatusCode::BAD_GATEWAY,
                "The identity provider refused Idem",
                format!("{provider} did not accept Idem's client credentials, so nobody can sign in this way. An Idem administrator should check IDEM_OIDC_CLIENT_ID and IDEM_OIDC_CLIENT_SECRET against the application registered at the provider."),
            ),
            Denied => (
                StatusCode::FORBIDDEN,
                "Sign-in was declined",
                format!("{provider} did not let you sign in to Idem: access was denied or consent was not given. If that was a mistake, sign in again and allow access, or ask whoever manages {provider} to assign you the Idem application."),
            ),
            ProviderSaid(code) => (
                StatusCode::BAD_GATEWAY,
                "The identity provider could not sign you in",
                format!("{provider} answered with the error \"{code}\". Try again; if it keeps happening, show this to an Idem administrator."),
            ),
            StaleState { .. } => (
                StatusCode::BAD_REQUEST,
                "This sign-in has expired",
                "This sign-in was started too long ago, in another browser, or it was already used. Nothing was signed in; start again.".to_owned(),
            ),
            CodeRejected => (
                StatusCode::BAD_REQUEST,
                "This sign-in has expired",
                format!("{provider} no longer accepts this sign-in (its code expired or was used). Start again."),
            ),
            TokenRejected(why) => (
                StatusCode::FORBIDDEN,
                "The identity provider's answer was refused",
                format!("The token {provider} sent back did not pass Idem's checks: {why}. Nothing was signed in. If this keeps happening, an Idem administrator should compare IDEM_OIDC_ISSUER and IDEM_OIDC_CLIENT_ID with the provider's settings."),
            ),
            NoName => (
                StatusCode::FORBIDDEN,
                "Your account has no name Idem can use",
                format!("{provider} did not send the claim Idem names accounts by (IDEM_OIDC_USERNAME_CLAIM), sent one Idem cannot use, or sent an email address it has not verified (email_verified). Ask an Idem administrator."),
            ),
            NoRole(name) => (
                StatusCode::FORBIDDEN,
                "Your groups give you no role in Idem",
                format!("{provider} signed you in as {name}, but none of your groups is mapped to a role in Idem (IDEM_OIDC_ROLES). Ask an Idem administrator to add your group."),
            ),
            Account(name, refused) => account_page(name, refused),
            Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in is temporarily unavailable",
                "Idem cannot reach its database, where accounts are kept. Try again in a few seconds.".to_owned(),
            ),
        };
        (status, title.to_owned(), text)
    }

    /// What the audit row says.
    fn reason(&self) -> String {
        match self {
            Failure::Denied => "the provider denied access".to_owned(),
            Failure::ProviderSaid(code) => format!("the provider answered {code}"),
            Failure::ClientRejected => "the provider refused Idem's client credentials".to_owned(),
            Failure::StaleState { .. } => "unknown, expired or reused state".to_owned(),
            Failure::CodeRejected => "the provider refused the code".to_owned(),
            Failure::TokenRejected(why) => format!("ID token refused: {why}"),
            Failure::NoName => "no usable (or verified) name claim".to_owned(),
            Failure::NoRole(_) => "no role from the claims".to_owned(),
            Failure::Account(_, refused) => format!("{refused:?}"),
            Failure::Unreachable | Failure::Unavailable => String::new(),
        }
    }

    fn actor(&self) -> &str {
        match self {
            Failure::NoRole(name) | Failure::Account(name, _) => name,
            _ => "(OpenID Connect)",
        }
    }
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

fn account_page(name: &str, refused: &Refused) -> (StatusCode, &'static str, String) {
    match refused {
        Refused::Disabled => (
            StatusCode::FORBIDDEN,
            "Your account is disabled",
            format!("The Idem account {name} is disabled. Ask an Idem administrator."),
        ),
        Refused::OtherOrigin(origin) => {
            let kind = match origin {
                AccountOrigin::Password => "a password account",
                _ => "an account of the identity proxy",
            };
            (
                StatusCode::FORBIDDEN,
                "That name belongs to another account",
                format!(
                    "The name {name} is {kind} in Idem; a sign-in through the identity provider never takes it over. Ask an Idem administrator to rename or remove it."
                ),
            )
        }
        Refused::OtherSubject => (
            StatusCode::FORBIDDEN,
            "That name belongs to someone else",
            format!(
                "The Idem account {name} was made for another person at the identity provider. Ask an Idem administrator."
            ),
        ),
        // `sign_in` answers a store error as `Failure::Unavailable` before
        // it gets here; the same page either way.
        Refused::Store(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is temporarily unavailable",
            "Idem cannot reach its database, where accounts are kept. Try again in a few seconds."
                .to_owned(),
        ),
    }
}

/// The page for `failure`, after auditing it when it turned someone away.
/// Its link starts the sign-in again towards `next`.
pub async fn answer(
    store: &Store,
    provider: &str,
    failure: Failure,
    client: &str,
    next: &str,
) -> Response {
    if matches!(failure, Failure::StaleState { started: false }) {
        tracing::info!(
            client,
            "OpenID Connect callback for a sign-in this browser did not start (unknown or used state)"
        );
    }
    if failure.refuses_someone() {
        let reason = failure.reason();
        let entry = NewAuditEntry {
            target: Some("OpenID Connect"),
            reason: Some(&reason),
            client_addr: Some(client),
            ..NewAuditEntry::new(
                failure.actor(),
                "anonymous",
                idem_domain::AuditAction::Login,
                idem_domain::AuditResult::Refused,
            )
        };
        if let Err(err) = store.audit().append_audit(&entry).await {
            tracing::error!(error = %idem_app::error::cause_chain(&err), "could not audit a refused OpenID Connect sign-in");
        }
        tracing::info!(reason, "OpenID Connect sign-in refused");
    }
    let (status, title, text) = failure.page(provider);
    let again = links::with_query("/login", &[("next", &links::safe_next(next))]);
    crate::refusal::refusal_with_link(status, &title, &text, &again, "Sign in again")
}
