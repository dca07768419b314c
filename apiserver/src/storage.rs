//! Objects in the store: keys, encoding, and the compare-and-swap writes every verb is built on.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`:
//!
//! ```text
//!   key   /registry/<group or "core">/<resource>/<namespace>/<name>   (cluster-scoped: no namespace)
//!   value the object as JSON, without metadata.resourceVersion
//!   resourceVersion = the key's mod_revision, filled in on every read
//!
//!   create  txn { if absent(key)            then put  else get }  → 409 AlreadyExists
//!   update  txn { if mod_revision(key)==rv  then put  else get }  → retry or 409 Conflict
//!   delete  txn { if mod_revision(key)==rv  then del  else get }
//! ```
//!
//! [`Storage::guaranteed_update`] is `GuaranteedUpdate`: read, run a pure function over the
//! current object, write with a compare on the revision that was read, and retry when another
//! writer got there first. The function decides; this module only moves bytes.
//!
//! A [`Storage`] made for one traced request ([`Storage::traced`]) also stamps the request's
//! trace context on every object it writes ([`crate::request_trace`]); a write that would
//! change nothing but that annotation is not made. A delete hands its context to the watch
//! cache ([`Handoff::offer_delete`]), which puts it on the DELETED event's object.

use crate::decoded_objects::Handoff;
use crate::error::{ApiError, ErrorTarget, Result};
use crate::meta::{self, MetaField};
use crate::registry::ResourceInfo;
use crate::request_trace::{self, WriteTrace};
use crate::stored_json::{self, StoredJson};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use store::{Backend, Compare, KeyRange, Op, OpResponse, RangeRequest, Revision, Txn};

/// How many times a read-modify-write is retried when other writers keep winning.
const MAX_UPDATE_ATTEMPTS: usize = 16;

/// One object's address: its resource row, namespace and name.
#[derive(Debug, Clone)]
pub struct ObjectRef {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// The namespace (None for cluster-scoped resources).
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// The store key.
    pub fn key(&self) -> Bytes {
        let mut k = prefix(&self.info, self.namespace.as_deref());
        k.push_str(&self.name);
        Bytes::from(k)
    }

    /// The error target naming this object.
    pub fn target(&self) -> ErrorTarget {
        target(&self.info, &self.name)
    }

    /// `404 NotFound` for this object.
    pub fn not_found(&self) -> ApiError {
        ApiError::NotFound {
            target: self.target(),
        }
    }

