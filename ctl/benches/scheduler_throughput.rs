//! Scheduler throughput: 1,000 nodes and 10,000 pending pods created through the API, then
//! `miniplane scheduler` started; pods/s from the first to the last binding seen on a watch,
//! median of 3 runs, and the scheduler's peak RSS.
//!
//! ```text
//! cargo bench -p ctl --bench scheduler_throughput [-- NODES PODS RUNS]
//! ```
//!
//! One run measures three workloads on the same nodes (each node labelled
//! `topology.kubernetes.io/zone` with one of [`ZONES`] zones), each pod asking for 100m and
//! 128Mi:
//!
//! ```text
//! plain          no placement rule: the figure of record, printed first and unlabelled
//! anti-affinity  pods in groups of NODES / 2 (label `group`), each with required
//!                podAntiAffinity on kubernetes.io/hostname against its own group: no two
//!                pods of a group share a node (InterPodAffinity's PreFilter and Filter)
//! spread         one topologySpreadConstraint, maxSkew 1 on topology.kubernetes.io/zone,
//!                DoNotSchedule, over all the pods (PodTopologySpread's PreFilter and Filter)
//! ```
//!
//! Each run then checks the bindings kept the rule (no two pods of a group on one node; the
//! zones end within one pod of each other). The `default` ServiceAccount is created first, as
//! kube-controller-manager would: ServiceAccount admission refuses pods without it.
//!
//! Environment: `MINIPLANE_BENCH_BIN` runs another build (see `support/process.rs`);
//! `MINIPLANE_BENCH_WORKLOADS` picks the workloads, a comma-separated list of `plain`,
//! `anti-affinity` and `spread` (default: all three, in that order).
//!
//! Both components run as separate `miniplane` processes (the API server with `--no-fsync`,
//! a fresh data dir per run), so the RSS is the scheduler's alone. Not a timed test: it prints
//! figures for `docs/benchmarks.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

#[path = "support/process.rs"]
mod process;
use process::peak_rss_mib;

/// The zones the nodes are labelled with (`topology.kubernetes.io/zone: zone-<i % ZONES>`).
const ZONES: usize = 3;

/// What the pending pods ask of their placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// No placement rule.
    Plain,
    /// Required pod anti-affinity on the hostname, within groups of `nodes / 2` pods.
    AntiAffinity,
    /// A `DoNotSchedule` topology spread constraint over the zones.
    Spread,
}

impl Workload {
    /// `MINIPLANE_BENCH_WORKLOADS` (comma-separated names), or all three.
    fn from_env() -> Vec<Workload> {
        let Ok(list) = std::env::var("MINIPLANE_BENCH_WORKLOADS") else {
            return vec![Workload::Plain, Workload::AntiAffinity, Workload::Spread];
        };
        list.split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(|w| match w {
                "plain" => Workload::Plain,
                "anti-affinity" => Workload::AntiAffinity,
                "spread" => Workload::Spread,
                other => panic!(
                    "MINIPLANE_BENCH_WORKLOADS: unknown workload {other:?} \
                     (plain, anti-affinity, spread)"
                ),
            })
            .collect()
    }

    /// How many pods of a group may not share a node.
    fn group_size(nodes: usize) -> usize {
        (nodes / 2).max(1)
    }

    /// The line above the workload's runs; none for the plain case (the output it always had).
    fn heading(self, nodes: usize) -> Option<String> {
        match self {
            Workload::Plain => None,
            Workload::AntiAffinity => Some(format!(
                "with required pod anti-affinity on kubernetes.io/hostname (groups of {} pods):",
                Workload::group_size(nodes)
            )),
            Workload::Spread => Some(format!(
                "with a topology spread constraint (maxSkew 1 over {ZONES} zones, DoNotSchedule):"
            )),
        }
    }

