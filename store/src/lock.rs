//! The data-directory lock (etcd locks its WAL files with `flock`: `client/pkg/fileutil/lock_linux.go`).
//!
//! Two processes writing one store would interleave WAL records and corrupt sled, so `Store::open`
//! takes an exclusive, non-blocking lock on `<dir>/LOCK` ([`File::try_lock`], an `flock` on
//! Linux) and holds it until the store is dropped. The kernel releases it when the process dies,
//! so a crash never leaves a stale lock. The lock belongs to the open file, so a second open in
//! the same process fails too.

use crate::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

/// Holds the lock on a store directory while alive.
#[derive(Debug)]
pub(crate) struct DirLock {
    /// Closing this file releases the lock.
    _file: File,
}

impl DirLock {
    /// Locks `dir` (which must exist), or fails with [`Error::Locked`].
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(Error::Locked {
                path: dir.display().to_string(),
            }),
            Err(TryLockError::Error(e)) => Err(e.into()),
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
        let second = DirLock::acquire(tmp.path());
        assert!(
            matches!(&second, Err(Error::Locked { path }) if path == &tmp.path().display().to_string()),
            "{second:?}"
        );
        drop(first);
        DirLock::acquire(tmp.path()).unwrap();
    }
}
