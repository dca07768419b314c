//! Scale: one `miniplane up --nodes N` (every component in one process, its defaults: every
//! acknowledged write synced to disk, HTTPS and RBAC, tracing on, the simulated cloud and a
//! metrics-server; the `fast` kubelet profile, so the figure is the control plane's), then one
//! Deployment of R replicas asking 1m CPU and 1Mi each, created through the API and timed until
//! its `status.availableReplicas` is R, polled every 200 ms.
//!
//! ```text
//! cargo bench -p ctl --bench scale                                   # 1,000 nodes, 10,000 pods, 3 runs
//! BENCH_NODES=10000 BENCH_REPLICAS=10000,30000,100000 BENCH_RUNS=3 cargo bench -p ctl --bench scale
//! BENCH_TRACING=0 cargo bench -p ctl --bench scale                   # every component --tracing=false
//! BENCH_IDLE_SECONDS=10 cargo bench -p ctl --bench scale             # the idle window (default 10 s)
//! BENCH_UP_ARGS="--cloud=false" cargo bench -p ctl --bench scale     # more `up` flags
//! MINIPLANE_BENCH_BIN=path cargo bench -p ctl --bench scale          # another miniplane build
//! ```
//!
//! Per run it prints:
//! * the start-up: `up` started until every node is Ready (its "ready" line);
//! * the idle cost: the process's CPU over `BENCH_IDLE_SECONDS` with nothing but heartbeats and
//!   leases going on, per node per second;
//! * the apply: seconds to all Available, the process's peak RSS (`VmHWM`) and what it grew by
//!   per pod (RSS after the apply less RSS before, over R);
//! * with `BENCH_UP_ARGS=--separate` (each component a child process of `up`), the same per
//!   component: its CPU while idle, its peak RSS and its RSS growth per pod, beside the size of
//!   one of the Deployment's pods as JSON (as `kubectl get pod -o json` receives it): where the
//!   bytes per pod go. The totals are then the sums over `up` and its children (the peak an
//!   upper bound: the processes need not peak together);
//! * whether the cluster stayed usable: the slowest and the median of `kubectl get nodes` and
//!   of `kubectl get pods -l probe=one` (one pod created before the Deployment), run back to
//!   back by a second thread from the Deployment's creation to all Available (the real
//!   `kubectl` binary, so the figure includes its own start, as a user sees it).
//!
//! With several replica counts, each count is a fresh cluster, run `BENCH_RUNS` times, and the
//! medians are printed as one table (the linearity check: seconds and bytes against pods). Not a
//! timed test: it prints figures for `docs/benchmarks.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[path = "support/process.rs"]
mod process;
use process::{
    children, client_of_data_dir, cpu_seconds, env_or, median, peak_rss_mib, rss_mib, spawn,
    up_args,
};

/// What one run measured.
struct Run {
    /// `up` started → every node Ready.
    start: Duration,
    /// CPU seconds per node per second while idle.
    idle_cpu_per_node: f64,
    /// Deployment created → `availableReplicas` = replicas.
    available: Duration,
    /// Peak RSS of the process, MiB.
    peak_rss: f64,
    /// RSS growth over the apply per pod, bytes.
    bytes_per_pod: f64,
    /// `kubectl get nodes` durations during the apply, seconds.
    get_nodes: Vec<f64>,
    /// One of the Deployment's pods as JSON, bytes.
    pod_json_bytes: usize,
    /// With `--separate`, each child process of `up`: what it measured alone.
    parts: Vec<Part>,
    /// `kubectl get pods -l probe=one` durations during the apply, seconds.
    get_pod: Vec<f64>,
}

