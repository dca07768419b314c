//! The indexed state: every kept version and the change log on sled, the latest version of each
//! key in memory, and compaction (etcd's `server/storage/mvcc/kvstore.go`,
//! `kvstore_compaction.go`, `index.go` + `key_index.go` and the bbolt `key` bucket).
//!
//! ```text
//!   memory  key             -> latest version           latest get/range, committer lookups
//!   index   (key, rev)      -> version or tombstone     get/range at an older revision
//!   log     (rev, sub)      -> (prev_mod_rev, key)      watch replay: the changes of each rev
//!   meta    "compacted"     -> rev
//! ```
//!
//! etcd keeps one bbolt bucket keyed by revision plus an in-memory B-tree from each key to its
//! revisions, rebuilt at start-up. Here the per-key history is a sled tree (`index`), and what
//! is rebuilt at start-up (from `index`) is a map of every key's latest version, values
//! included: unlike etcd, the current data set must fit in memory (as it does in the API
//! server's watch cache anyway). It makes latest reads and the committer's lookups cheap, and
//! each change costs two sled inserts instead of three.
//!
//! Only the syncer writes `latest`, under its write half; readers hold the read half, so a read
//! never sees half of a batch and the revision it reports matches the data it read. sled's
//! trees are written after the writers are acknowledged, by the indexer thread (`indexer.rs`,
//! as etcd's backend commits its batch transaction in the background while reads see the
//! buffered writes); reads of history wait until the indexer has reached their revision.
//! sled is not trusted for durability (the WAL is); see `checkpoint.rs`.

use crate::codec::{self, Change};
use crate::range::Page;
use crate::watch_hub::EventSource;
use crate::{Error, Event, EventKind, KeyRange, KeyValue, RangeResponse, Result, Revision};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

const META_COMPACTED: &[u8] = b"compacted";

/// The latest version of every existing key.
pub(crate) type Latest = BTreeMap<Bytes, KeyValue>;

/// sled trees, the latest versions, and the current and compacted revisions.
pub(crate) struct KvStore {
    db: sled::Db,
    index: sled::Tree,
    log: sled::Tree,
    meta: sled::Tree,
    /// Readers share, the committer's apply and compaction are exclusive.
    latest: RwLock<Latest>,
    /// Revision of the last applied write (set under the write guard).
    current: AtomicU64,
    /// The compaction point (set under the write guard).
    compacted: AtomicU64,
    /// The revision up to which sled's trees are written, and whether indexing failed.
    indexed: Mutex<(u64, bool)>,
    /// Signalled when `indexed` changes.
    indexed_changed: Condvar,
}

