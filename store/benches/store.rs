//! Store benchmark (`cargo bench -p store`): durable put throughput and latency at several
//! writer counts, a 10k-key range, put-to-event watch latency and total watch fan-out.
//!
//! Every figure is the median of `RUNS` runs. Writes are durable (fsync on) unless said
//! otherwise. The data directory is under `STORE_BENCH_DIR` or the system temp dir; the table
//! header says which filesystem that is (tmpfs would make fsync free and the figures worthless).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use store::{Backend, KeyRange, RangeRequest, Store, StoreConfig, WatchRequest};

const RUNS: usize = 5;
const VALUE: usize = 256;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
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

async fn open(durable: bool) -> (tempfile::TempDir, Arc<Store>) {
    let dir = tempfile::tempdir_in(bench_root()).unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.fsync = durable;
    config.watch_buffer = 4096;
    (dir, Arc::new(Store::open(config).await.unwrap()))
}

/// CPU time (user + system) this process has used so far, from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
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

/// `writers` tasks put `total` keys; returns (puts/s, p50, p99, CPU time per put).
async fn put_run(
    store: &Arc<Store>,
    writers: usize,
    total: usize,
    run: usize,
) -> (f64, Duration, Duration, Duration) {
    let cpu = cpu_time();
    let value = Bytes::from(vec![b'v'; VALUE]);
    let per = total / writers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            for i in 0..per {
                let key = Bytes::from(format!("/p/{run}/{w}/{i}"));
                let t = Instant::now();
                store.put(key, value.clone()).await.unwrap();
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
    let cpu = (cpu_time() - cpu) / lat.len() as u32;
    lat.sort_unstable();
    (
        lat.len() as f64 / elapsed.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        cpu,
    )
}

async fn bench_puts() {
    println!("| puts (256 B values) | writers | puts/s | p50 | p99 | CPU per put |");
    println!("|---|---:|---:|---:|---:|---:|");
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
        let (_dir, store) = open(fsync).await;
        let mut rates = Vec::new();
        let mut p50s = Vec::new();
        let mut p99s = Vec::new();
        let mut cpus = Vec::new();
        for run in 0..RUNS {
            let (rate, p50, p99, cpu) = put_run(&store, writers, total, run).await;
            rates.push(rate);
            p50s.push(p50);
            p99s.push(p99);
            cpus.push(cpu);
        }
        println!(
            "| {} | {writers} | {:.0} | {} | {} | {:.1} µs |",
            if fsync {
                "durable put"
            } else {
                "put, fsync off (not durable)"
            },
            median(rates),
            ms(median_dur(p50s)),
            ms(median_dur(p99s)),
            median_dur(cpus).as_secs_f64() * 1e6
        );
        store.close().await.unwrap();
    }
}

async fn bench_range() {
    let (_dir, store) = open(true).await;
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
    println!(
        "| range 10k keys (latest), median latency | {} |",
        ms(median_dur(lat))
    );
    println!(
        "| 500 of the last 5k keys (older revision), median latency | {} |",
        ms(median_dur(page_lat))
    );
    println!(
        "| range 10k keys (older revision), median latency | {} |",
        ms(median_dur(old_lat))
    );
    store.close().await.unwrap();
}

/// A watch on `prefix` for future changes.
async fn watch_prefix(store: &Store, prefix: &'static [u8]) -> store::Watcher {
    let range = KeyRange::Prefix(Bytes::from_static(prefix));
    let req = WatchRequest {
        range,
        start_revision: None,
    };
    store.watch(req).await.unwrap()
}

/// One writer puts `puts` keys one after another; `watchers` watchers record put→event delay.
async fn watch_latency_run(watchers: usize, puts: usize, fsync: bool) -> (Duration, Duration) {
    let (_dir, store) = open(fsync).await;
    let base = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut w = watch_prefix(&store, b"/w/").await;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(puts);
            while lat.len() < puts {
                let resp = w.recv().await.unwrap().unwrap();
                let now = base.elapsed().as_nanos() as u64;
                for e in resp.events {
                    let sent = u64::from_le_bytes(e.kv.value[..8].try_into().unwrap());
                    lat.push(now - sent);
                }
            }
            lat
        }));
    }
    for i in 0..puts {
        let mut value = vec![0u8; VALUE];
        value[..8].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
        store
            .put(Bytes::from(format!("/w/{i}")), Bytes::from(value))
            .await
            .unwrap();
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    lat.sort_unstable();
    store.close().await.unwrap();
    (percentile(&lat, 0.5), percentile(&lat, 0.99))
}

async fn bench_watch_latency() {
    // With fsync off the figure is the store's own path (commit, publish, channel, wake-up).
    for (watchers, fsync) in [(1, true), (100, true), (100, false)] {
        let mut p50s = Vec::new();
        let mut p99s = Vec::new();
        for _ in 0..RUNS {
            let (p50, p99) = watch_latency_run(watchers, 2_000, fsync).await;
            p50s.push(p50);
            p99s.push(p99);
        }
        println!(
            "| watch put→event, {watchers} watcher(s), 1 writer{} | p50 {} | p99 {} |",
            if fsync { "" } else { ", fsync off" },
            ms(median_dur(p50s)),
            ms(median_dur(p99s))
        );
    }
}

/// `writers` writers put `puts` keys in total while `watchers` watchers count events.
async fn fanout_run(watchers: usize, writers: usize, puts: usize) -> (f64, u64) {
    let (_dir, store) = open(true).await;
    let received = Arc::new(AtomicU64::new(0));
    let cut_off = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut w = watch_prefix(&store, b"/f/").await;
        let received = received.clone();
        let cut_off = cut_off.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while n < puts {
                match w.recv().await {
                    Some(Ok(resp)) => n += resp.events.len(),
                    _ => {
                        cut_off.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            received.fetch_add(n as u64, Ordering::Relaxed);
        }));
    }
    let value = Bytes::from(vec![b'v'; VALUE]);
    let started = Instant::now();
    let mut writer_tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let value = value.clone();
        writer_tasks.push(tokio::spawn(async move {
            for i in 0..puts / writers {
                store
                    .put(Bytes::from(format!("/f/{w}/{i}")), value.clone())
                    .await
                    .unwrap();
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
    store.close().await.unwrap();
    (
        received.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        cut_off.load(Ordering::Relaxed),
    )
}

async fn bench_fanout() {
    let mut rates = Vec::new();
    let mut cut = 0;
    for _ in 0..RUNS {
        let (rate, c) = fanout_run(1000, 64, 6_400).await;
        rates.push(rate);
        cut += c;
    }
    println!(
        "| watch fan-out, 1000 watchers, 64 writers | {:.0} events/s | {cut} watchers cut off |",
        median(rates)
    );
}

async fn run() {
    let root = bench_root();
    println!(
        "store bench: {} cores, data dir {} on {}, median of {RUNS} runs, load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        root.display(),
        filesystem(&root),
        loadavg()
    );
    let (p50, p99) = fdatasync_floor();
    println!(
        "disk floor now (300 B write + fdatasync): p50 {} p99 {}",
        ms(p50),
        ms(p99)
    );
    // STORE_BENCH_ONLY=puts|reads runs one half (for profiling).
    let only = std::env::var("STORE_BENCH_ONLY").unwrap_or_default();
    if only != "reads" {
        println!();
        bench_puts().await;
    }
    if only != "puts" {
        println!();
        println!("| read / watch | result | |");
        println!("|---|---:|---:|");
        bench_range().await;
        bench_watch_latency().await;
        bench_fanout().await;
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
