//! API server benchmark: latency and throughput of create, get and list over real loopback
//! HTTP/1.1 keep-alive connections, and watch delivery latency to 100 watchers.
//!
//! Run with `cargo bench -p apiserver` (`MINIPLANE_BENCH_FSYNC=0` for a store without fsync,
//! `MINIPLANE_BENCH_QUICK=1` for a short smoke run, `MINIPLANE_BENCH_OPS=create,get` to measure
//! only some rows — `create`, `get`, `list`, `list-page`, `watch` — e.g. under a profiler;
//! `MINIPLANE_BENCH_STALLS=1` to print the pauses in which no response completed, see
//! [`Stalls`]). The server runs in this process on a real socket, over the durable
//! `store::Store` in a temporary directory; clients are plain hyper HTTP/1.1 connections (one
//! per concurrent client) sending pre-serialized JSON, so the client side costs as little CPU
//! as possible on a machine where it shares the cores with the server.
//!
//! ```text
//!   seed 10k ConfigMaps ─▶ for c in [1, 16, 64]: create / get / list?limit=500  ×RUNS
//!   100 watchers on one namespace ─▶ sequential writes ─▶ write→event latency
//! ```
//!
//! Every figure is the median over `RUNS` runs; latencies are per request, measured by the
//! client from send to the last body byte; CPU/req is the whole process's CPU time (server and
//! clients) over the measurement divided by its requests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Objects stored before measuring.
const SEED: usize = 10_000;
/// Repetitions of each measurement; the median is reported.
const RUNS: usize = 3;
const CONCURRENCY: [usize; 3] = [1, 16, 64];
const WATCHERS: usize = 100;
/// Holds the 10k seeded objects that get and list read.
const NAMESPACE: &str = "bench";
/// Where the measured creates go, so that lists keep reading exactly the seeded objects.
const CREATE_NAMESPACE: &str = "bench-create";

/// The allocator the `miniplane` binary uses (`ctl/src/main.rs`), so the figures are the
/// binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Sender = http1::SendRequest<Full<Bytes>>;

/// One keep-alive HTTP/1.1 connection.
async fn connect(addr: SocketAddr) -> Sender {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

fn request(method: &str, path: &str, body: Option<Bytes>) -> hyper::Request<Full<Bytes>> {
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1")
        .header("accept", "application/json");
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    req.body(Full::new(body.unwrap_or_default())).unwrap()
}

/// Sends a request and reads the whole body; returns the status and the latency.
async fn send(sender: &mut Sender, req: hyper::Request<Full<Bytes>>) -> (u16, Duration) {
    let start = Instant::now();
    sender.ready().await.unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await.unwrap();
    (status, start.elapsed())
}

fn configmap(name: &str) -> Bytes {
    // About the size of a small real ConfigMap (~300 bytes of data).
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": "bench", "shard": (name.len() % 7).to_string()}},
            "data": {"config.yaml": "x".repeat(256)}
        })
        .to_string(),
    )
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    Get,
    List,
    ListPage,
}

impl Op {
    /// The name `MINIPLANE_BENCH_OPS` selects the row by.
    fn key(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Get => "get",
            Op::List => "list",
            Op::ListPage => "list-page",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Get => "get",
            Op::List => "list (limit=500)",
            Op::ListPage => "list (limit=10)",
        }
    }

    /// Requests one measurement sends at `concurrency`.
    fn requests(self, concurrency: usize, quick: bool) -> usize {
        let base = match self {
            Op::Create | Op::Get => 2_000 + 100 * concurrency,
            Op::List => 20 + 2 * concurrency,
            Op::ListPage => 50 + 2 * concurrency,
        };
        if quick { base / 10 } else { base }
    }
}

struct Measurement {
    throughput: f64,
    p50: Duration,
    p99: Duration,
    /// CPU time of the whole process (server and clients) per request.
    cpu_per_request: Duration,
    /// Pauses in which no request completed.
    stalls: Stalls,
}

/// Pauses in which no response completed: at thousands of requests per second the gap between
/// two completions is ~0.1 ms, so a gap of milliseconds is a stall of the whole pipeline (a
/// slow `fdatasync`, the process descheduled) rather than queueing, and it delays every
/// request in flight. `MINIPLANE_BENCH_STALLS=1` prints them, to tell a tail made by stalls
/// from one made by CPU per request.
#[derive(Clone, Copy, Default)]
struct Stalls {
    /// Gaps of more than [`Stalls::MIN`].
    count: usize,
    /// Their total length.
    total: Duration,
    /// The longest gap.
    longest: Duration,
}

impl Stalls {
    const MIN: Duration = Duration::from_millis(3);

    /// The stalls between sorted completion times.
    fn of(completions: &[Duration]) -> Stalls {
        let mut s = Stalls::default();
        for gap in completions.windows(2).map(|w| w[1] - w[0]) {
            if gap > Self::MIN {
                s.count += 1;
                s.total += gap;
                s.longest = s.longest.max(gap);
            }
        }
        s
    }
}

