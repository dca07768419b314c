//! `persistentVolumeClaimRetentionPolicy`: which owner references a StatefulSet's claims
//! carry, so that the garbage collector deletes them when the set is deleted (`whenDeleted:
//! Delete`) or their pod is scaled away (`whenScaled: Delete`).
//!
//! Mirrors `claimOwnerMatchesSetAndPod`, `updateClaimOwnerRefForSetAndPod`, `hasOwnerRef`,
//! `hasStaleOwnerRef`, `setOwnerRef` and `removeOwnerRef` in
//! `pkg/controller/statefulset/stateful_set_utils.go` (feature `StatefulSetAutoDeletePVC`, GA
//! in 1.32).
//!
//! | whenScaled | whenDeleted | pod in range | pod scaled down |
//! | --- | --- | --- | --- |
//! | Retain | Retain | no refs | no refs |
//! | Retain | Delete | set | set |
//! | Delete | Retain | no refs | pod |
//! | Delete | Delete | set | pod |

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::identity::in_ordinal_range;
use crate::owner_ref::{name, uid};

/// `Retain` / `Delete` of each half of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `whenDeleted` is `Delete`.
    pub delete_when_deleted: bool,
    /// `whenScaled` is `Delete`.
    pub delete_when_scaled: bool,
}

/// `getPersistentVolumeClaimRetentionPolicy`: unset or unknown values count as `Retain`.
pub fn policy(set: &StatefulSet) -> Policy {
    let p = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let is_delete = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    Policy {
        delete_when_deleted: is_delete(p.and_then(|p| p.when_deleted.as_ref())),
        delete_when_scaled: is_delete(p.and_then(|p| p.when_scaled.as_ref())),
    }
}

fn has_owner_ref(claim: &PersistentVolumeClaim, owner_uid: &str) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == owner_uid)
}

/// `hasStaleOwnerRef`: a reference naming `pod` with another UID (a previous pod of that
/// ordinal, whose scale-down the garbage collector is acting on).
pub fn has_stale_owner_ref(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == "Pod" && r.name == name(&pod.metadata) && r.uid != uid(&pod.metadata))
}

fn set_owner_ref(claim: &mut PersistentVolumeClaim, reference: OwnerReference) -> bool {
    if has_owner_ref(claim, &reference.uid) {
        return false;
    }
    claim
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new)
        .push(reference);
    true
}

fn remove_owner_ref(claim: &mut PersistentVolumeClaim, owner_uid: &str) -> bool {
    if !has_owner_ref(claim, owner_uid) {
        return false;
    }
    if let Some(refs) = claim.metadata.owner_references.as_mut() {
        refs.retain(|r| r.uid != owner_uid);
    }
    true
}

/// The plain (non-controller) reference `setOwnerRef` adds.
fn reference(
    api_version: &str,
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name(meta).to_owned(),
        uid: uid(meta).to_owned(),
        ..Default::default()
    }
}

/// Which owners the claim of `pod` should have: (the set, the pod).
fn wanted(set: &StatefulSet, pod: &Pod) -> (bool, bool) {
    let p = policy(set);
    let scaled_down = !in_ordinal_range(pod, set);
    match (p.delete_when_scaled, p.delete_when_deleted) {
        (false, false) => (false, false),
        (false, true) => (true, false),
        (true, false) => (false, scaled_down),
        (true, true) => (!scaled_down, scaled_down),
    }
}

/// `claimOwnerMatchesSetAndPod` (`isClaimOwnerUpToDate`).
pub fn claim_owner_matches(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let (want_set, want_pod) = wanted(set, pod);
    has_owner_ref(claim, uid(&set.metadata)) == want_set
        && has_owner_ref(claim, uid(&pod.metadata)) == want_pod
}

/// `updateClaimOwnerRefForSetAndPod`: sets and removes the set's and the pod's references as
/// the policy wants; true if the claim changed.
pub fn update_claim_owner_refs(
    claim: &mut PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let (want_set, want_pod) = wanted(set, pod);
    let mut changed = false;
    let set_uid = uid(&set.metadata).to_owned();
    let pod_uid = uid(&pod.metadata).to_owned();
    if want_set {
        changed |= set_owner_ref(claim, reference("apps/v1", "StatefulSet", &set.metadata));
    } else {
        changed |= remove_owner_ref(claim, &set_uid);
    }
    if want_pod {
        if !pod_uid.is_empty() {
            changed |= set_owner_ref(claim, reference("v1", "Pod", &pod.metadata));
        }
    } else if !pod_uid.is_empty() {
        changed |= remove_owner_ref(claim, &pod_uid);
    }
    changed
}
