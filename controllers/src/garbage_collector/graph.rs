//! The owner graph: every object the garbage collector knows, linked by ownerReferences.
//!
//! Mirrors `pkg/controller/garbagecollector/graph.go` (`node`, `objectReference`) and the
//! bookkeeping of `graph_builder.go` (`uidToNode`, adding and removing nodes, "virtual"
//! owners that are referenced but not observed).
//!
//! ```text
//!   Deployment web (uid d1)
//!      ▲ ownerReferences[uid d1, controller, blockOwnerDeletion]
//!   ReplicaSet web-5d4f8 (uid r1)          dependents(d1) = {r1}
//!      ▲                                   dependents(r1) = {p1, p2}
//!   Pod web-5d4f8-abcde (p1), Pod ...-fghij (p2)
//! ```
//!
//! Nodes are keyed by UID. An ownerReference to a UID with no node is kept in the
//! dependents index anyway — that owner is "virtual" (absent from the snapshot): maybe
//! deleted, maybe not yet seen, which is why deleting its dependents needs a live check.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::ObjectRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{Metadata, Resource};

/// Finalizer of an owner deleted with `propagationPolicy: Foreground`.
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";
/// Finalizer of an owner deleted with `propagationPolicy: Orphan`.
pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";

/// One object in the graph (`node`).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Who it is.
    pub identity: ObjectRef,
    /// Its ownerReferences.
    pub owners: Vec<OwnerReference>,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub being_deleted: bool,
    /// `resourceVersion`, sent with finalizer patches as an optimistic lock.
    pub resource_version: Option<String>,
}

impl Node {
    /// `isDeletingDependents`: being deleted in the foreground.
    pub fn is_deleting_dependents(&self) -> bool {
        self.being_deleted && self.has_finalizer(FINALIZER_DELETE_DEPENDENTS)
    }

    /// Whether the object carries `finalizer`.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

/// The graph (`GraphBuilder.uidToNode` plus the reverse index of dependents).
#[derive(Debug, Clone, Default)]
pub struct OwnerGraph {
    nodes: BTreeMap<String, Node>,
    /// owner UID → UIDs of objects that reference it (whether or not the owner is known).
    dependents: BTreeMap<String, BTreeSet<String>>,
}

impl OwnerGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a typed object (an informer ADDED/MODIFIED event).
    pub fn observe<K: Resource + Metadata<Ty = ObjectMeta>>(&mut self, obj: &K) {
        self.observe_meta(K::API_VERSION, K::KIND, obj.metadata());
    }

    /// Adds or replaces an object of any kind from its metadata (the garbage collector
    /// watches every resource through metadata-only informers).
    pub fn observe_meta(&mut self, api_version: &str, kind: &str, meta: &ObjectMeta) {
        let Some(uid) = meta.uid.clone() else { return };
        let owners = meta.owner_references.clone().unwrap_or_default();
        // Most updates (status, labels) keep the owners: the dependents index stays as it is
        // (an owner of 10,000 pods would otherwise lose and regain one of them per update).
        let same_owners = self.nodes.get(&uid).is_some_and(|n| n.owners == owners);
        if !same_owners {
            self.forget(&uid);
            for owner in &owners {
                self.dependents
                    .entry(owner.uid.clone())
                    .or_default()
                    .insert(uid.clone());
            }
        }
        let node = Node {
            identity: ObjectRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: meta.namespace.clone(),
                name: meta.name.clone().unwrap_or_default(),
                uid: uid.clone(),
            },
            owners,
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            being_deleted: meta.deletion_timestamp.is_some(),
            resource_version: meta.resource_version.clone(),
        };
        self.nodes.insert(uid, node);
    }

    /// Removes an object (an informer DELETED event). Its dependents stay, now pointing at a
    /// virtual owner.
    pub fn forget(&mut self, uid: &str) {
        if let Some(old) = self.nodes.remove(uid) {
            for owner in &old.owners {
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(uid);
                    if set.is_empty() {
                        self.dependents.remove(&owner.uid);
                    }
                }
            }
        }
    }

    /// Records the resourceVersion of an update that changed nothing else the graph holds
    /// (owners, finalizers, deletion): a pod's binding and status writes. Returns false if
    /// `uid` is not in the graph (then [`OwnerGraph::observe_meta`] must record it).
    pub fn observe_resource_version(&mut self, uid: &str, resource_version: Option<&str>) -> bool {
        match self.nodes.get_mut(uid) {
            Some(node) => {
                node.resource_version = resource_version.map(str::to_owned);
                true
            }
            None => false,
        }
    }

    /// The node with `uid`, if observed.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// All observed nodes, by UID.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// `getDependents`: observed objects with an ownerReference to `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|d| self.nodes.get(d))
            .collect()
    }

    /// `blockingDependents`: dependents whose reference to `uid` has `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        self.dependents(uid)
            .into_iter()
            .filter(|d| {
                d.owners
                    .iter()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
            })
            .collect()
    }
}
