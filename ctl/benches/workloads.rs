//! Workload controllers benchmark, on 1,000 simulated nodes:
//!
//! * `job`: an Indexed Job of 10,000 completions, 1,000 pods at a time, each container running
//!   `sleep 1`: the time from create to the Job's `Complete` condition;
//! * `daemonset`: a DaemonSet: the time from create to `numberAvailable` = 1,000 (a pod
//!   Running and Ready on every node);
//!
//! each with the controller-manager's CPU and peak RSS meanwhile.
//!
//! Run with `cargo bench -p ctl --bench workloads` (`MINIPLANE_BENCH_QUICK=1`: 100 nodes,
//! 1,000 completions, parallelism 100; `MINIPLANE_BENCH_WORKLOADS=job` or `daemonset` runs
//! one). Each run starts a fresh `miniplane apiserver --no-fsync`, `kubelet --nodes N`,
//! `scheduler` and `controller-manager` as child processes (release build); the median of
//! `RUNS` runs is printed.
//!
//! ```text
//!   this bench ── POST Job / DaemonSet ──▶ apiserver ⇄ controller-manager, scheduler,
//!                                                      kubelet --nodes N
//!   poll it every 200 ms until Complete / all available
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::PostParams;

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/process.rs"]
mod process;
use process::{cpu_seconds, peak_rss_mib};

const RUNS: usize = 3;

struct RunResult {
    done: Duration,
    cm_cpu: f64,
    cm_rss: f64,
}

/// What one run creates and waits for.
#[derive(Clone, Copy)]
enum Workload {
    Job {
        completions: usize,
        parallelism: usize,
    },
    DaemonSet,
}

fn container(command: Option<&[&str]>) -> serde_json::Value {
    let mut c = serde_json::json!({"name": "work", "image": "busybox",
        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}});
    if let Some(command) = command {
        c["command"] = serde_json::json!(command);
    }
    c
}

async fn one_run(nodes: usize, workload: Workload) -> RunResult {
    // The serviceaccount controller creates `default`'s ServiceAccount, without which
    // ServiceAccount admission refuses every pod.
    let cluster = cluster::start(nodes, "job,daemonset,podgc,serviceaccount").await;
    let client = cluster.client.clone();
    let cpu_before = cpu_seconds(cluster.cm.id());
    let t0 = Instant::now();
    match workload {
        Workload::Job {
            completions,
            parallelism,
        } => {
            let jobs: Api<Job> = Api::namespaced(client, "default");
            let job: Job = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "indexed"},
                "spec": {
                    "completionMode": "Indexed",
                    "completions": completions,
                    "parallelism": parallelism,
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [container(Some(&["sleep", "1"]))]
                    }}
                }
            }))
            .unwrap();
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
        }
        Workload::DaemonSet => {
            let sets: Api<DaemonSet> = Api::namespaced(client, "default");
            let ds: DaemonSet = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "logger"},
                "spec": {
                    "selector": {"matchLabels": {"app": "logger"}},
                    "template": {
                        "metadata": {"labels": {"app": "logger"}},
                        "spec": {"containers": [container(None)]}
                    }
                }
            }))
            .unwrap();
            sets.create(&PostParams::default(), &ds).await.unwrap();
            loop {
                let d = sets.get("logger").await.unwrap();
                let available = d.status.as_ref().and_then(|s| s.number_available);
                if available == Some(nodes as i32) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    RunResult {
        done: t0.elapsed(),
        cm_cpu: cpu_seconds(cluster.cm.id()) - cpu_before,
        cm_rss: peak_rss_mib(cluster.cm.id()),
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
    let wanted =
        std::env::var("MINIPLANE_BENCH_WORKLOADS").unwrap_or_else(|_| "job,daemonset".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workloads = Vec::new();
    if wanted.split(',').any(|w| w == "job") {
        workloads.push((
            format!(
                "Indexed Job: {completions} completions, parallelism {parallelism}, `sleep 1` containers, {nodes} nodes ({cores} cores); until Complete"
            ),
            Workload::Job {
                completions,
                parallelism,
            },
        ));
    }
    if wanted.split(',').any(|w| w == "daemonset") {
        workloads.push((
            format!(
                "DaemonSet on {nodes} nodes ({cores} cores); until all {nodes} pods are available"
            ),
            Workload::DaemonSet,
        ));
    }
    for (title, workload) in workloads {
        println!("{title}");
        let mut results = Vec::new();
        for run in 1..=RUNS {
            let r = one_run(nodes, workload).await;
            println!(
                "  run {run}: done after {:.1} s; controller-manager {:.1} CPU-s, peak RSS {:.0} MiB",
                r.done.as_secs_f64(),
                r.cm_cpu,
                r.cm_rss
            );
            results.push(r);
        }
        println!(
            "median: done after {:.1} s; controller-manager {:.1} CPU-s, peak RSS {:.0} MiB",
            median(results.iter().map(|r| r.done.as_secs_f64()).collect()),
            median(results.iter().map(|r| r.cm_cpu).collect()),
            median(results.iter().map(|r| r.cm_rss).collect()),
        );
    }
}
