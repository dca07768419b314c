//! End to end: kube-scheduler's VolumeBinding plugin. The API server, the scheduler, the
//! controller-manager (with the PV controller and the simulated provisioner
//! `miniplane.io/simulated`) and simulated kubelets as separate processes, driven by the real
//! kubectl:
//!
//! * a pod with a claim of the `WaitForFirstConsumer` class `standard`: the scheduler picks a
//!   node, writes it to the claim as `volume.kubernetes.io/selected-node`, the provisioner
//!   creates a volume there, the PV controller binds it, and only then is the pod bound and
//!   Running;
//! * a pod with a claim of a class without provisioner (`kubernetes.io/no-provisioner`,
//!   `WaitForFirstConsumer`) goes where the matching static volume's node affinity says; the
//!   scheduler writes the volume's `claimRef` and the PV controller completes the binding;
//! * a pod whose claim does not exist stays Pending with kube-scheduler's own message
//!   (`persistentvolumeclaim "x" not found`, from VolumeBinding's PreFilter) in its
//!   PodScheduled condition, its FailedScheduling event and the decision's trace; creating
//!   the claim brings it back to the queue (VolumeBinding's queueing hint) and it runs;
//! * on a secure server, the scheduler does all of it as `system:kube-scheduler` with only its
//!   roles (`system:kube-scheduler`, `system:volume-scheduler`).
// Functions outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::component::Component;
use support::process_cluster::ProcessCluster;
use support::scheduler_view::{failed_scheduling, scheduler_spans};
use support::{DEADLINE, Server, eventually};

/// A claim of the class `standard` for 1Gi.
fn claim(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
spec:
  storageClassName: standard
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
"
    )
}

/// A pod mounting the claim `claim_name`.
fn pod(name: &str, claim_name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: main
    image: nginx
    volumeMounts:
    - name: data
      mountPath: /data
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: {claim_name}
"
    )
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// The pod's PodScheduled condition: (status, reason, message).
fn pod_scheduled(pod: &Value) -> Option<(String, String, String)> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .map(|c| (text(&c["status"]), text(&c["reason"]), text(&c["message"])))
}

/// Waits until the scheduler wrote its choice to claim `name`
/// (`volume.kubernetes.io/selected-node`); returns that node.
fn wait_selected_node(s: &Server, name: &str) -> String {
    eventually(&format!("selected-node on claim {name}"), DEADLINE, || {
        let pvc = s.kubectl_json(&["get", "pvc", name]);
        let node = text(&pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]);
        (!node.is_empty()).then_some(node)
    })
}

/// Waits until pod `name` runs; returns its node.
fn wait_running(s: &Server, name: &str) -> String {
    eventually(&format!("pod {name} Running"), DEADLINE, || {
        let pod = s.kubectl_json(&["get", "pod", name]);
        (pod["status"]["phase"] == "Running").then(|| text(&pod["spec"]["nodeName"]))
    })
}

#[test]
fn a_wait_for_first_consumer_claim_is_provisioned_on_the_chosen_node() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(&claim("data"), &[]);
    // WaitForFirstConsumer: nothing happens to the claim before a pod uses it.
    let pending = s.kubectl_json(&["get", "pvc", "data"]);
    assert_eq!(pending["status"]["phase"], "Pending", "{pending}");
    assert!(
        pending["metadata"]["annotations"]["volume.kubernetes.io/selected-node"].is_null(),
        "{pending}"
    );

    s.apply_ok(&pod("db", "data"), &[]);
    // PreBind: the claim learns the node before the pod is bound to it.
    let selected = wait_selected_node(s, "data");
    let node = wait_running(s, "db");
    assert_eq!(node, selected);
    assert!(node == "node-0" || node == "node-1", "{node}");

    // The scheduler chose the node for the claim; the provisioner made the volume for it and
    // the PV controller bound the two (before the pod was bound: PreBind waits for it).
    let bound = s.kubectl_json(&["get", "pvc", "data"]);
    assert_eq!(
        bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        node.as_str(),
        "{bound}"
    );
    assert_eq!(bound["status"]["phase"], "Bound", "{bound}");
    let volume = text(&bound["spec"]["volumeName"]);
    assert!(!volume.is_empty(), "{bound}");
    let pv = s.kubectl_json(&["get", "pv", &volume]);
    assert_eq!(pv["status"]["phase"], "Bound", "{pv}");
    assert_eq!(pv["spec"]["claimRef"]["name"], "data", "{pv}");
    assert_eq!(pv["spec"]["storageClassName"], "standard", "{pv}");

    // A second pod of the now bound claim: nothing to write, it is bound at once (on the
    // volume's node when the volume has node affinity).
    s.apply_ok(&pod("db-reader", "data"), &[]);
    let reader_node = wait_running(s, "db-reader");
    if !pv["spec"]["nodeAffinity"].is_null() {
        assert_eq!(reader_node, node, "{pv}");
    }
}

/// A class of static volumes, bound when a pod uses them, and a 5Gi volume of that class
/// usable on `node` only.
fn local_class_and_volume(node: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-{node}
spec:
  storageClassName: local
  capacity:
    storage: 5Gi
  accessModes: [ReadWriteOnce]
  hostPath:
    path: /mnt/disks/local
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values: [{node}]
"
    )
}

