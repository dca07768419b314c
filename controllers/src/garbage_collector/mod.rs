//! The garbage collector: deleting what lost its owners, and the three propagation policies.
//!
//! Mirrors `pkg/controller/garbagecollector/garbagecollector.go` (`attemptToDeleteItem`,
//! `classifyReferences`, `processDeletingDependentsItem`, `attemptToOrphanWorker`,
//! `removeFinalizer`) over the [`graph::OwnerGraph`] that `graph_builder.go` maintains.
//!
//! ```text
//!   kubectl delete deploy web                  (propagationPolicy)
//!   ├─ Background: Deployment gone at once ─▶ its ReplicaSets' owner is absent ─▶ GC
//!   │     verifies (live GET) and deletes them ─▶ then their pods, the same way
//!   ├─ Foreground: Deployment gets deletionTimestamp + finalizer foregroundDeletion
//!   │     ─▶ GC deletes dependents (foreground, so grandchildren go first) ─▶ when no
//!   │     dependent with blockOwnerDeletion is left, GC removes the finalizer ─▶ gone
//!   └─ Orphan: finalizer orphan ─▶ GC patches each dependent's ownerReference away
//!         ─▶ removes the finalizer ─▶ the Deployment goes, the ReplicaSets stay
//! ```
//!
//! Unlike Kubernetes, which reacts to graph events through two work queues
//! (`attemptToDelete`, `attemptToOrphan`), [`garbage_collect`] sweeps the whole snapshot and
//! returns every decision; the per-object functions are the same steps.

pub mod controller;
pub mod custom_resources;
pub mod graph;

use crate::action::{Action, PatchType, PropagationPolicy};
use crate::controller_ref::delete_owner_refs_patch;
use apimachinery::ObjectRef;
use graph::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS, Node, OwnerGraph};
use serde_json::json;

/// The decisions of one sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct GarbageCollection {
    /// What to do (deduplicated), in a stable order.
    pub actions: Vec<Action>,
    /// One line per object acted on, saying why.
    pub summary: Vec<String>,
}

/// Sweep the graph: orphan the dependents of owners being deleted with `orphan`, and
/// [`attempt_to_delete_item`] every object that has owners or is deleting its dependents.
pub fn garbage_collect(graph: &OwnerGraph) -> GarbageCollection {
    let mut out = GarbageCollection {
        actions: Vec::new(),
        summary: Vec::new(),
    };
    for node in graph.nodes() {
        let (actions, why) =
            if node.being_deleted && node.has_finalizer(FINALIZER_ORPHAN_DEPENDENTS) {
                (
                    attempt_to_orphan(graph, node),
                    "being deleted with orphan: drop the references to it, then the finalizer",
                )
            } else if node.is_deleting_dependents() || !node.owners.is_empty() {
                (attempt_to_delete_item(graph, node), "")
            } else {
                continue;
            };
        for action in actions {
            if !out.actions.contains(&action) {
                out.actions.push(action.clone());
                let line = if why.is_empty() {
                    action.describe()
                } else {
                    format!("{}: {why}", node.identity)
                };
                if !out.summary.contains(&line) {
                    out.summary.push(line);
                }
            }
        }
    }
    out
}

/// How an object's ownerReferences stand (`classifyReferences`).
#[derive(Debug, Default)]
struct Classified<'a> {
    /// Owners that exist and are not deleting their dependents.
    solid: Vec<&'a Node>,
    /// Owners absent from the graph (to be confirmed with a live GET).
    dangling: Vec<ObjectRef>,
    /// Owners being deleted in the foreground.
    waiting_for_dependents_deletion: Vec<&'a Node>,
}

fn classify_references<'a>(graph: &'a OwnerGraph, item: &Node) -> Classified<'a> {
    let mut c = Classified::default();
    for owner in &item.owners {
        match graph.get(&owner.uid) {
            Some(node) if node.is_deleting_dependents() => {
                c.waiting_for_dependents_deletion.push(node)
            }
            Some(node) => c.solid.push(node),
            None => c.dangling.push(ObjectRef {
                api_version: owner.api_version.clone(),
                kind: owner.kind.clone(),
                namespace: item.identity.namespace.clone(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
            }),
        }
    }
    c
}

