//! The whole apply flow at scale: 1,000 simulated nodes, then one Deployment of 10,000
//! replicas created through the API, timed until every pod is `Running`: the end-to-end
//! pods/s, when the pods were all created (controller-manager), all bound (scheduler) and all
//! Running (kubelets), each process's peak RSS, and the CPU each process used from the
//! Deployment's creation to the last pod Running (per pod: the run is CPU-bound on 2 cores, so
//! the wall clock is about the four processes' CPU divided by the cores).
//!
//! ```text
//! cargo bench -p ctl --bench apply_to_running
//! BENCH_NODES=100 BENCH_REPLICAS=1000 BENCH_RUNS=1 cargo bench -p ctl --bench apply_to_running
//! BENCH_TRACING=0 cargo bench -p ctl --bench apply_to_running   # every component --tracing=false
//! BENCH_TRACING_OFF=kubelet,scheduler cargo bench ...              # only those --tracing=false
//! BENCH_APISERVER_ARGS="--trace-max-spans-per-trace 0" cargo bench ... # more API server flags
//! BENCH_PROCESSES=one cargo bench -p ctl --bench apply_to_running  # `miniplane up`, one process
//! BENCH_WATCH=running cargo bench -p ctl --bench apply_to_running    # a lighter observer (below)
//! BENCH_SERVICE=1 cargo bench -p ctl --bench apply_to_running        # and a Service (below)
//! BENCH_PROCESSES=one BENCH_AUTHZ=compare cargo bench -p ctl --bench apply_to_running  # (below)
//! BENCH_PROCESSES=one BENCH_STORE=compare cargo bench -p ctl --bench apply_to_running  # (below)
//! ```
//!
//! `BENCH_STORE=compare` (one process only) runs, in every run, the same apply on the embedded
//! store, then on a fresh 3-member etcd cluster on loopback ports (Debian's `etcd-server`,
//! `up --etcd-servers`), then on such a cluster with a second, idle `miniplane apiserver` on
//! it (its watch caches following every write). The embedded store runs `--no-fsync` as
//! always here; etcd 3.4 always syncs its WAL. The CPU of the etcd members and of the second
//! API server is counted apart ("outside the cluster process") and in the total.
//!
//! `miniplane up` serves HTTPS with client certificates and RBAC; the bench reads its
//! kubeconfig. `BENCH_AUTHZ=compare` (one process only) runs three clusters in turn in every
//! run, in the same conditions: `up` (RBAC), `up --authorization-mode AlwaysAllow` (the same
//! TLS and authentication, no RBAC) and `up --secure=false` (plain HTTP, no authentication),
//! and prints the medians of each and the median of the per-run ratios of CPU per pod against
//! AlwaysAllow: what RBAC costs, and what TLS and authentication cost.
//!
//! With `BENCH_SERVICE=1` a Service selecting the Deployment's pods is created first, and each
//! run also waits, after the last pod is Running, until the Service's EndpointSlices list
//! every pod as ready (read from a watch of them): the time printed as "endpoints ready", and
//! the CPU is counted up to then. Set beside runs without it, that is what the EndpointSlice
//! and Endpoints controllers cost per pod.
//!
//! ```text
//!   apiserver (--no-fsync) ◀── kubelet --nodes N, scheduler, controller-manager (4 processes)
//!       ▲
//!       └── this bench: POST Deployment (t0) ─▶ one watch on pods: created / bound / Running
//! ```
//!
//! With `BENCH_PROCESSES=one` the cluster is `miniplane up --nodes N --no-fsync` instead, every
//! component in one process as the README's quick start runs it; the CPU of each component is
//! then that of its threads (the in-process controller-manager, scheduler and kubelet each run
//! on a thread named after it; the API server is the rest of the process), and the peak RSS is
//! the process's. `BENCH_TRACING=0` applies to both; `BENCH_TRACING_OFF` and
//! `BENCH_APISERVER_ARGS` to four processes only.
//!
//! Progress is read from a single pod watch (not by listing, which would load the API server
//! with 10,000-object lists). That watch is a fifth client on the same cores: it gets every
//! pod event (~3 per pod). `BENCH_WATCH=running` watches with
//! `fieldSelector=status.phase=Running` instead, ~1 event per pod, to measure what the
//! observer costs; it cannot see when the pods were created or bound (printed as `-`). The
//! figure of record uses the full watch. Every run starts from a fresh data dir. Not a timed
//! test: it prints figures for `docs/benchmarks.md`.
//!
//! Before each run the bench also times dependent reads at random places in 64 MiB (a pointer
//! chase, ~0.2 s, outside the apply's window): the host's memory latency at that moment, to
//! set beside the run's CPU per pod, as the stolen time is (the host's speed varies by
//! hours, by up to 3×; see `docs/benchmarks.md`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use client::list_watch::{ApiListerWatcher, ListerWatcher, WatchOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ApiResource, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::Object;
use kube::{Api, Client, Config};
use serde::Deserialize;

