//! The committer: the one thread that writes, with group commit (etcd's apply loop in
//! `server/etcdserver/server.go` + `raft.go`, whose `Ready` batches share one WAL `fdatasync`,
//! and the batched backend of `server/storage/backend/batch_tx.go`).
//!
//! ```text
//!   put/delete/txn ──(bounded queue)──▶ committer thread
//!                                          │ 1. take every request that queued up (≤ max_batch)
//!                                          │ 2. evaluate each in order (mvcc.rs) against
//!                                          │    sled + this batch's own earlier writes,
//!                                          │    one new revision per changing write; append to WAL
//!                                          │ 3. WAL fdatasync, once for the batch
//!                                          │ 4. apply the batch to sled (write guard), bump current
//!                                          │ 5. acknowledge the writers
//!                                          │ 6. publish the batch's events to the watch hub
//!                                          └ 7. checkpoint when the WAL segment is big enough
//! ```
//!
//! Validation happens before a request is queued (`Store::txn`), so an invalid write never
//! reaches the log. A failed WAL write or sled apply stops the committer: every pending and
//! later write then fails (etcd panics in that case), the acknowledged ones are safe in the WAL.

use crate::codec::{self, Change};
use crate::kvstore::KvStore;
use crate::mvcc::{self, KvView};
use crate::revision::check_compact;
use crate::wal::Wal;
use crate::watch_hub::WatchHub;
use crate::{Error, Event, EventKind, KeyValue, Result, Revision, Txn, TxnResponse, checkpoint};
use bytes::Bytes;
use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// A message to the committer.
pub(crate) enum Request {
    /// A validated write.
    Write {
        txn: Txn,
        reply: oneshot::Sender<Result<TxnResponse>>,
    },
    /// Compact history below `rev`.
    Compact {
        rev: Revision,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Finish what is queued before this, checkpoint, and stop.
    Close { reply: oneshot::Sender<Result<()>> },
}

/// Everything the committer thread owns.
pub(crate) struct Committer {
    pub requests: mpsc::Receiver<Request>,
    pub wal: Wal,
    pub kv: Arc<KvStore>,
    pub hub: Arc<WatchHub>,
    /// The store directory (for the checkpoint file).
    pub dir: PathBuf,
    /// sled's directory (its files are fsynced at checkpoints).
    pub sled_dir: PathBuf,
    pub fsync: bool,
    pub max_batch: usize,
    pub checkpoint_bytes: u64,
}

/// The writes of one batch that are logged but not yet synced and applied.
#[derive(Default)]
struct Pending {
    /// Latest state of keys written in this batch (`None` = deleted).
    overlay: HashMap<Bytes, Option<KeyValue>>,
    /// Events of the batch, in revision order.
    events: Vec<Event>,
    /// Each revision and its slice of `events`.
    revisions: Vec<(Revision, Range<usize>)>,
    replies: Vec<(oneshot::Sender<Result<TxnResponse>>, Result<TxnResponse>)>,
}

/// Reads through the batch's own writes to sled.
struct BatchView<'a> {
    overlay: &'a HashMap<Bytes, Option<KeyValue>>,
    kv: &'a KvStore,
}

impl KvView for BatchView<'_> {
    fn current(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
        match self.overlay.get(key) {
            Some(state) => Ok(state.clone()),
            None => Ok(self.kv.latest(key)),
        }
    }
}

/// Whether the committer goes on after a batch.
enum Flow {
    Continue,
    Stop,
}

/// An error for each of several waiters (`std::io::Error` is not `Clone`).
fn copy_error(e: &Error) -> Error {
    match e {
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        other => Error::Corrupt(format!("store write failed: {other}")),
    }
}

