//! IPv4 CIDR ranges: what Kubernetes takes from `k8s.io/utils/net` (`ParseCIDRSloppy`) and Go's
//! `net.IPNet` for the cluster CIDR, node pod CIDRs and pod IPs.
//!
//! ```text
//!   "10.244.0.0/16".parse::<Ipv4Cidr>()      network 10.244.0.0, prefix 16
//!   .subnet(24, 3)                           10.244.3.0/24   (the 4th /24 inside it)
//!   .contains(10.244.3.7)                    true
//!   .hosts()                                 10.244.0.1 ..= 10.244.255.254
//! ```
//!
//! Only IPv4: miniplane's clusters are single-stack IPv4 (no dual-stack pod or Service CIDRs).
//! A non-canonical form such as `10.244.1.5/24` parses to its network (`10.244.1.0/24`), as
//! `ParseCIDRSloppy` does.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 network: its first address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

/// Why a CIDR did not parse; the message is Go's `net.ParseCIDR` error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {0}")]
pub struct CidrParseError(pub String);

impl Ipv4Cidr {
    /// The network of `addr` with `prefix` bits (host bits cleared); `None` past /32.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        (prefix <= 32).then(|| Ipv4Cidr {
            network: Ipv4Addr::from(u32::from(addr) & mask(prefix)),
            prefix,
        })
    }

    /// The first address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// How many addresses the range spans (2^(32 − prefix)).
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The last address (the broadcast address of the range).
    pub fn last(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !mask(self.prefix))
    }

    /// Whether `ip` is in the range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == u32::from(self.network)
    }

    /// Whether the two ranges share an address (one contains the other).
    pub fn overlaps(&self, other: &Ipv4Cidr) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }

    /// How many /`prefix` subnets the range holds; 0 if `prefix` is shorter than its own.
    pub fn subnet_count(&self, prefix: u8) -> u64 {
        if prefix < self.prefix || prefix > 32 {
            0
        } else {
            1u64 << (prefix - self.prefix)
        }
    }

    /// The `index`-th /`prefix` subnet of the range (cidrset's `indexToCIDRBlock`).
    pub fn subnet(&self, prefix: u8, index: u64) -> Option<Ipv4Cidr> {
        if index >= self.subnet_count(prefix) {
            return None;
        }
        let offset = u32::try_from(index << (32 - u32::from(prefix))).ok()?;
        Ipv4Cidr::new(Ipv4Addr::from(u32::from(self.network) + offset), prefix)
    }

    /// Which /`prefix` subnet of the range `inner` is (its index), if `inner` is one.
    pub fn subnet_index(&self, inner: &Ipv4Cidr) -> Option<u64> {
        (inner.prefix >= self.prefix && self.contains(inner.network)).then(|| {
            u64::from(u32::from(inner.network) - u32::from(self.network))
                >> (32 - u32::from(inner.prefix))
        })
    }

    /// The `n`-th address of the range (0 is the network address).
    pub fn nth(&self, n: u64) -> Option<Ipv4Addr> {
        (n < self.size()).then(|| {
            // n < 2^32 here, so the conversion cannot fail.
            Ipv4Addr::from(u32::from(self.network).wrapping_add(n as u32))
        })
    }

    /// The offset of `ip` from the network address, if `ip` is in the range.
    pub fn offset_of(&self, ip: Ipv4Addr) -> Option<u64> {
        self.contains(ip)
            .then(|| u64::from(u32::from(ip) - u32::from(self.network)))
    }
}

fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || CidrParseError(s.to_owned());
        let (addr, prefix) = s.split_once('/').ok_or_else(err)?;
        if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| err())?;
        Ipv4Cidr::new(addr, prefix).ok_or_else(err)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_sloppily_and_prints_the_network() {
        assert_eq!(cidr("10.244.1.5/24").to_string(), "10.244.1.0/24");
        assert_eq!(cidr("0.0.0.0/0").size(), 1 << 32);
        for bad in [
            "10.244.0.0",
            "10.244.0.0/33",
            "10.244.0/16",
            "x/8",
            "10.0.0.0/+8",
            "::1/64",
        ] {
            assert_eq!(
                bad.parse::<Ipv4Cidr>().map_err(|e| e.to_string()),
                Err(format!("invalid CIDR address: {bad}"))
            );
        }
    }

    #[test]
    fn subnets_index_both_ways() {
        let cluster = cidr("10.244.0.0/16");
        assert_eq!(cluster.subnet_count(24), 256);
        assert_eq!(cluster.subnet_count(8), 0);
        assert_eq!(cluster.subnet(24, 3), Some(cidr("10.244.3.0/24")));
        assert_eq!(cluster.subnet(24, 255), Some(cidr("10.244.255.0/24")));
        assert_eq!(cluster.subnet(24, 256), None);
        assert_eq!(cluster.subnet_index(&cidr("10.244.7.0/24")), Some(7));
        assert_eq!(cluster.subnet_index(&cidr("10.245.7.0/24")), None);
        assert!(cluster.contains(Ipv4Addr::new(10, 244, 200, 1)));
        assert!(!cluster.contains(Ipv4Addr::new(10, 245, 0, 1)));
        assert!(cluster.overlaps(&cidr("10.0.0.0/8")));
        assert!(!cluster.overlaps(&cidr("10.96.0.0/12")));
        assert_eq!(cluster.last(), Ipv4Addr::new(10, 244, 255, 255));
        let node = cidr("10.244.3.0/24");
        assert_eq!(node.nth(2), Some(Ipv4Addr::new(10, 244, 3, 2)));
        assert_eq!(node.nth(256), None);
        assert_eq!(node.offset_of(Ipv4Addr::new(10, 244, 3, 9)), Some(9));
    }
}
