//! End to end with the real kubectl: an object's life after creation. `describe` (which also
//! reads events by field selector), `delete` in its three cascade modes (the API server's part:
//! the `foregroundDeletion` / `orphan` finalizers and deletionTimestamp), graceful pod deletion
//! and `--force`, `wait` (conditions, deletion, time-out) and `rollout status`, with status
//! written through `/status` as the controllers will later do.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{DEADLINE, Server, deployment_yaml, eventually, pod_yaml, write_status};

/// Reads the object, or `None` once it is gone (NotFound).
fn try_get(s: &Server, resource: &str, name: &str) -> Option<serde_json::Value> {
    let run = s.kubectl(&["get", resource, name, "-o", "json"]);
    if run.ok() {
        Some(serde_json::from_str(&run.stdout).unwrap())
    } else {
        assert!(run.stderr.contains("(NotFound)"), "{run}");
        None
    }
}

/// The value of the first `Key:   value` line of `describe` output (indentation ignored).
fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

fn finalizers(obj: &serde_json::Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|f| f.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn describe_deployment_and_pod() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    let out = s.kubectl_ok(&["describe", "deployment", "web"]);
    for (key, value) in [
        ("Name", "web"),
        ("Namespace", "default"),
        ("Labels", "app=web"),
        ("Selector", "app=web"),
        (
            "Replicas",
            "2 desired | 0 updated | 0 total | 0 available | 0 unavailable",
        ),
        ("StrategyType", "RollingUpdate"),
        ("MinReadySeconds", "0"),
        (
            "RollingUpdateStrategy",
            "25% max unavailable, 25% max surge",
        ),
        ("Image", "nginx:1.25"),
        ("Port", "80/TCP"),
    ] {
        assert_eq!(
            field(&out, key),
            Some(value),
            "describe deployment, {key}:\n{out}"
        );
    }
    s.apply_ok(&pod_yaml("p1", "app: web", Some("node-1")), &[]);
    let out = s.kubectl_ok(&["describe", "pod", "p1"]);
    for (key, value) in [
        ("Name", "p1"),
        ("Namespace", "default"),
        ("Status", "Pending"),
        ("Image", "busybox:1.36"),
    ] {
        assert_eq!(field(&out, key), Some(value), "describe pod, {key}:\n{out}");
    }
    assert!(
        field(&out, "Node").is_some_and(|n| n.starts_with("node-1")),
        "{out}"
    );
    assert!(out.contains("Containers:"), "{out}");

    let err = s.kubectl_err(&["describe", "deployment", "nope"]);
    assert!(
        err.contains("Error from server (NotFound): deployments.apps \"nope\" not found"),
        "{err}"
    );
}

/// `describe` lists the object's events with an `involvedObject.*` field selector
/// (`pkg/registry/core/event/strategy.go` `ToSelectableFields`).
#[test]
fn describe_shows_the_objects_events() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    let uid = s.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.uid}"]);
    // An event about the deployment, as the deployment controller would record it.
    s.apply_ok(
        &format!(
            "apiVersion: v1
kind: Event
metadata:
  name: web.scaled
involvedObject:
  kind: Deployment
  apiVersion: apps/v1
  name: web
  namespace: default
  uid: {uid}
reason: ScalingReplicaSet
message: Scaled up replica set web-5d4f8 from 0 to 2
type: Normal
source: {{component: deployment-controller}}
firstTimestamp: \"2026-01-01T00:00:00Z\"
lastTimestamp: \"2026-01-01T00:00:00Z\"
count: 1
"
        ),
        &[],
    );
    let out = s.kubectl_ok(&["describe", "deployment", "web"]);
    let events = out
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{out}"));
    assert!(events.contains("ScalingReplicaSet"), "{out}");
    assert!(
        events.contains("Scaled up replica set web-5d4f8 from 0 to 2"),
        "{out}"
    );

    let events = s.get(&format!(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.kind%3DDeployment%2CinvolvedObject.uid%3D{uid}"
    ));
    assert_eq!(events.status, 200, "{}", events.text());
    assert_eq!(events.json()["items"].as_array().map(Vec::len), Some(1));
}

