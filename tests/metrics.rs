//! End to end: the resource metrics pipeline. `miniplane metrics-server` registers
//! `v1beta1.metrics.k8s.io` with the API server's aggregation layer; `kubectl get apiservice`
//! shows it Available, `kubectl top nodes` and `kubectl top pods` print the kubelets'
//! simulated usage, `miniplane load` raises a Deployment's load and its
//! HorizontalPodAutoscaler scales it out; APIServices are validated as Kubernetes does, and a
//! registered group whose server is gone answers 503. Also `miniplane up` (its own processes,
//! HTTPS and RBAC) and the library's in-process cluster with a metrics-server.
//!
//! kubectl caches discovery on disk for hours, and `kubectl top` trusts that cache: the tests
//! forget it once the metrics API is registered ([`forget_discovery`]), as a user would
//! after installing metrics-server with a stale cache.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support;

use support::component::Component;
use support::{DEADLINE, Server, eventually};

const APISERVICE: &str = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io";

/// A Deployment of `replicas` pods asking for 100m CPU and 64Mi memory each.
fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
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
      - name: app
        image: nginx
        resources:
          requests:
            cpu: 100m
            memory: 64Mi
"
    )
}

/// Removes kubectl's discovery cache under `dir` (see the module docs).
fn forget_discovery(dir: &Path) {
    let cache = dir.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
}

/// The rows of a kubectl table, split on whitespace (header first).
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

