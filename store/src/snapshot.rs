//! Snapshots: every key of a store at one revision, saved to a file and restored into a new
//! data directory (etcd's `etcdctl snapshot save` and `etcdutl snapshot restore`:
//! `server/etcdserver/api/snapshot`, `etcdutl/snapshot/v3_snapshot.go`).
//!
//! ```text
//!   save:    Backend::range(prefix, at R), page by page at the same R ─▶ Snapshot ─▶ file
//!   file:    "MPSNAP01" | revision R | count | (key, value, create, mod, version)* | crc32
//!   restore: file ─▶ checks ─▶ a new store in <dir>.restoring-*: each key at its own
//!            mod_revision, current = R + bump, compacted there ─▶ renamed to <dir>
//! ```
//!
//! A snapshot is consistent: every page is read at the revision of the first, so it is the
//! store as it was at one instant while writes go on. Restore keeps each key's
//! `create_revision`, `mod_revision` and `version` (objects keep their resourceVersions), then
//! moves the store's revision forward by `bump` and compacts there, as `etcdutl snapshot
//! restore --bump-revision --mark-compacted` does for Kubernetes: a client that saw a
//! resourceVersion after the snapshot was taken asks for a compacted revision, gets `410 Gone`
//! and lists again, instead of watching a store whose revisions were reused. A restore writes
//! into a directory of its own and renames it into place at the end: a failed restore leaves
//! no data directory behind. A file that is truncated, corrupt or not a snapshot is refused
//! before anything is written.

use crate::codec::Change;
use crate::kvstore::KvStore;
use crate::{Backend, Error, EventKind, KeyRange, KeyValue, RangeRequest, Result, Revision};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::Path;

/// The first bytes of a snapshot file.
const MAGIC: &[u8; 8] = b"MPSNAP01";

/// Keys read per page while saving.
const PAGE: usize = 1000;

/// The revision bump `miniplane snapshot restore` uses unless told otherwise: the one the
/// Kubernetes documentation gives for `etcdutl snapshot restore --bump-revision`, far more
/// writes than a cluster makes between a snapshot and its restore.
pub const DEFAULT_BUMP: u64 = 1_000_000_000;

/// Every key under a prefix at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The store's revision the keys were read at.
    pub revision: Revision,
    /// The keys, in key order, each with its revisions and version.
    pub kvs: Vec<KeyValue>,
}

impl Snapshot {
    /// Reads every key under `prefix` from `backend` at one revision (the current one when the
    /// first page is read), page by page.
    pub async fn read(backend: &dyn Backend, prefix: &[u8]) -> Result<Snapshot> {
        let range = KeyRange::Prefix(Bytes::copy_from_slice(prefix));
        let mut kvs = Vec::new();
        let mut revision = None;
        let mut start = None;
        loop {
            let page = backend
                .range(RangeRequest {
                    range: range.clone(),
                    start: start.clone(),
                    limit: Some(PAGE),
                    revision,
                })
                .await?;
            revision = Some(page.revision);
            let more = page.more;
            if let Some(last) = page.kvs.last() {
                let mut next = last.key.to_vec();
                next.push(0);
                start = Some(Bytes::from(next));
            }
            kvs.extend(page.kvs);
            if !more {
                break;
            }
        }
        Ok(Snapshot {
            revision: revision.unwrap_or(Revision::ZERO),
            kvs,
        })
    }

