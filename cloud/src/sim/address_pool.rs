//! Address pools: where the simulated cloud takes its IPv4 addresses from, as a cloud's VPC
//! subnet (internal IPs), its public pool (external IPs) and its load balancer pool do.
//!
//! ```text
//!   172.31.0.0/16     INTERNAL   an instance's InternalIP when the launcher gives none
//!   198.51.100.0/24   EXTERNAL   an instance's ExternalIP (TEST-NET-2, documentation only),
//!   198.18.0.0/15     EXTERNAL   then these, past its 254 (RFC 2544's benchmarking range)
//!   203.0.113.0/24    INGRESS    a load balancer's ingress IP (TEST-NET-3, documentation only)
//! ```
//!
//! A pool hands out its lowest free host address (neither the network's first address nor
//! its last, the broadcast), so addresses are predictable and a freed one is the next one
//! taken. The documentation ranges of RFC 5737 route nowhere: nothing on the machine answers
//! them, which is right for a simulated cloud. A cluster of more than 254 nodes needs more
//! external addresses than TEST-NET-2 has; they continue in 198.18.0.0/15, which is reserved
//! for network benchmarks and routes nowhere either (131,070 addresses).

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 range (`network/prefix`) addresses are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AddressPool {
    network: Ipv4Addr,
    prefix: u8,
}

/// Where instances get an InternalIP when the launcher names none.
pub(crate) const INTERNAL: AddressPool = AddressPool::new(Ipv4Addr::new(172, 31, 0, 0), 16);
/// Where instances get their ExternalIP, the first range first.
pub(crate) const EXTERNAL: [AddressPool; 2] = [
    AddressPool::new(Ipv4Addr::new(198, 51, 100, 0), 24),
    AddressPool::new(Ipv4Addr::new(198, 18, 0, 0), 15),
];
/// Where load balancers get their ingress IP.
pub(crate) const INGRESS: AddressPool = AddressPool::new(Ipv4Addr::new(203, 0, 113, 0), 24);

impl AddressPool {
    /// The range `network/prefix`; `prefix` is at most 30 (a range with host addresses).
    pub(crate) const fn new(network: Ipv4Addr, prefix: u8) -> AddressPool {
        AddressPool { network, prefix }
    }

    fn first_and_last(&self) -> (u32, u32) {
        let size = 1u32 << (32 - u32::from(self.prefix));
        let base = u32::from(self.network) & !(size - 1);
        (base, base + size - 1)
    }

    /// How many host addresses the pool has (254 for a /24).
    pub(crate) fn host_count(&self) -> u32 {
        let (first, last) = self.first_and_last();
        last - first - 1
    }

    /// The lowest host address not in `used`, or `None` when every one is taken.
    pub(crate) fn lowest_free(&self, used: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        self.lowest_free_from(Ipv4Addr::UNSPECIFIED, |ip| used.contains(&ip))
    }

    /// The lowest host address at or above `from` that is not `used`, or `None`. With `from`
    /// below every free address it is [`AddressPool::lowest_free`]; a caller that knows the
    /// addresses below some point are taken starts there and skips them.
    pub(crate) fn lowest_free_from(
        &self,
        from: Ipv4Addr,
        used: impl Fn(Ipv4Addr) -> bool,
    ) -> Option<Ipv4Addr> {
        let (first, last) = self.first_and_last();
        (u32::from(from).max(first + 1)..last)
            .map(Ipv4Addr::from)
            .find(|ip| !used(*ip))
    }

    /// The network address, which names the pool.
    pub(crate) fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The pool's last address (its broadcast, never handed out).
    pub(crate) fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.first_and_last().1)
    }
}

impl fmt::Display for AddressPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_addresses_go_on_past_test_net_2() {
        let mut used: BTreeSet<Ipv4Addr> =
            (1..=254).map(|i| Ipv4Addr::new(198, 51, 100, i)).collect();
        used.remove(&Ipv4Addr::new(198, 51, 100, 7));
        assert_eq!(
            EXTERNAL.iter().find_map(|p| p.lowest_free(&used)),
            Some(Ipv4Addr::new(198, 51, 100, 7)),
            "TEST-NET-2 first"
        );
        used.insert(Ipv4Addr::new(198, 51, 100, 7));
        assert_eq!(
            EXTERNAL.iter().find_map(|p| p.lowest_free(&used)),
            Some(Ipv4Addr::new(198, 18, 0, 1))
        );
        assert_eq!(EXTERNAL[1].host_count(), 131_070);
    }

    #[test]
    fn hands_out_the_lowest_free_host_address() {
        let mut used = BTreeSet::new();
        assert_eq!(
            INGRESS.lowest_free(&used),
            Some(Ipv4Addr::new(203, 0, 113, 1))
        );
        used.extend([Ipv4Addr::new(203, 0, 113, 1), Ipv4Addr::new(203, 0, 113, 3)]);
        assert_eq!(
            INGRESS.lowest_free(&used),
            Some(Ipv4Addr::new(203, 0, 113, 2))
        );
        // Addresses outside the pool do not matter.
        used.insert(Ipv4Addr::new(10, 0, 0, 2));
        used.insert(Ipv4Addr::new(203, 0, 113, 2));
        assert_eq!(
            INGRESS.lowest_free(&used),
            Some(Ipv4Addr::new(203, 0, 113, 4))
        );
    }

    #[test]
    fn never_hands_out_the_network_or_broadcast_address_and_runs_out() {
        let pool = AddressPool::new(Ipv4Addr::new(192, 0, 2, 0), 30);
        assert_eq!(pool.host_count(), 2);
        let mut used = BTreeSet::new();
        while let Some(ip) = pool.lowest_free(&used) {
            used.insert(ip);
        }
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)]
        );
        assert_eq!(INGRESS.host_count(), 254);
        assert_eq!(INTERNAL.host_count(), 65_534);
        assert_eq!(EXTERNAL[0].to_string(), "198.51.100.0/24");
    }
}
