//! The node IPAM controller's decisions: which pod CIDR each Node gets from the cluster CIDR.
//!
//! Mirrors `pkg/controller/nodeipam/ipam/range_allocator.go` (`AllocateOrOccupyCIDR`,
//! `occupyCIDRs`, `ReleaseCIDR`, `filterOutServiceRange`) and `ipam/cidrset/cidr_set.go`
//! (`CidrSet`: `AllocateNext` round-robin from the last allocation, `Occupy`, `Release`). The
//! async shell is in [`controller`].
//!
//! ```text
//!   --cluster-cidr 10.244.0.0/16, --node-cidr-mask-size 24   → 256 blocks of /24
//!   at start: every Node's spec.podCIDRs occupied; the Service range taken out if it overlaps
//!   Node without podCIDRs ─▶ next free block ─▶ PATCH spec.podCIDR + spec.podCIDRs
//!                            none left ─▶ event CIDRNotAvailable, retry with backoff
//!   Node with podCIDRs    ─▶ occupy them (a restarted controller relearns the map)
//!   Node deleted          ─▶ its blocks are free again
//! ```
//!
//! Simplifications: IPv4 single-stack only (one cluster CIDR, one mask size), and a failed
//! PATCH is retried through the work queue instead of three times in place.

pub mod controller;

use apimachinery::{EventType, Ipv4Cidr, ObjectRef};
use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use crate::action::{self, Action, PatchType};

/// `--cluster-cidr` when `--allocate-node-cidrs` is on and no CIDR is given (kind's and
/// kubeadm's pod subnet).
pub const DEFAULT_CLUSTER_CIDR: &str = "10.244.0.0/16";

/// `--node-cidr-mask-size` for IPv4 (24).
pub const DEFAULT_NODE_CIDR_MASK_SIZE: u8 = 24;

/// `ErrCIDRRangeNoCIDRsRemaining`.
pub const NO_CIDRS_REMAINING: &str =
    "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range";

/// The controller's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--cluster-cidr`: where node pod CIDRs come from.
    pub cluster_cidr: Ipv4Cidr,
    /// `--node-cidr-mask-size`: the prefix of each node's block.
    pub node_cidr_mask_size: u8,
    /// `--service-cluster-ip-range`: taken out of the cluster CIDR where they overlap.
    pub service_cidr: Option<Ipv4Cidr>,
}

impl Config {
    /// Checks the flags as `setNodeCIDRMaskSizes` / `NewCIDRSet` do: the node blocks must fit
    /// in the cluster CIDR and not be absurdly many (cidrset's limit: at most 16 bits between
    /// the two prefixes).
    pub fn validate(&self) -> Result<(), String> {
        let (cluster, node) = (self.cluster_cidr.prefix(), self.node_cidr_mask_size);
        if node > 32 || node < cluster {
            return Err(format!(
                "--node-cidr-mask-size {node} does not fit in --cluster-cidr {}",
                self.cluster_cidr
            ));
        }
        if node - cluster > 16 {
            return Err(
                "New CIDR set failed; the node CIDR size is too big".to_string()
                    + &format!(
                        " (--cluster-cidr {}, --node-cidr-mask-size {node})",
                        self.cluster_cidr
                    ),
            );
        }
        Ok(())
    }
}

/// `cidrset.CidrSet`: which node blocks of the cluster CIDR are taken.
#[derive(Debug, Clone)]
pub struct CidrSet {
    cluster: Ipv4Cidr,
    mask: u8,
    used: Vec<bool>,
    allocated: usize,
    next_candidate: usize,
}

