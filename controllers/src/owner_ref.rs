//! ownerReferences: who controls an object.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go`
//! (`GetControllerOf`, `IsControlledBy`, `NewControllerRef`). At most one ownerReference of an
//! object has `controller: true`; that owner is the object's **controller** — the one
//! Deployment that manages a ReplicaSet, the one ReplicaSet that manages a Pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{Metadata, Resource};

/// The ownerReference with `controller: true`, if any.
pub fn get_controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// Whether `meta`'s controller is the object with `owner_uid`.
pub fn is_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    get_controller_of(meta).is_some_and(|r| r.uid == owner_uid)
}

/// `metav1.NewControllerRef`: a reference to `owner` with `controller` and
/// `blockOwnerDeletion` set, as controllers put on what they create.
pub fn new_controller_ref<K: Resource + Metadata<Ty = ObjectMeta>>(owner: &K) -> OwnerReference {
    let meta = owner.metadata();
    OwnerReference {
        api_version: K::API_VERSION.to_string(),
        kind: K::KIND.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's UID, or `""` when missing.
pub fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or("")
}

/// The object's name, or `""` when missing.
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}
