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

/// The key prefix of a resource, optionally narrowed to one namespace; ends with `/`.
pub fn prefix(info: &ResourceInfo, namespace: Option<&str>) -> String {
    let group = if info.gvr.group.is_empty() {
        "core"
    } else {
        info.gvr.group.as_str()
    };
    match namespace.filter(|_| info.namespaced) {
        Some(ns) => format!("/registry/{group}/{}/{ns}/", info.gvr.resource),
        None => format!("/registry/{group}/{}/", info.gvr.resource),
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

/// A page of a list.
#[derive(Debug)]
pub struct Page {
    /// The objects, in key order.
    pub items: Vec<Value>,
    /// The revision the list was read at.
    pub revision: Revision,
    /// The key to continue from, when more keys remain.
    pub next_key: Option<Bytes>,
}

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
                let obj = decode(&kv.value, kv.mod_revision)?;
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
mod tests {
    use super::*;
    use crate::gvk::GroupVersion;
    use crate::registry::Registry;
    use serde_json::json;
    use store::MemoryBackend;

    /// `changes` as it was: the stored encodings compared, the stamp normalized on a copy.
    fn changes_by_encoding(traced: bool, old: &Value, new: &Value) -> bool {
        let mut normalized = new.clone();
        if traced {
            request_trace::set_annotation(&mut normalized, request_trace::annotation(old));
        }
        encode(old).expect("encode") != encode(&normalized).expect("encode")
    }

    #[test]
    fn changes_agree_with_comparing_stored_encodings_and_leave_the_object_as_it_was() {
        let stamp = |id: &str| format!("00-{id:0>32}-00f067aa0ba902b7-01");
        let base = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7",
                "annotations": {"a": "b", trace::TRACEPARENT_ANNOTATION: stamp("1")}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}
        });
        type Change = Box<dyn Fn(&mut Value)>;
        let variants: Vec<(&str, Change)> = vec![
            ("same", Box::new(|_| {})),
            (
                "another resourceVersion",
                Box::new(|v| v["metadata"]["resourceVersion"] = json!("8")),
            ),
            (
                "no resourceVersion",
                Box::new(|v| {
                    v["metadata"]
                        .as_object_mut()
                        .expect("map")
                        .remove("resourceVersion");
                }),
            ),
            (
                "another stamp",
                Box::new(move |v| {
                    v["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("2"));
                }),
            ),
            (
                "no stamp",
                Box::new(|v| {
                    v["metadata"]["annotations"]
                        .as_object_mut()
                        .expect("map")
                        .remove(trace::TRACEPARENT_ANNOTATION);
                }),
            ),
            (
                "a status change",
                Box::new(|v| v["status"]["phase"] = json!("Running")),
            ),
            (
                "a status change and another stamp",
                Box::new(move |v| {
                    v["status"]["phase"] = json!("Running");
                    v["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("3"));
                }),
            ),
            (
                "another annotation",
                Box::new(|v| v["metadata"]["annotations"]["a"] = json!("c")),
            ),
            ("a new spec field", Box::new(|v| v["spec"]["x"] = json!(0))),
        ];
        let plain = Storage::new(Arc::new(MemoryBackend::new()));
        let traced = plain.traced(Some(Arc::new(request_trace::WriteTrace::for_tests(
            &stamp("9"),
        ))));
        for (name, change) in &variants {
            let mut new = base.clone();
            change(&mut new);
            for (storage, is_traced) in [(&plain, false), (&traced, true)] {
                let mut compared = new.clone();
                let got = storage.changes(&base, &mut compared).expect("compare");
                assert_eq!(
                    got,
                    changes_by_encoding(is_traced, &base, &new),
                    "{name}, traced {is_traced}"
                );
                assert_eq!(compared, new, "{name}: the object is left as it was");
            }
        }
        // The cases above do tell writes apart: a real change is one, a new stamp is not.
        let mut new = base.clone();
        new["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("2"));
        assert!(!traced.changes(&base, &mut new).expect("compare"));
        assert!(plain.changes(&base, &mut new).expect("compare"));
        new["status"]["phase"] = json!("Running");
        assert!(traced.changes(&base, &mut new).expect("compare"));
    }

    fn pod(name: &str) -> ObjectRef {
        let info = Registry::builtin()
            .lookup(&GroupVersion::parse_api_version("v1"), "pods")
            .expect("pods are built in");
        ObjectRef {
            info,
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    /// A cache holding one object for every key, as of one revision.
    struct FixedCache {
        revision: Revision,
        object: Arc<Value>,
    }

    impl crate::decoded_objects::CurrentObjects for FixedCache {
        fn current(&self, _key: &[u8], revision: Revision) -> Option<Arc<Value>> {
            (revision == self.revision).then(|| self.object.clone())
        }
    }

    /// The object a (dry-run) update of pod `a` starts from, with `cache` holding the pods.
    async fn starting_object(
        storage: &Storage,
        cache: &Arc<dyn crate::decoded_objects::CurrentObjects>,
    ) -> Value {
        storage
            .handoff()
            .watch_prefix_with("/registry/core/pods/", Arc::downgrade(cache));
        let mut seen = None;
        storage
            .guaranteed_update(&pod("a"), true, |cur| {
                seen = cur.cloned();
                Ok(Update::Keep(cur.expect("exists").clone()))
            })
            .await
            .expect("update");
        seen.expect("seen")
    }

    #[tokio::test]
    async fn an_update_starts_from_the_cached_object_of_the_revision_it_read() {
        let storage = Storage::new(Arc::new(MemoryBackend::new()));
        let created = storage
            .create(
                &pod("a"),
                json!({"metadata": {"name": "a", "namespace": "default"}, "v": 1}),
            )
            .await
            .expect("create");
        let rev = Revision(
            meta::resource_version(&created)
                .expect("rv")
                .parse()
                .expect("n"),
        );
        // The "cached" object differs from the stored one (no cache would) to show which of
        // the two the update starts from.
        let marked = |v: &str| {
            let mut o = created.clone();
            o["cached"] = json!(v);
            Arc::new(o)
        };
        let at_rev: Arc<dyn crate::decoded_objects::CurrentObjects> = Arc::new(FixedCache {
            revision: rev,
            object: marked("yes"),
        });
        assert_eq!(starting_object(&storage, &at_rev).await["cached"], "yes");
        // A cache at another revision (lagging) is not used: the stored bytes are decoded.
        let stale: Arc<dyn crate::decoded_objects::CurrentObjects> = Arc::new(FixedCache {
            revision: Revision(rev.0 - 1),
            object: marked("stale"),
        });
        assert_eq!(starting_object(&storage, &stale).await, created);
    }

    /// A `decide` that sets `v` on the existing object.
    fn set_v(v: i64) -> impl FnMut(Option<&Value>) -> Result<Update> {
        move |cur| {
            let mut cur = cur.expect("exists").clone();
            cur["v"] = json!(v);
            Ok(Update::Put(cur))
        }
    }

    #[tokio::test]
    async fn writes_under_a_watched_prefix_offer_their_object_and_failed_ones_withdraw_it() {
        let storage = Storage::new(Arc::new(MemoryBackend::new()));
        let obj = |v: i64| json!({"metadata": {"name": "a", "namespace": "default"}, "v": v});
        storage.create(&pod("a"), obj(1)).await.expect("create");
        assert_eq!(storage.handoff().held(), 0, "nothing watches pods");

        storage.handoff().watch_prefix("/registry/core/pods/");
        storage.create(&pod("b"), obj(1)).await.expect("create");
        assert_eq!(storage.handoff().held(), 1, "the create offered its object");
        // An AlreadyExists create withdraws its offer.
        assert!(storage.create(&pod("b"), obj(2)).await.is_err());
        assert_eq!(storage.handoff().held(), 1);
        // An update offers the object it writes.
        let updated = storage
            .guaranteed_update(&pod("a"), false, set_v(3))
            .await
            .expect("update");
        assert_eq!(updated.object["v"], 3);
        assert_eq!(storage.handoff().held(), 2, "the update offered its object");
        // A dry run writes nothing and offers nothing.
        storage
            .guaranteed_update(&pod("a"), true, set_v(4))
            .await
            .expect("dry run");
        assert_eq!(storage.handoff().held(), 2);
    }

    #[tokio::test]
    async fn a_traced_delete_offers_its_trace_context_for_the_deleted_event() {
        let plain = Storage::new(Arc::new(MemoryBackend::new()));
        let tp = "00-0000000000000000000000000000000a-00f067aa0ba902b7-01";
        let traced = plain.traced(Some(Arc::new(request_trace::WriteTrace::for_tests(tp))));
        let obj = json!({"metadata": {"name": "a", "namespace": "default"}});
        plain.create(&pod("a"), obj.clone()).await.expect("create");
        plain.create(&pod("b"), obj).await.expect("create");
        plain.handoff().watch_prefix("/registry/core/pods/");
        let delete = |cur: Option<&Value>| Ok(Update::Delete(cur.cloned().unwrap_or_default()));
        traced
            .guaranteed_update(&pod("a"), true, delete)
            .await
            .expect("dry run");
        assert_eq!(
            plain.handoff().take_delete(&pod("a").key()),
            None,
            "a dry run offers nothing"
        );
        traced
            .guaranteed_update(&pod("a"), false, delete)
            .await
            .expect("delete");
        assert_eq!(
            plain.handoff().take_delete(&pod("a").key()).as_deref(),
            Some(tp)
        );
        plain
            .guaranteed_update(&pod("b"), false, delete)
            .await
            .expect("delete");
        assert_eq!(
            plain.handoff().take_delete(&pod("b").key()),
            None,
            "not traced"
        );
    }

    #[tokio::test]
    async fn a_json_only_write_returns_the_object_as_json_and_moves_it_to_the_watch_cache() {
        let storage = Storage::new(Arc::new(MemoryBackend::new()));
        let obj = |v: i64| {
            json!({"apiVersion": "v1", "kind": "Pod", "v": v,
                   "metadata": {"name": "a", "namespace": "default", "uid": "u"}})
        };
        let stored_bytes = |storage: &Storage| {
            let storage = storage.clone();
            async move {
                let kv = storage.backend().get(&pod("a").key(), None).await;
                kv.expect("get").kv.expect("stored")
            }
        };
        // Nothing watches pods: the object is returned (there is no cache to move it to).
        let json_only = storage.answering_with_json();
        let (object, json) = json_only.create_with_json(&pod("a"), obj(1)).await.unwrap();
        let json: Value = serde_json::from_slice(&json.expect("json")).expect("JSON");
        assert_eq!(object, json, "the JSON is the created object");
        assert!(
            meta::resource_version(&json).is_some(),
            "with its resourceVersion"
        );
        // Watched: the object is moved to the cache, the JSON is the object with its version.
        storage.handoff().watch_prefix("/registry/core/pods/");
        let updated = json_only
            .guaranteed_update(&pod("a"), false, set_v(2))
            .await
            .expect("update");
        assert_eq!(updated.object, Value::Null, "moved");
        let kv = stored_bytes(&storage).await;
        let (mut offered, _) = storage.handoff().take(&kv.value).expect("offered");
        meta::set_meta_str(
            &mut offered,
            MetaField::ResourceVersion,
            Some(&kv.mod_revision.0.to_string()),
        );
        let json = updated.json.expect("json");
        assert_eq!(crate::wire::to_vec(&offered), json.to_vec());
        assert_eq!(offered["v"], 2);
        // A storage that needs the object keeps it, and answers with the same JSON.
        let updated = storage
            .guaranteed_update(&pod("a"), false, set_v(3))
            .await
            .expect("update");
        assert_eq!(updated.object["v"], 3);
        assert_eq!(
            crate::wire::to_vec(&updated.object),
            updated.json.expect("json").to_vec()
        );
        assert_eq!(storage.handoff().held(), 1, "and offers a copy");
    }
}
