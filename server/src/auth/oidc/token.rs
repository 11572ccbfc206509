//! The checks an ID token must pass, and what the token endpoint's
//! refusals mean to a person.

use chrono::Utc;
use openidconnect::{AccessTokenHash, Nonce, RequestTokenError, core::CoreJwsSigningAlgorithm};

use super::{
    Discovered, Provider,
    claims::Claims,
    refusals::{Failure, provider_error},
};

/// An ID token as Idem reads it.
type IdToken = openidconnect::IdToken<
    super::OtherClaims,
    openidconnect::core::CoreGenderClaim,
    openidconnect::core::CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

pub(super) const NO_KEY: &str = "it is signed with a key the provider does not publish";

/// Signatures only the provider's private keys make. An HMAC signed with
/// the client secret (`HS256`, which some providers list) would be a token
/// anyone holding Idem's own secret could make.
const SIGNED_BY_THE_PROVIDER: [CoreJwsSigningAlgorithm; 10] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EcdsaP521Sha512,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// The ID token's claims, if its signature, issuer, audience, expiry (within
/// the allowed clock skew), issue time and nonce check out.
pub(super) fn verified(
    provider: &Provider,
    found: &Discovered,
    token: &IdToken,
    nonce: &Nonce,
) -> Result<Claims, Failure> {
    use openidconnect::{ClaimsVerificationError as E, SignatureVerificationError as S};
    let skew = chrono::Duration::from_std(provider.settings.clock_skew)
        .unwrap_or(chrono::Duration::seconds(60));
    let verifier = found
        .client
        .id_token_verifier()
        .set_allowed_algs(SIGNED_BY_THE_PROVIDER)
        .set_time_fn(move || Utc::now() - skew)
        .set_issue_time_verifier_fn(move |issued| {
            if issued > Utc::now() + skew {
                Err("issued in the future".into())
            } else {
                Ok(())
            }
        });
    token.claims(&verifier, nonce).cloned().map_err(|err| {
        Failure::TokenRejected(match err {
            E::SignatureVerification(S::NoMatchingKey) => NO_KEY,
            E::SignatureVerification(S::DisallowedAlg(_)) => {
                "it is not signed with one of the provider's own keys"
            }
            E::SignatureVerification(_) => "its signature is not the provider's",
            E::InvalidAudience(_) => "it was issued for another application (audience)",
            E::InvalidIssuer(_) => "it was issued by another provider (issuer)",
            // The issue-time check above answers as `Expired` too.
            E::Expired(_) => "it has expired, or was issued in the future",
            E::InvalidNonce(_) => "it belongs to another sign-in (nonce)",
            _ => "it is not valid",
        })
    })
}

/// When the ID token carries `at_hash`, the access token must match it.
pub(super) fn check_access_token(
    found: &Discovered,
    token: &IdToken,
    claims: &Claims,
    access: &openidconnect::AccessToken,
) -> Result<(), Failure> {
    let Some(expected) = claims.access_token_hash() else {
        return Ok(());
    };
    let verifier = found
        .client
        .id_token_verifier()
        .set_allowed_algs(SIGNED_BY_THE_PROVIDER);
    // The hash is computed with the token's own algorithm and key; any
    // step that fails is a token that does not match.
    let actual = token
        .signing_alg()
        .ok()
        .zip(token.signing_key(&verifier).ok())
        .and_then(|(alg, key)| AccessTokenHash::from_token(access, alg, key).ok());
    if actual.as_ref() == Some(expected) {
        Ok(())
    } else {
        Err(Failure::TokenRejected(
            "its access token hash does not match",
        ))
    }
}

/// The token endpoint's refusal, as a person can act on it.
pub(super) fn token_error<RE: std::error::Error + 'static>(
    err: RequestTokenError<
        RE,
        openidconnect::StandardErrorResponse<openidconnect::core::CoreErrorResponseType>,
    >,
) -> Failure {
    use openidconnect::core::CoreErrorResponseType as T;
    match err {
        RequestTokenError::ServerResponse(answer) => match answer.error() {
            T::InvalidClient | T::UnauthorizedClient => {
                tracing::error!(
                    "the OpenID provider refused Idem's client credentials (invalid_client)"
                );
                Failure::ClientRejected
            }
            T::InvalidGrant => Failure::CodeRejected,
            other => provider_error(other.as_ref()),
        },
        RequestTokenError::Request(err) => {
            tracing::warn!(error = %idem_app::error::cause_chain(&err), "OpenID token endpoint unreachable");
            Failure::Unreachable
        }
        RequestTokenError::Parse(..) | RequestTokenError::Other(_) => {
            Failure::ProviderSaid("an answer Idem could not read".into())
        }
    }
}
