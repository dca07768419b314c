//! End to end with the real kubectl: version and discovery (`version`, `api-resources`),
//! OpenAPI (`explain`), namespaces, and create/get/delete of every built-in kind the API server
//! serves, through kubectl's own verbs (`create ...`) or manifests.
//!
//! Each test starts its own `miniplane apiserver` (port 0, temporary data dir).
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{Server, configmap_yaml, deployment_yaml, namespace_yaml};

/// Splits a kubectl table into rows of whitespace-separated cells (header included).
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The row whose first cell is `name`.
fn row<'a>(rows: &'a [Vec<String>], name: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r.first().is_some_and(|c| c == name))
        .unwrap_or_else(|| panic!("no row {name} in {rows:?}"))
}

#[test]
fn version_reports_minor_33_and_the_dispatcher_runs_kubectl_1_33() {
    let s = Server::start();
    let v = s.kubectl_json(&["version"]);
    assert_eq!(v["serverVersion"]["major"], "1", "{v}");
    assert_eq!(v["serverVersion"]["minor"], "33", "{v}");
    // The Debian dispatcher picked the kubectl matching the server's minor.
    assert_eq!(v["clientVersion"]["minor"], "33", "{v}");
    assert!(
        v["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.33."),
        "{v}"
    );
}

#[test]
fn api_resources_lists_kinds_with_short_names_and_scope() {
    let s = Server::start();
    let out = s.kubectl_ok(&["api-resources"]);
    let rows = table(&out);
    assert_eq!(
        rows[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{out}"
    );
    assert_eq!(
        row(&rows, "deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        row(&rows, "replicasets"),
        ["replicasets", "rs", "apps/v1", "true", "ReplicaSet"]
    );
    assert_eq!(row(&rows, "pods"), ["pods", "po", "v1", "true", "Pod"]);
    assert_eq!(
        row(&rows, "namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    assert_eq!(row(&rows, "nodes"), ["nodes", "no", "v1", "false", "Node"]);
    assert_eq!(
        row(&rows, "services"),
        ["services", "svc", "v1", "true", "Service"]
    );
    assert_eq!(
        row(&rows, "configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );

    // Filtering by group and scope is done by kubectl from the same discovery documents.
    let apps = s.kubectl_ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(apps.lines().any(|l| l == "deployments.apps"), "{apps}");
    assert!(!apps.lines().any(|l| l == "pods"), "{apps}");
    let cluster = s.kubectl_ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(cluster.lines().any(|l| l == "nodes"), "{cluster}");
    assert!(
        !cluster.lines().any(|l| l == "deployments.apps"),
        "{cluster}"
    );
}

#[test]
fn explain_walks_the_openapi_schema() {
    let s = Server::start();
    let spec = s.kubectl_ok(&["explain", "deployment.spec"]);
    assert!(spec.contains("KIND:       Deployment"), "{spec}");
    assert!(spec.contains("VERSION:    v1"), "{spec}");
    assert!(spec.contains("FIELD: spec <DeploymentSpec>"), "{spec}");
    for field in [
        "replicas",
        "selector",
        "strategy",
        "template",
        "revisionHistoryLimit",
    ] {
        assert!(
            spec.contains(field),
            "explain deployment.spec lacks {field}:\n{spec}"
        );
    }
    let strategy = s.kubectl_ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        strategy.contains("FIELD: strategy <DeploymentStrategy>"),
        "{strategy}"
    );
    assert!(strategy.contains("rollingUpdate"), "{strategy}");
    assert!(strategy.contains("type"), "{strategy}");
    let pod = s.kubectl_ok(&["explain", "pods.spec.containers.image"]);
    assert!(pod.contains("KIND:       Pod"), "{pod}");
    assert!(pod.contains("FIELD: image <string>"), "{pod}");

    // Bad input: a field that does not exist, a kind that does not exist.
    let err = s.kubectl_err(&["explain", "deployment.spec.nope"]);
    assert!(err.contains("field \"nope\" does not exist"), "{err}");
    let err = s.kubectl_err(&["explain", "nosuchkinds"]);
    assert!(
        err.contains("the server doesn't have a resource type \"nosuchkinds\""),
        "{err}"
    );
}

#[test]
fn namespaces_scope_objects_and_a_missing_namespace_is_not_found() {
    let s = Server::start();
    let out = s.apply_ok(&namespace_yaml("team-a"), &[]);
    assert_eq!(out.trim(), "namespace/team-a created");
    let ns = s.kubectl_json(&["get", "namespace", "team-a"]);
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    assert_eq!(ns["spec"]["finalizers"][0], "kubernetes", "{ns}");
    // The namespaces every cluster has exist from the start.
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        s.kubectl_ok(&["get", "namespace", ns]);
    }

    s.apply_ok(&configmap_yaml("cfg", "k: v"), &["-n", "team-a"]);
    let cm = s.kubectl_json(&["-n", "team-a", "get", "configmap", "cfg"]);
    assert_eq!(cm["metadata"]["namespace"], "team-a");
    assert_eq!(cm["data"]["k"], "v");
    // Not visible from another namespace.
    let err = s.kubectl_err(&["get", "configmap", "cfg"]);
    assert!(
        err.contains("Error from server (NotFound): configmaps \"cfg\" not found"),
        "{err}"
    );

    let run = s.apply_yaml(&configmap_yaml("x", "a: b"), &["-n", "missing"]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("Error from server (NotFound)")
            && run.stderr.contains("namespaces \"missing\" not found"),
        "{run}"
    );

    let names = s.kubectl_ok(&["get", "namespaces", "-o", "name"]);
    assert!(names.lines().any(|l| l == "namespace/team-a"), "{names}");

    // Namespace deletion is two-phase (the namespace controller empties it); the API server's
    // part: the namespace turns Terminating, and no new content may be created in it.
    s.kubectl_ok(&["delete", "namespace", "team-a", "--wait=false"]);
    let after = s.kubectl(&["get", "namespace", "team-a", "-o", "json"]);
    if after.ok() {
        let ns: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
        assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
        assert!(ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");
        let run = s.apply_yaml(&configmap_yaml("late", "a: b"), &["-n", "team-a"]);
        assert!(!run.ok(), "{run}");
        assert!(
            run.stderr.contains("because it is being terminated"),
            "{run}"
        );
    } else {
        assert!(after.stderr.contains("NotFound"), "{after}");
    }
}

/// kubectl's imperative `create <kind>` commands go through typed clients that send
/// protobuf bodies (`Content-Type: application/vnd.kubernetes.protobuf`), unlike `apply`.
#[test]
fn imperative_create_commands() {
    let s = Server::start();
    for (args, expected) in [
        (&["create", "namespace", "imp"][..], "namespace/imp created"),
        (
            &["create", "configmap", "c", "--from-literal=k=v"],
            "configmap/c created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "s",
                "--from-literal=key=s3cr3t",
            ],
            "secret/s created",
        ),
        (
            &["create", "service", "clusterip", "svc", "--tcp=80:8080"],
            "service/svc created",
        ),
        (
            &["create", "serviceaccount", "robot"],
            "serviceaccount/robot created",
        ),
        (
            &[
                "create",
                "deployment",
                "web",
                "--image=nginx:1.25",
                "--replicas=2",
            ],
            "deployment.apps/web created",
        ),
        (
            &["create", "job", "once", "--image=busybox:1.36"],
            "job.batch/once created",
        ),
        (
            &[
                "create",
                "cronjob",
                "tick",
                "--image=busybox:1.36",
                "--schedule=*/5 * * * *",
            ],
            "cronjob.batch/tick created",
        ),
    ] {
        assert_eq!(s.kubectl_ok(args).trim(), expected);
    }
    assert_eq!(
        s.kubectl_json(&["get", "secret", "s"])["data"]["key"],
        "czNjcjN0"
    );
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web", "{d}");
    // The generators word errors their own way: "error: failed to create deployment: ...".
    let err = s.kubectl_err(&["create", "deployment", "web", "--image=nginx:1.25"]);
    assert!(
        err.contains("deployments.apps \"web\" already exists"),
        "{err}"
    );
    let err = s.kubectl_err(&[
        "-n",
        "missing",
        "create",
        "configmap",
        "x",
        "--from-literal=a=b",
    ]);
    assert!(err.contains("namespaces \"missing\" not found"), "{err}");
}

/// `kubectl debug` creates its pods through a typed client, so as protobuf: a node's debugging
/// pod (host namespaces, the node's root as a hostPath volume) and a copy of a pod with a debug
/// container added.
#[test]
fn debug_node_and_copy_to_create_their_pods_over_protobuf() {
    let s = Server::start();
    s.apply_ok(
        "apiVersion: v1
kind: Node
metadata:
  name: node-1
",
        &[],
    );
    let run = s.kubectl(&["debug", "node/node-1", "--image=busybox:1.36"]);
    assert!(run.ok(), "{run}");
    let pods = s.kubectl_json(&["get", "pods"]);
    let debugger = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("node-debugger-node-1-")
        })
        .unwrap_or_else(|| panic!("no node-debugger pod: {run} {pods}"))
        .clone();
    let spec = &debugger["spec"];
    assert_eq!(spec["nodeName"], "node-1", "{debugger}");
    assert_eq!(spec["hostNetwork"], true, "{debugger}");
    assert_eq!(spec["hostPID"], true, "{debugger}");
    assert_eq!(spec["volumes"][0]["hostPath"]["path"], "/", "{debugger}");
    let container = &spec["containers"][0];
    assert_eq!(container["image"], "busybox:1.36", "{debugger}");
    assert_eq!(
        container["volumeMounts"][0]["mountPath"], "/host",
        "{debugger}"
    );
    // Go writes `stdin: false`; as in its JSON, the zero of a non-pointer field is dropped.
    assert!(container.get("stdin").is_none(), "{debugger}");

    s.apply_ok(&support::pod_yaml("web", "app: web", None), &[]);
    let run = s.kubectl(&[
        "debug",
        "web",
        "--copy-to=web-debug",
        "--image=busybox:1.36",
    ]);
    assert!(run.ok(), "{run}");
    let copy = s.kubectl_json(&["get", "pod", "web-debug"]);
    let containers = copy["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2, "{copy}");
    assert!(
        containers.iter().any(|c| c["image"] == "busybox:1.36"
            && c["name"].as_str().unwrap().starts_with("debugger-")),
        "{copy}"
    );
    assert_eq!(containers[0]["name"], "main", "{copy}");
}

#[test]
fn applied_deployment_gets_defaults_and_server_metadata() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    // Defaulting (pkg/apis/apps/v1/defaults.go, pkg/apis/core/v1/defaults.go).
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate", "{d}");
    assert_eq!(
        d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%",
        "{d}"
    );
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10, "{d}");
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 600, "{d}");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always", "{d}");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30, "{d}");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst", "{d}");
    assert_eq!(pod["schedulerName"], "default-scheduler", "{d}");
    let container = &pod["containers"][0];
    assert_eq!(container["imagePullPolicy"], "IfNotPresent", "{d}");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["ports"][0]["protocol"], "TCP", "{d}");
    // Server-owned metadata.
    let meta = &d["metadata"];
    assert_eq!(meta["generation"], 1, "{d}");
    assert!(meta["uid"].as_str().is_some_and(|u| u.len() == 36), "{d}");
    assert!(
        meta["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok()),
        "{d}"
    );
    assert!(
        meta["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{d}"
    );
}

/// Creates an object from a manifest, reads it back, deletes it, and checks it is gone: the
/// minimum every served kind must support.
fn crud(s: &Server, resource: &str, name: &str, yaml: &str, namespaced: bool) -> serde_json::Value {
    let created = s.apply_ok(yaml, &[]);
    assert!(created.contains(&format!("/{name} created")), "{created}");
    let obj = s.kubectl_json(&["get", resource, name]);
    assert_eq!(obj["metadata"]["name"], name, "{obj}");
    if namespaced {
        assert_eq!(obj["metadata"]["namespace"], "default", "{obj}");
    } else {
        assert!(
            obj["metadata"]["namespace"].is_null(),
            "cluster-scoped: {obj}"
        );
    }
    assert!(obj["metadata"]["uid"].is_string(), "{obj}");
    let list = s.kubectl_ok(&["get", resource, "-o", "name"]);
    assert!(
        list.lines().any(|l| l.ends_with(&format!("/{name}"))),
        "{list}"
    );
    let deleted = s.kubectl_ok(&["delete", resource, name]);
    assert!(
        deleted.contains(&format!("\"{name}\" deleted")),
        "{deleted}"
    );
    let err = s.kubectl_err(&["get", resource, name]);
    assert!(
        err.contains("(NotFound)") && err.contains(&format!("\"{name}\" not found")),
        "{err}"
    );
    obj
}

/// The header cells of `kubectl get <resource>` once one object exists.
fn table_header(s: &Server, resource: &str, yaml: &str) -> Vec<String> {
    s.apply_ok(yaml, &[]);
    let out = s.kubectl_ok(&["get", resource]);
    out.lines()
        .next()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn configmap_crud() {
    let s = Server::start();
    let cm = crud(
        &s,
        "configmap",
        "settings",
        &configmap_yaml("settings", "mode: fast"),
        true,
    );
    assert_eq!(cm["data"]["mode"], "fast");
}

#[test]
fn secret_crud() {
    let s = Server::start();
    let secret = crud(
        &s,
        "secret",
        "token",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\ndata:\n  key: czNjcjN0\n",
        true,
    );
    assert_eq!(secret["data"]["key"], "czNjcjN0", "{secret}");
}

/// Secrets: `type` defaults to Opaque (`pkg/apis/core/v1/defaults.go` `SetDefaults_Secret`) and
/// the write-only `stringData` is folded into base64 `data` (`pkg/apis/core/v1/conversion.go`).
#[test]
fn secret_defaults_and_string_data() {
    let s = Server::start();
    s.apply_ok(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  key: s3cr3t\n",
        &[],
    );
    let secret = s.kubectl_json(&["get", "secret", "token"]);
    assert_eq!(secret["type"], "Opaque", "{secret}");
    assert_eq!(
        secret["data"]["key"], "czNjcjN0",
        "stringData folded into base64 data: {secret}"
    );
    assert!(secret["stringData"].is_null(), "{secret}");
}

#[test]
fn service_crud() {
    let s = Server::start();
    let svc = crud(
        &s,
        "service",
        "web",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n    targetPort: 8080\n",
        true,
    );
    assert_eq!(svc["spec"]["ports"][0]["port"], 80, "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080, "{svc}");
}

/// Service defaults (`pkg/apis/core/v1/defaults.go` `SetDefaults_Service`) and a ClusterIP
/// allocated by the API server (`pkg/registry/core/service/storage/alloc.go`).
#[test]
fn service_defaults_and_cluster_ip() {
    let s = Server::start();
    s.apply_ok(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n",
        &[],
    );
    let svc = s.kubectl_json(&["get", "service", "web"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP", "{svc}");
    assert_eq!(svc["spec"]["sessionAffinity"], "None", "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP", "{svc}");
    assert_eq!(
        svc["spec"]["ports"][0]["targetPort"], 80,
        "targetPort defaults to port: {svc}"
    );
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or_default();
    assert!(
        ip.parse::<std::net::Ipv4Addr>().is_ok(),
        "a cluster IP: {svc}"
    );
}

#[test]
fn namespace_crud() {
    let s = Server::start();
    let out = s.apply_ok(&namespace_yaml("scratch"), &[]);
    assert!(out.contains("namespace/scratch created"), "{out}");
    let obj = s.kubectl_json(&["get", "ns", "scratch"]);
    assert!(obj["metadata"]["namespace"].is_null(), "{obj}");
    assert!(
        s.kubectl_ok(&["get", "ns", "-o", "name"])
            .contains("namespace/scratch")
    );
}

#[test]
fn serviceaccount_crud() {
    let s = Server::start();
    crud(
        &s,
        "serviceaccount",
        "robot",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\n",
        true,
    );
}

#[test]
fn job_crud() {
    let s = Server::start();
    let job = crud(
        &s,
        "job",
        "once",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox:1.36\n",
        true,
    );
    assert_eq!(
        job["spec"]["template"]["spec"]["restartPolicy"], "Never",
        "{job}"
    );
}

#[test]
fn cronjob_crud() {
    let s = Server::start();
    let cj = crud(
        &s,
        "cronjob",
        "tick",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: tick\nspec:\n  schedule: '*/5 * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: c\n            image: busybox:1.36\n",
        true,
    );
    assert_eq!(cj["spec"]["schedule"], "*/5 * * * *", "{cj}");
}

#[test]
fn lease_crud() {
    let s = Server::start();
    let lease = crud(
        &s,
        "lease",
        "leader",
        "apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: leader
spec:
  holderIdentity: node-a
  leaseDurationSeconds: 15
",
        true,
    );
    assert_eq!(lease["spec"]["holderIdentity"], "node-a", "{lease}");
}

#[test]
fn daemonset_crud() {
    let s = Server::start();
    crud(
        &s,
        "daemonset",
        "agent",
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: busybox:1.36
",
        true,
    );
}

#[test]
fn statefulset_crud() {
    let s = Server::start();
    let sts = crud(
        &s,
        "statefulset",
        "db",
        "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: postgres:16
",
        true,
    );
    assert_eq!(sts["spec"]["replicas"], 2, "{sts}");
}

#[test]
fn replicaset_crud() {
    let s = Server::start();
    crud(
        &s,
        "replicaset",
        "rs1",
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: rs1
spec:
  replicas: 1
  selector:
    matchLabels: {app: rs1}
  template:
    metadata:
      labels: {app: rs1}
    spec:
      containers:
      - name: c
        image: busybox:1.36
",
        true,
    );
}

#[test]
fn pod_crud() {
    let s = Server::start();
    let pod = crud(
        &s,
        "pod",
        "solo",
        &support::pod_yaml("solo", "app: solo", None),
        true,
    );
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
}

#[test]
fn node_crud() {
    let s = Server::start();
    crud(
        &s,
        "node",
        "node-1",
        "apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {kubernetes.io/hostname: node-1}
",
        false,
    );
}

#[test]
fn event_crud() {
    let s = Server::start();
    let ev = crud(
        &s,
        "event",
        "web.1",
        "apiVersion: v1
kind: Event
metadata:
  name: web.1
involvedObject:
  kind: Deployment
  apiVersion: apps/v1
  name: web
  namespace: default
reason: ScalingReplicaSet
message: Scaled up replica set web-abc to 1
type: Normal
source: {component: deployment-controller}
count: 1
",
        true,
    );
    assert_eq!(ev["reason"], "ScalingReplicaSet", "{ev}");
}

/// Kinds print their own Table columns (`pkg/printers/internalversion/printers.go`).
#[test]
fn tables_have_each_kinds_columns() {
    let s = Server::start();
    let event = "apiVersion: v1\nkind: Event\nmetadata:\n  name: e1\ninvolvedObject: {kind: Pod, name: p, namespace: default}\nreason: Started\nmessage: hi\ntype: Normal\n";
    assert_eq!(
        table_header(&s, "events", event),
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n";
    assert_eq!(
        table_header(&s, "nodes", node),
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    );
    assert_eq!(
        table_header(
            &s,
            "services",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports: [{port: 80}]\n"
        ),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        table_header(&s, "configmaps", &configmap_yaml("c", "a: b")),
        ["NAME", "DATA", "AGE"]
    );
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n";
    assert_eq!(
        table_header(&s, "jobs", job),
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    assert_eq!(
        table_header(&s, "namespaces", &namespace_yaml("x")),
        ["NAME", "STATUS", "AGE"]
    );
    let rs = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: r\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: busybox}]\n";
    assert_eq!(
        table_header(&s, "replicasets", rs),
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    );
}

/// SIGTERM stops the server promptly even with a watch open (`kubectl get -w`): watches are
/// ended, connections drained, the process exits on its own.
#[test]
fn sigterm_shuts_down_gracefully_with_open_watches() {
    let mut s = Server::start();
    s.apply_ok(&configmap_yaml("c", "a: b"), &[]);
    let mut watch = s.kubectl_spawn(&["get", "configmaps", "-w"]);
    watch.wait_line("the listed row", support::DEADLINE, |l| l.starts_with("c "));
    let start = std::time::Instant::now();
    assert!(s.stop(), "the server needed SIGKILL:\n{}", s.log_tail());
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "graceful shutdown took {:?}",
        start.elapsed()
    );
    // kubectl notices the closed watch.
    let (_, _, _) = watch.finish(support::DEADLINE);
}

/// Every acknowledged write survives a restart on the same data dir (the store is durable),
/// and resourceVersions keep growing.
#[test]
fn objects_survive_a_restart() {
    let mut s = Server::start();
    s.apply_ok(&configmap_yaml("kept", "a: b"), &[]);
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    let before = s.kubectl_json(&["get", "deployment", "web"]);
    assert!(s.restart(), "graceful stop");
    let after = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(
        s.kubectl_json(&["get", "configmap", "kept"])["data"]["a"],
        "b"
    );
    s.kubectl_ok(&["scale", "deployment/web", "--replicas=3"]);
    let scaled = s.kubectl_json(&["get", "deployment", "web"]);
    let rv = |o: &serde_json::Value| {
        o["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&scaled) > rv(&before), "{scaled}");
}

#[test]
fn api_versions_and_cluster_info() {
    let s = Server::start();
    let out = s.kubectl_ok(&["api-versions"]);
    let versions: Vec<&str> = out.lines().collect();
    for gv in ["v1", "apps/v1", "batch/v1", "coordination.k8s.io/v1"] {
        assert!(versions.contains(&gv), "{gv} missing from:\n{out}");
    }
    let out = s.kubectl_ok(&["cluster-info"]);
    assert!(
        out.contains(&format!(
            "Kubernetes control plane is running at {}",
            s.url()
        )),
        "{out}"
    );
    // Raw paths work without discovery, and discovery answers with or without a trailing `/`.
    let raw = s.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/default"]);
    assert!(raw.contains("\"name\":\"default\""), "{raw}");
    for path in ["/api/", "/apis/", "/api/v1/", "/version/"] {
        assert_eq!(s.get(path).status, 200, "{path}");
    }
}
