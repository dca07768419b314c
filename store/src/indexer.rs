//! The indexer: writes acknowledged changes into sled's `index` and `log` trees, off the
//! write path (etcd's backend does the same with its batch transaction: writes are visible
//! from an in-memory buffer at once and committed to bbolt in the background,
//! `server/storage/backend/batch_tx.go`, `tx_buffer.go`).
//!
//! ```text
//!   syncer: fdatasync ─▶ apply to `latest` (memory) ─▶ publish ─▶ ack ─▶ send (rev, changes) ─┐
//!   indexer thread:  sled insert index + log for each revision, in order ◀───────────────────┘
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
use std::sync::mpsc::Receiver;

/// The changes of one applied batch, by revision.
pub(crate) type Indexed = Vec<(Revision, Vec<Change>)>;

/// Runs until every sender is gone.
/// `queued` counts the batches sent and not yet indexed (see `Applier::apply_and_ack`).
pub(crate) fn run(kv: Arc<KvStore>, batches: Receiver<Indexed>, queued: Arc<AtomicUsize>) {
    let mut failed = false;
    while let Ok(batch) = batches.recv() {
        if !failed {
            failed = index_batch(&kv, &batch).is_err();
        }
        queued.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Writes one batch's changes to sled and moves `indexed` to its last revision (or records
/// the failure, which history reads then report).
pub(crate) fn index_batch(kv: &KvStore, batch: &Indexed) -> Result<()> {
    let Some((last, _)) = batch.last() else {
        return Ok(());
    };
    let result = batch
        .iter()
        .try_for_each(|(rev, changes)| kv.index(*rev, changes));
    let failed = result.is_err();
    kv.set_indexed(result.map(|()| *last));
    if failed {
        return Err(Error::Corrupt("store indexing failed".into()));
    }
    Ok(())
}
