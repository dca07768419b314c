//! What the streaming verbs cost the cluster, on 100 simulated nodes:
//!
//! * `logs`: 100 pods each printing 10 lines a second, and 100 `kubectl logs -f` at once
//!   (kube-rs `log_stream` with `follow`): lines received per second, and the API server's and
//!   the kubelet simulator's CPU (cores) and resident memory beside the same window without
//!   the streams;
//! * `exec`: 1,000 interactive exec sessions at once (WebSocket `v5.channel.k8s.io`, stdin and
//!   a TTY, 10 per pod): the time to open them all, the memory they hold open, the CPU while
//!   they sit idle, then one `echo` round trip on each (median and 99th percentile), and every
//!   tunnel closed afterwards (`apiserver_longrunning_requests` back to 0);
//! * `metrics`: 10,000 pods and a scrape of every node's `/metrics/resource` every 15 s, as
//!   metrics-server does: the kubelet simulator's CPU per scrape round and the bytes read.
//!
//! Run with `cargo bench -p ctl --bench streams` (`MINIPLANE_BENCH_STREAMS=logs,exec,metrics`
//! picks some). One run: a fresh `miniplane apiserver --no-fsync`, `kubelet --nodes 100`,
//! `scheduler` and `controller-manager` as child processes (release build).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt as _, SinkExt as _, StreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, LogParams, PostParams};
use kube::{Api, Client};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/process.rs"]
mod process;
use process::{cpu_seconds, rss_mib};

const NODES: usize = 100;

type Cluster = cluster::Processes;

