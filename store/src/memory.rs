//! An in-memory [`Backend`]: the reference model of the store's semantics.
//!
//! It plays the part of etcd's in-memory test store (`server/storage/mvcc/kvstore_test.go`
//! builds one on a temporary backend; kine and the apiserver tests use fakes like it). It is
//! deliberately plain: two `BTreeMap`s under one mutex, nothing persisted, and the full history
//! kept (compaction only moves the compaction point, below which reads and watches fail).
//!
//! ```text
//!   keys: key ─▶ [Event @rev, Event @rev, ...]   every version and tombstone of the key
//!   log:  rev ─▶ [Event, ...]                    the changes of each revision (watch replay)
//! ```
//!
//! The property tests check the real [`crate::Store`] against it, and the API server's unit
//! tests can use it instead of a data directory. Writes follow the same rules as the store
//! (`mvcc.rs`) and watches use the same hub (`watch_hub.rs`).

use crate::mvcc::{self, KvView};
use crate::range::Page;
use crate::revision::{check_compact, read_revision, watch_start};
use crate::watch_hub::{EventSource, WatchHub};
use crate::{
    Backend, Event, EventKind, GetResponse, KeyRange, KeyValue, OpResponse, RangeRequest,
    RangeResponse, Result, Revision, Txn, TxnResponse, WatchRequest, Watcher, WriteResponse,
};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Default number of responses a watcher may have queued before it is ended as too slow.
pub const DEFAULT_WATCH_BUFFER: usize = 1024;

struct State {
    /// Revision of the last write; 1 for an empty store, as etcd.
    rev: Revision,
    /// Reads and watches below this revision fail.
    compacted: Revision,
    /// Every version (puts and tombstones) of every key, oldest first.
    keys: BTreeMap<Bytes, Vec<Event>>,
    /// The events of each revision, for watch replay.
    log: BTreeMap<Revision, Vec<Event>>,
}

impl State {
    /// The key's version live at `rev`, if any.
    fn at(&self, key: &[u8], rev: Revision) -> Option<KeyValue> {
        let versions = self.keys.get(key)?;
        let last = versions.iter().rev().find(|e| e.kv.mod_revision <= rev)?;
        (last.kind == EventKind::Put).then(|| last.kv.clone())
    }
}

impl KvView for State {
    fn current(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
        Ok(self.at(key, self.rev))
    }
}

struct Data {
    state: Mutex<State>,
}

impl Data {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation completes before anything can panic, so a poisoned state is whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl EventSource for Data {
    fn events(&self, range: &KeyRange, from: Revision, to: Revision) -> Result<Vec<Event>> {
        let state = self.lock();
        if from < state.compacted {
            return Err(crate::Error::Compacted {
                requested: from,
                compacted: state.compacted,
            });
        }
        Ok(state
            .log
            .range(from..=to)
            .flat_map(|(_, events)| events)
            .filter(|e| range.contains(&e.kv.key))
            .cloned()
            .collect())
    }
}

/// An in-memory, non-durable [`Backend`] with full history (see the module docs).
pub struct MemoryBackend {
    data: Arc<Data>,
    hub: WatchHub,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// An empty store at revision 1.
    pub fn new() -> Self {
        Self::with_watch_buffer(DEFAULT_WATCH_BUFFER)
    }

    /// An empty store whose watchers may queue `buffer` responses before being ended with
    /// [`crate::Error::WatcherTooSlow`].
    pub fn with_watch_buffer(buffer: usize) -> Self {
        let start = Revision(1);
        MemoryBackend {
            data: Arc::new(Data {
                state: Mutex::new(State {
                    rev: start,
                    compacted: Revision::ZERO,
                    keys: BTreeMap::new(),
                    log: BTreeMap::new(),
                }),
            }),
            hub: WatchHub::new(start, buffer),
        }
    }

    /// Ends every watch and waits for the watch tasks to finish. Further watches fail with
    /// [`crate::Error::Closed`]; reads and writes keep working.
    pub async fn close(&self) {
        self.hub.close().await;
    }

