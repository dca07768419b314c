//! The simulated cloud's directory: the state kept in `state.json`, the `LOCK` that keeps a
//! second cloud off the same directory, and `cloud-config.json`, which tells a client where
//! the cloud listens. Like etcd's data dir, it is what makes the cloud outlive its process.
//!
//! ```text
//!   <dir>/state.json         the whole CloudState, rewritten after every change
//!   <dir>/state.json.tmp     the next state while it is written (then renamed over)
//!   <dir>/LOCK               locked (flock) while a cloud runs on the directory
//!   <dir>/cloud-config.json  {"endpoint": "http://127.0.0.1:PORT"}, written at bind
//! ```
//!
//! A write is atomic and durable before the change is answered: the new state goes to a
//! temporary file, which is synced and renamed over `state.json`, then the directory is synced
//! so the rename itself survives a crash. A reader (or a restart) sees the old state or the
//! new one, never half of one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::state::CloudState;

/// The state file's name in the cloud's directory.
pub const STATE_FILE: &str = "state.json";
/// The cloud config's name in the cloud's directory: what a cloud-controller-manager is given
/// as `--cloud-config`.
pub const CLOUD_CONFIG_FILE: &str = "cloud-config.json";
/// The lock's name in the cloud's directory.
const LOCK_FILE: &str = "LOCK";

/// The open directory of a running cloud; holds its lock until dropped.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    /// Held (an advisory lock) for as long as the cloud runs: a second cloud on the same
    /// directory would overwrite this one's state.
    _lock: File,
}

impl StateFile {
    /// Creates `dir` if needed, locks it and reads its state (an empty cloud when there is no
    /// `state.json` yet).
    pub(crate) fn open(dir: &Path) -> Result<(StateFile, CloudState)> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            what: "creating",
            path: dir.to_owned(),
            source,
        })?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| Error::Io {
                what: "opening",
                path: lock_path.clone(),
                source,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    dir: dir.to_owned(),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(Error::Io {
                    what: "locking",
                    path: lock_path,
                    source,
                });
            }
        }
        let path = dir.join(STATE_FILE);
        let state = match std::fs::read(&path) {
            Ok(bytes) => CloudState::from_json(&bytes).map_err(|reason| Error::CorruptState {
                path: path.clone(),
                reason,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CloudState::default(),
            Err(source) => {
                return Err(Error::Io {
                    what: "reading",
                    path,
                    source,
                });
            }
        };
        Ok((StateFile { path, _lock: lock }, state))
    }

    /// Writes a state already encoded by [`CloudState::to_json`] atomically and durably; the
    /// error as a sentence.
    pub(crate) fn write(&self, bytes: &[u8]) -> std::result::Result<(), String> {
        write_atomically(&self.path, bytes).map_err(|e| e.to_string())
    }
}

/// Replaces `path` with `bytes`: a synced temporary file renamed over it, then the directory
/// synced.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |what: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { what, path, source }
    };
    let mut file = File::create(&tmp).map_err(io("creating", &tmp))?;
    file.write_all(bytes).map_err(io("writing", &tmp))?;
    file.sync_all().map_err(io("syncing", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io("renaming over", path))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_reads_back_and_locks_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cloud = dir.path().join("cloud");
        let (file, state) = StateFile::open(&cloud).expect("open");
        assert_eq!(state, CloudState::default());
        let changed = CloudState {
            launches: 7,
            ..CloudState::default()
        };
        file.write(&changed.to_json().expect("encode"))
            .expect("save");
        assert!(!cloud.join("state.json.tmp").exists());
        let second = StateFile::open(&cloud).expect_err("locked");
        assert!(matches!(second, Error::Locked { .. }), "{second}");
        drop(file);
        let (_file, read) = StateFile::open(&cloud).expect("reopen");
        assert_eq!(read.launches, 7);
    }

    #[test]
    fn a_corrupt_state_file_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(STATE_FILE), b"{\"version\": 1, \"launc").expect("write");
        let err = StateFile::open(dir.path()).expect_err("corrupt");
        let message = err.to_string();
        assert!(matches!(err, Error::CorruptState { .. }), "{message}");
        assert!(
            message.contains("state.json is corrupt: EOF while parsing"),
            "{message}"
        );
        assert!(
            message.ends_with("(move it away to start an empty cloud)"),
            "{message}"
        );
    }
}
