//! Pod IP allocation from the node's pod CIDR — what the CNI plugin's IPAM (host-local)
//! does for a real kubelet (`pkg/kubelet/kuberuntime` asks the runtime for a sandbox; the
//! CNI picks the address).
//!
//! Each node owns a pod CIDR: the one the node IPAM controller wrote into its
//! `spec.podCIDR`, or (as a kubelet started with `--pod-cidr`) one it picks itself,
//! `10.244.<index>.0/24`. Addresses go from the range's network + 2 to the one before its
//! broadcast address (`.0` is the network, `.1` the bridge gateway, `.255` broadcast in a /24),
//! handed out lowest-free-first and returned when the pod is gone. Pod IPs are unique per
//! node, and node CIDRs are disjoint, so unique in the cluster.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

use apimachinery::Ipv4Cidr;

/// Hands out the addresses of one node's pod CIDR.
#[derive(Debug, Clone)]
pub struct PodIpAllocator {
    cidr: Ipv4Cidr,
    /// Offsets given back, below `next`.
    released: BTreeSet<u64>,
    /// The lowest offset never handed out.
    next: u64,
    by_pod: HashMap<String, u64>,
}

/// The first usable offset: network + 2.
const FIRST: u64 = 2;

impl PodIpAllocator {
    /// An allocator for `cidr`.
    pub fn new(cidr: Ipv4Cidr) -> Self {
        PodIpAllocator {
            cidr,
            released: BTreeSet::new(),
            next: FIRST,
            by_pod: HashMap::new(),
        }
    }

    /// The range it hands out from.
    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// One past the last usable offset (the broadcast address).
    fn end(&self) -> u64 {
        self.cidr.size().saturating_sub(1)
    }

    /// The address of pod `uid`: the one it already has, else the lowest free one; none when
    /// the range is exhausted.
    pub fn allocate(&mut self, uid: &str) -> Option<Ipv4Addr> {
        if let Some(offset) = self.by_pod.get(uid) {
            return self.cidr.nth(*offset);
        }
        let offset = match self.released.pop_first() {
            Some(o) => o,
            None if self.next < self.end() => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        self.by_pod.insert(uid.to_owned(), offset);
        self.cidr.nth(offset)
    }

    /// Records that pod `uid` already has `ip` (posted by an earlier run of the simulator);
    /// false if `ip` is not in this range or taken by another pod.
    pub fn claim(&mut self, uid: &str, ip: Ipv4Addr) -> bool {
        let Some(offset) = self.cidr.offset_of(ip) else {
            return false;
        };
        if offset < FIRST || offset >= self.end() || self.by_pod.contains_key(uid) {
            return false;
        }
        if offset < self.next {
            if !self.released.remove(&offset) {
                return false;
            }
        } else {
            self.released.extend(self.next..offset);
            self.next = offset + 1;
        }
        self.by_pod.insert(uid.to_owned(), offset);
        true
    }

    /// Returns pod `uid`'s address to the pool.
    pub fn release(&mut self, uid: &str) {
        if let Some(offset) = self.by_pod.remove(uid) {
            self.released.insert(offset);
        }
    }

    /// Addresses in use.
    pub fn in_use(&self) -> usize {
        self.by_pod.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn wider_ranges_and_claims_past_the_next_free() {
        let mut a = PodIpAllocator::new(cidr("10.244.0.0/23"));
        assert!(a.claim("late", Ipv4Addr::new(10, 244, 1, 7)));
        assert_eq!(a.allocate("first"), Some(Ipv4Addr::new(10, 244, 0, 2)));
        let n = (0..1000)
            .filter_map(|i| a.allocate(&format!("p{i}")))
            .count();
        assert_eq!(n, 512 - 3 - 2, "2 .. 510, minus the two taken");
        assert!(!a.claim("x", Ipv4Addr::new(10, 244, 1, 255)), "broadcast");
    }

    #[test]
    fn unique_stable_and_reused() {
        let mut a = PodIpAllocator::new(cidr("10.244.3.0/24"));
        let first = a.allocate("a");
        assert_eq!(first, Some(Ipv4Addr::new(10, 244, 3, 2)));
        assert_eq!(a.allocate("a"), first, "same pod, same address");
        let ips: HashSet<_> = (0..253)
            .filter_map(|i| a.allocate(&format!("p{i}")))
            .collect();
        assert_eq!(ips.len(), 252, "253 addresses in all, one taken by a");
        assert!(!ips.contains(&Ipv4Addr::new(10, 244, 3, 2)));
        assert_eq!(a.allocate("one-too-many"), None);
        a.release("a");
        assert_eq!(a.allocate("b"), first, "released address is reused");
        assert_eq!(a.in_use(), 253);
    }

    #[test]
    fn claims_existing_addresses() {
        let mut a = PodIpAllocator::new(cidr("10.244.0.0/24"));
        assert!(a.claim("old", Ipv4Addr::new(10, 244, 0, 2)));
        assert!(!a.claim("other", Ipv4Addr::new(10, 244, 0, 2)), "taken");
        assert!(
            !a.claim("x", Ipv4Addr::new(10, 244, 1, 5)),
            "another node's range"
        );
        assert_eq!(a.allocate("new"), Some(Ipv4Addr::new(10, 244, 0, 3)));
        assert_eq!(a.allocate("old"), Some(Ipv4Addr::new(10, 244, 0, 2)));
    }

    #[test]
    fn nodes_do_not_overlap() {
        use crate::node_status::pod_cidr;
        let mut seen = HashSet::new();
        for node in 0..600 {
            let mut a = PodIpAllocator::new(pod_cidr(node));
            for pod in 0..3 {
                let ip = a.allocate(&format!("{pod}"));
                assert!(seen.insert(ip), "{ip:?} given twice");
            }
        }
    }
}