/// CPU time used so far by this process's live threads (`/proc/self/task/*/schedstat`, first
/// field, in ns). Unlike wall-clock figures it barely moves with other work on the machine, so it
/// compares runs taken at different loads. Threads that exited are not counted: the server's
/// threads (tokio workers, the store's committer) live for the whole run.
fn process_cpu() -> Duration {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(ns)
}

/// Runs `total` requests of `op` from `concurrency` connections.
async fn measure(
    addr: SocketAddr,
    op: Op,
    concurrency: usize,
    total: usize,
    run: usize,
) -> Measurement {
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..concurrency {
        senders.push(connect(addr).await);
    }
    let cpu_start = process_cpu();
    let start = Instant::now();
    for (c, mut sender) in senders.into_iter().enumerate() {
        let next = next.clone();
        clients.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let req = match op {
                    Op::Create => {
                        let name = format!("r{run}-c{concurrency}-{c}-{i}");
                        request(
                            "POST",
                            &format!("/api/v1/namespaces/{CREATE_NAMESPACE}/configmaps"),
                            Some(configmap(&name)),
                        )
                    }
                    Op::Get => {
                        let n = (i * 7919) % SEED;
                        request(
                            "GET",
                            &format!("/api/v1/namespaces/{NAMESPACE}/configmaps/seed-{n}"),
                            None,
                        )
                    }
                    Op::List => request(
                        "GET",
                        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps?limit=500"),
                        None,
                    ),
                    Op::ListPage => request(
                        "GET",
                        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps?limit=10"),
                        None,
                    ),
                };
                let (status, latency) = send(&mut sender, req).await;
                let expected = if matches!(op, Op::Create) { 201 } else { 200 };
                assert_eq!(status, expected, "{} returned {status}", op.name());
                latencies.push((latency, start.elapsed()));
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    let mut completions = Vec::new();
    for c in clients {
        for (latency, done) in c.await.unwrap() {
            latencies.push(latency);
            completions.push(done);
        }
    }
    let elapsed = start.elapsed();
    let cpu = process_cpu().saturating_sub(cpu_start);
    latencies.sort();
    completions.sort();
    Measurement {
        stalls: Stalls::of(&completions),
        throughput: total as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu_per_request: cpu / total.max(1) as u32,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn median_d(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// Stores `SEED` ConfigMaps named `seed-<n>` with 64 connections; returns the rate.
async fn seed(addr: SocketAddr) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let next = next.clone();
        let mut sender = connect(addr).await;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= SEED {
                    break;
                }
                let req = request(
                    "POST",
                    &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"),
                    Some(configmap(&format!("seed-{i}"))),
                );
                let (status, _) = send(&mut sender, req).await;
                assert_eq!(status, 201);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    SEED as f64 / start.elapsed().as_secs_f64()
}

/// Opens `WATCHERS` watches on namespace `watch`, performs `writes` sequential updates and
/// returns the write→event delivery latencies over every (write, watcher) pair.
async fn watch_latency(addr: SocketAddr, writes: usize) -> (Vec<Duration>, usize) {
    let mut sender = connect(addr).await;
    let (status, _) = send(
        &mut sender,
        request(
            "POST",
            "/api/v1/namespaces",
            Some(Bytes::from(
                r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"watch"}}"#,
            )),
        ),
    )
    .await;
    assert!(status == 201 || status == 409, "create namespace: {status}");
    let (status, _) = send(
        &mut sender,
        request(
            "POST",
            "/api/v1/namespaces/watch/configmaps",
            Some(configmap("target")),
        ),
    )
    .await;
    assert_eq!(status, 201);
    sender.ready().await.unwrap();
    let resp = sender
        .send_request(request("GET", "/api/v1/namespaces/watch/configmaps", None))
        .await
        .unwrap();
    let list: serde_json::Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    // Each watcher returns (sequence number, when) for every event it saw.
    let sent_at: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
    let ready = Arc::new(tokio::sync::Barrier::new(WATCHERS + 1));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let ready = ready.clone();
        let path = format!("/api/v1/namespaces/watch/configmaps?watch=1&resourceVersion={rv}");
        watchers.push(tokio::spawn(async move {
            let mut sender = connect(addr).await;
            sender.ready().await.unwrap();
            let resp = sender
                .send_request(request("GET", &path, None))
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            ready.wait().await;
            let mut body = resp.into_body();
            let mut pending = Vec::new();
            let mut seen = Vec::new();
            while seen.len() < writes {
                let Some(frame) = body.frame().await else {
                    break;
                };
                let Ok(data) = frame.unwrap().into_data() else {
                    continue;
                };
                let now = Instant::now();
                pending.extend_from_slice(&data);
                while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=pos).collect();
                    let event: serde_json::Value = serde_json::from_slice(&line).unwrap();
                    if event["type"] == "MODIFIED"
                        && let Some(seq) = event["object"]["data"]["seq"].as_str()
                    {
                        seen.push((seq.parse::<usize>().unwrap(), now));
                    }
                }
            }
            seen
        }));
    }
    ready.wait().await;
    for seq in 0..writes {
        let patch = format!(r#"{{"data":{{"seq":"{seq}"}}}}"#);
        let req = hyper::Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/watch/configmaps/target")
            .header("host", "127.0.0.1")
            .header("content-type", "application/merge-patch+json")
            .body(Full::new(Bytes::from(patch)))
            .unwrap();
        sent_at.lock().unwrap().push(Instant::now());
        let (status, _) = send(&mut sender, req).await;
        assert_eq!(status, 200);
    }
    let sent = sent_at.lock().unwrap().clone();
    let mut latencies = Vec::new();
    let mut missing = 0;
    for w in watchers {
        let seen = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("watchers receive every event within 60 s")
            .unwrap();
        missing += writes - seen.len();
        for (seq, at) in seen {
            latencies.push(at.saturating_duration_since(sent[seq]));
        }
    }
    latencies.sort();
    (latencies, missing)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Whether `MINIPLANE_BENCH_OPS` (comma-separated; all rows when unset) selects `key`.
fn selected(key: &str) -> bool {
    match std::env::var("MINIPLANE_BENCH_OPS") {
        Ok(ops) if !ops.trim().is_empty() => ops.split(',').any(|o| o.trim() == key),
        _ => true,
    }
}

fn main() {
    let quick = std::env::var("MINIPLANE_BENCH_QUICK").is_ok_and(|v| v == "1");
    let fsync = !std::env::var("MINIPLANE_BENCH_FSYNC").is_ok_and(|v| v == "0");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(cores, fsync, quick));
}

