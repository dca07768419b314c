//! The write-ahead log: where a write becomes durable (etcd's `server/storage/wal/wal.go`).
//!
//! Every write is appended here and the file is `fdatasync`ed before the write is applied to
//! sled or acknowledged. The committer appends all the writes that queued up while the previous
//! sync ran and syncs once for all of them: group commit.
//!
//! ```text
//! wal/0000000000000003.wal   segment files, numbered; only the last one is appended to
//!   ┌─────────┬─────────┬──────────────┐┌─────────┬─────────┬──────────┐
//!   │ len u32 │ crc u32 │ payload ...  ││ len u32 │ crc u32 │ payload  │ ...   (little endian)
//!   └─────────┴─────────┴──────────────┘└─────────┴─────────┴──────────┘
//!   crc = crc32(payload); payloads are `codec::WalEntry`s
//! ```
//!
//! On open every segment is read in order. A record that is cut short or fails its checksum at
//! the end of the last segment is a write that was never acknowledged (the process died during
//! the append): the segment is truncated there. The same in an earlier segment is corruption.
//! A new segment is started on open and at every checkpoint; segments that only hold
//! checkpointed records are deleted.
//!
//! Unlike etcd, segments are not preallocated (fdatasync then also syncs the file size, which
//! measured no slower here), records carry no CRC chain across records, and there is no
//! snapshot/raft state, only store writes and compactions.

use crate::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const HEADER: usize = 8;

/// The write-ahead log directory and its open segment.
pub(crate) struct Wal {
    dir: PathBuf,
    /// The segment being appended to (shared with the syncer, which `fdatasync`s it).
    file: Arc<File>,
    /// Its sequence number (file name).
    seq: u64,
    /// Framed records appended since the last `sync`.
    buf: Vec<u8>,
    /// Whether `sync` really calls `fdatasync` (false only for tests and labs).
    fsync: bool,
    /// Bytes written to the current segment, used to decide when to checkpoint.
    segment_bytes: u64,
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016}.wal"))
}

/// `fdatasync`s a segment (unless `fsync` is off): every record written to it so far is durable.
pub(crate) fn sync_segment(file: &File, fsync: bool) -> Result<()> {
    if fsync {
        file.sync_data()?;
    }
    Ok(())
}