    /// `409 Conflict` "the object has been modified" for this object.
    pub fn modified(&self) -> ApiError {
        ApiError::Conflict {
            target: self.target(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    }
}

/// The error target for an object of `info` named `name`.
pub fn target(info: &ResourceInfo, name: &str) -> ErrorTarget {
    ErrorTarget {
        group: info.gvr.group.clone(),
        resource: info.gvr.resource.clone(),
        kind: info.kind.clone(),
        name: name.to_string(),
    }
}

/// The key prefix of a resource, optionally narrowed to one namespace; ends with `/`:
/// `/registry/<resource prefix>/[<namespace>/]`, as kube-apiserver lays etcd out
/// ([`resource_prefix`]).
pub fn prefix(info: &ResourceInfo, namespace: Option<&str>) -> String {
    let resource = resource_prefix(info);
    match namespace.filter(|_| info.namespaced) {
        Some(ns) => format!("/registry/{resource}/{ns}/"),
        None => format!("/registry/{resource}/"),
    }
}

/// Where a resource's objects live under `/registry/`, as kube-apiserver's storage factory
/// names them (`ResourcePrefix`): the resource's plural name (`deployments`, `pods`,
/// `clusterroles`), the historical names of a few (`minions` for Nodes, `services/specs` and
/// `services/endpoints`, `controllers` for ReplicationControllers, `ingress`), and
/// `<group>/<resource>` for custom resources and for the API server's own
/// `apiregistration.k8s.io` and `apiextensions.k8s.io` objects.
///
/// Simplification: kube-apiserver keeps `events.k8s.io` Events with the core ones
/// (`/registry/events/`, one storage read in either version); here they are stored apart, under
/// `events.k8s.io/events`.
pub fn resource_prefix(info: &ResourceInfo) -> String {
    let (group, resource) = (info.gvr.group.as_str(), info.gvr.resource.as_str());
    if info.crd.is_some() {
        return format!("{group}/{resource}");
    }
    match (group, resource) {
        ("", "nodes") => "minions".into(),
        ("", "services") => "services/specs".into(),
        ("", "endpoints") => "services/endpoints".into(),
        ("", "replicationcontrollers") => "controllers".into(),
        ("networking.k8s.io", "ingresses") => "ingress".into(),
        ("apiregistration.k8s.io" | "apiextensions.k8s.io" | "events.k8s.io", _) => {
            format!("{group}/{resource}")
        }
        _ => resource.into(),
    }
}

/// Decodes a stored value and sets its resourceVersion.
pub fn decode(value: &[u8], revision: Revision) -> Result<Value> {
    // Stored objects were bounded when written; their managed fields may nest a little deeper.
    let mut obj: Value = crate::deep::value_from_slice(value)
        .map_err(|e| ApiError::Internal(format!("stored object is not JSON: {e}")))?;
    meta::set_meta_str(
        &mut obj,
        MetaField::ResourceVersion,
        Some(&revision.0.to_string()),
    );
    Ok(obj)
}

/// Decodes a stored value as an object of `info`'s version: a custom resource may have been
/// written through another served version (conversion `None` changes only `apiVersion`).
pub fn decode_as(info: &ResourceInfo, value: &[u8], revision: Revision) -> Result<Value> {
    let mut obj = decode(value, revision)?;
    if info.crd.is_some() {
        meta::set_type(&mut obj, &info.api_version(), &info.kind);
    }
    Ok(obj)
}

/// The stored form of an object: its JSON without `metadata.resourceVersion`, with the place
/// that member goes (`crate::stored_json`).
fn encode_stored(obj: &Value) -> Result<StoredJson> {
    stored_json::encode(obj).map_err(|e| ApiError::Internal(format!("encode: {e}")))
}

/// The stored form of an object: its JSON without `metadata.resourceVersion`.
fn encode(obj: &Value) -> Result<Bytes> {
    encode_stored(obj).map(|stored| stored.bytes)
}

/// Whether `old` and `new` differ as stored, that is in anything but
/// `metadata.resourceVersion`: `new`'s is swapped for `old`'s for the comparison and put back.
fn differs_but_for_resource_version(old: &Value, new: &mut Value) -> bool {
    let rv = MetaField::ResourceVersion.json_name();
    let (Some(old_meta), Some(new_meta)) = (
        old.get("metadata").and_then(Value::as_object),
        new.get_mut("metadata").and_then(Value::as_object_mut),
    ) else {
        return old != new;
    };
    let ours = new_meta.remove(rv);
    if let Some(theirs) = old_meta.get(rv) {
        new_meta.insert(rv.to_owned(), theirs.clone());
    }
    let differs = old != new;
    if let Some(new_meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        new_meta.remove(rv);
        if let Some(ours) = ours {
            new_meta.insert(rv.to_owned(), ours);
        }
    }
    differs
}

/// What a read-modify-write decided to do with the current object.
#[derive(Debug)]
pub enum Update {
    /// Write this object (create it if it did not exist).
    Put(Value),
    /// Delete the object; the value is what the client is answered with.
    Delete(Value),
    /// Change nothing; answer with this object.
    Keep(Value),
}

/// What a read-modify-write did.
#[derive(Debug)]
pub struct Updated {
    /// The resulting object (with its new resourceVersion when written); `Value::Null` when
    /// it was written by a storage [`Storage::answering_with_json`] and `json` holds it.
    pub object: Value,
    /// Whether the object was created by this write.
    pub created: bool,
    /// Whether the object was deleted by this write.
    pub deleted: bool,
    /// `object` as JSON when this write stored it: the stored bytes with the resourceVersion
    /// spliced in (`crate::stored_json`), for the response.
    pub json: Option<Bytes>,
}

/// A page of a list: decoded objects of its own ([`Storage::list`]), or objects that may be
/// shared with the watch cache ([`SharedPage`], [`Storage::list_shared`]).
#[derive(Debug)]
pub struct Page<T = Value> {
    /// The objects, in key order.
    pub items: Vec<T>,
    /// The revision the list was read at.
    pub revision: Revision,
    /// The key to continue from, when more keys remain.
    pub next_key: Option<Bytes>,
}

/// A page whose objects may be shared with the watch cache ([`Storage::list_shared`]).
pub type SharedPage = Page<Arc<Value>>;

/// The store, seen as Kubernetes objects.
#[derive(Clone)]
pub struct Storage {
    backend: Arc<dyn Backend>,
    /// The trace of the request this view writes for, if it is traced.
    trace: Option<Arc<WriteTrace>>,
    /// Where written objects are offered to the watch cache.
    handoff: Arc<Handoff>,
    /// The caller answers a write with its JSON only ([`Storage::answering_with_json`]).
    json_only: bool,
}

impl Storage {
    /// Wraps a backend.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Storage {
            backend,
            trace: None,
            handoff: Arc::new(Handoff::new()),
            json_only: false,
        }
    }