async fn bench(cores: usize, fsync: bool, quick: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store::StoreConfig::new(dir.path().join("store"));
    config.fsync = fsync;
    let backend: Arc<dyn store::Backend> = Arc::new(store::Store::open(config).await.unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(apiserver::serve(listener, backend, shutdown.clone()));

    println!("miniplane API server benchmark");
    println!("cores: {cores}, cpu: {}", cpu_model());
    println!(
        "store: durable store::Store ({}), in-process server on {addr}, HTTP/1.1 keep-alive",
        if fsync { "fsync on" } else { "fsync off" }
    );
    let mut sender = connect(addr).await;
    for ns in [NAMESPACE, CREATE_NAMESPACE] {
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
        let req = request("POST", "/api/v1/namespaces", Some(Bytes::from(body)));
        let (status, _) = send(&mut sender, req).await;
        assert_eq!(status, 201, "create namespace {ns}");
    }
    let rate = seed(addr).await;
    println!("seeded {SEED} ConfigMaps at {rate:.0}/s (64 clients)");
    println!();
    println!("| op | clients | throughput (req/s) | p50 (ms) | p99 (ms) | CPU/req (µs) |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for op in [Op::Create, Op::Get, Op::List, Op::ListPage] {
        if !selected(op.key()) {
            continue;
        }
        for c in CONCURRENCY {
            let mut tput = Vec::new();
            let mut p50 = Vec::new();
            let mut p99 = Vec::new();
            let mut cpu = Vec::new();
            let mut stalls = Vec::new();
            for run in 0..RUNS {
                let m = measure(addr, op, c, op.requests(c, quick), run).await;
                stalls.push(m.stalls);
                tput.push(m.throughput);
                p50.push(m.p50);
                p99.push(m.p99);
                cpu.push(m.cpu_per_request);
            }
            println!(
                "| {} | {c} | {:.0} | {} | {} | {:.0} |",
                op.name(),
                median_f64(tput),
                ms(median_d(p50)),
                ms(median_d(p99)),
                median_d(cpu).as_secs_f64() * 1e6
            );
            if std::env::var("MINIPLANE_BENCH_STALLS").is_ok_and(|v| v == "1") {
                let runs: Vec<String> = stalls
                    .iter()
                    .map(|s| {
                        format!(
                            "{} totalling {} ms, longest {} ms",
                            s.count,
                            ms(s.total),
                            ms(s.longest)
                        )
                    })
                    .collect();
                println!(
                    "  stalls > {} ms with no response, per run: {}",
                    Stalls::MIN.as_millis(),
                    runs.join("; ")
                );
            }
        }
    }
    if !selected("watch") {
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(20), server).await;
        return;
    }
    let writes = if quick { 20 } else { 200 };
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    let mut missing = 0;
    for _ in 0..RUNS {
        let (lat, miss) = watch_latency(addr, writes).await;
        missing += miss;
        p50.push(percentile(&lat, 0.50));
        p99.push(percentile(&lat, 0.99));
        // The next run's namespace/target already exist: use fresh ones.
        let mut s = connect(addr).await;
        let _ = send(
            &mut s,
            request("DELETE", "/api/v1/namespaces/watch/configmaps/target", None),
        )
        .await;
    }
    println!();
    println!(
        "watch delivery, {WATCHERS} watchers × {writes} sequential writes: p50 {} ms, p99 {} ms, missed events {missing}",
        ms(median_d(p50)),
        ms(median_d(p99))
    );
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), server).await;
}
