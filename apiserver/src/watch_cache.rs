//! The watch cache: one store watch per resource, fanned out to every HTTP watcher of it.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/cacher/` (`cacher.go`, `watch_cache.go`):
//!
//! ```text
//!                 store watch (prefix /registry/apps/deployments/)
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

use crate::handoff::{CurrentObjects, Handoff};
use crate::storage::decode;
use bytes::Bytes;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use store::{Backend, EventKind, KeyRange, RangeRequest, Revision, WatchRequest, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Events kept per resource for watches that start from a recent resourceVersion: a few
/// seconds of a 10,000-pod burst, so a client cut off mid-burst resumes from memory.
/// (kube-apiserver sizes its window dynamically to keep 75 s of events, up to 102,400; a
/// fixed ring bounds the memory of old object versions it keeps alive.)
pub const DEFAULT_RING_CAPACITY: usize = 8192;
/// Stored bytes (key + object, as the store holds them) of the events kept per resource, on top
/// of [`DEFAULT_RING_CAPACITY`]: 8192 events of 20 KiB objects would keep ~160 MiB of old
/// object versions alive (several times that decoded), 64 MiB keeps ~3,200 of them. A watch
/// from an older resourceVersion reads the store's history instead, as for any start before
/// the ring.
pub const DEFAULT_RING_BYTES: usize = 64 << 20;
/// Events queued for one client before it is cut off as too slow (kube-apiserver's cacheWatcher
/// buffers up to 1,000 for a watch without an index, then waits briefly before closing it).
pub const DEFAULT_CLIENT_BUFFER: usize = 1024;

/// A watch event's type (`watch.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object, decoded.
#[derive(Debug, Clone)]
pub struct CachedEvent {
    /// What happened.
    pub kind: EventType,
    /// The store key (for namespace filtering).
    pub key: Bytes,
    /// The object after the change (for a delete: its last state, with the delete's RV).
    pub object: Arc<Value>,
    /// The object before the change, if it existed.
    pub prev: Option<Arc<Value>>,
    /// The revision of the change.
    pub revision: Revision,
    /// `object` as JSON with its apiVersion and kind set, encoded by the first watcher that
    /// needs it and shared by the rest: a write fanned out to N plain watchers costs one
    /// encode, not N (the apiserver's `cachingObject` does the same per event).
    encoded: OnceLock<EncodedObject>,
    /// The `PartialObjectMetadata` of `object`, encoded once for every metadata-only watcher
    /// (the garbage collector's informers).
    encoded_metadata: OnceLock<Bytes>,
}

/// The object of an event, encoded for one apiVersion/kind.
#[derive(Debug, Clone)]
struct EncodedObject {
    api_version: String,
    kind: String,
    json: Bytes,
}

impl CachedEvent {
    /// The event's object as a `PartialObjectMetadata` (what `Accept: ...;as=PartialObjectMetadata`
    /// watchers receive), encoded once per event.
    pub fn encoded_partial_metadata(&self) -> Bytes {
        self.encoded_metadata
            .get_or_init(|| {
                let partial = crate::meta::partial_object_metadata(&self.object);
                Bytes::from(crate::wire::to_vec(&partial))
            })
            .clone()
    }

    /// The event's object as JSON with `apiVersion` and `kind` set to these. Encoded once per
    /// event (for the first apiVersion/kind asked; another pair is encoded afresh each time).
    pub fn encoded_object(&self, api_version: &str, kind: &str) -> Bytes {
        let encode = || {
            let typed = self.object.get("apiVersion").and_then(Value::as_str) == Some(api_version)
                && self.object.get("kind").and_then(Value::as_str) == Some(kind);
            if typed {
                // Stored objects nearly always carry their type already: no copy needed.
                return Bytes::from(crate::wire::to_vec(&self.object));
            }
            let mut object = (*self.object).clone();
            crate::meta::set_type(&mut object, api_version, kind);
            Bytes::from(crate::wire::to_vec(&object))
        };
        let cached = self.encoded.get_or_init(|| EncodedObject {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            json: encode(),
        });
        if cached.api_version == api_version && cached.kind == kind {
            cached.json.clone()
        } else {
            encode()
        }
    }
}

/// A store event as a [`CachedEvent`], decoding its previous value too (a watch served from the
/// store's history, which has no cached objects to take it from).
fn convert(e: store::Event) -> Option<CachedEvent> {
    let rev = e.revision();
    let prev = e
        .prev_kv
        .as_ref()
        .and_then(|kv| decode(&kv.value, kv.mod_revision).ok())
        .map(Arc::new);
    match e.kind {
        EventKind::Put => Some(CachedEvent {
            kind: if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            },
            key: e.kv.key.clone(),
            object: Arc::new(decode(&e.kv.value, rev).ok()?),
            prev,
            revision: rev,
            encoded: OnceLock::new(),
            encoded_metadata: OnceLock::new(),
        }),
        EventKind::Delete => {
            let last = e.prev_kv.as_ref()?;
            Some(CachedEvent {
                kind: EventType::Deleted,
                key: e.kv.key.clone(),
                object: Arc::new(decode(&last.value, rev).ok()?),
                prev,
                revision: rev,
                encoded: OnceLock::new(),
                encoded_metadata: OnceLock::new(),
            })
        }
    }
}

