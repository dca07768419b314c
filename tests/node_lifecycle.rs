//! End to end: node failure. The kubelet simulator's fault API stops a node's heartbeats; the
//! controller-manager's node lifecycle controller marks it Unknown (NotReady), taints it
//! `node.kubernetes.io/unreachable`, evicts pods after their `tolerationSeconds`; heartbeats
//! come back and the node is Ready and untainted again; and, on an in-process cluster with a
//! scheduler, a Deployment's pod on the failed node is replaced on a healthy one.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use admin::FaultSpec;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use miniplane::admin_client::AdminClient;
use support::component::Component;
use support::{DEADLINE, Server, eventually, http, until};

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

/// The pods of `app=web`: (name, node, phase, terminating).
async fn web_pods(pods: &Api<Pod>) -> Vec<(String, String, String, bool)> {
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    list.items
        .into_iter()
        .map(|p| {
            let spec = p.spec.unwrap_or_default();
            let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
            (
                p.metadata.name.unwrap_or_default(),
                spec.node_name.unwrap_or_default(),
                phase,
                p.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect()
}

/// The node failure with a workload, every component in one process: a Deployment's
/// pods tolerate `unreachable` for 1 s; a node stops heartbeating, so its pods are evicted
/// (marked for deletion, `TaintManagerEviction`) and the ReplicaSet's replacements are
/// scheduled onto the healthy node and run there; the failed node's pods stay Terminating
/// until its kubelet is back, which then finishes their deletion.
#[tokio::test]
async fn a_deployment_pod_on_a_failed_node_is_replaced_on_a_healthy_one() {
    let cluster = crate::support::cluster()
        .nodes(2)
        .fast_node_lifecycle(true)
        .start()
        .unwrap();
    let client = cluster.client();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "tolerations": [
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 1},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 1}
                    ],
                    "containers": [{"name": "web", "image": "nginx:1.27"}]
                }
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let running = until("4 pods of web Running", || async {
        let all = web_pods(&pods).await;
        (all.len() == 4 && all.iter().all(|p| p.2 == "Running")).then_some(all)
    })
    .await;
    // The node with the most of them fails (any split of the four works).
    let on = |node: &str| running.iter().filter(|p| p.1 == node).count();
    let (failed, healthy) = if on("node-0") >= on("node-1") {
        ("node-0", "node-1")
    } else {
        ("node-1", "node-0")
    };
    let doomed: Vec<String> = running
        .iter()
        .filter(|p| p.1 == failed)
        .map(|p| p.0.clone())
        .collect();
    assert!(!doomed.is_empty(), "a pod on {failed}: {running:?}");

    let admin = AdminClient::new(client.clone());
    let stop = admin
        .inject(FaultSpec::StopHeartbeats {
            node: failed.into(),
        })
        .await
        .unwrap();
    let nodes = Api::<Node>::all(client.clone());
    until("the failed node tainted unreachable:NoExecute", || async {
        let node = nodes.get(failed).await.unwrap();
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
            .then_some(())
    })
    .await;
    let after = until("4 live pods of web Running on the healthy node", || async {
        let all = web_pods(&pods).await;
        let live: Vec<_> = all.iter().filter(|p| !p.3).collect();
        let evicted = doomed
            .iter()
            .all(|name| all.iter().any(|p| &p.0 == name && p.3));
        (evicted && live.len() == 4 && live.iter().all(|p| p.1 == healthy && p.2 == "Running"))
            .then_some(all)
    })
    .await;
    // The evicted pods are the failed node's, still there (Terminating), and nothing else is.
    let terminating: Vec<&String> = after.iter().filter(|p| p.3).map(|p| &p.0).collect();
    assert_eq!(terminating.len(), doomed.len(), "{after:?}");
    let events = Api::<Event>::default_namespaced(client.clone());
    for name in &doomed {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .unwrap();
        assert!(
            list.items
                .iter()
                .any(|e| e.reason.as_deref() == Some("TaintManagerEviction")
                    && e.message.as_deref()
                        == Some(&format!("Marking for deletion Pod default/{name}"))),
            "{name}: {:?}",
            list.items
                .iter()
                .map(|e| (&e.reason, &e.message))
                .collect::<Vec<_>>()
        );
    }

    // The kubelet comes back: it finishes the graceful deletion of the evicted pods.
    admin.clear(&stop.name).await.unwrap();
    until("the evicted pods gone", || async {
        let all = web_pods(&pods).await;
        (all.len() == 4 && all.iter().all(|p| !doomed.contains(&p.0))).then_some(())
    })
    .await;
}
