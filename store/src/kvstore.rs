//! The indexed state: every kept version on sled, keyed by revision; each key's revisions and
//! its latest version in memory; and compaction (etcd's `server/storage/mvcc/kvstore.go`,
//! `kvstore_compaction.go`, `index.go` + `key_index.go` and the bbolt `key` bucket).
//!
//! ```text
//!   memory  key             -> latest version            latest get/range, committer lookups
//!   memory  key             -> its kept revisions         get/range at an older revision
//!   revs    rev             -> that revision's changes    values of older versions, watch replay
//!   meta    "compacted"     -> rev
//! ```
//!
//! This is etcd's layout: bbolt's `key` bucket holds every kept revision under the revision,
//! and an in-memory B-tree (`treeIndex`) maps each key to its revisions; both in-memory maps are
//! rebuilt from `revs` at start-up. Unlike etcd, the latest value of every key is in memory too
//! (the current data set must fit in memory, as it does in the API server's watch cache
//! anyway): latest reads and the committer's lookups never touch sled. Each revision costs
//! one sled insert, appended at the end of the tree. (An earlier layout kept a sled tree keyed
//! by (key, revision) with the values, plus a change log keyed by revision: two inserts per
//! change, one of them with the whole value at a random place in the tree, whose node splits
//! were most of sled's ~15% of the API server's CPU in a 10,000-pod apply. A store in that
//! layout is migrated when opened: `migrate_earlier_layout`.)
//!
//! Only the syncer writes `latest`, under its write half; readers hold the read half, so a read
//! never sees half of a batch and the revision it reports matches the data it read. `revs` and
//! the per-key revisions are written after the writers are acknowledged, by the indexer thread
//! (`indexer.rs`, as etcd's backend commits its batch transaction in the background while reads
//! see the buffered writes); reads of history wait until the indexer has reached their
//! revision. sled is not trusted for durability (the WAL is); see `checkpoint.rs`.

use crate::codec::{self, Change};
use crate::history_bytes::HistoryBytes;
use crate::range::Page;
use crate::watch_hub::EventSource;
use crate::{Error, Event, EventKind, KeyRange, KeyValue, RangeResponse, Result, Revision};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError,
};

const META_COMPACTED: &[u8] = b"compacted";

/// The latest version of every existing key.
pub(crate) type Latest = BTreeMap<Bytes, KeyValue>;

/// One kept version of a key: its revision, and whether it is a tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyRev {
    rev: Revision,
    delete: bool,
}

/// Every key with kept history, to its kept versions in ascending revision order (etcd's
/// `keyIndex`, without its generations: a tombstone is a version with `delete`).
type KeyIndex = BTreeMap<Bytes, Vec<KeyRev>>;

/// sled trees, the latest versions, each key's revisions, and the current and compacted
/// revisions.
pub(crate) struct KvStore {
    db: sled::Db,
    revs: sled::Tree,
    meta: sled::Tree,
    /// Readers share, the committer's apply and compaction are exclusive.
    latest: RwLock<Latest>,
    /// Written by the indexer (after `revs`) and by compaction; read by history reads.
    history: RwLock<KeyIndex>,
    /// The bytes of the versions kept as history (counted as `latest` is written).
    history_bytes: HistoryBytes,
    /// Revision of the last applied write (set under the write guard).
    current: AtomicU64,
    /// The compaction point (set under the write guard).
    compacted: AtomicU64,
    /// The revision up to which sled's trees are written, whether indexing failed, and who
    /// waits for it.
    indexed: Mutex<Indexed>,
    /// Signalled when `indexed` changes and someone waits.
    indexed_changed: Condvar,
    /// Held by whoever writes sled's trees (the indexer, compaction) and by a checkpoint from
    /// its flush until sled's files are synced, so that the files it syncs are one state.
    sled_writer: Mutex<()>,
}

/// How far the indexer has written sled (see [`KvStore::wait_indexed`]).
#[derive(Debug)]
struct Indexed {
    /// Every revision up to this one is in sled.
    rev: u64,
    /// Indexing failed: history reads fail.
    failed: bool,
    /// Readers blocked in [`KvStore::wait_indexed`]. The indexer moves `rev` after every batch
    /// (thousands of times a second under load) and wakes the condition variable only when
    /// someone waits: a wake is a system call even with no one to wake.
    waiters: usize,
}

