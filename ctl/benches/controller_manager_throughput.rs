//! Controller-manager throughput: from creating a Deployment with N replicas to all N pods
//! created (the ReplicaSet's `status.replicas == N`, i.e. created *and* observed).
//!
//! An in-process API server (durable sled store, fsync on) and controller-manager, each on
//! its own tokio runtime so the controller's CPU time can be read from its threads
//! (`/proc/self/task/*/stat`, threads named `cm`). RSS is the whole process (API server +
//! controller-manager + this driver).
//!
//! ```text
//!   cargo bench -p ctl --bench controller_manager_throughput        # 1k and 10k, both limits
//!   BENCH_CASES=1000:none:3,1000:20:1 cargo bench -p ctl --bench controller_manager_throughput
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use controllers::manager::{ApiServer, Config};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

struct Sample {
    seconds: f64,
    cm_cpu: f64,
    rss_mb: f64,
}

/// utime + stime (seconds) of this process's threads whose name starts with `prefix`.
fn thread_cpu(prefix: &str) -> f64 {
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let utime: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0);
        let stime: u64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
        total += utime + stime;
    }
    total as f64 / ticks
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn deployment(replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "bench"}},
                 "template": {"metadata": {"labels": {"app": "bench"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}
    }))
    .unwrap()
}

fn run_once(replicas: i32, rate_limit: Option<client::RateLimit>) -> Sample {
    let dir = tempfile::tempdir().unwrap();
    let api_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("apiserver")
        .enable_all()
        .build()
        .unwrap();
    let cm_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("cm")
        .enable_all()
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let server = api_rt
        .block_on(apiserver::Server::bind(apiserver::Config {
            data_dir: dir.path().join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            no_fsync: false,
            store_history_budget: Some(apiserver::DEFAULT_STORE_HISTORY_BUDGET),
            store_history: apiserver::HistoryRetention::default(),
            etcd: None,
            options: apiserver::ServerOptions::default(),
        }))
        .unwrap();
    let url = format!("http://{}", server.local_addr().unwrap());
    let api_task = api_rt.spawn(server.run(stop.clone()));
    let mut config = Config::new(ApiServer::Master(url.clone()));
    config.rate_limit = rate_limit;
    let cm_task = cm_rt.spawn(controllers::manager::run(config, stop.clone()));

    let driver = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sample = driver.block_on(async {
        let client =
            client::build_client(&client::ClientConfig::new(client::ClusterSource::Url(url)))
                .await
                .unwrap();
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let replica_sets: Api<ReplicaSet> = Api::namespaced(client, "default");
        // The clock includes the controller-manager's start (list + watch of empty caches,
        // a few milliseconds): there is no signal to wait for without a sleep.
        let cpu0 = thread_cpu("cm");
        let start = Instant::now();
        deployments
            .create(&PostParams::default(), &deployment(replicas))
            .await
            .unwrap();
        loop {
            let list = replica_sets
                .list(&ListParams::default().labels("app=bench"))
                .await
                .unwrap();
            let observed: i32 = list
                .items
                .iter()
                .filter_map(|rs| rs.status.as_ref().map(|s| s.replicas))
                .sum();
            if observed >= replicas {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Sample {
            seconds: start.elapsed().as_secs_f64(),
            cm_cpu: thread_cpu("cm") - cpu0,
            rss_mb: rss_mb(),
        }
    });
    stop.cancel();
    let _ = cm_rt.block_on(cm_task);
    let _ = api_rt.block_on(api_task);
    sample
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!("controller-manager benchmark: {cores} cores");
    println!(
        "| replicas | client limit | runs | median seconds | pods/s | controller CPU s | peak RSS MB (process) |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    // BENCH_CASES="replicas:limit:runs,...", limit `none` or `20` (20 qps / 30 burst).
    let spec = std::env::var("BENCH_CASES")
        .unwrap_or_else(|_| "1000:none:5,1000:20:3,10000:none:3,10000:20:1".into());
    let cases: Vec<(i32, Option<client::RateLimit>, usize)> = spec
        .split(',')
        .filter_map(|case| {
            let mut parts = case.split(':');
            let replicas = parts.next()?.parse().ok()?;
            let limit = match parts.next()? {
                "none" => None,
                _ => Some(client::RateLimit::CONTROLLER_MANAGER),
            };
            Some((replicas, limit, parts.next()?.parse().ok()?))
        })
        .collect();
    for (replicas, limit, runs) in cases {
        let samples: Vec<Sample> = (0..runs).map(|_| run_once(replicas, limit)).collect();
        let seconds = median(samples.iter().map(|s| s.seconds).collect());
        let cpu = median(samples.iter().map(|s| s.cm_cpu).collect());
        let rss = samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max);
        let label = match limit {
            None => "none".to_string(),
            Some(l) => format!("{} qps / {} burst", l.qps, l.burst),
        };
        println!(
            "| {replicas} | {label} | {runs} | {seconds:.2} | {:.0} | {cpu:.2} | {rss:.0} |",
            replicas as f64 / seconds
        );
    }
}