#[test]
fn a_static_volume_brings_the_pod_to_its_node() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(&local_class_and_volume("node-1"), &[]);
    s.apply_ok(&claim("data").replace("standard", "local"), &[]);
    s.apply_ok(&pod("db", "data"), &[]);
    assert_eq!(wait_running(s, "db"), "node-1");
    let pv = s.kubectl_json(&["get", "pv", "local-node-1"]);
    assert_eq!(pv["spec"]["claimRef"]["name"], "data", "{pv}");
    assert_eq!(pv["status"]["phase"], "Bound", "{pv}");
    let bound = s.kubectl_json(&["get", "pvc", "data"]);
    assert_eq!(bound["spec"]["volumeName"], "local-node-1", "{bound}");
    assert_eq!(bound["status"]["phase"], "Bound", "{bound}");
    // Nothing to provision: no node was selected for the claim.
    assert!(
        bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"].is_null(),
        "{bound}"
    );

    // Another claim of the class finds no volume left: kube-scheduler's reason on each node.
    s.apply_ok(&claim("more").replace("standard", "local"), &[]);
    s.apply_ok(&pod("db-2", "more"), &[]);
    let expected = "0/2 nodes are available: 2 node(s) didn't find available persistent \
                    volumes to bind. preemption: 0/2 nodes are available: 2 Preemption is not \
                    helpful for scheduling.";
    let condition = eventually("PodScheduled=False", DEADLINE, || {
        pod_scheduled(&s.kubectl_json(&["get", "pod", "db-2"]))
            .filter(|(status, _, _)| status == "False")
    });
    assert_eq!(condition.2, expected);
    let verdict = eventually("the per-node verdicts in the trace", DEADLINE, || {
        scheduler_spans(s, "pod/db-2")
            .into_iter()
            .find(|a| a.contains_key("filter.node-0"))
    });
    for node in ["node-0", "node-1"] {
        assert_eq!(
            verdict.get(&format!("filter.{node}")).map(String::as_str),
            Some("VolumeBinding: node(s) didn't find available persistent volumes to bind"),
            "{verdict:?}"
        );
    }
}

#[test]
fn a_pod_whose_claim_is_missing_waits_until_it_exists() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(&pod("orphan", "missing"), &[]);

    // kube-scheduler 1.33's words: VolumeBinding's PreFilter message instead of per-node
    // counts, and no node where preemption could help.
    let expected = "0/2 nodes are available: persistentvolumeclaim \"missing\" not found. \
                    preemption: 0/2 nodes are available: 2 Preemption is not helpful for \
                    scheduling.";
    let condition = eventually("PodScheduled=False", DEADLINE, || {
        pod_scheduled(&s.kubectl_json(&["get", "pod", "orphan"]))
            .filter(|(status, _, _)| status == "False")
    });
    assert_eq!(
        condition,
        ("False".into(), "Unschedulable".into(), expected.into())
    );
    let events = eventually("the FailedScheduling event", DEADLINE, || {
        let m = failed_scheduling(s, "orphan");
        (!m.is_empty()).then_some(m)
    });
    assert!(events.iter().all(|m| m == expected), "{events:?}");
    let described = s.kubectl_ok(&["describe", "pod", "orphan"]);
    assert!(described.contains(expected), "{described}");

    // The decision's trace names the plugin once, not per node.
    let verdict = eventually("the PreFilter verdict in the trace", DEADLINE, || {
        scheduler_spans(s, "pod/orphan")
            .into_iter()
            .find(|a| a.contains_key("prefilter"))
    });
    assert_eq!(
        verdict.get("prefilter").map(String::as_str),
        Some("VolumeBinding: persistentvolumeclaim \"missing\" not found"),
        "{verdict:?}"
    );

    // The claim appears: VolumeBinding's hint sends the pod back to the queue, and it runs.
    s.apply_ok(&claim("missing"), &[]);
    let selected = wait_selected_node(s, "missing");
    let node = wait_running(s, "orphan");
    assert_eq!(node, selected);
    let bound = s.kubectl_json(&["get", "pvc", "missing"]);
    assert_eq!(bound["status"]["phase"], "Bound", "{bound}");
}

#[test]
fn the_scheduler_binds_volumes_with_only_its_roles() {
    // As `miniplane up` runs it: the scheduler as `system:kube-scheduler` (bound to
    // `system:kube-scheduler` and `system:volume-scheduler`: claims patched, volumes updated,
    // classes watched); the PV controller and the provisioner as their ServiceAccount.
    let s = Server::start_secure(&[]);
    let (_kubelet, _scheduler) = support::process_cluster::secure_nodes_and_scheduler(&s, 2);
    let _manager = Component::start_as(
        &s,
        &[
            "controller-manager",
            "--listen",
            "127.0.0.1:0",
            "--controllers",
            "persistentvolume-binder,simulated-provisioner",
            "--use-service-account-credentials",
        ],
        "miniplane controller-manager started",
        "system:kube-controller-manager",
        &[],
    );
    let s = &s;
    s.apply_ok(&claim("data"), &[]);
    s.apply_ok(&pod("db", "data"), &[]);
    let selected = wait_selected_node(s, "data");
    eventually("claim data Bound", DEADLINE, || {
        let pvc = s.kubectl_json(&["get", "pvc", "data"]);
        (pvc["status"]["phase"] == "Bound").then_some(())
    });
    // Bound only once the claim was: then the simulated kubelet runs it.
    assert_eq!(wait_running(s, "db"), selected);
}
