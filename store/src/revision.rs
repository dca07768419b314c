//! The global revision: etcd's logical clock (`server/mvcc/revision.go`).
//!
//! Every write that changes the store moves the revision forward by exactly one. An empty store
//! is at revision 1, as etcd is, so the first write produces revision 2. Kubernetes exposes the
//! revision of an object's last write as its `metadata.resourceVersion`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in the store's history. Totally ordered; `Revision(0)` means "none/unset".
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Revision(pub u64);

impl Revision {
    /// No revision: used for "key does not exist" (`create_revision == 0`) and "not compacted".
    pub const ZERO: Revision = Revision(0);

    /// The revision right after this one.
    pub fn next(self) -> Revision {
        Revision(self.0 + 1)
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Resolves the revision a read is served at: `None` (or zero) is `current`; older than
/// `compacted` is [`crate::Error::Compacted`], newer than `current` is
/// [`crate::Error::FutureRevision`].
pub(crate) fn read_revision(
    requested: Option<Revision>,
    current: Revision,
    compacted: Revision,
) -> crate::Result<Revision> {
    match requested {
        None | Some(Revision::ZERO) => Ok(current),
        Some(r) if r > current => Err(crate::Error::FutureRevision {
            requested: r,
            current,
        }),
        Some(r) if r < compacted => Err(crate::Error::Compacted {
            requested: r,
            compacted,
        }),
        Some(r) => Ok(r),
    }
}

/// Resolves the first revision a watch delivers: `None` (or zero) is `current + 1`; older than
/// `compacted` is [`crate::Error::Compacted`]. A future start revision is allowed (as in etcd).
pub(crate) fn watch_start(
    requested: Option<Revision>,
    current: Revision,
    compacted: Revision,
) -> crate::Result<Revision> {
    match requested {
        None | Some(Revision::ZERO) => Ok(current.next()),
        Some(r) if r < compacted => Err(crate::Error::Compacted {
            requested: r,
            compacted,
        }),
        Some(r) => Ok(r),
    }
}

/// Checks a compaction request: not in the future, and above the current compaction point
/// (etcd answers `ErrCompacted` for `rev <= compacted`).
pub(crate) fn check_compact(
    requested: Revision,
    current: Revision,
    compacted: Revision,
) -> crate::Result<()> {
    if requested > current {
        return Err(crate::Error::FutureRevision { requested, current });
    }
    if requested <= compacted {
        return Err(crate::Error::Compacted {
            requested,
            compacted,
        });
    }
    Ok(())
}