/// The most bytes of pages sled keeps in memory (its default is 1 GiB). Every version the store
/// writes goes to sled, and reads of it are rare: history (watches from before the watch
/// cache's ring, reads at an older revision, `key_history`) and the start-up load; the
/// current version of every key is in `latest`. With sled's default, the versions written
/// since start-up (up to the history budget, plus the data set) stayed in its cache: a
/// 10,000-pod apply on 1,000 nodes peaked ~140 MiB higher (`docs/benchmarks.md`, "Scale").
/// Pages past this are read back from the file (the OS's page cache).
pub(crate) const SLED_CACHE_BYTES: u64 = 64 << 20;

/// Opens sled. The caller holds the directory lock, so sled's own file lock can only be held by
/// a `Store` of this process that was just closed: sled 0.34 releases it when its background
/// write tasks finish, a moment after the last handle is dropped. That case is retried for up
/// to two seconds.
fn open_sled(dir: &Path) -> Result<sled::Db> {
    let config = sled::Config::new()
        .path(dir)
        .mode(sled::Mode::HighThroughput)
        .cache_capacity(SLED_CACHE_BYTES)
        // sled's own periodic flush would only compete with the WAL's fdatasync for the disk:
        // durability comes from the WAL, and sled is flushed at checkpoints.
        .flush_every_ms(None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match config.open() {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return Ok(other?),
        }
    }
}

/// Adds version `at` of `c.key` to `history` (idempotent: a WAL replay may repeat revisions).
fn note_version(history: &mut KeyIndex, at: Revision, c: &Change) {
    let entry = KeyRev {
        rev: at,
        delete: c.kind == EventKind::Delete,
    };
    let versions = history.entry(c.key.clone()).or_default();
    // Usually past the last one (an insert at the end is a push).
    let i = versions.partition_point(|v| v.rev < at);
    if versions.get(i).is_none_or(|v| v.rev != at) {
        versions.insert(i, entry);
    }
}

/// Rebuilds the latest version of every key, every key's revisions and the bytes of history
/// from `revs`.
fn load(revs: &sled::Tree) -> Result<(Latest, KeyIndex, HistoryBytes)> {
    let mut latest = Latest::new();
    let mut history = KeyIndex::new();
    let history_bytes = HistoryBytes::default();
    for entry in revs.iter() {
        let (_, v) = entry?;
        let (rev, changes) = codec::decode_changes(&v)?;
        history_bytes.add(rev, KvStore::apply_latest(&mut latest, rev, &changes));
        for c in &changes {
            note_version(&mut history, rev, c);
        }
    }
    Ok((latest, history, history_bytes))
}

/// Moves a store written in the earlier layout (an `index` tree of versions by key and
/// revision, a `log` tree of changes by revision) into `revs`, then drops the old trees. The
/// change log gives each revision's changes in order and each change's replaced revision; a
/// version that compaction kept after its log entry was removed becomes a revision of its own
/// change (no replaced revision: it lies below the compaction point, where nothing is replayed).
fn migrate_earlier_layout(db: &sled::Db, revs: &sled::Tree) -> Result<()> {
    let names = db.tree_names();
    if !names.iter().any(|n| n.as_ref() == b"index") {
        return Ok(());
    }
    let index = db.open_tree("index")?;
    let log = db.open_tree("log")?;
    let mut by_rev: BTreeMap<Revision, Vec<Change>> = BTreeMap::new();
    let mut logged: BTreeSet<(Bytes, Revision)> = BTreeSet::new();
    for entry in log.iter() {
        let (lk, lv) = entry?;
        let at = codec::decode_log_key(&lk)?;
        let (prev_mod, key) = codec::decode_log_value(&lv)?;
        let Some(record) = index.get(codec::index_key(&key, at))? else {
            continue; // compacted away
        };
        let (kind, kv) = codec::decode_record(&key, &record)?;
        logged.insert((key, at));
        by_rev
            .entry(at)
            .or_default()
            .push(change_of(kind, kv, prev_mod));
    }
    for entry in index.iter() {
        let (k, v) = entry?;
        let (key, at) = codec::decode_index_key(&k)?;
        if logged.contains(&(key.clone(), at)) {
            continue;
        }
        let (kind, kv) = codec::decode_record(&key, &v)?;
        by_rev
            .entry(at)
            .or_default()
            .push(change_of(kind, kv, Revision::ZERO));
    }
    for (at, changes) in &by_rev {
        revs.insert(codec::rev_key(*at), codec::encode_changes(*at, changes))?;
    }
    // sled makes the new tree and the drops durable together at the next flush; until then a
    // crash leaves the old trees, and the migration runs again.
    db.drop_tree("index")?;
    db.drop_tree("log")?;
    db.flush()?;
    Ok(())
}

