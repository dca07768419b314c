//! A StatefulSet pod's stable identity and storage.
//!
//! Mirrors the pod half of `pkg/controller/statefulset/stateful_set_utils.go`:
//! `getParentNameAndOrdinal`, `getPodName`, `getStartOrdinal`/`getEndOrdinal`,
//! `podInOrdinalRange`, `isMemberOf`, `identityMatches`, `storageMatches`,
//! `getPersistentVolumeClaims`, `updateStorage`, `initIdentity`, `newStatefulSetPod`,
//! `newVersionedStatefulSetPod`, `ApplyRevision` and the pod predicates
//! (`isRunningAndReady`, `isHealthy`, ...).
//!
//! ```text
//!   StatefulSet web (ordinals.start 0, serviceName nginx, volumeClaimTemplates [www])
//!     pod web-2: hostname web-2, subdomain nginx,
//!                labels statefulset.kubernetes.io/pod-name=web-2, apps.kubernetes.io/pod-index=2,
//!                       controller-revision-hash=<revision name>
//!                volume www ─▶ PersistentVolumeClaim www-web-2
//! ```

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::history::{CONTROLLER_REVISION_HASH_LABEL, template_of};
use crate::owner_ref::{name, new_controller_ref};
use crate::pod_readiness::{is_pod_available, is_pod_ready, pod_phase};

/// `StatefulSetPodNameLabel`.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// `PodIndexLabel` (feature `PodIndexLabel`, on by default since 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// `StatefulSetRevisionLabel`: the name of the pod's ControllerRevision.
pub const REVISION_LABEL: &str = CONTROLLER_REVISION_HASH_LABEL;

/// `getParentNameAndOrdinal`: `web-12` → `("web", 12)`; `None` if the name does not end in
/// `-<digits>`.
pub fn parent_name_and_ordinal(pod_name: &str) -> Option<(&str, i64)> {
    let (parent, ordinal) = pod_name.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, ordinal.parse().ok()?))
}

/// `getOrdinal`: the pod's ordinal, -1 when its name has none.
pub fn ordinal(pod: &Pod) -> i64 {
    parent_name_and_ordinal(name(&pod.metadata)).map_or(-1, |(_, o)| o)
}

/// `getPodName`.
pub fn pod_name(set: &StatefulSet, ordinal: i64) -> String {
    format!("{}-{ordinal}", name(&set.metadata))
}

/// `spec.replicas` (default 1).
pub fn replicas(set: &StatefulSet) -> i64 {
    i64::from(
        set.spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0),
    )
}

/// `getStartOrdinal`: `spec.ordinals.start` (default 0).
pub fn start_ordinal(set: &StatefulSet) -> i64 {
    i64::from(
        set.spec
            .as_ref()
            .and_then(|s| s.ordinals.as_ref())
            .and_then(|o| o.start)
            .unwrap_or(0),
    )
}

/// `getEndOrdinal`: the last ordinal of the range (start - 1 for zero replicas).
pub fn end_ordinal(set: &StatefulSet) -> i64 {
    start_ordinal(set) + replicas(set) - 1
}

/// `podInOrdinalRange`.
pub fn in_ordinal_range(pod: &Pod, set: &StatefulSet) -> bool {
    let o = ordinal(pod);
    o >= start_ordinal(set) && o <= end_ordinal(set)
}

/// `isMemberOf`: the pod's name is `<set>-<ordinal>`.
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_name_and_ordinal(name(&pod.metadata)).is_some_and(|(p, _)| p == name(&set.metadata))
}

/// `getPersistentVolumeClaimName`: `<template>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &str, ordinal: i64) -> String {
    format!("{template}-{}-{ordinal}", name(&set.metadata))
}

/// `getPersistentVolumeClaims`: the claims of ordinal `ordinal`, by template name: the
/// template with its name, the set's namespace and the selector's `matchLabels` added to its
/// labels.
pub fn claims_for(set: &StatefulSet, ordinal: i64) -> BTreeMap<String, PersistentVolumeClaim> {
    let Some(spec) = set.spec.as_ref() else {
        return BTreeMap::new();
    };
    let match_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let template_name = name(&template.metadata).to_owned();
            let mut claim = template.clone();
            claim.metadata.name = Some(claim_name(set, &template_name, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(match_labels.clone());
            claim.status = None;
            (template_name, claim)
        })
        .collect()
}

