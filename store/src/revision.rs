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
