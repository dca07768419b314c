//! The watch cache: one store watch per resource, fanned out to every HTTP watcher of it.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/cacher/` (`cacher.go`, `watch_cache.go`):
//!
//! ```text
//!                 store watch (prefix /registry/apps/deployments/)
//!                        │ one per resource, started on the first HTTP watch
//!                        ▼
//!   Cacher ── ring of the last N events (VecDeque) ──┐
//!      │ try_send to each subscriber (bounded)       │ backlog for a watch from a recent RV
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
//!
//! Objects are kept **encoded** ([`CachedObject`]: the JSON every plain watcher is sent, plus
//! what selectors read of it, taken once when the event arrives), not as decoded trees:
//! kube-apiserver's cacher keeps decoded Go objects, but a `serde_json::Value` of a running
//! pod is ~35 KB in ~300 allocations against ~4 KB of JSON, and holding one per key and per
//! event of the ring made every write allocate fresh memory and free cold memory
//! (docs/benchmarks.md, "Session 23"). What needs the whole object (a table watch, a watch at
//! another apiVersion, a delete's last state) decodes the JSON.

use crate::handoff::Handoff;
use crate::storage::decode;
use crate::strategy::Strategy;
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

/// A strategy's identity: the address of the one instance a registry row holds.
pub fn strategy_id(strategy: &Arc<dyn Strategy>) -> usize {
    Arc::as_ptr(strategy) as *const () as usize
}

/// What the watch cache keeps of an object besides its JSON: its type and everything a
/// label or field selector reads (`storage.AttrFunc`: labels and fields, which kube-apiserver's
/// cacher also computes once per event, `watchCacheEvent.ObjLabels`/`ObjFields`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectSummary {
    /// `apiVersion` as stored.
    pub api_version: String,
    /// `kind` as stored.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.labels`.
    pub labels: Vec<(String, String)>,
    /// The kind's selectable fields ([`Strategy::selectable_fields`]).
    pub fields: Vec<(&'static str, String)>,
    /// The [`strategy_id`] of the strategy that gave `fields`: a watcher served by another one
    /// (events.k8s.io and core Events share their objects) evaluates its field selector on
    /// the decoded object instead.
    pub fields_by: usize,
}

impl ObjectSummary {
    /// The summary of `obj`, with the selectable fields of `strategy`.
    pub fn of(obj: &Value, strategy: &Arc<dyn Strategy>) -> ObjectSummary {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
        ObjectSummary {
            api_version: text(obj.get("apiVersion")),
            kind: text(obj.get("kind")),
            name: crate::meta::name(obj).unwrap_or_default().to_string(),
            namespace: crate::meta::namespace(obj).unwrap_or_default().to_string(),
            labels: crate::meta::labels(obj)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            fields: strategy.selectable_fields(obj),
            fields_by: strategy_id(strategy),
        }
    }

    /// The value of field `field` (`metadata.name`, `metadata.namespace` or one of the
    /// kind's selectable fields), `None` when the kind has no such field.
    pub fn field(&self, field: &str) -> Option<&str> {
        match field {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            other => self
                .fields
                .iter()
                .find(|(f, _)| *f == other)
                .map(|(_, v)| v.as_str()),
        }
    }
}

/// One version of one object as the watch cache holds it: its JSON (with its
/// resourceVersion) and its [`ObjectSummary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    json: Bytes,
    summary: ObjectSummary,
}

impl CachedObject {
    /// `object` (with its resourceVersion set), encoded, with the selectable fields of
    /// `strategy`. `None` if it does not encode.
    pub fn from_value(object: &Value, strategy: &Arc<dyn Strategy>) -> Option<CachedObject> {
        Some(CachedObject {
            json: Bytes::from(serde_json::to_vec(object).ok()?),
            summary: ObjectSummary::of(object, strategy),
        })
    }

    /// The object as JSON, as stored (with its resourceVersion).
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// What selectors read of the object.
    pub fn summary(&self) -> &ObjectSummary {
        &self.summary
    }

    /// The object decoded (`None` only if the JSON does not decode, which the cache never
    /// stores).
    pub fn value(&self) -> Option<Value> {
        serde_json::from_slice(&self.json).ok()
    }

