//! End to end: StatefulSets. The API server, the controller-manager, the scheduler and
//! simulated kubelets as separate processes, driven by the real kubectl:
//!
//! * ordered start: `web-0`, `web-1`, `web-2`, each created only once its predecessor is
//!   Running and Ready, with its stable hostname, subdomain and labels; `kubectl rollout
//!   status sts/web` returns;
//! * a partitioned rollout (`partition: 2`) updates only `web-2`; lowering the partition
//!   finishes it from the highest ordinal down; `kubectl rollout history` lists both
//!   ControllerRevisions and `kubectl rollout undo` goes back;
//! * scaling down deletes the highest ordinal first, one at a time;
//! * claims from `volumeClaimTemplates` (`www-web-<n>`), with `whenScaled: Delete` handing a
//!   scaled-down pod's claim to the pod for the garbage collector.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support;

use serde_json::Value;
use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

/// How long a rollout may take on a loaded test machine.
const ROLLOUT: Duration = Duration::from_secs(120);

fn stateful_set_yaml(name: &str, replicas: u32, image: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}
spec:
  serviceName: nginx
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
{extra_spec}  template:
    metadata:
      labels:
        app: {name}
      annotations:
        miniplane.dev/ready-after: 2s
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {image}
"
    )
}

fn rollout_status(s: &Server, name: &str) -> String {
    let run = s.kubectl(&[
        "rollout",
        "status",
        &format!("statefulset/{name}"),
        "--timeout=120s",
    ]);
    assert!(run.ok(), "rollout status: {run}");
    run.stdout
}

fn pod_json(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "pod", name])
}

/// `(name, image)` of the set's pods that are not being deleted, by name.
fn pods_of(s: &Server, app: &str) -> Vec<(String, String)> {
    let list = s.kubectl_json(&["get", "pods", "-l", &format!("app={app}")]);
    let mut pods: Vec<(String, String)> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    pods.sort();
    pods
}

fn wait_for_images(s: &Server, app: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, i)| ((*n).to_owned(), (*i).to_owned()))
        .collect();
    eventually(&format!("{app}: {want:?}"), ROLLOUT, || {
        (pods_of(s, app) == want).then_some(())
    });
}

fn timestamp(v: &Value) -> jiff::Timestamp {
    v.as_str().unwrap_or_default().parse().unwrap()
}

fn revisions(s: &Server, set: &str) -> Vec<String> {
    let history = s.kubectl_ok(&["rollout", "history", &format!("statefulset/{set}")]);
    history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn a_stateful_set_starts_in_order_rolls_out_by_partition_undoes_and_scales_down() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(&stateful_set_yaml("web", 3, "nginx:1", ""), &[]);
    let out = rollout_status(s, "web");
    // The API server defaults `rollingUpdate.partition` to 0, so kubectl reports a partitioned
    // roll out, as it does against Kubernetes.
    assert!(
        out.contains("partitioned roll out complete: 3 new pods have been updated"),
        "{out}"
    );

    // Stable identities.
    let web1 = pod_json(s, "web-1");
    assert_eq!(web1["spec"]["hostname"], "web-1", "{web1}");
    assert_eq!(web1["spec"]["subdomain"], "nginx", "{web1}");
    assert_eq!(
        web1["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
        "web-1"
    );
    assert_eq!(
        web1["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
        "1"
    );
    assert_eq!(
        web1["metadata"]["ownerReferences"][0]["kind"],
        "StatefulSet"
    );

    // Ordered start: each pod created only once its predecessor was Ready.
    for (before, after) in [("web-0", "web-1"), ("web-1", "web-2")] {
        let before = pod_json(s, before);
        let ready = before["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap()["lastTransitionTime"]
            .clone();
        let created = pod_json(s, after)["metadata"]["creationTimestamp"].clone();
        assert!(
            timestamp(&created) >= timestamp(&ready),
            "{after} created {created} before {ready}"
        );
        assert!(
            timestamp(&created) > timestamp(&before["metadata"]["creationTimestamp"]),
            "{after} created with its predecessor"
        );
    }
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=StatefulSet,involvedObject.name=web",
    ]);
    assert!(
        events.contains("create Pod web-0 in StatefulSet web successful"),
        "{events}"
    );
    assert!(events.contains("SuccessfulCreate"), "{events}");
    let sts = s.kubectl_json(&["get", "statefulset", "web"]);
    let status = &sts["status"];
    assert_eq!(status["readyReplicas"], 3, "{sts}");
    assert_eq!(status["availableReplicas"], 3, "{sts}");
    assert_eq!(status["currentRevision"], status["updateRevision"], "{sts}");
    let first_revision = status["currentRevision"].as_str().unwrap().to_owned();
    assert_eq!(
        web1["metadata"]["labels"]["controller-revision-hash"],
        first_revision.as_str(),
        "{web1}"
    );

    // A partitioned rollout: only ordinals >= 2.
    s.kubectl_ok(&[
        "patch",
        "statefulset",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}}}}"#,
    ]);
    s.kubectl_ok(&["set", "image", "statefulset/web", "main=nginx:2"]);
    let out = rollout_status(s, "web");
    assert!(
        out.contains("partitioned roll out complete: 1 new pods have been updated"),
        "{out}"
    );
    wait_for_images(
        s,
        "web",
        &[
            ("web-0", "nginx:1"),
            ("web-1", "nginx:1"),
            ("web-2", "nginx:2"),
        ],
    );
    let sts = s.kubectl_json(&["get", "statefulset", "web"]);
    assert_eq!(sts["status"]["updatedReplicas"], 1, "{sts}");
    assert_eq!(
        sts["status"]["currentRevision"],
        first_revision.as_str(),
        "{sts}"
    );

    // Partition 0: the rest, highest first.
    s.kubectl_ok(&[
        "patch",
        "statefulset",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
    ]);
    rollout_status(s, "web");
    wait_for_images(
        s,
        "web",
        &[
            ("web-0", "nginx:2"),
            ("web-1", "nginx:2"),
            ("web-2", "nginx:2"),
        ],
    );
    let web0 = timestamp(&pod_json(s, "web-0")["metadata"]["creationTimestamp"]);
    let web1 = timestamp(&pod_json(s, "web-1")["metadata"]["creationTimestamp"]);
    assert!(web1 < web0, "web-1 was updated before web-0");
    assert_eq!(revisions(s, "web"), ["1", "2"]);
    let detail = s.kubectl_ok(&["rollout", "history", "statefulset/web", "--revision=1"]);
    assert!(detail.contains("nginx:1"), "{detail}");

    // Undo: back to nginx:1, its revision renumbered 3.
    let undo = s.kubectl_ok(&["rollout", "undo", "statefulset/web"]);
    assert!(undo.contains("rolled back"), "{undo}");
    rollout_status(s, "web");
    wait_for_images(
        s,
        "web",
        &[
            ("web-0", "nginx:1"),
            ("web-1", "nginx:1"),
            ("web-2", "nginx:1"),
        ],
    );
    eventually("revisions 2 and 3", ROLLOUT, || {
        (revisions(s, "web") == ["2", "3"]).then_some(())
    });
    let sts = s.kubectl_json(&["get", "statefulset", "web"]);
    assert_eq!(
        sts["status"]["updateRevision"],
        first_revision.as_str(),
        "the first revision is reused: {sts}"
    );

    // Scale down: web-2 goes before web-1, one at a time.
    s.kubectl_ok(&["scale", "statefulset", "web", "--replicas=1"]);
    eventually("only web-0 is left", ROLLOUT, || {
        let list = s.kubectl_json(&["get", "pods", "-l", "app=web"]);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let live = |n: &str| {
            items
                .iter()
                .any(|p| p["metadata"]["name"] == n && p["metadata"]["deletionTimestamp"].is_null())
        };
        let present = |n: &str| items.iter().any(|p| p["metadata"]["name"] == n);
        assert!(
            live("web-1") || !present("web-2"),
            "web-1 is being deleted while web-2 is still there: {list}"
        );
        (!present("web-1") && !present("web-2") && live("web-0")).then_some(())
    });
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=StatefulSet,involvedObject.name=web",
    ]);
    assert!(
        events.contains("delete Pod web-2 in StatefulSet web successful"),
        "{events}"
    );
    assert!(
        events.contains("delete Pod web-1 in StatefulSet web successful"),
        "{events}"
    );
}

