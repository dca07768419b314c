//! API semantics that controllers and informers rely on, checked over raw HTTP and kubectl:
//! watch filtering when an object stops or starts matching a selector, bookmarks, the pod
//! `binding` subresource (the scheduler's write), `deletecollection`, immutable fields,
//! `resourceVersion` in the future, generation rules, `kubectl get all` (categories) and
//! `kubectl diff` (server dry run).
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::{Server, deployment_yaml, pod_yaml};

const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn rv(obj: &serde_json::Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn merge_patch(s: &Server, path: &str, patch: serde_json::Value) -> serde_json::Value {
    let resp = s.http(
        "PATCH",
        path,
        Some("application/merge-patch+json"),
        patch.to_string().as_bytes(),
    );
    assert_eq!(resp.status, 200, "PATCH {path}: {}", resp.text());
    resp.json()
}

#[test]
fn watch_with_a_selector_sees_objects_leave_and_enter_it() {
    let s = Server::start();
    s.apply_ok(&pod_yaml("p", "app: a", None), &[]);
    let list = s.get(&format!("{PODS}?labelSelector=app%3Da")).json();
    let start = rv(&list);
    // p leaves the selector (app=b), then comes back (app=a).
    merge_patch(
        &s,
        &format!("{PODS}/p"),
        json!({"metadata": {"labels": {"app": "b"}}}),
    );
    merge_patch(
        &s,
        &format!("{PODS}/p"),
        json!({"metadata": {"labels": {"app": "a"}}}),
    );
    let (status, events) = s.watch_events(
        &format!("{PODS}?watch=1&labelSelector=app%3Da&resourceVersion={start}"),
        2,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // Kubernetes' cacher (`cacher.go` `watchCacheEvent` filtering): an object that stops
    // matching is DELETED for this watcher, one that starts matching is ADDED.
    assert_eq!(types, ["DELETED", "ADDED"], "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["labels"]["app"], "b");
}

#[test]
fn watch_from_zero_replays_state_then_bookmarks_when_asked() {
    let s = Server::start();
    s.apply_ok(&pod_yaml("p1", "app: a", None), &[]);
    s.apply_ok(&pod_yaml("p2", "app: a", None), &[]);
    let (status, events) = s.watch_events(
        &format!(
            "{PODS}?watch=1&resourceVersion=0&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5"
        ),
        3,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "BOOKMARK"], "{events:?}");
    let bookmark = &events[2]["object"];
    assert_eq!(bookmark["kind"], "Pod", "{bookmark}");
    assert_eq!(bookmark["apiVersion"], "v1", "{bookmark}");
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{bookmark}"
    );
    assert!(bookmark["metadata"]["resourceVersion"].is_string());
}

#[test]
fn watch_honours_timeout_seconds() {
    let s = Server::start();
    let start = Instant::now();
    let (status, events) = s.watch_events(
        &format!("{PODS}?watch=1&timeoutSeconds=1&resourceVersion=0"),
        100,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    assert!(events.is_empty(), "{events:?}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "the stream closed after {took:?}"
    );
}

#[test]
fn binding_assigns_a_node_once() {
    let s = Server::start();
    s.apply_ok(&pod_yaml("p", "app: a", None), &[]);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let resp = s.send_json("POST", &format!("{PODS}/p/binding"), &binding);
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(resp.json()["status"], "Success");
    let pod = s.get(&format!("{PODS}/p")).json();
    assert_eq!(pod["spec"]["nodeName"], "node-1", "{pod}");
    let scheduled = pod["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
        .unwrap_or_else(|| panic!("a PodScheduled condition: {pod}"));
    assert_eq!(scheduled["status"], "True");

    let mut again = binding.clone();
    again["target"]["name"] = "node-2".into();
    let msg = s
        .send_json("POST", &format!("{PODS}/p/binding"), &again)
        .expect_status(409, "Conflict");
    assert!(
        msg.contains("pod p is already assigned to node \"node-1\""),
        "{msg}"
    );
    let mut empty = binding;
    empty["target"]["name"] = "".into();
    s.apply_ok(&pod_yaml("q", "app: a", None), &[]);
    empty["metadata"]["name"] = "q".into();
    let resp = s.send_json("POST", &format!("{PODS}/q/binding"), &empty);
    assert!(
        resp.status == 422 || resp.status == 400,
        "{} {}",
        resp.status,
        resp.text()
    );
    s.send_json("POST", &format!("{PODS}/ghost/binding"), &again)
        .expect_status(404, "NotFound");
}

#[test]
fn delete_collection_by_label() {
    let s = Server::start();
    for (name, app) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        s.apply_ok(&pod_yaml(name, &format!("app: {app}"), None), &[]);
    }
    let resp = s.http(
        "DELETE",
        &format!("{PODS}?labelSelector=app%3Da"),
        None,
        b"",
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["kind"], "PodList", "{}", resp.text());
    let left = s.kubectl_ok(&["get", "pods", "-o", "name"]);
    assert_eq!(left.trim(), "pod/b1");
    let out = s.kubectl_ok(&["delete", "pods", "--all"]);
    assert!(out.contains("pod \"b1\" deleted"), "{out}");
    let run = s.kubectl(&["get", "pods"]);
    assert!(run.stderr.contains("No resources found"), "{run}");
}

#[test]
fn immutable_fields_and_generation() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let path = format!("{DEPLOYMENTS}/web");
    // apps/v1 selectors are immutable (`pkg/apis/apps/validation` ValidateDeploymentUpdate).
    let resp = s.http(
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"spec":{"selector":{"matchLabels":{"app":"web","x":"y"}},"template":{"metadata":{"labels":{"app":"web","x":"y"}}}}}"#,
    );
    let msg = resp.expect_status(422, "Invalid");
    assert!(msg.contains("spec.selector"), "{msg}");
    assert!(msg.contains("field is immutable"), "{msg}");

    // Generation: +1 for spec changes, never for labels or status.
    let g = |o: &serde_json::Value| o["metadata"]["generation"].as_i64().unwrap();
    let d = s.get(&path).json();
    assert_eq!(g(&d), 1);
    let d = merge_patch(&s, &path, json!({"metadata": {"labels": {"tier": "x"}}}));
    assert_eq!(g(&d), 1, "labels: {d}");
    let d = merge_patch(&s, &path, json!({"spec": {"replicas": 4}}));
    assert_eq!(g(&d), 2, "spec: {d}");
    let d = merge_patch(
        &s,
        &format!("{path}/status"),
        json!({"status": {"replicas": 4}}),
    );
    assert_eq!(g(&d), 2, "status: {d}");
    // uid and creationTimestamp cannot be changed.
    let d = merge_patch(
        &s,
        &path,
        json!({"metadata": {"creationTimestamp": "2000-01-01T00:00:00Z"}}),
    );
    assert_ne!(d["metadata"]["creationTimestamp"], "2000-01-01T00:00:00Z");
    let resp = s.http(
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        br#"{"metadata":{"uid":"00000000-0000-0000-0000-000000000000"}}"#,
    );
    assert!(
        resp.status == 409 || resp.status == 422,
        "{} {}",
        resp.status,
        resp.text()
    );
}