    /// The same object with another resourceVersion (a delete's last state).
    fn with_resource_version(&self, rev: Revision) -> Option<CachedObject> {
        let mut object = self.value()?;
        crate::meta::set_meta_str(
            &mut object,
            crate::meta::MetaField::ResourceVersion,
            Some(&rev.0.to_string()),
        );
        Some(CachedObject {
            json: Bytes::from(serde_json::to_vec(&object).ok()?),
            summary: self.summary.clone(),
        })
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
    pub object: Arc<CachedObject>,
    /// The object before the change, if it existed.
    pub prev: Option<Arc<CachedObject>>,
    /// The revision of the change.
    pub revision: Revision,
    /// The `PartialObjectMetadata` of `object`, encoded once for every metadata-only watcher
    /// (the garbage collector's informers).
    encoded_metadata: OnceLock<Bytes>,
}

impl CachedEvent {
    fn new(
        kind: EventType,
        key: Bytes,
        object: Arc<CachedObject>,
        prev: Option<Arc<CachedObject>>,
        revision: Revision,
    ) -> CachedEvent {
        CachedEvent {
            kind,
            key,
            object,
            prev,
            revision,
            encoded_metadata: OnceLock::new(),
        }
    }

    /// The event's object as a `PartialObjectMetadata` (what `Accept: ...;as=PartialObjectMetadata`
    /// watchers receive), encoded once per event: the object's `metadata` is copied from its
    /// JSON as it is (a compact, key-ordered encoding, as `serde_json` writes it), not decoded.
    pub fn encoded_partial_metadata(&self) -> Bytes {
        self.encoded_metadata
            .get_or_init(|| partial_metadata_json(&self.object.json))
            .clone()
    }

    /// The event's object as JSON with `apiVersion` and `kind` set to these: the cached JSON
    /// itself when the object already has them (stored objects nearly always do), else
    /// decoded and encoded afresh with them.
    pub fn encoded_object(&self, api_version: &str, kind: &str) -> Bytes {
        let summary = &self.object.summary;
        if summary.api_version == api_version && summary.kind == kind {
            return self.object.json.clone();
        }
        let Some(mut object) = self.object.value() else {
            return self.object.json.clone();
        };
        crate::meta::set_type(&mut object, api_version, kind);
        Bytes::from(serde_json::to_vec(&object).unwrap_or_default())
    }
}

/// `{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":…}` of an object
/// given as JSON, with its `metadata` member's text as it is there (`{}` when it has none).
fn partial_metadata_json(json: &[u8]) -> Bytes {
    /// The one member read, borrowed from the JSON.
    #[derive(serde::Deserialize)]
    struct MetadataOnly<'a> {
        #[serde(borrow, default)]
        metadata: Option<&'a serde_json::value::RawValue>,
    }
    let metadata = serde_json::from_slice::<MetadataOnly<'_>>(json)
        .ok()
        .and_then(|m| m.metadata)
        .map_or("{}", |raw| raw.get());
    const HEAD: &str =
        r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":"#;
    let mut out = Vec::with_capacity(HEAD.len() + metadata.len() + 1);
    out.extend_from_slice(HEAD.as_bytes());
    out.extend_from_slice(metadata.as_bytes());
    out.push(b'}');
    Bytes::from(out)
}

/// A store event as a [`CachedEvent`], decoding its previous value too (a watch served from the
/// store's history, which has no cached objects to take it from).
fn convert(e: store::Event, strategy: &Arc<dyn Strategy>) -> Option<CachedEvent> {
    let rev = e.revision();
    let prev = e
        .prev_kv
        .as_ref()
        .and_then(|kv| decode(&kv.value, kv.mod_revision).ok())
        .and_then(|obj| CachedObject::from_value(&obj, strategy))
        .map(Arc::new);
    let (kind, object) = match e.kind {
        EventKind::Put => (
            if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            },
            decode(&e.kv.value, rev).ok()?,
        ),
        EventKind::Delete => (
            EventType::Deleted,
            decode(&e.prev_kv.as_ref()?.value, rev).ok()?,
        ),
    };
    let object = Arc::new(CachedObject::from_value(&object, strategy)?);
    Some(CachedEvent::new(kind, e.kv.key.clone(), object, prev, rev))
}

