//! The watch cache: one store watch per resource, fanned out to every HTTP watcher of it.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/cacher/`, file by file: this module is
//! `cacher.go` (the [`Cacher`] of a resource: its list and watch of the store, its watchers,
//! the dispatch of each event to them), [`watch_cache`] is `watch_cache.go` (the ring of
//! recent events and the store of current objects) and [`cache_watcher`] is
//! `cache_watcher.go` (one client's stream):
//!
//! ```text
//!                 store watch (prefix /registry/deployments/)
//!                        │ one per resource, started on the first HTTP watch
//!                        ▼
//!   Cacher ── ring of the last N events, ≤ B stored bytes ──┐
//!      │ try_send to each subscriber (bounded)                │ backlog for a watch from a
//!      │                                                      │ recent RV
//!      ├──▶ client A  (full buffer → dropped: its stream ends, it re-watches)
//!      └──▶ client B
//!   a watch from an RV older than the ring → its own store watch (history) until it has
//!   caught up with the ring, then a subscriber like the others; or 410 Expired "too old
//!   resource version" when the store has compacted it
//! ```
//!
//! Events are decoded once, in the cacher, and shared as `Arc`s. A client never slows the
//! cacher or other clients: when its buffer is full it is cut off, never grown.
//!
//! Like `watchCache`'s `store`, each cacher also keeps the current object of every key
//! (listed from the store when the cacher starts, then kept up to date by its events): an
//! event's previous object (`PrevObject`, which selectors are evaluated on) is the one already
//! held there, shared, instead of being decoded again from the store's `prev_kv` for every
//! event.

pub mod cache_watcher;
pub mod watch_cache;

pub use cache_watcher::{DEFAULT_CLIENT_BUFFER, EventStream, StreamEnd};
pub use watch_cache::{CachedEvent, DEFAULT_RING_BYTES, DEFAULT_RING_CAPACITY, EventType};

