//! `miniplane up` benchmark: cold start to ready (every node Ready through the API), idle
//! memory, stop time; and the library's `Cluster` start/stop.
//!
//! Run with `cargo bench -p ctl --bench up` (`MINIPLANE_BENCH_RUNS=N`, default 7). Each run
//! starts the release `miniplane up --port 0 --nodes 3` on a fresh temporary data dir (store
//! with fsync, as a user gets it) and measures:
//!
//! ```text
//!   spawn ──────────────▶ "miniplane is ready at" on stdout      = ready (wall, from exec)
//!          "✓ 3/3 nodes Ready (N ms)" on stderr                  = ready (inside the process)
//!   + 2 s idle ─▶ VmRSS of the process (with --separate: of it and its children)
//!   SIGTERM ─────────────▶ exit                                   = stop
//! ```
//!
//! Medians are printed with the load average, since the machine may be shared.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "support/process.rs"]
mod process;
use process::rss_mib;

const READY: &str = "miniplane is ready at ";
const SETTLE: Duration = Duration::from_secs(2);

struct UpRun {
    ready_wall: Duration,
    ready_inside: Duration,
    rss_mib: f64,
    stop: Duration,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Lines of `child`'s stdout and stderr, as they come.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send(line);
        }
    });
    rx
}

fn one_up(separate: bool) -> UpRun {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_miniplane"));
    cmd.args([
        "up",
        "--kubelet-profile",
        "fast",
        "--port",
        "0",
        "--nodes",
        "3",
        "--data-dir",
    ])
    .arg(dir.path().join("mp"))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if separate {
        cmd.arg("--separate");
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spawn miniplane up");
    let rx = lines(&mut child);
    let mut ready_inside = Duration::ZERO;
    let mut pids = vec![child.id()];
    let ready_wall = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("miniplane up to become ready");
        if let Some(ms) = line
            .strip_prefix("✓ 3/3 nodes Ready (")
            .and_then(|r| r.strip_suffix(" ms)"))
        {
            ready_inside = Duration::from_millis(ms.parse().unwrap());
        }
        if let Some(pid) = line.split("pid ").nth(1) {
            let digits: String = pid.chars().take_while(char::is_ascii_digit).collect();
            pids.push(digits.parse().unwrap());
        }
        if line.starts_with(READY) {
            break t0.elapsed();
        }
    };
    std::thread::sleep(SETTLE);
    let rss_mib = pids.iter().map(|p| rss_mib(*p)).sum();
    let t1 = Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    let stop = t1.elapsed();
    assert!(status.success(), "miniplane up exited with {status}");
    UpRun {
        ready_wall,
        ready_inside,
        rss_mib,
        stop,
    }
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn library(nodes: usize, runs: usize) -> (Duration, Duration) {
    let mut starts = Vec::new();
    let mut stops = Vec::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        let cluster = miniplane::Cluster::builder().nodes(nodes).start().unwrap();
        starts.push(t0.elapsed());
        let t1 = Instant::now();
        cluster.stop().unwrap();
        stops.push(t1.elapsed());
    }
    (median(starts), median(stops))
}

fn main() {
    let runs: usize = std::env::var("MINIPLANE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "up bench: {cores} cores, median of {runs} runs, load average {}",
        loadavg()
    );
    println!();
    println!(
        "| miniplane up, 3 nodes | ready (from exec) | ready (in process) | RSS idle | stop (SIGTERM → exit) |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (label, separate) in [
        ("one process", false),
        ("--separate (4 processes + up)", true),
    ] {
        let results: Vec<UpRun> = (0..runs).map(|_| one_up(separate)).collect();
        println!(
            "| {label} | {} | {} | {:.1} MiB | {} |",
            ms(median(results.iter().map(|r| r.ready_wall).collect())),
            ms(median(results.iter().map(|r| r.ready_inside).collect())),
            median(results.iter().map(|r| r.rss_mib).collect::<Vec<_>>()),
            ms(median(results.iter().map(|r| r.stop).collect())),
        );
    }
    println!();
    println!(
        "| miniplane::Cluster (library, temporary store, no fsync) | start (to ready) | stop |"
    );
    println!("|---|---:|---:|");
    for nodes in [3, 0] {
        let (start, stop) = library(nodes, runs);
        println!(
            "| {nodes} nodes, controller-manager, scheduler | {} | {} |",
            ms(start),
            ms(stop)
        );
    }
    println!();
    println!("load average at the end: {}", loadavg());
}
