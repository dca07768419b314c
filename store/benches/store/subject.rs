//! What a row of the store bench drives: miniplane's store, called in process; the same store
//! behind its etcd v3 endpoint (`store-grpc`), a process of its own (`endpoint.rs`) over gRPC
//! on loopback; or the etcd member of the reference column, over gRPC. Each gets a fresh data
//! directory per row, in the same bench directory, and the same writes and watches; the two
//! gRPC sides are started the same way and driven by the same `etcd-client` code.

use crate::endpoint::Endpoint;
use crate::etcd::{self, Etcd};
use bytes::Bytes;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use store::{Backend, KeyRange, Store, StoreConfig, WatchRequest};

/// Which side of the table a row runs on.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    /// miniplane's store.
    Store,
    /// miniplane's store over etcd's gRPC API (its `--etcd-listen` endpoint, writable).
    Grpc,
    /// etcd, started from this binary.
    Etcd(&'a Path),
}

/// A freshly opened store or freshly started etcd member.
pub enum Subject {
    Store {
        store: Arc<Store>,
        _dir: tempfile::TempDir,
    },
    Grpc {
        server: Endpoint,
        clients: Vec<etcd_client::Client>,
    },
    Etcd {
        etcd: Etcd,
        clients: Vec<etcd_client::Client>,
    },
}

impl Subject {
    /// Opens `side` fresh under `root`, ready for `writers` concurrent writers. `fsync: false`
    /// exists for the store only (etcd 3.4 always syncs).
    pub async fn open(side: Side<'_>, root: &Path, fsync: bool, writers: usize) -> Subject {
        match side {
            Side::Store => {
                let dir = tempfile::tempdir_in(root).unwrap();
                let mut config = StoreConfig::new(dir.path());
                config.fsync = fsync;
                config.watch_buffer = 4096;
                Subject::Store {
                    store: Arc::new(Store::open(config).await.unwrap()),
                    _dir: dir,
                }
            }
            Side::Grpc => {
                let server = Endpoint::start(root, fsync);
                let clients = etcd::connections(server.endpoint(), writers).await;
                Subject::Grpc { server, clients }
            }
            Side::Etcd(binary) => {
                assert!(fsync, "etcd 3.4 has no fsync-off mode");
                let etcd = Etcd::start(binary, root).await;
                let clients = etcd.connections(writers).await;
                Subject::Etcd { etcd, clients }
            }
        }
    }

    /// The writer for writer number `w`.
    pub fn writer(&self, w: usize) -> Writer {
        match self {
            Subject::Store { store, .. } => Writer::Store(store.clone()),
            Subject::Etcd { clients, .. } | Subject::Grpc { clients, .. } => {
                Writer::Etcd(Box::new(clients[w % clients.len()].kv_client()))
            }
        }
    }

    /// A watch on every key under `prefix` for future changes.
    pub async fn watch(&self, prefix: &'static [u8]) -> Watch {
        match self {
            Subject::Store { store, .. } => {
                let req = WatchRequest {
                    range: KeyRange::Prefix(Bytes::from_static(prefix)),
                    start_revision: None,
                };
                Watch::Store(store.watch(req).await.unwrap())
            }
            Subject::Etcd { clients, .. } | Subject::Grpc { clients, .. } => {
                Watch::Etcd(Box::new(etcd::watch(&clients[0], prefix).await))
            }
        }
    }

    /// CPU time (user + system) used so far by whoever serves the writes: this process for
    /// the store (its writer tasks included), the server's process for the store's endpoint
    /// and for etcd (their clients not).
    pub fn cpu_time(&self) -> Duration {
        match self {
            Subject::Store { .. } => cpu_time("/proc/self/stat"),
            Subject::Grpc { server, .. } => cpu_time(&format!("/proc/{}/stat", server.pid())),
            Subject::Etcd { etcd, .. } => cpu_time(&format!("/proc/{}/stat", etcd.pid())),
        }
    }

    /// Closes the store (its committer and syncer finish); stops the endpoint's process or
    /// etcd.
    pub async fn close(self) {
        match self {
            Subject::Store { store, .. } => store.close().await.unwrap(),
            Subject::Grpc { server, clients } => {
                drop(clients);
                drop(server);
            }
            Subject::Etcd { etcd, clients } => {
                drop(clients);
                drop(etcd);
            }
        }
    }
}

/// CPU time (user + system) of the process whose `stat` file this is.
fn cpu_time(stat: &str) -> Duration {
    let stat = std::fs::read_to_string(stat).unwrap_or_default();
    // The fields after the parenthesised command name, from the state on: utime and stime are
    // the 12th and 13th of them (fields 14 and 15 of proc(5)). Counted by position: some
    // fields before them are not numbers (the state) or negative (tpgid without a terminal).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((field(11) + field(12)) * 10)
}

/// One writer's handle.
pub enum Writer {
    Store(Arc<Store>),
    Etcd(Box<etcd_client::KvClient>),
}

impl Writer {
    /// Puts `value` at `key` and waits for the answer (durable when the row is).
    pub async fn put(&mut self, key: String, value: &Bytes) {
        match self {
            Writer::Store(store) => {
                store.put(Bytes::from(key), value.clone()).await.unwrap();
            }
            Writer::Etcd(kv) => {
                kv.put(key, value.to_vec(), None).await.unwrap();
            }
        }
    }
}

/// One watcher's stream of events.
pub enum Watch {
    Store(store::Watcher),
    Etcd(Box<etcd_client::WatchStream>),
}

impl Watch {
    /// The next batch of events, each as the first 8 bytes of its value (little-endian; the
    /// latency rows put a timestamp there); `None` when the watch was cut off or ended.
    pub async fn next(&mut self) -> Option<Vec<u64>> {
        fn stamp(value: &[u8]) -> u64 {
            value
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        }
        match self {
            Watch::Store(w) => match w.recv().await {
                Some(Ok(resp)) => Some(resp.events.iter().map(|e| stamp(&e.kv.value)).collect()),
                _ => None,
            },
            Watch::Etcd(w) => match w.message().await {
                Ok(Some(resp)) if !resp.canceled() => Some(
                    resp.events()
                        .iter()
                        .map(|e| e.kv().map_or(0, |kv| stamp(kv.value())))
                        .collect(),
                ),
                _ => None,
            },
        }
    }
}