#[test]
fn delete_background_is_immediate_without_finalizers() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let out = s.kubectl_ok(&["delete", "deployment", "web"]);
    assert!(out.contains("deployment.apps \"web\" deleted"), "{out}");
    assert!(try_get(&s, "deployment", "web").is_none());
    let err = s.kubectl_err(&["delete", "deployment", "web"]);
    assert!(
        err.contains("Error from server (NotFound): deployments.apps \"web\" not found"),
        "{err}"
    );
    // Deleting by manifest and by label selector.
    s.apply_ok(&deployment_yaml("a", 1, "nginx:1.25"), &[]);
    s.kubectl_run(
        &["delete", "-f", "-"],
        Some(&deployment_yaml("a", 1, "nginx:1.25")),
        &[],
    );
    assert!(try_get(&s, "deployment", "a").is_none());
    s.apply_ok(&pod_yaml("l1", "group: g", None), &[]);
    s.apply_ok(&pod_yaml("l2", "group: g", None), &[]);
    s.apply_ok(&pod_yaml("l3", "group: h", None), &[]);
    let out = s.kubectl_ok(&["delete", "pods", "-l", "group=g"]);
    assert!(
        out.contains("\"l1\" deleted") && out.contains("\"l2\" deleted"),
        "{out}"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "pods", "-o", "name"]).trim(),
        "pod/l3"
    );
}

#[test]
fn delete_foreground_waits_for_the_foreground_deletion_finalizer() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    // kubectl waits for the object to disappear; the garbage collector would remove the
    // finalizer once the dependents are gone. Here the test plays the garbage collector.
    let mut delete = s.kubectl_spawn(&["delete", "deployment", "web", "--cascade=foreground"]);
    let obj = eventually("deletionTimestamp + foregroundDeletion", DEADLINE, || {
        let obj = try_get(&s, "deployment", "web")?;
        obj["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(obj)
    });
    assert_eq!(finalizers(&obj), ["foregroundDeletion"], "{obj}");
    // Still there, still readable and listed while the finalizer is pending.
    assert!(
        s.kubectl_ok(&["get", "deployments", "-o", "name"])
            .contains("deployment.apps/web")
    );
    // A new finalizer may not be added while the object is being deleted.
    let run = s.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/late"}]"#,
    ]);
    assert!(!run.ok(), "{run}");

    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually("deployment gone", DEADLINE, || {
        try_get(&s, "deployment", "web").is_none().then_some(())
    });
    delete.wait_line("deleted", DEADLINE, |l| {
        l.contains("deployment.apps \"web\" deleted")
    });
    let (status, _, stderr) = delete.finish(DEADLINE);
    assert!(status.success(), "{stderr}");
}

#[test]
fn delete_orphan_uses_the_orphan_finalizer() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    s.kubectl_ok(&[
        "delete",
        "deployment",
        "web",
        "--cascade=orphan",
        "--wait=false",
    ]);
    let obj = try_get(&s, "deployment", "web").expect("kept until the orphan finalizer is removed");
    assert_eq!(finalizers(&obj), ["orphan"], "{obj}");
    assert!(obj["metadata"]["deletionTimestamp"].is_string(), "{obj}");
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    eventually("deployment gone", DEADLINE, || {
        try_get(&s, "deployment", "web").is_none().then_some(())
    });

    // A user finalizer holds a background delete too.
    s.apply_ok(
        &deployment_yaml("held", 1, "nginx:1.25").replace(
            "  labels:\n    app: held\n",
            "  labels:\n    app: held\n  finalizers: [example.com/hold]\n",
        ),
        &[],
    );
    s.kubectl_ok(&["delete", "deployment", "held", "--wait=false"]);
    let obj = try_get(&s, "deployment", "held").expect("held by its finalizer");
    assert_eq!(finalizers(&obj), ["example.com/hold"], "{obj}");
    assert!(obj["metadata"]["deletionTimestamp"].is_string(), "{obj}");
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":[]}}"#,
    ]);
    eventually("held gone", DEADLINE, || {
        try_get(&s, "deployment", "held").is_none().then_some(())
    });
}

