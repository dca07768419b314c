//! Store benchmark (`cargo bench -p store`): durable put throughput and latency at several
//! writer counts, ranges, put-to-event watch latency, an object's history (`history.rs`),
//! snapshots (`snapshot.rs`) and total watch fan-out, each row run on miniplane's store called
//! in process, on the same store behind its etcd v3 gRPC endpoint (`store-grpc`, on loopback,
//! in a process of its own: `endpoint.rs`) and, beside them in the same run, on a real etcd
//! member when the `etcd` binary is installed (Debian's
//! `etcd-server`; see `etcd.rs`). The two gRPC columns are the fair comparison: the same
//! `etcd-client` load generator, the same requests, both servers started the same way on the
//! same cores (`STORE_BENCH_GRPC=off` leaves the endpoint's column out). `STORE_BENCH_PIN=1`
//! puts the servers on core 0 and the load generator on core 1 (`pin.rs`); unset, they share
//! every core.
//!
//! Every figure is the median of `RUNS` runs. Writes are durable (fsync on) unless said
//! otherwise. The data directories are under `STORE_BENCH_DIR` or the system temp dir; the
//! table header says which filesystem that is (tmpfs would make fsync free and the figures
//! worthless). `STORE_BENCH_ETCD` names the etcd binary, or `off` leaves its column out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod endpoint;
mod etcd;
mod history;
mod pin;
mod snapshot;
mod subject;

use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use store::{Backend, RangeRequest, Store, StoreConfig};
use subject::{Side, Subject};

const RUNS: usize = 5;
const VALUE: usize = 256;

fn main() {
    if endpoint::serve_if_asked() {
        return;
    }
    // The machine's cores, counted before this process is pinned to one of them.
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    pin::pin_load_generator();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(cores));
}

fn bench_root() -> PathBuf {
    std::env::var_os("STORE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

/// The filesystem type `path` lives on, from /proc/mounts (longest matching mount point).
fn filesystem(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && path.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} ({} on {})", f[2], f[0], f[1])))
        })
        .max()
        .map_or_else(|| "unknown".into(), |(_, s)| s)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The disk floor right now: 300 B appended + fdatasync, 300 times, in the bench directory.
fn fdatasync_floor() -> (Duration, Duration) {
    use std::io::Write;
    let dir = tempfile::tempdir_in(bench_root()).unwrap();
    let mut file = std::fs::File::create(dir.path().join("probe")).unwrap();
    let mut lat = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        file.write_all(&[b'x'; 300]).unwrap();
        file.sync_data().unwrap();
        lat.push(t.elapsed().as_nanos() as u64);
    }
    lat.sort_unstable();
    (percentile(&lat, 0.5), percentile(&lat, 0.99))
}

fn percentile(sorted: &[u64], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Duration::from_nanos(sorted[i])
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn median_dur(xs: Vec<Duration>) -> Duration {
    Duration::from_secs_f64(median(xs.iter().map(Duration::as_secs_f64).collect()))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Whether the store's gRPC endpoint gets a column (`STORE_BENCH_GRPC=off`: not).
fn grpc() -> bool {
    std::env::var("STORE_BENCH_GRPC").map_or(true, |v| v != "off")
}

/// The table's three columns: the store, the store over gRPC, etcd; `None` where a column
/// is left out.
fn sides(etcd: Option<&Path>) -> [Option<Side<'_>>; 3] {
    [
        Some(Side::Store),
        grpc().then_some(Side::Grpc),
        etcd.map(Side::Etcd),
    ]
}

/// `writers` writers put `total` keys; returns (puts/s, p50, p99, CPU time per put).
async fn put_run(
    subject: &Subject,
    writers: usize,
    total: usize,
    run: usize,
) -> (f64, Duration, Duration, Duration) {
    let cpu = subject.cpu_time();
    let value = Bytes::from(vec![b'v'; VALUE]);
    let per = total / writers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut writer = subject.writer(w);
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            for i in 0..per {
                let t = Instant::now();
                writer.put(format!("/p/{run}/{w}/{i}"), &value).await;
                lat.push(t.elapsed().as_nanos() as u64);
            }
            lat
        }));
    }
    let mut lat = Vec::with_capacity(total);
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    let cpu = subject.cpu_time().saturating_sub(cpu) / lat.len() as u32;
    lat.sort_unstable();
    (
        lat.len() as f64 / elapsed.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        cpu,
    )
}