/// A store event as a [`CachedEvent`] for the cacher: the new object is given by the caller
/// (made outside the cacher's lock: `cached`, for a put); the previous one is
/// `objects[key]`, which is then updated (`watchCache.processEvent`). Returns `None` for an
/// event the cacher cannot use (a value that is not JSON; a delete of a key it never saw).
fn convert_cached(
    e: store::Event,
    cached: Option<CachedObject>,
    objects: &mut BTreeMap<Bytes, Arc<CachedObject>>,
    strategy: &Arc<dyn Strategy>,
) -> Option<CachedEvent> {
    let rev = e.revision();
    let key = e.kv.key.clone();
    // Fall back to decoding prev_kv if the key is unknown (it should not be: the cacher
    // starts from a full list at the revision before its first event).
    let prev = objects.get(&key).cloned().or_else(|| {
        e.prev_kv
            .as_ref()
            .and_then(|kv| decode(&kv.value, kv.mod_revision).ok())
            .and_then(|obj| CachedObject::from_value(&obj, strategy))
            .map(Arc::new)
    });
    match e.kind {
        EventKind::Put => {
            let object = Arc::new(cached?);
            objects.insert(key.clone(), object.clone());
            let kind = if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            Some(CachedEvent::new(kind, key, object, prev, rev))
        }
        EventKind::Delete => {
            objects.remove(&key);
            // The deleted object as last seen, with the delete's resourceVersion.
            let object = Arc::new(prev.as_ref()?.with_resource_version(rev)?);
            Some(CachedEvent::new(EventType::Deleted, key, object, prev, rev))
        }
    }
}

struct CacherState {
    ring: VecDeque<Arc<CachedEvent>>,
    /// Every event with a revision above this one is in `ring` (or still on its way).
    complete_after: Revision,
    /// The current object of every key, as of `revision` (`watchCache.store`).
    objects: BTreeMap<Bytes, Arc<CachedObject>>,
    /// The revision `objects` reflects: the last event applied, or the initial list's.
    revision: Revision,
    subscribers: Vec<mpsc::Sender<Arc<CachedEvent>>>,
    broken: bool,
}

struct Cacher {
    state: Mutex<CacherState>,
    capacity: usize,
    /// What writers offer instead of the bytes being decoded again.
    handoff: Arc<Handoff>,
    /// The selectable fields of the resource's objects.
    strategy: Arc<dyn Strategy>,
}

impl Cacher {
    fn lock(&self) -> std::sync::MutexGuard<'_, CacherState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one store event: updates the objects, appends to the ring, fans out.
    fn apply(&self, e: store::Event) {
        let rev = e.revision();
        let cached = match e.kind {
            // What the writer offered: the stored bytes with the resourceVersion spliced in,
            // and the summary it took of the object, so nothing is decoded or encoded here.
            EventKind::Put => match self.handoff.take(&e.kv.value) {
                Some((summary, Some(slot))) => Some(CachedObject {
                    json: crate::stored_json::splice(&e.kv.value, slot, &rev.0.to_string()),
                    summary,
                }),
                _ => decode(&e.kv.value, rev)
                    .ok()
                    .and_then(|obj| CachedObject::from_value(&obj, &self.strategy)),
            },
            EventKind::Delete => None,
        };
        let mut s = self.lock();
        s.revision = s.revision.max(rev);
        if let Some(ev) = convert_cached(e, cached, &mut s.objects, &self.strategy) {
            Self::push(&mut s, self.capacity, Arc::new(ev));
        }
    }

