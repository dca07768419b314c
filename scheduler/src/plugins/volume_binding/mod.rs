//! VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable, on the node
//! (`pkg/scheduler/framework/plugins/volumebinding/volume_binding.go` here, the binder's
//! decisions in [`binder`], its assume cache in [`assume_cache`]).
//!
//! ```text
//! PreFilter  every claim exists ("persistentvolumeclaim \"data\" not found"), is not being
//!            deleted, not Lost; sorted into bound / unbound WaitForFirstConsumer / unbound
//!            immediate ("pod has unbound immediate PersistentVolumeClaims"); no claim: Skip
//! Filter     binder::find_pod_volumes on each node (volume node affinity, a static PV to
//!            bind, or a class that provisions there)
//! Reserve    the chosen node's volumes assumed in the cache: PVs with claimRef, claims with
//!            volume.kubernetes.io/selected-node
//! PreBind    (the shell, crate::scheduler) PUT the PVs, PATCH the claims, wait until the PV
//!            controller has bound every claim (binder::check_bindings), then bind the pod
//! ```
//!
//! Queueing hints ([`claim_change_may_help`], [`class_change_may_help`]): a pod this plugin
//! rejected goes back to the queue when one of its claims (same namespace, same name) is added
//! or updated, when any PersistentVolume is added or updated, when a StorageClass is added or
//! its `allowedTopologies` change, and (like every pod) when a node is added or updated.
//!
//! Simplified: Score is absent (`StorageCapacityScoring` is alpha and off in 1.33, so
//! VolumeBinding never scores by default); there is no CSI translation nor CSIStorageCapacity
//! check ([`binder`]). The binder's internal errors (a class without `volumeBindingMode`, a
//! claim selector that does not parse) reject the pod as UnschedulableAndUnresolvable with the
//! error's text, where Kubernetes fails the cycle with an `Error` status of the same text.

pub mod assume_cache;
pub mod binder;

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::fmt::go_quote;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::StorageClass;

pub use assume_cache::VolumeCache;
pub use binder::{BindingInfo, PodVolumeClaims, PodVolumes};

use super::{Code, Status};
use crate::cache::Snapshot;
use crate::cycle_state::CycleState;
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "VolumeBinding";
/// PreFilter's reason when a claim should have been bound by the PV controller already.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// `DefaultBindTimeoutSeconds`: how long PreBind waits for the PV controller.
pub const BIND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// What PreFilter captured for the filters (`stateData`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreFilterState {
    /// The pod's claims by kind, with the volumes of the delayed claims' classes.
    pub claims: PodVolumeClaims,
    /// The volumes the bound claims name, by name (a missing one is absent).
    pub bound_volumes: BTreeMap<String, Arc<PersistentVolume>>,
    /// The classes of the delayed claims, by name.
    pub classes: BTreeMap<String, Arc<StorageClass>>,
}

/// PreFilter's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum PreFilterResult {
    /// The pod has no claim (Kubernetes' `Skip`): every node passes.
    #[default]
    Skip,
    /// The pod cannot be scheduled anywhere now.
    Rejected(Status),
    /// The claims to check on each node.
    State(PreFilterState),
}

/// The claim name of a pod volume: `persistentVolumeClaim.claimName`, or `<pod>-<volume>` for a
/// generic ephemeral volume (`ephemeral.VolumeClaimName`); `None` for other volumes. The bool
/// says whether it is ephemeral.
pub fn volume_claim_name(pod: &Pod, volume: &Volume) -> Option<(String, bool)> {
    if let Some(pvc) = &volume.persistent_volume_claim {
        return Some((pvc.claim_name.clone(), false));
    }
    volume.ephemeral.as_ref().map(|_| {
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        (format!("{pod_name}-{}", volume.name), true)
    })
}

/// The names of the claims a pod uses, in volume order.
pub fn claim_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| volume_claim_name(pod, v).map(|(name, _)| name))
        .collect()
}

fn reject(reason: String) -> PreFilterResult {
    PreFilterResult::Rejected(Status::new(
        NAME,
        Code::UnschedulableAndUnresolvable,
        reason,
    ))
}

/// `podHasPVCs` then `GetPodVolumeClaims`: the pod's claims as the cache has them.
pub fn pre_filter(pod: &PodInfo, volumes: &VolumeCache) -> PreFilterResult {
    let pod = pod.pod.as_ref();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut claims = Vec::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((name, ephemeral)) = volume_claim_name(pod, volume) else {
            continue;
        };
        let Some(pvc) = volumes.pvc(namespace, &name) else {
            return reject(if ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {}",
                    go_quote(&name)
                )
            } else {
                format!("persistentvolumeclaim {} not found", go_quote(&name))
            });
        };
        let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some("Lost") {
            return reject(format!(
                "persistentvolumeclaim {} bound to non-existent persistentvolume {}",
                go_quote(&name),
                go_quote(binder::volume_name(pvc))
            ));
        }
        if pvc.metadata.deletion_timestamp.is_some() {
            return reject(format!(
                "persistentvolumeclaim {} is being deleted",
                go_quote(&name)
            ));
        }
        if ephemeral && let Err(reason) = volume_is_for_pod(pod, pvc) {
            return reject(reason);
        }
        claims.push(pvc.clone());
    }
    if claims.is_empty() {
        return PreFilterResult::Skip;
    }
    let claims = match binder::get_pod_volume_claims(&claims, volumes) {
        Ok(claims) => claims,
        Err(err) => return reject(err.0),
    };
    if !claims.unbound_claims_immediate.is_empty() {
        return reject(ERR_REASON_UNBOUND_IMMEDIATE.into());
    }
    let bound_volumes = claims
        .bound_claims
        .iter()
        .filter_map(|pvc| {
            let name = binder::volume_name(pvc);
            volumes.pv(name).map(|pv| (name.to_owned(), pv.clone()))
        })
        .collect();
    let classes = claims
        .unbound_claims_delay_binding
        .iter()
        .filter_map(|pvc| {
            let name = binder::persistent_volume_claim_class(pvc);
            volumes.class(&name).map(|c| (name, c.clone()))
        })
        .collect();
    PreFilterResult::State(PreFilterState {
        claims,
        bound_volumes,
        classes,
    })
}