/// One put row on one side: its table cells (puts/s, p50, p99, CPU per put).
async fn put_row(side: Side<'_>, fsync: bool, writers: usize, total: usize) -> String {
    let subject = Subject::open(side, &bench_root(), fsync, writers).await;
    let mut rates = Vec::new();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut cpus = Vec::new();
    for run in 0..RUNS {
        let (rate, p50, p99, cpu) = put_run(&subject, writers, total, run).await;
        rates.push(rate);
        p50s.push(p50);
        p99s.push(p99);
        cpus.push(cpu);
    }
    subject.close().await;
    format!(
        "{:.0} | {} | {} | {:.1} µs",
        median(rates),
        ms(median_dur(p50s)),
        ms(median_dur(p99s)),
        median_dur(cpus).as_secs_f64() * 1e6
    )
}

async fn bench_puts(etcd: Option<&Path>) {
    println!(
        "| puts (256 B values) | writers | puts/s | p50 | p99 | CPU per put \
         | over gRPC puts/s | p50 | p99 | endpoint's CPU per put \
         | etcd puts/s | p50 | p99 | etcd's CPU per put |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // STORE_BENCH_WRITERS=64 runs one writer count (for profiling).
    let pick: Option<usize> = std::env::var("STORE_BENCH_WRITERS")
        .ok()
        .and_then(|v| v.parse().ok());
    let durable =
        [(1, 4_000), (16, 32_000), (64, 64_000), (256, 128_000)].map(|(w, n)| (true, w, n));
    // The same engine without fsync: its CPU ceiling, to tell disk from code (not durable).
    let no_fsync = [(1, 20_000), (64, 128_000)].map(|(w, n)| (false, w, n));
    for (fsync, writers, total) in durable.into_iter().chain(no_fsync) {
        if pick.is_some_and(|p| p != writers) {
            continue;
        }
        let store = put_row(Side::Store, fsync, writers, total).await;
        let over_grpc = if grpc() {
            put_row(Side::Grpc, fsync, writers, total).await
        } else {
            "— | — | — | —".to_string()
        };
        let etcd = match etcd {
            Some(binary) if fsync => put_row(Side::Etcd(binary), fsync, writers, total).await,
            _ => "— | — | — | —".to_string(),
        };
        let name = if fsync {
            "durable put"
        } else {
            "put, fsync off (not durable)"
        };
        println!("| {name} | {writers} | {store} | {over_grpc} | {etcd} |");
    }
}

/// The range rows on the store: 10k keys at the latest revision, a list's next page and 10k
/// keys at an older revision.
async fn store_ranges() -> [Duration; 3] {
    let dir = tempfile::tempdir_in(bench_root()).unwrap();
    let store = Arc::new(Store::open(StoreConfig::new(dir.path())).await.unwrap());
    let value = Bytes::from(vec![b'v'; VALUE]);
    let mut tasks = Vec::new();
    for w in 0..10 {
        let store = store.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..1000 {
                store
                    .put(Bytes::from(format!("/r/{w}/{i:04}")), value.clone())
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut lat = Vec::new();
    for _ in 0..RUNS * 4 {
        let t = Instant::now();
        let resp = store.range(RangeRequest::prefix("/r/")).await.unwrap();
        lat.push(t.elapsed());
        assert_eq!(resp.count, 10_000);
    }
    let old = store.current_revision().0 - 1;
    // A paginated list's next page: 500 keys at the first page's (older) revision.
    let mut page_lat = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let req = RangeRequest {
            revision: Some(store::Revision(old)),
            limit: Some(500),
            start: Some(Bytes::from_static(b"/r/5/")),
            ..RangeRequest::prefix("/r/")
        };
        let resp = store.range(req).await.unwrap();
        page_lat.push(t.elapsed());
        // (The last key written is not there yet at `old`.)
        assert_eq!(resp.kvs.len(), 500);
        assert!((4_999..=5_000).contains(&resp.count) && resp.more);
    }
    let mut old_lat = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let req = RangeRequest {
            revision: Some(store::Revision(old)),
            ..RangeRequest::prefix("/r/")
        };
        store.range(req).await.unwrap();
        old_lat.push(t.elapsed());
    }
    store.close().await.unwrap();
    [lat, page_lat, old_lat].map(median_dur)
}

/// The same range rows on etcd (serializable reads are not used: a linearizable range, the
/// default, is what kube-apiserver's consistent reads do).
async fn etcd_ranges(binary: &Path) -> [Duration; 3] {
    let etcd = etcd::Etcd::start(binary, &bench_root()).await;
    let clients = etcd.connections(10).await;
    grpc_ranges(&clients).await
}

/// The same range rows on the store's gRPC endpoint.
async fn endpoint_ranges() -> [Duration; 3] {
    let subject = Subject::open(Side::Grpc, &bench_root(), true, 10).await;
    let Subject::Grpc { clients, .. } = &subject else {
        unreachable!("a gRPC subject")
    };
    let figures = grpc_ranges(clients).await;
    subject.close().await;
    figures
}

/// The range rows through the etcd API of `clients`.
async fn grpc_ranges(clients: &[etcd_client::Client]) -> [Duration; 3] {
    let mut tasks = Vec::new();
    for w in 0..10 {
        let mut kv = clients[0].kv_client();
        tasks.push(tokio::spawn(async move {
            for i in 0..1000 {
                kv.put(format!("/r/{w}/{i:04}"), vec![b'v'; VALUE], None)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut kv = clients[0].kv_client();
    let end = store::etcd::prefix_end(b"/r/");
    let mut lat = Vec::new();
    let mut latest = 0;
    for _ in 0..RUNS * 4 {
        let t = Instant::now();
        let options = etcd_client::GetOptions::new().with_prefix();
        let resp = kv.get("/r/", Some(options)).await.unwrap();
        lat.push(t.elapsed());
        assert_eq!(resp.count(), 10_000);
        latest = resp.header().map_or(0, |h| h.revision());
    }
    let old = latest - 1;
    let mut page_lat = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let options = etcd_client::GetOptions::new()
            .with_range(end.clone())
            .with_limit(500)
            .with_revision(old);
        let resp = kv.get("/r/5/", Some(options)).await.unwrap();
        page_lat.push(t.elapsed());
        assert_eq!(resp.kvs().len(), 500);
        assert!((4_999..=5_000).contains(&resp.count()) && resp.more());
    }
    let mut old_lat = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_revision(old);
        kv.get("/r/", Some(options)).await.unwrap();
        old_lat.push(t.elapsed());
    }
    [lat, page_lat, old_lat].map(median_dur)
}

async fn bench_range(etcd: Option<&Path>) {
    let store = store_ranges().await;
    let over_grpc = if grpc() {
        endpoint_ranges().await.map(ms)
    } else {
        std::array::from_fn(|_| "—".to_string())
    };
    let etcd = match etcd {
        Some(binary) => etcd_ranges(binary).await.map(ms),
        None => std::array::from_fn(|_| "—".to_string()),
    };
    let rows = [
        "range 10k keys (latest), median latency",
        "500 of the last 5k keys (older revision), median latency",
        "range 10k keys (older revision), median latency",
    ];
    for (((name, store), over_grpc), etcd) in rows.iter().zip(store).zip(over_grpc).zip(etcd) {
        println!("| {name} | {} | {over_grpc} | {etcd} |", ms(store));
    }
}

/// One writer puts `puts` keys one after another; `watchers` watchers record put→event delay.
async fn watch_latency_run(
    side: Side<'_>,
    watchers: usize,
    puts: usize,
    fsync: bool,
) -> (Duration, Duration) {
    let subject = Subject::open(side, &bench_root(), fsync, 1).await;
    let base = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut w = subject.watch(b"/w/").await;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(puts);
            while lat.len() < puts {
                let stamps = w.next().await.expect("watch cut off");
                let now = base.elapsed().as_nanos() as u64;
                lat.extend(stamps.into_iter().map(|sent| now - sent));
            }
            lat
        }));
    }
    let mut writer = subject.writer(0);
    for i in 0..puts {
        let mut value = vec![0u8; VALUE];
        value[..8].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
        writer.put(format!("/w/{i}"), &Bytes::from(value)).await;
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    lat.sort_unstable();
    subject.close().await;
    (percentile(&lat, 0.5), percentile(&lat, 0.99))
}

async fn bench_watch_latency(etcd: Option<&Path>) {
    // With fsync off the figure is the store's own path (commit, publish, channel, wake-up).
    for (watchers, fsync) in [(1, true), (100, true), (100, false)] {
        let mut cells = Vec::new();
        for side in sides(etcd) {
            let Some(side) = side.filter(|s| fsync || matches!(s, Side::Store)) else {
                cells.push("—".to_string());
                continue;
            };
            let mut p50s = Vec::new();
            let mut p99s = Vec::new();
            for _ in 0..RUNS {
                let (p50, p99) = watch_latency_run(side, watchers, 2_000, fsync).await;
                p50s.push(p50);
                p99s.push(p99);
            }
            cells.push(format!(
                "p50 {}, p99 {}",
                ms(median_dur(p50s)),
                ms(median_dur(p99s))
            ));
        }
        println!(
            "| watch put→event, {watchers} watcher(s), 1 writer{} | {} |",
            if fsync { "" } else { ", fsync off" },
            cells.join(" | ")
        );
    }
}

/// `writers` writers put `puts` keys in total while `watchers` watchers count events;
/// returns (events received per second, events per response, watchers cut off).
async fn fanout_run(
    side: Side<'_>,
    watchers: usize,
    writers: usize,
    puts: usize,
) -> (f64, f64, u64) {
    let subject = Subject::open(side, &bench_root(), true, writers).await;
    let received = Arc::new(AtomicU64::new(0));
    let responses = Arc::new(AtomicU64::new(0));
    let cut_off = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut w = subject.watch(b"/f/").await;
        let received = received.clone();
        let responses = responses.clone();
        let cut_off = cut_off.clone();
        tasks.push(tokio::spawn(async move {
            let (mut n, mut r) = (0, 0);
            while n < puts {
                match w.next().await {
                    Some(events) => {
                        n += events.len();
                        r += 1;
                    }
                    None => {
                        cut_off.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            received.fetch_add(n as u64, Ordering::Relaxed);
            responses.fetch_add(r, Ordering::Relaxed);
        }));
    }
    let value = Bytes::from(vec![b'v'; VALUE]);
    let started = Instant::now();
    let mut writer_tasks = Vec::new();
    for w in 0..writers {
        let mut writer = subject.writer(w);
        let value = value.clone();
        writer_tasks.push(tokio::spawn(async move {
            for i in 0..puts / writers {
                writer.put(format!("/f/{w}/{i}"), &value).await;
            }
        }));
    }
    for t in writer_tasks {
        t.await.unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    subject.close().await;
    let received = received.load(Ordering::Relaxed) as f64;
    (
        received / elapsed.as_secs_f64(),
        received / responses.load(Ordering::Relaxed).max(1) as f64,
        cut_off.load(Ordering::Relaxed),
    )
}

async fn bench_fanout(etcd: Option<&Path>) {
    let mut cells = Vec::new();
    for side in sides(etcd) {
        let Some(side) = side else {
            cells.push("—".to_string());
            continue;
        };
        let mut rates = Vec::new();
        let mut per_response = Vec::new();
        let mut cut = 0;
        for _ in 0..RUNS {
            let (rate, per, c) = fanout_run(side, 1000, 64, 6_400).await;
            rates.push(rate);
            per_response.push(per);
            cut += c;
        }
        cells.push(format!(
            "{:.0} events/s, {:.1} events per response, {cut} watchers cut off",
            median(rates),
            median(per_response)
        ));
    }
    println!(
        "| watch fan-out, 1000 watchers, 64 writers | {} |",
        cells.join(" | ")
    );
}

async fn run(cores: usize) {
    let root = bench_root();
    println!(
        "store bench: {} cores, data dir {} on {}, median of {RUNS} runs, load average {}",
        cores,
        root.display(),
        filesystem(&root),
        loadavg()
    );
    println!("{}", pin::describe());
    let etcd = etcd::binary();
    match &etcd {
        Some(binary) => println!(
            "reference: {} ({}), a fresh one-member cluster per row on 127.0.0.1",
            etcd::version(binary),
            binary.display()
        ),
        None => println!(
            "reference: no etcd (install Debian's etcd-server or set STORE_BENCH_ETCD); \
             its columns are empty"
        ),
    }
    let etcd = etcd.as_deref();
    let (p50, p99) = fdatasync_floor();
    println!(
        "disk floor now (300 B write + fdatasync): p50 {} p99 {}",
        ms(p50),
        ms(p99)
    );
    // STORE_BENCH_ONLY=puts|reads runs one half, =fanout the fan-out row (for profiling),
    // =history the history row, =snapshot the snapshot rows.
    let only = std::env::var("STORE_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "puts" {
        println!();
        bench_puts(etcd).await;
    }
    if only != "puts" {
        println!();
        println!("| read / watch | store | store over gRPC | etcd |");
        println!("|---|---:|---:|---:|");
        if only == "history" {
            history::bench_history(&bench_root(), etcd).await;
        } else if only == "snapshot" {
            snapshot::bench_snapshot(&bench_root()).await;
        } else {
            if only != "fanout" {
                bench_range(etcd).await;
                bench_watch_latency(etcd).await;
                history::bench_history(&bench_root(), etcd).await;
                snapshot::bench_snapshot(&bench_root()).await;
            }
            bench_fanout(etcd).await;
        }
    }
    println!();
    let (p50, p99) = fdatasync_floor();
    println!(
        "disk floor at the end: p50 {} p99 {}; load average {}",
        ms(p50),
        ms(p99),
        loadavg()
    );
}