#[test]
fn resource_version_in_the_future_is_a_timeout() {
    let s = Server::start();
    let start = Instant::now();
    let resp = s.get(&format!(
        "{PODS}?resourceVersion=99999999&resourceVersionMatch=NotOlderThan"
    ));
    // `storage/cacher` waits up to 3 s for the revision, then 504 with ResourceVersionTooLarge
    // (client-go re-lists from "" on it).
    let msg = resp.expect_status(504, "Timeout");
    assert!(msg.contains("Too large resource version"), "{msg}");
    let status = resp.json();
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{status}"
    );
    assert!(start.elapsed() < Duration::from_secs(15));
}

#[test]
fn get_all_uses_categories_and_diff_uses_server_dry_run() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    s.apply_ok(&pod_yaml("p", "app: web", None), &[]);
    s.apply_ok(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-in-all\n",
        &[],
    );
    let out = s.kubectl_ok(&["get", "all", "-o", "name"]);
    let names: Vec<&str> = out.lines().collect();
    assert!(names.contains(&"pod/p"), "{out}");
    assert!(names.contains(&"deployment.apps/web"), "{out}");
    assert!(!out.contains("not-in-all"), "{out}");

    // kubectl diff: exit 0 when nothing changes, 1 with a unified diff when it does.
    let run = s.kubectl_run(
        &["diff", "-f", "-"],
        Some(&deployment_yaml("web", 1, "nginx:1.25")),
        &[],
    );
    assert_eq!(run.status.code(), Some(0), "{run}");
    let run = s.kubectl_run(
        &["diff", "-f", "-"],
        Some(&deployment_yaml("web", 1, "nginx:1.26")),
        &[],
    );
    assert_eq!(run.status.code(), Some(1), "{run}");
    assert!(run.stdout.contains("-      - image: nginx:1.25"), "{run}");
    assert!(run.stdout.contains("+      - image: nginx:1.26"), "{run}");
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

