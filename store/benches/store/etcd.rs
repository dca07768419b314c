//! The reference column of the store bench: a real etcd member (the `etcd` binary, Debian's
//! `etcd-server`), started fresh for each row beside the store's run of it, on the same disk and
//! cores, and driven over gRPC with the `etcd-client` crate.
//!
//! The member is a one-node cluster on 127.0.0.1 with etcd's defaults (fsync on every commit,
//! snapshot count, quota), its data directory in the same bench directory as the store's,
//! pinned to the servers' core when the run is (`pin.rs`). Its writers share one gRPC
//! connection per 16 writers (as etcd's own `benchmark` tool spreads clients over a few
//! connections); each watcher is its own watch stream.

use crate::pin;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Writers per gRPC connection.
const WRITERS_PER_CONNECTION: usize = 16;

/// The etcd binary the bench drives, if there is one: `STORE_BENCH_ETCD` (a path, or `off`),
/// else `etcd` on the PATH.
pub fn binary() -> Option<PathBuf> {
    match std::env::var_os("STORE_BENCH_ETCD") {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("etcd"))
                .find(|p| p.is_file())
        }),
    }
}

/// `etcd --version`'s first line ("etcd Version: 3.4.23"), or why it could not be run.
pub fn version(binary: &Path) -> String {
    match Command::new(binary).arg("--version").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("etcd (no version printed)")
            .to_string(),
        Err(e) => format!("{} cannot be run: {e}", binary.display()),
    }
}

/// A free port on 127.0.0.1 (the listener is closed again before etcd binds it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// One running etcd member with its own data directory; killed and removed when dropped.
pub struct Etcd {
    child: Child,
    endpoint: String,
    // Dropped after the child is gone (field order).
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts a fresh member with its data under `root` and waits until it answers.
    pub async fn start(binary: &Path, root: &Path) -> Etcd {
        let dir = tempfile::tempdir_in(root).expect("etcd data dir");
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("etcd log file");
        let child = pin::server_command(binary)
            .arg("--name=bench")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=bench={peer_url}"))
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut etcd = Etcd {
            child,
            endpoint,
            dir,
        };
        etcd.wait_ready().await;
        etcd
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("etcd exited ({status}) on start:\n{}", self.log());
            }
            if let Ok(mut client) = etcd_client::Client::connect([&self.endpoint], None).await
                && client.status().await.is_ok()
            {
                return;
            }
            if Instant::now() > deadline {
                panic!("etcd did not answer in 20 s:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("etcd.log")) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// The member's client URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The process id, for its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Clients for `writers` concurrent writers: one connection per 16 of them.
    pub async fn connections(&self, writers: usize) -> Vec<etcd_client::Client> {
        connections(&self.endpoint, writers).await
    }
}

/// Clients of the etcd API at `endpoint` for `writers` concurrent writers: one connection per
/// 16 of them (the same for etcd and for the store's endpoint).
pub async fn connections(endpoint: &str, writers: usize) -> Vec<etcd_client::Client> {
    let mut clients = Vec::new();
    for _ in 0..writers.div_ceil(WRITERS_PER_CONNECTION).max(1) {
        clients.push(
            etcd_client::Client::connect([endpoint], None)
                .await
                .expect("connect to the etcd API"),
        );
    }
    clients
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A watch on every key under `prefix` for future changes, created (etcd has answered the
/// create request) when this returns.
pub async fn watch(client: &etcd_client::Client, prefix: &[u8]) -> etcd_client::WatchStream {
    let mut watch = client.watch_client();
    let options = etcd_client::WatchOptions::new().with_prefix();
    let mut stream = watch
        .watch(prefix.to_vec(), Some(options))
        .await
        .expect("etcd watch");
    let created = stream.message().await.expect("etcd watch create");
    assert!(
        created.is_some_and(|r| r.created()),
        "etcd watch not created"
    );
    stream
}