#[path = "support/process.rs"]
mod process;
// A 3-member etcd cluster on loopback ports for `BENCH_STORE=compare` (the store tests' fixture).
#[path = "../../store/tests/etcd/cluster.rs"]
#[allow(dead_code)]
mod etcd_cluster;
use process::{Proc, cpu_seconds, env_or, median, peak_rss_mib, spawn, thread_cpu_seconds};

struct RunResult {
    nodes_ready: Duration,
    /// When every pod was seen created and bound (`None` with `BENCH_WATCH=running`).
    created: Option<Duration>,
    bound: Option<Duration>,
    running: Duration,
    /// When the Service's EndpointSlices listed every pod ready (`BENCH_SERVICE=1` only).
    endpoints_ready: Option<Duration>,
    /// Peak RSS of apiserver, controller-manager, scheduler, kubelet; in one process, of the
    /// process (the others `None`).
    rss: [Option<f64>; 4],
    /// CPU seconds of apiserver, controller-manager, scheduler, kubelet during the apply, then
    /// the bench's own (its pod watch), which shares the cores.
    cpu: [f64; 5],
    /// The host's CPU time during the apply, from `/proc/stat`: (all of it, stolen), in
    /// seconds. Steal is time the hypervisor gave this machine's vCPUs to someone else: a run
    /// with much of it is the host's slow phase, not the code's.
    host: (f64, f64),
    /// Writes to the store during the apply (revisions from before the Deployment's creation
    /// to the last pod Running).
    writes: u64,
    /// CPU seconds during the apply of what runs outside the cluster's processes: the etcd
    /// members and a second API server (`BENCH_STORE=compare`), else 0.
    outside: f64,
}

/// The two fields of a pod the bench follows. Its pod watch decodes only these (and the
/// metadata but its managedFields), not the whole Pod: the bench shares the 2 cores with what
/// it measures.
#[derive(Clone, Debug, Default, Deserialize)]
struct PodSpecLite {
    #[serde(rename = "nodeName")]
    node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct PodStatusLite {
    phase: Option<String>,
}

type PodLite = Object<PodSpecLite, PodStatusLite>;

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `args`, plus `--tracing=false` when `BENCH_TRACING=0` or when the comma-separated
/// `BENCH_TRACING_OFF` names this component (`apiserver`, `controller-manager`, `scheduler`,
/// `kubelet`: the first argument). Every component traces by default.
fn component<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let all_off = std::env::var("BENCH_TRACING").is_ok_and(|v| v == "0");
    let this_off = std::env::var("BENCH_TRACING_OFF")
        .is_ok_and(|list| list.split(',').any(|c| Some(&c.trim()) == args.first()));
    let mut args = args.to_vec();
    if all_off || this_off {
        args.push("--tracing=false");
    }
    args
}

/// The cluster under test.
enum Under {
    /// `miniplane apiserver`, `controller-manager`, `scheduler`, `kubelet` as four processes,
    /// stopped (dropped) in the order of the fields: the API server last, so that the others
    /// do not log failed requests as they stop.
    Separate {
        kubelet: Proc,
        scheduler: Proc,
        cm: Proc,
        api: Proc,
    },
    /// `miniplane up`: every component in one process.
    One(Proc),
}

impl Under {
    /// The four processes, in the order of [`RunResult::cpu`].
    fn processes(&self) -> Option<[&Proc; 4]> {
        match self {
            Under::Separate {
                api,
                cm,
                scheduler,
                kubelet,
            } => Some([api, cm, scheduler, kubelet]),
            Under::One(_) => None,
        }
    }