/// Opens sled. The caller holds the directory lock, so sled's own file lock can only be held by
/// a `Store` of this process that was just closed: sled 0.34 releases it when its background
/// write tasks finish, a moment after the last handle is dropped. That case is retried for up
/// to two seconds.
fn open_sled(dir: &Path) -> Result<sled::Db> {
    let config = sled::Config::new()
        .path(dir)
        .mode(sled::Mode::HighThroughput)
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

/// Rebuilds the latest version of every key from the index (the last entry of each key).
fn load_latest(index: &sled::Tree) -> Result<Latest> {
    let mut latest = Latest::new();
    let mut last: Option<(Bytes, EventKind, KeyValue)> = None;
    for entry in index.iter() {
        let (k, v) = entry?;
        let (key, _) = codec::decode_index_key(&k)?;
        if let Some((prev, kind, kv)) = last.take()
            && prev != key
            && kind == EventKind::Put
        {
            latest.insert(prev, kv);
        }
        let (kind, kv) = codec::decode_record(&key, &v)?;
        last = Some((key, kind, kv));
    }
    if let Some((key, EventKind::Put, kv)) = last {
        latest.insert(key, kv);
    }
    Ok(latest)
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
        let index = db.open_tree("index")?;
        let latest = load_latest(&index)?;
        Ok(KvStore {
            index,
            log: db.open_tree("log")?,
            meta,
            db,
            latest: RwLock::new(latest),
            current: AtomicU64::new(1),
            compacted: AtomicU64::new(compacted.0),
            // No indexer runs yet: recovery writes sled directly (see `reset_indexed`).
            indexed: Mutex::new((u64::MAX, false)),
            indexed_changed: Condvar::new(),
        })
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
        Self::apply_latest(latest, rev, changes);
        self.index(rev, changes)
    }

    /// Writes the changes of revision `rev` to `latest` (the write-locked map) only; the
    /// indexer (`indexer.rs`) writes them to sled afterwards.
    pub(crate) fn apply_latest(latest: &mut Latest, rev: Revision, changes: &[Change]) {
        for c in changes {
            match c.kind {
                EventKind::Put => {
                    let kv = KeyValue {
                        key: c.key.clone(),
                        value: c.value.clone(),
                        create_revision: c.create,
                        mod_revision: rev,
                        version: c.version,
                    };
                    latest.insert(c.key.clone(), kv);
                }
                EventKind::Delete => {
                    latest.remove(&c.key);
                }
            }
        }
    }

    /// Writes the changes of revision `rev` to sled's `index` and `log` trees. Idempotent.
    pub(crate) fn index(&self, rev: Revision, changes: &[Change]) -> Result<()> {
        for (sub, c) in changes.iter().enumerate() {
            let record = codec::encode_record(c, rev);
            self.index.insert(codec::index_key(&c.key, rev), record)?;
            self.log.insert(
                codec::log_key(rev, sub as u32),
                codec::encode_log_value(c.prev_mod, &c.key),
            )?;
        }
        Ok(())
    }

    /// Records that sled holds every revision up to `rev` (or that indexing failed), waking
    /// the readers waiting for it.
    pub(crate) fn set_indexed(&self, rev: Result<Revision>) {
        let mut state = self.indexed.lock().unwrap_or_else(PoisonError::into_inner);
        match rev {
            Ok(rev) => state.0 = state.0.max(rev.0),
            Err(e) => {
                tracing::error!(error = %e, "store indexing failed; reads of history fail");
                state.1 = true;
            }
        }
        self.indexed_changed.notify_all();
    }

    /// Sets the indexed revision after recovery, before the indexer starts.
    pub(crate) fn reset_indexed(&self, rev: Revision) {
        self.indexed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0 = rev.0;
    }

    /// Waits until sled holds every revision up to `rev`: history reads (older revisions,
    /// watch replay), compaction and checkpoints need it. The wait is short (the indexer runs
    /// a batch or two behind the acknowledged writes) and never depends on the caller's thread.
    pub(crate) fn wait_indexed(&self, rev: Revision) -> Result<()> {
        let mut state = self.indexed.lock().unwrap_or_else(PoisonError::into_inner);
        while state.0 < rev.0 {
            if state.1 {
                return Err(Error::Corrupt("store indexing failed".into()));
            }
            state = self
                .indexed_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }

    /// The version of `key` live at `rev`, from the index. Call under the read guard.
    fn version_at(&self, key: &[u8], rev: Revision) -> Result<Option<KeyValue>> {
        self.wait_indexed(rev)?;
        let lo = codec::index_key(key, Revision::ZERO);
        let hi = codec::index_key(key, rev);
        match self.index.range(lo..=hi).next_back() {
            Some(entry) => {
                let (_, v) = entry?;
                let (kind, kv) = codec::decode_record(&Bytes::copy_from_slice(key), &v)?;
                Ok((kind == EventKind::Put).then_some(kv))
            }
            None => Ok(None),
        }
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
        // Older revision: walk every kept version of the keys in range, keeping per key the
        // last one at or below `rev`.
        self.wait_indexed(rev)?;
        let mut lo = Vec::new();
        codec::escape_into(&mut lo, &from);
        let mut candidate: Option<(Bytes, Option<KeyValue>)> = None;
        for entry in self.index.range(lo..) {
            let (k, v) = entry?;
            let (key, at) = codec::decode_index_key(&k)?;
            if !range.contains(&key) {
                break;
            }
            if candidate.as_ref().is_some_and(|(ck, _)| *ck != key)
                && let Some((_, Some(kv))) = candidate.take()
            {
                page.push(kv);
            }
            if at <= rev {
                let (kind, kv) = codec::decode_record(&key, &v)?;
                candidate = Some((key, (kind == EventKind::Put).then_some(kv)));
            } else if candidate.is_none() {
                candidate = Some((key, None));
            }
        }
        if let Some((_, Some(kv))) = candidate {
            page.push(kv);
        }
        Ok(page.finish(rev))
    }

    /// Removes history below `rev`, keeping for every key its last version below `rev` unless
    /// that is a tombstone (it is still the key's value at `rev`, and the `prev_kv` of its next
    /// change). Call under the write guard; idempotent.
    pub(crate) fn compact(&self, rev: Revision) -> Result<()> {
        self.wait_indexed(self.current())?;
        for entry in self.log.range(..codec::log_key(rev, 0)) {
            let (lk, lv) = entry?;
            let at = codec::decode_log_key(&lk)?;
            let (_, key) = codec::decode_log_value(&lv)?;
            let ik = codec::index_key(&key, at);
            let superseded = self
                .index
                .range(codec::index_key(&key, at.next())..codec::index_key(&key, rev))
                .next()
                .transpose()?
                .is_some();
            let remove = superseded
                || match self.index.get(&ik)? {
                    Some(v) => codec::decode_record(&key, &v)?.0 == EventKind::Delete,
                    None => false,
                };
            if remove {
                self.index.remove(ik)?;
            }
            // Versions an earlier compaction kept (their log entries are gone) are superseded
            // by this one now.
            let older = codec::index_key(&key, Revision::ZERO)..codec::index_key(&key, at);
            for entry in self.index.range(older) {
                self.index.remove(entry?.0)?;
            }
            self.log.remove(lk)?;
        }
        if rev > self.compacted() {
            self.meta.insert(META_COMPACTED, &codec::encode_rev(rev))?;
            self.compacted.store(rev.0, Ordering::Release);
        }
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
        for entry in self
            .log
            .range(codec::log_key(from, 0)..=codec::log_key(to, u32::MAX))
        {
            let (lk, lv) = entry?;
            let at = codec::decode_log_key(&lk)?;
            let (prev_mod, key) = codec::decode_log_value(&lv)?;
            if !range.contains(&key) {
                continue;
            }
            let missing =
                || Error::Corrupt(format!("index has no version at {at} for a logged change"));
            let v = self
                .index
                .get(codec::index_key(&key, at))?
                .ok_or_else(missing)?;
            let (kind, kv) = codec::decode_record(&key, &v)?;
            let prev_kv = if prev_mod == Revision::ZERO {
                None
            } else {
                let pv = self
                    .index
                    .get(codec::index_key(&key, prev_mod))?
                    .ok_or_else(missing)?;
                Some(codec::decode_record(&key, &pv)?.1)
            };
            let kv = match kind {
                EventKind::Put => kv,
                EventKind::Delete => crate::mvcc::tombstone(key, at),
            };
            events.push(Event { kind, kv, prev_kv });
        }
        Ok(events)
    }
}
