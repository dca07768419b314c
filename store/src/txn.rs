//! Writes and compare-and-swap transactions (etcd's `TxnRequest`).
//!
//! Kubernetes' storage layer (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`) does
//! every write as a transaction, e.g. a create is
//!
//! ```text
//! if create_revision(key) == 0 { put(key, obj) } else { get(key) }
//! ```
//!
//! and an update compares `mod_revision` with the resourceVersion it read.

use crate::{KeyValue, Revision};
use bytes::Bytes;

/// What a [`Compare`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's `mod_revision` (0 when absent).
    ModRevision(Revision),
    /// The key's `create_revision` (0 when absent).
    CreateRevision(Revision),
    /// The key's `version` (0 when absent).
    Version(u64),
    /// The key's value (an absent key never matches).
    Value(Bytes),
}

/// How a [`Compare`] compares the key's field (left) with the given one (right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `<`
    Less,
    /// `>`
    Greater,
}

/// One condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    /// The key whose field is compared.
    pub key: Bytes,
    /// How to compare.
    pub op: CompareOp,
    /// The field and the value to compare it with.
    pub target: CompareTarget,
}

impl Compare {
    /// `mod_revision(key) == rev`: the key is unchanged since it was read at `rev`.
    pub fn mod_revision_eq(key: impl Into<Bytes>, rev: Revision) -> Self {
        Compare {
            key: key.into(),
            op: CompareOp::Equal,
            target: CompareTarget::ModRevision(rev),
        }
    }

    /// The key does not exist (`create_revision(key) == 0`).
    pub fn absent(key: impl Into<Bytes>) -> Self {
        Compare {
            key: key.into(),
            op: CompareOp::Equal,
            target: CompareTarget::CreateRevision(Revision::ZERO),
        }
    }

    /// The key exists (`create_revision(key) != 0`).
    pub fn exists(key: impl Into<Bytes>) -> Self {
        Compare {
            key: key.into(),
            op: CompareOp::NotEqual,
            target: CompareTarget::CreateRevision(Revision::ZERO),
        }
    }
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set the key to the value.
    Put {
        /// Key to write.
        key: Bytes,
        /// New value.
        value: Bytes,
    },
    /// Delete the key (nothing happens if it is absent).
    Delete {
        /// Key to delete.
        key: Bytes,
    },
    /// Read the key (as of the transaction's revision), e.g. to report a conflict.
    Get {
        /// Key to read.
        key: Bytes,
    },
}

/// A compare-and-swap transaction: if every compare holds, run `success`, else `failure`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Txn {
    /// Conditions, all of which must hold for `success` to run.
    pub compares: Vec<Compare>,
    /// Operations run when every compare holds.
    pub success: Vec<Op>,
    /// Operations run otherwise (the "else" branch).
    pub failure: Vec<Op>,
}

/// The result of one [`Op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResponse {
    /// A put: the key's previous version, if any.
    Put {
        /// Version before the put.
        prev_kv: Option<KeyValue>,
    },
    /// A delete: the deleted version, if the key existed.
    Delete {
        /// Version that was deleted.
        prev_kv: Option<KeyValue>,
    },
    /// A get: the key's version, if it exists.
    Get {
        /// Version read.
        kv: Option<KeyValue>,
    },
}

/// The result of a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether the compares held (and `success` ran).
    pub succeeded: bool,
    /// The store revision after the transaction: the new revision if it changed anything,
    /// else the revision it was evaluated at.
    pub revision: Revision,
    /// One response per operation of the branch that ran, in order.
    pub responses: Vec<OpResponse>,
}

/// The result of a plain put or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResponse {
    /// The store revision after the write (unchanged for a delete of an absent key).
    pub revision: Revision,
    /// The key's version before the write, if it existed.
    pub prev_kv: Option<KeyValue>,
}
