//! End to end: persistent storage. The API server, the controller-manager (the PV controller's
//! binder and the simulated provisioner), the scheduler and a simulated kubelet as separate
//! processes, driven by the real kubectl: `kubectl get sc` shows the cluster's
//! `standard (default)` class; a claim of an Immediate class is provisioned and Bound, and
//! deleting it (reclaim policy Delete) removes its volume; a claim of `standard`
//! (WaitForFirstConsumer) waits until a node is selected for it; a static volume binds a
//! matching claim; an invalid claim is refused with Kubernetes' 422 message.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::process_cluster::ProcessCluster;
use support::{DEADLINE, Server, eventually};

fn claim_yaml(name: &str, class: Option<&str>, size: &str) -> String {
    let class = class.map_or(String::new(), |c| format!("  storageClassName: {c}\n"));
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
spec:
{class}  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: {size}
"
    )
}

fn claim(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "pvc", name, "-o", "json"])
}

fn wait_bound(s: &Server, name: &str) -> Value {
    eventually(&format!("claim {name} Bound"), DEADLINE, || {
        let c = claim(s, name);
        (c["status"]["phase"] == "Bound").then_some(c)
    })
}

fn event_reasons(s: &Server, name: &str) -> Vec<String> {
    let list = s.kubectl_json(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name}"),
        "-o",
        "json",
    ]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn claims_are_provisioned_bound_and_their_volumes_deleted() {
    let c = ProcessCluster::start(1);
    let s = &c.s;
    // kind's `standard` class, the default.
    let out = s.kubectl_ok(&["get", "sc"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("standard (default)"))
        .unwrap_or_else(|| panic!("no default class in:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[2..6],
        [
            "miniplane.io/simulated",
            "Delete",
            "WaitForFirstConsumer",
            "false"
        ],
        "{out}"
    );

    // An Immediate class: provisioned at once, then bound.
    s.apply_ok(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: miniplane.io/simulated
",
        &[],
    );
    s.apply_ok(&claim_yaml("fast-data", Some("fast"), "2Gi"), &[]);
    let bound = wait_bound(s, "fast-data");
    let uid = bound["metadata"]["uid"].as_str().unwrap().to_owned();
    let pv_name = format!("pvc-{uid}");
    assert_eq!(bound["spec"]["volumeName"], pv_name.as_str());
    assert_eq!(bound["status"]["capacity"]["storage"], "2Gi");
    assert_eq!(
        bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    let pv = s.kubectl_json(&["get", "pv", &pv_name, "-o", "json"]);
    assert_eq!(pv["status"]["phase"], "Bound");
    assert_eq!(pv["spec"]["claimRef"]["name"], "fast-data");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(
        pv["spec"]["hostPath"]["path"],
        format!("/var/lib/miniplane/{pv_name}").as_str()
    );
    let reasons = event_reasons(s, "fast-data");
    for reason in ["ExternalProvisioning", "ProvisioningSucceeded"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} in {reasons:?}"
        );
    }
    let out = s.kubectl_ok(&["get", "pvc", "fast-data"]);
    assert!(
        out.lines().nth(1).is_some_and(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells[..6] == ["fast-data", "Bound", pv_name.as_str(), "2Gi", "RWO", "fast"]
        }),
        "{out}"
    );

    // Deleting the claim releases the volume; reclaim policy Delete removes it.
    s.kubectl_ok(&["delete", "pvc", "fast-data"]);
    eventually("the provisioned volume deleted", DEADLINE, || {
        let run = s.kubectl(&["get", "pv", &pv_name]);
        (!run.ok()).then_some(())
    });

    // The default class waits for a first consumer until a node is selected (the
    // scheduler's VolumeBinding plugin would set the annotation).
    s.apply_ok(&claim_yaml("late", None, "1Gi"), &[]);
    let pending = claim(s, "late");
    assert_eq!(pending["spec"]["storageClassName"], "standard");
    eventually("WaitForFirstConsumer event", DEADLINE, || {
        event_reasons(s, "late")
            .iter()
            .any(|r| r == "WaitForFirstConsumer")
            .then_some(())
    });
    assert_eq!(claim(s, "late")["status"]["phase"], "Pending");
    let node = s.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    s.kubectl_ok(&[
        "annotate",
        "pvc",
        "late",
        &format!("volume.kubernetes.io/selected-node={node}"),
    ]);
    let bound = wait_bound(s, "late");
    let pv_name = bound["spec"]["volumeName"].as_str().unwrap().to_owned();
    let pv = s.kubectl_json(&["get", "pv", &pv_name, "-o", "json"]);
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            [0],
        node.as_str()
    );
}

#[test]
fn a_static_volume_binds_a_matching_claim_and_invalid_claims_are_refused() {
    let c = ProcessCluster::start(1);
    let s = &c.s;
    s.apply_ok(
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv0001
spec:
  capacity:
    storage: 5Gi
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath:
    path: /mnt/data
",
        &[],
    );
    eventually("pv0001 Available", DEADLINE, || {
        let pv = s.kubectl_json(&["get", "pv", "pv0001", "-o", "json"]);
        (pv["status"]["phase"] == "Available").then_some(())
    });
    let out = s.kubectl_ok(&["get", "pv", "pv0001"]);
    let cells: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        cells[..7],
        [
            "pv0001",
            "5Gi",
            "RWO",
            "Retain",
            "Available",
            "manual",
            "<unset>"
        ],
        "{out}"
    );
    s.apply_ok(&claim_yaml("manual-claim", Some("manual"), "3Gi"), &[]);
    let bound = wait_bound(s, "manual-claim");
    assert_eq!(bound["spec"]["volumeName"], "pv0001");
    assert_eq!(bound["status"]["capacity"]["storage"], "5Gi");
    let pv = s.kubectl_json(&["get", "pv", "pv0001", "-o", "json"]);
    assert_eq!(pv["status"]["phase"], "Bound");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    // Retain: the volume stays, Released, when its claim goes.
    s.kubectl_ok(&["delete", "pvc", "manual-claim"]);
    eventually("pv0001 Released", DEADLINE, || {
        let pv = s.kubectl_json(&["get", "pv", "pv0001", "-o", "json"]);
        (pv["status"]["phase"] == "Released").then_some(())
    });

    // Validation, with Kubernetes' messages.
    let run = s.create_yaml(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: bad
spec:
  accessModes: [ReadWriteSometimes]
",
    );
    assert!(!run.ok(), "{run}");
    let text = run.to_string();
    assert!(
        text.contains("The PersistentVolumeClaim \"bad\" is invalid"),
        "{text}"
    );
    assert!(
        text.contains("spec.accessModes: Unsupported value: \"ReadWriteSometimes\""),
        "{text}"
    );
    assert!(
        text.contains("spec.resources[storage]: Required value"),
        "{text}"
    );
    // A claim's spec is immutable but for its requests once bound.
    s.apply_ok(&claim_yaml("pending", Some("manual"), "100Gi"), &[]);
    let run = s.kubectl(&[
        "patch",
        "pvc",
        "pending",
        "--type=merge",
        "-p",
        r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
    ]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.to_string().contains(
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
        ),
        "{run}"
    );
}