impl Committer {
    /// Runs until `Close` or until every sender is gone.
    pub(crate) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.max_batch);
        while let Some(first) = self.requests.blocking_recv() {
            batch.push(first);
            while batch.len() < self.max_batch {
                match self.requests.try_recv() {
                    Ok(req) => batch.push(req),
                    Err(_) => break,
                }
            }
            if let Flow::Stop = self.process(&mut batch) {
                break;
            }
        }
        // Requests still queued get `Closed` when their reply senders drop with the channel.
        self.requests.close();
    }

    fn process(&mut self, batch: &mut Vec<Request>) -> Flow {
        let mut pending = Pending::default();
        let mut rev = self.kv.current();
        for req in batch.drain(..) {
            match req {
                Request::Write { txn, reply } => {
                    let mut view = BatchView {
                        overlay: &pending.overlay,
                        kv: &self.kv,
                    };
                    let out = match mvcc::evaluate_txn(&mut view, &txn, rev) {
                        Ok(out) => out,
                        Err(e) => {
                            pending.replies.push((reply, Err(e)));
                            continue;
                        }
                    };
                    if !out.events.is_empty() {
                        rev = out.response.revision;
                        self.wal
                            .append(|buf| codec::encode_write(buf, rev, &out.events));
                        for e in &out.events {
                            let state = (e.kind == EventKind::Put).then(|| e.kv.clone());
                            pending.overlay.insert(e.kv.key.clone(), state);
                        }
                        let start = pending.events.len();
                        pending.events.extend(out.events);
                        pending.revisions.push((rev, start..pending.events.len()));
                    }
                    pending.replies.push((reply, Ok(out.response)));
                }
                Request::Compact { rev: target, reply } => {
                    if let Flow::Stop = self.commit(std::mem::take(&mut pending)) {
                        return Flow::Stop;
                    }
                    let _ = reply.send(self.compact(target));
                }
                Request::Close { reply } => {
                    if let Flow::Stop = self.commit(std::mem::take(&mut pending)) {
                        return Flow::Stop;
                    }
                    let _ = reply.send(self.checkpoint());
                    return Flow::Stop;
                }
            }
        }
        match self.commit(pending) {
            Flow::Continue if self.wal.segment_bytes() >= self.checkpoint_bytes => {
                if let Err(e) = self.checkpoint() {
                    // The WAL still holds everything; the next checkpoint will try again.
                    tracing::error!(error = %e, "store checkpoint failed");
                }
                Flow::Continue
            }
            flow => flow,
        }
    }

    /// Syncs the WAL, applies the batch to sled, acknowledges and publishes.
    fn commit(&mut self, pending: Pending) -> Flow {
        if let Err(e) = self.sync_and_apply(&pending) {
            tracing::error!(error = %e, "store write failed; the store stops accepting writes");
            for (reply, _) in pending.replies {
                let _ = reply.send(Err(copy_error(&e)));
            }
            return Flow::Stop;
        }
        for (reply, result) in pending.replies {
            let _ = reply.send(result);
        }
        if let Some((last, _)) = pending.revisions.last() {
            self.hub.publish(&pending.events, *last);
        }
        Flow::Continue
    }

    fn sync_and_apply(&mut self, pending: &Pending) -> Result<()> {
        let Some((last, _)) = pending.revisions.last() else {
            return Ok(());
        };
        self.wal.sync()?;
        let mut latest = self.kv.write();
        for (rev, events) in &pending.revisions {
            let changes: Vec<Change> = pending.events[events.clone()]
                .iter()
                .map(Change::from_event)
                .collect();
            self.kv.apply(&mut latest, *rev, &changes)?;
        }
        self.kv.set_current(*last);
        Ok(())
    }

    fn compact(&mut self, rev: Revision) -> Result<()> {
        check_compact(rev, self.kv.current(), self.kv.compacted())?;
        self.wal.append(|buf| codec::encode_compact(buf, rev));
        self.wal.sync()?;
        let _write = self.kv.write();
        self.kv.compact(rev)
    }

    /// See `checkpoint.rs` for the steps and why each is there.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let rev = self.kv.current();
        let seq = self.wal.rotate()?;
        self.kv.db().flush()?;
        if self.fsync {
            checkpoint::sync_all_files(&self.sled_dir)?;
        }
        checkpoint::write(&self.dir, rev, self.fsync)?;
        self.wal.remove_before(seq)
    }
}
