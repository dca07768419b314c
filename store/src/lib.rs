//! miniplane's etcd: a multi-version key-value store on sled.
//!
//! The store plays the part etcd plays in Kubernetes and mirrors etcd's `mvcc` package
//! (`server/storage/mvcc/kvstore.go`, `watchable_store.go`, `key_index.go`) and its write-ahead
//! log (`server/storage/wal/wal.go`). It knows nothing of Kubernetes: keys and values are bytes.
//!
//! ```text
//!   writers ──put/delete/txn──▶ committer ──append──▶ WAL ◀──fdatasync── syncer (durability)
//!                                  one revision per write          │ batches pipelined
//!                                                                  ├─apply─▶ latest versions
//!                                                                  │         in memory
//!                                                                  ├─events─▶ watch hub ──▶ watchers
//!                                                                  └─▶ indexer ──▶ sled: history
//!                                                                      by key and by revision
//! ```
//!
//! A writer that finds the store idle commits its own write (evaluate, WAL, sync, apply,
//! publish) on its thread instead of waking the committer (`committer.rs`, `Shared`).
//!
//! * One global [`Revision`] counter; every key carries `create_revision`, `mod_revision` and
//!   `version` ([`KeyValue`]).
//! * Writes ([`Backend::put`], [`Backend::delete`], [`Backend::txn`]) are atomic and each write
//!   that changes something produces exactly one new revision.
//! * Reads ([`Backend::get`], [`Backend::range`]) answer with the revision they were read at,
//!   and can read at an older revision that has not been compacted.
//! * Watches ([`Backend::watch`]) deliver events in revision order, without gap or duplicate,
//!   from any revision still kept; below the compaction point they fail with
//!   [`Error::Compacted`].
//!
//! The [`Backend`] trait is the boundary the API server uses. Three implementations live here:
//!
//! * [`Store`]: durable (WAL + sled), opened with a [`StoreConfig`];
//! * [`MemoryBackend`]: in memory, the reference model for tests;
//! * [`EtcdBackend`]: a real etcd v3 cluster, as kube-apiserver's etcd3 storage ([`etcd`]).
//!
//! Where things are (one concept per file):
//!
//! | file | concept | etcd |
//! |---|---|---|
//! | `store.rs` | open/recover, `Backend` impl, close | `etcdserver/bootstrap.go` |
//! | `committer.rs` | the single writer: order, evaluate, log (group commit) | `etcdserver/server.go` apply loop |
//! | `syncer.rs` | pipelined fdatasync, apply to memory, publish, acknowledge | `etcdserver/raft.go` `Ready` loop |
//! | `indexer.rs` | writes history to sled off the write path | backend `batch_tx.go` |
//! | `wal.rs` | write-ahead log segments | `storage/wal/wal.go` |
//! | `checkpoint.rs` | make sled durable, drop old WAL | backend `ForceCommit`, WAL purge |
//! | `kvstore.rs` | sled trees, reads, compaction | `storage/mvcc/kvstore.go` |
//! | `key_history.rs` | every kept version of one key | `storage/mvcc/key_index.go` |
//! | `snapshot.rs` | every key at one revision, saved and restored | `etcdutl/snapshot/v3_snapshot.go` |
//! | `codec.rs` | on-disk encodings | `mvccpb`, `walpb`, `revision.go` |
//! | `mvcc.rs` | validation and txn rules | `etcdserver/txn/txn.go` |
//! | `watch_hub.rs` | synced/unsynced watchers | `storage/mvcc/watchable_store.go` |
//! | `compaction.rs` | auto-compaction policy | `etcdserver/api/v3compactor/` |
//! | `history_bytes.rs` | bytes of kept history, the budget's compaction point | `storage/quota.go` |
//! | `lock.rs` | data-directory lock | `client/pkg/fileutil/lock_linux.go` |
//! | `memory.rs` | in-memory reference backend | — |
//! | `etcd/` | the backend on a real etcd cluster | kube-apiserver `storage/etcd3/` |
//!
//! `docs/store.md` in the repository is the guided tour. etcd's v3 gRPC API over a store (so
//! `etcdctl` can read it) is the `store-grpc` crate.

mod backend;
mod checkpoint;
mod clock;
mod codec;
mod committer;
mod compaction;
mod config;
mod error;
pub mod etcd;
mod history_bytes;
mod indexer;
mod key_history;
mod kv;
mod kvstore;
mod lock;
mod memory;
mod mvcc;
mod range;
mod revision;
mod snapshot;
mod store;
mod syncer;
mod txn;
mod wal;
mod watch;
mod watch_hub;

pub use backend::Backend;
pub use checkpoint::{CHECKPOINT_FAILURES_UNHEALTHY, CheckpointHealth};
pub use clock::{Clock, SystemClock};
pub use compaction::AutoCompactor;
pub use config::{AutoCompaction, DEFAULT_HISTORY_BUDGET, StoreConfig};
pub use error::{Error, Result};
pub use etcd::{EtcdBackend, EtcdConfig};
pub use key_history::KeyHistory;
pub use kv::{Event, EventKind, KeyValue};
pub use memory::{DEFAULT_WATCH_BUFFER, MemoryBackend};
pub use range::{GetResponse, KeyRange, RangeRequest, RangeResponse};
pub use revision::Revision;
pub use snapshot::{DEFAULT_BUMP, Snapshot};
pub use store::Store;
pub use txn::{Compare, CompareOp, CompareTarget, Op, OpResponse, Txn, TxnResponse, WriteResponse};
pub use watch::{WatchRequest, WatchResponse, Watcher};

/// Largest value accepted, as etcd's default `--max-request-bytes` (1.5 MiB).
pub const MAX_VALUE_SIZE: usize = 1536 * 1024;
/// Most operations one transaction may carry, as etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;
