//! End to end: PodDisruptionBudgets. The API server, the controller-manager (with the
//! disruption controller), the scheduler and two simulated kubelets as separate processes,
//! driven by the real kubectl: a budget's status follows its pods, an eviction it does not
//! allow is answered 429 with Kubernetes' message, `kubectl drain` is held back by it, and
//! goes through (retrying as it does on a cluster) once the budget allows.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support;

use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

const SETTLE: Duration = Duration::from_secs(90);

const APP: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 2
  selector:
    matchLabels:
      app: web
";

fn pdb_status(s: &Server) -> serde_json::Value {
    s.kubectl_json(&["get", "pdb", "web"])["status"].clone()
}

/// `(name, node)` of the Running pods of `app=web` not being deleted.
fn running(s: &Server) -> Vec<(String, String)> {
    s.kubectl_json(&["get", "pods", "-l", "app=web"])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null() && p["status"]["phase"] == "Running"
        })
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_disruption_budget_holds_back_evictions_and_drain_until_it_allows() {
    let c = ProcessCluster::start(2);
    let s = &c.s;
    s.apply_ok(APP, &[]);
    eventually("2 healthy of 2 desired", SETTLE, || {
        let st = pdb_status(s);
        (st["currentHealthy"] == 2 && st["desiredHealthy"] == 2 && st["expectedPods"] == 2)
            .then_some(())
    });
    let st = pdb_status(s);
    assert_eq!(st["disruptionsAllowed"], 0, "{st}");
    assert_eq!(st["conditions"][0]["type"], "DisruptionAllowed", "{st}");
    assert_eq!(st["conditions"][0]["reason"], "InsufficientPods", "{st}");
    let table = s.kubectl_ok(&["get", "pdb"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(lines[1][..4], ["web", "2", "N/A", "0"], "{table}");

    // An eviction the budget forbids: 429 with kube-apiserver's words, the pod stays.
    let (victim, node) = running(s).first().cloned().unwrap();
    let eviction = format!(
        "{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"{victim}\",\"namespace\":\"default\"}}}}"
    );
    let run = s.kubectl_run(
        &[
            "create",
            "--raw",
            &format!("/api/v1/namespaces/default/pods/{victim}/eviction"),
            "-f",
            "-",
        ],
        Some(&eviction),
        &[],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{run}"
    );
    // `kubectl drain` retries every 5 s and gives up at its timeout.
    let run = s.kubectl(&["drain", &node, "--ignore-daemonsets", "--timeout=12s"]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{run}"
    );
    assert!(run.stderr.contains("will retry after 5s"), "{run}");
    assert_eq!(running(s).len(), 2, "nothing was evicted");

    // Once the budget allows one disruption, the drain goes through.
    s.kubectl_ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        "{\"spec\":{\"minAvailable\":1}}",
    ]);
    eventually("1 disruption allowed", SETTLE, || {
        let st = pdb_status(s);
        (st["disruptionsAllowed"] == 1 && st["observedGeneration"] == 2).then_some(())
    });
    let run = s.kubectl(&["drain", &node, "--ignore-daemonsets", "--timeout=80s"]);
    assert!(run.ok(), "{run}");
    assert!(
        run.stdout.contains(&format!("pod/{victim} evicted")),
        "{run}"
    );
    eventually("2 pods Running away from the drained node", SETTLE, || {
        let pods = running(s);
        (pods.len() == 2 && pods.iter().all(|(_, n)| *n != node)).then_some(())
    });
    let events = s.kubectl_ok(&["get", "events", "--field-selector", "reason=Killing"]);
    assert!(events.contains(&victim), "{events}");
}
