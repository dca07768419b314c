//! Unit tests of the binder's and the provisioner's decisions.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::*;

fn now() -> Timestamp {
    "2025-01-01T00:00:00Z".parse().expect("time")
}

fn claim(extra: Value) -> PersistentVolumeClaim {
    let mut c = json!({
        "metadata": {"name": "data", "namespace": "default", "uid": "c-1", "resourceVersion": "5"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeMode": "Filesystem"},
        "status": {"phase": "Pending"}
    });
    merge(&mut c, extra);
    serde_json::from_value(c).expect("claim")
}

fn volume(name: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({
        "metadata": {"name": name, "uid": format!("v-{name}")},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
                 "hostPath": {"path": "/data"}, "persistentVolumeReclaimPolicy": "Retain",
                 "volumeMode": "Filesystem"},
        "status": {"phase": "Available"}
    });
    merge(&mut v, extra);
    serde_json::from_value(v).expect("volume")
}

fn class(name: &str, mode: &str) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name}, "provisioner": SIMULATED_PROVISIONER,
        "reclaimPolicy": "Delete", "volumeBindingMode": mode
    }))
    .expect("class")
}

fn merge(base: &mut Value, extra: Value) {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            match (b.get_mut(&k), v) {
                (Some(Value::Object(bo)), Value::Object(eo)) => {
                    for (k2, v2) in eo {
                        bo.insert(k2, v2);
                    }
                }
                (_, v) => {
                    b.insert(k, v);
                }
            }
        }
    }
}

