//! The watch cache of one resource: the ring of its recent events and the store of its
//! current objects, fed by the events of the store's watch, and the events themselves as
//! watchers receive them (decoded once, encoded once, shared as `Arc`s).
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go` (`watchCache`:
//! its cyclic buffer of events, its `store` of current objects, `processEvent`) and the
//! `cachingObject` of `cacher/caching_object.go` (an event's object encoded once for all its
//! watchers). The [`super::Cacher`] holds one behind its lock, beside its watchers.

use crate::storage::decode;
use bytes::Bytes;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};
use store::{EventKind, Revision};
use tokio::sync::mpsc;

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
    pub(super) encoded: OnceLock<EncodedObject>,
    /// The `PartialObjectMetadata` of `object`, encoded once for every metadata-only watcher
    /// (the garbage collector's informers).
    encoded_metadata: OnceLock<Bytes>,
}

/// The object of an event, encoded for one apiVersion/kind.
#[derive(Debug, Clone)]
pub(super) struct EncodedObject {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) json: Bytes,
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
pub(super) fn convert(e: store::Event) -> Option<CachedEvent> {
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
pub(super) fn convert_cached(
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

pub(super) struct CacherState {
    /// The recent events, each with its stored bytes.
    pub(super) ring: VecDeque<(Arc<CachedEvent>, usize)>,
    /// The sum of the ring's stored bytes.
    pub(super) ring_bytes: usize,
    /// Every event with a revision above this one is in `ring` (or still on its way).
    pub(super) complete_after: Revision,
    /// The current object of every key, as of `revision` (`watchCache.store`).
    pub(super) objects: BTreeMap<Bytes, Arc<Value>>,
    /// The revision `objects` reflects: the last event applied, or the initial list's.
    pub(super) revision: Revision,
    pub(super) subscribers: Vec<mpsc::Sender<Arc<CachedEvent>>>,
    pub(super) broken: bool,
}
