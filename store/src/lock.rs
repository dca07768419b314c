//! The data-directory lock (etcd locks its WAL files with `flock`: `client/pkg/fileutil/lock_linux.go`).
//!
//! Two processes writing one store would interleave WAL records and corrupt sled, so `Store::open`
//! takes an exclusive, non-blocking `flock` on `<dir>/LOCK` and holds it until the store is
//! dropped. The kernel releases it when the process dies, so a crash never leaves a stale lock.
//! `flock` locks belong to the open file, so a second open in the same process fails too.

use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Holds the lock on a store directory while alive.
#[derive(Debug)]
pub(crate) struct DirLock {
    /// Closing this file releases the lock.
    _file: File,
}

/// Tries `flock(LOCK_EX | LOCK_NB)` on `file`; `Ok(false)` if another holder has it.
#[allow(unsafe_code)]
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: `flock` only reads the descriptor number, which stays valid while `file` is
    // borrowed; it touches no memory of ours.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

impl DirLock {
    /// Locks `dir` (which must exist), or fails with [`Error::Locked`].
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        if try_flock(&file)? {
            Ok(DirLock { _file: file })
        } else {
            Err(Error::Locked {
                path: dir.display().to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_fails_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(tmp.path()).unwrap();
        assert!(matches!(
            DirLock::acquire(tmp.path()),
            Err(Error::Locked { .. })
        ));
        drop(first);
        DirLock::acquire(tmp.path()).unwrap();
    }
}
