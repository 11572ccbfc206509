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
    /// is ignored entirely.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.ip();
        if !self.trusts(peer) {
            return peer;
        }
        let forwarded: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        forwarded
            .into_iter()
            .rev()
            .find(|ip| !self.trusts(*ip))
            .unwrap_or(peer)
    }
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
}
