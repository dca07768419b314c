//! Crash test: a child process (this same binary, in child mode) writes with fsync on and prints
//! every acknowledged `key revision`; the parent kills it with SIGKILL at a random moment, 20+
//! times, and after each kill reopens the store and checks that
//!
//! * every acknowledged write is there, at the revision it was acknowledged with,
//! * the revision never goes backwards across restarts,
//! * a watch from the last revision seen before the crash continues without a gap.
//!
//! `harness = false`: `main` dispatches on the `STORE_CRASH_CHILD` variable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Backend, KeyRange, Revision, Store, StoreConfig, WatchRequest};

const CHILD_ENV: &str = "STORE_CRASH_CHILD";
const ROUNDS: usize = 24;
const WRITERS: usize = 16;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match std::env::var(CHILD_ENV) {
        Ok(dir) => runtime.block_on(child(Path::new(&dir))),
        Err(_) => {
            let started = Instant::now();
            runtime.block_on(parent());
            println!(
                "crash test: {ROUNDS} kills survived in {:.1?}",
                started.elapsed()
            );
        }
    }
}

fn config(dir: &Path) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.fsync = true;
    // Small, so kills also land in the middle of checkpoints.
    config.checkpoint_bytes = 256 * 1024;
    config
}

/// Writes forever; prints each acknowledged write. Killed by the parent.
async fn child(dir: &Path) {
    let store = Arc::new(Store::open(config(dir)).await.unwrap());
    let run: u64 = std::process::id().into();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Bytes, Revision)>(1024);
    for w in 0..WRITERS {
        let store = store.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            for i in 0u64.. {
                let key = Bytes::from(format!("/crash/{run}/{w}/{i}"));
                let value = Bytes::from(vec![b'x'; 200]);
                let resp = store.put(key.clone(), value).await.unwrap();
                tx.send((key, resp.revision)).await.unwrap();
            }
        });
    }
    drop(tx);
    let mut out = std::io::stdout().lock();
    while let Some((key, rev)) = rx.recv().await {
        writeln!(out, "{} {}", String::from_utf8_lossy(&key), rev.0).unwrap();
        out.flush().unwrap();
    }
}

/// Runs the child `ROUNDS` times, killing it each time, and checks the store after each kill.
async fn parent() {
    let base = std::env::temp_dir().join(format!("store-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let seed: u64 = rand::rng().random();
    println!("crash test: data dir {}, seed {seed}", base.display());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut last_rev = Revision(1);
    for round in 0..ROUNDS {
        let acked = run_and_kill(&base, rng.random_range(5..150));
        let store = Store::open(config(&base)).await.unwrap();
        // At most: one left by a kill between WAL rotation and deletion, the child's, and the
        // one this open started.
        let segments = std::fs::read_dir(base.join("wal")).unwrap().count();
        assert!(
            segments <= 3,
            "round {round}: {segments} WAL segments pile up"
        );
        let current = store.current_revision();
        assert!(
            current >= last_rev,
            "round {round}: revision went back from {last_rev} to {current}"
        );
        for (key, rev) in &acked {
            let kv = store.get(key.as_bytes(), None).await.unwrap().kv;
            let kv =
                kv.unwrap_or_else(|| panic!("round {round}: acknowledged {key} at {rev} is lost"));
            assert_eq!(kv.mod_revision, Revision(*rev), "round {round}: {key}");
            assert!(*rev <= current.0);
        }
        // Every revision after the previous round's is there exactly once, in order.
        if current > last_rev {
            let mut w = store
                .watch(WatchRequest {
                    range: KeyRange::Prefix(Bytes::from_static(b"/crash/")),
                    start_revision: Some(last_rev.next()),
                })
                .await
                .unwrap();
            let mut next = last_rev.next();
            while next <= current {
                let resp = tokio::time::timeout(Duration::from_secs(10), w.recv())
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap();
                for e in resp.events {
                    assert_eq!(
                        e.revision(),
                        next,
                        "round {round}: gap or duplicate in the watch"
                    );
                    next = next.next();
                }
            }
        }
        println!(
            "round {round}: {} acked, revision {last_rev} -> {current}",
            acked.len()
        );
        last_rev = current;
        store.close().await.unwrap();
    }
    std::fs::remove_dir_all(&base).unwrap();
}

/// Starts a child, lets it run about `millis` ms after its first ack, SIGKILLs it and returns
/// every `(key, revision)` it printed.
fn run_and_kill(dir: &Path, millis: u64) -> Vec<(String, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        let mut lines = BufReader::new(stdout);
        let mut line = String::new();
        // A line cut short by the kill has no newline and is not counted.
        while lines.read_line(&mut line).is_ok_and(|n| n > 0) && line.ends_with('\n') {
            let parsed = line
                .trim_end()
                .rsplit_once(' ')
                .and_then(|(key, rev)| rev.parse::<u64>().ok().map(|rev| (key.to_string(), rev)));
            let (key, rev) = parsed.expect("child printed a malformed line");
            if acked.is_empty() {
                let _ = first_tx.send(());
            }
            acked.push((key, rev));
            line.clear();
        }
        acked
    });
    // Wait for the child to be writing (or to have died), then kill it at a random moment.
    let _ = first_rx.recv_timeout(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(millis));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap()
}