use crate::decoded_objects::{CurrentObjects, Handoff};
use crate::storage::decode;
use bytes::Bytes;
use cache_watcher::{Source, Subscribe};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use store::{Backend, EventKind, KeyRange, RangeRequest, Revision, WatchRequest, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use watch_cache::{CacherState, EncodedObject, convert_cached};

struct Cacher {
    state: Mutex<CacherState>,
    capacity: usize,
    /// The most stored bytes the ring keeps (it always keeps the newest event).
    max_bytes: usize,
    /// Objects writers offer instead of the bytes being decoded again.
    handoff: Arc<Handoff>,
    /// Whether its objects may be too deep for a worker's stack: its task runs on a large
    /// stack, and so does the drop of what it holds.
    large_stack: bool,
}

impl Drop for Cacher {
    fn drop(&mut self) {
        if self.large_stack {
            let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
            let held = (
                std::mem::take(&mut state.objects),
                std::mem::take(&mut state.ring),
                std::mem::take(&mut state.subscribers),
            );
            crate::deep::on_large_stack(move || drop(held));
        }
    }
}

impl Cacher {
    fn lock(&self) -> std::sync::MutexGuard<'_, CacherState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one store event: updates the objects, appends to the ring, fans out.
    fn apply(&self, e: store::Event) {
        let rev = e.revision();
        let stored = match e.kind {
            EventKind::Put => e.kv.value.len(),
            EventKind::Delete => e.prev_kv.as_ref().map_or(0, |kv| kv.value.len()),
        } + e.kv.key.len();
        let (decoded, encoded) = match e.kind {
            // The writer's own object when it offered one, else the stored bytes decoded.
            EventKind::Put => match self.handoff.take(&e.kv.value) {
                Some((mut object, slot)) => {
                    let rv = rev.0.to_string();
                    crate::meta::set_meta_str(
                        &mut object,
                        crate::meta::MetaField::ResourceVersion,
                        Some(&rv),
                    );
                    // What watchers are sent: the stored bytes with the resourceVersion
                    // spliced in, instead of encoding the object again.
                    let encoded = slot.and_then(|slot| {
                        Some(EncodedObject {
                            api_version: object.get("apiVersion")?.as_str()?.to_owned(),
                            kind: object.get("kind")?.as_str()?.to_owned(),
                            json: crate::stored_json::splice(&e.kv.value, slot, &rv),
                        })
                    });
                    (Some(object), encoded)
                }
                None => (decode(&e.kv.value, rev).ok(), None),
            },
            EventKind::Delete => (None, None),
        };
        // A traced delete's context, for the DELETED event's object.
        let deleted_by = match e.kind {
            EventKind::Delete => self.handoff.take_delete(&e.kv.key),
            EventKind::Put => None,
        };
        let mut s = self.lock();
        s.revision = s.revision.max(rev);
        let Some(ev) = convert_cached(e, decoded, deleted_by.as_deref(), &mut s.objects) else {
            return;
        };
        if let Some(encoded) = encoded {
            // A fresh event: its cell is empty.
            let _ = ev.encoded.set(encoded);
        }
        let evicted = Self::push(
            &mut s,
            (self.capacity, self.max_bytes),
            Arc::new(ev),
            stored,
        );
        drop(s);
        // The events that left the ring are often the last holders of old object versions:
        // freeing its trees (cold memory, ~300 allocations each) is done after the lock is
        // released, so that writers reading the current objects do not wait for it.
        drop(evicted);
    }

    /// Appends `ev` (of `stored` bytes) to the ring and sends it to every subscriber; returns
    /// the events that left the ring (it holds at most `capacity` events and, but for the
    /// newest, `max_bytes`), for the caller to drop outside the lock.
    fn push(
        s: &mut CacherState,
        (capacity, max_bytes): (usize, usize),
        ev: Arc<CachedEvent>,
        stored: usize,
    ) -> Vec<Arc<CachedEvent>> {
        s.ring.push_back((ev.clone(), stored));
        s.ring_bytes += stored;
        let mut evicted = Vec::new();
        while s.ring.len() > capacity || (s.ring_bytes > max_bytes && s.ring.len() > 1) {
            let Some((old, bytes)) = s.ring.pop_front() else {
                break;
            };
            s.ring_bytes -= bytes;
            s.complete_after = old.revision;
            evicted.push(old);
        }
        // A full buffer means a slow client: drop it (its stream ends) rather than wait.
        let before = s.subscribers.len();
        s.subscribers.retain(|tx| tx.try_send(ev.clone()).is_ok());
        if s.subscribers.len() < before {
            tracing::debug!(
                revision = ev.revision.0,
                dropped = before - s.subscribers.len(),
                "watch cache cut off watchers that did not keep up"
            );
        }
        evicted
    }

    /// A subscription for a client that has seen every event up to `after`: the ring's events
    /// after it, then every new one. `None` if the ring no longer reaches back to `after` (or
    /// the cacher lost its store watch): the client must read the store's history instead.
    fn subscribe_after(&self, after: Revision, buffer: usize) -> Option<Source> {
        let mut s = self.lock();
        if s.broken || after < s.complete_after {
            return None;
        }
        let backlog: VecDeque<_> = s
            .ring
            .iter()
            .filter(|(e, _)| e.revision > after)
            .map(|(e, _)| e.clone())
            .collect();
        let (tx, rx) = mpsc::channel(buffer);
        s.subscribers.push(tx);
        Some(Source::Cached { backlog, rx })
    }

    fn break_all(&self) {
        let mut s = self.lock();
        s.broken = true;
        s.subscribers.clear();
    }
}

impl Subscribe for Cacher {
    fn subscribe(&self, after: Revision, buffer: usize) -> Option<Source> {
        self.subscribe_after(after, buffer)
    }
}

impl CurrentObjects for Cacher {
    fn current(&self, key: &[u8], revision: Revision) -> Option<Arc<Value>> {
        let s = self.lock();
        let object = s.objects.get(key)?;
        // The cache may lag the store: only the object of the revision just read will do.
        let cached = crate::meta::resource_version(object)?.parse::<u64>().ok()?;
        (cached == revision.0).then(|| object.clone())
    }
}

/// The per-resource watch caches of one server.
pub struct WatchCache {
    backend: Arc<dyn Backend>,
    cachers: Mutex<HashMap<String, Arc<Cacher>>>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    ring_capacity: usize,
    ring_bytes: usize,
    client_buffer: usize,
    handoff: Arc<Handoff>,
}

impl WatchCache {
    /// A watch cache over `backend`; its tasks stop on `shutdown` and are tracked by `tasks`.
    pub fn new(
        backend: Arc<dyn Backend>,
        tasks: TaskTracker,
        shutdown: CancellationToken,
        ring_capacity: usize,
        client_buffer: usize,
    ) -> Self {
        WatchCache {
            backend,
            cachers: Mutex::new(HashMap::new()),
            tasks,
            shutdown,
            ring_capacity: ring_capacity.max(1),
            ring_bytes: DEFAULT_RING_BYTES,
            client_buffer: client_buffer.max(1),
            handoff: Arc::new(Handoff::new()),
        }
    }

    /// The same cache, taking the objects that writers offer through `handoff` (the
    /// [`crate::storage::Storage::handoff`] of the server's storage) instead of decoding
    /// what they wrote.
    pub fn with_handoff(mut self, handoff: Arc<Handoff>) -> Self {
        self.handoff = handoff;
        self
    }

    /// The same cache, keeping at most `bytes` of stored objects in each resource's ring
    /// (default [`DEFAULT_RING_BYTES`]).
    pub fn with_ring_bytes(mut self, bytes: usize) -> Self {
        self.ring_bytes = bytes;
        self
    }

    async fn cacher(&self, prefix: &str, large_stack: bool) -> store::Result<Arc<Cacher>> {
        {
            let map = self.cachers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(prefix)
                && !c.lock().broken
            {
                return Ok(c.clone());
            }
        }
        // List, then watch from the list's revision on (the cacher's `ListAndWatch`).
        let list = self
            .backend
            .range(RangeRequest::prefix(prefix.to_string()))
            .await?;
        let start = list.revision;
        let objects: BTreeMap<Bytes, Arc<Value>> = list
            .kvs
            .into_iter()
            .filter_map(|kv| {
                let obj = decode(&kv.value, kv.mod_revision).ok()?;
                Some((kv.key, Arc::new(obj)))
            })
            .collect();
        let watcher = self
            .backend
            .watch(WatchRequest {
                range: KeyRange::Prefix(Bytes::from(prefix.to_string())),
                start_revision: Some(start.next()),
            })
            .await?;
        let cacher = Arc::new(Cacher {
            state: Mutex::new(CacherState {
                ring: VecDeque::new(),
                ring_bytes: 0,
                complete_after: start,
                objects,
                revision: start,
                subscribers: Vec::new(),
                broken: false,
            }),
            capacity: self.ring_capacity,
            max_bytes: self.ring_bytes,
            handoff: self.handoff.clone(),
            large_stack,
        });
        {
            let mut map = self.cachers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(prefix)
                && !c.lock().broken
            {
                // Another request won the race; ours is dropped with its watcher.
                return Ok(c.clone());
            }
            map.insert(prefix.to_string(), cacher.clone());
        }
        let objects: std::sync::Weak<dyn CurrentObjects> = Arc::downgrade(&cacher) as _;
        self.handoff.watch_prefix_with(prefix, objects);
        let task_cacher = cacher.clone();
        let shutdown = self.shutdown.clone();
        let prefix = prefix.to_string();
        self.tasks.spawn(crate::deep::LargeStack::new(
            run_cacher(task_cacher, watcher, shutdown, prefix),
            large_stack,
        ));
        Ok(cacher)
    }

    /// Events under `prefix` with a revision above `after`, from the cache when it reaches back
    /// that far, else from the store's history.
    pub async fn watch(&self, prefix: &str, after: Revision) -> store::Result<EventStream> {
        self.watch_on(prefix, after, false).await
    }

    /// [`WatchCache::watch`]; with `large_stack`, the cacher of `prefix` (when this watch
    /// starts it) runs on a large stack: its objects may nest deeper than a worker's stack
    /// can take ([`crate::deep`]).
    pub async fn watch_on(
        &self,
        prefix: &str,
        after: Revision,
        large_stack: bool,
    ) -> store::Result<EventStream> {
        let cacher = self.cacher(prefix, large_stack).await?;
        if let Some(source) = cacher.subscribe_after(after, self.client_buffer) {
            return Ok(EventStream {
                source,
                after,
                requested: after,
            });
        }
        let watcher = self
            .backend
            .watch(WatchRequest {
                range: KeyRange::Prefix(Bytes::from(prefix.to_string())),
                start_revision: Some(after.next()),
            })
            .await;
        match watcher {
            Ok(watcher) => Ok(EventStream {
                source: Source::Store {
                    watcher,
                    pending: VecDeque::new(),
                    cacher,
                    buffer: self.client_buffer,
                },
                after,
                requested: after,
            }),
            Err(e) => Err(e),
        }
    }
}

async fn run_cacher(
    cacher: Arc<Cacher>,
    mut watcher: Watcher,
    shutdown: CancellationToken,
    prefix: String,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            msg = watcher.recv() => match msg {
                Some(Ok(resp)) => {
                    for e in resp.events {
                        cacher.apply(e);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watch cache lost its store watch; it will be restarted");
                    break;
                }
                None => break,
            }
        }
    }
    // Before the cacher is marked broken (which lets a new one start and register again).
    cacher.handoff.unwatch_prefix(&prefix);
    cacher.break_all();
}

#[cfg(test)]
mod tests;
