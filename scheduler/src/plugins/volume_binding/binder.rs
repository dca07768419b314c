//! The volume binder's decisions (`pkg/scheduler/framework/plugins/volumebinding/binder.go`,
//! with `FindMatchingVolume`, `CheckNodeAffinity` and friends from
//! `component-helpers/storage/volume/`): which claims of a pod are bound, whether a node suits
//! them, what Reserve assumes and when PreBind is done.
//!
//! ```text
//! FindPodVolumes(pod, claims, node)
//!   bound claims     → the PV's nodeAffinity.required must match the node's labels
//!                      ("node(s) had volume node affinity conflict"; a missing PV:
//!                      "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")
//!   unbound, delayed → selected-node set for another node: no ("didn't find available
//!                      persistent volumes to bind"); else smallest Available static PV of the
//!                      class that fits size, mode, access modes, selector and node affinity;
//!                      else the class must provision (a provisioner, allowedTopologies)
//! ```
//!
//! Unlike Kubernetes there is no in-tree-to-CSI translation (`tryTranslatePVToCSI`) and no
//! CSIDriver/CSIStorageCapacity informers: `hasEnoughCapacity` finds no CSIDriver that opts
//! into capacity tracking, which in Kubernetes means "enough", so
//! [`ERR_REASON_NOT_ENOUGH_SPACE`] is never given.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apimachinery::fmt::go_quote;
use apimachinery::{Quantity, Selector};
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::assume_cache::{VolumeCache, is_not_older};
use crate::plugins::node_affinity::term_matches;

/// `ErrReasonBindConflict`.
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// `ErrReasonNodeConflict`.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// `ErrReasonNotEnoughSpace`.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// `ErrReasonPVNotExist`.
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// `AnnBindCompleted`: the PV controller finished binding the claim.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// `AnnBoundByController`: the binding was made by a controller (or the scheduler).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// `AnnSelectedNode`: the node the scheduler chose for a claim to be provisioned for.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// `NotSupportedProvisioner`: a class whose volumes are never provisioned dynamically.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The deprecated class annotation, still read before `storageClassName`.
pub const ANN_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// `VolumeBindingWaitForFirstConsumer`.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// A claim and the static volume chosen for it (`BindingInfo`).
#[derive(Debug, Clone, PartialEq)]
pub struct BindingInfo {
    /// The claim to bind.
    pub pvc: Arc<PersistentVolumeClaim>,
    /// The volume for it (after Reserve: with its `claimRef` set).
    pub pv: Arc<PersistentVolume>,
}

/// What binding a pod's volumes on one node takes (`PodVolumes`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    /// Claims that get an existing (static) volume.
    pub static_bindings: Vec<BindingInfo>,
    /// Claims to provision (after Reserve: with `selected-node` set).
    pub dynamic_provisions: Vec<Arc<PersistentVolumeClaim>>,
}

impl PodVolumes {
    /// Nothing to write before the pod can be bound.
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.dynamic_provisions.is_empty()
    }
}

/// A pod's claims, sorted as `GetPodVolumeClaims` sorts them (`PodVolumeClaims`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumeClaims {
    /// Fully bound claims.
    pub bound_claims: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of a `WaitForFirstConsumer` class: the scheduler's to bind.
    pub unbound_claims_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims the PV controller should have bound already (or pre-bound ones).
    pub unbound_claims_immediate: Vec<Arc<PersistentVolumeClaim>>,
    /// The volumes of each delayed claim's class, as listed at PreFilter.
    pub unbound_volumes_delay_binding: BTreeMap<String, Vec<Arc<PersistentVolume>>>,
}