    /// The snapshot as a file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let size: usize = self
            .kvs
            .iter()
            .map(|kv| kv.key.len() + kv.value.len() + 32)
            .sum();
        let mut out = Vec::with_capacity(size + 28);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.revision.0.to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for kv in &self.kvs {
            for field in [&kv.key, &kv.value] {
                out.extend_from_slice(&(field.len() as u32).to_le_bytes());
                out.extend_from_slice(field);
            }
            for n in [kv.create_revision.0, kv.mod_revision.0, kv.version] {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a snapshot file's bytes, refusing anything truncated, corrupt or inconsistent.
    pub fn decode(data: &[u8]) -> Result<Snapshot> {
        let bad = |why: &str| Error::Corrupt(format!("not a whole miniplane snapshot: {why}"));
        if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
            return Err(bad("it does not start with a snapshot's header"));
        }
        let Some((body, crc)) = data.split_last_chunk::<4>() else {
            return Err(bad("it is too short"));
        };
        if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
            return Err(bad("its checksum does not match (truncated or changed)"));
        }
        let mut r = Reader {
            data: &body[MAGIC.len()..],
        };
        let revision = Revision(r.u64().ok_or_else(|| bad("no revision"))?);
        let count = r.u64().ok_or_else(|| bad("no key count"))?;
        let mut kvs = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 20));
        for i in 0..count {
            let missing = || bad(&format!("key {i} of {count} is cut short"));
            let key = r.field().ok_or_else(missing)?;
            let value = r.field().ok_or_else(missing)?;
            let (create, modified, version) = (
                r.u64().ok_or_else(missing)?,
                r.u64().ok_or_else(missing)?,
                r.u64().ok_or_else(missing)?,
            );
            if key.is_empty() || modified == 0 || modified > revision.0 || create > modified {
                return Err(bad(&format!("key {i} has impossible revisions")));
            }
            kvs.push(KeyValue {
                key: Bytes::copy_from_slice(key),
                value: Bytes::copy_from_slice(value),
                create_revision: Revision(create),
                mod_revision: Revision(modified),
                version,
            });
        }
        if !r.data.is_empty() {
            return Err(bad("bytes follow its last key"));
        }
        if kvs.windows(2).any(|w| w[0].key >= w[1].key) {
            return Err(bad("its keys are not in order"));
        }
        Ok(Snapshot { revision, kvs })
    }

    /// Restores the snapshot as a new store in `dir`, which must not exist or be empty: every
    /// key at its own revisions, the store's revision `bump` past the snapshot's and compacted
    /// there. Returns the restored store's revision. Nothing is left in `dir` on failure.
    pub fn restore(&self, dir: &Path, bump: u64) -> Result<Revision> {
        if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} is not empty: restore into a new data directory",
                    dir.display()
                ),
            )));
        }
        let name = dir
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)?;
        let work = WorkDir(parent.join(format!(
            "{name}.restoring-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        )));
        std::fs::create_dir(&work.0)?;
        let current = Revision(self.revision.0.saturating_add(bump).max(1));
        self.write_store(&work.0, current)?;
        // An empty directory left by the caller is replaced; a missing one is created.
        if dir.exists() {
            std::fs::remove_dir(dir)?;
        }
        std::fs::rename(&work.0, dir)?;
        std::mem::forget(work);
        crate::wal::sync_dir(parent)?;
        Ok(current)
    }

    /// Writes the store's files into `dir`: sled's trees with every key at its revision, the
    /// compaction point and the checkpoint at `current`, all synced.
    fn write_store(&self, dir: &Path, current: Revision) -> Result<()> {
        let kv = KvStore::open(&dir.join("sled"))?;
        let mut by_revision: BTreeMap<Revision, Vec<Change>> = BTreeMap::new();
        for e in &self.kvs {
            by_revision.entry(e.mod_revision).or_default().push(Change {
                kind: EventKind::Put,
                key: e.key.clone(),
                value: e.value.clone(),
                create: e.create_revision,
                version: e.version,
                prev_mod: Revision::ZERO,
            });
        }
        for (rev, changes) in &by_revision {
            kv.index(*rev, changes)?;
        }
        kv.set_current(current);
        kv.compact(current)?;
        kv.db().flush()?;
        crate::checkpoint::sync_all_files(&dir.join("sled"))?;
        std::fs::create_dir_all(dir.join("wal"))?;
        crate::checkpoint::write(dir, current, true)?;
        crate::wal::sync_dir(dir)?;
        Ok(())
    }
}

/// The directory a restore writes into, removed with what is in it unless the restore got
/// as far as renaming it into place.
struct WorkDir(std::path::PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads the little-endian fields of a snapshot in order.
struct Reader<'d> {
    data: &'d [u8],
}

impl<'d> Reader<'d> {
    fn take(&mut self, n: usize) -> Option<&'d [u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    fn field(&mut self) -> Option<&'d [u8]> {
        let len: [u8; 4] = self.take(4)?.try_into().ok()?;
        self.take(u32::from_le_bytes(len) as usize)
    }
}