    /// CPU seconds so far of apiserver, controller-manager, scheduler, kubelet.
    fn cpu(&self) -> [f64; 4] {
        match self {
            Under::Separate { .. } => self
                .processes()
                .map_or([0.0; 4], |p| p.map(|p| cpu_seconds(p.id()))),
            Under::One(up) => {
                let threads = thread_cpu_seconds(up.id());
                let named = |prefix: &str| -> f64 {
                    threads
                        .iter()
                        .filter(|(name, _)| name.starts_with(prefix))
                        .map(|(_, cpu)| cpu)
                        .sum()
                };
                // Thread names are cut to 15 bytes: "controller-mana".
                let (cm, scheduler, kubelet) =
                    (named("controller-"), named("scheduler"), named("kubelet"));
                let total = cpu_seconds(up.id());
                [total - cm - scheduler - kubelet, cm, scheduler, kubelet]
            }
        }
    }

    /// Peak RSS so far, as [`RunResult::rss`].
    fn rss(&self) -> [Option<f64>; 4] {
        match self {
            Under::Separate { .. } => self
                .processes()
                .map_or([None; 4], |p| p.map(|p| Some(peak_rss_mib(p.id())))),
            Under::One(up) => [Some(peak_rss_mib(up.id())), None, None, None],
        }
    }
}

/// Whether `BENCH_PROCESSES=one` asks for `miniplane up` in one process.
fn one_process() -> bool {
    std::env::var("BENCH_PROCESSES").is_ok_and(|v| v == "one")
}

