//! A node failure under the virtual clock: what Kubernetes takes five and a half minutes of
//! grace periods to do, timed on the wall clock.
//!
//! Each run starts a cluster of 10 simulated nodes (the library's `Cluster`, one process,
//! realistic kubelet delays, Kubernetes' timings: 40 s node-monitor grace period, 300 s
//! default tolerations) on a paused virtual clock, runs a 30-replica Deployment, stops the
//! heartbeats of the node with the most of its pods, and then times, on the machine's clock:
//! `miniplane clock advance 6m` (`POST /miniplane/v1/clock`) until the Deployment has 30
//! available replicas again with none on the dead node: the node marked Unknown after its
//! grace period, its pods evicted after their toleration, replaced, scheduled elsewhere and
//! started.
//!
//! ```text
//! cargo bench -p ctl --bench virtual_clock
//! BENCH_CLOCK_SPEEDS=100,300 BENCH_RUNS=5 cargo bench -p ctl --bench virtual_clock
//! ```
//!
//! `BENCH_CLOCK_SPEEDS` are the advance speeds tried (cluster seconds per machine second,
//! default 100, the `advance` default, and 300); each gets `BENCH_RUNS` runs (default 5) and
//! the median is printed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use admin::FaultSpec;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use miniplane::admin_client::AdminClient;
use miniplane::{Cluster, KubeletProfile};

const NODES: usize = 10;
const REPLICAS: usize = 30;
const DEADLINE: Duration = Duration::from_secs(120);

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// One run: returns the wall time of the advance until the Deployment recovered.
async fn one_run(speed: f64) -> Duration {
    let cluster = Cluster::builder()
        .nodes(NODES)
        .kubelet_profile(KubeletProfile::Realistic)
        .virtual_clock(0.0)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            }
        }
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let list = || async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
    };
    wait_for("all pods scheduled", || async {
        let p = list().await;
        p.len() == REPLICAS && p.iter().all(|p| !node_of(p).is_empty())
    })
    .await;
    admin.advance_clock("10s", None).await.unwrap();
    let available = || async {
        deployments
            .get("web")
            .await
            .unwrap()
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or(0) as usize
    };
    wait_for("all available", || async { available().await == REPLICAS }).await;
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for p in list().await {
        *per_node.entry(node_of(&p)).or_default() += 1;
    }
    let dead = per_node
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(node, _)| node.clone())
        .unwrap();
    admin
        .inject(FaultSpec::StopHeartbeats { node: dead.clone() })
        .await
        .unwrap();

    let t0 = Instant::now();
    admin.advance_clock("6m", Some(speed)).await.unwrap();
    wait_for("the Deployment recovered off the dead node", || async {
        let p = list().await;
        available().await == REPLICAS && !p.iter().any(|p| live(p) && node_of(p) == dead)
    })
    .await;
    let took = t0.elapsed();
    cluster.stop().unwrap();
    took
}

fn main() {
    let runs: usize = env_or("BENCH_RUNS", "5").parse().expect("BENCH_RUNS");
    let speeds: Vec<f64> = env_or("BENCH_CLOCK_SPEEDS", "100,300")
        .split(',')
        .map(|s| s.trim().parse().expect("BENCH_CLOCK_SPEEDS"))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "node failure under the virtual clock: {NODES} nodes, {REPLICAS} replicas, \
         advance 6m (40 s grace + 300 s toleration), {cores} cores, {runs} runs"
    );
    for speed in speeds {
        let mut times: Vec<Duration> = (0..runs)
            .map(|_| runtime.block_on(one_run(speed)))
            .collect();
        times.sort();
        let shown: Vec<String> = times
            .iter()
            .map(|t| format!("{:.2}", t.as_secs_f64()))
            .collect();
        println!(
            "advance at {speed}x: median {:.2} s to recovered (runs {} s)",
            times[times.len() / 2].as_secs_f64(),
            shown.join(" / ")
        );
    }
}