/// Why FindPodVolumes could not decide (an internal error, not a node's unfitness).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinderError(pub String);

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `storageClassName`, else "".
pub fn persistent_volume_claim_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(class) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
    {
        return class.clone();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// `GetPersistentVolumeClass`: the beta annotation, else `storageClassName`, else "".
pub fn persistent_volume_class(pv: &PersistentVolume) -> String {
    if let Some(class) = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
    {
        return class.clone();
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

fn has_annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// The claim's `spec.volumeName` ("" when unset).
pub fn volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// `isPVCFullyBound`: a volume name and the PV controller's `bind-completed` annotation.
pub fn is_pvc_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !volume_name(pvc).is_empty() && has_annotation(&pvc.metadata, ANN_BIND_COMPLETED)
}

/// `IsDelayBindingMode`: the claim's class exists and binds `WaitForFirstConsumer`.
pub fn is_delay_binding_mode(
    pvc: &PersistentVolumeClaim,
    volumes: &VolumeCache,
) -> Result<bool, BinderError> {
    let class_name = persistent_volume_claim_class(pvc);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Some(class) = volumes.class(&class_name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(BinderError(format!(
            "VolumeBindingMode not set for StorageClass {}",
            go_quote(&class_name)
        ))),
        Some(mode) => Ok(mode == WAIT_FOR_FIRST_CONSUMER),
    }
}

/// `GetPodVolumeClaims` over the claims PreFilter found (`claims`, in volume order).
pub fn get_pod_volume_claims(
    claims: &[Arc<PersistentVolumeClaim>],
    volumes: &VolumeCache,
) -> Result<PodVolumeClaims, BinderError> {
    let mut out = PodVolumeClaims::default();
    for pvc in claims {
        if is_pvc_fully_bound(pvc) {
            out.bound_claims.push(pvc.clone());
        } else if is_delay_binding_mode(pvc, volumes)? && volume_name(pvc).is_empty() {
            out.unbound_claims_delay_binding.push(pvc.clone());
        } else {
            // Immediate binding should have happened already; pre-bound claims count too.
            out.unbound_claims_immediate.push(pvc.clone());
        }
    }
    for pvc in &out.unbound_claims_delay_binding {
        let class = persistent_volume_claim_class(pvc);
        let pvs = volumes.pvs_of_class(&class);
        out.unbound_volumes_delay_binding.insert(class, pvs);
    }
    Ok(out)
}

/// `CheckNodeAffinity`: the volume's `nodeAffinity.required` against the node's labels (a
/// node known by its labels only, as in Kubernetes: `matchFields` never match).
pub fn check_node_affinity(pv: &PersistentVolume, labels: &BTreeMap<String, String>) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    required
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, labels, ""))
}

/// `MatchTopologySelectorTerms`: no term matches every node; an empty term matches none;
/// within a term every key must have one of its values.
pub fn match_topology_selector_terms(
    terms: &[TopologySelectorTerm],
    labels: &BTreeMap<String, String>,
) -> bool {
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|term| {
        let exprs = term.match_label_expressions.as_deref().unwrap_or_default();
        !exprs.is_empty()
            && exprs.iter().all(|e| {
                !e.values.is_empty()
                    && labels
                        .get(&e.key)
                        .is_some_and(|v| e.values.iter().any(|w| w == v))
            })
    })
}

fn storage_request(pvc: &PersistentVolumeClaim) -> Quantity {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .unwrap_or_default()
}

fn storage_capacity(pv: &PersistentVolume) -> Quantity {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .unwrap_or_default()
}

fn claim_name(pvc: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or(""),
        pvc.metadata.name.as_deref().unwrap_or("")
    )
}

/// `IsVolumeBoundToClaim`: the volume's `claimRef` names the claim (and its UID, if set).
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if claim_ref.name != pvc.metadata.name || claim_ref.namespace != pvc.metadata.namespace {
        return false;
    }
    claim_ref
        .uid
        .as_deref()
        .is_none_or(|uid| uid.is_empty() || Some(uid) == pvc.metadata.uid.as_deref())
}