    /// This storage for a caller that needs a written object only as JSON (a plain JSON
    /// response): when a write returns the object's JSON ([`Updated::json`], the second value
    /// of [`Storage::create_with_json`]) and a watch cache watches its key, the object itself
    /// is moved to the cache instead of being copied for it, and the object returned is
    /// `Value::Null`.
    pub fn answering_with_json(&self) -> Storage {
        Storage {
            json_only: true,
            ..self.clone()
        }
    }

    /// Offers `obj`, just encoded to `stored` for the write of `key`, to the watch cache: moved
    /// (leaving `Null`) when the caller wants only JSON and the JSON can be spliced, else
    /// copied. Returns whether it was moved.
    fn offer(&self, key: &[u8], stored: &StoredJson, obj: &mut Value) -> bool {
        if self.json_only && stored.slot.is_some() {
            self.handoff.offer_moving(key, stored, obj)
        } else {
            self.handoff.offer(key, stored, obj);
            false
        }
    }

    /// Where this storage offers the objects it writes to the watch cache
    /// ([`crate::cacher::WatchCache::with_handoff`]).
    pub fn handoff(&self) -> &Arc<Handoff> {
        &self.handoff
    }

    /// This storage for one traced request: writes stamp its trace context on the object and
    /// report what they stored to it.
    pub fn traced(&self, trace: Option<Arc<WriteTrace>>) -> Storage {
        Storage {
            backend: self.backend.clone(),
            trace,
            handoff: self.handoff.clone(),
            json_only: self.json_only,
        }
    }

    /// The trace of the request this view writes for (`None`: not traced).
    pub fn write_trace(&self) -> Option<&Arc<WriteTrace>> {
        self.trace.as_ref()
    }

    /// Whether `new` differs from `old` in more than the trace annotation (and the
    /// resourceVersion, which is never stored).
    ///
    /// In the usual cases (no tracing, equal stamps, or both objects stamped) the objects are
    /// compared as values with `new`'s resourceVersion and stamp swapped for `old`'s in place
    /// and put back after: comparing values is comparing their stored encodings (a map's
    /// members are written in key order), without encoding either. Otherwise the stored
    /// encodings are compared.
    fn changes(&self, old: &Value, new: &mut Value) -> Result<bool> {
        let theirs = request_trace::annotation(old);
        let same_stamp = self.trace.is_none() || theirs == request_trace::annotation(new);
        if !same_stamp
            && let Some(theirs) = theirs
            && let Some(slot) = request_trace::annotation_mut(new)
        {
            let ours = std::mem::replace(slot, theirs.to_owned());
            let changed = differs_but_for_resource_version(old, new);
            if let Some(slot) = request_trace::annotation_mut(new) {
                *slot = ours;
            }
            return Ok(changed);
        }
        if same_stamp {
            return Ok(differs_but_for_resource_version(old, new));
        }
        let mut normalized = new.clone();
        request_trace::set_annotation(&mut normalized, theirs);
        Ok(encode(old)? != encode(&normalized)?)
    }

