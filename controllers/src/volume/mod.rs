//! Persistent storage: the PV controller's binding of claims to volumes ([`binder`]) and a
//! simulated external provisioner ([`provisioner`]), with their async shell ([`controller`]).
//!
//! Mirrors `pkg/controller/volume/persistentvolume/pv_controller.go` (`syncClaim`,
//! `syncUnboundClaim`, `syncBoundClaim`, `syncVolume`, `bind`, `reclaimVolume`,
//! `provisionClaim`), `pkg/controller/volume/persistentvolume/util` (`FindMatchingVolume`,
//! `IsDelayBindingMode`) and, for the provisioner, `sig-storage-lib-external-provisioner`'s
//! `controller.go` (`shouldProvision`, `provisionClaimOperation`, `shouldDelete`):
//!
//! ```text
//!   PVC created (class "standard", WaitForFirstConsumer)
//!     binder: no matching Available PV; the class delays binding and no node is selected
//!       ─▶ Pending, event WaitForFirstConsumer
//!   scheduler's VolumeBinding sets volume.kubernetes.io/selected-node
//!     binder: the class names an external provisioner ─▶ annotate the claim with
//!       volume.kubernetes.io/storage-provisioner, event ExternalProvisioning
//!     provisioner (miniplane.io/simulated): create PV pvc-<claim uid> (capacity = request,
//!       claimRef, hostPath /var/lib/miniplane/<pv>, node affinity on the selected node),
//!       event ProvisioningSucceeded
//!     binder: the PV is pre-bound to the claim ─▶ PV claimRef + bound-by-controller, PV Bound,
//!       PVC volumeName + bind-completed, PVC Bound (capacity, access modes)
//!   PVC deleted ─▶ PV Released ─▶ reclaimPolicy Delete: the provisioner deletes its PV;
//!                                 Retain: kept, Released
//! ```
//!
//! Every decision is a plain function returning [`VolumeAction`]s with a summary for the trace;
//! the shell carries them out in order and stops at the first failed write, as
//! [`crate::action`] describes for the other controllers.
//!
//! Simplified: one queue per controller (claims keyed with their namespace, volumes without)
//! instead of Kubernetes' separate claim and volume queues; pending claims are looked at again
//! every 15 s (`--pvclaimbinder-sync-period`) rather than on a full resync of both caches;
//! no in-tree volume plugins, so a statically created volume with reclaim policy Delete or
//! Recycle fails its reclaim as a volume without a deleter does in Kubernetes; no
//! `pvc-protection` / `pv-protection` finalizers (the StorageObjectInUseProtection admission
//! and its controllers are not built); no volume expansion, no `dataSource`.

pub mod binder;
pub mod controller;
pub mod provisioner;

#[cfg(test)]
mod tests;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::action::Event;

/// Set on a claim once the binder has bound it (`AnnBindCompleted`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a volume or claim the binder bound (not the user) (`AnnBoundByController`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a delayed claim (`AnnSelectedNode`).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The provisioner asked to provision a claim (`AnnStorageProvisioner`).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// Its beta predecessor, still written (`AnnBetaStorageProvisioner`).
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The provisioner that made a volume (`AnnDynamicallyProvisioned`).
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// The beta annotation naming a class (`BetaStorageClassAnnotation`).
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The simulated provisioner's name, the `provisioner` of the default `standard` class.
pub const SIMULATED_PROVISIONER: &str = "miniplane.io/simulated";
/// The default StorageClass every miniplane cluster has, as kind has.
pub const DEFAULT_CLASS_NAME: &str = "standard";
/// The annotation that makes a class the default.
pub const ANN_IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// Where the simulated provisioner's volumes (would) live on a node.
pub const SIMULATED_VOLUME_ROOT: &str = "/var/lib/miniplane";

