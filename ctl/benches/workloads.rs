//! Workload controllers benchmark: an Indexed Job of 10,000 completions, 1,000 pods at a
//! time, each container running `sleep 1`, on 1,000 simulated nodes: the time from create to
//! the Job's `Complete` condition, and the controller-manager's CPU and peak RSS meanwhile.
//!
//! Run with `cargo bench -p ctl --bench workloads` (`MINIPLANE_BENCH_QUICK=1`: 100 nodes,
//! 1,000 completions, parallelism 100). Each run starts a fresh `miniplane apiserver
//! --no-fsync`, `kubelet --nodes N`, `scheduler` and `controller-manager` as child processes
//! (release build); the median of `RUNS` runs is printed.
//!
//! ```text
//!   this bench ── POST Job (Indexed, completions C, parallelism P, sleep 1) ──▶ apiserver
//!   controller-manager (job) ⇄ apiserver ⇄ scheduler, kubelet --nodes N
//!   poll the Job every 200 ms until Complete=True
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Config};

#[path = "support/process.rs"]
mod process;
use process::{cpu_seconds, peak_rss_mib, spawn};

const RUNS: usize = 3;

struct RunResult {
    complete: Duration,
    cm_cpu: f64,
    cm_rss: f64,
}

async fn one_run(nodes: usize, completions: usize, parallelism: usize) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_api, line) = spawn(
        &process::apiserver_args(data.to_str().unwrap()),
        "listening on",
    );
    let url = line
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let client = Client::try_from(Config::new(url.parse().unwrap())).unwrap();
    let nodes_arg = nodes.to_string();
    let (_kubelet, _) = spawn(
        &["kubelet", "--nodes", &nodes_arg, "--master", &url],
        "nodes registered",
    );
    let (_scheduler, _) = spawn(
        &["scheduler", "--master", &url, "--listen", "127.0.0.1:0"],
        "miniplane scheduler started",
    );
    let (cm, _) = spawn(
        &[
            "controller-manager",
            "--master",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--controllers",
            "job,podgc",
        ],
        "miniplane controller-manager started",
    );
    let node_api: Api<Node> = Api::all(client.clone());
    while node_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
        < nodes
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu_before = cpu_seconds(cm.id());
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "indexed"},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": parallelism,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox", "command": ["sleep", "1"],
                                "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]
            }}
        }
    }))
    .unwrap();
    let t0 = Instant::now();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    loop {
        let j = jobs.get("indexed").await.unwrap();
        let complete = j
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            });
        if complete {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    RunResult {
        complete: t0.elapsed(),
        cm_cpu: cpu_seconds(cm.id()) - cpu_before,
        cm_rss: peak_rss_mib(cm.id()),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let quick = std::env::var_os("MINIPLANE_BENCH_QUICK").is_some();
    let (nodes, completions, parallelism) = if quick {
        (100, 1_000, 100)
    } else {
        (1_000, 10_000, 1_000)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "Indexed Job: {completions} completions, parallelism {parallelism}, `sleep 1` containers, {nodes} nodes ({cores} cores)"
    );
    let mut results = Vec::new();
    for run in 1..=RUNS {
        let r = one_run(nodes, completions, parallelism).await;
        println!(
            "  run {run}: Complete after {:.1} s; controller-manager {:.1} CPU-s, peak RSS {:.0} MiB",
            r.complete.as_secs_f64(),
            r.cm_cpu,
            r.cm_rss
        );
        results.push(r);
    }
    println!(
        "median: Complete after {:.1} s (ideal {} s: {} waves of 1 s); controller-manager {:.1} CPU-s, peak RSS {:.0} MiB",
        median(results.iter().map(|r| r.complete.as_secs_f64()).collect()),
        completions / parallelism,
        completions / parallelism,
        median(results.iter().map(|r| r.cm_cpu).collect()),
        median(results.iter().map(|r| r.cm_rss).collect()),
    );
}
