//! A DaemonSet's history: one ControllerRevision per pod template it has run.
//!
//! Mirrors `constructHistory`, `snapshot`, `dedupCurHistories`, `cleanupHistory`, `getPatch`
//! and `Match` in `pkg/controller/daemon/update.go`; what it shares with the StatefulSet
//! controller (`pkg/controller/history/controller_history.go`) is in [`crate::history`].
//!
//! ```text
//!   DaemonSet fluentd, template T2          ControllerRevisions it controls
//!                                           fluentd-7c9b8d  revision 1  data = patch(T1)
//!   patch(T2) = {"spec":{"template":        fluentd-5f6d4c  revision 2  data = patch(T2) ◀ current
//!     {"$patch":"replace", ...T2}}}
//!   the current one's hash labels new pods: controller-revision-hash=5f6d4c
//! ```
//!
//! A revision is "current" when its `data` is the DaemonSet's patch; if none is, a new one
//! named `<ds>-<hash>` is created with revision `max(old) + 1`; if the current one is older
//! than another (after `kubectl rollout undo`), its revision number is raised. `kubectl
//! rollout undo` applies an old revision's `data` to the DaemonSet as a strategic merge patch,
//! which is why `data` replaces the whole template (`"$patch": "replace"`).
//!
//! Unlike Kubernetes, the hash is the one of [`crate::deployment::hash`] (FNV-1a over the
//! template's JSON instead of Go's `spew` dump), so names differ from a real cluster's; and a
//! revision matches when its `data` equals the patch as JSON values rather than as bytes.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::deployment::hash::compute_hash;
pub use crate::history::{CONTROLLER_REVISION_HASH_LABEL, revision_hash};
use crate::history::{RevisionParts, new_controller_revision, template_patch};
use crate::owner_ref::new_controller_ref;

/// `getPatch`: `{"spec":{"template":{"$patch":"replace", ...the template}}}`.
pub fn get_patch(ds: &DaemonSet) -> Value {
    template_patch(ds.spec.as_ref().map(|s| &s.template))
}

/// `Match`: whether `revision` holds the DaemonSet's current template.
pub fn matches(ds: &DaemonSet, revision: &ControllerRevision) -> bool {
    revision.data.as_ref().map(|d| &d.0) == Some(&get_patch(ds))
}

/// `ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)`.
pub fn template_hash(ds: &DaemonSet) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    compute_hash(&template, collisions)
}

/// The revision `snapshot` creates: named `<ds>-<hash>`, labelled with the template's labels
/// and the hash, annotated with the DaemonSet's annotations (so `kubernetes.io/change-cause`
/// shows in `kubectl rollout history`), controlled by the DaemonSet.
pub fn new_revision(ds: &DaemonSet, revision: i64) -> ControllerRevision {
    let mut created = new_controller_revision(RevisionParts {
        parent: &ds.metadata,
        controller_ref: new_controller_ref(ds),
        template_labels: ds
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.as_ref()),
        data: get_patch(ds),
        revision,
        hash: template_hash(ds),
    });
    created.metadata.annotations = ds.metadata.annotations.clone();
    created
}

/// The revisions of a DaemonSet sorted out by `constructHistory`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct History {
    /// Revisions matching the current template, highest revision first (more than one only
    /// after a race; `dedupCurHistories` keeps the first).
    pub current: Vec<ControllerRevision>,
    /// The other revisions.
    pub old: Vec<ControllerRevision>,
}

impl History {
    /// Splits `revisions` into current and old.
    pub fn split(ds: &DaemonSet, revisions: Vec<ControllerRevision>) -> Self {
        let (mut current, old): (Vec<_>, Vec<_>) =
            revisions.into_iter().partition(|r| matches(ds, r));
        current.sort_by_key(|r| std::cmp::Reverse(r.revision));
        History { current, old }
    }

    /// `maxRevision(old) + 1`: the number the current revision must carry.
    pub fn next_revision(&self) -> i64 {
        crate::history::next_revision(&self.old)
    }
}

/// `cleanupHistory`: the old revisions to delete so that at most `revisionHistoryLimit` stay,
/// lowest revision first, sparing any whose hash a live pod still carries.
pub fn revisions_to_delete<'a>(
    ds: &DaemonSet,
    old: &'a [ControllerRevision],
    pods: &[&Pod],
) -> Vec<&'a ControllerRevision> {
    let keep = ds
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let mut to_kill = old.len().saturating_sub(keep);
    if to_kill == 0 {
        return Vec::new();
    }
    let live: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get(CONTROLLER_REVISION_HASH_LABEL)
        })
        .map(String::as_str)
        .collect();
    let mut sorted: Vec<&ControllerRevision> = old.iter().collect();
    sorted.sort_by_key(|r| r.revision);
    let mut victims = Vec::new();
    for revision in sorted {
        if to_kill == 0 {
            break;
        }
        if live.contains(revision_hash(revision).as_str()) {
            continue;
        }
        victims.push(revision);
        to_kill -= 1;
    }
    victims
}
