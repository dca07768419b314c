//! The kept history of one key ([`crate::Backend::key_history`]): the version live at the
//! compaction point and every change after it, what `miniplane history` shows of an object.
//!
//! etcd has no such call. A client gets the same from etcd with a read of the key at the
//! compaction point and a watch of the key from the revision after it (`etcdctl get --rev`,
//! `etcdctl watch --rev`), which is what [`crate::EtcdBackend`] does. The store answers from
//! the revisions its key index keeps for every key (etcd's `keyIndex`), so the cost grows with
//! the key's own versions, not with the store's history.
//!
//! ```text
//!   compacted ─────────┬──────────── changes ───────────────▶ current
//!   at_compaction: the version live at `compacted` (written at or before it)
//!   changes:       puts (the new version) and deletes (a tombstone) after it, oldest first
//! ```

use crate::kvstore::KvStore;
use crate::{Event, EventKind, KeyValue, Result, Revision};

/// Every kept version of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHistory {
    /// The compaction point the history was read at: nothing older is kept.
    pub compacted: Revision,
    /// The store's revision when the history was read: nothing newer is in it.
    pub current: Revision,
    /// The version live at `compacted`, if the key existed then (its `mod_revision` is at or
    /// below `compacted`; the changes that made it are gone). `None` when nothing was ever
    /// compacted.
    pub at_compaction: Option<KeyValue>,
    /// The changes after `compacted` up to `current`, oldest first: a put carries the version
    /// it wrote, a delete a tombstone (empty value, `mod_revision` the deleting revision).
    /// `prev_kv` is not set: the change before is the previous entry (or `at_compaction`).
    pub changes: Vec<Event>,
}

impl KeyHistory {
    /// Whether the key was ever seen in the kept history.
    pub fn is_empty(&self) -> bool {
        self.at_compaction.is_none() && self.changes.is_empty()
    }
}

impl KvStore {
    /// The kept history of `key`, from the key index and sled's `revs` tree.
    pub(crate) fn key_history(&self, key: &[u8]) -> Result<KeyHistory> {
        let current = self.current();
        self.wait_indexed(current)?;
        // Compaction takes the write half: it cannot drop versions while they are read.
        let _read = self.read();
        let compacted = self.compacted();
        let kept = self.kept_revisions(key);
        let at_compaction = if compacted > Revision::ZERO {
            let live = kept
                .iter()
                .take_while(|(rev, _)| *rev <= compacted)
                .last()
                .filter(|(_, delete)| !delete);
            live.map(|(rev, _)| self.version_written(key, *rev))
                .transpose()?
        } else {
            None
        };
        let mut changes = Vec::new();
        for (rev, delete) in kept {
            if rev <= compacted || rev > current {
                continue;
            }
            let (kind, kv) = if delete {
                let key = bytes::Bytes::copy_from_slice(key);
                (EventKind::Delete, crate::mvcc::tombstone(key, rev))
            } else {
                (EventKind::Put, self.version_written(key, rev)?)
            };
            changes.push(Event {
                kind,
                kv,
                prev_kv: None,
            });
        }
        Ok(KeyHistory {
            compacted,
            current,
            at_compaction,
            changes,
        })
    }
}

/// The kept history of `key` on a backend that only has reads and watches (etcd): the version
/// live at the compaction point, then a watch of the key from the revision after it.
///
/// A watch has no end, so the replay is taken as complete when the change that made the key's
/// current version has arrived, or, for a key absent now, when the watch has been quiet for
/// [`QUIET`] after its last event (etcd hands a watch that starts in the past everything up
/// to now in the batches of one sync pass, every 100 ms: `syncWatchersLoop` in
/// `server/storage/mvcc/watchable_store.go`). Simplified: etcd 3.4's progress requests cannot
/// mark the end of a replay (they may be answered before it), so the quiet period does.
pub(crate) async fn by_watch(backend: &dyn crate::Backend, key: &[u8]) -> Result<KeyHistory> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match watch_once(backend, key).await {
            // Compacted meanwhile (or the compaction point was not known yet): read again.
            Err(crate::Error::Compacted { .. }) if attempts < 3 => continue,
            other => return other,
        }
    }
}

/// How long a replay watch must stay quiet after its last event before it is taken as done.
pub(crate) const QUIET: std::time::Duration = std::time::Duration::from_millis(300);

/// Longest wait for a replay watch's events.
const REPLAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn watch_once(backend: &dyn crate::Backend, key: &[u8]) -> Result<KeyHistory> {
    let latest = backend.get(key, None).await?;
    let current = latest.revision;
    let compacted = backend.compacted_revision();
    let at_compaction = if compacted > Revision::ZERO {
        backend.get(key, Some(compacted)).await?.kv
    } else {
        None
    };
    // The last change to wait for: the one that wrote the current version, if there is one.
    let last = latest.kv.as_ref().map(|kv| kv.mod_revision);
    let mut changes: Vec<Event> = Vec::new();
    let done = |changes: &[Event]| {
        last.is_some_and(|m| changes.last().is_some_and(|e| e.revision() >= m))
            || last.is_some_and(|m| m <= compacted)
    };
    if !done(&changes) {
        let mut watcher = backend
            .watch(crate::WatchRequest {
                range: crate::KeyRange::Key(bytes::Bytes::copy_from_slice(key)),
                start_revision: Some(compacted.next().max(Revision(1))),
            })
            .await?;
        let deadline = tokio::time::Instant::now() + REPLAY_TIMEOUT;
        loop {
            let wait = if last.is_some() {
                deadline.saturating_duration_since(tokio::time::Instant::now())
            } else {
                QUIET.min(deadline.saturating_duration_since(tokio::time::Instant::now()))
            };
            let batch = match tokio::time::timeout(wait, watcher.recv()).await {
                Ok(Some(batch)) => batch?,
                Ok(None) => return Err(crate::Error::Closed),
                Err(_) if last.is_none() => break,
                Err(_) => {
                    return Err(crate::Error::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "key history: the watch did not replay the key's changes in time",
                    )));
                }
            };
            changes.extend(
                batch
                    .events
                    .into_iter()
                    .filter(|e| e.revision() <= current)
                    .map(|e| Event { prev_kv: None, ..e }),
            );
            if done(&changes) || changes.last().is_some_and(|e| e.revision() >= current) {
                break;
            }
        }
    }
    Ok(KeyHistory {
        compacted,
        current,
        at_compaction,
        changes,
    })
}