/// Four processes: the API server, then the kubelets (and every node Ready), the scheduler and
/// the controller-manager. Returns them, the API server's URL and when the nodes were Ready.
async fn start_separate(data: &str, node_count: usize) -> (Under, String, Duration) {
    let extra = std::env::var("BENCH_APISERVER_ARGS").unwrap_or_default();
    let mut api_args = process::apiserver_args(data);
    api_args.extend(extra.split_whitespace());
    let (api, line) = spawn(&component(&api_args), "listening on");
    let url = line.rsplit(' ').next().unwrap().to_owned();
    let client = Client::try_from(Config::new(url.parse().unwrap())).unwrap();

    let start = Instant::now();
    let nodes_arg = node_count.to_string();
    let (kubelet, _) = spawn(
        &component(&["kubelet", "--nodes", &nodes_arg, "--master", &url]),
        "nodes registered",
    );
    let nodes: Api<Node> = Api::all(client.clone());
    loop {
        let list = nodes.list(&ListParams::default()).await.unwrap();
        if list.items.iter().filter(|n| is_ready(n)).count() == node_count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let nodes_ready = start.elapsed();
    let (scheduler, _) = spawn(
        &component(&["scheduler", "--master", &url, "--listen", "127.0.0.1:0"]),
        "scheduler started",
    );
    let (cm, _) = spawn(
        &component(&[
            "controller-manager",
            "--master",
            &url,
            "--listen",
            "127.0.0.1:0",
        ]),
        "controller-manager",
    );
    let under = Under::Separate {
        api,
        cm,
        scheduler,
        kubelet,
    };
    (under, url, nodes_ready)
}

/// `miniplane up --nodes N --no-fsync` (plus `extra` flags), ready (every node Ready) when it
/// prints its URL.
fn start_one(data: &str, node_count: usize, extra: &[&str]) -> (Under, String, Duration) {
    let nodes_arg = node_count.to_string();
    let mut args = process::up_args(&nodes_arg, data);
    args.push("--no-fsync");
    if std::env::var("BENCH_TRACING").is_ok_and(|v| v == "0") {
        args.push("--tracing=false");
    }
    args.extend_from_slice(extra);
    let start = Instant::now();
    let (up, line) = spawn(&args, "miniplane is ready at ");
    let nodes_ready = start.elapsed();
    let url = line
        .split("ready at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    (Under::One(up), url, nodes_ready)
}

/// A client of the cluster: from the kubeconfig `up` wrote in `data` (a secure cluster's CA
/// and admin certificate), else plain HTTP to `url`.
async fn client_of(data: &str, url: &str) -> Client {
    if one_process() && std::path::Path::new(data).join("kubeconfig").exists() {
        return process::client_of_data_dir(data).await;
    }
    Client::try_from(Config::new(url.parse().unwrap())).unwrap()
}

async fn one_run(
    node_count: usize,
    replicas: usize,
    up_args: &[&str],
    outside: &dyn Fn() -> f64,
) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let (under, url, nodes_ready) = if one_process() {
        start_one(data, node_count, up_args)
    } else {
        start_separate(data, node_count).await
    };
    let client = client_of(data, &url).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pods_lite: Api<PodLite> =
        Api::namespaced_with(client.clone(), "default", &ApiResource::erase::<Pod>(&()));
    // Decoded without managedFields, as a controller's informer does: the bench reads none.
    let pods_lite = ApiListerWatcher::new(pods_lite).without_managed_fields();
    let running_only = running_only();
    let pods_lite = if running_only {
        pods_lite.field_selector("status.phase=Running")
    } else {
        pods_lite
    };
    let watch_from = |resource_version: String| WatchOptions {
        resource_version,
        timeout_seconds: 290,
        allow_watch_bookmarks: false,
    };
    let rv = list_revision(&pods).await;
    let mut watch = pods_lite.watch(watch_from(rv.clone())).await.unwrap();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "bench"}},
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
            }
        }
    }))
    .unwrap();
    let with_service = std::env::var("BENCH_SERVICE").is_ok_and(|v| v == "1");
    if with_service {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "bench"},
            "spec": {"selector": {"app": "bench"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }))
        .unwrap();
        Api::<Service>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
    }
    let cpu_of = |under: &Under| {
        let [a, b, c, d] = under.cpu();
        [a, b, c, d, cpu_seconds(std::process::id())]
    };
    let cpu_before = cpu_of(&under);
    let outside_before = outside();
    let host_before = host_cpu();
    let t0 = Instant::now();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let (mut created, mut bound, mut running) = (HashSet::new(), HashSet::new(), HashSet::new());
    let (mut t_created, mut t_bound) = (None, None);
    let rv_before: u64 = rv.parse().unwrap_or(0);
    let mut last_rv = rv;
    while running.len() < replicas {
        let event = tokio::time::timeout(Duration::from_secs(300), watch.try_next())
            .await
            .expect("no pod event for 300 s")
            .expect("watch failed");
        let Some(event) = event else {
            // The server ended the watch (timeout, or it cut a slow reader off): resume it.
            watch = pods_lite
                .watch(watch_from(last_rv.clone()))
                .await
                .expect("resume the pod watch");
            continue;
        };
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) = &event
            && let Some(rv) = p.metadata.resource_version.clone()
        {
            last_rv = rv;
        }
        let pod = match event {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => p,
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            _ => continue,
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        // A watch of Running pods only sees pods once they run: creation and binding are
        // not observed (left `None`).
        if !running_only {
            created.insert(name.clone());
            if pod.spec.node_name.is_some() {
                bound.insert(name.clone());
            }
        }
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            running.insert(name);
        }
        if t_created.is_none() && created.len() == replicas {
            t_created = Some(t0.elapsed());
        }
        if t_bound.is_none() && bound.len() == replicas {
            t_bound = Some(t0.elapsed());
        }
    }
    let running_at = t0.elapsed();
    let endpoints_ready = if with_service {
        wait_for_ready_endpoints(&client, "bench", replicas).await;
        Some(t0.elapsed())
    } else {
        None
    };
    let cpu_after = cpu_of(&under);
    let outside_after = outside();
    let host_after = host_cpu();
    let rv_after = list_revision(&pods).await;
    RunResult {
        nodes_ready,
        created: t_created,
        bound: t_bound,
        running: running_at,
        endpoints_ready,
        rss: under.rss(),
        cpu: std::array::from_fn(|i| cpu_after[i] - cpu_before[i]),
        host: (host_after.0 - host_before.0, host_after.1 - host_before.1),
        writes: rv_after
            .parse::<u64>()
            .unwrap_or(0)
            .saturating_sub(rv_before),
        outside: outside_after - outside_before,
    }
}