#[test]
fn delete_pod_is_graceful_when_bound_and_force_removes_it() {
    let s = Server::start();
    s.apply_ok(&pod_yaml("bound", "app: x", Some("node-1")), &[]);
    let out = s.kubectl_ok(&["delete", "pod", "bound", "--wait=false"]);
    assert!(out.contains("pod \"bound\" deleted"), "{out}");
    // A kubelet would stop the containers and finish the deletion; until then the pod stays.
    let pod = try_get(&s, "pod", "bound").expect("a bound pod lingers while terminating");
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30, "{pod}");
    let table = s.kubectl_ok(&["get", "pod", "bound"]);
    assert!(
        table.lines().nth(1).unwrap().contains("Terminating"),
        "{table}"
    );

    let out = s.kubectl_ok(&["delete", "pod", "bound", "--grace-period=0", "--force"]);
    assert!(out.contains("pod \"bound\" force deleted"), "{out}");
    assert!(try_get(&s, "pod", "bound").is_none());

    // An unscheduled pod has no kubelet to wait for: deleted at once.
    s.apply_ok(&pod_yaml("free", "app: x", None), &[]);
    s.kubectl_ok(&["delete", "pod", "free", "--wait=false"]);
    assert!(try_get(&s, "pod", "free").is_none());

    // An explicit grace period is recorded.
    s.apply_ok(&pod_yaml("short", "app: x", Some("node-1")), &[]);
    s.kubectl_ok(&["delete", "pod", "short", "--grace-period=5", "--wait=false"]);
    let pod = try_get(&s, "pod", "short").unwrap();
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 5, "{pod}");
}

#[test]
fn wait_for_a_condition_written_through_status() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let wait = s.kubectl_spawn(&[
        "wait",
        "--for=condition=Available",
        "deployment/web",
        "--timeout=60s",
    ]);
    write_status(
        &s,
        "deployment",
        "web",
        serde_json::json!({"observedGeneration": 1, "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "ok"}]}),
    );
    let (status, out, err) = wait.finish(DEADLINE);
    assert!(status.success(), "{out}\n{err}");
    assert_eq!(out.trim(), "deployment.apps/web condition met");

    // Already met: returns at once.
    let out = s.kubectl_ok(&[
        "wait",
        "--for=condition=Available",
        "deployment/web",
        "--timeout=10s",
    ]);
    assert_eq!(out.trim(), "deployment.apps/web condition met");
    // jsonpath conditions, too.
    let out = s.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.observedGeneration}=1",
        "deployment/web",
        "--timeout=10s",
    ]);
    assert_eq!(out.trim(), "deployment.apps/web condition met");

    // The /status write did not touch the spec or the generation.
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(d["metadata"]["generation"], 1, "{d}");
    assert_eq!(d["spec"]["replicas"], 1, "{d}");

    // --for=delete
    s.apply_ok(&pod_yaml("doomed", "app: x", None), &[]);
    let mut wait = s.kubectl_spawn(&[
        "wait",
        "--for=delete",
        "pod/doomed",
        "--timeout=60s",
        "-v=6",
    ]);
    // Delete only once kubectl watches (its -v=6 log shows the watch request).
    wait.wait_line("the watch request", DEADLINE, |l| {
        l.contains("watch=true") && l.contains("pods")
    });
    s.kubectl_ok(&["delete", "pod", "doomed"]);
    let (status, out, err) = wait.finish(DEADLINE);
    assert!(status.success(), "{out}\n{err}");
    assert!(out.contains("pod/doomed condition met"), "{out}");
}

#[test]
fn wait_times_out_with_a_message() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let run = s.kubectl(&[
        "wait",
        "--for=condition=Foo",
        "deployment/web",
        "--timeout=2s",
    ]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("timed out waiting for the condition on deployments/web"),
        "{run}"
    );
    let err = s.kubectl_err(&[
        "wait",
        "--for=condition=Available",
        "deployment/nope",
        "--timeout=2s",
    ]);
    assert!(err.contains("deployments.apps \"nope\" not found"), "{err}");
}

#[test]
fn rollout_status_follows_status_updates() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 3, "nginx:1.25"), &[]);
    let mut rollout = s.kubectl_spawn(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    rollout.wait_line("waiting for the spec to be observed", DEADLINE, |l| {
        l.contains("Waiting for deployment spec update to be observed")
            || l.contains("Waiting for deployment \"web\" rollout to finish")
    });
    write_status(
        &s,
        "deployment",
        "web",
        serde_json::json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 1}),
    );
    rollout.wait_line("progress", DEADLINE, |l| {
        l.contains("Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...")
    });
    write_status(
        &s,
        "deployment",
        "web",
        serde_json::json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}),
    );
    rollout.wait_line("done", DEADLINE, |l| {
        l.contains("deployment \"web\" successfully rolled out")
    });
    let (status, _, err) = rollout.finish(DEADLINE);
    assert!(status.success(), "{err}");

    // A change of spec bumps the generation: the rollout is not done until it is observed.
    s.kubectl_ok(&["set", "image", "deployment/web", "web=nginx:1.26"]);
    let run = s.kubectl(&["rollout", "status", "deployment/web", "--timeout=2s"]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stdout
            .contains("Waiting for deployment spec update to be observed"),
        "{run}"
    );
}