/// `identityMatches`.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let Some((parent, o)) = parent_name_and_ordinal(name(&pod.metadata)) else {
        return false;
    };
    parent == name(&set.metadata)
        && name(&pod.metadata) == pod_name(set, o)
        && pod.metadata.namespace == set.metadata.namespace
        && pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_NAME_LABEL))
            == pod.metadata.name.as_ref()
}

/// `storageMatches`: every claim template has its volume pointing at the right claim.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let o = ordinal(pod);
    if o < 0 {
        return false;
    }
    let volumes: BTreeMap<&str, &Volume> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .map(|v| (v.name.as_str(), v))
        .collect();
    set.spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
        .all(|t| {
            let template = name(&t.metadata);
            volumes
                .get(template)
                .and_then(|v| v.persistent_volume_claim.as_ref())
                .is_some_and(|c| c.claim_name == claim_name(set, template, o))
        })
}

/// `updateIdentity`: name, namespace, the pod-name and pod-index labels.
pub fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let o = ordinal(pod);
    let pod_name = pod_name(set, o);
    pod.metadata.name = Some(pod_name.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.to_owned(), pod_name);
    labels.insert(POD_INDEX_LABEL.to_owned(), o.to_string());
}

/// `updateStorage`: a volume per claim template (replacing same-named ones), other volumes
/// kept after them.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = claims_for(set, ordinal(pod));
    let spec = pod.spec.get_or_insert_with(Default::default);
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(template, claim)| Volume {
            name: template.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: name(&claim.metadata).to_owned(),
                read_only: Some(false),
            }),
            ..Default::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| !claims.contains_key(&v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
}

/// `newStatefulSetPod`: the template's pod with the controller reference, identity
/// (hostname = pod name, subdomain = `serviceName`) and storage.
pub fn new_stateful_set_pod(set: &StatefulSet, ordinal: i64) -> Pod {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(set, ordinal)),
            namespace: set.metadata.namespace.clone(),
            labels: Some(meta.labels.unwrap_or_default()),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![new_controller_ref(set)]),
            ..Default::default()
        },
        spec: Some(template.spec.unwrap_or_default()),
        status: None,
    };
    update_identity(set, &mut pod);
    if let Some(spec) = pod.spec.as_mut() {
        spec.hostname = pod.metadata.name.clone();
        spec.subdomain = set
            .spec
            .as_ref()
            .and_then(|s| s.service_name.clone())
            .filter(|s| !s.is_empty());
    }
    update_storage(set, &mut pod);
    pod
}

/// `ApplyRevision`: the set with its template replaced by the revision's.
pub fn apply_revision(set: &StatefulSet, revision: &ControllerRevision) -> StatefulSet {
    let mut applied = set.clone();
    if let (Some(spec), Some(template)) = (applied.spec.as_mut(), template_of(revision)) {
        spec.template = template;
    }
    applied
}

/// `setPodRevision` / `getPodRevision`.
pub fn pod_revision(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map_or("", String::as_str)
}

/// `isCreated`: the pod has a phase (it came from the API server).
pub fn is_created(pod: &Pod) -> bool {
    !pod_phase(pod).is_empty()
}

/// `isTerminating`.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `isRunningAndReady`.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    pod_phase(pod) == "Running" && is_pod_ready(pod)
}

/// `isRunningAndAvailable`.
pub fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    pod_phase(pod) == "Running" && is_pod_available(pod, min_ready_seconds, now)
}

/// `isHealthy`: running, ready and not terminating.
pub fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

/// `isFailed` or `isSucceeded`: a pod that finished and must be replaced.
pub fn is_finished(pod: &Pod) -> bool {
    matches!(pod_phase(pod), "Failed" | "Succeeded")
}