    /// The backend (for watches).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Reads one object.
    pub async fn get(&self, r: &ObjectRef) -> Result<Option<Value>> {
        let resp = self.backend.get(&r.key(), None).await?;
        resp.kv
            .map(|kv| decode_as(&r.info, &kv.value, kv.mod_revision))
            .transpose()
    }

    /// Reads objects under `prefix` from `start` on, at `revision` (latest when `None`), until
    /// `want` objects pass `keep` or the keys run out. `want == 0` means everything.
    pub async fn list(
        &self,
        prefix: &str,
        start: Option<Bytes>,
        revision: Option<Revision>,
        want: usize,
        keep: &(dyn Fn(&Value) -> bool + Sync),
    ) -> Result<Page> {
        let page = self
            .list_from(prefix, start, revision, want, keep, false)
            .await?;
        Ok(Page {
            // Decoded here, so held nowhere else: unwrapped, not copied.
            items: page.items.into_iter().map(Arc::unwrap_or_clone).collect(),
            revision: page.revision,
            next_key: page.next_key,
        })
    }

    /// [`Storage::list`] for a reader that only reads the objects (a list response): the
    /// objects the watch cache holds at the very revision the store returned are shared with
    /// it instead of decoded again, as kube-apiserver serves lists from its watch cache. The
    /// page itself (its keys, revision and continue key) is still read from the store.
    /// Custom resources are decoded: their apiVersion depends on the request.
    pub async fn list_shared(
        &self,
        info: &ResourceInfo,
        prefix: &str,
        start: Option<Bytes>,
        revision: Option<Revision>,
        want: usize,
        keep: &(dyn Fn(&Value) -> bool + Sync),
    ) -> Result<SharedPage> {
        self.list_from(prefix, start, revision, want, keep, info.crd.is_none())
            .await
    }

    async fn list_from(
        &self,
        prefix: &str,
        start: Option<Bytes>,
        revision: Option<Revision>,
        want: usize,
        keep: &(dyn Fn(&Value) -> bool + Sync),
        cached: bool,
    ) -> Result<SharedPage> {
        let objects = cached
            .then(|| self.handoff.current_objects(prefix.as_bytes()))
            .flatten();
        let read = |kv: &store::KeyValue| -> Result<Arc<Value>> {
            match objects
                .as_ref()
                .and_then(|o| o.current(&kv.key, kv.mod_revision))
            {
                Some(object) => Ok(object),
                None => decode(&kv.value, kv.mod_revision).map(Arc::new),
            }
        };
        let mut items = Vec::new();
        let mut start = start;
        let mut revision = revision;
        loop {
            let batch = if want == 0 { None } else { Some(want.max(64)) };
            let resp = self
                .backend
                .range(RangeRequest {
                    range: KeyRange::Prefix(Bytes::from(prefix.to_string())),
                    start: start.clone(),
                    limit: batch,
                    revision,
                })
                .await
                .map_err(list_error)?;
            // Every batch of one list is read at the revision of the first.
            revision = Some(resp.revision);
            let mut last_key = None;
            for kv in &resp.kvs {
                last_key = Some(kv.key.clone());
                let obj = read(kv)?;
                if keep(&obj) {
                    items.push(obj);
                    if want != 0 && items.len() == want {
                        let next = next_key_after(&kv.key);
                        let more = resp.more
                            || kv.key != resp.kvs.last().map(|l| l.key.clone()).unwrap_or_default();
                        return Ok(Page {
                            items,
                            revision: resp.revision,
                            next_key: more.then_some(next),
                        });
                    }
                }
            }
            match (resp.more, last_key) {
                (true, Some(k)) => start = Some(next_key_after(&k)),
                _ => {
                    return Ok(Page {
                        items,
                        revision: resp.revision,
                        next_key: None,
                    });
                }
            }
        }
    }