    fn push(s: &mut CacherState, capacity: usize, ev: Arc<CachedEvent>) {
        s.ring.push_back(ev.clone());
        while s.ring.len() > capacity {
            if let Some(old) = s.ring.pop_front() {
                s.complete_after = old.revision;
            }
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
            .filter(|e| e.revision > after)
            .cloned()
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
                                    resp.events
                                        .into_iter()
                                        .filter_map(|e| convert(e, &cacher.strategy))
                                        .map(Arc::new),
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

    async fn cacher(
        &self,
        prefix: &str,
        strategy: &Arc<dyn Strategy>,
    ) -> store::Result<Arc<Cacher>> {
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
        let objects: BTreeMap<Bytes, Arc<CachedObject>> = list
            .kvs
            .into_iter()
            .filter_map(|kv| {
                let obj = decode(&kv.value, kv.mod_revision).ok()?;
                Some((kv.key, Arc::new(CachedObject::from_value(&obj, strategy)?)))
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
                complete_after: start,
                objects,
                revision: start,
                subscribers: Vec::new(),
                broken: false,
            }),
            capacity: self.ring_capacity,
            handoff: self.handoff.clone(),
            strategy: strategy.clone(),
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
        self.handoff.watch_prefix(prefix);
        let task_cacher = cacher.clone();
        let shutdown = self.shutdown.clone();
        let prefix = prefix.to_string();
        self.tasks
            .spawn(run_cacher(task_cacher, watcher, shutdown, prefix));
        Ok(cacher)
    }

    /// Events under `prefix` with a revision above `after`, from the cache when it reaches back
    /// that far, else from the store's history. `strategy` (the resource's) gives the
    /// selectable fields of its objects; the first watch of a prefix starts its cacher with it.
    pub async fn watch(
        &self,
        prefix: &str,
        after: Revision,
        strategy: &Arc<dyn Strategy>,
    ) -> store::Result<EventStream> {
        let cacher = self.cacher(prefix, strategy).await?;
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

    /// A kind without selectable fields of its own.
    fn strategy() -> Arc<dyn Strategy> {
        Arc::new(crate::strategy::DefaultStrategy {
            gvk: crate::gvk::GroupVersionKind::new("", "v1", "ConfigMap"),
        })
    }

    /// The pods' strategy (selectable fields such as `spec.nodeName`).
    fn pod_strategy() -> Arc<dyn Strategy> {
        crate::registry::Registry::builtin()
            .lookup(&crate::gvk::GroupVersion::parse_api_version("v1"), "pods")
            .expect("pods are built in")
            .strategy
            .clone()
    }

    /// A cached object, decoded.
    fn value(object: &CachedObject) -> Value {
        object.value().expect("the cache holds JSON")
    }

    fn cache(b: Arc<MemoryBackend>, cap: usize, buf: usize) -> WatchCache {
        WatchCache::new(b, TaskTracker::new(), CancellationToken::new(), cap, buf)
    }

    #[tokio::test]
    async fn fans_out_and_replays_recent_events() {
        let b = Arc::new(MemoryBackend::new());
        let wc = cache(b.clone(), 16, 16);
        let start = b.current_revision();
        let mut a = wc.watch("/r/", start, &strategy()).await.expect("watch");
        put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"}}").await;
        let ev = a.next().await.expect("event").expect("ok");
        assert_eq!(ev.kind, EventType::Added);
        assert_eq!(
            value(&ev.object)["metadata"]["resourceVersion"],
            ev.revision.0.to_string()
        );
        // A second client from the same start gets the event from the ring.
        let mut c = wc.watch("/r/", start, &strategy()).await.expect("watch");
        let ev2 = c.next().await.expect("event").expect("ok");
        assert_eq!(ev2.revision, ev.revision);
    }

    #[tokio::test]
    async fn a_put_takes_the_summary_its_writer_offered() {
        let b = Arc::new(MemoryBackend::new());
        let handoff = Arc::new(Handoff::new());
        let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
        let mut w = wc
            .watch("/r/", b.current_revision(), &strategy())
            .await
            .expect("watch");
        assert!(handoff.wants(b"/r/x"), "the cacher registered its prefix");
        assert!(!handoff.wants(b"/other/x"));
        let object = serde_json::json!({"metadata": {"name": "x"}, "v": 1});
        let stored = crate::stored_json::encode(&object).expect("encode");
        // The offered summary differs from the object (which no writer would do) to show
        // which of the two the event carries.
        let offered = ObjectSummary {
            name: "offered".into(),
            ..ObjectSummary::default()
        };
        handoff.offer(b"/r/x", &stored, || offered.clone());
        b.put(Bytes::from_static(b"/r/x"), stored.bytes.clone())
            .await
            .expect("put");
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(ev.object.summary(), &offered);
        assert_eq!(
            ev.object.json(),
            &stored.with_resource_version(ev.revision.0).expect("a slot"),
            "the stored bytes with the write's resourceVersion"
        );
        assert_eq!(handoff.held(), 0, "the offer was taken");
        // Bytes nobody offered are decoded, and summarized by the cacher's strategy.
        put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"},\"v\":2}").await;
        let ev = w.next().await.expect("event").expect("ok");
        assert_eq!(value(&ev.object)["v"], 2);
        assert_eq!(
            value(&ev.object)["metadata"]["resourceVersion"],
            ev.revision.0.to_string()
        );
        assert_eq!(ev.object.summary().name, "x");
    }

    #[tokio::test]
    async fn events_are_sent_as_cached_json_and_summarized_for_selectors() {
        let b = Arc::new(MemoryBackend::new());
        let handoff = Arc::new(Handoff::new());
        let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
        let pods = pod_strategy();
        let mut w = wc
            .watch("/r/", b.current_revision(), &pods)
            .await
            .expect("watch");
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "x", "namespace": "d", "resourceVersion": "3", "uid": "u",
                         "labels": {"app": "web"}},
            "spec": {"nodeName": "n"}
        });
        let stored = crate::stored_json::encode(&object).expect("encode");
        handoff.offer(b"/r/x", &stored, || ObjectSummary::of(&object, &pods));
        b.put(Bytes::from_static(b"/r/x"), stored.bytes.clone())
            .await
            .expect("put");
        let ev = w.next().await.expect("event").expect("ok");
        let sent = ev.encoded_object("v1", "Pod");
        assert_eq!(&sent, ev.object.json(), "the cached JSON itself");
        let mut expected = object.clone();
        expected["metadata"]["resourceVersion"] = ev.revision.0.to_string().into();
        assert_eq!(
            serde_json::from_slice::<Value>(&sent).expect("JSON"),
            expected
        );
        // Asked as another type, the object is encoded with that type.
        let other: Value = serde_json::from_slice(&ev.encoded_object("v2", "Pod")).expect("JSON");
        assert_eq!(other["apiVersion"], "v2");
        assert_eq!(other["spec"], expected["spec"]);
        // Metadata-only watchers get the object's metadata, whole.
        let partial: Value = serde_json::from_slice(&ev.encoded_partial_metadata()).expect("JSON");
        assert_eq!(
            ev.encoded_partial_metadata(),
            serde_json::to_vec(&crate::meta::partial_object_metadata(&expected)).unwrap(),
            "byte for byte what encoding the decoded object's metadata gives"
        );
        assert_eq!(partial["kind"], "PartialObjectMetadata");
        assert_eq!(partial["metadata"], expected["metadata"]);
        assert!(partial.get("spec").is_none());
        // The summary answers selectors as the object would.
        let summary = ev.object.summary();
        assert_eq!(summary.field("spec.nodeName"), Some("n"));
        assert_eq!(summary.field("metadata.namespace"), Some("d"));
        assert_eq!(summary.labels, vec![("app".into(), "web".into())]);
        assert_eq!(summary.fields_by, strategy_id(&pods));
    }

    #[tokio::test]
    async fn previous_objects_come_from_the_cached_state() {
        let b = Arc::new(MemoryBackend::new());
        // Written before the cacher starts: known from its initial list.
        put(&b, "/r/old", "{\"metadata\":{\"name\":\"old\"},\"v\":1}").await;
        let wc = cache(b.clone(), 16, 16);
        let mut w = wc
            .watch("/r/", b.current_revision(), &strategy())
            .await
            .expect("watch");
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
            (
                value(prev)["v"].clone(),
                value(&modified.object)["v"].clone()
            ),
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
        assert_eq!(
            value(&deleted.object)["v"],
            2,
            "a delete carries the last state"
        );
        assert_eq!(
            value(&deleted.object)["metadata"]["resourceVersion"],
            deleted.revision.0.to_string(),
            "with the delete's resourceVersion"
        );
        // The same history read from the store (no cached state) gives the same events.
        // (From revision 0: older than the cacher's start, so served from the store's history,
        // beginning with the first put.)
        let mut h = Vec::new();
        let mut from_store = wc
            .watch("/r/", Revision(0), &strategy())
            .await
            .expect("watch");
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
        let mut live = wc
            .watch("/r/", b.current_revision(), &strategy())
            .await
            .expect("watch");
        let base = b.current_revision().0 - 2;
        let mut old = wc
            .watch("/r/", Revision(base), &strategy())
            .await
            .expect("watch");
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
    async fn slow_clients_are_cut_off() {
        let b = Arc::new(MemoryBackend::new());
        let wc = cache(b.clone(), 64, 2);
        let mut slow = wc
            .watch("/r/", b.current_revision(), &strategy())
            .await
            .expect("watch");
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
        match wc.watch("/r/", Revision(1), &strategy()).await {
            Err(store::Error::Compacted { .. }) => {}
            Ok(mut s) => assert!(matches!(
                s.next().await,
                Some(Err(StreamEnd::TooOld { .. }))
            )),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}