/// A store event as a [`CachedEvent`] for the cacher: only the new object is decoded (by the
/// caller, outside the cacher's lock: `decoded`, for a put); the previous one is
/// `objects[key]`, which is then updated (`watchCache.processEvent`). A delete's object is
/// stamped with `deleted_by`, the delete's trace context, if it was traced. Returns
/// `None` for an event the cacher cannot use (a value that is not JSON; a delete of a key it
/// never saw).
fn convert_cached(
    e: store::Event,
    decoded: Option<Value>,
    deleted_by: Option<&str>,
    objects: &mut BTreeMap<Bytes, Arc<Value>>,
) -> Option<CachedEvent> {
    let rev = e.revision();
    let key = e.kv.key.clone();
    // Fall back to decoding prev_kv if the key is unknown (it should not be: the cacher
    // starts from a full list at the revision before its first event).
    let prev = objects.get(&key).cloned().or_else(|| {
        e.prev_kv
            .as_ref()
            .and_then(|kv| decode(&kv.value, kv.mod_revision).ok())
            .map(Arc::new)
    });
    match e.kind {
        EventKind::Put => {
            let object = Arc::new(decoded?);
            objects.insert(key.clone(), object.clone());
            Some(CachedEvent {
                kind: if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                key,
                object,
                prev,
                revision: rev,
                encoded: OnceLock::new(),
                encoded_metadata: OnceLock::new(),
            })
        }
        EventKind::Delete => {
            objects.remove(&key);
            let last = prev.clone()?;
            // The deleted object as last seen, with the delete's resourceVersion (and the
            // delete's trace context, when it was traced).
            let mut object = (*last).clone();
            if let Some(tp) = deleted_by {
                crate::request_trace::set_annotation(&mut object, Some(tp));
            }
            crate::meta::set_meta_str(
                &mut object,
                crate::meta::MetaField::ResourceVersion,
                Some(&rev.0.to_string()),
            );
            Some(CachedEvent {
                kind: EventType::Deleted,
                key,
                object: Arc::new(object),
                prev,
                revision: rev,
                encoded: OnceLock::new(),
                encoded_metadata: OnceLock::new(),
            })
        }
    }
}

struct CacherState {
    /// The recent events, each with its stored bytes.
    ring: VecDeque<(Arc<CachedEvent>, usize)>,
    /// The sum of the ring's stored bytes.
    ring_bytes: usize,
    /// Every event with a revision above this one is in `ring` (or still on its way).
    complete_after: Revision,
    /// The current object of every key, as of `revision` (`watchCache.store`).
    objects: BTreeMap<Bytes, Arc<Value>>,
    /// The revision `objects` reflects: the last event applied, or the initial list's.
    revision: Revision,
    subscribers: Vec<mpsc::Sender<Arc<CachedEvent>>>,
    broken: bool,
}

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
    fn subscribe(&self, after: Revision, buffer: usize) -> Option<Source> {
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

impl CurrentObjects for Cacher {
    fn current(&self, key: &[u8], revision: Revision) -> Option<Arc<Value>> {
        let s = self.lock();
        let object = s.objects.get(key)?;
        // The cache may lag the store: only the object of the revision just read will do.
        let cached = crate::meta::resource_version(object)?.parse::<u64>().ok()?;
        (cached == revision.0).then(|| object.clone())
    }
}

/// Why a watch stream stopped delivering events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// The start revision has been compacted: the client must re-list (410 Expired).
    TooOld {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still available.
        oldest: Revision,
    },
}