/// `1.23s`, or `-` for a time not observed.
fn seconds(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), |d| format!("{:.2}s", d.as_secs_f64()))
}

/// The median of times all observed (`None` if any was not).
fn median_of(times: impl Iterator<Item = Option<Duration>>) -> Option<Duration> {
    let times: Option<Vec<f64>> = times.map(|t| t.map(|d| d.as_secs_f64())).collect();
    times.map(|t| Duration::from_secs_f64(median(t)))
}

/// Whether `BENCH_WATCH=running` asks for the observer that sees only Running pods.
fn running_only() -> bool {
    std::env::var("BENCH_WATCH").is_ok_and(|v| v == "running")
}

fn main() {
    let node_count = env_or("BENCH_NODES", 1_000);
    let replicas = env_or("BENCH_REPLICAS", 10_000);
    let runs = env_or("BENCH_RUNS", 3).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "apply-to-Running bench: {node_count} nodes, a Deployment of {replicas}, {cores} cores, {runs} runs, {}, {}, loadavg {}",
        if one_process() {
            "one process (miniplane up)"
        } else {
            "four processes"
        },
        if running_only() {
            "watching Running pods only"
        } else {
            "watching every pod event"
        },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // One thread, like the client components: the bench's watch is one more client on the
    // same cores, and should take from them no more than it must.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The clusters compared (`BENCH_AUTHZ=compare`), or the one cluster.
    let variants: Vec<(&str, Vec<&str>)> =
        if std::env::var("BENCH_AUTHZ").is_ok_and(|v| v == "compare") {
            assert!(
                one_process(),
                "BENCH_AUTHZ=compare needs BENCH_PROCESSES=one"
            );
            vec![
                ("RBAC", vec![]),
                ("AlwaysAllow", vec!["--authorization-mode", "AlwaysAllow"]),
                ("insecure", vec!["--secure=false"]),
            ]
        } else {
            vec![("", vec![])]
        };
    let store_compare = std::env::var("BENCH_STORE").is_ok_and(|v| v == "compare");
    let variants = if store_compare {
        assert!(
            one_process(),
            "BENCH_STORE=compare needs BENCH_PROCESSES=one"
        );
        vec![
            ("embedded store", vec![]),
            ("etcd, 3 members", vec![]),
            ("etcd, 3 members, 2 API servers", vec![]),
        ]
    } else {
        variants
    };
    let mut results: Vec<Vec<RunResult>> = variants.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        for (v, (label, up_args)) in variants.iter().enumerate() {
            let latency = memory_latency_ns();
            let r = if store_compare && v > 0 {
                runtime.block_on(on_etcd(node_count, replicas, up_args, v == 2))
            } else {
                runtime.block_on(one_run(node_count, replicas, up_args, &|| 0.0))
            };
            let run = if label.is_empty() {
                format!("run {run}")
            } else {
                format!("run {run} {label}")
            };
            print_run(&run, &r, replicas, latency);
            results[v].push(r);
        }
    }
    for ((label, _), results) in variants.iter().zip(&results) {
        print_median(label, results, replicas);
    }
    if variants.len() > 1 && !store_compare {
        let per_pod = |r: &RunResult| r.cpu[..4].iter().sum::<f64>() / replicas as f64;
        for (v, (label, _)) in variants.iter().enumerate().filter(|(v, _)| *v != 1) {
            let ratios = results[v]
                .iter()
                .zip(&results[1])
                .map(|(a, b)| per_pod(a) / per_pod(b))
                .collect();
            println!(
                "{label} / AlwaysAllow, CPU per pod: {:.3} (median of the per-run ratios)",
                median(ratios)
            );
        }
    }
}

/// One run on a fresh 3-member etcd cluster (`up --etcd-servers`), with a second idle API
/// server on it when `second`; the members' and that server's CPU counted as outside.
async fn on_etcd(node_count: usize, replicas: usize, up_args: &[&str], second: bool) -> RunResult {
    let etcd = etcd_cluster::EtcdCluster::start(3).await;
    let endpoints = etcd.endpoints().join(",");
    let mut args = up_args.to_vec();
    args.extend(["--etcd-servers", &endpoints]);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let other = second.then(|| {
        spawn(
            &[
                "apiserver",
                "--data-dir",
                data,
                "--listen",
                "127.0.0.1:0",
                "--etcd-servers",
                &endpoints,
            ],
            "listening on",
        )
        .0
    });
    let pids: Vec<u32> = etcd
        .pids()
        .into_iter()
        .chain(other.as_ref().map(Proc::id))
        .collect();
    let outside = move || pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let r = one_run(node_count, replicas, &args, &outside).await;
    drop(other);
    drop(etcd);
    r
}

