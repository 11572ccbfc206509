//! An OpenID provider on 127.0.0.1 for Idem's Rust tests: discovery, keys,
//! an authorization endpoint that signs in whoever the test says, a token
//! endpoint that checks the client secret, the code and its PKCE verifier,
//! and RS256 ID tokens signed with a real key — or, when a test asks, with
//! one defect (another audience, expired, the wrong key, an HMAC, another
//! nonce, another issuer, an `at_hash` or `iss` that does not match); it can
//! also rotate its keys. The browser flow against a certified provider is the
//! Playwright suite's (end2end/oidc-provider.mjs); this one exists to send
//! the answers no correct provider would.
//!
//! The keys next to this file were made for these tests only
//! (`openssl genrsa -traditional 2048`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Form, Json, Router,
    extract::{Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use base64::Engine;
use chrono::{Duration, Utc};
use idem::auth::oidc::OtherClaims;
use openidconnect::{
    AccessToken, Audience, EndUserEmail, IdToken, IdTokenClaims, IssuerUrl, JsonWebKeyId, Nonce,
    PrivateSigningKey, StandardClaims, SubjectIdentifier,
    core::{
        CoreGenderClaim, CoreHmacKey, CoreJsonWebKeySet, CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm, CoreRsaPrivateSigningKey,
    },
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

pub const CLIENT_ID: &str = "idem";
pub const CLIENT_SECRET: &str = "idem-test-secret";
const ACCESS_TOKEN: &str = "an-access-token";
const KEY: &str = include_str!("provider-key.pem");
const IMPOSTOR_KEY: &str = include_str!("impostor-key.pem");

/// What is wrong with the next ID token, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    None,
    OtherAudience,
    /// Expired ten minutes ago: beyond any allowed clock skew.
    Expired,
    /// Expired twenty seconds ago: within the allowed clock skew.
    JustExpired,
    /// Signed with a key the provider does not publish, under its key id.
    ForeignSignature,
    OtherNonce,
    OtherIssuer,
    /// An HMAC with the client secret (`HS256`, which this provider lists):
    /// a token anyone holding Idem's own secret could make.
    SharedSecret,
    /// The ID token's `at_hash` is for another access token.
    OtherAccessToken,
    /// The redirect back names another issuer (`iss`, RFC 9207).
    OtherIss,
}

/// The person the authorization endpoint signs in.
#[derive(Debug, Clone)]
pub struct Person {
    pub sub: String,
    pub email: String,
    pub email_verified: bool,
    pub groups: Vec<String>,
}

struct Grant {
    nonce: Option<String>,
    challenge: String,
    redirect_uri: String,
    person: Person,
}

struct Inner {
    person: Person,
    defect: Defect,
    /// Signs with its second key (`k2`) and publishes only that one.
    rotated: bool,
    /// Its end-session endpoint is on another origin (`localhost`).
    end_session_elsewhere: bool,
    /// The person's session at the provider ended: a request without a
    /// prompt is answered `login_required`.
    signed_out: bool,
    /// The `prompt` of each authorization request, in order.
    prompts: Vec<Option<String>>,
    deny: bool,
    down: bool,
    codes: HashMap<String, Grant>,
    next_code: u64,
}

#[derive(Clone)]
pub struct Provider {
    pub issuer: String,
    inner: Arc<Mutex<Inner>>,
}

impl Provider {
    /// Starts the provider, signing in `person`.
    pub async fn start(person: Person) -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let provider = Provider {
            issuer,
            inner: Arc::new(Mutex::new(Inner {
                person,
                defect: Defect::None,
                rotated: false,
                end_session_elsewhere: false,
                signed_out: false,
                prompts: Vec::new(),
                deny: false,
                down: false,
                codes: HashMap::new(),
                next_code: 1,
            })),
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .layer(axum::middleware::from_fn_with_state(
                provider.clone(),
                outage,
            ))
            .with_state(provider.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        provider
    }

    pub fn sign_in_as(&self, person: Person) {
        self.inner.lock().unwrap().person = person;
    }

    pub fn set_defect(&self, defect: Defect) {
        self.inner.lock().unwrap().defect = defect;
    }

    /// Its discovery document puts the end-session endpoint on another
    /// origin (the same server, called `localhost`).
    pub fn end_session_elsewhere(&self) {
        self.inner.lock().unwrap().end_session_elsewhere = true;
    }

    /// The person's session at the provider ends.
    pub fn sign_out(&self) {
        self.inner.lock().unwrap().signed_out = true;
    }

    /// The `prompt` each authorization request carried.
    pub fn prompts(&self) -> Vec<Option<String>> {
        self.inner.lock().unwrap().prompts.clone()
    }

    /// From now on signs with a new key, and publishes only that one.
    pub fn rotate_keys(&self) {
        self.inner.lock().unwrap().rotated = true;
    }

    /// The next sign-in is declined (`access_denied`).
    pub fn deny(&self, deny: bool) {
        self.inner.lock().unwrap().deny = deny;
    }

    /// An outage: every endpoint answers 503 until `down` is false again.
    pub fn set_down(&self, down: bool) {
        self.inner.lock().unwrap().down = down;
    }
}

/// Answers 503 to everything while the provider is down.
async fn outage(
    State(p): State<Provider>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if p.inner.lock().unwrap().down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    next.run(request).await
}

async fn discovery(State(p): State<Provider>) -> Json<serde_json::Value> {
    let base = &p.issuer;
    let end_session = if p.inner.lock().unwrap().end_session_elsewhere {
        format!("{}/session/end", base.replace("127.0.0.1", "localhost"))
    } else {
        format!("{base}/session/end")
    };
    Json(serde_json::json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "jwks_uri": format!("{base}/jwks"),
        "end_session_endpoint": end_session,
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "HS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

fn signing_key(pem: &str, id: &str) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(pem, Some(JsonWebKeyId::new(id.into()))).unwrap()
}

/// The key the provider signs with now: `k1`, or `k2` after a rotation.
fn current_key(rotated: bool) -> CoreRsaPrivateSigningKey {
    if rotated {
        signing_key(IMPOSTOR_KEY, "k2")
    } else {
        signing_key(KEY, "k1")
    }
}

async fn jwks(State(p): State<Provider>) -> Json<CoreJsonWebKeySet> {
    let rotated = p.inner.lock().unwrap().rotated;
    Json(CoreJsonWebKeySet::new(vec![
        current_key(rotated).as_verification_key(),
    ]))
}

#[derive(Deserialize)]
struct AuthorizeQuery {
    redirect_uri: String,
    state: String,
    nonce: Option<String>,
    code_challenge: String,
    code_challenge_method: String,
    prompt: Option<String>,
}

async fn authorize(State(p): State<Provider>, Query(q): Query<AuthorizeQuery>) -> Response {
    assert_eq!(q.code_challenge_method, "S256", "Idem sends PKCE with S256");
    let mut inner = p.inner.lock().unwrap();
    let back = |pairs: &[(&str, &str)]| {
        let mut url = url::Url::parse(&q.redirect_uri).unwrap();
        url.query_pairs_mut().extend_pairs(pairs);
        Redirect::to(url.as_str()).into_response()
    };
    let iss = if inner.defect == Defect::OtherIss {
        "https://impostor.example"
    } else {
        p.issuer.as_str()
    };
    inner.prompts.push(q.prompt.clone());
    if inner.signed_out && q.prompt.as_deref() == Some("none") {
        return back(&[
            ("error", "login_required"),
            ("state", &q.state),
            ("iss", iss),
        ]);
    }
    if inner.deny {
        return back(&[
            ("error", "access_denied"),
            ("state", &q.state),
            ("iss", iss),
        ]);
    }
    let code = format!("code-{}", inner.next_code);
    inner.next_code += 1;
    let grant = Grant {
        nonce: q.nonce.clone(),
        challenge: q.code_challenge.clone(),
        redirect_uri: q.redirect_uri.clone(),
        person: inner.person.clone(),
    };
    inner.codes.insert(code.clone(), grant);
    back(&[("code", &code), ("state", &q.state), ("iss", iss)])
}

#[derive(Deserialize)]
struct TokenForm {
    grant_type: String,
    code: String,
    redirect_uri: String,
    code_verifier: String,
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, Json(serde_json::json!({ "error": error }))).into_response()
}

async fn token(
    State(p): State<Provider>,
    headers: HeaderMap,
    Form(f): Form<TokenForm>,
) -> Response {
    let basic =
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Basic {basic}"))
    {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let (grant, defect, rotated) = {
        let mut inner = p.inner.lock().unwrap();
        (inner.codes.remove(&f.code), inner.defect, inner.rotated)
    };
    let Some(grant) = grant else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(f.code_verifier.as_bytes()));
    if f.grant_type != "authorization_code"
        || challenge != grant.challenge
        || f.redirect_uri != grant.redirect_uri
    {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let id_token = id_token(&p.issuer, &grant, defect, rotated);
    Json(serde_json::json!({
        "access_token": ACCESS_TOKEN,
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": id_token,
    }))
    .into_response()
}

fn id_token(issuer: &str, grant: &Grant, defect: Defect, rotated: bool) -> String {
    let now = Utc::now();
    let (issued, expires) = match defect {
        Defect::Expired => (now - Duration::minutes(20), now - Duration::minutes(10)),
        Defect::JustExpired => (now - Duration::minutes(5), now - Duration::seconds(20)),
        _ => (now, now + Duration::minutes(5)),
    };
    let audience = if defect == Defect::OtherAudience {
        "another-app"
    } else {
        CLIENT_ID
    };
    let issuer = if defect == Defect::OtherIssuer {
        "https://impostor.example".to_owned()
    } else {
        issuer.to_owned()
    };
    let nonce = match defect {
        Defect::OtherNonce => Some("another-sign-in".to_owned()),
        _ => grant.nonce.clone(),
    };
    let person = &grant.person;
    let mut other = serde_json::Map::new();
    other.insert("groups".into(), serde_json::json!(person.groups));
    let claims = IdTokenClaims::<OtherClaims, CoreGenderClaim>::new(
        IssuerUrl::new(issuer).unwrap(),
        vec![Audience::new(audience.into())],
        expires,
        issued,
        StandardClaims::new(SubjectIdentifier::new(person.sub.clone()))
            .set_email(Some(EndUserEmail::new(person.email.clone())))
            .set_email_verified(Some(person.email_verified)),
        OtherClaims { claims: other },
    )
    .set_nonce(nonce.map(Nonce::new));
    // `at_hash`: the hash of the access token the token endpoint answers with.
    let access = AccessToken::new(if defect == Defect::OtherAccessToken {
        "another-access-token".into()
    } else {
        ACCESS_TOKEN.into()
    });
    type Token = IdToken<
        OtherClaims,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >;
    let rs256 = CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256;
    match defect {
        Defect::SharedSecret => Token::new(
            claims,
            &CoreHmacKey::new(CLIENT_SECRET),
            CoreJwsSigningAlgorithm::HmacSha256,
            Some(&access),
            None,
        ),
        // The provider's key id, someone else's key.
        Defect::ForeignSignature => Token::new(
            claims,
            &signing_key(IMPOSTOR_KEY, "k1"),
            rs256,
            Some(&access),
            None,
        ),
        _ => Token::new(claims, &current_key(rotated), rs256, Some(&access), None),
    }
    .unwrap()
    .to_string()
}
