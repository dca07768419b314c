//! The durable store: open/recover, the [`Backend`] implementation, and shutdown (etcd's
//! `server/storage/mvcc/watchable_store.go` `New` + `server/etcdserver/bootstrap.go`).
//!
//! ```text
//!   <dir>/LOCK          flock: one process at a time            (lock.rs)
//!   <dir>/CHECKPOINT    revision up to which sled is durable    (checkpoint.rs)
//!   <dir>/wal/*.wal     every write since (and a bit before)    (wal.rs)
//!   <dir>/sled/         index, log, meta trees                  (kvstore.rs)
//!
//!   open:  lock ─▶ open sled ─▶ read CHECKPOINT ─▶ replay WAL records after it into sled
//!          ─▶ current revision = last replayed (never goes back) ─▶ start committer thread
//!          (+ auto-compaction task)
//!   close: committer drains the queue, checkpoints, stops ─▶ tasks joined ─▶ watches end
//! ```
//!
//! Reads run on the caller's task against sled under the read guard (short, synchronous work).
//! Writes and compactions go through the committer (`committer.rs`).

use crate::checkpoint::HealthCell;
use crate::clock::Clock;
use crate::codec::{self, WalEntry};
use crate::committer::{Committer, Request, Shared};
use crate::compaction::AutoCompactor;
use crate::config::StoreConfig;
use crate::kvstore::KvStore;
use crate::lock::DirLock;
use crate::memory::single_write_response;
use crate::revision::{read_revision, watch_start};
use crate::wal::Wal;
use crate::watch_hub::{EventSource, WatchHub};
use crate::{
    Backend, CheckpointHealth, Error, GetResponse, RangeRequest, RangeResponse, Result, Revision,
    Txn, TxnResponse, WatchRequest, Watcher, WriteResponse, checkpoint, mvcc,
};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// miniplane's durable MVCC store: WAL + sled, group commit, watch, compaction.
pub struct Store {
    /// The committer's queue (bounded: writers wait when it is full).
    requests: mpsc::Sender<Request>,
    /// The committer's state, for writes committed on the writer's thread.
    committer_state: Arc<Shared>,
    kv: Arc<KvStore>,
    hub: Arc<WatchHub>,
    /// The committer thread, joined by `close`.
    committer: Mutex<Option<JoinHandle<()>>>,
    /// The auto-compaction task, if configured, joined by `close`.
    compactor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Stops the auto-compaction task.
    shutdown: CancellationToken,
    /// How its checkpoints are going.
    health: Arc<HealthCell>,
    /// The data directory (its size is the store's size on disk).
    dir: std::path::PathBuf,
    /// Held for the store's lifetime; dropping it unlocks the directory.
    _lock: DirLock,
}

/// Takes a handle out of its slot (a poisoned slot still holds a valid `Option`).
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// Replays the WAL into sled; returns the WAL (positioned on a new segment), the revision, and
/// whether anything was replayed.
fn recover(config: &StoreConfig, kv: &KvStore) -> Result<(Wal, Revision, bool)> {
    let checkpointed = checkpoint::read(&config.dir)?.unwrap_or(Revision(1));
    let mut current = checkpointed;
    let wal = Wal::open(&config.dir.join("wal"), config.fsync, |payload| {
        match codec::decode_wal(payload)? {
            WalEntry::Write { rev, .. } if rev <= checkpointed => Ok(()),
            WalEntry::Write { rev, changes } => {
                if rev != current.next() {
                    return Err(Error::Corrupt(format!(
                        "WAL jumps from revision {current} to {rev}"
                    )));
                }
                kv.apply(&mut kv.write(), rev, &changes)?;
                current = rev;
                Ok(())
            }
            // Re-running a compaction is harmless, and needed if writes below it were replayed.
            WalEntry::Compact { rev } => kv.compact(rev),
        }
    })?;
    kv.set_current(current);
    kv.reset_indexed(current);
    Ok((wal, current, current > checkpointed))
}

