//! The syncer: the second stage of the pipelined commit. It `fdatasync`s the WAL for the
//! batches the committer has written, then applies them to the latest versions in memory,
//! publishes their events, acknowledges their writers and hands them to the indexer (which
//! writes sled), in order (etcd overlaps the same way: raft's `Ready`
//! loop hands entries to the apply loop while the next WAL batch is saved,
//! `server/etcdserver/raft.go` `start`).
//!
//! ```text
//!   committer: evaluate batch N+1, write it to the WAL ─┐      (the page cache, no sync)
//!                                                      ▼
//!   syncer:    fdatasync (covers N, N+1, … whatever is queued) ─▶ apply each ─▶ publish ─▶ ack
//! ```
//!
//! One `fdatasync` covers every batch queued while the previous one ran, so under load the
//! disk's sync time and the committer's CPU work overlap instead of adding up. A lone write
//! skips this stage (the committer commits it inline, one thread hand-off fewer).
//!
//! A failed sync or apply fails that batch and every later one, and sets the shared `failed`
//! flag, on which the committer stops taking writes (etcd panics instead).

use crate::codec::Change;
use crate::indexer::{self, Indexed};
use crate::kvstore::KvStore;
use crate::wal::sync_segment;
use crate::watch_hub::WatchHub;
use crate::{Error, Event, Result, Revision, TxnResponse};
use std::fs::File;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use tokio::sync::oneshot;

/// A writer waiting for its answer, and the answer it gets once its batch is durable.
pub(crate) type Reply = (oneshot::Sender<Result<TxnResponse>>, Result<TxnResponse>);

/// A batch written to a WAL segment (not necessarily synced yet).
pub(crate) struct Logged {
    /// The segment its records were written to.
    pub segment: Arc<File>,
    /// Its events, in revision order.
    pub events: Vec<Event>,
    /// Each revision and its slice of `events`.
    pub revisions: Vec<(Revision, Range<usize>)>,
    /// Every request of the batch, changing or not, in order.
    pub replies: Vec<Reply>,
}

/// What the committer sends to the syncer.
pub(crate) enum Item {
    /// A logged batch to sync, apply, acknowledge and publish.
    Batch(Logged),
    /// Answered (with "still healthy") once every earlier item is done.
    Barrier(Sender<bool>),
}

/// State shared by the committer and the syncer.
#[derive(Default)]
pub(crate) struct Pipeline {
    /// Batches handed to the syncer and not yet done.
    pub in_flight: AtomicUsize,
    /// Set when a sync or an apply failed; the store then takes no more writes.
    pub failed: AtomicBool,
}

/// An error for each of several waiters (`std::io::Error` is not `Clone`).
pub(crate) fn copy_error(e: &Error) -> Error {
    match e {
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        other => Error::Corrupt(format!("store write failed: {other}")),
    }
}

/// Where a durable batch goes: memory, the watch hub, the indexer.
#[derive(Clone)]
pub(crate) struct Applier {
    pub kv: Arc<KvStore>,
    pub hub: Arc<WatchHub>,
    /// To the indexer thread (bounded: a slow sled slows the syncer, not memory).
    pub indexer: SyncSender<Indexed>,
    /// Batches sent to the indexer and not yet indexed.
    pub queued: Arc<AtomicUsize>,
}

