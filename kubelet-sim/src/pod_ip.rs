//! Pod IP allocation from the node's pod CIDR — what the CNI plugin's IPAM (host-local)
//! does for a real kubelet (`pkg/kubelet/kuberuntime` asks the runtime for a sandbox; the
//! CNI picks the address).
//!
//! Each node owns a /24: addresses `.2` to `.254` (`.0` is the network, `.1` the bridge
//! gateway, `.255` broadcast), handed out lowest-free-first and returned when the pod is gone.
//! Pod IPs are unique per node, and node CIDRs are disjoint, so unique in the cluster.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

/// Hands out the addresses of one node's /24.
#[derive(Debug, Clone)]
pub struct PodIpAllocator {
    base: u32,
    free: BTreeSet<u8>,
    by_pod: HashMap<String, u8>,
}

impl PodIpAllocator {
    /// An allocator for the /24 starting at `base`.
    pub fn new(base: Ipv4Addr) -> Self {
        PodIpAllocator {
            base: u32::from(base),
            free: (2..=254).collect(),
            by_pod: HashMap::new(),
        }
    }

    /// The address of pod `uid`: the one it already has, else the lowest free one; none when
    /// the range is exhausted.
    pub fn allocate(&mut self, uid: &str) -> Option<Ipv4Addr> {
        if let Some(host) = self.by_pod.get(uid) {
            return Some(self.address(*host));
        }
        let host = self.free.pop_first()?;
        self.by_pod.insert(uid.to_owned(), host);
        Some(self.address(host))
    }

    /// Records that pod `uid` already has `ip` (posted by an earlier run of the simulator);
    /// false if `ip` is not in this range or taken by another pod.
    pub fn claim(&mut self, uid: &str, ip: Ipv4Addr) -> bool {
        let raw = u32::from(ip);
        if raw & !0xff != self.base || self.by_pod.contains_key(uid) {
            return false;
        }
        let host = (raw & 0xff) as u8;
        if !self.free.remove(&host) {
            return false;
        }
        self.by_pod.insert(uid.to_owned(), host);
        true
    }

    /// Returns pod `uid`'s address to the pool.
    pub fn release(&mut self, uid: &str) {
        if let Some(host) = self.by_pod.remove(uid) {
            self.free.insert(host);
        }
    }

    /// Addresses in use.
    pub fn in_use(&self) -> usize {
        self.by_pod.len()
    }

    fn address(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::from(self.base | u32::from(host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn unique_stable_and_reused() {
        let mut a = PodIpAllocator::new(Ipv4Addr::new(10, 244, 3, 0));
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
        let mut a = PodIpAllocator::new(Ipv4Addr::new(10, 244, 0, 0));
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
        use crate::node_status::pod_cidr_base;
        let mut seen = HashSet::new();
        for node in 0..600 {
            let mut a = PodIpAllocator::new(pod_cidr_base(node));
            for pod in 0..3 {
                let ip = a.allocate(&format!("{pod}"));
                assert!(seen.insert(ip), "{ip:?} given twice");
            }
        }
    }
}
