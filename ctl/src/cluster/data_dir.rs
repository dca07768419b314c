//! A cluster's data directory and its lock.
//!
//! ```text
//!   .miniplane/            (miniplane up's --data-dir, or a temporary directory)
//!   ├── LOCK               flock'ed by the miniplane that runs the cluster
//!   ├── store/             the API server's store (etcd's data dir: WAL + sled)
//!   ├── kubeconfig         context `miniplane` → the API server's URL
//!   ├── cloud/             the simulated cloud's state and its cloud-config.json
//!   └── logs/              each component's stderr, with --separate
//! ```
//!
//! The store locks `store/` itself (`store/src/lock.rs`), but `up` also writes the kubeconfig
//! and may wipe the store (`--fresh`) before the API server opens it, so the lock is taken on
//! the whole directory first: a second `up` on the same directory stops here, before it has
//! touched anything. Like the store's, the lock is an `flock` that the kernel releases when the
//! process dies, so a crash never leaves a stale lock.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A locked data directory (the lock is released on drop).
#[derive(Debug)]
pub(crate) struct DataDir {
    /// The directory.
    path: PathBuf,
    /// Holds the `flock` while the cluster runs.
    _lock: File,
}

impl DataDir {
    /// Creates `path` if missing and locks it; [`Error::DataDirInUse`] if another process (or
    /// another cluster in this one) holds it. With `fresh`, the store is removed once locked.
    pub(crate) fn lock(path: &Path, fresh: bool) -> Result<DataDir> {
        std::fs::create_dir_all(path).map_err(Error::io(path))?;
        let lock_path = path.join("LOCK");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(Error::io(&lock_path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::DataDirInUse {
                    dir: path.to_owned(),
                    lock: lock_path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&lock_path)(e)),
        }
        let dir = DataDir {
            path: path.to_owned(),
            _lock: file,
        };
        if fresh {
            // A fresh cluster comes with a fresh cloud: no instance or load balancer of the
            // last one is left behind.
            for sub in [dir.store(), dir.cloud()] {
                match std::fs::remove_dir_all(&sub) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(&sub)(e)),
                }
            }
        }
        Ok(dir)
    }

    /// The API server's store.
    pub(crate) fn store(&self) -> PathBuf {
        self.path.join("store")
    }

    /// The simulated cloud's directory.
    pub(crate) fn cloud(&self) -> PathBuf {
        self.path.join("cloud")
    }

    /// The directory itself (where a secure cluster keeps `pki/` and the components'
    /// kubeconfigs).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The kubeconfig `up` writes.
    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.path.join("kubeconfig")
    }

    /// Where child processes log (`--separate`).
    pub(crate) fn logs(&self) -> PathBuf {
        self.path.join("logs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(Error::io("tempdir"))?;
        let dir = tmp.path().join("mp");
        let first = DataDir::lock(&dir, false)?;
        let second = DataDir::lock(&dir, false);
        assert!(
            matches!(&second, Err(Error::DataDirInUse { lock, .. }) if lock.ends_with("LOCK")),
            "{second:?}"
        );
        drop(first);
        DataDir::lock(&dir, false)?;
        Ok(())
    }

    #[test]
    fn fresh_removes_the_store_only() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(Error::io("tempdir"))?;
        let dir = DataDir::lock(tmp.path(), false)?;
        std::fs::create_dir_all(dir.store().join("wal")).map_err(Error::io("store"))?;
        std::fs::write(dir.kubeconfig(), "x").map_err(Error::io("kubeconfig"))?;
        drop(dir);
        let dir = DataDir::lock(tmp.path(), true)?;
        assert!(!dir.store().exists());
        assert!(dir.kubeconfig().exists());
        Ok(())
    }
}
