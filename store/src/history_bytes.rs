//! The bytes of history the store keeps, by the revision that made them history, and the
//! compaction point that brings them under a budget. etcd bounds its backend with
//! `--quota-backend-bytes` (a full backend refuses writes, `server/storage/quota.go`) and
//! kube-apiserver compacts on a timer (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/
//! compact.go`); here history over the budget is compacted early instead, so a burst of large
//! writes cannot grow sled (and its cache) without bound before the timer fires.
//!
//! ```text
//!   put k@s over k@r     k@r (key + value bytes) becomes history at s
//!   delete k@s over k@r  k@r and the tombstone (key bytes) become history at s
//!   compact(R)           removes exactly the history made at revisions below R
//!
//!   by_rev: (s, bytes) in revision order ─▶ target(keep) = the lowest R leaving ≤ keep
//! ```
//!
//! The current version of each key is not history: it is the data set, bounded by what the
//! API server stores, and compaction never removes it.

use crate::Revision;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The kept history's bytes.
#[derive(Debug, Default)]
pub(crate) struct HistoryBytes {
    /// The sum of `by_rev`, readable without the lock (checked on every commit).
    total: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bytes that became history at each revision, oldest first (revisions with none left out).
    by_rev: VecDeque<(Revision, u64)>,
    /// The last revision counted: a revision applied again (WAL replay over a sled that already
    /// had it) is not counted twice.
    seen: Revision,
}

impl HistoryBytes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bytes of history kept.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }

    /// Counts the `bytes` that revision `at` made history. Revisions come in order; one at or
    /// below the last counted is a replay and is ignored.
    pub(crate) fn add(&self, at: Revision, bytes: u64) {
        let mut inner = self.lock();
        if at <= inner.seen {
            return;
        }
        inner.seen = at;
        if bytes > 0 {
            inner.by_rev.push_back((at, bytes));
            self.total.fetch_add(bytes, Ordering::AcqRel);
        }
    }

    /// Forgets the history made below `rev` (compaction to `rev` removed it).
    pub(crate) fn compacted(&self, rev: Revision) {
        let mut inner = self.lock();
        while let Some(&(at, bytes)) = inner.by_rev.front() {
            if at >= rev {
                break;
            }
            inner.by_rev.pop_front();
            self.total.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// The lowest compaction point, at most `current`, that leaves at most `keep` bytes of
    /// history (or as close as `current` allows); `None` if there is no more than `keep`.
    pub(crate) fn target(&self, keep: u64, current: Revision) -> Option<Revision> {
        let inner = self.lock();
        let mut left = self.total();
        let mut target = None;
        for &(at, bytes) in &inner.by_rev {
            if left <= keep || at >= current {
                break;
            }
            left -= bytes;
            target = Some(at.next());
        }
        target
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{self, Change};
    use crate::kvstore::KvStore;
    use crate::{EventKind, KeyValue};
    use bytes::Bytes;

    /// Recounts the history in sled's `revs` tree: every kept version that is not its key's
    /// latest one (key + value bytes), and every tombstone (key bytes).
    fn recount(kv: &KvStore) -> u64 {
        let latest = kv.read();
        let revs = kv.db().open_tree("revs").unwrap();
        let mut bytes = 0;
        for entry in revs.iter() {
            let (rev, changes) = codec::decode_changes(&entry.unwrap().1).unwrap();
            for c in changes {
                let current = latest.get(&c.key).map(|v: &KeyValue| v.mod_revision);
                bytes += match c.kind {
                    EventKind::Put if current == Some(rev) => 0,
                    EventKind::Put => (c.key.len() + c.value.len()) as u64,
                    EventKind::Delete => c.key.len() as u64,
                };
            }
        }
        bytes
    }

    #[test]
    fn the_count_matches_what_sled_keeps_through_writes_compaction_replay_and_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let kv = KvStore::open(dir.path()).unwrap();
        let mut versions = std::collections::HashMap::new();
        let mut write = |kv: &KvStore, at: u64, key: &str, size: Option<usize>| {
            let version: &mut u64 = versions.entry(key.to_owned()).or_default();
            let prev = Revision(*version);
            let (kind, value) = match size {
                Some(n) => (EventKind::Put, Bytes::from(vec![b'v'; n])),
                None => (EventKind::Delete, Bytes::new()),
            };
            *version = if size.is_some() { at } else { 0 };
            let change = Change {
                kind,
                key: Bytes::from(key.to_owned()),
                value,
                create: Revision(at),
                version: 1,
                prev_mod: prev,
            };
            kv.apply(&mut kv.write(), Revision(at), &[change]).unwrap();
            kv.set_current(Revision(at));
        };
        for at in 2..60u64 {
            let key = format!("/k/{}", at % 5);
            let size = (at % 7 != 0).then_some((at as usize * 37) % 400);
            write(&kv, at, &key, size);
            assert_eq!(kv.history_bytes(), recount(&kv), "after revision {at}");
            if at % 20 == 0 {
                kv.compact(Revision(at - 8)).unwrap();
                assert_eq!(kv.history_bytes(), recount(&kv), "compacted at {at}");
            }
        }
        // A revision applied again (WAL replay over a sled that has it) is not counted twice.
        let before = kv.history_bytes();
        write(&kv, 59, "/k/4", Some(59 * 37 % 400));
        assert_eq!(kv.history_bytes(), before);
        drop(kv);
        let kv = KvStore::open(dir.path()).unwrap();
        assert_eq!(kv.history_bytes(), recount(&kv));
        assert_eq!(kv.history_bytes(), before);
    }

    #[test]
    fn compacting_to_the_target_leaves_at_most_what_is_kept() {
        let h = HistoryBytes::default();
        for (at, bytes) in [(2, 100), (3, 0), (4, 50), (6, 70), (7, 30)] {
            h.add(Revision(at), bytes);
        }
        // A replayed revision is not counted again.
        h.add(Revision(4), 50);
        assert_eq!(h.total(), 250);
        assert_eq!(h.target(250, Revision(8)), None);
        // Dropping what revisions 2 and 4 made leaves 100.
        assert_eq!(h.target(120, Revision(8)), Some(Revision(5)));
        // Never past the current revision: what it made stays.
        assert_eq!(h.target(0, Revision(7)), Some(Revision(7)));
        h.compacted(Revision(5));
        assert_eq!(h.total(), 100);
        h.compacted(Revision(7));
        assert_eq!(h.total(), 30);
    }
}
