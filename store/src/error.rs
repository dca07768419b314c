//! The store's errors, worded after etcd's (`server/mvcc/kvstore.go`, `rpctypes/error.go`).

use crate::Revision;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The requested revision is older than the compaction point.
    #[error(
        "mvcc: required revision has been compacted (requested {requested}, compacted {compacted})"
    )]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still kept.
        compacted: Revision,
    },
    /// The requested revision has not happened yet.
    #[error(
        "mvcc: required revision is a future revision (requested {requested}, current {current})"
    )]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// Keys may not be empty.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// A value over [`crate::MAX_VALUE_SIZE`].
    #[error("etcdserver: request is too large ({size} bytes, limit {limit})")]
    ValueTooLarge {
        /// Size of the value.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A transaction with more than [`crate::MAX_TXN_OPS`] operations.
    #[error("etcdserver: too many operations in txn request ({ops}, limit {limit})")]
    TooManyOps {
        /// Operations in the branch.
        ops: usize,
        /// The limit.
        limit: usize,
    },
    /// A transaction branch writes the same key twice.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// The watcher fell too far behind and was ended.
    #[error("mvcc: watcher is too slow and was cancelled")]
    WatcherTooSlow,
    /// The store is shutting down or has shut down.
    #[error("store is closed")]
    Closed,
    /// The store directory is in use by another process.
    #[error("store directory {path} is locked by another process")]
    Locked {
        /// The directory.
        path: String,
    },
    /// On-disk data that cannot be decoded.
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    /// An I/O error from the write-ahead log or the filesystem.
    #[error("store I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An error from sled.
    #[error("sled error: {0}")]
    Sled(#[from] sled::Error),
}

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
