//! Checkpoints: making sled durable so old WAL segments can go (etcd's backend commit plus
//! snapshot + WAL release: `server/storage/backend/backend.go` `ForceCommit`,
//! `server/etcdserver/server.go` `snapshot` / `purgeFile`).
//!
//! ```text
//!   1. rotate the WAL            every record so far is in older segments
//!   2. sled flush                sled's own buffers reach its files (sync_file_range only)
//!   3. fsync every sled file     the real durability barrier on Linux
//!   4. write CHECKPOINT = rev    tmp file + fsync + rename + fsync dir
//!   5. delete older segments     their records are all at or below rev
//! ```
//!
//! Steps 2 and 3 hold sled's writers (the indexer, compaction) off, so the files synced are the
//! flushed state. sled still deletes files on its own threads meanwhile: it keeps a page image
//! larger than a quarter of its 512 KiB segments (a node of a few 20 KiB values) in a blob file
//! `blobs/<lsn>` and deletes it once a newer image of the page is stable. A file gone between
//! the listing and its `fsync` is no longer part of sled's state and is skipped.
//!
//! Every outcome is recorded in [`CheckpointHealth`] (`Store::checkpoint_health`); after
//! [`CHECKPOINT_FAILURES_UNHEALTHY`] failures in a row the store counts as unhealthy.
//!
//! Recovery replays the WAL records after the checkpointed revision on top of sled. A crash
//! between any two steps is safe: until step 4 the old checkpoint and every segment are still
//! there, and replaying a record sled already has is harmless (`KvStore::apply` is idempotent).

use crate::wal::sync_dir;
use crate::{Error, Result, Revision, codec};
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

const FILE: &str = "CHECKPOINT";
const TMP: &str = "CHECKPOINT.tmp";

/// Checkpoints failed in a row after which the store counts as unhealthy: the WAL is no longer
/// truncated, so the disk fills and the next start-up replays more and more (the API server
/// then fails its `store-checkpoint` readiness check, as kube-apiserver's `etcd` check fails
/// when etcd is unhealthy).
pub const CHECKPOINT_FAILURES_UNHEALTHY: u64 = 3;

/// How the store's checkpoints are going, since it was opened ([`crate::Store::checkpoint_health`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointHealth {
    /// When the last checkpoint succeeded (`None`: none yet since the store was opened).
    pub last_success: Option<SystemTime>,
    /// The revision the last successful checkpoint made durable in sled.
    pub last_success_revision: Option<Revision>,
    /// Checkpoints that failed since the last one that succeeded.
    pub consecutive_failures: u64,
    /// Checkpoints that succeeded since the store was opened.
    pub successes_total: u64,
    /// Checkpoints that failed since the store was opened.
    pub failures_total: u64,
    /// The error of the last failed checkpoint (kept after a later success; see
    /// `consecutive_failures` for whether it still fails).
    pub last_error: Option<String>,
}

impl CheckpointHealth {
    /// Whether checkpoints work: fewer than [`CHECKPOINT_FAILURES_UNHEALTHY`] failures in a row.
    pub fn healthy(&self) -> bool {
        self.consecutive_failures < CHECKPOINT_FAILURES_UNHEALTHY
    }
}

/// The checkpoint health, shared by the committer (and its checkpoint threads) and the store.
#[derive(Debug, Default)]
pub(crate) struct HealthCell(Mutex<CheckpointHealth>);

impl HealthCell {
    /// A copy of the current health.
    pub(crate) fn get(&self) -> CheckpointHealth {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the outcome of a checkpoint of `rev`; a failure is also logged.
    pub(crate) fn record(&self, rev: Revision, result: &Result<()>) {
        let mut health = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(()) => {
                health.last_success = Some(SystemTime::now());
                health.last_success_revision = Some(rev);
                health.consecutive_failures = 0;
                health.successes_total += 1;
            }
            Err(e) => {
                // The WAL still holds everything; the next checkpoint tries again.
                tracing::error!(error = %e, %rev, failures = health.consecutive_failures + 1,
                    "store checkpoint failed");
                health.consecutive_failures += 1;
                health.failures_total += 1;
                health.last_error = Some(e.to_string());
            }
        }
    }
}