/// Prints one run's figures, each line starting with `run`.
fn print_run(run: &str, r: &RunResult, replicas: usize, latency: f64) {
    println!(
        "{run}: nodes Ready {:.2}s; pods created {}, bound {}, Running {:.2}s ({:.0} pods/s){}; {}",
        r.nodes_ready.as_secs_f64(),
        seconds(r.created),
        seconds(r.bound),
        r.running.as_secs_f64(),
        replicas as f64 / r.running.as_secs_f64(),
        r.endpoints_ready
            .map(|t| format!(", endpoints ready {:.2}s", t.as_secs_f64()))
            .unwrap_or_default(),
        rss_text(r.rss),
    );
    let per_pod = |s: f64| s * 1000.0 / replicas as f64;
    println!(
        "{run}: CPU during the apply: apiserver {:.1} s ({:.2} ms/pod), controller-manager {:.1} s ({:.2}), scheduler {:.1} s ({:.2}), kubelet {:.1} s ({:.2}); total {:.2} ms/pod (and this bench's watch {:.1} s)",
        r.cpu[0],
        per_pod(r.cpu[0]),
        r.cpu[1],
        per_pod(r.cpu[1]),
        r.cpu[2],
        per_pod(r.cpu[2]),
        r.cpu[3],
        per_pod(r.cpu[3]),
        per_pod(r.cpu[..4].iter().sum()),
        r.cpu[4],
    );
    if r.outside > 0.0 {
        println!(
            "{run}: CPU outside the cluster process (etcd members, a second API server): {:.1} s ({:.2} ms/pod); with it {:.2} ms/pod",
            r.outside,
            per_pod(r.outside),
            per_pod(r.cpu[..4].iter().sum::<f64>() + r.outside),
        );
    }
    println!(
        "{run}: store writes during the apply: {} ({:.1} per pod); host CPU time {:.1} s, of it stolen by the hypervisor {:.2} s ({:.1}%); host memory before the run: {latency:.0} ns per random read",
        r.writes,
        r.writes as f64 / replicas as f64,
        r.host.0,
        r.host.1,
        100.0 * r.host.1 / r.host.0.max(f64::MIN_POSITIVE),
    );
}

/// Prints the medians of `results` ("median" or "median <label>").
fn print_median(label: &str, results: &[RunResult], replicas: usize) {
    let m = |f: &dyn Fn(&RunResult) -> f64| median(results.iter().map(f).collect());
    let name = if label.is_empty() {
        "median".to_owned()
    } else {
        format!("median {label}")
    };
    println!(
        "{name}: nodes Ready {:.2}s; created {}, bound {}, all Running {:.2}s = {:.0} pods/s{}; CPU {:.2} ms/pod{}; {}",
        m(&|r| r.nodes_ready.as_secs_f64()),
        seconds(median_of(results.iter().map(|r| r.created))),
        seconds(median_of(results.iter().map(|r| r.bound))),
        m(&|r| r.running.as_secs_f64()),
        m(&|r| replicas as f64 / r.running.as_secs_f64()),
        median_of(results.iter().map(|r| r.endpoints_ready))
            .map(|t| format!(", endpoints ready {:.2}s", t.as_secs_f64()))
            .unwrap_or_default(),
        m(&|r| r.cpu[..4].iter().sum::<f64>() * 1000.0 / replicas as f64),
        if results.iter().any(|r| r.outside > 0.0) {
            format!(
                " (+ {:.2} ms/pod outside the cluster process)",
                m(&|r| r.outside * 1000.0 / replicas as f64)
            )
        } else {
            String::new()
        },
        rss_text(std::array::from_fn(|i| {
            results[0].rss[i].map(|_| m(&|r| r.rss[i].unwrap_or(0.0)))
        })),
    );
}