/// `FindMatchingVolume` on the scheduler's path: a volume pre-bound to the claim, else the
/// smallest Available volume of the class that fits the request, the volume mode, the
/// selector, the access modes and the node.
pub fn find_matching_volume(
    pvc: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    node_labels: &BTreeMap<String, String>,
    excluded: &BTreeSet<String>,
) -> Result<Option<Arc<PersistentVolume>>, BinderError> {
    let requested = storage_request(pvc);
    let requested_class = persistent_volume_claim_class(pvc);
    let claim_spec = pvc.spec.clone().unwrap_or_default();
    let selector = match &claim_spec.selector {
        Some(s) => Some(Selector::from_label_selector(Some(s)).map_err(|e| {
            BinderError(format!(
                "error creating internal label selector for claim: {}: {e}",
                claim_name(pvc)
            ))
        })?),
        None => None,
    };
    let claim_mode = claim_spec.volume_mode.as_deref().unwrap_or("Filesystem");
    let mut smallest: Option<(&Arc<PersistentVolume>, Quantity)> = None;
    for pv in volumes {
        let name = pv.metadata.name.as_deref().unwrap_or("");
        if excluded.contains(name) {
            continue;
        }
        let spec = pv.spec.clone().unwrap_or_default();
        if spec.claim_ref.is_some() && !is_volume_bound_to_claim(pv, pvc) {
            continue;
        }
        let capacity = storage_capacity(pv);
        if capacity < requested {
            continue;
        }
        if spec.volume_mode.as_deref().unwrap_or("Filesystem") != claim_mode {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = check_node_affinity(pv, node_labels);
        if is_volume_bound_to_claim(pv, pvc) {
            // A pre-bound volume is the answer, or nothing is on this node.
            return Ok(affinity_ok.then(|| pv.clone()));
        }
        let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase != Some("Available") {
            continue;
        }
        if let Some(selector) = &selector
            && !selector.matches(&pv.metadata.labels.clone().unwrap_or_default())
        {
            continue;
        }
        if persistent_volume_class(pv) != requested_class || !affinity_ok {
            continue;
        }
        let pv_modes = spec.access_modes.unwrap_or_default();
        let modes_ok = claim_spec
            .access_modes
            .iter()
            .flatten()
            .all(|m| pv_modes.contains(m));
        if !modes_ok {
            continue;
        }
        if smallest.as_ref().is_none_or(|(_, q)| *q > capacity) {
            smallest = Some((pv, capacity));
        }
    }
    Ok(smallest.map(|(pv, _)| pv.clone()))
}

/// What FindPodVolumes answers for one node: the volumes to bind, or the reasons it does
/// not fit.
pub type FindResult = Result<PodVolumes, Vec<&'static str>>;

/// The inputs FindPodVolumes reads, captured at PreFilter.
pub struct FindInputs<'a> {
    /// The pod's claims by kind.
    pub claims: &'a PodVolumeClaims,
    /// The volumes of the bound claims, by name (a missing one is absent).
    pub bound_volumes: &'a BTreeMap<String, Arc<PersistentVolume>>,
    /// The classes of the delayed claims, by name.
    pub classes: &'a BTreeMap<String, Arc<StorageClass>>,
}