/// `ephemeral.VolumeIsForPod`: a generic ephemeral volume's claim must be owned by the pod.
fn volume_is_for_pod(pod: &Pod, pvc: &PersistentVolumeClaim) -> Result<(), String> {
    let owned = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == pod.metadata.uid.as_ref());
    if owned {
        return Ok(());
    }
    Err(format!(
        "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
        pvc.metadata.namespace.as_deref().unwrap_or(""),
        pvc.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    ))
}

fn inputs(state: &PreFilterState) -> binder::FindInputs<'_> {
    binder::FindInputs {
        claims: &state.claims,
        bound_volumes: &state.bound_volumes,
        classes: &state.classes,
    }
}

/// Filter: the node suits every claim (`FindPodVolumes` found no conflict reason).
pub fn filter(_pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> Result<(), Status> {
    let PreFilterResult::State(state) = &state.volume_binding else {
        return Ok(());
    };
    match binder::find_pod_volumes(&inputs(state), &node.node) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(reasons)) => Err(Status {
            plugin: NAME,
            code: Code::UnschedulableAndUnresolvable,
            reasons: reasons.into_iter().map(str::to_owned).collect(),
        }),
        Err(err) => Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            format!("running {} filter plugin: {}", go_quote(NAME), err.0),
        )),
    }
}

/// Reserve (`AssumePodVolumes`) for the node the decision chose: what PreBind must write,
/// with the assumed objects (volumes with their `claimRef`, claims with `selected-node`), or
/// `None` when every claim is bound already (or the pod has none). The caller records the
/// objects with [`assume`] under the same lock as the decision.
pub fn reserve(
    pod: &PodInfo,
    snapshot: Snapshot<'_>,
    node_name: &str,
) -> Result<Option<PodVolumes>, String> {
    let state = match pre_filter(pod, snapshot.volumes) {
        PreFilterResult::Skip => return Ok(None),
        PreFilterResult::Rejected(status) => return Err(status.reasons.join(", ")),
        PreFilterResult::State(state) => state,
    };
    if state.claims.unbound_claims_delay_binding.is_empty() {
        // arePodVolumesBound: nothing to write.
        return Ok(None);
    }
    let Some(node) = snapshot.nodes.iter().find(|n| &*n.name == node_name) else {
        return Err(format!("node {} not found", go_quote(node_name)));
    };
    let volumes = match binder::find_pod_volumes(&inputs(&state), &node.node) {
        Ok(Ok(volumes)) => volumes,
        Ok(Err(reasons)) => return Err(reasons.join(", ")),
        Err(err) => return Err(err.0),
    };
    let static_bindings = volumes
        .static_bindings
        .into_iter()
        .map(|b| BindingInfo {
            pv: Arc::new(binder::bind_volume_to_claim(&b.pv, &b.pvc)),
            pvc: b.pvc,
        })
        .collect();
    let dynamic_provisions = volumes
        .dynamic_provisions
        .iter()
        .map(|pvc| Arc::new(binder::with_selected_node(pvc, node_name)))
        .collect();
    Ok(Some(PodVolumes {
        static_bindings,
        dynamic_provisions,
    }))
}

/// Records Reserve's objects in the cache, so the next decisions see them.
pub fn assume(cache: &mut VolumeCache, volumes: &PodVolumes) {
    for binding in &volumes.static_bindings {
        cache.assume_pv(binding.pv.clone());
    }
    for pvc in &volumes.dynamic_provisions {
        cache.assume_pvc(pvc.clone());
    }
}

/// Unreserve (`RevertAssumedPodVolumes`): drops Reserve's objects from the cache.
pub fn unreserve(cache: &mut VolumeCache, volumes: &PodVolumes) {
    for binding in &volumes.static_bindings {
        cache.restore_pv(binding.pv.metadata.name.as_deref().unwrap_or(""));
    }
    for pvc in &volumes.dynamic_provisions {
        let key = assume_cache::claim_key(pvc);
        cache.restore_pvc(&key.0, &key.1);
    }
}

/// `isSchedulableAfterPersistentVolumeClaimChange`: a claim added or updated may help a pod
/// in its namespace that uses it.
pub fn claim_change_may_help(
    pod_namespace: &str,
    pod_claims: &[String],
    pvc: &PersistentVolumeClaim,
) -> bool {
    pvc.metadata.namespace.as_deref() == Some(pod_namespace)
        && pvc
            .metadata
            .name
            .as_ref()
            .is_some_and(|name| pod_claims.contains(name))
}

/// `isSchedulableAfterStorageClassChange`: a new class, or new `allowedTopologies`.
pub fn class_change_may_help(old: Option<&StorageClass>, new: &StorageClass) -> bool {
    old.is_none_or(|old| old.allowed_topologies != new.allowed_topologies)
}

#[cfg(test)]
mod tests;
