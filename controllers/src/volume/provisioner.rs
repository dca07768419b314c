//! The simulated external provisioner (`simulated-provisioner`): makes a PersistentVolume for
//! each claim that asks the `miniplane.io/simulated` provisioner, and deletes the volumes it
//! made once they are Released under reclaim policy Delete.
//!
//! Mirrors `sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller/controller.go`
//! (`shouldProvision`, `provisionClaimOperation`, `shouldDelete`, `deleteVolumeOperation`) with
//! a hostPath-like volume as the "storage": nothing is created on any disk, the volume only
//! names `/var/lib/miniplane/<pv name>`. Simplified: no provisioner finalizer on the volume,
//! no `allowedTopologies`, no capacity tracking; the volume is exactly the size requested.

use apimachinery::{EventType, ObjectRef};
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER, Decision, SIMULATED_PROVISIONER, SIMULATED_VOLUME_ROOT, VolumeAction,
    annotation, claim_class, event_on, find_class, volume_phase,
};

/// The node label a WaitForFirstConsumer volume is pinned with.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The name of the volume provisioned for a claim: `pvc-<claim uid>`.
pub fn volume_name_for(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// The provisioner a claim asks for (the annotation the binder sets).
fn requested_provisioner(claim: &PersistentVolumeClaim) -> Option<&str> {
    annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER))
}

/// `shouldProvision` and `provisionClaimOperation` for one claim, given the cached classes and
/// whether the volume `pvc-<uid>` exists already.
pub fn sync_claim(
    claim: &PersistentVolumeClaim,
    classes: &[StorageClass],
    volume_exists: bool,
) -> Decision {
    let key = format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    );
    let spec = claim.spec.clone().unwrap_or_default();
    if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
        return Decision::nothing(format!("claim {key}: already has a volume"));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Decision::nothing(format!("claim {key}: being deleted"));
    }
    if requested_provisioner(claim) != Some(SIMULATED_PROVISIONER) {
        return Decision::nothing(format!(
            "claim {key}: not for provisioner {SIMULATED_PROVISIONER}"
        ));
    }
    let class_name = claim_class(claim);
    let Some(class) = find_class(classes, &class_name) else {
        return Decision::nothing(format!("claim {key}: class {class_name:?} not found"));
    };
    if class.provisioner != SIMULATED_PROVISIONER {
        return Decision::nothing(format!(
            "claim {key}: class {class_name} belongs to provisioner {}",
            class.provisioner
        ));
    }
    let selected_node = annotation(&claim.metadata, ANN_SELECTED_NODE);
    let delayed = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    if delayed && selected_node.is_none() {
        return Decision::nothing(format!(
            "claim {key}: class {class_name} waits for first consumer, no node selected yet"
        ));
    }
    let name = volume_name_for(claim);
    if volume_exists {
        return Decision::nothing(format!("claim {key}: volume {name} already provisioned"));
    }
    let Some(request) = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned()
    else {
        return Decision::nothing(format!("claim {key}: no storage request"));
    };
    let node = if delayed { selected_node } else { None };
    let volume = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            annotations: Some(
                [(
                    ANN_DYNAMICALLY_PROVISIONED.to_owned(),
                    SIMULATED_PROVISIONER.to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity: Some([("storage".to_owned(), request.clone())].into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("PersistentVolumeClaim".to_owned()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..Default::default()
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".to_owned()),
            ),
            storage_class_name: Some(class_name.clone()),
            mount_options: class.mount_options.clone(),
            volume_mode: spec.volume_mode.clone(),
            host_path: Some(HostPathVolumeSource {
                path: format!("{SIMULATED_VOLUME_ROOT}/{name}"),
                type_: Some("DirectoryOrCreate".to_owned()),
            }),
            node_affinity: node.map(|n| VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.to_owned(),
                            operator: "In".to_owned(),
                            values: Some(vec![n.to_owned()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let me = ObjectRef::from_object(claim);
    let place = node.map_or(String::new(), |n| format!(" on node {n}"));
    Decision {
        summary: format!(
            "claim {key}: provisioning volume {name} ({}, class {class_name}){place}",
            request.0
        ),
        actions: vec![
            event_on(
                me.clone(),
                EventType::Normal,
                "Provisioning",
                format!("External provisioner is provisioning volume for claim {key:?}"),
            ),
            VolumeAction::CreateVolume(Box::new(volume)),
            event_on(
                me,
                EventType::Normal,
                "ProvisioningSucceeded",
                format!("Successfully provisioned volume {name}"),
            ),
        ],
    }
}

/// `shouldDelete` and `deleteVolumeOperation` for one volume: a volume this provisioner made,
/// Released, with reclaim policy Delete, is deleted.
pub fn sync_volume(volume: &PersistentVolume) -> Decision {
    let name = volume.metadata.name.clone().unwrap_or_default();
    if annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) != Some(SIMULATED_PROVISIONER) {
        return Decision::nothing(format!("volume {name}: not provisioned here"));
    }
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("");
    if volume_phase(volume) != "Released" || policy != "Delete" {
        return Decision::nothing(format!(
            "volume {name}: {} with reclaim policy {policy}, kept",
            volume_phase(volume)
        ));
    }
    Decision {
        summary: format!("volume {name}: Released with reclaim policy Delete, deleting it"),
        actions: vec![VolumeAction::DeleteVolume(ObjectRef::from_object(volume))],
    }
}