/// One component process of a `--separate` cluster.
struct Part {
    /// Its subcommand (`apiserver`, `scheduler`, ...).
    name: String,
    /// CPU seconds per node per second while idle.
    idle_cpu_per_node: f64,
    /// Peak RSS, MiB.
    peak_rss: f64,
    /// RSS growth over the apply per pod, bytes.
    bytes_per_pod: f64,
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// One `kubectl` command's wall time against the cluster of `kubeconfig` (its output dropped).
fn kubectl_seconds(kubeconfig: &std::path::Path, args: &[&str]) -> f64 {
    let start = Instant::now();
    let status = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("kubectl (Debian package kubectl) on PATH");
    assert!(status.success(), "kubectl {args:?} failed");
    start.elapsed().as_secs_f64()
}

fn deployment(replicas: usize) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "scale"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "scale"}},
            "template": {
                "metadata": {"labels": {"app": "scale"}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}
                }]}
            }
        }
    }))
    .unwrap()
}

async fn one_run(nodes: usize, replicas: usize, idle_seconds: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let nodes_arg = nodes.to_string();
    let mut args = up_args(&nodes_arg, data);
    if std::env::var("BENCH_TRACING").is_ok_and(|v| v == "0") {
        args.push("--tracing=false");
    }
    let extra = std::env::var("BENCH_UP_ARGS").unwrap_or_default();
    args.extend(extra.split_whitespace());
    let started = Instant::now();
    let (up, _) = spawn(&args, "miniplane is ready at ");
    let start = started.elapsed();
    let pid = up.id();
    let kubeconfig = std::path::Path::new(data).join("kubeconfig");
    let client = client_of_data_dir(data).await;

    // `up` and, with `--separate`, its component processes.
    let mut pids = vec![(pid, "up".to_owned())];
    pids.extend(children(pid));
    let per_node_second = |cpu: f64| cpu / idle_seconds as f64 / nodes.max(1) as f64;

    // Idle: the registration's writes settle first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_before: Vec<f64> = pids.iter().map(|(p, _)| cpu_seconds(*p)).collect();
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let idle_cpu: Vec<f64> = pids
        .iter()
        .zip(&cpu_before)
        .map(|((p, _), before)| per_node_second(cpu_seconds(*p) - before))
        .collect();
    let idle_cpu_per_node = idle_cpu.iter().sum();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe", "labels": {"probe": "one"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &probe).await.unwrap();
    let rss_before: Vec<f64> = pids.iter().map(|(p, _)| rss_mib(*p)).collect();

    // kubectl, back to back, on a thread of its own until the apply ends.
    let done = Arc::new(AtomicBool::new(false));
    let prober = {
        let done = done.clone();
        let kubeconfig = kubeconfig.clone();
        std::thread::spawn(move || {
            let (mut get_nodes, mut get_pod) = (Vec::new(), Vec::new());
            while !done.load(Ordering::Relaxed) {
                get_nodes.push(kubectl_seconds(&kubeconfig, &["get", "nodes"]));
                get_pod.push(kubectl_seconds(
                    &kubeconfig,
                    &["get", "pods", "-l", "probe=one"],
                ));
            }
            (get_nodes, get_pod)
        })
    };

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let applied = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(replicas))
        .await
        .unwrap();
    let deadline = applied + Duration::from_secs(1800);
    loop {
        let d = deployments.get("scale").await.unwrap();
        let available = d
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or_default();
        if available as usize == replicas {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{available}/{replicas} Available after 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let available = applied.elapsed();
    done.store(true, Ordering::Relaxed);
    let (get_nodes, get_pod) = prober.join().unwrap();
    let mib_per_pod = |mib: f64| mib * 1024.0 * 1024.0 / replicas as f64;
    let mut parts: Vec<Part> = pids
        .iter()
        .zip(rss_before.iter().zip(&idle_cpu))
        .map(|((p, name), (before, idle))| Part {
            name: name.clone(),
            idle_cpu_per_node: *idle,
            peak_rss: peak_rss_mib(*p),
            bytes_per_pod: mib_per_pod(rss_mib(*p) - before),
        })
        .collect();
    let peak_rss = parts.iter().map(|p| p.peak_rss).sum();
    let bytes_per_pod = parts.iter().map(|p| p.bytes_per_pod).sum();
    if parts.len() == 1 {
        parts.clear();
    }
    let pod_json_bytes = one_pod_json(&client).await;
    drop(up);
    Run {
        start,
        idle_cpu_per_node,
        available,
        peak_rss,
        bytes_per_pod,
        get_nodes,
        get_pod,
        pod_json_bytes,
        parts,
    }
}

/// The size of one of the Deployment's pods as the API server sends it as JSON.
async fn one_pod_json(client: &Client) -> usize {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels("app=scale").limit(1))
        .await
        .unwrap();
    let name = list.items[0].metadata.name.clone().unwrap();
    let request = http::Request::get(format!("/api/v1/namespaces/default/pods/{name}"))
        .body(Vec::new())
        .unwrap();
    client.request_text(request).await.unwrap().len()
}

