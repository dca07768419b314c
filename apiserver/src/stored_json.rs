//! The stored form of an object (its JSON without `metadata.resourceVersion`) and, recorded
//! while it is written, the place where the resourceVersion goes, so that the object's JSON as
//! clients see it is the stored bytes with `"resourceVersion":"<rev>"` spliced in instead of a
//! second and third encoding of the same object.
//!
//! kube-apiserver encodes a written object once for etcd (`etcd3/store.go`, without
//! resourceVersion, which etcd's mod revision replaces) and again for the response and for
//! each watch event (its `cachingObject` shares one encoding among the watchers). Here the
//! three encodings are the same bytes but for the resourceVersion, because the top level is
//! written in one fixed order (kube-apiserver's, [`crate::wire`]) and `serde_json` writes the
//! members of `metadata` in key order:
//!
//! ```text
//!   stored:   {"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","uid":"…"},"spec":…}
//!                                                          ▲ slot
//!   served:   {"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7","uid":"…"},"spec":…}
//! ```
//!
//! The write's response and the watch cache's event (which gets the slot with the writer's
//! object, `crate::decoded_objects`) use the splice; an object without a `metadata` map has no slot
//! and is encoded as before.

use bytes::Bytes;
use serde_json::{Map, Value};

const RESOURCE_VERSION: &str = "resourceVersion";

/// Where `"resourceVersion":"<rev>"` goes in an object's stored encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceVersionSlot {
    /// The byte offset to insert at.
    at: usize,
    /// A member of `metadata` precedes the slot: insert `,"resourceVersion":"<rev>"` (at the
    /// comma or brace that ends the member before).
    comma_before: bool,
    /// `metadata` has no member before the slot but one after it: insert
    /// `"resourceVersion":"<rev>",` (right after the opening brace).
    comma_after: bool,
}

/// An object's stored encoding and the slot of its resourceVersion (`None` for an object
/// without a `metadata` map, whose stored form then has no resourceVersion to splice).
#[derive(Debug, Clone)]
pub struct StoredJson {
    /// The stored bytes.
    pub bytes: Bytes,
    /// Where the resourceVersion goes.
    pub slot: Option<ResourceVersionSlot>,
}

impl StoredJson {
    /// The object's JSON with `metadata.resourceVersion` set to `revision`: what
    /// `crate::wire::to_vec` gives for the object with that resourceVersion. `None` when there
    /// is no slot.
    pub fn with_resource_version(&self, revision: u64) -> Option<Bytes> {
        self.slot
            .map(|slot| splice(&self.bytes, slot, &revision.to_string()))
    }
}

/// `bytes` with the resourceVersion member written at `slot`.
pub fn splice(bytes: &[u8], slot: ResourceVersionSlot, rv: &str) -> Bytes {
    let (head, tail) = bytes.split_at(slot.at.min(bytes.len()));
    let mut out = Vec::with_capacity(bytes.len() + rv.len() + 22);
    out.extend_from_slice(head);
    if slot.comma_before {
        out.push(b',');
    }
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rv.as_bytes());
    out.push(b'"');
    if slot.comma_after {
        out.push(b',');
    }
    out.extend_from_slice(tail);
    Bytes::from(out)
}

/// Encodes `obj` as it is stored: as `serde_json` writes it, but with `metadata` written
/// without `resourceVersion`, noting where that member would be.
pub fn encode(obj: &Value) -> serde_json::Result<StoredJson> {
    match obj {
        Value::Object(root) if root.get("metadata").is_some_and(Value::is_object) => {
            // Sized for a typical object, saving the buffer's first reallocations.
            let mut out = Vec::with_capacity(1024);
            let slot = write_root(&mut out, root)?;
            Ok(StoredJson {
                bytes: Bytes::from(out),
                slot,
            })
        }
        _ => {
            let mut obj = obj.clone();
            crate::meta::set_meta_str(&mut obj, crate::meta::MetaField::ResourceVersion, None);
            Ok(StoredJson {
                bytes: Bytes::from(crate::wire::to_vec(&obj)),
                slot: None,
            })
        }
    }
}

