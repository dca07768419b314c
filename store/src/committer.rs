//! The committer: the one thread that orders and logs writes, with group commit (etcd's apply
//! loop in `server/etcdserver/server.go` + `raft.go`, whose `Ready` batches share one WAL
//! `fdatasync`, and the batched backend of `server/storage/backend/batch_tx.go`).
//!
//! ```text
//!   put/delete/txn ──(bounded queue)──▶ committer thread
//!                                          │ 1. take every request that queued up (≤ max_batch)
//!                                          │ 2. evaluate each in order (mvcc.rs) against
//!                                          │    sled + the writes still in the pipeline,
//!                                          │    one new revision per changing write; append to WAL
//!                                          │ 3. write the batch to the WAL segment (no sync yet)
//!                                          │ 4. hand it to the syncer (syncer.rs): fdatasync,
//!                                          │    apply, acknowledge, publish — while this thread
//!                                          │    goes on with the next batch (sled is
//!                                          │    written after, by the indexer)
//!                                          └ 5. checkpoint when the WAL segment is big enough
//!                                               (in the background, checkpoint.rs)
//! ```
//!
//! A batch of one write with nothing in the pipeline (a lone writer), and every batch when
//! fsync is off, is synced, applied and acknowledged right here instead: handing it on would
//! only add a thread wake-up.
//!
//! A writer that finds the store idle (nothing queued for this thread, nothing in the pipeline,
//! the state unlocked) commits its write itself, on its own thread ([`Shared::try_inline`]):
//! on a VM, waking an idle CPU twice per write (to the committer and back) costs about as much
//! as the rest of the write after its `fdatasync`. The committer's state is behind a mutex for
//! this; the committer thread takes it for each batch. The writer's task blocks for the sync
//! (~0.15 ms), as a write in etcd's raft loop waits for its WAL sync; under load writes queue
//! here and are group-committed as before.
//!
//! Validation happens before a request is queued (`Store::txn`), so an invalid write never
//! reaches the log. A failed WAL write, sync or sled apply stops the committer: every pending
//! and later write then fails (etcd panics in that case), the acknowledged ones are safe in the
//! WAL.

use crate::checkpoint::{self, HealthCell};
use crate::codec;
use crate::indexer;
use crate::kvstore::KvStore;
use crate::mvcc::{self, KvView};
use crate::revision::check_compact;
use crate::syncer::{self, Applier, Item, Logged, Pipeline, Reply};
use crate::wal::{self, Wal};
use crate::watch_hub::WatchHub;
use crate::{Error, EventKind, KeyValue, Result, Revision, Txn, TxnResponse};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use tokio::sync::{mpsc, oneshot};

/// How long the committer polls for the next request before it parks.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

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
    /// Where checkpoints record how they went.
    pub health: Arc<HealthCell>,
    /// The most bytes of history kept before the oldest is compacted (`StoreConfig`).
    pub history_budget: Option<u64>,
}

/// The committer's own state while it runs.
struct Running {
    c: Committer,
    /// To the syncer (bounded: the committer waits when the syncer is far behind).
    syncer: std::sync::mpsc::SyncSender<Item>,
    syncer_thread: Option<JoinHandle<()>>,
    /// What the inline path applies with (shares the indexer queue with the syncer).
    applier: Applier,
    indexer_thread: Option<JoinHandle<()>>,
    pipeline: Arc<Pipeline>,
    /// The last revision given out (ahead of `kv.current()` while batches are in the pipeline).
    rev: Revision,
    /// The latest state of every key written by a batch not yet applied, with its revision
    /// (`None` = deleted): what the next evaluations must see instead of sled.
    overlay: HashMap<Bytes, (Revision, Option<KeyValue>)>,
    /// The keys of each batch handed to the syncer, by the batch's last revision, to prune
    /// `overlay` once the batch is applied.
    handed: VecDeque<(Revision, Vec<Bytes>)>,
    /// The background checkpoint, if one runs.
    checkpointing: Option<JoinHandle<Result<()>>>,
    /// Set when the committer has stopped (closed or failed): later writes fail.
    stopped: bool,
}

/// The committer's state, shared by its thread and the writers that commit inline.
pub(crate) struct Shared {
    running: std::sync::Mutex<Running>,
    /// Writes sent to the committer thread and not yet taken into a batch (a writer only
    /// commits inline when this is 0, so it does not overtake a queued write).
    queued: AtomicUsize,
    /// The number of writes in the committer thread's last batch of writes. Above 1, writers
    /// are concurrent and group commit serves them better: a write committed inline would
    /// make the others wait for its sync instead of sharing one.
    last_batch: AtomicUsize,
    pipeline: Arc<Pipeline>,
}