/// One thing a volume controller's sync decided.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeAction {
    /// `POST` a PersistentVolume.
    CreateVolume(Box<PersistentVolume>),
    /// `PUT` a PersistentVolume (claimRef, annotations).
    UpdateVolume(Box<PersistentVolume>),
    /// `PUT .../persistentvolumes/<name>/status` (phase).
    UpdateVolumeStatus(Box<PersistentVolume>),
    /// `DELETE` a PersistentVolume (UID precondition; NotFound counts as done).
    DeleteVolume(ObjectRef),
    /// `PUT` a PersistentVolumeClaim (volumeName, annotations).
    UpdateClaim(Box<PersistentVolumeClaim>),
    /// `PUT .../persistentvolumeclaims/<name>/status` (phase, capacity, access modes).
    UpdateClaimStatus(Box<PersistentVolumeClaim>),
    /// Look at this claim again soon (`claimQueue.Add`).
    EnqueueClaim(ObjectKey),
    /// Record an event.
    Event(Event),
}

impl VolumeAction {
    /// A short line for logs and traces.
    pub fn describe(&self) -> String {
        let key = |m: &ObjectMeta| ObjectKey::from_meta(m);
        match self {
            VolumeAction::CreateVolume(pv) => {
                format!("create PersistentVolume {}", key(&pv.metadata))
            }
            VolumeAction::UpdateVolume(pv) => {
                format!("update PersistentVolume {}", key(&pv.metadata))
            }
            VolumeAction::UpdateVolumeStatus(pv) => format!(
                "set PersistentVolume {} phase {}",
                key(&pv.metadata),
                volume_phase(pv)
            ),
            VolumeAction::DeleteVolume(r) => format!("delete {r}"),
            VolumeAction::UpdateClaim(c) => {
                format!("update PersistentVolumeClaim {}", key(&c.metadata))
            }
            VolumeAction::UpdateClaimStatus(c) => format!(
                "set PersistentVolumeClaim {} phase {}",
                key(&c.metadata),
                claim_phase(c)
            ),
            VolumeAction::EnqueueClaim(k) => format!("requeue claim {k}"),
            VolumeAction::Event(e) => {
                format!("event {} {}: {}", e.type_.as_str(), e.reason, e.message)
            }
        }
    }
}

/// A sync's decision: what to do and why (the trace's summary).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Why, in a line (the span's summary and `reason` attribute).
    pub summary: String,
    /// What to do, in order.
    pub actions: Vec<VolumeAction>,
}

impl Decision {
    /// A decision with nothing to do.
    pub fn nothing(summary: impl Into<String>) -> Self {
        Decision {
            summary: summary.into(),
            actions: Vec::new(),
        }
    }
}

/// An event about `obj`.
pub(crate) fn event_on(
    regarding: ObjectRef,
    type_: EventType,
    reason: &str,
    message: impl Into<String>,
) -> VolumeAction {
    VolumeAction::Event(Event {
        regarding,
        type_,
        reason: reason.to_owned(),
        message: message.into(),
    })
}

/// Whether `meta` has the annotation `key`.
pub fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// The annotation `key` of `meta`.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Sets the annotation `key` to `value`.
pub fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.to_owned());
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `spec.storageClassName`.
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS)
        .map(str::to_owned)
        .or_else(|| {
            claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
        })
        .unwrap_or_default()
}

/// `GetPersistentVolumeClass`: the beta annotation, else `spec.storageClassName`.
pub fn volume_class(volume: &PersistentVolume) -> String {
    annotation(&volume.metadata, ANN_BETA_STORAGE_CLASS)
        .map(str::to_owned)
        .or_else(|| {
            volume
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
        })
        .unwrap_or_default()
}

/// A claim's phase (`""` before the API server defaulted it).
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// A volume's phase.
pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `IsDelayBindingMode`: the claim's class binds on first consumer.
pub fn is_delay_binding_mode(claim: &PersistentVolumeClaim, classes: &[StorageClass]) -> bool {
    let name = claim_class(claim);
    !name.is_empty()
        && classes.iter().any(|c| {
            c.metadata.name.as_deref() == Some(name.as_str())
                && c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        })
}

/// The class named `name`.
pub fn find_class<'a>(classes: &'a [StorageClass], name: &str) -> Option<&'a StorageClass> {
    classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
}