fn is_cpu(q: &str) -> bool {
    let digits = q.trim_end_matches(['n', 'u', 'm']);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_memory(q: &str) -> bool {
    let digits = q.trim_end_matches("Ki").trim_end_matches("Mi");
    (q.ends_with("Ki") || q.ends_with("Mi"))
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `kubectl get --raw PATH`, parsed.
fn raw(s: &Server, path: &[&str]) -> Value {
    let mut args = vec!["get", "--raw"];
    args.extend(path);
    serde_json::from_str(&s.kubectl_ok(&args)).unwrap()
}

/// The `Available` condition of `v1beta1.metrics.k8s.io`, read without kubectl.
fn available(s: &Server) -> Option<Value> {
    let resp = s.get(APISERVICE);
    if resp.status != 200 {
        return None;
    }
    resp.json()["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
}

/// A server with `nodes` simulated nodes, the scheduler, a controller-manager syncing HPAs
/// every second, and a metrics-server scraping every second; returns once the metrics API is
/// Available (before kubectl first runs discovery).
struct MetricsCluster {
    s: Server,
    _kubelet: Component,
    _scheduler: Component,
    _cm: Component,
    metrics: Component,
}

impl MetricsCluster {
    fn start(nodes: usize) -> MetricsCluster {
        let s = Server::start();
        let count = nodes.to_string();
        let kubelet = Component::start(
            &s,
            &["kubelet", "--nodes", &count, "--listen", "127.0.0.1:0"],
            "miniplane kubelet:",
        );
        let scheduler = Component::start(&s, &["scheduler"], "miniplane scheduler started");
        let cm = Component::start(
            &s,
            &[
                "controller-manager",
                "--horizontal-pod-autoscaler-sync-period",
                "1s",
            ],
            "miniplane controller-manager started",
        );
        let metrics = Component::start(
            &s,
            &[
                "metrics-server",
                "--listen",
                "127.0.0.1:0",
                "--metric-resolution",
                "1s",
                "--kubelet-request-timeout",
                "900ms",
                // The kubelets of this plain-HTTP cluster serve plain HTTP.
                "--deprecated-kubelet-completely-insecure",
            ],
            "miniplane metrics-server started",
        );
        eventually("v1beta1.metrics.k8s.io Available", DEADLINE, || {
            available(&s).filter(|c| c["status"] == "True")
        });
        forget_discovery(s.dir());
        MetricsCluster {
            s,
            _kubelet: kubelet,
            _scheduler: scheduler,
            _cm: cm,
            metrics,
        }
    }
}

#[test]
fn kubectl_top_shows_usage_and_an_hpa_scales_out_under_load() {
    let c = MetricsCluster::start(2);
    let s = &c.s;
    assert!(
        c.metrics
            .start_line
            .starts_with("miniplane metrics-server started (metrics.k8s.io on http://127.0.0.1:"),
        "{}",
        c.metrics.start_line
    );
    let table = rows(&s.kubectl_ok(&["get", "apiservice", "v1beta1.metrics.k8s.io"]));
    assert_eq!(table[0], ["NAME", "SERVICE", "AVAILABLE", "AGE"]);
    assert_eq!(
        table[1][..3],
        [
            "v1beta1.metrics.k8s.io",
            "kube-system/metrics-server",
            "True"
        ]
    );
    // The built-in groups are local APIServices.
    let all = s.kubectl_ok(&["get", "apiservices"]);
    let apps = rows(&all)
        .into_iter()
        .find(|r| r[0] == "v1.apps")
        .unwrap_or_else(|| panic!("no v1.apps in\n{all}"));
    assert_eq!(apps[1..3], ["Local", "True"]);

    // kubectl top nodes: every node, CPU in millicores and memory in Mi, with percentages.
    let top = eventually("kubectl top nodes to list both nodes", DEADLINE, || {
        let run = s.kubectl(&["top", "nodes"]);
        (run.ok() && run.stdout.lines().count() == 3).then_some(run.stdout)
    });
    let table = rows(&top);
    assert_eq!(
        table[0],
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    );
    assert_eq!(table[1][0], "node-0");
    assert!(table[1][1].ends_with('m'), "{top}");
    assert!(table[1][2].ends_with('%'), "{top}");
    assert!(table[1][3].ends_with("Mi"), "{top}");

    s.apply_ok(&deployment("web", 1), &[]);
    // kubectl top pods once the pod has two points; the API's own quantities.
    let top = eventually("kubectl top pods to show web", DEADLINE, || {
        let run = s.kubectl(&["top", "pods"]);
        (run.ok() && run.stdout.contains("web-")).then_some(run.stdout)
    });
    let table = rows(&top);
    assert_eq!(table[0], ["NAME", "CPU(cores)", "MEMORY(bytes)"]);
    assert!(
        table[1][1].ends_with('m') && table[1][2].ends_with("Mi"),
        "{top}"
    );
    let containers = rows(&s.kubectl_ok(&["top", "pods", "-A", "--containers"]));
    assert_eq!(
        containers[0],
        ["NAMESPACE", "POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    );
    let web = containers
        .iter()
        .find(|r| r[1].starts_with("web-"))
        .expect("a row of the web pod");
    assert_eq!(web[0], "default");
    assert_eq!(web[2], "app");
    let list = raw(
        s,
        &["/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb"],
    );
    assert_eq!(list["kind"], "PodMetricsList");
    let item = &list["items"][0];
    let usage = &item["containers"][0]["usage"];
    let (cpu, memory) = (
        usage["cpu"].as_str().unwrap(),
        usage["memory"].as_str().unwrap(),
    );
    assert!(is_cpu(cpu) && is_memory(memory), "{usage}");
    assert_eq!(item["metadata"]["labels"]["app"], "web");
    assert!(
        item["window"].as_str().is_some_and(|w| w.ends_with('s')),
        "{item}"
    );
    // 30% of the 100m request by default, within the model's ±10%.
    let millis = |q: &str| -> f64 {
        let n: f64 = q.trim_end_matches(['n', 'u', 'm']).parse().unwrap();
        match q.chars().last() {
            Some('n') => n / 1e6,
            Some('u') => n / 1e3,
            Some('m') => n,
            _ => n * 1e3,
        }
    };
    assert!((25.0..=35.0).contains(&millis(cpu)), "{cpu}");
    let one = raw(
        s,
        &[&format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{}",
            item["metadata"]["name"].as_str().unwrap()
        )],
    );
    assert_eq!(one["kind"], "PodMetrics");
    assert_eq!(one["apiVersion"], "metrics.k8s.io/v1beta1");
    let nodes = raw(
        s,
        &["/apis/metrics.k8s.io/v1beta1/nodes?fieldSelector=metadata.name%3Dnode-1"],
    );
    let names: Vec<&str> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["node-1"]);
    let unsupported = s.kubectl_err(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
    ]);
    assert!(
        unsupported.contains("field label not supported: spec.unschedulable"),
        "{unsupported}"
    );

    // An HPA at 50% sees ~30% and keeps one pod.
    s.kubectl_ok(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ]);
    let targets = |s: &Server| -> Option<(String, String)> {
        let table = rows(&s.kubectl_ok(&["get", "hpa", "web"]));
        let row = table.get(1)?;
        // NAME REFERENCE TARGETS... : "cpu: 30%/50%" is two words.
        Some((format!("{} {}", row[2], row[3]), row[row.len() - 2].clone()))
    };
    let (quiet, _) = eventually("the HPA to see the pods' CPU", DEADLINE, || {
        targets(s).filter(|(t, _)| t.starts_with("cpu: ") && !t.contains("<unknown>"))
    });
    let percent = |t: &str| -> u32 {
        t.trim_start_matches("cpu: ")
            .split('%')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no percentage in {t:?}"))
    };
    assert!(percent(&quiet) < 50, "{quiet}");
    assert!(quiet.ends_with("/50%"), "{quiet}");

    // Load: every pod of web uses 400m (400% of its request), new ones too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args([
            "load",
            "deployment/web",
            "--cpu",
            "400m",
            "--master",
            &s.url(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "deployment.apps/web: cpu 400m per running container of its pods (app=web)"
    );
    // Scaled out to its maximum, and, once every pod has a window under load, ~400%.
    let (busy, replicas) = eventually("the HPA at 3 replicas and ~400%", DEADLINE, || {
        targets(s).filter(|(t, r)| {
            let at_load = !t.contains("<unknown>") && percent(t) >= 380;
            r == "3" && at_load
        })
    });
    assert!(busy.ends_with("/50%"), "{busy}");
    assert!(percent(&busy) <= 420, "{busy}");
    assert_eq!(replicas, "3");
    let top = eventually("all three pods at 400m", DEADLINE, || {
        let out = s.kubectl_ok(&["top", "pods", "-l", "app=web"]);
        let table = rows(&out);
        (table.len() == 4 && table[1..].iter().all(|r| r[1] == "400m")).then_some(out)
    });
    assert!(top.contains("400m"), "{top}");
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=SuccessfulRescale",
    ]);
    assert!(events.contains("above target"), "{events}");

    // Lifted: the pods are back to their requests' share.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(["load", "deployment/web", "--reset", "--master", &s.url()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    eventually("the load lifted", DEADLINE, || {
        let out = s.kubectl_ok(&["top", "pods", "-l", "app=web", "--no-headers"]);
        let table = rows(&out);
        (!table.is_empty() && table.iter().all(|r| millis(&r[1]) < 100.0)).then_some(())
    });
}

