//! How a [`crate::Store`] is opened (etcd's flags in `server/embed/config.go`:
//! `--data-dir`, `--unsafe-no-fsync`, `--auto-compaction-mode/retention`, `--snapshot-count`).

use crate::clock::{Clock, SystemClock};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The default [`StoreConfig::history_budget`]: 256 MiB of replaced and deleted versions
/// (about 13,000 updates of 20 KiB objects; an hour of small objects stays far below).
pub const DEFAULT_HISTORY_BUDGET: u64 = 256 << 20;

/// Automatic compaction: history older than what either rule keeps is discarded.
///
/// etcd offers one mode at a time (`--auto-compaction-mode=revision|periodic`); here both can be
/// set and history is kept as long as either rule still wants it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoCompaction {
    /// Keep at least the last N revisions.
    pub retain_revisions: Option<u64>,
    /// Keep at least the revisions written in this long a time.
    pub retain_duration: Option<Duration>,
    /// How often the compactor looks (default 1 s when left at zero).
    pub interval: Duration,
}

impl AutoCompaction {
    /// Whether any rule is set.
    pub fn enabled(&self) -> bool {
        self.retain_revisions.is_some() || self.retain_duration.is_some()
    }
}

/// Everything [`crate::Store::open`] needs.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The data directory (created if missing): `LOCK`, `CHECKPOINT`, `wal/`, `sled/`.
    pub dir: PathBuf,
    /// `fdatasync` the WAL before acknowledging writes. **Default true.** `false` is unsafe:
    /// acknowledged writes survive a process crash but not a power loss or kernel crash; use it
    /// only in tests and labs (as etcd's `--unsafe-no-fsync`).
    pub fsync: bool,
    /// Automatic compaction (off by default, as in etcd).
    pub auto_compaction: AutoCompaction,
    /// Responses a watcher may have queued before it is ended with
    /// [`crate::Error::WatcherTooSlow`].
    pub watch_buffer: usize,
    /// Writes waiting for the committer before writers wait for room (backpressure).
    pub write_queue: usize,
    /// Most writes in one group commit.
    pub max_batch: usize,
    /// Checkpoint (flush sled, drop old WAL) after this many WAL bytes.
    pub checkpoint_bytes: u64,
    /// The most bytes of history kept (replaced and deleted versions, counted as key + value
    /// bytes): above it the committer compacts the oldest history at once, down to three
    /// quarters of it, whatever `auto_compaction` would keep. `None`: no bound. Default
    /// [`DEFAULT_HISTORY_BUDGET`].
    pub history_budget: Option<u64>,
    /// The clock auto-compaction reads.
    pub clock: Arc<dyn Clock>,
}

impl StoreConfig {
    /// Defaults for a store in `dir`: durable, no auto-compaction.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            dir: dir.into(),
            fsync: true,
            auto_compaction: AutoCompaction::default(),
            watch_buffer: crate::DEFAULT_WATCH_BUFFER,
            write_queue: 4096,
            max_batch: 4096,
            checkpoint_bytes: 64 << 20,
            history_budget: Some(DEFAULT_HISTORY_BUDGET),
            clock: Arc::new(SystemClock),
        }
    }
}
