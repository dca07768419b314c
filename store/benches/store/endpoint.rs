//! The "store over gRPC" column's server: miniplane's store behind its etcd v3 endpoint
//! (`store-grpc`, writable, on 127.0.0.1), run in a process of its own as the etcd member of
//! the reference column is, so both servers are measured the same way: their own process,
//! their own CPU time, the same cores (`pin.rs`), and the same load generator in the bench
//! process.
//!
//! The process is this bench binary started again with `STORE_BENCH_SERVE` naming the data
//! directory ([`serve_if_asked`]); it prints its address on stdout and serves until killed or
//! until its stdin closes (the bench is gone).

use crate::pin;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use store::{Backend, Store, StoreConfig};

/// The variable that makes this binary serve a store's endpoint instead of benchmarking.
const SERVE: &str = "STORE_BENCH_SERVE";
/// Whether the served store syncs (`1`) or not (`0`).
const SERVE_FSYNC: &str = "STORE_BENCH_SERVE_FSYNC";

/// Serves the endpoint and returns `true` when this process was started as one; `false` (at
/// once) in the bench itself.
pub fn serve_if_asked() -> bool {
    let Some(dir) = std::env::var_os(SERVE) else {
        return false;
    };
    let fsync = std::env::var(SERVE_FSYNC).map_or(true, |v| v != "0");
    // Worker threads: tokio's default, one per core this process may run on.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut config = StoreConfig::new(Path::new(&dir));
        config.fsync = fsync;
        config.watch_buffer = 4096;
        let store = Arc::new(Store::open(config).await.unwrap());
        let stop = tokio_util::sync::CancellationToken::new();
        let options = store_grpc::EtcdOptions {
            writable: true,
            ..store_grpc::EtcdOptions::default()
        };
        let backend: Arc<dyn Backend> = store.clone();
        let at = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let (bound, server) = store_grpc::spawn(at, backend, options, stop.clone())
            .await
            .unwrap();
        println!("{bound}");
        // The bench holds our stdin open while it needs us.
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await
        .unwrap();
        stop.cancel();
        let _ = server.await;
        store.close().await.unwrap();
    });
    true
}

/// One running endpoint process with its own data directory; killed and removed when dropped.
pub struct Endpoint {
    child: Child,
    endpoint: String,
    // Dropped after the child is gone (field order).
    _dir: tempfile::TempDir,
}

impl Endpoint {
    /// Starts a fresh store and its endpoint under `root` and waits until it listens.
    pub fn start(root: &Path, fsync: bool) -> Endpoint {
        let dir = tempfile::tempdir_in(root).expect("endpoint data dir");
        let program = std::env::current_exe().expect("the bench binary's path");
        let mut child = pin::server_command(&program)
            .env(SERVE, dir.path())
            .env(SERVE_FSYNC, if fsync { "1" } else { "0" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("the endpoint's stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the endpoint's address");
        assert!(!line.trim().is_empty(), "the endpoint exited on start");
        Endpoint {
            child,
            endpoint: format!("http://{}", line.trim()),
            _dir: dir,
        }
    }

    /// The address clients connect to (`http://127.0.0.1:port`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The process id, for its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
