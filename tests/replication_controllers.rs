//! End to end: ReplicationControllers (core/v1), kept by the controller-manager's replication
//! manager. The API server, the controller-manager, the scheduler and two simulated kubelets
//! as separate processes, driven by the real kubectl: an RC without a selector is defaulted
//! from its template, gets its pods (owned by the RC) Running, scales through `/scale`, is
//! refused when its selector does not select its template, and takes its pods with it when
//! deleted.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support;

use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

const SETTLE: Duration = Duration::from_secs(90);

const RC: &str = "apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 3
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
";

/// Names of the pods labelled `app=web` that are Running and not being deleted.
fn running_pods(s: &Server) -> Vec<String> {
    let list = s.kubectl_json(&["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_replication_controller_keeps_its_pods_scales_and_takes_them_with_it() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(RC, &[]);

    // Defaulted as kube-apiserver defaults it: selector and labels from the template.
    let rc = s.kubectl_json(&["get", "rc", "web"]);
    assert_eq!(rc["spec"]["selector"]["app"], "web", "{rc}");
    assert_eq!(rc["metadata"]["labels"]["app"], "web", "{rc}");

    eventually("3 Running pods", SETTLE, || {
        (running_pods(s).len() == 3).then_some(())
    });
    let pod = &s.kubectl_json(&["get", "pods", "-l", "app=web"])["items"][0];
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "v1", "{pod}");
    assert_eq!(owner["kind"], "ReplicationController", "{pod}");
    assert_eq!(owner["name"], "web", "{pod}");
    assert_eq!(owner["uid"], rc["metadata"]["uid"], "{pod}");
    assert_eq!(owner["controller"], true, "{pod}");

    eventually("status readyReplicas 3", SETTLE, || {
        let rc = s.kubectl_json(&["get", "rc", "web"]);
        (rc["status"]["readyReplicas"] == 3 && rc["status"]["availableReplicas"] == 3).then_some(())
    });
    let table = s.kubectl_ok(&["get", "rc", "web"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{table}"
    );
    assert_eq!(lines[1][..4], ["web", "3", "3", "3"], "{table}");
    let wide = s.kubectl_ok(&["get", "rc", "web", "-o", "wide"]);
    assert!(
        wide.contains("SELECTOR") && wide.contains("app=web"),
        "{wide}"
    );

    // `kubectl scale` goes through `/scale`, whose selector is the RC's map.
    let scale: serde_json::Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/replicationcontrollers/web/scale",
    ]))
    .unwrap();
    assert_eq!(scale["status"]["selector"], "app=web", "{scale}");
    s.kubectl_ok(&["scale", "rc", "web", "--replicas=1"]);
    eventually("1 pod left", SETTLE, || {
        (running_pods(s).len() == 1
            && s.kubectl_json(&["get", "pods", "-l", "app=web"])["items"]
                .as_array()
                .is_some_and(|a| a.len() == 1))
        .then_some(())
    });
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=ReplicationController,involvedObject.name=web",
    ]);
    assert!(events.contains("Created pod: web-"), "{events}");
    assert!(events.contains("Deleted pod: web-"), "{events}");

    // A selector that does not select the template is refused, as kube-apiserver words it.
    let bad = RC.replace("name: web", "name: bad").replace(
        "  replicas: 3\n",
        "  replicas: 3\n  selector:\n    app: other\n",
    );
    let run = s.apply_yaml(&bad, &[]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        ),
        "{run}"
    );

    // Deleting the RC deletes its pods (background cascading deletion).
    s.kubectl_ok(&["delete", "rc", "web"]);
    eventually("the pods are gone", SETTLE, || {
        s.kubectl_json(&["get", "pods", "-l", "app=web"])["items"]
            .as_array()
            .is_some_and(|a| a.is_empty())
            .then_some(())
    });
}
