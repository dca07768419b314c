//! `miniplane up` benchmark: cold start to ready (every node Ready through the API), idle
//! memory, stop time; and the library's `Cluster` start/stop.
//!
//! Run with `cargo bench -p ctl --bench up` (`MINIPLANE_BENCH_RUNS=N`, default 7). Each run
//! starts the release `miniplane up --port 0 --nodes 3` on a fresh temporary data dir (store
//! with fsync and the simulated cloud, as a user gets it) and measures:
//!
//! ```text
//!   spawn ──────────────▶ "miniplane is ready at" on stdout      = ready (wall, from exec)
//!          "✓ 3/3 nodes Ready (N ms)" on stderr                  = ready (inside the process)
//!   + 2 s idle ─▶ VmRSS of the process (with --separate: of it and its children)
//!   SIGTERM ─────────────▶ exit                                   = stop
//! ```
//!
//! Then the same start with many nodes (`MINIPLANE_BENCH_CLOUD_NODES`, default 1,000;
//! `--no-fsync`, 3 runs each at least), once with the simulated cloud and its
//! cloud-controller-manager (every Node registered with the uninitialized taint, initialized
//! by the CCM: ready means every Node Ready *and* schedulable) and once with `--cloud=false`
//! (the kubelets set their own addresses): the difference is the CCM's start-up cost.
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

/// How `miniplane up` is started for one run.
#[derive(Clone, Copy)]
struct UpShape {
    separate: bool,
    nodes: usize,
    cloud: bool,
    fsync: bool,
}

impl UpShape {
    const THREE: UpShape = UpShape {
        separate: false,
        nodes: 3,
        cloud: true,
        fsync: true,
    };
}

fn one_up(shape: UpShape) -> UpRun {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_miniplane"));
    let nodes = shape.nodes.to_string();
    let data = dir.path().join("mp");
    cmd.args(process::up_args(&nodes, data.to_str().unwrap()))
        .arg(if shape.cloud {
            "--cloud=true"
        } else {
            "--cloud=false"
        })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if shape.separate {
        cmd.arg("--separate");
    }
    if !shape.fsync {
        cmd.arg("--no-fsync");
    }
    let ready_prefix = format!("✓ {nodes}/{nodes} nodes Ready (");
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spawn miniplane up");
    let rx = lines(&mut child);
    let mut ready_inside = Duration::ZERO;
    let mut pids = vec![child.id()];
    let ready_wall = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(300))
            .expect("miniplane up to become ready");
        if let Some(ms) = line
            .strip_prefix(ready_prefix.as_str())
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
        ("--separate (5 processes + up)", true),
    ] {
        let shape = UpShape {
            separate,
            ..UpShape::THREE
        };
        let results: Vec<UpRun> = (0..runs).map(|_| one_up(shape)).collect();
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
    let many: usize = std::env::var("MINIPLANE_BENCH_CLOUD_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    println!(
        "| miniplane up --nodes {many} --no-fsync | ready (from exec) | ready (in process) | RSS idle |"
    );
    println!("|---|---:|---:|---:|");
    for (label, cloud) in [
        ("--cloud=false (kubelets set their own addresses)", false),
        (
            "cloud + cloud-controller-manager (every Node initialized)",
            true,
        ),
    ] {
        let shape = UpShape {
            nodes: many,
            cloud,
            fsync: false,
            ..UpShape::THREE
        };
        let results: Vec<UpRun> = (0..runs.clamp(3, 5)).map(|_| one_up(shape)).collect();
        println!(
            "| {label} | {} | {} | {:.1} MiB |",
            ms(median(results.iter().map(|r| r.ready_wall).collect())),
            ms(median(results.iter().map(|r| r.ready_inside).collect())),
            median(results.iter().map(|r| r.rss_mib).collect::<Vec<_>>()),
        );
    }
    println!();
    println!("load average at the end: {}", loadavg());
}