impl Shared {
    /// Counts a write about to be sent to the committer thread.
    pub(crate) fn queue(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// Uncounts a write whose send failed.
    pub(crate) fn unqueue(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// Commits a validated `txn` on the caller's thread if the store is idle: nothing queued
    /// for the committer thread, its last batch not a group, nothing in the pipeline, the state
    /// unlocked and no checkpoint due. Gives the `txn` back otherwise (the caller then queues
    /// it).
    pub(crate) fn try_inline(&self, txn: Txn) -> std::result::Result<Result<TxnResponse>, Txn> {
        if self.queued.load(Ordering::Acquire) != 0
            || self.last_batch.load(Ordering::Relaxed) > 1
            || self.pipeline.in_flight.load(Ordering::Acquire) != 0
        {
            return Err(txn);
        }
        // Busy (or poisoned: the committer thread then reports it): queue instead.
        let Ok(mut running) = self.running.try_lock() else {
            return Err(txn);
        };
        if running.stopped || running.failed() {
            return Ok(Err(Error::Closed));
        }
        // Only the lock holder hands batches on, so nothing can enter the pipeline now; a due
        // checkpoint (which waits for the syncer and rotates the WAL) is the thread's job.
        if self.pipeline.in_flight.load(Ordering::Acquire) != 0
            || running.c.wal.segment_bytes() >= running.c.checkpoint_bytes
            || running.over_history_budget().is_some()
        {
            return Err(txn);
        }
        let (reply, mut done) = oneshot::channel();
        let mut batch = Batch::default();
        running.evaluate(&mut batch, txn, reply);
        // The indexer thread indexes it: this thread's caller is waiting.
        if let Flow::Stop = running.commit(batch, false) {
            running.stopped = true;
        }
        Ok(done.try_recv().unwrap_or(Err(Error::Closed)))
    }
}

/// Reads through the writes still in the pipeline to the applied state.
struct PipelineView<'a> {
    overlay: &'a HashMap<Bytes, (Revision, Option<KeyValue>)>,
    kv: &'a KvStore,
}

impl KvView for PipelineView<'_> {
    fn current(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
        match self.overlay.get(key) {
            Some((_, state)) => Ok(state.clone()),
            None => Ok(self.kv.latest(key)),
        }
    }
}

/// Whether the committer goes on after a batch.
enum Flow {
    Continue,
    Stop,
}

/// A batch being evaluated.
#[derive(Default)]
struct Batch {
    events: Vec<crate::Event>,
    revisions: Vec<(Revision, std::ops::Range<usize>)>,
    replies: Vec<Reply>,
    /// Keys it writes.
    keys: Vec<Bytes>,
}

impl Committer {
    /// Checkpoints synchronously (at open, after a recovery).
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let rev = self.kv.current();
        let result = self.wal.rotate().and_then(|seq| {
            make_checkpoint(&self.kv, &self.sled_dir, &self.dir, self.fsync, rev, seq)
        });
        self.health.record(rev, &result);
        result
    }

    /// Starts the committer thread (and the syncer and indexer threads); it runs until
    /// `Close` or until every sender of `requests` is gone.
    pub(crate) fn start(
        self,
        requests: mpsc::Receiver<Request>,
    ) -> std::io::Result<(Arc<Shared>, JoinHandle<()>)> {
        let pipeline = Arc::new(Pipeline::default());
        let (index_tx, index_rx) = std::sync::mpsc::sync_channel(256);
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (kv, indexer_queued) = (self.kv.clone(), queued.clone());
        let indexer_thread = std::thread::Builder::new()
            .name("store-indexer".into())
            .spawn(move || indexer::run(kv, index_rx, indexer_queued))?;
        let applier = Applier {
            kv: self.kv.clone(),
            hub: self.hub.clone(),
            indexer: index_tx,
            queued: queued.clone(),
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(64);
        let syncer = syncer::Syncer {
            items: rx,
            applier: applier.clone(),
            pipeline: pipeline.clone(),
            fsync: self.fsync,
        };
        let syncer_thread = std::thread::Builder::new()
            .name("store-syncer".into())
            .spawn(move || syncer.run())?;
        let rev = self.kv.current();
        let max_batch = self.max_batch;
        let running = Running {
            c: self,
            syncer: tx,
            syncer_thread: Some(syncer_thread),
            applier,
            indexer_thread: Some(indexer_thread),
            pipeline,
            rev,
            overlay: HashMap::new(),
            handed: VecDeque::new(),
            checkpointing: None,
            stopped: false,
        };
        let shared = Arc::new(Shared {
            pipeline: running.pipeline.clone(),
            running: std::sync::Mutex::new(running),
            queued: AtomicUsize::new(0),
            last_batch: AtomicUsize::new(0),
        });
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("store-committer".into())
            .spawn(move || run(&state, requests, max_batch))?;
        Ok((shared, thread))
    }
}