impl Store {
    /// Opens (or creates) the store in `config.dir`, recovering every acknowledged write.
    ///
    /// Fails with [`Error::Locked`] if another `Store` has the directory open. Must be called
    /// inside a Tokio runtime (the recovery runs on a blocking thread, and the auto-compaction
    /// task and watch replays are Tokio tasks).
    pub async fn open(config: StoreConfig) -> Result<Store> {
        tokio::task::spawn_blocking(move || Self::open_blocking(config))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))?
    }

    fn open_blocking(config: StoreConfig) -> Result<Store> {
        std::fs::create_dir_all(&config.dir)?;
        let lock = DirLock::acquire(&config.dir)?;
        let sled_dir = config.dir.join("sled");
        let kv = Arc::new(KvStore::open(&sled_dir)?);
        let (wal, current, replayed) = recover(&config, &kv)?;
        let hub = Arc::new(WatchHub::new(current, config.watch_buffer));
        let (tx, rx) = mpsc::channel(config.write_queue.max(1));
        let health = Arc::new(HealthCell::default());
        let mut committer = Committer {
            wal,
            kv: kv.clone(),
            hub: hub.clone(),
            dir: config.dir.clone(),
            sled_dir,
            fsync: config.fsync,
            max_batch: config.max_batch.max(1),
            checkpoint_bytes: config.checkpoint_bytes,
            health: health.clone(),
            history_budget: config.history_budget,
        };
        if replayed || committer.wal.has_older_segments()? {
            // After a crash: make the replayed writes part of sled's durable state now and
            // delete the segments they came from, so WAL segments do not pile up over repeated
            // crashes — also when a crash fell between a checkpoint and the deletion of the
            // segments it covered (nothing to replay, but old segments left).
            committer.checkpoint()?;
        }
        let (committer_state, thread) = committer.start(rx)?;
        let shutdown = CancellationToken::new();
        let compactor = config.auto_compaction.enabled().then(|| {
            let policy = AutoCompactor::new(config.auto_compaction.clone());
            tokio::spawn(auto_compact(
                policy,
                config.clock.clone(),
                tx.clone(),
                kv.clone(),
                shutdown.clone(),
            ))
        });
        Ok(Store {
            requests: tx,
            committer_state,
            kv,
            hub,
            committer: Mutex::new(Some(thread)),
            compactor: Mutex::new(compactor),
            shutdown,
            health,
            dir: config.dir.clone(),
            _lock: lock,
        })
    }

    /// The bytes of history kept: versions replaced or deleted above the compaction point, and
    /// tombstones, counted as key + value bytes (bounded by [`StoreConfig::history_budget`]).
    pub fn history_bytes(&self) -> u64 {
        self.kv.history_bytes()
    }

    /// How the store's checkpoints are going (last success, failures in a row, last error).
    /// A store whose checkpoints keep failing no longer truncates its WAL.
    pub fn checkpoint_health(&self) -> CheckpointHealth {
        self.health.get()
    }

    /// Flushes and stops: queued writes are committed, sled is checkpointed (so the next open
    /// replays nothing), background tasks are joined and every watch ends. Later writes fail
    /// with [`Error::Closed`]. The directory is unlocked when the `Store` is dropped.
    pub async fn close(&self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(task) = take(&self.compactor) {
            // A panic in the compactor was already reported by Tokio; closing goes on.
            let _ = task.await;
        }
        let (reply, done) = oneshot::channel();
        let result = match self.requests.send(Request::Close { reply }).await {
            Ok(()) => done.await.unwrap_or(Err(Error::Closed)),
            Err(_) => Err(Error::Closed),
        };
        if let Some(thread) = take(&self.committer) {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(|e| Error::Io(std::io::Error::other(e)))?
                .map_err(|_| Error::Io(std::io::Error::other("store committer panicked")))?;
        }
        self.hub.close().await;
        result
    }

    async fn submit(&self, txn: Txn) -> Result<TxnResponse> {
        mvcc::validate_txn(&txn)?;
        // An idle store: commit on this thread, without waking the committer and back. Then
        // yield once, as awaiting the committer's answer did, so that a task writing in a
        // loop lets the others on its runtime run between writes.
        let txn = match self.committer_state.try_inline(txn) {
            Ok(result) => {
                tokio::task::yield_now().await;
                return result;
            }
            Err(txn) => txn,
        };
        let (reply, done) = oneshot::channel();
        self.committer_state.queue();
        if self
            .requests
            .send(Request::Write { txn, reply })
            .await
            .is_err()
        {
            self.committer_state.unqueue();
            return Err(Error::Closed);
        }
        done.await.map_err(|_| Error::Closed)?
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Without `close` the committer stops once every sender is gone; acknowledged writes
        // are already in the WAL, so nothing is lost.
        self.shutdown.cancel();
        self.hub.cancel();
    }
}

