//! The client's address: the peer, or — only when the peer is a trusted
//! proxy — the address the proxy says it forwarded for.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Proxies whose `X-Forwarded-For` Idem believes.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Comma-separated addresses or networks: `10.0.0.0/8, 127.0.0.1`.
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{s:?} is not an IP address or network"))
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client: walking `X-Forwarded-For` from the right, the first
    /// address that is not a trusted proxy. A header from an untrusted peer
    /// is ignored entirely. Entries may carry a port (`1.2.3.4:5678`,
    /// `[2001:db8::1]:443`). An entry that is not an address stops the walk
    /// at the last trusted hop: the client is then unknown and counted as
    /// that proxy, never as whatever an attacker wrote further left.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.ip();
        if !self.trusts(peer) {
            return peer;
        }
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|v| v.to_str().unwrap_or("\u{0}"))
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        let mut last_trusted = peer;
        for entry in entries.into_iter().rev() {
            match forwarded_address(entry) {
                Some(ip) if self.trusts(ip) => last_trusted = ip,
                Some(ip) => return ip,
                None => return last_trusted,
            }
        }
        last_trusted
    }
}

/// One `X-Forwarded-For` entry as an address: `1.2.3.4`, `1.2.3.4:5678`,
/// `2001:db8::1` or `[2001:db8::1]:443`; `None` for anything else.
fn forwarded_address(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            entry
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .and_then(|e| e.parse().ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", xff.parse().unwrap());
        h
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1").unwrap();
        let via_proxy: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        let direct: SocketAddr = "203.0.113.9:5000".parse().unwrap();
        assert_eq!(
            trusted
                .client(via_proxy, &headers("198.51.100.7, 10.0.0.5"))
                .to_string(),
            "198.51.100.7"
        );
        assert_eq!(
            trusted.client(direct, &headers("198.51.100.7")).to_string(),
            "203.0.113.9"
        );
        assert_eq!(
            trusted.client(via_proxy, &HeaderMap::new()).to_string(),
            "10.1.2.3"
        );
        assert_eq!(
            TrustedProxies::default()
                .client(via_proxy, &headers("1.2.3.4"))
                .to_string(),
            "10.1.2.3"
        );
        assert!(TrustedProxies::parse("not-an-ip").is_err());
    }

    #[test]
    fn forwarded_entries_with_a_port_name_the_client() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let proxy: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        for (xff, client) in [
            ("198.51.100.7:5678", "198.51.100.7"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("[2001:db8::2]", "2001:db8::2"),
            ("2001:db8::3", "2001:db8::3"),
            ("198.51.100.8:5678, 10.0.0.5:80", "198.51.100.8"),
        ] {
            assert_eq!(
                trusted.client(proxy, &headers(xff)).to_string(),
                client,
                "{xff}"
            );
        }
    }

    #[test]
    fn a_malformed_entry_makes_the_client_the_proxy_never_the_entry_to_its_left() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let proxy: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        for (xff, client) in [
            ("203.0.113.66, garbage", "10.1.2.3"),
            ("203.0.113.66, unknown, 10.0.0.5", "10.0.0.5"),
            ("203.0.113.66, 1.2.3.4.5", "10.1.2.3"),
            ("203.0.113.66,", "10.1.2.3"),
            ("203.0.113.66, [::1", "10.1.2.3"),
        ] {
            assert_eq!(
                trusted.client(proxy, &headers(xff)).to_string(),
                client,
                "{xff}"
            );
        }
    }
}