fn events(d: &Decision) -> Vec<(String, String)> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            VolumeAction::Event(e) => Some((e.reason.clone(), e.message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_smallest_matching_available_volume_is_bound() {
    let volumes = [
        volume("big", "10Gi", json!({})),
        volume("small", "2Gi", json!({})),
        volume("tiny", "500Mi", json!({})),
        volume(
            "other-class",
            "1Gi",
            json!({"spec": {"storageClassName": "fast"}}),
        ),
    ];
    let d = binder::sync_claim(&claim(json!({})), &volumes, &[], now());
    assert!(
        d.summary.contains("binding to volume small"),
        "{}",
        d.summary
    );
    let [
        VolumeAction::UpdateVolume(pv),
        VolumeAction::UpdateVolumeStatus(pv_status),
        VolumeAction::UpdateClaim(pvc),
        VolumeAction::UpdateClaimStatus(pvc_status),
    ] = d.actions.as_slice()
    else {
        panic!("{:?}", d.actions);
    };
    let r = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.clone())
        .expect("claimRef");
    assert_eq!(
        (r.name.as_deref(), r.uid.as_deref()),
        (Some("data"), Some("c-1"))
    );
    assert_eq!(
        annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(volume_phase(pv_status), "Bound");
    assert_eq!(
        pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("small")
    );
    assert_eq!(annotation(&pvc.metadata, ANN_BIND_COMPLETED), Some("yes"));
    assert_eq!(claim_phase(pvc_status), "Bound");
    let status = pvc_status.status.clone().unwrap_or_default();
    assert_eq!(
        status
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("2Gi".to_owned())
    );
}

#[test]
fn a_selector_and_access_modes_narrow_the_match() {
    let volumes = [
        volume(
            "rwo",
            "1Gi",
            json!({"metadata": {"labels": {"tier": "gold"}}}),
        ),
        volume(
            "rwx",
            "1Gi",
            json!({"metadata": {"labels": {"tier": "gold"}},
            "spec": {"accessModes": ["ReadWriteMany", "ReadWriteOnce"]}}),
        ),
    ];
    let c = claim(json!({"spec": {"accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "1Gi"}}, "selector": {"matchLabels": {"tier": "gold"}}}}));
    assert_eq!(
        binder::find_best_match(&c, &volumes, false).and_then(|v| v.metadata.name.as_deref()),
        Some("rwx")
    );
    let c = claim(json!({"spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}, "selector": {"matchLabels": {"tier": "silver"}}}}));
    assert!(binder::find_best_match(&c, &volumes, false).is_none());
}

#[test]
fn a_delayed_claim_waits_for_its_first_consumer() {
    let classes = [class("standard", "WaitForFirstConsumer")];
    let c = claim(
        json!({"spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    let available = [volume(
        "pv",
        "1Gi",
        json!({"spec": {"storageClassName": "standard"}}),
    )];
    let d = binder::sync_claim(&c, &available, &classes, now());
    assert_eq!(
        events(&d),
        vec![(
            "WaitForFirstConsumer".to_owned(),
            "waiting for first consumer to be created before binding".to_owned()
        )]
    );
    assert!(
        d.actions
            .iter()
            .all(|a| !matches!(a, VolumeAction::UpdateVolume(_)))
    );
    // The scheduler picked a node: the binder asks the class's provisioner.
    let mut selected = c.clone();
    set_annotation(&mut selected.metadata, ANN_SELECTED_NODE, "node-1");
    let d = binder::sync_claim(&selected, &[], &classes, now());
    let Some(VolumeAction::UpdateClaim(annotated)) = d.actions.first() else {
        panic!("{:?}", d.actions);
    };
    assert_eq!(
        annotation(&annotated.metadata, ANN_STORAGE_PROVISIONER),
        Some(SIMULATED_PROVISIONER)
    );
    assert_eq!(events(&d)[0].0, "ExternalProvisioning");
    assert!(events(&d)[0].1.starts_with(
        "Waiting for a volume to be created either by the external provisioner 'miniplane.io/simulated'"
    ));
}

#[test]
fn a_claim_without_class_or_volume_stays_pending() {
    let d = binder::sync_claim(&claim(json!({})), &[], &[], now());
    assert_eq!(
        events(&d),
        vec![(
            "FailedBinding".to_owned(),
            "no persistent volumes available for this claim and no storage class is set".to_owned()
        )]
    );
}

#[test]
fn the_provisioner_makes_a_volume_for_the_selected_node() {
    let classes = [class("standard", "WaitForFirstConsumer")];
    let mut c = claim(
        json!({"spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "3Gi"}}}}),
    );
    set_annotation(
        &mut c.metadata,
        ANN_STORAGE_PROVISIONER,
        SIMULATED_PROVISIONER,
    );
    let d = provisioner::sync_claim(&c, &classes, false);
    assert!(d.actions.is_empty(), "no node selected yet: {}", d.summary);
    set_annotation(&mut c.metadata, ANN_SELECTED_NODE, "node-2");
    let d = provisioner::sync_claim(&c, &classes, false);
    let Some(VolumeAction::CreateVolume(pv)) = d.actions.get(1) else {
        panic!("{:?}", d.actions);
    };
    assert_eq!(pv.metadata.name.as_deref(), Some("pvc-c-1"));
    let spec = pv.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("3Gi".to_owned())
    );
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        spec.host_path.map(|h| h.path),
        Some("/var/lib/miniplane/pvc-c-1".to_owned())
    );
    let term = &spec
        .node_affinity
        .and_then(|a| a.required)
        .expect("affinity")
        .node_selector_terms[0];
    let req = &term.match_expressions.as_ref().expect("expressions")[0];
    assert_eq!(
        (req.key.as_str(), req.values.clone()),
        ("kubernetes.io/hostname", Some(vec!["node-2".to_owned()]))
    );
    assert_eq!(
        events(&d)[1],
        (
            "ProvisioningSucceeded".to_owned(),
            "Successfully provisioned volume pvc-c-1".to_owned()
        )
    );
    assert!(
        provisioner::sync_claim(&c, &classes, true)
            .actions
            .is_empty()
    );
    // The binder then binds the claim to the pre-bound volume, even though binding is delayed.
    let mut made = (**pv).clone();
    made.status = Some(Default::default());
    let d = binder::sync_claim(&c, &[made], &classes, now());
    assert!(
        d.summary.contains("binding to volume pvc-c-1"),
        "{}",
        d.summary
    );
}

#[test]
fn an_immediate_class_is_provisioned_without_a_node() {
    let classes = [class("fast", "Immediate")];
    let mut c = claim(
        json!({"spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    set_annotation(
        &mut c.metadata,
        ANN_BETA_STORAGE_PROVISIONER,
        SIMULATED_PROVISIONER,
    );
    let d = provisioner::sync_claim(&c, &classes, false);
    let Some(VolumeAction::CreateVolume(pv)) = d.actions.get(1) else {
        panic!("{:?}", d.actions);
    };
    assert!(
        pv.spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .is_none()
    );
}

#[test]
fn a_volume_whose_claim_is_gone_is_released_and_reclaimed() {
    let bound = json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "c-1"}},
                       "status": {"phase": "Bound"}});
    let retained = volume("kept", "1Gi", bound.clone());
    let d = binder::sync_volume(&retained, None, now());
    let [VolumeAction::UpdateVolumeStatus(v)] = d.actions.as_slice() else {
        panic!("{:?}", d.actions);
    };
    assert_eq!(volume_phase(v), "Released");
    assert!(d.summary.contains("Retain"), "{}", d.summary);

    let mut provisioned = volume("pvc-c-1", "1Gi", bound.clone());
    provisioned
        .spec
        .as_mut()
        .expect("spec")
        .persistent_volume_reclaim_policy = Some("Delete".into());
    set_annotation(
        &mut provisioned.metadata,
        ANN_DYNAMICALLY_PROVISIONED,
        SIMULATED_PROVISIONER,
    );
    let d = binder::sync_volume(&provisioned, None, now());
    assert_eq!(d.actions.len(), 1, "only Released: {:?}", d.actions);
    // The provisioner deletes its Released volume.
    let mut released = provisioned.clone();
    released.status = Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
        phase: Some("Released".into()),
        ..Default::default()
    });
    assert!(matches!(
        provisioner::sync_volume(&released).actions.as_slice(),
        [VolumeAction::DeleteVolume(_)]
    ));
    assert!(provisioner::sync_volume(&provisioned).actions.is_empty());

    // A static volume with Delete has no deleter: Failed.
    let mut fixed = volume("static", "1Gi", bound);
    fixed
        .spec
        .as_mut()
        .expect("spec")
        .persistent_volume_reclaim_policy = Some("Delete".into());
    let d = binder::sync_volume(&fixed, None, now());
    assert_eq!(events(&d)[0].0, "VolumeFailedDelete");
    assert!(
        matches!(d.actions.last(), Some(VolumeAction::UpdateVolumeStatus(v)) if volume_phase(v) == "Failed")
    );
}

#[test]
fn a_bound_claim_that_lost_its_volume_is_lost() {
    let c = claim(
        json!({"metadata": {"name": "data", "namespace": "default", "uid": "c-1",
        "annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "gone",
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}}),
    );
    let d = binder::sync_claim(&c, &[], &[], now());
    assert_eq!(
        events(&d),
        vec![(
            "ClaimLost".to_owned(),
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!".to_owned()
        )]
    );
}

#[test]
fn a_claim_bound_already_needs_nothing() {
    let c = claim(
        json!({"metadata": {"name": "data", "namespace": "default", "uid": "c-1",
        "annotations": {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}},
        "spec": {"volumeName": "pv", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}),
    );
    let v = volume(
        "pv",
        "1Gi",
        json!({"metadata": {"name": "pv", "uid": "v-pv",
        "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}},
        "spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "c-1"}},
        "status": {"phase": "Bound"}}),
    );
    let d = binder::sync_claim(&c, std::slice::from_ref(&v), &[], now());
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert!(binder::sync_volume(&v, Some(&c), now()).actions.is_empty());
}