/// The bytes of the files under `dir` (sled's files and the WAL segments); unreadable entries
/// count as 0.
fn dir_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// The auto-compaction task: ticks the policy and asks the committer to compact.
async fn auto_compact(
    mut policy: AutoCompactor,
    clock: Arc<dyn Clock>,
    requests: mpsc::Sender<Request>,
    kv: Arc<KvStore>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(policy.interval());
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = shutdown.cancelled() => return,
        }
        let Some(rev) = policy.tick(clock.now(), kv.current(), kv.compacted()) else {
            continue;
        };
        let (reply, done) = oneshot::channel();
        if requests
            .send(Request::Compact { rev, reply })
            .await
            .is_err()
        {
            return;
        }
        match done.await {
            Ok(Ok(())) => tracing::debug!(%rev, "auto-compacted"),
            // Someone compacted further meanwhile: nothing to do.
            Ok(Err(Error::Compacted { .. })) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, %rev, "auto-compaction failed"),
            Err(_) => return,
        }
    }
}

#[async_trait]
impl Backend for Store {
    fn current_revision(&self) -> Revision {
        self.kv.current()
    }

    fn compacted_revision(&self) -> Revision {
        self.kv.compacted()
    }

    async fn get(&self, key: &[u8], revision: Option<Revision>) -> Result<GetResponse> {
        let latest = self.kv.read();
        let rev = read_revision(revision, self.kv.current(), self.kv.compacted())?;
        Ok(GetResponse {
            kv: self.kv.get(&latest, key, rev)?,
            revision: rev,
        })
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let latest = self.kv.read();
        let rev = read_revision(req.revision, self.kv.current(), self.kv.compacted())?;
        self.kv
            .range(&latest, &req.range, req.start.as_ref(), req.limit, rev)
    }

    async fn put(&self, key: Bytes, value: Bytes) -> Result<WriteResponse> {
        self.submit(mvcc::put_txn(key, value))
            .await
            .map(single_write_response)
    }

    async fn delete(&self, key: Bytes) -> Result<WriteResponse> {
        self.submit(mvcc::delete_txn(key))
            .await
            .map(single_write_response)
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.submit(txn).await
    }

    async fn watch(&self, req: WatchRequest) -> Result<Watcher> {
        let start = watch_start(req.start_revision, self.kv.current(), self.kv.compacted())?;
        let source: Arc<dyn EventSource> = self.kv.clone();
        self.hub.watch(source, req.range, start)
    }

    async fn key_history(&self, key: &[u8]) -> Result<crate::KeyHistory> {
        let kv = self.kv.clone();
        let key = key.to_vec();
        // Reads sled (and may wait for the indexer): off the async workers.
        tokio::task::spawn_blocking(move || kv.key_history(&key))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(format!("key history: {e}"))))?
    }

    fn checkpoint_health(&self) -> Option<CheckpointHealth> {
        Some(Store::checkpoint_health(self))
    }

    fn history_bytes(&self) -> Option<u64> {
        Some(Store::history_bytes(self))
    }

    fn size_on_disk(&self) -> Option<u64> {
        Some(dir_size(&self.dir))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let (reply, done) = oneshot::channel();
        self.requests
            .send(Request::Compact {
                rev: revision,
                reply,
            })
            .await
            .map_err(|_| Error::Closed)?;
        done.await.map_err(|_| Error::Closed)?
    }
}