/// A Deployment's generation also counts annotation changes, because the deployment controller
/// copies annotations to its ReplicaSets (`pkg/registry/apps/deployment/strategy.go`
/// `PrepareForUpdate`).
#[test]
fn deployment_generation_counts_annotation_changes() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let path = format!("{DEPLOYMENTS}/web");
    let d = merge_patch(
        &s,
        &path,
        json!({"metadata": {"annotations": {"note": "x"}}}),
    );
    assert_eq!(d["metadata"]["generation"], 2, "{d}");
    // kubectl annotate, too.
    s.kubectl_ok(&["annotate", "deployment", "web", "note=y", "--overwrite"]);
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(d["metadata"]["generation"], 3, "{d}");
}

/// Optimistic concurrency under a race: of many updates carrying the same resourceVersion,
/// exactly one wins; the others get 409 Conflict (etcd's compare-and-swap, surfaced by
/// `registry/generic/registry/store.go` `Update`).
#[test]
fn concurrent_updates_with_one_resource_version_have_one_winner() {
    let s = Server::start();
    let created = s
        .send_json(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "race"}, "data": {"n": "0"}}),
        )
        .expect_created();
    let codes: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let mut body = created.clone();
                // Never "0": an update that changes nothing is a legitimate no-op 200.
                body["data"]["n"] = (i + 1).to_string().into();
                let s = &s;
                scope.spawn(move || {
                    s.send_json("PUT", "/api/v1/namespaces/default/configmaps/race", &body)
                        .status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|&&c| c == 200).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|&&c| c == 409).count(), 15, "{codes:?}");
    let winner = codes.iter().position(|&c| c == 200).unwrap() + 1;
    let stored = s.get("/api/v1/namespaces/default/configmaps/race").json();
    assert_eq!(stored["data"]["n"], winner.to_string(), "{stored}");
}

/// A watch can resume across a server restart from a resourceVersion read before it: the
/// revision counter and the history survive (the store is durable).
#[test]
fn a_watch_resumes_across_a_restart() {
    let mut s = Server::start();
    s.apply_ok(&pod_yaml("p", "app: a", None), &[]);
    let before = rv(&s.get(PODS).json());
    s.kubectl_ok(&["label", "pod", "p", "step=one"]);
    assert!(s.restart(), "graceful stop");
    s.kubectl_ok(&["label", "pod", "p", "step=two", "--overwrite"]);
    let (status, events) = s.watch_events(
        &format!("{PODS}?watch=1&resourceVersion={before}"),
        2,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    let steps: Vec<&str> = events
        .iter()
        .map(|e| {
            e["object"]["metadata"]["labels"]["step"]
                .as_str()
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(steps, ["one", "two"], "{events:?}");
}

/// `kubectl rollout restart` stamps the pod template (a strategic merge patch of an
/// annotation), which is a spec change: the generation moves.
#[test]
fn rollout_restart_changes_the_template() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let out = s.kubectl_ok(&["rollout", "restart", "deployment/web"]);
    assert_eq!(out.trim(), "deployment.apps/web restarted");
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string(),
        "{d}"
    );
    assert_eq!(d["metadata"]["generation"], 2, "{d}");
}

/// Watches across all namespaces and on cluster-scoped kinds (what kube-controller-manager's
/// and the scheduler's informers open).
#[test]
fn all_namespace_and_cluster_scoped_watches() {
    let s = Server::start();
    s.apply_ok(&support::namespace_yaml("other"), &[]);
    let start = rv(&s.get("/api/v1/pods").json());
    let nodes_start = rv(&s.get("/api/v1/nodes").json());
    s.apply_ok(&pod_yaml("here", "app: a", None), &[]);
    s.apply_ok(&pod_yaml("there", "app: a", None), &["-n", "other"]);
    s.apply_ok("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n", &[]);
    let (status, events) = s.watch_events(
        &format!("/api/v1/pods?watch=1&resourceVersion={start}"),
        2,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["object"]["metadata"]["namespace"].as_str().unwrap_or("?"),
                e["object"]["metadata"]["name"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("default", "here"), ("other", "there")],
        "{events:?}"
    );
    let (status, events) = s.watch_events(
        &format!("/api/v1/nodes?watch=1&resourceVersion={nodes_start}"),
        1,
        Duration::from_secs(20),
    );
    assert_eq!(status, 200);
    assert_eq!(events[0]["type"], "ADDED", "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["name"], "n1", "{events:?}");
}