/// `FindPodVolumes`: whether the pod's claims can be satisfied on `node`.
pub fn find_pod_volumes(inputs: &FindInputs<'_>, node: &Node) -> Result<FindResult, BinderError> {
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut bound_satisfied = true;
    let mut bound_pvs_found = true;
    let mut unbound_satisfied = true;
    let sufficient_storage = true;
    let mut volumes = PodVolumes::default();
    let reasons = |bound_satisfied: bool, unbound_satisfied: bool, bound_pvs_found: bool| {
        let mut reasons = Vec::new();
        if !bound_satisfied {
            reasons.push(ERR_REASON_NODE_CONFLICT);
        }
        if !unbound_satisfied {
            reasons.push(ERR_REASON_BIND_CONFLICT);
        }
        if !sufficient_storage {
            reasons.push(ERR_REASON_NOT_ENOUGH_SPACE);
        }
        if !bound_pvs_found {
            reasons.push(ERR_REASON_PV_NOT_EXIST);
        }
        reasons
    };
    // checkBoundClaims: the first missing volume or mismatch decides.
    for pvc in &inputs.claims.bound_claims {
        let Some(pv) = inputs.bound_volumes.get(volume_name(pvc)) else {
            bound_pvs_found = false;
            break;
        };
        if !check_node_affinity(pv, labels) {
            bound_satisfied = false;
            break;
        }
    }
    let claims_to_bind = &inputs.claims.unbound_claims_delay_binding;
    if !claims_to_bind.is_empty() {
        let mut to_find_matching = Vec::new();
        let mut to_provision = Vec::new();
        for pvc in claims_to_bind {
            let selected = pvc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_SELECTED_NODE));
            match selected {
                // Fast path: the claim is being provisioned for another node.
                Some(selected) if selected != node_name => {
                    let reasons = reasons(bound_satisfied, false, bound_pvs_found);
                    return Ok(Err(reasons));
                }
                Some(_) => to_provision.push(pvc.clone()),
                None => to_find_matching.push(pvc.clone()),
            }
        }
        if !to_find_matching.is_empty() {
            // Smallest requests first, so each gets the smallest volume that fits.
            to_find_matching.sort_by_key(|pvc| storage_request(pvc));
            let mut chosen = BTreeSet::new();
            for pvc in to_find_matching {
                let class = persistent_volume_claim_class(&pvc);
                let pvs = inputs
                    .claims
                    .unbound_volumes_delay_binding
                    .get(&class)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                match find_matching_volume(&pvc, pvs, labels, &chosen)? {
                    Some(pv) => {
                        chosen.insert(pv.metadata.name.clone().unwrap_or_default());
                        volumes.static_bindings.push(BindingInfo { pvc, pv });
                    }
                    None => {
                        unbound_satisfied = false;
                        to_provision.push(pvc);
                    }
                }
            }
        }
        if !to_provision.is_empty() {
            // checkVolumeProvisions: every claim left must be provisionable here.
            unbound_satisfied = true;
            for pvc in &to_provision {
                let class_name = persistent_volume_claim_class(pvc);
                if class_name.is_empty() {
                    return Err(BinderError(format!(
                        "no class for claim {}",
                        go_quote(&claim_name(pvc))
                    )));
                }
                let Some(class) = inputs.classes.get(&class_name) else {
                    return Err(BinderError(format!(
                        "failed to find storage class {}",
                        go_quote(&class_name)
                    )));
                };
                let provisioner = class.provisioner.as_str();
                let topologies = class.allowed_topologies.as_deref().unwrap_or_default();
                if provisioner.is_empty()
                    || provisioner == NOT_SUPPORTED_PROVISIONER
                    || !match_topology_selector_terms(topologies, labels)
                {
                    unbound_satisfied = false;
                    volumes.dynamic_provisions.clear();
                    break;
                }
                volumes.dynamic_provisions.push(pvc.clone());
            }
        }
    }
    let reasons = reasons(bound_satisfied, unbound_satisfied, bound_pvs_found);
    if reasons.is_empty() {
        Ok(Ok(volumes))
    } else {
        Ok(Err(reasons))
    }
}

/// `GetBindVolumeToClaim`: the volume with its `claimRef` naming the claim and, unless the
/// user pre-bound it, `pv.kubernetes.io/bound-by-controller: "yes"`.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> PersistentVolume {
    let pre_bound = is_volume_bound_to_claim(pv, pvc);
    let mut pv = pv.clone();
    let spec = pv.spec.get_or_insert_with(Default::default);
    let same = spec.claim_ref.as_ref().is_some_and(|r| {
        r.name == pvc.metadata.name
            && r.namespace == pvc.metadata.namespace
            && r.uid == pvc.metadata.uid
    });
    if !same {
        spec.claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: pvc.metadata.namespace.clone(),
            name: pvc.metadata.name.clone(),
            uid: pvc.metadata.uid.clone(),
            resource_version: pvc.metadata.resource_version.clone(),
            ..Default::default()
        });
    }
    if !pre_bound {
        pv.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .entry(ANN_BOUND_BY_CONTROLLER.into())
            .or_insert_with(|| "yes".into());
    }
    pv
}

/// The claim with `volume.kubernetes.io/selected-node: <node>` (what Reserve assumes and
/// PreBind writes to trigger provisioning).
pub fn with_selected_node(pvc: &PersistentVolumeClaim, node: &str) -> PersistentVolumeClaim {
    let mut pvc = pvc.clone();
    pvc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANN_SELECTED_NODE.into(), node.into());
    pvc
}