/// Wraps `action` in a live check that `dangling` owners are really gone, if there are any.
fn verified(dangling: Vec<ObjectRef>, action: Action) -> Action {
    if dangling.is_empty() {
        action
    } else {
        Action::VerifyOwnersAbsent {
            owners: dangling,
            then: Box::new(action),
        }
    }
}

/// `attemptToDeleteItem`: what to do about one object given its owners.
///
/// * being deleted (not in the foreground) → nothing, wait for it to go;
/// * deleting its dependents → [`process_deleting_dependents_item`];
/// * some owner solid → keep it, but drop references to dangling or foreground-deleting owners;
/// * only owners deleting in the foreground, and it has dependents → delete it in the
///   foreground too (so its own dependents go first);
/// * otherwise (no owner left) → delete it, honouring its own orphan/foreground finalizer.
pub fn attempt_to_delete_item(graph: &OwnerGraph, item: &Node) -> Vec<Action> {
    if item.being_deleted && !item.is_deleting_dependents() {
        return Vec::new();
    }
    if item.is_deleting_dependents() {
        return process_deleting_dependents_item(graph, item);
    }
    if item.owners.is_empty() {
        return Vec::new();
    }
    let c = classify_references(graph, item);
    if !c.solid.is_empty() {
        if c.dangling.is_empty() && c.waiting_for_dependents_deletion.is_empty() {
            return Vec::new();
        }
        let uids: Vec<&str> = c
            .dangling
            .iter()
            .map(|o| o.uid.as_str())
            .chain(
                c.waiting_for_dependents_deletion
                    .iter()
                    .map(|n| n.identity.uid.as_str()),
            )
            .collect();
        let body = delete_owner_refs_patch(&item.identity.uid, &uids);
        let patch = Action::Patch {
            target: item.identity.clone(),
            patch_type: PatchType::StrategicMerge,
            body,
        };
        return vec![verified(c.dangling, patch)];
    }
    let dependents = graph.dependents(&item.identity.uid);
    if !c.waiting_for_dependents_deletion.is_empty() && !dependents.is_empty() {
        let mut actions = Vec::new();
        if dependents.iter().any(|d| d.is_deleting_dependents()) {
            // A cycle of foreground deletions: stop blocking our owners, or nothing finishes.
            actions.push(unblock_owner_references_patch(item));
        }
        let delete = Action::Delete {
            target: item.identity.clone(),
            propagation: Some(PropagationPolicy::Foreground),
        };
        actions.push(verified(c.dangling, delete));
        return actions;
    }
    let policy = if item.has_finalizer(FINALIZER_ORPHAN_DEPENDENTS) {
        PropagationPolicy::Orphan
    } else if item.has_finalizer(FINALIZER_DELETE_DEPENDENTS) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    };
    vec![verified(
        c.dangling,
        Action::Delete {
            target: item.identity.clone(),
            propagation: Some(policy),
        },
    )]
}

