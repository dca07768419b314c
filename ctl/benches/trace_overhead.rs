//! What tracing costs: the time from creating a Deployment to all its pods `Running`, with
//! every component tracing (the default) and with `--tracing=false` everywhere.
//!
//! API server (durable store, fsync on), controller-manager, scheduler and 3 simulated nodes
//! run in this process on one tokio runtime, as `miniplane up` runs them; each run starts from
//! an empty data directory. Runs alternate on/off so that drift (other work on the machine)
//! hits both modes alike; the medians are printed.
//!
//! ```text
//!   cargo bench -p ctl --bench trace_overhead
//!   BENCH_CASES=3:15,100:5 cargo bench -p ctl --bench trace_overhead   # replicas:runs per mode
//!   BENCH_TRACING=apiserver cargo bench ...   # "on" traces only in the API server
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use controllers::manager::{ApiServer, Config};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

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

/// One cluster, one Deployment: seconds from the create to `replicas` Running pods, and the
/// spans the collector holds then.
async fn run_once(replicas: i32, tracing: bool) -> (f64, usize) {
    // Which components trace in the "on" runs: all of them, or only the API server.
    let components = tracing && std::env::var("BENCH_TRACING").as_deref() != Ok("apiserver");
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let server = apiserver::Server::bind(apiserver::Config {
        data_dir: dir.path().join("data"),
        listen: "127.0.0.1:0".parse().unwrap(),
        no_fsync: false,
        store_history_budget: Some(apiserver::DEFAULT_STORE_HISTORY_BUDGET),
        store_history: apiserver::HistoryRetention::default(),
        etcd: None,
        options: apiserver::ServerOptions {
            tracing: apiserver::TracingOptions {
                enabled: tracing,
                ..Default::default()
            },
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let url = format!("http://{}", server.local_addr().unwrap());
    let mut tasks = tokio::task::JoinSet::new();
    let api_stop = stop.clone();
    tasks.spawn(async move {
        let _ = server.run(api_stop).await;
    });
    let source = || client::ClusterSource::Url(url.clone());
    let mut cm = Config::new(ApiServer::Master(url.clone()));
    cm.tracing = components;
    let cm_stop = stop.clone();
    tasks.spawn(async move {
        let _ = controllers::manager::run(cm, cm_stop).await;
    });
    let sched = scheduler::Config {
        client: client::ClientConfig::new(source()).tracing(components),
        scheduler_name: "default-scheduler".into(),
        listener: None,
        seed: 1,
        clock: None,
        leader_election: None,
    };
    let sched_stop = stop.clone();
    tasks.spawn(async move {
        let _ = scheduler::run(sched, sched_stop).await;
    });
    let mut kubelet = kubelet_sim::Config::new(source(), 3);
    kubelet.tracing = components;
    let sim = kubelet_sim::Simulator::bind(kubelet).await.unwrap();
    let handle = sim.handle();
    let sim_stop = stop.clone();
    tasks.spawn(async move {
        let _ = sim.run(sim_stop).await;
    });
    assert!(handle.wait_registered().await);

    let client = client::build_client(&client::ClientConfig::new(source()))
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(replicas))
        .await
        .unwrap();
    loop {
        let list = pods
            .list(&ListParams::default().labels("app=bench"))
            .await
            .unwrap();
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running >= replicas as usize {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seconds = start.elapsed().as_secs_f64();
    // Let the exporters deliver, then count what the collector keeps.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats: serde_json::Value = serde_json::from_str(
        &client
            .request_text(
                http::Request::get("/miniplane/v1/traces?limit=1")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let spans = stats["stats"]["stored"].as_u64().unwrap_or(0) as usize;
    stop.cancel();
    let joined = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tasks.abort_all();
    }
    (seconds, spans)
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
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!("trace overhead: apply to all pods Running, {cores} cores");
    println!(
        "| replicas | runs per mode | tracing off (median ms) | tracing on (median ms) | difference | spans kept (on) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    let spec = std::env::var("BENCH_CASES").unwrap_or_else(|_| "3:15,100:5".into());
    for case in spec.split(',') {
        let mut parts = case.split(':');
        let (Some(Ok(replicas)), Some(Ok(runs))) = (
            parts.next().map(str::parse::<i32>),
            parts.next().map(str::parse::<usize>),
        ) else {
            eprintln!("BENCH_CASES: want replicas:runs, got {case:?}");
            continue;
        };
        let (mut off, mut on, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            off.push(runtime.block_on(run_once(replicas, false)).0);
            let (seconds, kept) = runtime.block_on(run_once(replicas, true));
            on.push(seconds);
            spans.push(kept as f64);
        }
        let (off, on) = (median(off) * 1e3, median(on) * 1e3);
        println!(
            "| {replicas} | {runs} | {off:.1} | {on:.1} | {:+.1}% | {:.0} |",
            (on - off) / off * 100.0,
            median(spans)
        );
    }
}