/// Writes the members of `root` as `serde_json`'s compact writer does, in kube-apiserver's
/// order ([`crate::wire::top_level`]).
fn write_root(
    out: &mut Vec<u8>,
    root: &Map<String, Value>,
) -> serde_json::Result<Option<ResourceVersionSlot>> {
    let mut slot = None;
    out.push(b'{');
    for (n, (key, value)) in crate::wire::top_level(root).enumerate() {
        if n > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        match value {
            Value::Object(metadata) if key == "metadata" => {
                slot = Some(write_metadata(out, metadata)?);
            }
            _ => serde_json::to_writer(&mut *out, value)?,
        }
    }
    out.push(b'}');
    Ok(slot)
}

/// Writes `metadata` without `resourceVersion`, returning where that member belongs: before
/// the first member whose key orders after it (maps are written in key order), or last.
fn write_metadata(
    out: &mut Vec<u8>,
    metadata: &Map<String, Value>,
) -> serde_json::Result<ResourceVersionSlot> {
    out.push(b'{');
    let mut written = 0usize;
    let mut slot = None;
    for (key, value) in metadata {
        if key == RESOURCE_VERSION {
            continue;
        }
        if slot.is_none() && key.as_str() > RESOURCE_VERSION {
            slot = Some(ResourceVersionSlot {
                at: out.len(),
                comma_before: written > 0,
                comma_after: written == 0,
            });
        }
        if written > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        serde_json::to_writer(&mut *out, value)?;
        written += 1;
    }
    let slot = slot.unwrap_or(ResourceVersionSlot {
        at: out.len(),
        comma_before: written > 0,
        comma_after: false,
    });
    out.push(b'}');
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The stored bytes and the spliced ones against `serde_json`'s encoding of the object
    /// without and with the resourceVersion.
    fn check(obj: Value) {
        let stored = encode(&obj).expect("encode");
        let mut without = obj.clone();
        crate::meta::set_meta_str(&mut without, crate::meta::MetaField::ResourceVersion, None);
        assert_eq!(
            std::str::from_utf8(&stored.bytes).unwrap(),
            String::from_utf8(crate::wire::to_vec(&without)).unwrap(),
            "stored form of {obj}"
        );
        let mut with = obj.clone();
        crate::meta::set_meta_str(
            &mut with,
            crate::meta::MetaField::ResourceVersion,
            Some("12345"),
        );
        let served = stored.with_resource_version(12345).expect("a slot");
        assert_eq!(
            std::str::from_utf8(&served).unwrap(),
            String::from_utf8(crate::wire::to_vec(&with)).unwrap(),
            "served form of {obj}"
        );
    }

    #[test]
    fn splicing_the_resource_version_gives_what_encoding_the_object_gives() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "default", "uid": "u-1",
                "labels": {"app": "web", "resourceVersion": "label, not the member"},
                "annotations": {"note": "quotes \" and \\ and ünïcode and \u{1}"},
                "creationTimestamp": "2026-12-01T10:00:00Z", "generation": 1,
                "resourceVersion": "99", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": 0.5}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        });
        check(pod);
        // The slot first, last, alone, and between members.
        check(json!({"kind": "X", "metadata": {"uid": "u", "selfLink": "s"}}));
        check(json!({"kind": "X", "metadata": {"name": "a"}}));
        check(json!({"kind": "X", "metadata": {}}));
        check(json!({"kind": "X", "metadata": {"resourceVersion": "1"}}));
        check(json!({"metadata": {"name": "a", "uid": "u"}}));
        check(json!({"a": [1, 2.5, null, true], "metadata": {"name": "a"}, "z": {}}));
        check(
            json!({"kind": "X", "metadata": {"r": 1, "resourceVersioN": 2, "resourceVersionX": 3}}),
        );
    }

    #[test]
    fn an_object_without_a_metadata_map_has_no_slot() {
        for obj in [json!({"kind": "X"}), json!({"metadata": "x"}), json!([1])] {
            let stored = encode(&obj).expect("encode");
            // Stored as before: the resourceVersion removed from a copy.
            let mut without = obj.clone();
            crate::meta::set_meta_str(&mut without, crate::meta::MetaField::ResourceVersion, None);
            assert_eq!(stored.bytes, crate::wire::to_vec(&without));
            assert_eq!(stored.with_resource_version(1), None);
        }
    }
}