/// The change that produced `kv` (a version in the earlier layout).
fn change_of(kind: EventKind, kv: KeyValue, prev_mod: Revision) -> Change {
    Change {
        kind,
        key: kv.key,
        value: kv.value,
        create: kv.create_revision,
        version: kv.version,
        prev_mod,
    }
}

/// The version of `key` that change `c` of revision `at` wrote.
fn version_of(at: Revision, c: Change) -> KeyValue {
    KeyValue {
        key: c.key,
        value: c.value,
        create_revision: c.create,
        mod_revision: at,
        version: c.version,
    }
}

impl KvStore {
    /// Opens the sled database in `dir`; the current revision is set later by recovery.
    pub(crate) fn open(dir: &Path) -> Result<KvStore> {
        let db = open_sled(dir)?;
        let meta = db.open_tree("meta")?;
        let compacted = match meta.get(META_COMPACTED)? {
            Some(v) => codec::decode_rev(&v)?,
            None => Revision::ZERO,
        };
        let revs = db.open_tree("revs")?;
        migrate_earlier_layout(&db, &revs)?;
        let (latest, history, history_bytes) = load(&revs)?;
        Ok(KvStore {
            revs,
            meta,
            db,
            latest: RwLock::new(latest),
            history: RwLock::new(history),
            history_bytes,
            current: AtomicU64::new(1),
            compacted: AtomicU64::new(compacted.0),
            // No indexer runs yet: recovery writes sled directly (see `reset_indexed`).
            indexed: Mutex::new(Indexed {
                rev: u64::MAX,
                failed: false,
                waiters: 0,
            }),
            indexed_changed: Condvar::new(),
            sled_writer: Mutex::new(()),
        })
    }

    /// Keeps every other writer of sled's trees out while held (see `sled_writer`).
    pub(crate) fn sled_writer(&self) -> MutexGuard<'_, ()> {
        self.sled_writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// [`KvStore::sled_writer`] if no one holds it now.
    pub(crate) fn try_sled_writer(&self) -> Option<MutexGuard<'_, ()>> {
        match self.sled_writer.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The sled database, for checkpoints.
    pub(crate) fn db(&self) -> &sled::Db {
        &self.db
    }

