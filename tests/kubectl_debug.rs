//! End to end: `kubectl debug` and what it relies on — the `pods/ephemeralcontainers`
//! subresource (discovery, validation with Kubernetes' texts, the 404 kubectl reads the details
//! of), the simulated kubelet starting an ephemeral container and attaching to its shell, node
//! debugging pods and pod copies; and a container's main process killed through `kubectl exec`
//! (`kill 1`): the container restarts with the signal's exit code, its previous log stays for
//! `kubectl logs --previous`, and what `kubectl cp` put in it is gone.
// Functions outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support;

use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

const SETTLE: Duration = Duration::from_secs(60);

const WEB: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports:
    - containerPort: 80
";

fn pod(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "pod", name])
}

fn running(s: &Server, name: &str) -> bool {
    pod(s, name)["status"]["phase"] == "Running"
}

/// The status of container `name` of pod `pod` (regular or ephemeral), once there is one.
fn status_of(s: &Server, pod_name: &str, name: &str) -> Option<Value> {
    let p = pod(s, pod_name);
    ["containerStatuses", "ephemeralContainerStatuses"]
        .iter()
        .flat_map(|list| p["status"][*list].as_array().cloned().unwrap_or_default())
        .find(|c| c["name"] == name)
}

fn start_web() -> ProcessCluster {
    let c = ProcessCluster::start(1);
    c.s.apply_ok(WEB, &[]);
    eventually("web Running", SETTLE, || running(&c.s, "web").then_some(()));
    c
}

const EPHEMERAL: &str = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";

fn patch_ephemeral(s: &Server, path: &str, body: &Value) -> support::HttpResponse {
    s.http(
        "PATCH",
        path,
        Some("application/strategic-merge-patch+json"),
        body.to_string().as_bytes(),
    )
}