enum Source {
    Cached {
        backlog: VecDeque<Arc<CachedEvent>>,
        rx: mpsc::Receiver<Arc<CachedEvent>>,
    },
    Store {
        watcher: Watcher,
        pending: VecDeque<Arc<CachedEvent>>,
        /// The resource's cacher, joined as soon as the client has caught up with its ring.
        cacher: Arc<Cacher>,
        /// The client buffer to subscribe with.
        buffer: usize,
    },
}

/// The events of one resource after a revision, for one client.
pub struct EventStream {
    source: Source,
    after: Revision,
    requested: Revision,
}

impl EventStream {
    /// Whether the cache has cut this stream off (a client too slow to keep its buffer from
    /// filling): the events already queued are all it will get.
    pub fn is_cut_off(&self) -> bool {
        match &self.source {
            Source::Cached { rx, .. } => rx.is_closed(),
            Source::Store { .. } => false,
        }
    }

    /// The next event; `None` when the stream is over (cut off, store closed), `Some(Err)` when
    /// the start revision is too old.
    pub async fn next(&mut self) -> Option<Result<Arc<CachedEvent>, StreamEnd>> {
        loop {
            let ev = match &mut self.source {
                Source::Cached { backlog, rx } => match backlog.pop_front() {
                    Some(ev) => ev,
                    None => rx.recv().await?,
                },
                Source::Store {
                    watcher,
                    pending,
                    cacher,
                    buffer,
                } => match pending.pop_front() {
                    Some(ev) => ev,
                    // Caught up with the cacher's window: go on from the shared cache (each
                    // event decoded and encoded once for all its clients) and drop the store
                    // watch, which decodes every event (and its previous version) for this
                    // client alone.
                    None => match cacher.subscribe(self.after, *buffer) {
                        Some(cached) => {
                            self.source = cached;
                            continue;
                        }
                        None => match watcher.recv().await? {
                            Ok(resp) => {
                                pending.extend(
                                    resp.events.into_iter().filter_map(convert).map(Arc::new),
                                );
                                continue;
                            }
                            Err(store::Error::Compacted { compacted, .. }) => {
                                return Some(Err(StreamEnd::TooOld {
                                    requested: self.requested,
                                    oldest: compacted,
                                }));
                            }
                            Err(_) => return None,
                        },
                    },
                },
            };
            // The cacher may still deliver events the client has already seen in its list.
            if ev.revision > self.after {
                self.after = ev.revision;
                return Some(Ok(ev));
            }
        }
    }