impl CidrSet {
    /// An empty set of /`mask` blocks in `cluster` (call [`Config::validate`] first: a mask
    /// shorter than the cluster's gives an empty set).
    pub fn new(cluster: Ipv4Cidr, mask: u8) -> Self {
        let count = usize::try_from(cluster.subnet_count(mask)).unwrap_or(0);
        CidrSet {
            cluster,
            mask,
            used: vec![false; count],
            allocated: 0,
            next_candidate: 0,
        }
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> Ipv4Cidr {
        self.cluster
    }

    /// Blocks in use and blocks in all.
    pub fn usage(&self) -> (usize, usize) {
        (self.allocated, self.used.len())
    }

    /// `AllocateNext`: the first free block from the one after the last allocation, wrapping.
    pub fn allocate_next(&mut self) -> Option<Ipv4Cidr> {
        let max = self.used.len();
        if self.allocated == max {
            return None;
        }
        let mut candidate = self.next_candidate;
        for _ in 0..max {
            if !self.used[candidate] {
                break;
            }
            candidate = (candidate + 1) % max;
        }
        self.next_candidate = (candidate + 1) % max;
        self.used[candidate] = true;
        self.allocated += 1;
        self.cluster.subnet(self.mask, candidate as u64)
    }

    /// The block indices `cidr` covers (`getBeginningAndEndIndices`): a block of the set's
    /// size or bigger (the Service range) or smaller (inside one block).
    fn indices(&self, cidr: &Ipv4Cidr) -> Result<std::ops::RangeInclusive<usize>, String> {
        if !self.cluster.overlaps(cidr) {
            return Err(format!(
                "cidr {cidr} is out the range of cluster cidr {}",
                self.cluster
            ));
        }
        let last = self.used.len().saturating_sub(1);
        let index = |ip| {
            self.cluster
                .offset_of(ip)
                .map(|o| (o >> (32 - u32::from(self.mask))) as usize)
        };
        let begin = if cidr.contains(self.cluster.network()) {
            0
        } else {
            index(cidr.network()).unwrap_or(0)
        };
        let end = if cidr.contains(self.cluster.last()) {
            last
        } else {
            index(cidr.last()).unwrap_or(last)
        };
        Ok(begin..=end)
    }

    /// `Occupy`: marks the blocks `cidr` covers as taken; an error if it is outside the range.
    pub fn occupy(&mut self, cidr: &Ipv4Cidr) -> Result<(), String> {
        for i in self.indices(cidr)? {
            if !self.used[i] {
                self.used[i] = true;
                self.allocated += 1;
            }
        }
        Ok(())
    }

    /// `Release`: frees the blocks `cidr` covers.
    pub fn release(&mut self, cidr: &Ipv4Cidr) -> Result<(), String> {
        for i in self.indices(cidr)? {
            if self.used[i] {
                self.used[i] = false;
                self.allocated -= 1;
            }
        }
        Ok(())
    }

    /// Whether `cidr`'s blocks are all taken.
    pub fn is_occupied(&self, cidr: &Ipv4Cidr) -> bool {
        self.indices(cidr)
            .map(|r| r.into_iter().all(|i| self.used[i]))
            .unwrap_or(false)
    }
}

/// A new set for `config`, with the Service range taken out (`filterOutServiceRange`).
pub fn new_cidr_set(config: &Config) -> CidrSet {
    let mut set = CidrSet::new(config.cluster_cidr, config.node_cidr_mask_size);
    if let Some(service) = &config.service_cidr
        && set.cluster.overlaps(service)
        && let Err(e) = set.occupy(service)
    {
        tracing::warn!(error = %e, "filtering the service CIDR out of the cluster CIDR failed");
    }
    set
}

/// A Node's `spec.podCIDRs` (falling back on `spec.podCIDR`), parsed.
pub fn node_pod_cidrs(node: &Node) -> Result<Vec<Ipv4Cidr>, String> {
    let spec = node.spec.as_ref();
    let list = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
    let list = if list.is_empty() {
        spec.and_then(|s| s.pod_cidr.clone())
            .filter(|c| !c.is_empty())
            .into_iter()
            .collect()
    } else {
        list
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    list.iter()
        .map(|c| {
            c.parse()
                .map_err(|_| format!("failed to parse node {name}, CIDR {c}"))
        })
        .collect()
}

/// `occupyCIDRs`: marks a Node's blocks as taken.
pub fn occupy_node(set: &mut CidrSet, node: &Node) -> Result<(), String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    for (idx, cidr) in node_pod_cidrs(node)?.iter().enumerate() {
        if idx > 0 {
            return Err(format!(
                "node:{name} has an allocated cidr: {cidr} at index:{idx} that does not exist in cluster cidrs configuration"
            ));
        }
        set.occupy(cidr).map_err(|e| {
            format!("failed to mark cidr[{cidr}] at idx [{idx}] as occupied for node: {name}: {e}")
        })?;
    }
    Ok(())
}

/// `ReleaseCIDR`: frees a deleted Node's blocks.
pub fn release_node(set: &mut CidrSet, node: &Node) -> Result<(), String> {
    for cidr in node_pod_cidrs(node)? {
        set.release(&cidr)
            .map_err(|e| format!("error when releasing CIDR {cidr}: {e}"))?;
    }
    Ok(())
}

/// What one sync of a Node decided.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeIpamDecision {
    /// Nothing to write (being deleted, or its CIDR was occupied).
    Nothing(String),
    /// Write this block to the Node (the actions: the PATCH).
    Assign {
        /// The block, already taken in the set (release it if the write fails).
        cidr: Ipv4Cidr,
        /// The PATCH.
        actions: Vec<Action>,
        /// One line for logs and the trace.
        summary: String,
    },
    /// No block could be had (or the Node's own is unusable): the actions (an event) and why.
    Failed {
        /// The event to record.
        actions: Vec<Action>,
        /// The error the sync returns (the key is retried with backoff).
        error: String,
    },
}