fn apiservice_yaml(name: &str, group_priority: i32, service: &str) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {name}
spec:
  group: widgets.example.com
  version: v1
  groupPriorityMinimum: {group_priority}
  versionPriority: 10
  insecureSkipTLSVerify: true
  service:
    namespace: default
    name: {service}
"
    )
}

#[test]
fn apiservices_are_validated_and_a_group_whose_server_is_gone_answers_503() {
    let s = Server::start();
    let bad_name = s.create_yaml(&apiservice_yaml("widgets", 100, "w"));
    assert!(!bad_name.ok());
    assert_eq!(
        bad_name.stderr.trim(),
        "The APIService \"widgets\" is invalid: metadata.name: Invalid value: \"widgets\": must be `spec.version+\".\"+spec.group`: \"v1.widgets.example.com\""
    );
    let resp = s.send_json(
        "POST",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        &serde_json::json!({"metadata": {"name": "v1.widgets.example.com"},
            "spec": {"group": "widgets.example.com", "version": "v1",
                     "groupPriorityMinimum": 30000, "versionPriority": 10}}),
    );
    assert_eq!(resp.status, 422, "{}", resp.text());
    assert!(
        resp.text().contains(
            "spec.groupPriorityMinimum: Invalid value: 30000: must be positive and less than 20000"
        ),
        "{}",
        resp.text()
    );

    // A server registered for widgets.example.com, at a port where nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    s.kubectl_ok(&["create", "service", "clusterip", "widgets", "--tcp=443:443"]);
    let slice = format!(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: widgets
  labels:
    kubernetes.io/service-name: widgets
addressType: IPv4
endpoints:
- addresses: [\"192.0.2.10\"]
  conditions: {{ready: true}}
ports:
- name: 443-443
  port: {port}
  protocol: TCP
"
    );
    s.apply_ok(&slice, &[]);
    s.apply_ok(
        &apiservice_yaml("v1.widgets.example.com", 100, "widgets"),
        &[],
    );
    let again = s.create_yaml(&apiservice_yaml("v1.widgets.example.com", 100, "widgets"));
    assert!(
        again.stderr.contains(
            "Error from server (AlreadyExists): error when creating \"STDIN\": apiservices.apiregistration.k8s.io \"v1.widgets.example.com\" already exists"
        ),
        "{again}"
    );
    let condition = eventually("the discovery check to fail", DEADLINE, || {
        let resp = s.get("/apis/apiregistration.k8s.io/v1/apiservices/v1.widgets.example.com");
        resp.json()["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Available" && c["status"] == "False")
            .cloned()
    });
    assert_eq!(condition["reason"], "FailedDiscoveryCheck");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "failing or missing response from http://192.0.2.10:{port}/apis/widgets.example.com/v1: "
        )) && message.ends_with("connect: connection refused"),
        "{message}"
    );
    let table = rows(&s.kubectl_ok(&["get", "apiservice", "v1.widgets.example.com"]));
    assert_eq!(
        table[1][..4],
        [
            "v1.widgets.example.com",
            "default/widgets",
            "False",
            "(FailedDiscoveryCheck)"
        ]
    );
    // Its group answers 503 as kube-aggregator does (plain text), and kubectl says so.
    let down = s.get("/apis/widgets.example.com/v1/namespaces/default/widgets");
    assert_eq!(down.status, 503);
    assert_eq!(down.text(), "service unavailable\n");
    let err = s.kubectl_err(&["get", "--raw", "/apis/widgets.example.com/v1"]);
    assert!(
        err.contains("Error from server (ServiceUnavailable): the server is currently unable to handle the request"),
        "{err}"
    );
    // Discovery still lists the group (as kube-aggregator's does).
    let groups = s.get("/apis").json();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "widgets.example.com"),
        "{groups}"
    );
}

