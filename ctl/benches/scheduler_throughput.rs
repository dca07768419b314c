//! Scheduler throughput: 1,000 nodes and 10,000 pending pods created through the API, then
//! `miniplane scheduler` started; pods/s from the first to the last binding seen on a watch,
//! median of 3 runs, and the scheduler's peak RSS.
//!
//! ```text
//! cargo bench -p ctl --bench scheduler_throughput [-- NODES PODS RUNS]
//! ```
//!
//! Both components run as separate `miniplane` processes (the API server with `--no-fsync`,
//! a fresh data dir per run), so the RSS is the scheduler's alone. Not a timed test: it prints
//! figures for `docs/benchmarks.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[path = "support/process.rs"]
mod process;
use process::peak_rss_mib;

/// Starts `miniplane <args>` (`MINIPLANE_BENCH_BIN` picks another build), returns the child
/// and the first stdout line.
fn spawn(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(process::miniplane_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn miniplane");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    std::thread::spawn(move || for _ in lines {});
    (child, first)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

async fn populate(client: kube::Client, nodes: usize, pods: usize) {
    let node_api: Api<Node> = Api::all(client.clone());
    let pod_api: Api<Pod> = Api::namespaced(client, "default");
    futures::stream::iter(0..nodes)
        .map(|i| {
            let api = node_api.clone();
            async move {
                let r = json!({"cpu": "32", "memory": "128Gi", "pods": "110"});
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": format!("node-{i:04}"),
                                 "labels": {"kubernetes.io/hostname": format!("node-{i:04}")}},
                    "status": {"capacity": r, "allocatable": r,
                               "conditions": [{"type": "Ready", "status": "True"}]},
                }))
                .unwrap();
                api.create(&PostParams::default(), &node).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
    futures::stream::iter(0..pods)
        .map(|i| {
            let api = pod_api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("pod-{i:05}")},
                    "spec": {"containers": [{"name": "c", "image": "nginx",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                }))
                .unwrap();
                api.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
}

/// One run: returns (pods/s, seconds first→last binding, scheduler peak RSS MiB).
fn run_once(nodes: usize, pods: usize) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (apiserver, line) = spawn(&process::apiserver_args(data.to_str().unwrap()));
    let url = line.rsplit(' ').next().unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let result = runtime.block_on(async {
        let config = kube::Config::new(url.parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let start = Instant::now();
        populate(client.clone(), nodes, pods).await;
        eprintln!(
            "  created {nodes} nodes and {pods} pods in {:.1?}",
            start.elapsed()
        );
        let pod_api: Api<Pod> = Api::namespaced(client, "default");
        let list = pod_api.list(&Default::default()).await.unwrap();
        let rv = list.metadata.resource_version.unwrap();
        let mut watch = pod_api
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .unwrap()
            .boxed();
        let (scheduler, _) = spawn(&["scheduler", "--master", &url, "--seed", "1"]);
        let pid = scheduler.id();
        let (mut first, mut last, mut bound) = (None, None, 0usize);
        let mut seen = std::collections::HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(280);
        while bound < pods && Instant::now() < deadline {
            let Some(event) = watch.try_next().await.unwrap() else {
                break;
            };
            if let WatchEvent::Modified(pod) = event
                && pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some()
                && seen.insert(pod.metadata.name.clone().unwrap())
            {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                bound += 1;
            }
        }
        assert_eq!(bound, pods, "every pod bound");
        let rss = peak_rss_mib(pid);
        stop(scheduler);
        let secs = (last.unwrap() - first.unwrap()).as_secs_f64();
        ((pods - 1) as f64 / secs, secs, rss)
    });
    stop(apiserver);
    result
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(1000);
    let pods = args.get(1).copied().unwrap_or(10_000);
    let runs = args.get(2).copied().unwrap_or(3);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("scheduler throughput: {nodes} nodes, {pods} pods, {runs} runs, {cores} cores");
    let mut results: Vec<(f64, f64, f64)> = (0..runs)
        .map(|i| {
            let r = run_once(nodes, pods);
            println!(
                "  run {}: {:.0} pods/s ({:.2} s first→last binding), scheduler peak RSS {:.0} MiB",
                i + 1,
                r.0,
                r.1,
                r.2
            );
            r
        })
        .collect();
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = results[results.len() / 2];
    println!(
        "median: {:.0} pods/s, scheduler peak RSS {:.0} MiB",
        median.0, median.2
    );
}
