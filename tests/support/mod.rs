//! Shared harness of the end-to-end tests: a real `miniplane apiserver` process on a free port,
//! the real `kubectl` pointed at it through an isolated kubeconfig, and a raw HTTP client for
//! the cases kubectl refuses to send.
//!
//! ```text
//!   test ──spawn──▶ miniplane apiserver --listen 127.0.0.1:0 --data-dir <tmp> --no-fsync
//!     │               prints "miniplane apiserver listening on http://127.0.0.1:PORT"
//!     ├──exec──▶ kubectl (dispatcher → kubectl 1.33) with KUBECONFIG/HOME/--cache-dir in <tmp>
//!     └──TCP───▶ raw HTTP/1.1 requests (http.rs)
//! ```
//!
//! Every helper panics with the command, its exit status and its output, so a failing test
//! says what the server answered. The server is stopped (SIGTERM, then SIGKILL after a
//! deadline) when the [`Server`] is dropped, also when a test panics.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod cli;
pub mod component;
pub mod controller_manager;
/// The store tests' etcd cluster fixture: Debian's etcd members on loopback ports.
#[path = "../../store/tests/etcd/cluster.rs"]
pub mod etcd_cluster;
pub mod http;
pub mod kubectl;
pub mod kubelet;
pub mod process_cluster;
pub mod scheduler_process;
pub mod scheduler_view;
pub mod server;
pub mod spine;
pub mod store;
pub mod up;
pub mod watch_stream;

use std::time::{Duration, Instant};

pub use http::HttpResponse;
pub use server::Server;
pub use store::cluster;

/// How long any single "eventually" condition may take before the test fails. Generous: the
/// machine has two cores shared by several builds.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `check` every 50 ms until it returns `Some`, or panics after `timeout` naming `what`.
/// This is the only way the tests wait: never a bare sleep as synchronisation.
pub fn eventually<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`eventually`] for async checks (kube-rs calls), polling every 20 ms up to [`DEADLINE`].
pub async fn until<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Deployment manifest (YAML) named `name` with label `app=<name>`, `replicas` and `image`.
pub fn deployment_yaml(name: &str, replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: {name}
        image: {image}
        ports:
        - containerPort: 80
"
    )
}

/// The Deployment of [`deployment_yaml`], typed (for kube-rs).
pub fn deployment(
    name: &str,
    replicas: u32,
    image: &str,
) -> k8s_openapi::api::apps::v1::Deployment {
    serde_norway::from_str(&deployment_yaml(name, replicas, image)).expect("a Deployment")
}

/// A Pod manifest (YAML); with `node`, `spec.nodeName` is set (as if scheduled), which makes
/// its deletion graceful.
pub fn pod_yaml(name: &str, labels: &str, node: Option<&str>) -> String {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{{labels}}}
spec:
{node}  containers:
  - name: main
    image: busybox:1.36
"
    )
}

/// Writes `status` (a JSON object) through the `/status` subresource with a merge patch, as a
/// controller would (there are no controllers yet).
pub fn write_status(s: &Server, resource: &str, name: &str, status: serde_json::Value) {
    let patch = serde_json::json!({ "status": status }).to_string();
    s.kubectl_ok(&[
        "patch",
        resource,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
}

/// A ConfigMap manifest (YAML) with `data` given as a YAML flow mapping body (`k: v, k2: v2`).
pub fn configmap_yaml(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata: {{{data}}}\n")
}

/// A Namespace manifest (YAML).
pub fn namespace_yaml(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}
