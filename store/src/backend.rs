//! The storage boundary the API server programs against (Kubernetes' `storage.Interface` sits
//! one level above this; this is closer to etcd's `KV` + `Watch` client API).

use crate::{
    CheckpointHealth, GetResponse, KeyHistory, RangeRequest, RangeResponse, Result, Revision, Txn,
    TxnResponse, WatchRequest, Watcher, WriteResponse,
};
use async_trait::async_trait;
use bytes::Bytes;

/// An etcd-like MVCC key-value store.
///
/// Contract shared by every implementation:
/// * writes are linearizable; each write that changes something produces exactly one new
///   revision, and returns only once it is durable (unless the implementation was configured
///   without fsync);
/// * reads see every write that returned before they started;
/// * watches deliver every change from their start revision on, in order, exactly once.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The revision of the last write.
    fn current_revision(&self) -> Revision;

    /// Revisions below this one have been compacted away (`Revision::ZERO` if none).
    fn compacted_revision(&self) -> Revision;

    /// Reads one key, at the latest revision or at `revision`.
    async fn get(&self, key: &[u8], revision: Option<Revision>) -> Result<GetResponse>;

    /// Reads a key or prefix, with pagination.
    async fn range(&self, req: RangeRequest) -> Result<RangeResponse>;

    /// Sets a key.
    async fn put(&self, key: Bytes, value: Bytes) -> Result<WriteResponse>;

    /// Deletes a key; deleting an absent key changes nothing and makes no revision.
    async fn delete(&self, key: Bytes) -> Result<WriteResponse>;

    /// Runs a compare-and-swap transaction atomically.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse>;

    /// Starts a watch.
    async fn watch(&self, req: WatchRequest) -> Result<Watcher>;

    /// Discards history below `revision` (the current value of every key is kept).
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// Every kept version of `key`: the one live at the compaction point and each change
    /// after it, deletes included (`crate::key_history`). Works on a key deleted since, while
    /// its changes are kept.
    async fn key_history(&self, key: &[u8]) -> Result<KeyHistory>;

    /// How the implementation's checkpoints are going, if it makes any (`None` for one
    /// without a disk).
    fn checkpoint_health(&self) -> Option<CheckpointHealth> {
        None
    }

    /// The bytes of history kept (replaced and deleted versions above the compaction point),
    /// if the implementation counts them.
    fn history_bytes(&self) -> Option<u64> {
        None
    }

    /// The bytes the implementation's data take on disk, if it keeps any (etcd's `dbSize`, as
    /// `etcdctl endpoint status` shows it).
    fn size_on_disk(&self) -> Option<u64> {
        None
    }
}