    /// Takes the read half of the lock.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Latest> {
        // Every map update is a single insert or remove, so a poisoned map is still whole.
        self.latest.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the write half of the lock (committer and recovery only).
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Latest> {
        self.latest.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Revision of the last applied write.
    pub(crate) fn current(&self) -> Revision {
        Revision(self.current.load(Ordering::Acquire))
    }

    /// The compaction point.
    pub(crate) fn compacted(&self) -> Revision {
        Revision(self.compacted.load(Ordering::Acquire))
    }

    /// Sets the current revision (recovery, or the committer under the write guard).
    pub(crate) fn set_current(&self, rev: Revision) {
        self.current.store(rev.0, Ordering::Release);
    }

    /// The latest version of `key`.
    pub(crate) fn latest(&self, key: &[u8]) -> Option<KeyValue> {
        self.read().get(key).cloned()
    }

    /// Writes the changes of revision `rev` to sled and to `latest` (the write-locked map).
    /// Idempotent, so WAL replay may repeat revisions sled already has.
    pub(crate) fn apply(
        &self,
        latest: &mut Latest,
        rev: Revision,
        changes: &[Change],
    ) -> Result<()> {
        self.apply_to_latest(latest, rev, changes);
        self.index(rev, changes)
    }

    /// Writes the changes of revision `rev` to `latest` (the write-locked map) and counts the
    /// versions they make history; the indexer (`indexer.rs`) writes them to sled afterwards.
    pub(crate) fn apply_to_latest(&self, latest: &mut Latest, rev: Revision, changes: &[Change]) {
        self.history_bytes
            .add(rev, Self::apply_latest(latest, rev, changes));
    }

    /// Writes the changes of revision `rev` to `latest`; returns the bytes of the versions
    /// they replaced or deleted, and of their tombstones (what became history at `rev`).
    fn apply_latest(latest: &mut Latest, rev: Revision, changes: &[Change]) -> u64 {
        let size = |kv: &KeyValue| (kv.key.len() + kv.value.len()) as u64;
        let mut became_history = 0;
        for c in changes {
            match c.kind {
                EventKind::Put => {
                    let old = latest.insert(c.key.clone(), version_of(rev, c.clone()));
                    if let Some(old) = old.filter(|old| old.mod_revision < rev) {
                        became_history += size(&old);
                    }
                }
                EventKind::Delete => {
                    if let Some(old) = latest.remove(&c.key).filter(|old| old.mod_revision < rev) {
                        became_history += size(&old) + c.key.len() as u64;
                    }
                }
            }
        }
        became_history
    }

    /// The bytes of the versions kept as history: replaced or deleted versions and tombstones
    /// above the compaction point (what compaction can remove).
    pub(crate) fn history_bytes(&self) -> u64 {
        self.history_bytes.total()
    }

    /// The compaction point that leaves at most `keep` bytes of history, if there is more.
    pub(crate) fn history_target(&self, keep: u64) -> Option<Revision> {
        self.history_bytes.target(keep, self.current())
    }

    /// Writes the changes of revision `rev` to sled's `revs` tree and notes them in each key's
    /// revisions. Idempotent.
    pub(crate) fn index(&self, rev: Revision, changes: &[Change]) -> Result<()> {
        self.revs
            .insert(codec::rev_key(rev), codec::encode_changes(rev, changes))?;
        let mut history = self.history.write().unwrap_or_else(PoisonError::into_inner);
        for c in changes {
            note_version(&mut history, rev, c);
        }
        Ok(())
    }

    /// Records that sled holds every revision up to `rev` (or that indexing failed), waking
    /// the readers waiting for it.
    pub(crate) fn set_indexed(&self, rev: Result<Revision>) {
        let mut state = self.indexed.lock().unwrap_or_else(PoisonError::into_inner);
        match rev {
            Ok(rev) => state.rev = state.rev.max(rev.0),
            Err(e) => {
                tracing::error!(error = %e, "store indexing failed; reads of history fail");
                state.failed = true;
            }
        }
        if state.waiters > 0 {
            self.indexed_changed.notify_all();
        }
    }

    /// Sets the indexed revision after recovery, before the indexer starts.
    pub(crate) fn reset_indexed(&self, rev: Revision) {
        self.indexed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rev = rev.0;
    }

    /// Waits until sled holds every revision up to `rev`: history reads (older revisions,
    /// watch replay), compaction and checkpoints need it. The wait is short (the indexer runs
    /// a batch or two behind the acknowledged writes) and never depends on the caller's thread.
    pub(crate) fn wait_indexed(&self, rev: Revision) -> Result<()> {
        let mut state = self.indexed.lock().unwrap_or_else(PoisonError::into_inner);
        while state.rev < rev.0 {
            if state.failed {
                return Err(Error::Corrupt("store indexing failed".into()));
            }
            state.waiters += 1;
            state = self
                .indexed_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiters -= 1;
        }
        Ok(())
    }
    /// The version of `key` that revision `at` wrote, from `revs`.
    pub(crate) fn version_written(&self, key: &[u8], at: Revision) -> Result<KeyValue> {
        let missing =
            || Error::Corrupt(format!("no change of a key at revision {at} in the store"));
        let v = self.revs.get(codec::rev_key(at))?.ok_or_else(missing)?;
        let (_, changes) = codec::decode_changes(&v)?;
        let c = changes
            .into_iter()
            .find(|c| c.key.as_ref() == key)
            .ok_or_else(missing)?;
        Ok(version_of(at, c))
    }

    /// The kept revisions of `key` (each with whether it deleted the key), oldest first.
    pub(crate) fn kept_revisions(&self, key: &[u8]) -> Vec<(Revision, bool)> {
        let history = self.history.read().unwrap_or_else(PoisonError::into_inner);
        history
            .get(key)
            .map(|versions| versions.iter().map(|v| (v.rev, v.delete)).collect())
            .unwrap_or_default()
    }

    /// The kept version of a key live at `rev`: the last one at or below it, unless that is a
    /// tombstone.
    fn live_at(versions: &[KeyRev], rev: Revision) -> Option<Revision> {
        let i = versions.partition_point(|v| v.rev <= rev);
        let v = versions.get(i.checked_sub(1)?)?;
        (!v.delete).then_some(v.rev)
    }

    /// The version of `key` live at `rev`, from the history. Call under the read guard.
    fn version_at(&self, key: &[u8], rev: Revision) -> Result<Option<KeyValue>> {
        self.wait_indexed(rev)?;
        let at = {
            let history = self.history.read().unwrap_or_else(PoisonError::into_inner);
            history.get(key).and_then(|v| Self::live_at(v, rev))
        };
        at.map(|at| self.version_written(key, at)).transpose()
    }

    /// One key at `rev` (already resolved against current/compacted), with `latest` read-locked.
    pub(crate) fn get(
        &self,
        latest: &Latest,
        key: &[u8],
        rev: Revision,
    ) -> Result<Option<KeyValue>> {
        if rev == self.current() {
            Ok(latest.get(key).cloned())
        } else {
            self.version_at(key, rev)
        }
    }

    /// A range at `rev` (already resolved), with `latest` read-locked.
    pub(crate) fn range(
        &self,
        latest: &Latest,
        range: &KeyRange,
        start: Option<&Bytes>,
        limit: Option<usize>,
        rev: Revision,
    ) -> Result<RangeResponse> {
        let from = range.scan_start(start);
        let mut page = Page::new(limit);
        if rev == self.current() {
            for (k, kv) in latest.range(from..) {
                if !range.contains(k) {
                    break;
                }
                page.push(kv.clone());
            }
            return Ok(page.finish(rev));
        }
        // Older revision: each key's version live then, read from `revs`.
        self.wait_indexed(rev)?;
        let live: Vec<(Bytes, Revision)> = {
            let history = self.history.read().unwrap_or_else(PoisonError::into_inner);
            history
                .range(from..)
                .take_while(|(k, _)| range.contains(k))
                .filter_map(|(k, v)| Some((k.clone(), Self::live_at(v, rev)?)))
                .collect()
        };
        for (key, at) in live {
            if page.is_full() {
                page.count();
                continue;
            }
            // A key not written since `at` is read from the latest map; only the keys changed
            // after `rev` are read back from `revs` (a paginated list of 10,000 Nodes whose
            // Leases move the revision on reads nearly all of them from memory).
            match latest.get(&key) {
                Some(kv) if kv.mod_revision == at => page.push(kv.clone()),
                _ => page.push(self.version_written(&key, at)?),
            }
        }
        Ok(page.finish(rev))
    }

    /// Removes history below `rev`, keeping for every key its last version below `rev` unless
    /// that is a tombstone (it is still the key's value at `rev`, and the `prev_kv` of its next
    /// change). Call under the write guard and, while the indexer or checkpoints may run,
    /// holding [`KvStore::sled_writer`]; idempotent.
    pub(crate) fn compact(&self, rev: Revision) -> Result<()> {
        self.wait_indexed(self.current())?;
        let mut history = self.history.write().unwrap_or_else(PoisonError::into_inner);
        // Which keys' versions each revision loses.
        let mut dropped: BTreeMap<Revision, BTreeSet<Bytes>> = BTreeMap::new();
        history.retain(|key, versions| {
            let below = versions.partition_point(|v| v.rev < rev);
            let keep_last = below > 0 && !versions[below - 1].delete;
            let remove = if keep_last { below - 1 } else { below };
            for v in versions.drain(..remove) {
                dropped.entry(v.rev).or_default().insert(key.clone());
            }
            !versions.is_empty()
        });
        for (at, keys) in dropped {
            let Some(v) = self.revs.get(codec::rev_key(at))? else {
                continue;
            };
            let (_, mut changes) = codec::decode_changes(&v)?;
            changes.retain(|c| !keys.contains(&c.key));
            if changes.is_empty() {
                self.revs.remove(codec::rev_key(at))?;
            } else {
                self.revs
                    .insert(codec::rev_key(at), codec::encode_changes(at, &changes))?;
            }
        }
        if rev > self.compacted() {
            self.meta.insert(META_COMPACTED, &codec::encode_rev(rev))?;
            self.compacted.store(rev.0, Ordering::Release);
        }
        self.history_bytes.compacted(rev);
        Ok(())
    }
}

impl EventSource for KvStore {
    fn events(&self, range: &KeyRange, from: Revision, to: Revision) -> Result<Vec<Event>> {
        self.wait_indexed(to)?;
        let _read = self.read();
        let compacted = self.compacted();
        if from < compacted {
            return Err(Error::Compacted {
                requested: from,
                compacted,
            });
        }
        let mut events = Vec::new();
        for entry in self.revs.range(codec::rev_key(from)..=codec::rev_key(to)) {
            let (_, v) = entry?;
            let (at, changes) = codec::decode_changes(&v)?;
            for c in changes {
                if !range.contains(&c.key) {
                    continue;
                }
                let prev_kv = if c.prev_mod == Revision::ZERO {
                    None
                } else {
                    Some(self.version_written(&c.key, c.prev_mod)?)
                };
                let kind = c.kind;
                let kv = match kind {
                    EventKind::Put => version_of(at, c),
                    EventKind::Delete => crate::mvcc::tombstone(c.key, at),
                };
                events.push(Event { kind, kv, prev_kv });
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(
        kind: EventKind,
        key: &str,
        value: &str,
        create: u64,
        version: u64,
        prev: u64,
    ) -> Change {
        Change {
            kind,
            key: Bytes::from(key.to_owned()),
            value: Bytes::from(value.to_owned()),
            create: Revision(create),
            version,
            prev_mod: Revision(prev),
        }
    }

    /// Writes `changes` at `at` as the earlier layout did: a version in `index`, a change in
    /// `log` (unless compaction had removed it).
    fn write_earlier(db: &sled::Db, at: u64, changes: &[Change], logged: bool) {
        let (index, log) = (db.open_tree("index").unwrap(), db.open_tree("log").unwrap());
        for (sub, c) in changes.iter().enumerate() {
            let rev = Revision(at);
            let k = codec::index_key(&c.key, rev);
            index.insert(k, codec::encode_record(c, rev)).unwrap();
            if logged {
                let v = codec::encode_log_value(c.prev_mod, &c.key);
                log.insert(codec::log_key(rev, sub as u32), v).unwrap();
            }
        }
    }

    #[test]
    fn a_store_in_the_earlier_layout_is_migrated_with_its_history_and_kept_versions() {
        use EventKind::{Delete, Put};
        let dir = tempfile::tempdir().unwrap();
        {
            let db = open_sled(dir.path()).unwrap();
            // Compacted at 4: a@2 is kept as the value at 4 (its log entry is gone), a@1 is gone.
            write_earlier(&db, 2, &[change(Put, "/a", "a2", 1, 2, 1)], false);
            write_earlier(&db, 4, &[change(Put, "/b", "b4", 4, 1, 0)], true);
            let two = [
                change(Put, "/a", "a5", 1, 3, 2),
                change(Delete, "/b", "", 0, 0, 4),
            ];
            write_earlier(&db, 5, &two, true);
            write_earlier(&db, 6, &[change(Put, "/c", "c6", 6, 1, 0)], true);
            let meta = db.open_tree("meta").unwrap();
            meta.insert(META_COMPACTED, &codec::encode_rev(Revision(4)))
                .unwrap();
            db.flush().unwrap();
        }
        let kv = KvStore::open(dir.path()).unwrap();
        kv.set_current(Revision(6));
        let names = kv.db().tree_names();
        assert!(
            !names
                .iter()
                .any(|n| n.as_ref() == b"index" || n.as_ref() == b"log")
        );
        assert_eq!(kv.compacted(), Revision(4));
        let latest = kv.read();
        let keys: Vec<&[u8]> = latest.keys().map(|k| k.as_ref()).collect();
        assert_eq!(keys, [b"/a".as_ref(), b"/c".as_ref()]);
        let value = |key: &str, rev: u64| {
            let found = kv.get(&latest, key.as_bytes(), Revision(rev)).unwrap();
            found.map(|v| {
                (
                    String::from_utf8(v.value.to_vec()).unwrap(),
                    v.mod_revision.0,
                )
            })
        };
        assert_eq!(value("/a", 4), Some(("a2".into(), 2)));
        assert_eq!(value("/b", 4), Some(("b4".into(), 4)));
        assert_eq!(value("/b", 5), None);
        assert_eq!(value("/a", 6), Some(("a5".into(), 5)));
        drop(latest);
        // Replay from the compaction point: each change in order, with the version it replaced.
        let all = KeyRange::Prefix(Bytes::new());
        let events = kv.events(&all, Revision(4), Revision(6)).unwrap();
        let seen: Vec<(EventKind, &[u8], u64, Option<u64>)> = events
            .iter()
            .map(|e| {
                let prev = e.prev_kv.as_ref().map(|p| p.mod_revision.0);
                (e.kind, e.kv.key.as_ref(), e.kv.mod_revision.0, prev)
            })
            .collect();
        let want: [(EventKind, &[u8], u64, Option<u64>); 4] = [
            (Put, b"/b", 4, None),
            (Put, b"/a", 5, Some(2)),
            (Delete, b"/b", 5, Some(4)),
            (Put, b"/c", 6, None),
        ];
        assert_eq!(seen, want);
        drop(kv);
        // Opened again, the migrated store reads the same.
        let kv = KvStore::open(dir.path()).unwrap();
        kv.set_current(Revision(6));
        assert_eq!(kv.events(&all, Revision(4), Revision(6)).unwrap(), events);
    }

    #[test]
    fn a_reader_waiting_for_the_indexer_is_woken_by_its_progress_or_failure() {
        let dir = tempfile::tempdir().unwrap();
        let kv = std::sync::Arc::new(KvStore::open(dir.path()).unwrap());
        kv.reset_indexed(Revision(1));
        // No one waits: moving the revision wakes no one and is remembered.
        kv.set_indexed(Ok(Revision(2)));
        assert!(kv.wait_indexed(Revision(2)).is_ok());
        let waits = |rev: u64| {
            let waiting = kv.clone();
            let reader = std::thread::spawn(move || waiting.wait_indexed(Revision(rev)));
            while kv.indexed.lock().unwrap().waiters == 0 {
                std::thread::yield_now();
            }
            reader
        };
        let reader = waits(5);
        kv.set_indexed(Ok(Revision(4)));
        kv.set_indexed(Ok(Revision(5)));
        assert!(reader.join().unwrap().is_ok());
        assert_eq!(kv.indexed.lock().unwrap().waiters, 0);
        let reader = waits(9);
        kv.set_indexed(Err(Error::Corrupt("disk gone".into())));
        assert!(matches!(reader.join().unwrap(), Err(Error::Corrupt(_))));
    }

    #[test]
    fn compaction_keeps_each_keys_value_at_the_point_and_drops_emptied_revisions() {
        use EventKind::{Delete, Put};
        let dir = tempfile::tempdir().unwrap();
        let kv = KvStore::open(dir.path()).unwrap();
        let writes = [
            (
                2,
                vec![
                    change(Put, "/a", "a2", 2, 1, 0),
                    change(Put, "/b", "b2", 2, 1, 0),
                ],
            ),
            (3, vec![change(Put, "/a", "a3", 2, 2, 2)]),
            (4, vec![change(Delete, "/b", "", 0, 0, 2)]),
            (5, vec![change(Put, "/a", "a5", 2, 3, 3)]),
        ];
        for (at, changes) in &writes {
            kv.apply(&mut kv.write(), Revision(*at), changes).unwrap();
        }
        kv.set_current(Revision(5));
        kv.compact(Revision(5)).unwrap();
        // a@3 is a's value at 5's compaction point; b's tombstone and everything older went.
        let kept: Vec<u64> = kv
            .revs
            .iter()
            .keys()
            .map(|k| u64::from_be_bytes(k.unwrap().as_ref().try_into().unwrap()))
            .collect();
        assert_eq!(kept, [3, 5]);
        let history = kv.history.read().unwrap();
        let revs: Vec<u64> = history[b"/a".as_ref()].iter().map(|v| v.rev.0).collect();
        assert_eq!(
            (revs, history.contains_key(b"/b".as_ref())),
            (vec![3, 5], false)
        );
        drop(history);
        let latest = kv.read();
        let at4 = kv
            .get(&latest, b"/a", Revision(4))
            .unwrap()
            .map(|v| v.value);
        assert_eq!(at4, Some(Bytes::from_static(b"a3")));
    }
}
