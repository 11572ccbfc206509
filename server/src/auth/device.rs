//! The browser a person signed in from before: a random token in a cookie
//! (`idem_device`, HttpOnly), remembered in the database only as its
//! SHA-256 with the account it signed in to (`login_devices`). Sign-in
//! counts a known browser's attempts under the browser rather than its
//! address (see `idem_domain::sign_in`), so nobody elsewhere — not even
//! someone behind the same NAT — can slow its owner down.
//!
//! And the address sign-in counts by when there is no known browser: the
//! client's address, or an IPv6 client's /64 (one host is usually given a
//! whole /64, so counting single addresses there would count nothing).

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

use super::AuthSettings;

const COOKIE: &str = "idem_device";
const SECURE_COOKIE: &str = "__Host-idem_device";

/// A device token as the browser holds it.
pub struct DeviceToken(String);

impl DeviceToken {
    /// A fresh random token.
    pub fn new() -> Self {
        let bytes: [u8; 16] = rand::random();
        DeviceToken(hex::encode(bytes))
    }

    /// The token in the request's cookie, if it holds a well-formed one.
    pub fn from_request(settings: &AuthSettings, headers: &HeaderMap) -> Option<Self> {
        let name = cookie_name(settings);
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|v| DeviceToken(v.to_ascii_lowercase()))
    }

    /// What the database keeps: the token's SHA-256, in hex.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }

    /// The client this browser's attempts are counted under.
    pub fn client(&self) -> String {
        format!("device:{}", &self.digest()[..16])
    }

    /// The `Set-Cookie` that gives the browser this token for `max_age`.
    pub fn set_cookie(&self, settings: &AuthSettings, max_age: std::time::Duration) -> HeaderValue {
        let secure = if settings.secure() { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={}; Max-Age={}; Path=/; HttpOnly; SameSite=Lax{secure}",
            cookie_name(settings),
            self.0,
            max_age.as_secs()
        ))
        .expect("a cookie of hex digits and fixed text is a valid header")
    }
}

impl Default for DeviceToken {
    fn default() -> Self {
        Self::new()
    }
}

fn cookie_name(settings: &AuthSettings) -> &'static str {
    if settings.secure() {
        SECURE_COOKIE
    } else {
        COOKIE
    }
}

/// What a client address is counted under: the address, or an IPv6
/// address's /64.
pub fn counted_as(client: IpAddr) -> String {
    match crate::per_address::network_of(client) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(prefix) => format!("{prefix}/64"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_and_an_ipv4_one_by_its_address() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(counted_as(ip("203.0.113.7")), "203.0.113.7");
        assert_eq!(counted_as(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(counted_as(ip("2001:db8:1:2:ffff::9")), "2001:db8:1:2::/64");
        assert_eq!(counted_as(ip("::ffff:198.51.100.4")), "198.51.100.4");
    }

    #[test]
    fn only_a_well_formed_device_cookie_is_read_and_only_its_digest_is_kept() {
        let settings = crate::config::Config::for_tests("sqlite://unused").auth;
        let token = DeviceToken::new();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; idem_device={}", token.0)).unwrap(),
        );
        let read = DeviceToken::from_request(&settings, &headers).expect("the token");
        assert_eq!(read.digest(), token.digest());
        assert!(!read.digest().contains(&token.0));
        assert!(read.client().starts_with("device:"));
        for bad in [
            "idem_device=short",
            "idem_device=zz345678901234567890123456789012",
        ] {
            headers.insert(header::COOKIE, HeaderValue::from_static(bad));
            assert!(
                DeviceToken::from_request(&settings, &headers).is_none(),
                "{bad}"
            );
        }
        let set = token.set_cookie(&settings, std::time::Duration::from_secs(60));
        let set = set.to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Lax"),
            "{set}"
        );
    }
}
