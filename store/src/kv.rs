//! Key-value records and change events (etcd's `mvccpb.KeyValue` and `mvccpb.Event`).

use crate::Revision;
use bytes::Bytes;

/// One version of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Bytes,
    /// The value at this version.
    pub value: Bytes,
    /// Revision of the write that created the key (since its last deletion).
    pub create_revision: Revision,
    /// Revision of the write that produced this version.
    pub mod_revision: Revision,
    /// Number of writes to the key since it was created: 1 after the create.
    pub version: u64,
}

/// What a change did to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change to one key, as delivered by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// For a put, the new version. For a delete, the key with an empty value, `mod_revision`
    /// set to the deleting revision and `create_revision`/`version` zero (as etcd reports it).
    pub kv: KeyValue,
    /// The version before this change, if the key existed.
    pub prev_kv: Option<KeyValue>,
}

impl Event {
    /// The revision this change was made at.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}