    /// Creates an object; 409 AlreadyExists if the name is taken. Returns the stored object
    /// with its resourceVersion.
    pub async fn create(&self, r: &ObjectRef, obj: Value) -> Result<Value> {
        self.create_with_json(r, obj)
            .await
            .map(|(object, _)| object)
    }

    /// [`Storage::create`], also returning the created object as JSON (the stored bytes with
    /// the resourceVersion spliced in), for the response.
    pub async fn create_with_json(
        &self,
        r: &ObjectRef,
        mut obj: Value,
    ) -> Result<(Value, Option<Bytes>)> {
        let key = r.key();
        if let Some(trace) = &self.trace {
            trace.stamp(&mut obj);
        }
        let stored = encode_stored(&obj)?;
        let value = stored.bytes.clone();
        let moved = self.offer(&key, &stored, &mut obj);
        let resp = self
            .backend
            .txn(Txn {
                compares: vec![Compare::absent(key.clone())],
                success: vec![Op::Put {
                    key: key.clone(),
                    value: value.clone(),
                }],
                failure: vec![],
            })
            .await
            .map_err(write_error);
        let resp = match resp {
            Ok(resp) if resp.succeeded => resp,
            failed => {
                self.handoff.withdraw(&value);
                failed?;
                return Err(ApiError::AlreadyExists { target: r.target() });
            }
        };
        if let Some(trace) = &self.trace {
            trace.written(&r.name, resp.revision.0);
        }
        let json = stored.with_resource_version(resp.revision.0);
        if !moved {
            let rv = resp.revision.0.to_string();
            meta::set_meta_str(&mut obj, MetaField::ResourceVersion, Some(&rv));
        }
        Ok((obj, json))
    }

    /// Reads one object's stored JSON straight into `T` (which sees no resourceVersion): for
    /// checks that need a few fields of an object, not the object.
    pub async fn get_as<T: DeserializeOwned>(&self, r: &ObjectRef) -> Result<Option<T>> {
        let resp = self.backend.get(&r.key(), None).await?;
        resp.kv
            .map(|kv| {
                serde_json::from_slice(&kv.value)
                    .map_err(|e| ApiError::Internal(format!("stored object does not decode: {e}")))
            })
            .transpose()
    }