    /// The revision of the last event delivered (or the start revision): a safe bookmark.
    pub fn progress(&self) -> Revision {
        self.after
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
        if let Some(source) = cacher.subscribe(after, self.client_buffer) {
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
mod tests {
    use super::*;
    use store::MemoryBackend;

    async fn put(b: &MemoryBackend, k: &str, v: &str) {
        b.put(Bytes::from(k.to_string()), Bytes::from(v.to_string()))
            .await
            .expect("put");
    }

    fn cache(b: Arc<MemoryBackend>, cap: usize, buf: usize) -> WatchCache {
        WatchCache::new(b, TaskTracker::new(), CancellationToken::new(), cap, buf)
    }

    /// The cacher of `prefix` (one exists once a watch of it started).
    fn cacher(wc: &WatchCache, prefix: &str) -> Arc<Cacher> {
        wc.cachers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(prefix)
            .expect("cacher")
            .clone()
    }

    #[tokio::test]
    async fn fans_out_and_replays_recent_events() {
        let b = Arc::new(MemoryBackend::new());
        let wc = cache(b.clone(), 16, 16);
        let start = b.current_revision();
        let mut a = wc.watch("/r/", start).await.expect("watch");
        put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"}}").await;
        let ev = a.next().await.expect("event").expect("ok");
        assert_eq!(ev.kind, EventType::Added);
        assert_eq!(
            ev.object["metadata"]["resourceVersion"],
            ev.revision.0.to_string()
        );
        // A second client from the same start gets the event from the ring.
        let mut c = wc.watch("/r/", start).await.expect("watch");
        let ev2 = c.next().await.expect("event").expect("ok");
        assert_eq!(ev2.revision, ev.revision);
    }

    #[tokio::test]
    async fn a_put_takes_the_object_its_writer_offered() {
        let b = Arc::new(MemoryBackend::new());
        let handoff = Arc::new(Handoff::new());
        let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
        let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
        assert!(handoff.wants(b"/r/x"), "the cacher registered its prefix");
        assert!(!handoff.wants(b"/other/x"));
        // The offered object differs from the bytes (which no writer would do) to show which
        // of the two the event carries.
        let bytes = Bytes::from_static(b"{\"metadata\":{\"name\":\"x\"},\"v\":1}");
        let offered =
            serde_json::json!({"metadata": {"name": "x", "resourceVersion": "7"}, "v": "offered"});
        let stored = crate::stored_json::StoredJson {
            bytes: bytes.clone(),
            slot: None,
        };
        handoff.offer(b"/r/x", &stored, &offered);
        b.put(Bytes::from_static(b"/r/x"), bytes)
            .await
            .expect("put");
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(ev.object["v"], "offered");
        assert_eq!(
            ev.object["metadata"]["resourceVersion"],
            ev.revision.0.to_string(),
            "the offer's stale resourceVersion is replaced by the write's"
        );
        assert_eq!(handoff.held(), 0, "the offer was taken");
        // Bytes nobody offered are decoded.
        put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"},\"v\":2}").await;
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(ev.object["v"], 2);
        // Writers can start from the cacher's object of the revision they read, and only
        // that revision's.
        let current = handoff.current(b"/r/x", ev.revision).expect("cached");
        assert!(Arc::ptr_eq(&current, &ev.object));
        assert!(
            handoff
                .current(b"/r/x", Revision(ev.revision.0 - 1))
                .is_none()
        );
        assert!(handoff.current(b"/r/y", ev.revision).is_none());
    }

    #[tokio::test]
    async fn a_deleted_event_carries_the_trace_context_its_delete_offered() {
        let b = Arc::new(MemoryBackend::new());
        let handoff = Arc::new(Handoff::new());
        let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
        let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
        let created = format!(
            "{{\"metadata\":{{\"name\":\"x\",\"annotations\":{{\"{}\":\"00-created\"}}}}}}",
            trace::TRACEPARENT_ANNOTATION
        );
        put(&b, "/r/x", &created).await;
        put(&b, "/r/y", &created).await;
        for _ in 0..2 {
            w.next().await.expect("event").expect("ok");
        }
        handoff.offer_delete(b"/r/x", "00-deleted");
        b.delete(Bytes::from_static(b"/r/x")).await.expect("delete");
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(ev.kind, EventType::Deleted);
        assert_eq!(
            crate::request_trace::annotation(&ev.object),
            Some("00-deleted"),
            "the delete's context, not the create's"
        );
        assert_eq!(handoff.take_delete(b"/r/x"), None, "taken");
        // An untraced delete: the object as last stored.
        b.delete(Bytes::from_static(b"/r/y")).await.expect("delete");
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(
            crate::request_trace::annotation(&ev.object),
            Some("00-created")
        );
    }

    #[tokio::test]
    async fn a_taken_offer_is_sent_as_its_stored_bytes_with_the_resource_version() {
        let b = Arc::new(MemoryBackend::new());
        let handoff = Arc::new(Handoff::new());
        let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
        let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "x", "namespace": "d", "resourceVersion": "3", "uid": "u"},
            "spec": {"nodeName": "n"}
        });
        let stored = crate::stored_json::encode(&object).expect("encode");
        handoff.offer(b"/r/x", &stored, &object);
        b.put(Bytes::from_static(b"/r/x"), stored.bytes.clone())
            .await
            .expect("put");
        let ev = w.next().await.expect("event").expect("ok");
        let sent = ev.encoded_object("v1", "Pod");
        assert_eq!(
            serde_json::from_slice::<Value>(&sent).expect("JSON"),
            *ev.object,
            "the bytes sent are the event's object"
        );
        assert_eq!(
            sent,
            stored.with_resource_version(ev.revision.0).expect("a slot"),
            "the stored bytes with the resourceVersion"
        );
        assert_eq!(sent, crate::wire::to_vec(&ev.object));
        // Asked as another type, the object is encoded with that type.
        let other: Value = serde_json::from_slice(&ev.encoded_object("v2", "Pod")).expect("JSON");
        assert_eq!(other["apiVersion"], "v2");
    }

    #[tokio::test]
    async fn previous_objects_come_from_the_cached_state() {
        let b = Arc::new(MemoryBackend::new());
        // Written before the cacher starts: known from its initial list.
        put(&b, "/r/old", "{\"metadata\":{\"name\":\"old\"},\"v\":1}").await;
        let wc = cache(b.clone(), 16, 16);
        let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
        put(&b, "/r/old", "{\"metadata\":{\"name\":\"old\"},\"v\":2}").await;
        put(&b, "/r/new", "{\"metadata\":{\"name\":\"new\"},\"v\":1}").await;
        put(&b, "/r/new", "{\"metadata\":{\"name\":\"new\"},\"v\":2}").await;
        b.delete(Bytes::from_static(b"/r/old"))
            .await
            .expect("delete");

        let modified = w.next().await.expect("event").expect("ok");
        assert_eq!(modified.kind, EventType::Modified);
        let prev = modified.prev.as_ref().expect("prev from the initial list");
        assert_eq!(
            (prev["v"].clone(), modified.object["v"].clone()),
            (1.into(), 2.into())
        );

        let added = w.next().await.expect("event").expect("ok");
        assert_eq!(added.kind, EventType::Added);
        assert!(added.prev.is_none());
        let updated = w.next().await.expect("event").expect("ok");
        assert_eq!(updated.kind, EventType::Modified);
        assert!(
            Arc::ptr_eq(updated.prev.as_ref().expect("prev"), &added.object),
            "the previous object is the cached one, not a fresh decode"
        );

        let deleted = w.next().await.expect("event").expect("ok");
        assert_eq!(deleted.kind, EventType::Deleted);
        assert_eq!(deleted.object["v"], 2, "a delete carries the last state");
        assert_eq!(
            deleted.object["metadata"]["resourceVersion"],
            deleted.revision.0.to_string(),
            "with the delete's resourceVersion"
        );
        // The same history read from the store (no cached state) gives the same events.
        // (From revision 0: older than the cacher's start, so served from the store's history,
        // beginning with the first put.)
        let mut h = Vec::new();
        let mut from_store = wc.watch("/r/", Revision(0)).await.expect("watch");
        while h.len() < 5 {
            let ev = from_store.next().await.expect("event").expect("ok");
            h.push((ev.kind, ev.object.clone(), ev.prev.clone()));
        }
        assert_eq!(h.remove(0).0, EventType::Added);
        let cached = [&modified, &added, &updated, &deleted];
        for ((kind, object, prev), c) in h.iter().zip(cached) {
            assert_eq!((kind, object, prev), (&c.kind, &c.object, &c.prev));
        }
    }

    #[tokio::test]
    async fn a_watch_from_history_joins_the_cache_once_caught_up() {
        let b = Arc::new(MemoryBackend::new());
        put(&b, "/r/a", "{\"v\":1}").await;
        put(&b, "/r/a", "{\"v\":2}").await;
        let wc = cache(b.clone(), 16, 16);
        // Starts the cacher at the current revision; then a client from before it.
        let mut live = wc.watch("/r/", b.current_revision()).await.expect("watch");
        let base = b.current_revision().0 - 2;
        let mut old = wc.watch("/r/", Revision(base)).await.expect("watch");
        put(&b, "/r/b", "{\"v\":1}").await;
        let mut kinds = Vec::new();
        for _ in 0..3 {
            let ev = old.next().await.expect("event").expect("ok");
            kinds.push((ev.kind, ev.revision));
        }
        let r = |n| Revision(base + n);
        assert_eq!(
            kinds,
            [
                (EventType::Added, r(1)),
                (EventType::Modified, r(2)),
                (EventType::Added, r(3))
            ],
            "the history first, without a gap"
        );
        put(&b, "/r/c", "{\"v\":1}").await;
        let _ = live.next().await.expect("event").expect("ok");
        let shared = live.next().await.expect("event").expect("ok");
        let from_old = old.next().await.expect("event").expect("ok");
        assert_eq!(from_old.revision, r(4));
        assert!(
            Arc::ptr_eq(&shared, &from_old),
            "once caught up, the client is served the cacher's shared event"
        );
    }

    #[tokio::test]
    async fn the_ring_keeps_the_newest_events_and_older_starts_read_the_history() {
        let b = Arc::new(MemoryBackend::new());
        let wc = cache(b.clone(), 2, 16);
        let start = b.current_revision();
        let mut live = wc.watch("/r/", start).await.expect("watch");
        for i in 0..5 {
            put(&b, &format!("/r/{i}"), "{}").await;
        }
        let mut revisions = Vec::new();
        for _ in 0..5 {
            revisions.push(live.next().await.expect("event").expect("ok").revision);
        }
        // The ring holds the last two events: a watch after the third is served from it.
        let mut recent = wc.watch("/r/", revisions[2]).await.expect("watch");
        let ev = recent.next().await.expect("event").expect("ok");
        assert_eq!(ev.revision, revisions[3]);
        // One from before them reads the store's history, without a gap.
        let mut old = wc.watch("/r/", start).await.expect("watch");
        for want in &revisions {
            let ev = old.next().await.expect("event").expect("ok");
            assert_eq!(ev.revision, *want);
        }
        let s = cacher(&wc, "/r/");
        let state = s.lock();
        assert_eq!(state.ring.len(), 2);
        assert_eq!(state.complete_after, revisions[2]);
    }

    #[tokio::test]
    async fn the_ring_keeps_at_most_its_bytes_and_older_starts_read_the_history() {
        let b = Arc::new(MemoryBackend::new());
        // Room for 64 events by count, but only ~3 of these by bytes.
        let wc = cache(b.clone(), 64, 64).with_ring_bytes(1000);
        let start = b.current_revision();
        let mut live = wc.watch("/r/", start).await.expect("watch");
        let value = format!("{{\"data\":\"{}\"}}", "x".repeat(300));
        let mut revisions = Vec::new();
        for i in 0..10 {
            put(&b, &format!("/r/{i}"), &value).await;
            revisions.push(live.next().await.expect("event").expect("ok").revision);
        }
        let s = cacher(&wc, "/r/");
        {
            let state = s.lock();
            assert_eq!(state.ring.len(), 3);
            assert!(state.ring_bytes <= 1000, "{} bytes kept", state.ring_bytes);
            assert_eq!(state.complete_after, revisions[6]);
        }
        // A watch from before the ring reads the store's history, without a gap.
        let mut old = wc.watch("/r/", start).await.expect("watch");
        for want in &revisions {
            let ev = old.next().await.expect("event").expect("ok");
            assert_eq!(ev.revision, *want);
        }
    }

    #[tokio::test]
    async fn slow_clients_are_cut_off() {
        let b = Arc::new(MemoryBackend::new());
        let wc = cache(b.clone(), 64, 2);
        let mut slow = wc.watch("/r/", b.current_revision()).await.expect("watch");
        for i in 0..10 {
            put(&b, &format!("/r/{i}"), "{}").await;
        }
        // Let the cacher process the events, then drain: the stream ends early.
        let mut seen = 0;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while let Ok(Some(Ok(_))) = tokio::time::timeout_at(deadline, slow.next()).await {
            seen += 1;
        }
        assert!(seen < 10, "a slow client was not cut off ({seen} events)");
    }

    #[tokio::test]
    async fn compacted_history_is_reported_as_too_old() {
        let b = Arc::new(MemoryBackend::new());
        put(&b, "/r/a", "{}").await;
        put(&b, "/r/a", "{}").await;
        let wc = cache(b.clone(), 16, 16);
        b.compact(b.current_revision()).await.expect("compact");
        match wc.watch("/r/", Revision(1)).await {
            Err(store::Error::Compacted { .. }) => {}
            Ok(mut s) => assert!(matches!(
                s.next().await,
                Some(Err(StreamEnd::TooOld { .. }))
            )),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}
