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
//! Recovery replays the WAL records after the checkpointed revision on top of sled. A crash
//! between any two steps is safe: until step 4 the old checkpoint and every segment are still
//! there, and replaying a record sled already has is harmless (`KvStore::apply` is idempotent).

use crate::wal::sync_dir;
use crate::{Error, Result, Revision, codec};
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

const FILE: &str = "CHECKPOINT";
const TMP: &str = "CHECKPOINT.tmp";

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
pub(crate) fn sync_all_files(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            sync_all_files(&entry.path())?;
        } else {
            File::open(entry.path())?.sync_all()?;
        }
    }
    sync_dir(dir)
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
}
