//! Sign-ins this browser started and that have not come back from the
//! provider yet: `state`, `nonce`, PKCE verifier, where to go after, when
//! it started. They are kept in a cookie of the browser's own, not on the
//! server, so a visitor who starts sign-ins a thousand times stores nothing
//! server-side (a server-side session would have been a row each).
//!
//! The cookie is `HttpOnly`, `SameSite=Lax` (the provider sends the browser
//! back with a top-level GET, which Lax lets through), `Secure` with the
//! `__Host-` prefix over HTTPS (no other site or subdomain can set it), and
//! lives a little longer than a sign-in may take, so an expired sign-in of
//! this browser is still recognised as its own (and audited). It needs no
//! signature: everything in it only works for the sign-in it belongs to —
//! the verifier must match the challenge the provider saw, the nonce the ID
//! token carries, the state the provider sends back — and a browser that
//! edits it can only spoil its own sign-in. Each entry is taken out when
//! its callback arrives (the answer rewrites the cookie), so a state is
//! used once; the code itself is single-use at the provider.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use serde::{Deserialize, Serialize};

/// At most this many sign-ins wait at once per browser (several tabs).
const MAX_PENDING: usize = 4;
/// The cookie's value stays under browsers' 4 KB per cookie: the oldest
/// entries go first (a deep link to a long key is the largest part).
const MAX_COOKIE_BYTES: usize = 3_600;
/// How much longer than a sign-in may take the cookie lives.
const LINGER: Duration = Duration::from_secs(15 * 60);

/// One started sign-in: what must come back, and where to go after.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Pending {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    pub next: String,
    /// Unix seconds.
    pub started: i64,
    /// A recheck (`prompt=none`): the provider answers without asking.
    #[serde(default)]
    pub silent: bool,
}

/// The browser's started sign-ins, as its cookie holds them.
#[derive(Debug, Default)]
pub(super) struct PendingSignIns {
    entries: Vec<Pending>,
}

/// The cookie's name (`__Host-` prefixed over HTTPS).
fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-idem_oidc"
    } else {
        "idem_oidc"
    }
}

impl PendingSignIns {
    /// What the request's cookie holds; nothing when it has none or it
    /// cannot be read.
    pub fn from_request(headers: &HeaderMap, secure: bool) -> Self {
        let name = cookie_name(secure);
        let value = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, value)| value);
        let entries = value
            .and_then(|v| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(v)
                    .ok()
            })
            .and_then(|json| serde_json::from_slice(&json).ok())
            .unwrap_or_default();
        PendingSignIns { entries }
    }

    /// Whether this browser has any sign-in under way.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds a started sign-in, dropping the oldest beyond the bounds.
    pub fn push(&mut self, pending: Pending) {
        self.entries.push(pending);
        let keep_from = self.entries.len().saturating_sub(MAX_PENDING);
        self.entries.drain(..keep_from);
        while self.entries.len() > 1 && self.encoded().len() > MAX_COOKIE_BYTES {
            self.entries.remove(0);
        }
    }

    /// Takes out the sign-in `state` names, if this browser started it.
    pub fn take(&mut self, state: &str) -> Option<Pending> {
        let index = self
            .entries
            .iter()
            .position(|p| constant_time_eq(p.state.as_bytes(), state.as_bytes()))?;
        Some(self.entries.remove(index))
    }

    fn encoded(&self) -> String {
        let json = serde_json::to_vec(&self.entries).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// The `Set-Cookie` that keeps what is left (or removes the cookie).
    pub fn set_cookie(&self, secure: bool, sign_in_ttl: Duration) -> Option<HeaderValue> {
        let name = cookie_name(secure);
        let secure_attr = if secure { "; Secure" } else { "" };
        let (value, max_age) = if self.entries.is_empty() {
            (String::new(), 0)
        } else {
            (self.encoded(), (sign_in_ttl + LINGER).as_secs())
        };
        HeaderValue::from_str(&format!(
            "{name}={value}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax{secure_attr}"
        ))
        .ok()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(state: &str, next: &str) -> Pending {
        Pending {
            state: state.into(),
            nonce: "n".repeat(22),
            verifier: "v".repeat(43),
            next: next.into(),
            started: 1_800_000_000,
            silent: false,
        }
    }

    fn round_trip(signs: &PendingSignIns) -> PendingSignIns {
        let set = signs.set_cookie(false, Duration::from_secs(600)).unwrap();
        let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_str(&pair).unwrap());
        PendingSignIns::from_request(&headers, false)
    }

    #[test]
    fn a_started_sign_in_comes_back_from_the_cookie_once() {
        let mut signs = PendingSignIns::default();
        signs.push(pending("state-1", "/keys/orders/a%2Fb"));
        signs.push(pending("state-2", "/"));
        let mut back = round_trip(&signs);
        assert_eq!(back.take("state-1").unwrap().next, "/keys/orders/a%2Fb");
        assert!(back.take("state-1").is_none(), "used once");
        assert!(back.take("state-3").is_none(), "never started here");
        assert!(back.take("state-2").is_some());
        let gone = back.set_cookie(true, Duration::from_secs(600)).unwrap();
        assert!(
            gone.to_str().unwrap().starts_with(
                "__Host-idem_oidc=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure"
            ),
            "{gone:?}"
        );
    }

    #[test]
    fn the_cookie_stays_within_four_sign_ins_and_a_browsers_limit() {
        let mut signs = PendingSignIns::default();
        for n in 0..6 {
            signs.push(pending(&format!("state-{n}"), "/"));
        }
        assert!(
            round_trip(&signs).take("state-1").is_none(),
            "the oldest went"
        );
        assert!(round_trip(&signs).take("state-2").is_some());
        let long = format!("/keys/orders/{}", "%C3%98".repeat(400));
        for n in 0..4 {
            signs.push(pending(&format!("long-{n}"), &long));
        }
        let set = signs.set_cookie(false, Duration::from_secs(600)).unwrap();
        assert!(set.len() < 4000, "{}", set.len());
        assert!(
            round_trip(&signs).take("long-3").is_some(),
            "the newest stays"
        );
    }

    #[test]
    fn an_unreadable_cookie_is_no_sign_in() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("idem_oidc=%%%not-base64; other=1"),
        );
        assert!(PendingSignIns::from_request(&headers, false).is_empty());
    }
}