/// Deletes every segment in the log directory `dir` numbered below `seq` (their records are
/// checkpointed).
pub(crate) fn remove_segments_before(dir: &Path, seq: u64, fsync: bool) -> Result<()> {
    for old in segments(dir)?.into_iter().filter(|s| *s < seq) {
        fs::remove_file(segment_path(dir, old))?;
    }
    if fsync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Makes a directory entry change (create, rename, delete) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// The segment numbers in `dir`, ascending.
fn segments(dir: &Path) -> Result<Vec<u64>> {
    let mut seqs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(num) = name.strip_suffix(".wal") {
            let seq = num
                .parse()
                .map_err(|_| Error::Corrupt(format!("unexpected WAL file name {name}")))?;
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    Ok(seqs)
}

/// Parses the records of one segment, calling `f` for each. Returns the length of the valid
/// prefix, or `None` if the whole segment is valid.
fn scan(data: &[u8], f: &mut impl FnMut(&[u8]) -> Result<()>) -> Result<Option<usize>> {
    let mut pos = 0;
    while pos < data.len() {
        let Some(header) = data.get(pos..pos + HEADER) else {
            return Ok(Some(pos));
        };
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let Some(payload) = data.get(pos + HEADER..pos + HEADER + len) else {
            return Ok(Some(pos));
        };
        // A zero length is never written; it is what a zero-filled torn tail looks like.
        if len == 0 || crc32fast::hash(payload) != crc {
            return Ok(Some(pos));
        }
        f(payload)?;
        pos += HEADER + len;
    }
    Ok(None)
}

impl Wal {
    /// Opens (creating if needed) the log in `dir`, calls `replay` with every intact record in
    /// order, truncates a torn tail and starts a new segment.
    pub(crate) fn open(
        dir: &Path,
        fsync: bool,
        mut replay: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<Wal> {
        fs::create_dir_all(dir)?;
        let seqs = segments(dir)?;
        for (i, &seq) in seqs.iter().enumerate() {
            let path = segment_path(dir, seq);
            let mut data = Vec::new();
            File::open(&path)?.read_to_end(&mut data)?;
            if let Some(valid) = scan(&data, &mut replay)? {
                if i + 1 != seqs.len() {
                    return Err(Error::Corrupt(format!(
                        "WAL segment {} is damaged at byte {valid}",
                        path.display()
                    )));
                }
                tracing::warn!(segment = %path.display(), valid, len = data.len(), "truncating torn WAL tail");
                let file = OpenOptions::new().write(true).open(&path)?;
                file.set_len(valid as u64)?;
                file.sync_all()?;
            }
        }
        let seq = seqs.last().map_or(1, |s| s + 1);
        let file = Self::create_segment(dir, seq)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            seq,
            buf: Vec::with_capacity(1 << 20),
            fsync,
            segment_bytes: 0,
        })
    }

    fn create_segment(dir: &Path, seq: u64) -> Result<File> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(segment_path(dir, seq))?;
        sync_dir(dir)?;
        Ok(file)
    }

    /// Appends one record whose payload `encode` writes; it is durable after the next `sync`.
    pub(crate) fn append(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; HEADER]);
        encode(&mut self.buf);
        let payload = &self.buf[start + HEADER..];
        let len = (payload.len() as u32).to_le_bytes();
        let crc = crc32fast::hash(payload).to_le_bytes();
        self.buf[start..start + 4].copy_from_slice(&len);
        self.buf[start + 4..start + HEADER].copy_from_slice(&crc);
    }

    /// Writes the appended records and `fdatasync`s the segment (one sync for the whole batch).
    pub(crate) fn sync(&mut self) -> Result<()> {
        if self.write_out()? {
            sync_segment(&self.file, self.fsync)?;
        }
        Ok(())
    }

    /// Writes the appended records to the segment (the page cache) without syncing; returns
    /// whether there was anything to write. They are durable once [`sync_segment`] has run
    /// on [`Wal::segment`] (the pipelined commit: the syncer thread syncs a batch while the
    /// committer writes the next one).
    pub(crate) fn write_out(&mut self) -> Result<bool> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        (&*self.file).write_all(&self.buf)?;
        self.segment_bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(true)
    }

    /// The segment being appended to.
    pub(crate) fn segment(&self) -> Arc<File> {
        self.file.clone()
    }

    /// Bytes in the current segment.
    pub(crate) fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Starts a new segment (after a `sync`); returns the new segment's number. Every record
    /// appended before this call is in an older segment.
    pub(crate) fn rotate(&mut self) -> Result<u64> {
        self.sync()?;
        let seq = self.seq + 1;
        self.file = Arc::new(Self::create_segment(&self.dir, seq)?);
        self.seq = seq;
        self.segment_bytes = 0;
        Ok(seq)
    }

    /// Whether segments older than the current one are still on disk (left by a process that
    /// stopped between a checkpoint and the deletion of the segments it covered).
    pub(crate) fn has_older_segments(&self) -> Result<bool> {
        Ok(segments(&self.dir)?.into_iter().any(|s| s < self.seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(dir: &Path) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let wal = Wal::open(dir, false, |p| {
            out.push(p.to_vec());
            Ok(())
        });
        wal.unwrap();
        out
    }

    #[test]
    fn torn_tail_is_truncated_and_earlier_records_survive() {
        let tmp = tempfile::tempdir().unwrap();
        let mut wal = Wal::open(tmp.path(), false, |_| Ok(())).unwrap();
        wal.append(|b| b.extend_from_slice(b"one"));
        wal.append(|b| b.extend_from_slice(b"two"));
        wal.sync().unwrap();
        let path = segment_path(tmp.path(), 1);
        drop(wal);
        // Cut the second record in half, as a crash during the append would.
        let len = fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 2)
            .unwrap();
        assert_eq!(replayed(tmp.path()), vec![b"one".to_vec()]);
        assert_eq!(fs::metadata(&path).unwrap().len(), (HEADER + 3) as u64);
        // The next open sees the truncated segment as whole and the new (empty) one after it.
        assert_eq!(replayed(tmp.path()), vec![b"one".to_vec()]);
    }

    #[test]
    fn damage_in_an_older_segment_is_corruption() {
        let tmp = tempfile::tempdir().unwrap();
        let mut wal = Wal::open(tmp.path(), false, |_| Ok(())).unwrap();
        wal.append(|b| b.extend_from_slice(b"one"));
        wal.rotate().unwrap();
        drop(wal);
        let path = segment_path(tmp.path(), 1);
        let mut data = fs::read(&path).unwrap();
        data[HEADER] ^= 0xFF;
        fs::write(&path, data).unwrap();
        let res = Wal::open(tmp.path(), false, |_| Ok(()));
        assert!(matches!(res, Err(Error::Corrupt(_))));
    }
}