#[test]
fn a_stopped_metrics_server_takes_its_endpoint_away_and_kubectl_top_fails() {
    let mut c = MetricsCluster::start(1);
    let s = &c.s;
    eventually("kubectl top nodes", DEADLINE, || {
        s.kubectl(&["top", "nodes"]).ok().then_some(())
    });
    assert!(c.metrics.stop(), "metrics-server exits 0 on SIGTERM");
    let condition = eventually("the APIService to turn unavailable", DEADLINE, || {
        available(s).filter(|c| c["status"] == "False")
    });
    assert_eq!(condition["reason"], "EndpointsNotFound");
    assert_eq!(
        condition["message"],
        "cannot find endpointslices for service/metrics-server in \"kube-system\""
    );
    let resp = s.get("/apis/metrics.k8s.io/v1beta1/nodes");
    assert_eq!(resp.status, 503);
    assert_eq!(resp.text(), "service unavailable\n");
    let top = s.kubectl(&["top", "nodes"]);
    assert!(!top.ok(), "{top}");
}

#[test]
fn up_runs_a_metrics_server_and_load_reaches_its_kubelets() {
    let env = support::up::UpEnv::new();
    let _up = env.up(&[
        "--port",
        "0",
        "--nodes",
        "1",
        "--separate",
        "--cloud=false",
        "--kubelet-profile",
        "fast",
        "--metric-resolution",
        "1s",
    ]);
    eventually("v1beta1.metrics.k8s.io Available", DEADLINE, || {
        let run = env.kubectl(&[
            "get",
            "apiservice",
            "v1beta1.metrics.k8s.io",
            "--no-headers",
        ]);
        (run.ok() && rows(&run.stdout).first().is_some_and(|r| r[2] == "True")).then_some(())
    });
    forget_discovery(env.dir());
    env.apply(&deployment("api", 1));
    let kubeconfig = env.kubeconfig();
    let out = env
        .miniplane(&[
            "load",
            "deploy/api",
            "--memory",
            "200Mi",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Through HTTPS and RBAC: the kubelets read the load, the metrics-server serves it.
    eventually("the api pod at 200Mi", Duration::from_secs(60), || {
        let run = env.kubectl(&["top", "pods", "--no-headers"]);
        let table = rows(&run.stdout);
        (run.ok()
            && table
                .iter()
                .any(|r| r[0].starts_with("api-") && r[2] == "200Mi"))
        .then_some(())
    });
    let nodes = env.kubectl_ok(&["top", "nodes", "--no-headers"]);
    assert!(nodes.starts_with("node-0"), "{nodes}");
}

#[tokio::test]
async fn the_library_runs_a_metrics_server_in_process() {
    let cluster = crate::support::cluster()
        .nodes(1)
        .metrics_server(Some(Duration::from_secs(1)))
        .start()
        .unwrap();
    let client = cluster.client();
    let nodes = support::until("NodeMetrics of node-0", || {
        let client = client.clone();
        async move {
            let req = http::Request::get("/apis/metrics.k8s.io/v1beta1/nodes")
                .body(Vec::new())
                .unwrap();
            let list: Value = client.request(req).await.ok()?;
            (list["items"].as_array()?.len() == 1).then_some(list)
        }
    })
    .await;
    let usage = &nodes["items"][0]["usage"];
    assert!(is_cpu(usage["cpu"].as_str().unwrap()), "{usage}");
    assert_eq!(nodes["items"][0]["metadata"]["name"], "node-0");
    cluster.stop().unwrap();
}