#[test]
fn ephemeral_containers_run_log_attach_and_are_validated_as_kubernetes_does() {
    let c = start_web();
    let s = &c.s;

    // Discovery lists the subresource as Kubernetes does.
    let core: Value = serde_json::from_str(&s.kubectl_ok(&["get", "--raw", "/api/v1"])).unwrap();
    let sub = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .cloned()
        .expect("pods/ephemeralcontainers in discovery");
    assert_eq!(sub["kind"], "Pod");
    assert_eq!(sub["verbs"], json!(["get", "patch", "update"]));

    // A command that finishes: its container runs once, its output is its log.
    let out = s.kubectl_ok(&[
        "debug",
        "web",
        "--image=busybox",
        "-c",
        "dbg",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert!(!out.contains("error"), "{out}");
    let done = eventually("dbg terminated", SETTLE, || {
        status_of(s, "web", "dbg").filter(|st| st["state"]["terminated"].is_object())
    });
    assert_eq!(done["state"]["terminated"]["exitCode"], 0, "{done}");
    assert_eq!(done["state"]["terminated"]["reason"], "Completed");
    assert_eq!(done["restartCount"], 0);
    assert_eq!(done["ready"], false);
    assert_eq!(s.kubectl_ok(&["logs", "web", "-c", "dbg"]), "hi\n");
    let spec = pod(s, "web")["spec"]["ephemeralContainers"][0].clone();
    assert_eq!(spec["imagePullPolicy"], "Always", "defaulted: {spec}");
    assert_eq!(spec["terminationMessagePath"], "/dev/termination-log");
    let events = s.kubectl_json(&["get", "events"]);
    let started = events["items"].as_array().unwrap().iter().any(|e| {
        e["reason"] == "Started"
            && e["involvedObject"]["fieldPath"] == "spec.ephemeralContainers{dbg}"
    });
    assert!(
        started,
        "a Started event about the ephemeral container: {events}"
    );
    assert!(running(s, "web"), "the pod goes on");

    // `-i`: kubectl waits for the container to run, then attaches to its shell.
    let attached = s.kubectl_run(
        &[
            "debug",
            "web",
            "-i",
            "--image=busybox",
            "-c",
            "shell",
            "--target=nginx",
        ],
        Some("echo hello from $HOSTNAME\nexit 4\n"),
        &[],
    );
    assert!(attached.ok(), "{attached}");
    assert!(
        attached.stdout.contains("hello from web"),
        "the shell answered: {attached}"
    );
    let shell = eventually("shell terminated", SETTLE, || {
        status_of(s, "web", "shell").filter(|st| st["state"]["terminated"].is_object())
    });
    assert_eq!(shell["state"]["terminated"]["exitCode"], 4, "{shell}");
    assert_eq!(shell["state"]["terminated"]["reason"], "Error");
    assert_eq!(shell["restartCount"], 0, "never restarted");

    // Refusals, with Kubernetes' words and codes. A strategic merge patch without
    // `$setElementOrder` puts the new container first, as Kubernetes' does.
    let ports = patch_ephemeral(
        s,
        EPHEMERAL,
        &json!({"spec": {"ephemeralContainers": [{"name": "bad", "image": "busybox",
            "ports": [{"containerPort": 80}]}]}}),
    );
    let msg = ports.expect_status(422, "Invalid");
    assert_eq!(
        msg,
        "Pod \"web\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"
    );
    assert_eq!(ports.json()["details"]["kind"], "Pod");
    let taken = patch_ephemeral(
        s,
        EPHEMERAL,
        &json!({"spec": {"ephemeralContainers": [{"name": "nginx", "image": "busybox"}]}}),
    );
    assert_eq!(
        taken.expect_status(422, "Invalid"),
        "Pod \"web\" is invalid: spec.ephemeralContainers[0].name: Duplicate value: \"nginx\""
    );
    let changed = patch_ephemeral(
        s,
        EPHEMERAL,
        &json!({"spec": {"ephemeralContainers": [{"name": "dbg", "image": "alpine"}]}}),
    );
    let msg = changed.expect_status(422, "Invalid");
    assert!(
        msg.starts_with("Pod \"web\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed"),
        "{msg}"
    );
    let missing = patch_ephemeral(
        s,
        "/api/v1/namespaces/default/pods/nope/ephemeralcontainers",
        &json!({"spec": {"ephemeralContainers": [{"name": "x", "image": "busybox"}]}}),
    );
    assert_eq!(
        missing.expect_status(404, "NotFound"),
        "pods \"nope\" not found"
    );
    assert_eq!(
        missing.json()["details"],
        json!({"name": "nope", "kind": "pods"}),
        "kubectl debug reads details.name"
    );
    // A pod may not be created with one.
    let created = s.create_yaml(
        "apiVersion: v1
kind: Pod
metadata:
  name: early
spec:
  containers:
  - name: a
    image: busybox
  ephemeralContainers:
  - name: b
    image: busybox
",
    );
    assert!(!created.ok(), "{created}");
    assert!(
        created
            .stderr
            .contains("spec.ephemeralContainers: Forbidden: cannot be set on create"),
        "{created}"
    );
    // GET of the subresource is the pod.
    let got = s.get(EPHEMERAL).json();
    assert_eq!(got["kind"], "Pod");
    assert_eq!(
        got["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(2)
    );
    // PUT adds one too (what else it carries is dropped: here a label).
    let mut put = got;
    put["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    put["metadata"]["labels"]["extra"] = json!("dropped");
    put["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "put", "image": "busybox", "command": ["true"]}));
    let replaced = s.send_json("PUT", EPHEMERAL, &put);
    assert_eq!(replaced.status, 200, "{}", replaced.text());
    assert!(replaced.json()["metadata"]["labels"].get("extra").is_none());
    let ran = eventually("put terminated", SETTLE, || {
        status_of(s, "web", "put").filter(|st| st["state"]["terminated"].is_object())
    });
    assert_eq!(ran["state"]["terminated"]["exitCode"], 0, "{ran}");
}

#[test]
fn kill_1_restarts_the_container_keeping_its_previous_log_and_dropping_copies() {
    let c = start_web();
    let s = &c.s;
    let local = s.dir().join("note.txt");
    std::fs::write(&local, "copied in\n").unwrap();
    s.kubectl_ok(&["cp", &local.to_string_lossy(), "web:/tmp/note.txt"]);
    assert_eq!(
        s.kubectl_ok(&["exec", "web", "--", "cat", "/tmp/note.txt"]),
        "copied in\n"
    );
    let first = status_of(s, "web", "nginx").unwrap();
    let started = first["state"]["running"]["startedAt"].clone();

    s.kubectl_ok(&["exec", "web", "--", "kill", "1"]);
    let restarted = eventually("nginx restarted", SETTLE, || {
        status_of(s, "web", "nginx").filter(|st| st["restartCount"] == 1)
    });
    let last = &restarted["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 143, "SIGTERM: {restarted}");
    assert_eq!(last["reason"], "Error");
    assert_eq!(last["startedAt"], started);
    eventually("nginx running again", SETTLE, || {
        status_of(s, "web", "nginx")
            .filter(|st| st["state"]["running"].is_object())
            .map(|_| ())
    });
    let previous = s.kubectl_ok(&["logs", "web", "--previous"]);
    assert!(
        previous.contains("received SIGTERM"),
        "the previous run's log, to its end: {previous}"
    );
    assert!(!s.kubectl_ok(&["logs", "web"]).contains("received SIGTERM"));
    let gone = s.kubectl(&["exec", "web", "--", "cat", "/tmp/note.txt"]);
    assert!(!gone.ok(), "{gone}");
    assert!(
        gone.stderr.contains("No such file or directory"),
        "a new run has no copies: {gone}"
    );

    s.kubectl_ok(&["exec", "web", "--", "kill", "-9", "1"]);
    let killed = eventually("nginx restarted again", SETTLE, || {
        status_of(s, "web", "nginx").filter(|st| st["restartCount"] == 2)
    });
    assert_eq!(
        killed["lastState"]["terminated"]["exitCode"], 137,
        "{killed}"
    );
    assert!(running(s, "web"));
}

#[test]
fn node_debugging_pods_and_pod_copies_run_and_attach() {
    let c = start_web();
    let s = &c.s;
    let node = pod(s, "web")["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = s.kubectl_ok(&["debug", &format!("node/{node}"), "--image=busybox"]);
    let name = out
        .split_whitespace()
        .find(|w| w.starts_with(&format!("node-debugger-{node}-")))
        .unwrap_or_else(|| panic!("a pod name in {out:?}"))
        .to_owned();
    eventually("the node debugger Running", SETTLE, || {
        running(s, &name).then_some(())
    });
    let p = pod(s, &name);
    assert_eq!(p["spec"]["nodeName"], node.as_str());
    assert_eq!(p["spec"]["hostNetwork"], true);
    assert_eq!(
        p["status"]["podIP"], p["status"]["hostIP"],
        "on the host's network: {p}"
    );

    // Attached with stdin: the shell on the node answers and ends the pod.
    let attached = s.kubectl_run(
        &["debug", &format!("node/{node}"), "-i", "--image=busybox"],
        Some("echo on $HOSTNAME\nexit\n"),
        &[],
    );
    assert!(attached.ok(), "{attached}");
    assert!(
        attached.stdout.contains(&format!("on {node}\n")),
        "the node's hostname on its network: {attached}"
    );

    // A copy of the pod with a debug container, scheduled like any pod.
    let copied = s.kubectl_run(
        &[
            "debug",
            "web",
            "-i",
            "--copy-to=web-debug",
            "--container=debugger",
            "--image=busybox",
        ],
        Some("echo in the copy\nexit 0\n"),
        &[],
    );
    assert!(copied.ok(), "{copied}");
    assert!(copied.stdout.contains("in the copy"), "{copied}");
    let copy = pod(s, "web-debug");
    let names: Vec<&str> = copy["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["nginx", "debugger"]);
    assert!(copy["spec"]["nodeName"].is_string(), "scheduled: {copy}");
}