/// The event `RecordNodeStatusChange` writes: reason `status`, "Node N status is now: S".
pub fn node_status_event(node: &Node, status: &str) -> Action {
    let name = node.metadata.name.clone().unwrap_or_default();
    action::event(
        ObjectRef {
            api_version: "v1".into(),
            kind: "Node".into(),
            namespace: None,
            name: name.clone(),
            uid: node.metadata.uid.clone().unwrap_or_default(),
        },
        EventType::Normal,
        status,
        format!("Node {name} status is now: {status}"),
    )
}

/// `AllocateOrOccupyCIDR` for one Node of the cache.
pub fn sync_node(set: &mut CidrSet, node: &Node) -> NodeIpamDecision {
    let name = node.metadata.name.clone().unwrap_or_default();
    if node.metadata.deletion_timestamp.is_some() {
        return NodeIpamDecision::Nothing(format!("{name}: being deleted"));
    }
    match node_pod_cidrs(node) {
        Ok(cidrs) if !cidrs.is_empty() => {
            return match occupy_node(set, node) {
                Ok(()) => {
                    NodeIpamDecision::Nothing(format!("{name}: has {}, marked as taken", cidrs[0]))
                }
                Err(error) => NodeIpamDecision::Failed {
                    actions: Vec::new(),
                    error,
                },
            };
        }
        Ok(_) => {}
        Err(error) => {
            return NodeIpamDecision::Failed {
                actions: Vec::new(),
                error,
            };
        }
    }
    let Some(cidr) = set.allocate_next() else {
        return NodeIpamDecision::Failed {
            actions: vec![node_status_event(node, "CIDRNotAvailable")],
            error: format!(
                "failed to allocate cidr from cluster cidr at idx:0: {NO_CIDRS_REMAINING}"
            ),
        };
    };
    let (used, all) = set.usage();
    let body = json!({ "spec": { "podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()] } });
    NodeIpamDecision::Assign {
        cidr,
        actions: vec![Action::Patch {
            target: ObjectRef {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: None,
                name: name.clone(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
            },
            patch_type: PatchType::StrategicMerge,
            body,
        }],
        summary: format!(
            "{name}: pod CIDR {cidr} from {} ({used} of {all} blocks in use)",
            set.cluster()
        ),
    }
}

#[cfg(test)]
mod tests;