/// The last checkpointed revision, or `None` for a new store.
pub(crate) fn read(dir: &Path) -> Result<Option<Revision>> {
    let data = match fs::read(dir.join(FILE)) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if data.len() != 12 {
        return Err(Error::Corrupt("checkpoint file has the wrong size".into()));
    }
    let (rev, crc) = data.split_at(8);
    if crc32fast::hash(rev).to_le_bytes() != crc {
        return Err(Error::Corrupt("checkpoint file fails its checksum".into()));
    }
    Ok(Some(codec::decode_rev(rev)?))
}

/// Durably records that everything up to `rev` is in sled's files.
pub(crate) fn write(dir: &Path, rev: Revision, fsync: bool) -> Result<()> {
    let rev = codec::encode_rev(rev);
    let mut file = File::create(dir.join(TMP))?;
    file.write_all(&rev)?;
    file.write_all(&crc32fast::hash(&rev).to_le_bytes())?;
    if fsync {
        file.sync_all()?;
    }
    fs::rename(dir.join(TMP), dir.join(FILE))?;
    if fsync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// `fsync`s every file and directory under `dir` (sled 0.34's `flush` does not, see the
/// module docs of `lib.rs`).
///
/// A file or directory that is gone by the time it is opened is skipped: sled keeps large
/// values in blob files (`blobs/<lsn>`) that it deletes once a newer version of their page
/// supersedes them, and a file sled deleted is not part of its state.
pub(crate) fn sync_all_files(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let entry = entry?;
        let synced = if entry.file_type()?.is_dir() {
            sync_all_files(&entry.path())
        } else {
            File::open(entry.path())
                .and_then(|f| f.sync_all())
                .map_err(Error::from)
        };
        match synced {
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    match sync_dir(dir) {
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_damage() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read(tmp.path()).unwrap(), None);
        write(tmp.path(), Revision(42), true).unwrap();
        assert_eq!(read(tmp.path()).unwrap(), Some(Revision(42)));
        let mut data = fs::read(tmp.path().join(FILE)).unwrap();
        data[0] ^= 1;
        fs::write(tmp.path().join(FILE), data).unwrap();
        assert!(matches!(read(tmp.path()), Err(Error::Corrupt(_))));
    }

    #[test]
    fn a_file_gone_between_listing_and_syncing_is_skipped() {
        // A dangling symlink is listed but cannot be opened: what a blob file that sled deletes
        // between the listing and the open looks like.
        let tmp = tempfile::tempdir().unwrap();
        let blobs = tmp.path().join("blobs");
        fs::create_dir(&blobs).unwrap();
        fs::write(blobs.join("100"), b"kept").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("deleted"), blobs.join("200")).unwrap();
        sync_all_files(tmp.path()).unwrap();
    }

    #[test]
    fn health_counts_failures_in_a_row_until_a_success() {
        let cell = HealthCell::default();
        assert!(cell.get().healthy());
        for _ in 0..CHECKPOINT_FAILURES_UNHEALTHY {
            cell.record(Revision(5), &Err(Error::Corrupt("disk gone".into())));
        }
        let failing = cell.get();
        assert!(!failing.healthy());
        assert_eq!(
            failing.last_error.as_deref(),
            Some("store data is corrupt: disk gone")
        );
        cell.record(Revision(9), &Ok(()));
        let ok = cell.get();
        assert!(ok.healthy());
        assert_eq!(
            (
                ok.consecutive_failures,
                ok.failures_total,
                ok.successes_total
            ),
            (0, CHECKPOINT_FAILURES_UNHEALTHY, 1)
        );
        assert_eq!(ok.last_success_revision, Some(Revision(9)));
    }
}