    /// Panics unless the placements (node by pod name) keep the workload's rule: no two pods
    /// of a group on one node; zones within 1 pod of each other.
    fn verify(self, placements: &std::collections::HashMap<String, String>, nodes: usize) {
        let index = |name: &str| -> usize {
            let digits = name.rsplit('-').next().unwrap_or_default();
            digits.parse().expect("pod-NNNNN and node-NNNN names")
        };
        let mut per_domain: std::collections::HashMap<(usize, usize), usize> = Default::default();
        for (pod, node) in placements {
            let domain = match self {
                Workload::Plain => return,
                Workload::AntiAffinity => (index(pod) / Workload::group_size(nodes), index(node)),
                Workload::Spread => (0, index(node) % ZONES),
            };
            *per_domain.entry(domain).or_default() += 1;
        }
        match self {
            Workload::Plain => {}
            Workload::AntiAffinity => {
                let crowded = per_domain.values().filter(|n| **n > 1).count();
                assert_eq!(crowded, 0, "nodes holding two pods of one group");
            }
            Workload::Spread => {
                let (min, max) = (per_domain.values().min(), per_domain.values().max());
                assert!(
                    per_domain.len() == ZONES.min(nodes)
                        && max.zip(min).is_some_and(|(a, b)| a - b <= 1),
                    "zones uneven: {per_domain:?}"
                );
            }
        }
    }

    /// Pod `i` of the workload on `nodes` nodes.
    fn pod(self, i: usize, nodes: usize) -> Value {
        let mut pod = json!({
            "metadata": {"name": format!("pod-{i:05}")},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        });
        match self {
            Workload::Plain => {}
            Workload::AntiAffinity => {
                let group = format!("g-{}", i / Workload::group_size(nodes));
                pod["metadata"]["labels"] = json!({"group": group});
                pod["spec"]["affinity"] = json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {"group": group}},
                        "topologyKey": "kubernetes.io/hostname",
                    }],
                }});
            }
            Workload::Spread => {
                pod["metadata"]["labels"] = json!({"app": "spread"});
                pod["spec"]["topologySpreadConstraints"] = json!([{
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                }]);
            }
        }
        pod
    }
}

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

async fn populate(client: kube::Client, nodes: usize, pods: usize, workload: Workload) {
    let node_api: Api<Node> = Api::all(client.clone());
    // ServiceAccount admission refuses pods in a namespace without its `default`
    // ServiceAccount, which kube-controller-manager creates; none runs here.
    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    sa_api.create(&PostParams::default(), &sa).await.unwrap();
    let pod_api: Api<Pod> = Api::namespaced(client, "default");
    futures::stream::iter(0..nodes)
        .map(|i| {
            let api = node_api.clone();
            async move {
                let r = json!({"cpu": "32", "memory": "128Gi", "pods": "110"});
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": format!("node-{i:04}"),
                                 "labels": {"kubernetes.io/hostname": format!("node-{i:04}"),
                                            "topology.kubernetes.io/zone":
                                                format!("zone-{}", i % ZONES)}},
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
                let pod: Pod = serde_json::from_value(workload.pod(i, nodes)).unwrap();
                api.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
}

/// One run: returns (pods/s, seconds first→last binding, scheduler peak RSS MiB).
fn run_once(nodes: usize, pods: usize, workload: Workload) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (apiserver, line) = spawn(&process::apiserver_args(data.to_str().unwrap()));
    let url = line.rsplit(' ').next().unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let result = runtime.block_on(async {
        let config = kube::Config::new(url.parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let start = Instant::now();
        populate(client.clone(), nodes, pods, workload).await;
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
        // Each bound pod's node, by pod name.
        let mut seen = std::collections::HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(280);
        while bound < pods && Instant::now() < deadline {
            let Some(event) = watch.try_next().await.unwrap() else {
                break;
            };
            if let WatchEvent::Modified(pod) = event
                && let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone())
                && seen
                    .insert(pod.metadata.name.clone().unwrap(), node)
                    .is_none()
            {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                bound += 1;
            }
        }
        assert_eq!(bound, pods, "every pod bound");
        workload.verify(&seen, nodes);
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
    for workload in Workload::from_env() {
        if let Some(heading) = workload.heading(nodes) {
            println!("{heading}");
        }
        let mut results: Vec<(f64, f64, f64)> = (0..runs)
            .map(|i| {
                let r = run_once(nodes, pods, workload);
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
}