fn main() {
    let nodes = env_or("BENCH_NODES", 1_000);
    let counts: Vec<usize> = std::env::var("BENCH_REPLICAS")
        .unwrap_or_else(|_| "10000".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let runs = env_or("BENCH_RUNS", 3).max(1);
    let idle_seconds = env_or("BENCH_IDLE_SECONDS", 10).max(1) as u64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "scale bench: {nodes} nodes, replicas {counts:?}, {runs} runs each, {cores} cores, \
         one process (miniplane up, every write synced)"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut table = Vec::new();
    for &replicas in &counts {
        let mut results = Vec::new();
        for run in 1..=runs {
            let r = rt.block_on(one_run(nodes, replicas, idle_seconds));
            println!(
                "  {replicas} pods, run {run}: start {:.2} s; idle {:.1} µs CPU per node per s; \
                 all Available {:.2} s ({:.0} pods/s); peak RSS {:.0} MiB, {:.1} KiB per pod; \
                 kubectl get nodes max {:.2} s (median {:.2}, {} runs), get pods -l max {:.2} s \
                 (median {:.2})",
                r.start.as_secs_f64(),
                r.idle_cpu_per_node * 1e6,
                r.available.as_secs_f64(),
                replicas as f64 / r.available.as_secs_f64(),
                r.peak_rss,
                r.bytes_per_pod / 1024.0,
                max(&r.get_nodes),
                median(r.get_nodes.clone()),
                r.get_nodes.len(),
                max(&r.get_pod),
                median(r.get_pod.clone()),
            );
            if !r.parts.is_empty() {
                println!("    a pod as JSON: {} bytes", r.pod_json_bytes);
            }
            for part in &r.parts {
                println!(
                    "    {:<26} idle {:>6.1} µs CPU per node per s; peak RSS {:>6.0} MiB; \
                     {:>6.1} KiB per pod ({:.1}× a pod's JSON)",
                    part.name,
                    part.idle_cpu_per_node * 1e6,
                    part.peak_rss,
                    part.bytes_per_pod / 1024.0,
                    part.bytes_per_pod / r.pod_json_bytes as f64,
                );
            }
            results.push(r);
        }
        let m = |f: &dyn Fn(&Run) -> f64| median(results.iter().map(f).collect());
        table.push((
            replicas,
            m(&|r| r.start.as_secs_f64()),
            m(&|r| r.idle_cpu_per_node * 1e6),
            m(&|r| r.available.as_secs_f64()),
            m(&|r| r.peak_rss),
            m(&|r| r.bytes_per_pod / 1024.0),
            m(&|r| max(&r.get_nodes)),
            m(&|r| max(&r.get_pod)),
        ));
    }
    println!(
        "\nmedians ({nodes} nodes, {runs} runs):\n\
         | pods | start | idle µs CPU/node/s | all Available | peak RSS | KiB per pod | slowest get nodes | slowest get pods -l |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (pods, start, idle, avail, rss, kib, nodes_s, pod_s) in table {
        println!(
            "| {pods} | {start:.2} s | {idle:.1} | {avail:.2} s | {rss:.0} MiB | {kib:.1} | \
             {nodes_s:.2} s | {pod_s:.2} s |"
        );
    }
}