/// "peak RSS apiserver … MiB, controller-manager …, scheduler …, kubelet …", or the one
/// process's.
fn rss_text(rss: [Option<f64>; 4]) -> String {
    match rss {
        [Some(api), Some(cm), Some(scheduler), Some(kubelet)] => format!(
            "peak RSS apiserver {api:.0} MiB, controller-manager {cm:.0}, scheduler {scheduler:.0}, kubelet {kubelet:.0}"
        ),
        [Some(all), ..] => format!("peak RSS {all:.0} MiB (one process)"),
        _ => "peak RSS unknown".to_owned(),
    }
}

/// The mean time of one dependent read at a random place in 64 MiB, in nanoseconds: a chase
/// through the 64-byte lines of a buffer far larger than the caches, linked in a random cycle
/// (each read's address comes from the one before, so they cannot overlap; TLB misses are
/// part of it, as they are of the components' work).
fn memory_latency_ns() -> f64 {
    const LINES: usize = 1 << 20; // 64 MiB of 64-byte lines
    let mut lines = vec![[0u32; 16]; LINES];
    // A random order of the lines (Fisher-Yates with a fixed-seed xorshift: the same order in
    // every run), linked in a cycle: each line holds the index of the next.
    let mut order: Vec<u32> = (0..LINES as u32).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..LINES).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for k in 0..LINES {
        lines[order[k] as usize][0] = order[(k + 1) % LINES];
    }
    let mut at = order[0] as usize;
    let started = Instant::now();
    for _ in 0..LINES {
        at = lines[at][0] as usize;
    }
    let elapsed = started.elapsed();
    std::hint::black_box(at);
    elapsed.as_nanos() as f64 / LINES as f64
}

/// The machine's CPU time so far from the first line of `/proc/stat` (user, nice, system,
/// idle, iowait, irq, softirq, steal; in `USER_HZ` = 100 ticks per second): (all, steal) in
/// seconds. Zeros where `/proc/stat` cannot be read.
fn host_cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|t| t.parse().ok())
        .collect();
    let steal = ticks.get(7).copied().unwrap_or(0.0);
    (ticks.iter().sum::<f64>() / 100.0, steal / 100.0)
}

/// Waits until the EndpointSlices of Service `name` list `count` ready endpoints, from a list
/// and then a watch of them (the watch resumed when the server ends it).
async fn wait_for_ready_endpoints(client: &Client, name: &str, count: usize) {
    use std::collections::HashMap;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let selector = format!("kubernetes.io/service-name={name}");
    let ready = |s: &EndpointSlice| {
        s.endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count()
    };
    let list = slices
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    let mut by_slice: HashMap<String, usize> = list
        .items
        .iter()
        .map(|s| (s.metadata.name.clone().unwrap_or_default(), ready(s)))
        .collect();
    let mut rv = list.metadata.resource_version.unwrap_or_default();
    while by_slice.values().sum::<usize>() < count {
        let params = WatchParams::default().labels(&selector).timeout(290);
        let mut stream = slices.watch(&params, &rv).await.unwrap().boxed();
        while by_slice.values().sum::<usize>() < count {
            let event = tokio::time::timeout(Duration::from_secs(300), stream.try_next())
                .await
                .expect("no EndpointSlice event for 300 s")
                .expect("EndpointSlice watch failed");
            match event {
                Some(WatchEvent::Added(s) | WatchEvent::Modified(s)) => {
                    rv = s.metadata.resource_version.clone().unwrap_or(rv);
                    by_slice.insert(s.metadata.name.clone().unwrap_or_default(), ready(&s));
                }
                Some(WatchEvent::Deleted(s)) => {
                    rv = s.metadata.resource_version.clone().unwrap_or(rv);
                    by_slice.remove(&s.metadata.name.clone().unwrap_or_default());
                }
                Some(WatchEvent::Error(e)) => panic!("EndpointSlice watch error: {e:?}"),
                Some(WatchEvent::Bookmark(_)) => {}
                None => break,
            }
        }
    }
}

/// The resourceVersion of a one-item list of `pods`: the store's current revision.
async fn list_revision(pods: &Api<Pod>) -> String {
    pods.list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}
