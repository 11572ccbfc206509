//! Sign-in with the company's identity provider through OpenID Connect: the
//! authorization code flow with PKCE, the way Grafana or Argo CD offer
//! "Sign in with Okta".
//!
//! `GET /auth/oidc/start?next=…` keeps a fresh `state`, `nonce` and PKCE
//! verifier in a cookie of the browser's own (see [`pending`]) and sends
//! the browser to the provider; `GET /auth/oidc/callback` takes them out
//! again (each is used once), exchanges the code, checks the ID token's
//! signature, issuer, audience, expiry (with a bounded clock skew) and
//! nonce, maps a claim to a role and starts Idem's session. Accounts made
//! this way are a third kind, bound to the provider's subject: never a
//! password or proxy account of the same name (see [`account`]).
//!
//! The provider's metadata and keys are read by discovery when first needed
//! and again after [`DISCOVERY_TTL`], or at once when an ID token names a
//! key Idem has not seen (the provider rotated its keys).
//!
//! What happens when:
//! - **a callback arrives twice, or from another browser**: its state is
//!   taken out of the browser's cookie the first time, and another
//!   browser never had it: the page says the sign-in expired, nobody is
//!   signed in (the code is single-use at the provider too);
//! - **anyone sends starts or callbacks a thousand times**: a start stores
//!   nothing on the server (the cookie is the browser's), and a callback
//!   whose state this browser did not start is logged, not audited — only
//!   a browser's own sign-in, expired, gets an audit row;
//! - **the person loses their rights at the provider midway**: every
//!   `IDEM_OIDC_RECHECK_MINUTES` a page goes to the provider without a
//!   prompt and the role follows the claims; `login_required`,
//!   `interaction_required`, `consent_required`,
//!   `account_selection_required` or `access_denied` end the session; once
//!   a recheck is due, a request that changes anything is refused with
//!   "sign in again" (`guard.rs`), never carried out on unconfirmed claims;
//! - **the provider is down**: a recheck finds it so before sending the
//!   browser there (its metadata read within half a minute), and pages and
//!   actions go on with the last claims for `IDEM_OIDC_RECHECK_GRACE_MINUTES`,
//!   saying so; past the grace, nothing runs on them;
//! - **the same account signs in twice at once**: each sign-in sets the
//!   role by compare-and-set, so the epoch moves once per change.

mod account;
mod claims;
mod flow;
mod logout;
mod pending;
mod refusals;
mod token;

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use idem_domain::Role;
use openidconnect::{
    Client, ClientId, ClientSecret, EmptyExtraTokenFields, EndSessionUrl, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl, ProviderMetadataWithLogout, RedirectUrl,
    StandardErrorResponse, StandardTokenResponse,
    core::{
        CoreAuthDisplay, CoreAuthPrompt, CoreClientAuthMethod, CoreErrorResponseType,
        CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm, CoreRevocableToken, CoreRevocationErrorResponse,
        CoreTokenIntrospectionResponse, CoreTokenType,
    },
};
use tokio::sync::Mutex;

pub use claims::OtherClaims;
use flow::provider;
pub(crate) use flow::{ID_TOKEN, Recheck, recheck};
pub use flow::{callback, start};
pub use logout::{ProviderLogout, provider_logout_url};

/// How long discovered metadata and keys are used before they are read again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(10 * 60);

/// After discovery failed, how long sign-ins are answered "unreachable" at
/// once instead of each waiting on the provider again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// A recheck reads the provider's metadata again when it is older than
/// this, so an outage is noticed before a browser is sent there.
pub const RECHECK_PROBE_AGE: Duration = Duration::from_secs(30);

/// How long a started sign-in may take at the provider by default (its
/// `state` is refused after this).
pub const SIGN_IN_TTL: Duration = Duration::from_secs(10 * 60);

/// How the provider is reached and what its claims mean.
#[derive(Clone)]
pub struct OidcSettings {
    /// `IDEM_OIDC_ISSUER`: discovery reads `{issuer}/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// `None` for a public client (PKCE alone).
    pub client_secret: Option<String>,
    /// Scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    /// The provider's name on the sign-in button ("Sign in with Okta").
    pub name: String,
    /// The claim that names the account (`email` by default).
    pub username_claim: String,
    /// The claim that carries groups or roles (`groups` by default).
    pub roles_claim: String,
    /// Group (or role value) → role, maybe limited to teams
    /// (`operator@payments`); a person in several gets each one's rights.
    pub roles: HashMap<String, idem_domain::Rights>,
    /// The role of a person in no mapped group; `None` refuses them.
    pub default_role: Option<Role>,
    /// How far the provider's clock may be from Idem's.
    pub clock_skew: Duration,
    /// How long a started sign-in may take ([`SIGN_IN_TTL`]).
    pub sign_in_ttl: Duration,
    /// How often a session asks the provider again, without a prompt,
    /// whether the person is still signed in there and what their claims
    /// say now (`None`: only at sign-in).
    pub recheck: Option<Duration>,
    /// While the provider cannot be reached, how long after a recheck fell
    /// due pages and actions go on with the claims last confirmed.
    pub recheck_grace: Duration,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .field("roles_claim", &self.roles_claim)
            .field("default_role", &self.default_role)
            .finish_non_exhaustive()
    }
}

