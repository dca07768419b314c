//! The index beside the simulated cloud's instances ([`CloudState::instances`]): the live
//! instance of each name, every id, the addresses in use, and per address pool where the
//! search for a free address starts. With it a launch, a lookup by name or id and a change of
//! state cost the same with 10 instances or 10,000 (a cluster of 10,000 nodes launches 10,000
//! instances at start). A database's secondary indexes, on a small scale; no Kubernetes
//! counterpart.
//!
//! [`CloudState::instances`]: super::state::CloudState::instances

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use super::address_pool::AddressPool;
use super::instances::CloudInstance;

/// Where the instances are, by what the cloud looks them up by, so that no call scans them
/// all. Never saved: built from the instances when the state is read
/// ([`InstanceIndex::new`]), then changed with them by the calls of `instances.rs`, the only
/// code that changes the instances.
#[derive(Debug, Clone, Default)]
pub(crate) struct InstanceIndex {
    /// The position in `instances` of each name's live instance.
    pub(super) live: HashMap<String, usize>,
    /// The position in `instances` of every instance kept (terminated ones too) by id.
    pub(super) ids: HashMap<String, usize>,
    /// The internal IPs of the live instances.
    pub(super) internal: HashSet<Ipv4Addr>,
    /// The external IPs of the live instances.
    pub(super) external: HashSet<Ipv4Addr>,
    /// How many instances are terminated (and kept for an hour).
    pub(super) terminated: usize,
    /// Per address pool (by its network address), a point below which every address of the
    /// pool is taken: where the search for the lowest free one starts. Lowered when an
    /// address is freed; a hint only, so any lower value is also right.
    taken_below: HashMap<Ipv4Addr, Ipv4Addr>,
}

impl InstanceIndex {
    /// The index of `instances` (for two live instances of one name, the later one).
    pub(crate) fn new(instances: &[CloudInstance]) -> InstanceIndex {
        let mut index = InstanceIndex::default();
        for (at, i) in instances.iter().enumerate() {
            index.add(at, i);
        }
        index
    }

    pub(super) fn add(&mut self, at: usize, i: &CloudInstance) {
        self.ids.insert(i.id.clone(), at);
        if i.is_live() {
            self.live.insert(i.name.clone(), at);
            self.internal.insert(i.internal_ip);
            self.external.insert(i.external_ip);
        } else {
            self.terminated += 1;
        }
    }

    /// `i` (live until now) was terminated: its name and addresses are free.
    pub(super) fn terminated(&mut self, i: &CloudInstance) {
        self.live.remove(&i.name);
        self.terminated += 1;
        self.internal.remove(&i.internal_ip);
        self.external.remove(&i.external_ip);
        for below in self.taken_below.values_mut() {
            *below = (*below).min(i.internal_ip).min(i.external_ip);
        }
    }

    /// The lowest free address of the first of `pools` that has one (free among the live
    /// instances' external IPs if `external`, else their internal IPs).
    pub(super) fn lowest_free(
        &mut self,
        pools: &[AddressPool],
        external: bool,
    ) -> Option<Ipv4Addr> {
        let used = if external {
            &self.external
        } else {
            &self.internal
        };
        for pool in pools {
            let from = self
                .taken_below
                .get(&pool.network())
                .copied()
                .unwrap_or(Ipv4Addr::UNSPECIFIED);
            let found = pool.lowest_free_from(from, |ip| used.contains(&ip));
            self.taken_below
                .insert(pool.network(), found.unwrap_or_else(|| pool.broadcast()));
            if found.is_some() {
                return found;
            }
        }
        None
    }
}