    /// Read-modify-write with retries (`GuaranteedUpdate`). `decide` gets the current object
    /// (None if absent) and returns what to do; it is re-run on a concurrent change. With
    /// `dry_run` nothing is written and the decided object is returned.
    pub async fn guaranteed_update(
        &self,
        r: &ObjectRef,
        dry_run: bool,
        mut decide: impl FnMut(Option<&Value>) -> Result<Update>,
    ) -> Result<Updated> {
        let key = r.key();
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let current = self.backend.get(&key, None).await?;
            let (existing, read_rev) = match current.kv {
                Some(kv) => {
                    // The watch cache's copy of this very revision, when it holds it, instead
                    // of decoding the stored bytes again (`GuaranteedUpdate`'s cached object).
                    // Custom resources are decoded: their apiVersion depends on the request.
                    let cached = r
                        .info
                        .crd
                        .is_none()
                        .then(|| self.handoff.current(&key, kv.mod_revision))
                        .flatten();
                    // Shared with the cache, not copied: `decide` only reads it.
                    let object = match cached {
                        Some(object) => object,
                        None => Arc::new(decode_as(&r.info, &kv.value, kv.mod_revision)?),
                    };
                    (Some(object), kv.mod_revision)
                }
                None => (None, Revision::ZERO),
            };
            let existed = existing.is_some();
            let update = decide(existing.as_deref())?;
            let mut stored = None;
            let mut moved = false;
            // The trace context a delete hands to the watch cache's DELETED event.
            let mut deleted_by = None;
            let compare = if existed {
                Compare::mod_revision_eq(key.clone(), read_rev)
            } else {
                Compare::absent(key.clone())
            };
            let (op, object, deleted) = match update {
                Update::Keep(obj) => {
                    return Ok(Updated {
                        object: obj,
                        created: false,
                        deleted: false,
                        json: None,
                    });
                }
                Update::Put(mut obj) => {
                    // Unchanged objects are not rewritten (etcd3 store: no new revision).
                    if let Some(old) = &existing
                        && !self.changes(old, &mut obj)?
                    {
                        return Ok(Updated {
                            object: Value::clone(old),
                            created: false,
                            deleted: false,
                            json: None,
                        });
                    }
                    if let Some(trace) = &self.trace {
                        trace.stamp(&mut obj);
                    }
                    let encoded = encode_stored(&obj)?;
                    if !dry_run {
                        moved = self.offer(&key, &encoded, &mut obj);
                    }
                    let value = encoded.bytes.clone();
                    stored = Some(encoded);
                    (
                        Op::Put {
                            key: key.clone(),
                            value,
                        },
                        obj,
                        false,
                    )
                }
                Update::Delete(obj) => {
                    if !existed {
                        return Err(r.not_found());
                    }
                    if !dry_run
                        && let Some(trace) = &self.trace
                        && let Some(tp) = trace.stamp_for(&obj)
                    {
                        deleted_by = Some(tp);
                        self.handoff.offer_delete(&key, tp);
                    }
                    (Op::Delete { key: key.clone() }, obj, true)
                }
            };
            if dry_run {
                return Ok(Updated {
                    object,
                    created: !existed,
                    deleted,
                    json: None,
                });
            }
            let offered = match &op {
                Op::Put { value, .. } => Some(value.clone()),
                _ => None,
            };
            let resp = self
                .backend
                .txn(Txn {
                    compares: vec![compare],
                    success: vec![op],
                    failure: vec![Op::Get { key: key.clone() }],
                })
                .await
                .map_err(write_error);
            if !resp.as_ref().is_ok_and(|r| r.succeeded) {
                if let Some(value) = &offered {
                    self.handoff.withdraw(value);
                }
                if let Some(tp) = deleted_by {
                    self.handoff.withdraw_delete(&key, tp);
                }
            }
            let resp = resp?;
            if resp.succeeded {
                if let Some(trace) = &self.trace {
                    trace.written(&r.name, resp.revision.0);
                }
                let mut object = object;
                let json = stored.and_then(|s| s.with_resource_version(resp.revision.0));
                if !moved {
                    let rv = resp.revision.0.to_string();
                    meta::set_meta_str(&mut object, MetaField::ResourceVersion, Some(&rv));
                }
                return Ok(Updated {
                    object,
                    created: !existed,
                    deleted,
                    json,
                });
            }
            if let Some(OpResponse::Get { kv: None }) = resp.responses.first()
                && existed
                && deleted
            {
                return Err(r.not_found());
            }
        }
        Err(r.modified())
    }
}

/// The smallest key after `key` (to continue a range past it).
fn next_key_after(key: &[u8]) -> Bytes {
    let mut k = key.to_vec();
    k.push(0);
    Bytes::from(k)
}

fn list_error(e: store::Error) -> ApiError {
    match e {
        store::Error::Compacted { .. } => {
            ApiError::Expired("The resourceVersion for the provided list is too old.".into())
        }
        store::Error::FutureRevision { requested, current } => ApiError::TooLargeResourceVersion {
            requested: requested.0,
            current: current.0,
        },
        other => other.into(),
    }
}

fn write_error(e: store::Error) -> ApiError {
    match e {
        store::Error::ValueTooLarge { limit, .. } => ApiError::RequestEntityTooLarge { limit },
        other => other.into(),
    }
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
