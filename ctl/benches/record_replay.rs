//! Record and replay: what a recording of a Deployment's life costs (writes, bytes) and how
//! long `miniplane replay` takes to send it again to a new cluster and compare, at the
//! recording's pace and faster.
//!
//! Each run starts a cluster (the library's `Cluster`, one process, 10 nodes, the `fast`
//! kubelet profile), starts `miniplane record` against it, creates a Deployment of
//! `BENCH_REPLICAS` pods, waits until they are available, scales it to twice as many and
//! waits again, then stops the recorder (SIGINT). It then times `miniplane replay FILE
//! --kubelet-profile fast --settle 0s` at each speed of `BENCH_REPLAY_SPEEDS`, from the
//! command's start (a new cluster, the writes, one comparison) to its exit, and counts the
//! objects that came out otherwise (on 10 nodes: where the scheduler's ties and the cloud's
//! zones fell, which differ between any two runs without a seed).
//!
//! ```text
//! cargo bench -p ctl --bench record_replay
//! BENCH_REPLICAS=300 BENCH_REPLAY_SPEEDS=1,10 BENCH_RUNS=3 cargo bench -p ctl --bench record_replay
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use miniplane::{Cluster, KubeletProfile};

#[path = "support/process.rs"]
mod process;

const NODES: usize = 10;
const DEADLINE: Duration = Duration::from_secs(300);

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// What one recording was.
struct Recorded {
    seconds: f64,
    writes: usize,
    external: usize,
    bytes: u64,
}

async fn available(api: &Api<Deployment>, replicas: i32) {
    let start = Instant::now();
    loop {
        let d = api.get("web").await.unwrap();
        let status = d.status.unwrap_or_default();
        if status.available_replicas == Some(replicas)
            && status.observed_generation == d.metadata.generation
        {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "web never had {replicas} available"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records the scenario into `file`.
fn record(file: &std::path::Path, replicas: i32) -> Recorded {
    let cluster = Cluster::builder()
        .nodes(NODES)
        .kubelet_profile(KubeletProfile::Fast)
        .start()
        .unwrap();
    let mut recorder = Command::new(process::miniplane_bin())
        .arg("record")
        .arg(file)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = recorder.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(DEADLINE).unwrap();
    assert!(first.starts_with("recording "), "{first}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let api: Api<Deployment> = Api::default_namespaced(cluster.client());
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
                }
            }
        }))
        .unwrap();
        api.create(&PostParams::default(), &deployment)
            .await
            .unwrap();
        available(&api, replicas).await;
        let scale = serde_json::json!({"spec": {"replicas": replicas * 2}});
        api.patch("web", &PatchParams::default(), &Patch::Merge(&scale))
            .await
            .unwrap();
        available(&api, replicas * 2).await;
    });
    let _ = Command::new("kill")
        .args(["-INT", &recorder.id().to_string()])
        .status();
    let status = recorder.wait().unwrap();
    let said: Vec<String> = rx.try_iter().collect();
    assert!(status.success(), "record failed: {said:?}");
    drop(runtime);
    cluster.stop().unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let recording = admin::recording::Recording::parse(&text).unwrap();
    let start: jiff::Timestamp = recording.header.start_time.parse().unwrap();
    let end: jiff::Timestamp = recording.end.time.parse().unwrap();
    Recorded {
        seconds: start.duration_until(end).as_secs_f64(),
        writes: recording.writes.len(),
        external: recording.external_writes().count(),
        bytes: text.len() as u64,
    }
}

/// Replays `file` at `speed` and compares once (`--settle 0s`): the wall time of the command
/// and how many objects came out otherwise.
fn replay(file: &std::path::Path, speed: &str) -> (Duration, usize) {
    let start = Instant::now();
    let out = Command::new(process::miniplane_bin())
        .args([
            "replay",
            "--kubelet-profile",
            "fast",
            "--settle",
            "0s",
            "-o",
            "json",
        ])
        .args(["--speed", speed])
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: admin::replay::Report = serde_json::from_slice(&out.stdout).unwrap();
    (took, report.differences.len())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let replicas: i32 = env_or("BENCH_REPLICAS", "300").parse().unwrap();
    let runs: usize = env_or("BENCH_RUNS", "3").parse().unwrap();
    let speeds: Vec<String> = env_or("BENCH_REPLAY_SPEEDS", "1,10")
        .split(',')
        .map(str::to_owned)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    println!(
        "record and replay: {NODES} nodes, a Deployment of {replicas} scaled to {}, {runs} runs, {} cores",
        replicas * 2,
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let mut recorded = Vec::new();
    let mut replays: Vec<Vec<(Duration, usize)>> = vec![Vec::new(); speeds.len()];
    for run in 0..runs {
        let file = dir.path().join(format!("run-{run}.jsonl"));
        let r = record(&file, replicas);
        print!(
            "run {run}: recorded {:.1} s, {} writes ({} external), {} KiB",
            r.seconds,
            r.writes,
            r.external,
            r.bytes / 1024
        );
        for (i, speed) in speeds.iter().enumerate() {
            let (took, differ) = replay(&file, speed);
            print!(
                "; replay at {speed}x {:.2} s ({differ} objects otherwise)",
                took.as_secs_f64()
            );
            replays[i].push((took, differ));
        }
        println!();
        recorded.push(r);
    }
    println!(
        "median: recorded {:.1} s, {:.0} writes, {:.0} KiB ({:.0} bytes per write)",
        median(recorded.iter().map(|r| r.seconds).collect()),
        median(recorded.iter().map(|r| r.writes as f64).collect()),
        median(recorded.iter().map(|r| r.bytes as f64 / 1024.0).collect()),
        median(
            recorded
                .iter()
                .map(|r| r.bytes as f64 / r.writes as f64)
                .collect()
        ),
    );
    for (speed, runs) in speeds.iter().zip(&replays) {
        println!(
            "median replay at {speed}x: {:.2} s, {:.0} objects otherwise",
            median(runs.iter().map(|(d, _)| d.as_secs_f64()).collect()),
            median(runs.iter().map(|(_, n)| *n as f64).collect()),
        );
    }
}