    async fn write(&self, txn: &Txn) -> Result<TxnResponse> {
        // Writes never wait on anything here; without a yield point a writer loop could
        // starve the tasks that drain watchers on the same runtime.
        tokio::task::yield_now().await;
        mvcc::validate_txn(txn)?;
        let mut state = self.data.lock();
        let current = state.rev;
        let out = mvcc::evaluate_txn(&mut *state, txn, current)?;
        if !out.events.is_empty() {
            let rev = out.response.revision;
            state.rev = rev;
            for e in &out.events {
                state
                    .keys
                    .entry(e.kv.key.clone())
                    .or_default()
                    .push(e.clone());
            }
            state.log.insert(rev, out.events.clone());
            // Published under the state lock so watchers see revisions in order.
            self.hub.publish(&out.events, rev);
        }
        Ok(out.response)
    }
}

impl Drop for MemoryBackend {
    fn drop(&mut self) {
        self.hub.cancel();
    }
}

/// The `prev_kv` of a single-op write.
pub(crate) fn single_write_response(resp: TxnResponse) -> WriteResponse {
    let prev_kv = match resp.responses.into_iter().next() {
        Some(OpResponse::Put { prev_kv } | OpResponse::Delete { prev_kv }) => prev_kv,
        _ => None,
    };
    WriteResponse {
        revision: resp.revision,
        prev_kv,
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn current_revision(&self) -> Revision {
        self.data.lock().rev
    }

    fn compacted_revision(&self) -> Revision {
        self.data.lock().compacted
    }

    async fn get(&self, key: &[u8], revision: Option<Revision>) -> Result<GetResponse> {
        let state = self.data.lock();
        let rev = read_revision(revision, state.rev, state.compacted)?;
        Ok(GetResponse {
            kv: state.at(key, rev),
            revision: rev,
        })
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let state = self.data.lock();
        let rev = read_revision(req.revision, state.rev, state.compacted)?;
        let from = req.range.scan_start(req.start.as_ref());
        let mut page = Page::new(req.limit);
        for key in state
            .keys
            .range((Bound::Included(from), Bound::Unbounded))
            .map(|(k, _)| k)
        {
            // Keys come in order from `from`, which is inside the range, so the first key outside
            // it ends the scan.
            if !req.range.contains(key) {
                break;
            }
            if let Some(kv) = state.at(key, rev) {
                page.push(kv);
            }
        }
        Ok(page.finish(rev))
    }

    async fn put(&self, key: Bytes, value: Bytes) -> Result<WriteResponse> {
        self.write(&mvcc::put_txn(key, value))
            .await
            .map(single_write_response)
    }

    async fn delete(&self, key: Bytes) -> Result<WriteResponse> {
        self.write(&mvcc::delete_txn(key))
            .await
            .map(single_write_response)
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.write(&txn).await
    }

    async fn watch(&self, req: WatchRequest) -> Result<Watcher> {
        let start = {
            let state = self.data.lock();
            watch_start(req.start_revision, state.rev, state.compacted)?
        };
        let source: Arc<dyn EventSource> = self.data.clone();
        self.hub.watch(source, req.range, start)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let mut state = self.data.lock();
        check_compact(revision, state.rev, state.compacted)?;
        state.compacted = revision;
        Ok(())
    }

    async fn key_history(&self, key: &[u8]) -> Result<crate::KeyHistory> {
        let state = self.data.lock();
        let compacted = state.compacted;
        let at_compaction = (compacted > Revision::ZERO)
            .then(|| state.at(key, compacted))
            .flatten();
        let changes = state
            .keys
            .get(key)
            .into_iter()
            .flatten()
            .filter(|e| e.kv.mod_revision > compacted)
            .map(|e| Event {
                prev_kv: None,
                ..e.clone()
            })
            .collect();
        Ok(crate::KeyHistory {
            compacted,
            current: state.rev,
            at_compaction,
            changes,
        })
    }
}
