//! The indexer: writes acknowledged revisions into sled's `revs` tree and the keys' in-memory
//! revisions (`kvstore.rs`), off the write path (etcd's backend does the same with its batch
//! transaction: writes are visible from an in-memory buffer at once and committed to bbolt in
//! the background, `server/storage/backend/batch_tx.go`, `tx_buffer.go`).
//!
//! ```text
//!   syncer: fdatasync ─▶ apply to `latest` (memory) ─▶ publish ─▶ ack ─▶ send (rev, changes) ─┐
//!   indexer thread:  for each revision in order: sled insert into revs, note its keys ◀─────────┘
//!                    └▶ indexed = rev, wake readers of history waiting for it
//! ```
//!
//! A lone writer's changes skip this thread: when nothing is queued here, the committer writes
//! them to sled itself right after answering the writer (one thread wake-up fewer per write).
//!
//! Only reads of history need sled (a get or range at an older revision, a watch replaying
//! from the past, compaction, checkpoints); they wait for the indexer to reach their revision
//! (`KvStore::wait_indexed`), which is at most the batches still queued here. The queue is
//! bounded, so a slow sled slows the syncer instead of growing memory. Durability does not
//! depend on this thread: the WAL holds every acknowledged write, and a checkpoint waits for
//! the indexer before it flushes sled.

use crate::codec::Change;
use crate::kvstore::KvStore;
use crate::{Error, Result, Revision};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

/// The changes of one applied batch, by revision.
pub(crate) type Indexed = Vec<(Revision, Vec<Change>)>;

/// How long the indexer sleeps between looks at its queue while writes keep coming.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Empty looks after which the indexer blocks on its queue again (the store is idle).
const IDLE_POLLS: u32 = 5;

/// Runs until every sender is gone.
/// `queued` counts the batches sent and not yet indexed (see `Applier::apply_and_ack`).
///
/// Under a stream of writes the thread does not block on its queue after each batch (every
/// commit would then wake it: ~11,000 wake-ups in a 10,000-pod apply, each also preempting a
/// request worker on a small machine). It sleeps [`POLL_INTERVAL`] and takes whatever was
/// queued meanwhile, as etcd's backend commits its batch transaction on an interval
/// (`batchInterval`, 100 ms); after [`IDLE_POLLS`] empty looks it blocks until the next
/// batch. History reads wait at most one interval longer for their revision.
pub(crate) fn run(kv: Arc<KvStore>, batches: Receiver<Indexed>, queued: Arc<AtomicUsize>) {
    let mut failed = false;
    let mut index = |batch: Indexed| {
        if !failed {
            failed = index_batch(&kv, &batch).is_err();
        }
        queued.fetch_sub(1, Ordering::AcqRel);
    };
    while let Ok(batch) = batches.recv() {
        index(batch);
        let mut empty_polls = 0;
        while empty_polls < IDLE_POLLS {
            let mut took = false;
            loop {
                match batches.try_recv() {
                    Ok(batch) => {
                        index(batch);
                        took = true;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            empty_polls = if took { 0 } else { empty_polls + 1 };
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

/// Writes one batch's changes to sled and moves `indexed` to its last revision (or records
/// the failure, which history reads then report).
pub(crate) fn index_batch(kv: &KvStore, batch: &Indexed) -> Result<()> {
    index_batch_with(kv, batch, kv.sled_writer())
}

/// [`index_batch`] with sled's writer lock (`KvStore::sled_writer`) already taken.
pub(crate) fn index_batch_with(
    kv: &KvStore,
    batch: &Indexed,
    writing: std::sync::MutexGuard<'_, ()>,
) -> Result<()> {
    let Some((last, _)) = batch.last() else {
        return Ok(());
    };
    let result = batch
        .iter()
        .try_for_each(|(rev, changes)| kv.index(*rev, changes));
    drop(writing);
    let failed = result.is_err();
    kv.set_indexed(result.map(|()| *last));
    if failed {
        return Err(Error::Corrupt("store indexing failed".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;
    use bytes::Bytes;
    use std::sync::mpsc::sync_channel;

    fn put(rev: u64) -> (Revision, Vec<Change>) {
        let change = Change {
            kind: EventKind::Put,
            key: Bytes::from(format!("/k/{}", rev % 7)),
            value: Bytes::from(format!("v{rev}")),
            create: Revision(1),
            version: rev,
            prev_mod: Revision(rev - 1),
        };
        (Revision(rev), vec![change])
    }

    #[test]
    fn batches_queued_while_the_indexer_sleeps_are_all_indexed_in_order_and_it_ends_with_its_senders()
     {
        let dir = tempfile::tempdir().expect("temp dir");
        let kv = Arc::new(KvStore::open(dir.path()).expect("open sled"));
        // As the store does after recovery: nothing is indexed yet, so `wait_indexed` below
        // waits for the indexer (a freshly opened `KvStore` counts everything as indexed).
        kv.reset_indexed(Revision::ZERO);
        let (tx, rx) = sync_channel(256);
        let queued = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (kv, queued) = (kv.clone(), queued.clone());
            std::thread::spawn(move || run(kv, rx, queued))
        };
        // Bursts with pauses longer than the idle polling in between: the indexer indexes
        // some batches as it wakes from blocking and some while polling.
        let mut rev = 0;
        for burst in 0..4 {
            for _ in 0..40 {
                rev += 1;
                queued.fetch_add(1, Ordering::AcqRel);
                tx.send(vec![put(rev)]).expect("indexer alive");
            }
            kv.wait_indexed(Revision(rev)).expect("indexed");
            if burst % 2 == 1 {
                std::thread::sleep(POLL_INTERVAL * (IDLE_POLLS + 2));
            }
        }
        // Every revision is in sled: each key at each revision holds the value written then.
        // (Reads at any revision but the current one come from sled, not from memory.)
        kv.set_current(Revision(rev + 1));
        let latest = kv.read();
        for r in 1..=rev {
            let key = format!("/k/{}", r % 7);
            let found = kv.get(&latest, key.as_bytes(), Revision(r)).expect("read");
            let value = found.map(|kv| kv.value);
            assert_eq!(value, Some(Bytes::from(format!("v{r}"))), "revision {r}");
        }
        drop(latest);
        drop(tx);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !thread.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "the indexer outlived its senders"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // (Counted down after each batch's revision is published, so checked only now.)
        assert_eq!(queued.load(Ordering::Acquire), 0);
    }
}
