//! End to end: node failure. The kubelet simulator's fault API stops a node's heartbeats; the
//! controller-manager's node lifecycle controller marks it Unknown (NotReady), taints it
//! `node.kubernetes.io/unreachable`, evicts pods after their `tolerationSeconds`; heartbeats
//! come back and the node is Ready and untainted again.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::component::Component;
use support::{DEADLINE, Server, eventually, http};

fn kubelet(s: &Server, nodes: &str) -> Component {
    Component::start(
        s,
        &[
            "kubelet",
            "--nodes",
            nodes,
            "--listen",
            "127.0.0.1:0",
            "--lease-renew-interval",
            "100ms",
            "--node-status-update-frequency",
            "100ms",
        ],
        "miniplane kubelet:",
    )
}

fn controller_manager(s: &Server) -> Component {
    Component::start(
        s,
        &[
            "controller-manager",
            "--controllers",
            "nodelifecycle",
            "--listen",
            "127.0.0.1:0",
            "--node-monitor-grace-period",
            "1s",
            "--node-monitor-period",
            "100ms",
        ],
        "miniplane controller-manager started",
    )
}

fn pod(name: &str, node: &str, toleration_seconds: Option<u32>) -> String {
    let seconds = toleration_seconds.map_or(String::new(), |s| format!(", tolerationSeconds: {s}"));
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeName: {node}
  tolerations:
  - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute{seconds}}}
  containers:
  - name: app
    image: nginx
"
    )
}

fn node_status(s: &Server, node: &str) -> String {
    let out = s.kubectl_ok(&["get", "node", node, "--no-headers"]);
    out.split_whitespace().nth(1).unwrap_or_default().to_owned()
}

fn taints(s: &Server, node: &str) -> String {
    s.kubectl_json(&["get", "node", node, "-o", "json"])["spec"]["taints"].to_string()
}

fn control(k: &Component, method: &str, path: &str) -> u16 {
    let url = k.url();
    let addr = url.trim_start_matches("http://").parse().unwrap();
    http::request(addr, method, path, None, b"").unwrap().status
}

#[test]
fn unreachable_node_is_tainted_pods_evicted_and_recovers() {
    let s = Server::start();
    let k = kubelet(&s, "2");
    let _cm = controller_manager(&s);
    s.apply_ok(&pod("short", "node-0", Some(1)), &[]);
    s.apply_ok(&pod("forever", "node-0", None), &[]);
    for name in ["short", "forever"] {
        eventually("pods Running", DEADLINE, || {
            (s.kubectl_json(&["get", "pod", name, "-o", "json"])["status"]["phase"] == "Running")
                .then_some(())
        });
    }
    assert_eq!(control(&k, "GET", "/healthz"), 200);
    assert_eq!(
        control(&k, "POST", "/nodes/node-0/heartbeat?stop=true"),
        200
    );
    assert_eq!(control(&k, "POST", "/nodes/nope/heartbeat?stop=true"), 404);

    eventually("node-0 NotReady", DEADLINE, || {
        (node_status(&s, "node-0") == "NotReady").then_some(())
    });
    let node = s.kubectl_json(&["get", "node", "node-0", "-o", "json"]);
    let ready = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "Unknown");
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    eventually("unreachable taints", DEADLINE, || {
        let t = taints(&s, "node-0");
        (t.contains("node.kubernetes.io/unreachable")
            && t.contains("NoExecute")
            && t.contains("NoSchedule"))
        .then_some(())
    });
    assert_eq!(
        node_status(&s, "node-1"),
        "Ready",
        "the other node is untouched"
    );

    // tolerationSeconds 1: marked for deletion (it stays Terminating while its kubelet is down).
    eventually("short evicted", DEADLINE, || {
        s.kubectl_json(&["get", "pod", "short", "-o", "json"])["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(())
    });
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=short",
    ]);
    assert!(events.contains("TaintManagerEviction"), "{events}");
    assert!(
        events.contains("Marking for deletion Pod default/short"),
        "{events}"
    );
    let forever = s.kubectl_json(&["get", "pod", "forever", "-o", "json"]);
    assert!(
        forever["metadata"]["deletionTimestamp"].is_null(),
        "tolerated forever"
    );

    assert_eq!(
        control(&k, "POST", "/nodes/node-0/heartbeat?stop=false"),
        200
    );
    eventually("node-0 Ready again", DEADLINE, || {
        (node_status(&s, "node-0") == "Ready").then_some(())
    });
    eventually("taints removed", DEADLINE, || {
        (taints(&s, "node-0") == "null" || taints(&s, "node-0") == "[]").then_some(())
    });
    // The kubelet is back: it finishes the eviction (graceful deletion) of `short`.
    eventually("short gone", DEADLINE, || {
        (!s.kubectl(&["get", "pod", "short"]).ok()).then_some(())
    });
    assert!(s.kubectl(&["get", "pod", "forever"]).ok());
}

#[test]
fn removed_node_and_stopped_kubelet() {
    let s = Server::start();
    let mut k = kubelet(&s, "2");
    let _cm = controller_manager(&s);
    assert_eq!(control(&k, "DELETE", "/nodes/node-1"), 200);
    eventually("node-1 deleted", DEADLINE, || {
        (!s.kubectl(&["get", "node", "node-1"]).ok()).then_some(())
    });
    // SIGTERM: heartbeats stop, the Node stays and goes NotReady, as with a real kubelet.
    assert!(k.stop(), "graceful exit on SIGTERM");
    assert!(s.kubectl(&["get", "node", "node-0"]).ok());
    eventually(
        "node-0 NotReady after the kubelet stopped",
        DEADLINE,
        || (node_status(&s, "node-0") == "NotReady").then_some(()),
    );
}