impl Applier {
    /// Applies a durable batch to the latest versions in memory, hands it to the indexer, then
    /// publishes and acknowledges it. If the indexer is gone every writer of the batch gets an
    /// error, which is returned.
    ///
    /// With `index_here` and nothing queued for the indexer (the committer's inline path: a
    /// lone writer), sled is written on this thread after the writer is answered, overlapping
    /// the writer's next request instead of waking the indexer thread for every write.
    pub(crate) fn apply_and_ack(&self, batch: Logged, index_here: bool) -> Result<()> {
        let Some((last, _)) = batch.revisions.last().cloned() else {
            ack(batch.replies);
            return Ok(());
        };
        let changes = self.apply_latest(&batch, last);
        // Only this thread sends to the indexer now (the syncer is idle when the committer
        // commits inline), so `queued == 0` means every earlier revision is indexed.
        // A checkpoint holding sled's writers off (while it syncs sled's files) would block
        // this writer's thread: the indexer thread takes the batch then.
        let writer = if index_here && self.queued.load(Ordering::Acquire) == 0 {
            self.kv.try_sled_writer()
        } else {
            None
        };
        let index_now = if let Some(writer) = writer {
            Some((changes, writer))
        } else {
            self.queued.fetch_add(1, Ordering::AcqRel);
            if self.indexer.send(changes).is_err() {
                let e = Error::Corrupt("store indexer stopped".into());
                fail(batch.replies, &e);
                return Err(e);
            }
            None
        };
        // Watchers first (the events are durable and applied): the writers' tasks are woken
        // after, so a watch event does not queue behind its own writer (etcd's watchable store
        // also notifies at the end of the write txn, before the response).
        self.hub.publish(&batch.events, last);
        ack(batch.replies);
        match index_now {
            Some((changes, writer)) => indexer::index_batch_with(&self.kv, &changes, writer),
            None => Ok(()),
        }
    }

    /// Applies the batch to the latest versions in memory and sets the current revision to
    /// `last`; returns its changes by revision, for the indexer.
    fn apply_latest(&self, batch: &Logged, last: Revision) -> Indexed {
        let mut latest = self.kv.write();
        let changes = batch
            .revisions
            .iter()
            .map(|(rev, events)| {
                let c: Vec<Change> = batch.events[events.clone()]
                    .iter()
                    .map(Change::from_event)
                    .collect();
                self.kv.apply_to_latest(&mut latest, *rev, &c);
                (*rev, c)
            })
            .collect();
        self.kv.set_current(last);
        changes
    }
}

/// Answers every writer with its result.
fn ack(replies: Vec<Reply>) {
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
}

/// Answers every writer with (a copy of) `e`.
pub(crate) fn fail(replies: Vec<Reply>, e: &Error) {
    for (reply, _) in replies {
        let _ = reply.send(Err(copy_error(e)));
    }
}

/// The syncer thread's state.
pub(crate) struct Syncer {
    pub items: Receiver<Item>,
    pub applier: Applier,
    pub pipeline: Arc<Pipeline>,
    pub fsync: bool,
}

impl Syncer {
    /// Runs until the committer drops its sender.
    pub(crate) fn run(self) {
        let mut items = Vec::new();
        while let Ok(first) = self.items.recv() {
            items.push(first);
            items.extend(self.items.try_iter());
            self.process(&mut items);
        }
    }

    fn process(&self, items: &mut Vec<Item>) {
        let mut error = None;
        if !self.pipeline.failed.load(Ordering::Acquire) {
            // Segments are written in order, so syncing each one met once covers every batch.
            let mut synced: Option<&Arc<File>> = None;
            for item in items.iter() {
                if let Item::Batch(b) = item
                    && !synced.is_some_and(|s| Arc::ptr_eq(s, &b.segment))
                {
                    if let Err(e) = sync_segment(&b.segment, self.fsync) {
                        error = Some(e);
                        break;
                    }
                    synced = Some(&b.segment);
                }
            }
        }
        if let Some(e) = &error {
            tracing::error!(error = %e, "store WAL sync failed; the store stops accepting writes");
            self.pipeline.failed.store(true, Ordering::Release);
        }
        for item in items.drain(..) {
            match item {
                Item::Batch(batch) => {
                    if self.pipeline.failed.load(Ordering::Acquire) {
                        let e = error.as_ref().map_or_else(
                            || Error::Corrupt("store write failed".into()),
                            copy_error,
                        );
                        fail(batch.replies, &e);
                    } else if let Err(e) = self.applier.apply_and_ack(batch, false) {
                        tracing::error!(error = %e, "store apply failed; the store stops accepting writes");
                        self.pipeline.failed.store(true, Ordering::Release);
                    }
                    self.pipeline.in_flight.fetch_sub(1, Ordering::AcqRel);
                }
                Item::Barrier(done) => {
                    let _ = done.send(!self.pipeline.failed.load(Ordering::Acquire));
                }
            }
        }
    }
}
