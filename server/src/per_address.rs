//! How much one client holds at once: connections (`serve`) and requests
//! in flight (`limits`), counted per address. An IPv6 client counts by its
//! /64 (one host is usually given a whole /64: counting single addresses
//! there would count nothing), an IPv4-mapped address as the IPv4 one.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv6Addr},
    sync::{Arc, Mutex},
};

/// The network a client address is counted under: the IPv4 address, or the
/// IPv6 address's /64 (its last 64 bits zero).
pub fn network_of(client: IpAddr) -> IpAddr {
    match client {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Counts of what each network holds, each up to `limit`.
#[derive(Debug)]
pub struct PerAddress {
    held: Mutex<HashMap<IpAddr, usize>>,
    limit: usize,
}

/// One unit a network holds; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    counts: Arc<PerAddress>,
    network: IpAddr,
}

impl PerAddress {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(PerAddress {
            held: Mutex::default(),
            limit: limit.max(1),
        })
    }

    /// A slot for one more from `client`'s network, unless it holds its limit.
    pub fn take(counts: &Arc<PerAddress>, client: IpAddr) -> Option<Slot> {
        let network = network_of(client);
        let mut held = counts.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(network).or_default();
        if *count >= counts.limit {
            return None;
        }
        *count += 1;
        Some(Slot {
            counts: counts.clone(),
            network,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.counts.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.network) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.network);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_ipv6_client_counts_by_its_slash_64_and_a_mapped_ipv4_as_itself() {
        assert_eq!(network_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(network_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(network_of(ip("192.0.2.7")), ip("192.0.2.7"));
    }

    #[test]
    fn a_network_holds_at_most_its_limit_and_gets_slots_back_when_dropped() {
        let counts = PerAddress::new(2);
        let a = PerAddress::take(&counts, ip("2001:db8::1")).unwrap();
        let _b = PerAddress::take(&counts, ip("2001:db8::2")).unwrap();
        assert!(
            PerAddress::take(&counts, ip("2001:db8::3")).is_none(),
            "the same /64"
        );
        assert!(PerAddress::take(&counts, ip("2001:db8:0:1::3")).is_some());
        drop(a);
        assert!(PerAddress::take(&counts, ip("2001:db8::3")).is_some());
    }
}