/// Creates Deployment `name` of `replicas` and waits until they are all available.
async fn deploy(client: &Client, name: &str, replicas: usize, annotations: serde_json::Value) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"containers": [{"name": "app", "image": "nginx",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
            }
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    loop {
        let d = api.get(name).await.unwrap();
        if d.status.and_then(|s| s.available_replicas) == Some(replicas as i32) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn pod_names(client: &Client, app: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// CPU (cores) of the API server and the kubelet simulator over `window`, while `during`
/// runs alongside.
async fn cpu_over(c: &Cluster, window: Duration) -> (f64, f64) {
    let (a0, k0) = (cpu_seconds(c.api.id()), cpu_seconds(c.kubelet.id()));
    tokio::time::sleep(window).await;
    let secs = window.as_secs_f64();
    (
        (cpu_seconds(c.api.id()) - a0) / secs,
        (cpu_seconds(c.kubelet.id()) - k0) / secs,
    )
}

fn rss(c: &Cluster) -> (f64, f64) {
    (rss_mib(c.api.id()), rss_mib(c.kubelet.id()))
}

async fn logs(c: &Cluster) {
    println!("logs: 100 pods printing 10 lines/s, 100 followers");
    deploy(
        &c.client,
        "talker",
        100,
        serde_json::json!({"miniplane.dev/log-lines": "GET / HTTP/1.1 200", "miniplane.dev/log-rate": "10/s"}),
    )
    .await;
    let window = Duration::from_secs(20);
    let (idle_api, idle_kubelet) = cpu_over(c, window).await;
    let (rss_api0, rss_kubelet0) = rss(c);
    let lines = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for name in pod_names(&c.client, "talker").await {
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
        let (lines, stop) = (lines.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let params = LogParams {
                follow: true,
                tail_lines: Some(0),
                ..LogParams::default()
            };
            let stream = pods.log_stream(&name, &params).await.unwrap();
            let mut stream = stream.lines();
            loop {
                tokio::select! {
                    next = stream.next() => match next {
                        Some(Ok(_)) => { lines.fetch_add(1, std::sync::atomic::Ordering::Relaxed); }
                        _ => return,
                    },
                    () = stop.cancelled() => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = lines.load(std::sync::atomic::Ordering::Relaxed);
    let (api, kubelet) = cpu_over(c, window).await;
    let got = lines.load(std::sync::atomic::Ordering::Relaxed) - before;
    let (rss_api, rss_kubelet) = rss(c);
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "  {:.0} lines/s received (1,000 printed per second)",
        got as f64 / window.as_secs_f64()
    );
    println!(
        "  API server: {:.3} cores with the followers, {idle_api:.3} without; RSS {rss_api:.0} MiB ({:+.1})",
        api,
        rss_api - rss_api0
    );
    println!(
        "  kubelet simulator: {:.3} cores with the followers, {idle_kubelet:.3} without; RSS {rss_kubelet:.0} MiB ({:+.1})",
        kubelet,
        rss_kubelet - rss_kubelet0
    );
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open_shell(url: &str, pod: &str) -> Ws {
    let target = format!(
        "{}/api/v1/namespaces/default/pods/{pod}/exec?command=sh&stdin=true&stdout=true&tty=true",
        url.replacen("http://", "ws://", 1)
    );
    let mut req = target.into_client_request().unwrap();
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "v5.channel.k8s.io".parse().unwrap(),
    );
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws
}

/// Sends `echo hi` on stdin and waits until `hi` comes back on stdout (after the echo of the
/// command line itself).
async fn round_trip(ws: &mut Ws) -> Duration {
    let t0 = Instant::now();
    let mut frame = vec![0u8];
    frame.extend_from_slice(b"echo ping-pong\n");
    ws.send(Message::binary(frame)).await.unwrap();
    let mut seen = String::new();
    while seen.matches("ping-pong").count() < 2 {
        match ws.next().await {
            Some(Ok(Message::Binary(b))) if b.first() == Some(&1) => {
                seen.push_str(&String::from_utf8_lossy(&b[1..]));
            }
            Some(Ok(_)) => {}
            other => panic!("session ended: {other:?}"),
        }
    }
    t0.elapsed()
}

async fn open_tunnels(c: &Cluster) -> u64 {
    let text = c
        .client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn exec(c: &Cluster) {
    println!("exec: 1,000 interactive sessions (10 per pod)");
    deploy(&c.client, "shells", 100, serde_json::json!({})).await;
    let pods = pod_names(&c.client, "shells").await;
    let (rss_api0, rss_kubelet0) = rss(c);
    let t0 = Instant::now();
    let targets: Vec<String> = (0..1000).map(|i| pods[i % pods.len()].clone()).collect();
    let mut sessions: Vec<Ws> = futures::stream::iter(targets)
        .map(|pod| {
            let url = c.url.clone();
            async move { open_shell(&url, &pod).await }
        })
        .buffer_unordered(100)
        .collect()
        .await;
    let opened = t0.elapsed();
    let open_now = open_tunnels(c).await;
    let (rss_api, rss_kubelet) = rss(c);
    let (idle_api, idle_kubelet) = cpu_over(c, Duration::from_secs(10)).await;
    let mut times = Vec::new();
    for chunk in sessions.chunks_mut(100) {
        let round: Vec<Duration> =
            futures::future::join_all(chunk.iter_mut().map(round_trip)).await;
        times.extend(round);
    }
    times.sort();
    for ws in &mut sessions {
        let _ = ws.close(None).await;
    }
    drop(sessions);
    let closed_after = Instant::now();
    while open_tunnels(c).await > 0 && closed_after.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "  opened 1,000 in {:.2} s ({open_now} tunnels counted by the API server)",
        opened.as_secs_f64()
    );
    println!(
        "  held open: API server RSS {rss_api:.0} MiB ({:+.1}, {:.1} KiB per session), kubelet simulator {rss_kubelet:.0} MiB ({:+.1}, {:.1} KiB per session)",
        rss_api - rss_api0,
        (rss_api - rss_api0) * 1024.0 / 1000.0,
        rss_kubelet - rss_kubelet0,
        (rss_kubelet - rss_kubelet0) * 1024.0 / 1000.0,
    );
    println!(
        "  idle CPU with 1,000 open: API server {idle_api:.3} cores, kubelet simulator {idle_kubelet:.3}"
    );
    println!(
        "  echo round trip, 100 at a time: median {:.1} ms, p99 {:.1} ms",
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() * 99 / 100].as_secs_f64() * 1000.0
    );
    println!(
        "  tunnels open {:.1} s after the clients closed: {}",
        closed_after.elapsed().as_secs_f64(),
        open_tunnels(c).await
    );
}

/// One metrics-server round: `/metrics/resource` of every node, straight from its kubelet.
async fn scrape(nodes: &[(String, u16)]) -> usize {
    let mut bytes = 0;
    for (name, port) in nodes {
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", *port))
            .await
            .unwrap();
        let req = format!(
            "GET /metrics/resource HTTP/1.1\r\nHost: {name}:{port}\r\nConnection: close\r\n\r\n"
        );
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut body = Vec::new();
        tcp.read_to_end(&mut body).await.unwrap();
        assert!(
            body.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
        bytes += body.len();
    }
    bytes
}

async fn metrics(c: &Cluster) {
    println!("metrics: 10,000 pods, every node's /metrics/resource every 15 s");
    deploy(&c.client, "fleet", 10_000, serde_json::json!({})).await;
    let node_api: Api<Node> = Api::all(c.client.clone());
    let nodes: Vec<(String, u16)> = node_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let port = n
                .status
                .and_then(|s| s.daemon_endpoints)
                .and_then(|d| d.kubelet_endpoint)
                .map(|e| e.port)
                .unwrap_or(0);
            (n.metadata.name.unwrap_or_default(), port as u16)
        })
        .collect();
    let (idle_api, idle_kubelet) = cpu_over(c, Duration::from_secs(15)).await;
    let rounds = 4;
    let mut per_round = Vec::new();
    let mut bytes = 0;
    let t0 = Instant::now();
    for i in 0..rounds {
        let k0 = cpu_seconds(c.kubelet.id());
        let started = Instant::now();
        bytes = scrape(&nodes).await;
        per_round.push((cpu_seconds(c.kubelet.id()) - k0, started.elapsed()));
        let next = Duration::from_secs(15 * (i + 1));
        if let Some(wait) = next.checked_sub(t0.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    let kubelet_total: f64 = per_round.iter().map(|(cpu, _)| cpu).sum();
    let mut cpus: Vec<f64> = per_round.iter().map(|(cpu, _)| *cpu).collect();
    cpus.sort_by(|a, b| a.total_cmp(b));
    let mut walls: Vec<Duration> = per_round.iter().map(|(_, w)| *w).collect();
    walls.sort();
    println!(
        "  one round ({} nodes, {:.1} MiB of text): kubelet simulator CPU median {:.3} s, wall median {:.2} s",
        nodes.len(),
        bytes as f64 / (1024.0 * 1024.0),
        cpus[cpus.len() / 2],
        walls[walls.len() / 2].as_secs_f64()
    );
    println!(
        "  every 15 s: {:.3} cores on average for the scrapes; at rest with 10,000 pods: kubelet simulator {idle_kubelet:.3} cores, API server {idle_api:.3}",
        kubelet_total / t0.elapsed().as_secs_f64()
    );
    let (rss_api, rss_kubelet) = rss(c);
    println!(
        "  RSS with 10,000 pods: API server {rss_api:.0} MiB, kubelet simulator {rss_kubelet:.0} MiB"
    );
}

#[tokio::main]
async fn main() {
    let which =
        std::env::var("MINIPLANE_BENCH_STREAMS").unwrap_or_else(|_| "logs,exec,metrics".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("streams: {NODES} simulated nodes, {cores} cores");
    let c = cluster::start(NODES, "deployment,replicaset,serviceaccount").await;
    for part in which.split(',') {
        match part.trim() {
            "logs" => logs(&c).await,
            "exec" => exec(&c).await,
            "metrics" => metrics(&c).await,
            other => panic!("unknown workload {other:?} (logs, exec, metrics)"),
        }
    }
}