/// `checkBindings`: `Ok(true)` when every claim PreBind wrote is fully bound (on the API
/// objects, not the assumed ones), `Ok(false)` to poll again, `Err` when binding must be
/// retried from scheduling (the PV controller undid it, provisioning failed).
pub fn check_bindings(
    node_name: &str,
    node_labels: Option<&BTreeMap<String, String>>,
    volumes: &PodVolumes,
    cache: &VolumeCache,
) -> Result<bool, BinderError> {
    let Some(labels) = node_labels else {
        return Err(BinderError(format!(
            "failed to get node {}: node {} not found",
            go_quote(node_name),
            go_quote(node_name)
        )));
    };
    let not_found = |kind: &str, name: &str| format!("could not find {kind} {}", go_quote(name));
    let affinity_error = |pv: &str| {
        BinderError(format!(
            "pv {} node affinity doesn't match node {}: no matching NodeSelectorTerms",
            go_quote(pv),
            go_quote(node_name)
        ))
    };
    for binding in &volumes.static_bindings {
        let pv_name = binding.pv.metadata.name.as_deref().unwrap_or("");
        let Some(pv) = cache.api_pv(pv_name) else {
            return Err(BinderError(format!(
                "failed to check binding: {}",
                not_found("v1.PersistentVolume", pv_name)
            )));
        };
        let pvc_key = claim_name(&binding.pvc);
        let (ns, name) = (
            binding.pvc.metadata.namespace.as_deref().unwrap_or(""),
            binding.pvc.metadata.name.as_deref().unwrap_or(""),
        );
        let Some(pvc) = cache.api_pvc(ns, name) else {
            return Err(BinderError(format!(
                "failed to check binding: {}",
                not_found("v1.PersistentVolumeClaim", &pvc_key)
            )));
        };
        // Our update has not come back through the informer yet.
        if !is_not_older(&pv.metadata, &binding.pv.metadata) {
            return Ok(false);
        }
        if !check_node_affinity(pv, labels) {
            return Err(affinity_error(pv_name));
        }
        let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty()) {
            return Err(BinderError(format!(
                "ClaimRef got reset for pv {}",
                go_quote(pv_name)
            )));
        }
        if !is_pvc_fully_bound(pvc) {
            return Ok(false);
        }
    }
    for claim in &volumes.dynamic_provisions {
        let (ns, name) = (
            claim.metadata.namespace.as_deref().unwrap_or(""),
            claim.metadata.name.as_deref().unwrap_or(""),
        );
        let Some(pvc) = cache.api_pvc(ns, name) else {
            return Err(BinderError(format!(
                "failed to check provisioning pvc: {}",
                not_found("v1.PersistentVolumeClaim", &claim_name(claim))
            )));
        };
        if !is_not_older(&pvc.metadata, &claim.metadata) {
            return Ok(false);
        }
        let selected = pvc
            .metadata
            .annotations
            .as_ref()
            .map(|a| a.get(ANN_SELECTED_NODE).map(String::as_str));
        match selected {
            None => {
                return Err(BinderError(format!(
                    "selectedNode annotation reset for PVC {}",
                    go_quote(name)
                )));
            }
            // The provisioner removes the annotation when it fails.
            Some(selected) if selected != Some(node_name) => {
                return Err(BinderError(format!(
                    "provisioning failed for PVC {}",
                    go_quote(name)
                )));
            }
            Some(_) => {}
        }
        let bound_to = volume_name(pvc);
        if !bound_to.is_empty() {
            let Some(pv) = cache.api_pv(bound_to) else {
                // Not seen yet; or deleted, and then the claim is unbound eventually.
                return Ok(false);
            };
            if !check_node_affinity(pv, labels) {
                return Err(affinity_error(bound_to));
            }
        }
        if !is_pvc_fully_bound(pvc) {
            return Ok(false);
        }
    }
    Ok(true)
}