/// Why the collector acts on `item` as it does, worded as Kubernetes' garbage collector logs
/// the same branch of `attemptToDeleteItem` / `processDeletingDependentsItem` /
/// `attemptToOrphanWorker` (for traces: `sync garbagecollector` spans carry it). Empty when it
/// has nothing to do.
pub fn reason(graph: &OwnerGraph, item: &Node) -> String {
    let names = |owners: &[&Node]| {
        owners
            .iter()
            .map(|o| format!("{} {}", o.identity.kind, o.identity.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if item.being_deleted && item.has_finalizer(FINALIZER_ORPHAN_DEPENDENTS) {
        return "orphaning dependents of item, then removing its orphan finalizer".into();
    }
    if item.is_deleting_dependents() {
        let blocking = graph.blocking_dependents(&item.identity.uid);
        if blocking.is_empty() {
            return "remove DeleteDependents finalizer for item".into();
        }
        // Each dependent is then attempted: say why it goes (or stays).
        let each: Vec<String> = blocking
            .iter()
            .filter(|d| !d.is_deleting_dependents())
            .map(|d| {
                let why = reason(graph, d);
                let why = if why.is_empty() {
                    "waiting".into()
                } else {
                    why
                };
                format!("{} {}: {why}", d.identity.kind, d.identity.name)
            })
            .collect();
        return format!(
            "adding dependent to attemptToDelete, because its owner is deletingDependents ({}): {}",
            names(&blocking),
            each.join("; ")
        );
    }
    if item.being_deleted || item.owners.is_empty() {
        return String::new();
    }
    let c = classify_references(graph, item);
    let dangling = c
        .dangling
        .iter()
        .map(|o| format!("{} {}", o.kind, o.name))
        .collect::<Vec<_>>()
        .join(", ");
    let waiting = names(&c.waiting_for_dependents_deletion);
    if !c.solid.is_empty() {
        if c.dangling.is_empty() && c.waiting_for_dependents_deletion.is_empty() {
            return String::new();
        }
        return format!(
            "item has at least one existing owner ({}): remove dangling references and waiting references for item",
            names(&c.solid)
        );
    }
    if !c.waiting_for_dependents_deletion.is_empty()
        && !graph.dependents(&item.identity.uid).is_empty()
    {
        return format!(
            "at least one owner of item has FinalizerDeletingDependents ({waiting}), and the item itself has dependents, so it is going to be deleted in Foreground"
        );
    }
    let mut why = Vec::new();
    if !c.dangling.is_empty() {
        why.push(format!("item's owner is not found ({dangling})"));
    }
    if !c.waiting_for_dependents_deletion.is_empty() {
        why.push(format!(
            "its owner is deleting dependents in the foreground ({waiting})"
        ));
    }
    why.push("Deleting item".into());
    why.join(": ")
}

/// `unblockOwnerReferencesStrategicMergePatch`: set `blockOwnerDeletion: false` on every
/// blocking ownerReference of `item`.
fn unblock_owner_references_patch(item: &Node) -> Action {
    let refs: Vec<_> = item
        .owners
        .iter()
        .filter(|o| o.block_owner_deletion == Some(true))
        .map(|o| {
            let mut o = o.clone();
            o.block_owner_deletion = Some(false);
            o
        })
        .collect();
    let body = json!({"metadata": {"ownerReferences": refs, "uid": item.identity.uid}});
    Action::Patch {
        target: item.identity.clone(),
        patch_type: PatchType::StrategicMerge,
        body,
    }
}

/// `processDeletingDependentsItem`: an owner deleting in the foreground loses its
/// `foregroundDeletion` finalizer once no dependent blocks it; until then its blocking
/// dependents that are not themselves deleting dependents are attempted.
pub fn process_deleting_dependents_item(graph: &OwnerGraph, item: &Node) -> Vec<Action> {
    let blocking = graph.blocking_dependents(&item.identity.uid);
    if blocking.is_empty() {
        return vec![remove_finalizer(item, FINALIZER_DELETE_DEPENDENTS)];
    }
    blocking
        .into_iter()
        .filter(|d| !d.is_deleting_dependents())
        .flat_map(|d| attempt_to_delete_item(graph, d))
        .collect()
}

/// `attemptToOrphanWorker`: remove the ownerReference to `owner` from each dependent, then
/// the owner's `orphan` finalizer.
pub fn attempt_to_orphan(graph: &OwnerGraph, owner: &Node) -> Vec<Action> {
    let mut actions: Vec<Action> = graph
        .dependents(&owner.identity.uid)
        .into_iter()
        .map(|d| Action::Patch {
            target: d.identity.clone(),
            patch_type: PatchType::StrategicMerge,
            body: delete_owner_refs_patch(&d.identity.uid, &[owner.identity.uid.as_str()]),
        })
        .collect();
    actions.push(remove_finalizer(owner, FINALIZER_ORPHAN_DEPENDENTS));
    actions
}

/// `removeFinalizer`: a JSON merge patch of the remaining finalizers, locked to the
/// `resourceVersion` the decision was based on.
pub fn remove_finalizer(item: &Node, finalizer: &str) -> Action {
    let remaining: Vec<&String> = item.finalizers.iter().filter(|f| *f != finalizer).collect();
    let body =
        json!({"metadata": {"resourceVersion": item.resource_version, "finalizers": remaining}});
    Action::Patch {
        target: item.identity.clone(),
        patch_type: PatchType::Merge,
        body,
    }
}

#[cfg(test)]
mod tests;