type IdFields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type TokenAnswer = StandardTokenResponse<IdFields, CoreTokenType>;

/// A client for the discovered provider, with the claims Idem reads.
type OidcClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenAnswer,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// What discovery found.
struct Discovered {
    client: OidcClient,
    end_session: Option<EndSessionUrl>,
    at: Instant,
}

/// Why the provider could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the identity provider's discovery document could not be read")]
    Discovery(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the identity provider's metadata has no token endpoint")]
    NoTokenEndpoint,
    #[error("the identity provider did not answer a moment ago")]
    FailedJustNow,
}

/// The configured provider: settings, an HTTP client that never follows
/// redirects (a provider answer must not send Idem elsewhere), and the
/// metadata discovery last found.
pub struct Provider {
    pub settings: OidcSettings,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    /// Where the provider sends people back after RP-initiated logout.
    after_logout: String,
    http: reqwest::Client,
    discovered: Mutex<Cache>,
}

/// What discovery last found, and when it last failed.
#[derive(Default)]
struct Cache {
    found: Option<Arc<Discovered>>,
    failed_at: Option<Instant>,
}

impl Provider {
    /// `public_url` is where people reach Idem; the redirect URI to register
    /// at the provider is `{public_url}/auth/oidc/callback`.
    pub fn new(settings: OidcSettings, public_url: &url::Url) -> Result<Self, String> {
        let issuer = IssuerUrl::new(settings.issuer.clone()).map_err(|e| e.to_string())?;
        let base = public_url.as_str().trim_end_matches('/');
        let redirect =
            RedirectUrl::new(format!("{base}/auth/oidc/callback")).map_err(|e| e.to_string())?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Provider {
            after_logout: format!("{base}/login"),
            settings,
            issuer,
            redirect,
            http,
            discovered: Mutex::new(Cache::default()),
        })
    }

    /// The provider's metadata and keys: as discovered within
    /// [`DISCOVERY_TTL`], unless `fresh`. One request reads them at a time
    /// (the others wait for its answer); when that fails, the last answer
    /// stands in, and nobody asks again for [`RETRY_AFTER_FAILURE`], so an
    /// outage at the provider does not hold every sign-in for a timeout.
    async fn discovered(&self, fresh: bool) -> Result<Arc<Discovered>, ProviderError> {
        let max_age = if fresh { Duration::ZERO } else { DISCOVERY_TTL };
        self.discovered_within(max_age, true).await
    }

    /// Whether the provider answers now (its metadata read within
    /// [`RECHECK_PROBE_AGE`], or half the recheck interval when that is
    /// shorter): no stale answer stands in for it.
    async fn answers_now(&self) -> Result<Arc<Discovered>, ProviderError> {
        let max_age = self.settings.recheck.map_or(RECHECK_PROBE_AGE, |every| {
            (every / 2).min(RECHECK_PROBE_AGE)
        });
        self.discovered_within(max_age, false).await
    }

    /// The metadata, read again when older than `max_age`; when reading it
    /// fails, the last answer stands in if `stale_ok`.
    async fn discovered_within(
        &self,
        max_age: Duration,
        stale_ok: bool,
    ) -> Result<Arc<Discovered>, ProviderError> {
        let mut cache = self.discovered.lock().await;
        let last = cache.found.clone().filter(|_| stale_ok);
        if let Some(found) = cache.found.as_ref().filter(|d| d.at.elapsed() < max_age) {
            return Ok(found.clone());
        }
        if cache
            .failed_at
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE)
        {
            return last.ok_or(ProviderError::FailedJustNow);
        }
        match self.discover().await {
            Ok(found) => {
                *cache = Cache {
                    found: Some(found.clone()),
                    failed_at: None,
                };
                Ok(found)
            }
            Err(err) => {
                cache.failed_at = Some(Instant::now());
                match last {
                    Some(stale) => {
                        tracing::warn!(error = %idem_app::error::cause_chain(&err), "OpenID provider discovery failed; using what it said before");
                        Ok(stale)
                    }
                    None => Err(err),
                }
            }
        }
    }

    async fn discover(&self) -> Result<Arc<Discovered>, ProviderError> {
        let metadata = ProviderMetadataWithLogout::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| ProviderError::Discovery(Box::new(e)))?;
        if metadata.token_endpoint().is_none() {
            return Err(ProviderError::NoTokenEndpoint);
        }
        // A provider that takes the secret only in the form body says so.
        let post_only = metadata
            .token_endpoint_auth_methods_supported()
            .is_some_and(|methods| {
                methods.contains(&CoreClientAuthMethod::ClientSecretPost)
                    && !methods.contains(&CoreClientAuthMethod::ClientSecretBasic)
            });
        let end_session = metadata.additional_metadata().end_session_endpoint.clone();
        let mut client = OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone());
        if post_only {
            client = client.set_auth_type(openidconnect::AuthType::RequestBody);
        }
        Ok(Arc::new(Discovered {
            client,
            end_session,
            at: Instant::now(),
        }))
    }
}