/// Waits for the next request: polls for a short while first, because parking the thread
/// makes the next write pay a wake-up of an idle CPU (tens of µs on a VM), and a writer
/// that just got its answer usually sends again within a few µs.
fn next_request(requests: &mut mpsc::Receiver<Request>) -> Option<Request> {
    let deadline = std::time::Instant::now() + SPIN;
    loop {
        match requests.try_recv() {
            Ok(req) => return Some(req),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) if std::time::Instant::now() < deadline => {
                std::hint::spin_loop();
            }
            Err(mpsc::error::TryRecvError::Empty) => return requests.blocking_recv(),
        }
    }
}

/// The committer thread: takes every request that queued up and processes them as a batch
/// under the state lock, until `Close`, a failure, or every sender is gone.
fn run(shared: &Shared, mut requests: mpsc::Receiver<Request>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    let mut running = None;
    while let Some(first) = next_request(&mut requests) {
        batch.push(first);
        while batch.len() < max_batch {
            match requests.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        let writes = batch
            .iter()
            .filter(|r| matches!(r, Request::Write { .. }))
            .count();
        shared.queued.fetch_sub(writes, Ordering::AcqRel);
        if writes > 0 {
            shared.last_batch.store(writes, Ordering::Relaxed);
        }
        // A poisoned lock means a writer panicked mid-commit: stop (queued writes get `Closed`).
        let Ok(mut state) = shared.running.lock() else {
            tracing::error!("a store write panicked; the store stops accepting writes");
            return;
        };
        let flow = state.process(&mut batch);
        if let Flow::Stop = flow {
            running = Some(state);
            break;
        }
    }
    // Requests still queued get `Closed` when their reply senders drop with the channel.
    requests.close();
    let mut state = match running {
        Some(state) => state,
        None => match shared.running.lock() {
            Ok(state) => state,
            Err(_) => return,
        },
    };
    state.stopped = true;
    state.stop_syncer();
    // Its outcome is recorded (and a failure logged) by the checkpoint itself.
    let _ = state.join_checkpoint();
}

impl Running {
    /// Stops the syncer, then the indexer, each once it has done what was queued (dropping
    /// the last sender ends each).
    fn stop_syncer(&mut self) {
        let (dead, _) = std::sync::mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.syncer, dead));
        if let Some(t) = self.syncer_thread.take()
            && t.join().is_err()
        {
            tracing::error!("store syncer thread panicked");
        }
        let (dead, _) = std::sync::mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.applier.indexer, dead));
        if let Some(t) = self.indexer_thread.take()
            && t.join().is_err()
        {
            tracing::error!("store indexer thread panicked");
        }
    }

    fn failed(&self) -> bool {
        self.pipeline.failed.load(Ordering::Acquire)
    }

    fn process(&mut self, requests: &mut Vec<Request>) -> Flow {
        if self.failed() {
            return Flow::Stop;
        }
        // History over its budget is compacted before more is written.
        self.enforce_history_budget();
        let mut batch = Batch::default();
        for req in requests.drain(..) {
            match req {
                Request::Write { txn, reply } => self.evaluate(&mut batch, txn, reply),
                Request::Compact { rev: target, reply } => {
                    if let Flow::Stop = self.commit(std::mem::take(&mut batch), true) {
                        return Flow::Stop;
                    }
                    let result = self.drain().and_then(|()| self.compact(target));
                    let _ = reply.send(result);
                }
                Request::Close { reply } => {
                    if let Flow::Stop = self.commit(std::mem::take(&mut batch), true) {
                        return Flow::Stop;
                    }
                    let result = self.drain().and_then(|()| {
                        // A failed background checkpoint is recorded; this one tries again.
                        let _ = self.join_checkpoint();
                        self.c.checkpoint()
                    });
                    let _ = reply.send(result);
                    return Flow::Stop;
                }
            }
        }
        if let Flow::Stop = self.commit(batch, true) {
            return Flow::Stop;
        }
        self.enforce_history_budget();
        if self.c.wal.segment_bytes() >= self.c.checkpoint_bytes
            && self
                .checkpointing
                .as_ref()
                .is_none_or(JoinHandle::is_finished)
        {
            // A failed checkpoint is recorded (`HealthCell`); the WAL still holds everything,
            // and this one tries again.
            let _ = self.join_checkpoint();
            self.start_checkpoint();
        }
        Flow::Continue
    }

    fn evaluate(
        &mut self,
        batch: &mut Batch,
        txn: Txn,
        reply: oneshot::Sender<Result<TxnResponse>>,
    ) {
        let mut view = PipelineView {
            overlay: &self.overlay,
            kv: &self.c.kv,
        };
        let out = match mvcc::evaluate_txn(&mut view, &txn, self.rev) {
            Ok(out) => out,
            Err(e) => {
                batch.replies.push((reply, Err(e)));
                return;
            }
        };
        if !out.events.is_empty() {
            let rev = out.response.revision;
            self.rev = rev;
            self.c
                .wal
                .append(|buf| codec::encode_write(buf, rev, &out.events));
            for e in &out.events {
                let state = (e.kind == EventKind::Put).then(|| e.kv.clone());
                self.overlay.insert(e.kv.key.clone(), (rev, state));
                batch.keys.push(e.kv.key.clone());
            }
            let start = batch.events.len();
            batch.events.extend(out.events);
            batch.revisions.push((rev, start..batch.events.len()));
        }
        batch.replies.push((reply, Ok(out.response)));
    }

    /// Writes the batch to the WAL and either commits it here (a lone write, nothing in the
    /// pipeline) or hands it to the syncer. `index_here`: a batch committed here is also
    /// indexed here, after its writers are answered (else by the indexer thread).
    fn commit(&mut self, batch: Batch, index_here: bool) -> Flow {
        if batch.replies.is_empty() {
            return Flow::Continue;
        }
        if let Err(e) = self.c.wal.write_out() {
            return self.stop_with(batch.replies, &e);
        }
        let last = self.rev;
        let logged = Logged {
            segment: self.c.wal.segment(),
            events: batch.events,
            revisions: batch.revisions,
            replies: batch.replies,
        };
        let idle = self.pipeline.in_flight.load(Ordering::Acquire) == 0;
        // Without fsync there is no sync to overlap with: handing on would only cost wake-ups.
        if idle && (logged.replies.len() == 1 || !self.c.fsync) {
            // Nothing is in flight, so every earlier write is already durable.
            let changed = !logged.revisions.is_empty();
            if changed && let Err(e) = wal::sync_segment(&logged.segment, self.c.fsync) {
                return self.stop_with(logged.replies, &e);
            }
            if let Err(e) = self.applier.apply_and_ack(logged, index_here) {
                tracing::error!(error = %e, "store apply failed; the store stops accepting writes");
                self.pipeline.failed.store(true, Ordering::Release);
                return Flow::Stop;
            }
        } else {
            self.pipeline.in_flight.fetch_add(1, Ordering::AcqRel);
            if let Err(std::sync::mpsc::SendError(Item::Batch(logged))) =
                self.syncer.send(Item::Batch(logged))
            {
                self.pipeline.in_flight.fetch_sub(1, Ordering::AcqRel);
                return self.stop_with(logged.replies, &Error::Closed);
            }
            self.handed.push_back((last, batch.keys));
        }
        self.prune();
        Flow::Continue
    }

    /// Drops the overlay entries of batches the syncer has applied.
    fn prune(&mut self) {
        if self.pipeline.in_flight.load(Ordering::Acquire) == 0 {
            self.overlay.clear();
            self.handed.clear();
            return;
        }
        let applied = self.c.kv.current();
        while let Some((last, _)) = self.handed.front() {
            if *last > applied {
                break;
            }
            let (last, keys) = self.handed.pop_front().unwrap_or_default();
            for key in keys {
                if self.overlay.get(&key).is_some_and(|(rev, _)| *rev <= last) {
                    self.overlay.remove(&key);
                }
            }
        }
    }

    fn stop_with(&mut self, replies: Vec<Reply>, e: &Error) -> Flow {
        tracing::error!(error = %e, "store write failed; the store stops accepting writes");
        syncer::fail(replies, e);
        self.pipeline.failed.store(true, Ordering::Release);
        Flow::Stop
    }

    /// Waits until the syncer has done everything handed to it.
    fn drain(&mut self) -> Result<()> {
        let (done, wait) = std::sync::mpsc::channel();
        let healthy = self.syncer.send(Item::Barrier(done)).is_ok() && wait.recv() == Ok(true);
        self.prune();
        if healthy {
            Ok(())
        } else {
            Err(Error::Corrupt("store write failed".into()))
        }
    }

    /// The budget, if the kept history is over it.
    fn over_history_budget(&self) -> Option<u64> {
        self.c
            .history_budget
            .filter(|budget| self.c.kv.history_bytes() > *budget)
    }

    /// Compacts the oldest history when the kept history is over its budget, down to three
    /// quarters of the budget (so that a stream of writes compacts once per quarter of it, not
    /// at every write). Watches and reads from below the new compaction point then get
    /// `Compacted`, as after any compaction.
    fn enforce_history_budget(&mut self) {
        if self.over_history_budget().is_none() {
            return;
        }
        // Everything handed on is applied (and counted) first.
        if let Err(e) = self.drain() {
            tracing::warn!(error = %e, "store history over its budget not compacted");
            return;
        }
        let Some(budget) = self.over_history_budget() else {
            return;
        };
        let kept = self.c.kv.history_bytes();
        let Some(target) = self.c.kv.history_target(budget / 4 * 3) else {
            return;
        };
        if target <= self.c.kv.compacted() {
            return;
        }
        match self.compact(target) {
            Ok(()) => tracing::info!(
                %target,
                kept,
                budget,
                left = self.c.kv.history_bytes(),
                "store history over its budget: compacted early"
            ),
            Err(e) => {
                tracing::warn!(error = %e, %target, "store history over its budget not compacted")
            }
        }
    }

    fn compact(&mut self, rev: Revision) -> Result<()> {
        check_compact(rev, self.c.kv.current(), self.c.kv.compacted())?;
        self.c.wal.append(|buf| codec::encode_compact(buf, rev));
        self.c.wal.sync()?;
        // The indexer first (it needs sled's writer lock to catch up), then sled's writer lock
        // (a running checkpoint may hold it while it syncs sled's files), and only then the
        // write guard, so readers do not wait for a checkpoint.
        self.c.kv.wait_indexed(self.c.kv.current())?;
        let _writing = self.c.kv.sled_writer();
        let _write = self.c.kv.write();
        self.c.kv.compact(rev)
    }

    /// Rotates the WAL and checkpoints on a background thread (see `checkpoint.rs`): sled's
    /// flush and the fsync of its files no longer stall the committer. The outcome is recorded
    /// in the checkpoint health.
    fn start_checkpoint(&mut self) {
        let mut rev = self.c.kv.current();
        let started = self.drain().and_then(|()| {
            rev = self.c.kv.current();
            let seq = self.c.wal.rotate()?;
            let (kv, sled_dir, dir, fsync, health) = (
                self.c.kv.clone(),
                self.c.sled_dir.clone(),
                self.c.dir.clone(),
                self.c.fsync,
                self.c.health.clone(),
            );
            let checkpoint = move || {
                let result = make_checkpoint(&kv, &sled_dir, &dir, fsync, rev, seq);
                health.record(rev, &result);
                result
            };
            self.checkpointing = Some(
                std::thread::Builder::new()
                    .name("store-checkpoint".into())
                    .spawn(checkpoint)?,
            );
            Ok(())
        });
        if let Err(e) = started {
            self.c.health.record(rev, &Err(e));
        }
    }

    /// Waits for the background checkpoint, if any; returns its result (already recorded in
    /// the checkpoint health, but for a panic, which is recorded here).
    fn join_checkpoint(&mut self) -> Option<Result<()>> {
        let handle = self.checkpointing.take()?;
        Some(handle.join().unwrap_or_else(|_| {
            let e = Error::Corrupt("store checkpoint panicked".into());
            let result = Err(e);
            self.c.health.record(self.c.kv.current(), &result);
            result
        }))
    }
}

/// Steps 2–5 of a checkpoint (`checkpoint.rs`): everything up to `rev` is applied to sled and
/// every later record is in segment `seq` or after.
fn make_checkpoint(
    kv: &KvStore,
    sled_dir: &std::path::Path,
    dir: &std::path::Path,
    fsync: bool,
    rev: Revision,
    seq: u64,
) -> Result<()> {
    kv.wait_indexed(rev)?;
    {
        // No sled writes from the flush until its files are synced: the files synced are then
        // the flushed state (every revision up to `rev`, maybe a few after), not a mix of it
        // and the indexer's later writes, which create and delete sled's blob files.
        let _quiet = kv.sled_writer();
        kv.db().flush()?;
        if fsync {
            checkpoint::sync_all_files(sled_dir)?;
        }
    }
    checkpoint::write(dir, rev, fsync)?;
    wal::remove_segments_before(&dir.join("wal"), seq, fsync)
}