#[test]
fn claims_come_from_templates_and_follow_the_retention_policy() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    let extra = "  podManagementPolicy: Parallel
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Retain
    whenScaled: Delete
  volumeClaimTemplates:
  - metadata:
      name: www
      labels:
        tier: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
";
    s.apply_ok(&stateful_set_yaml("db", 2, "postgres:16", extra), &[]);
    let claim = eventually("claims www-db-0 and www-db-1", ROLLOUT, || {
        let run = s.kubectl(&["get", "pvc", "www-db-1", "-o", "json"]);
        let ok = run.ok() && s.kubectl(&["get", "pvc", "www-db-0"]).ok();
        ok.then(|| serde_json::from_str::<Value>(&run.stdout).unwrap())
    });
    assert_eq!(claim["metadata"]["labels"]["tier"], "data", "{claim}");
    assert_eq!(claim["metadata"]["labels"]["app"], "db", "{claim}");
    let pod = eventually("pod db-1", ROLLOUT, || {
        let run = s.kubectl(&["get", "pod", "db-1", "-o", "json"]);
        run.ok()
            .then(|| serde_json::from_str::<Value>(&run.stdout).unwrap())
    });
    let volume = &pod["spec"]["volumes"][0];
    assert_eq!(volume["name"], "www", "{pod}");
    assert_eq!(
        volume["persistentVolumeClaim"]["claimName"], "www-db-1",
        "{pod}"
    );
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=StatefulSet,involvedObject.name=db",
    ]);
    assert!(
        events.contains("create Claim www-db-0 Pod db-0 in StatefulSet db success"),
        "{events}"
    );

    // Scaled down: db-1's claim gets db-1 as owner, then goes with it.
    s.kubectl_ok(&["scale", "statefulset", "db", "--replicas=1"]);
    eventually("www-db-1 owned by pod db-1", ROLLOUT, || {
        let run = s.kubectl(&["get", "pvc", "www-db-1", "-o", "json"]);
        if !run.ok() {
            return Some(());
        }
        let claim: Value = serde_json::from_str(&run.stdout).unwrap();
        let owners = claim["metadata"]["ownerReferences"].to_string();
        (owners.contains("\"Pod\"") && owners.contains("db-1")).then_some(())
    });
    // The garbage collector deletes the claim once its owner, pod db-1, is gone.
    eventually("www-db-1 deleted with db-1", ROLLOUT, || {
        let run = s.kubectl(&["get", "pvc", "www-db-1", "-o", "json"]);
        (!run.ok() && run.stderr.contains("NotFound")).then_some(())
    });
    assert!(
        s.kubectl(&["get", "pvc", "www-db-0"]).ok(),
        "www-db-0 is kept"
    );
}
