//! Kubelet simulator benchmark: 1,000 simulated nodes registering (time until all are Ready,
//! RSS of the kubelet process) and pod lifecycle throughput (10,000 pods bound directly to
//! nodes through the API → all Running).
//!
//! Run with `cargo bench -p ctl --bench kubelet_sim` (`MINIPLANE_BENCH_QUICK=1`: 100 nodes,
//! 1,000 pods). Each run starts a fresh `miniplane apiserver --no-fsync` and
//! `miniplane kubelet --nodes N` as child processes (release build) and drives them with
//! kube-rs; the median of `RUNS` runs is printed.
//!
//! ```text
//!   apiserver ◀── kubelet --nodes 1000 (one process)      t0 ─▶ "registered" line, all Ready
//!       ▲
//!       └── this bench: create 10k pods (64 in flight, spec.nodeName set) ─▶ poll until Running
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Config};

#[path = "support/process.rs"]
mod process;
use process::{rss_mib, spawn};

const RUNS: usize = 3;
const IN_FLIGHT: usize = 64;

struct RunResult {
    registered: Duration,
    all_ready: Duration,
    rss_nodes: f64,
    create_rate: f64,
    running_rate: f64,
    rss_pods: f64,
}

async fn count_ready(nodes: &Api<Node>) -> usize {
    let list = nodes.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count()
}

async fn one_run(node_count: usize, pod_count: usize) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_api, url) = process::start_apiserver(&data);
    let client = Client::try_from(Config::new(url.parse().unwrap())).unwrap();
    let nodes_arg = node_count.to_string();
    let t0 = Instant::now();
    let (kubelet, _) = spawn(
        &["kubelet", "--nodes", &nodes_arg, "--master", &url],
        "nodes registered",
    );
    let registered = t0.elapsed();
    let nodes: Api<Node> = Api::all(client.clone());
    while count_ready(&nodes).await < node_count {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all_ready = t0.elapsed();
    let rss_nodes = rss_mib(kubelet.0.id());

    let ns = "bench";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    // No controller-manager runs here: its serviceaccount controller's `default`
    // ServiceAccount, without which ServiceAccount admission refuses every pod, is made by hand.
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let t1 = Instant::now();
    futures::stream::iter(0..pod_count)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("p-{i}")},
                    "spec": {"nodeName": format!("node-{}", i % node_count),
                             "containers": [{"name": "app", "image": "nginx"}]}
                }))
                .unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    let created = t1.elapsed();
    loop {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == pod_count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let all_running = t1.elapsed();
    RunResult {
        registered,
        all_ready,
        rss_nodes,
        create_rate: pod_count as f64 / created.as_secs_f64(),
        running_rate: pod_count as f64 / all_running.as_secs_f64(),
        rss_pods: rss_mib(kubelet.0.id()),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::var("MINIPLANE_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (node_count, pod_count) = if quick { (100, 1_000) } else { (1_000, 10_000) };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("kubelet-sim bench: {node_count} nodes, {pod_count} pods, {cores} cores, {RUNS} runs");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results: Vec<RunResult> = (0..RUNS)
        .map(|run| {
            let r = runtime.block_on(one_run(node_count, pod_count));
            println!(
                "run {run}: registered {:.2}s, all Ready {:.2}s, kubelet RSS {:.0} MiB; pods created {:.0}/s, all Running {:.0} pods/s, kubelet RSS {:.0} MiB",
                r.registered.as_secs_f64(), r.all_ready.as_secs_f64(), r.rss_nodes, r.create_rate, r.running_rate, r.rss_pods
            );
            r
        })
        .collect();
    let m = |f: fn(&RunResult) -> f64| median(results.iter().map(f).collect());
    println!(
        "median: {node_count} nodes all Ready in {:.2}s (registered line {:.2}s), kubelet RSS {:.0} MiB; {pod_count} pods: created {:.0}/s, all Running at {:.0} pods/s, kubelet RSS {:.0} MiB",
        m(|r| r.all_ready.as_secs_f64()),
        m(|r| r.registered.as_secs_f64()),
        m(|r| r.rss_nodes),
        m(|r| r.create_rate),
        m(|r| r.running_rate),
        m(|r| r.rss_pods),
    );
}
