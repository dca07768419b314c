//! VolumeBinding's tests: the fixtures here, PreFilter and Filter in [`filtering`],
//! Reserve, the assume cache, PreBind's check and the queueing hints in [`binding`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, TopologySelectorLabelRequirement, TopologySelectorTerm, Volume,
    VolumeNodeAffinity, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::binder::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT, ERR_REASON_PV_NOT_EXIST, check_bindings,
    match_topology_selector_terms,
};
use super::*;
use crate::cache::Snapshot;
use crate::cycle_state::CycleState;
use crate::node_info::NodeInfo;
use crate::plugins::fixtures::{info, labelled_node, labelled_pod, labels, node_info};
use crate::plugins::{Code, Status, run_filters};
use crate::schedule_one::{Algorithm, ScheduleError};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// node-0 (zone a), node-1 (zone a), node-2 (zone b), each with its hostname label.
fn nodes() -> Vec<NodeInfo> {
    [("node-0", "a"), ("node-1", "a"), ("node-2", "b")]
        .into_iter()
        .map(|(name, zone)| {
            node_info(
                labelled_node(name, &[(ZONE, zone), (HOSTNAME, name)]),
                vec![],
            )
        })
        .collect()
}

/// A default-namespace pod using the claims `claims` (volume name = claim name).
fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let mut pod = labelled_pod(name, &[]);
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(
            claims
                .iter()
                .map(|c| Volume {
                    name: (*c).into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: (*c).into(),
                        read_only: None,
                    }),
                    ..Default::default()
                })
                .collect(),
        );
    }
    pod
}

/// An unbound default-namespace claim of `class` requesting `size`, ReadWriteOnce.
fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("10".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: Some(class.into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    }
}

/// The claim bound to `pv` by the PV controller.
fn bound(mut pvc: PersistentVolumeClaim, pv: &str) -> PersistentVolumeClaim {
    if let Some(spec) = pvc.spec.as_mut() {
        spec.volume_name = Some(pv.into());
    }
    pvc.metadata.annotations = Some(labels(&[(ANN_BIND_COMPLETED, "yes")]));
    pvc.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Bound".into()),
        ..Default::default()
    });
    pvc
}

/// An Available volume of `class` and `size`, ReadWriteOnce, only on nodes where `key` is
/// `value` (no affinity when `key` is empty).
fn volume(name: &str, class: &str, size: &str, key: &str, value: &str) -> PersistentVolume {
    let node_affinity = (!key.is_empty()).then(|| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(vec![value.into()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("5".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            storage_class_name: Some(class.into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
            node_affinity,
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some("Available".into()),
            ..Default::default()
        }),
    }
}

/// A class binding in `mode` with `provisioner`, provisioning in zone `zone` (any when "").
fn class(name: &str, mode: &str, provisioner: &str, zone: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        volume_binding_mode: Some(mode.into()),
        allowed_topologies: (!zone.is_empty()).then(|| {
            vec![TopologySelectorTerm {
                match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                    key: ZONE.into(),
                    values: vec![zone.into()],
                }]),
            }]
        }),
        ..Default::default()
    }
}

/// miniplane's default class: provisions anywhere, waiting for the first consumer.
fn standard() -> StorageClass {
    class(
        "standard",
        "WaitForFirstConsumer",
        "miniplane.io/simulated",
        "",
    )
}

/// Static volumes only: nothing provisions.
fn local() -> StorageClass {
    class(
        "local",
        "WaitForFirstConsumer",
        "kubernetes.io/no-provisioner",
        "",
    )
}

fn cache(
    claims: Vec<PersistentVolumeClaim>,
    pvs: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
) -> VolumeCache {
    let mut cache = VolumeCache::new();
    claims.into_iter().for_each(|c| cache.set_pvc(Arc::new(c)));
    pvs.into_iter().for_each(|v| cache.set_pv(Arc::new(v)));
    classes
        .into_iter()
        .for_each(|c| cache.set_class(Arc::new(c)));
    cache
}

fn snapshot<'a>(nodes: &'a [NodeInfo], volumes: &'a VolumeCache) -> Snapshot<'a> {
    let mut snapshot = Snapshot::from(nodes);
    snapshot.volumes = volumes;
    snapshot
}

/// VolumeBinding's verdict on each node.
fn verdicts(pod: &Pod, nodes: &[NodeInfo], volumes: &VolumeCache) -> Vec<Result<(), Status>> {
    let pod = info(pod.clone());
    let state = CycleState::pre_filter(&pod, snapshot(nodes, volumes));
    nodes.iter().map(|n| filter(&pod, n, &state)).collect()
}

fn fails(reasons: &[&str]) -> Result<(), Status> {
    Err(Status {
        plugin: NAME,
        code: Code::UnschedulableAndUnresolvable,
        reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
    })
}

/// The FailedScheduling message of a pod no node takes.
fn fit_message(pod: &Pod, nodes: &[NodeInfo], volumes: &VolumeCache) -> String {
    match Algorithm::new(1).schedule_pod(&info(pod.clone()), snapshot(nodes, volumes)) {
        Err(ScheduleError::Fit(fit)) => fit.to_string(),
        other => panic!("expected a FitError, got {other:?}"),
    }
}

mod binding;
mod filtering;
