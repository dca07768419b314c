//! Whether a typed object's JSON encoding is unchanged from a given JSON tree, found without
//! encoding it: a shortcut in the typed round trip of a write, the part Kubernetes' generic
//! registry does by decoding into the Go type (`registry/generic/registry/store.go`, `Update`)
//! and its serializer by encoding the result.
//!
//! An update decodes the written object into its `k8s-openapi` type, defaults and prepares
//! it, and encodes it back into the JSON tree that is stored. Most updates (a kubelet's
//! status write, a controller's status update) change
//! nothing in that round trip, and encoding builds a whole new tree of a few hundred
//! allocations to replace one that is equal to it. [`serializes_to`] walks the typed object
//! through serde beside the tree instead and stops at the first difference; only an object
//! that differs is encoded ([`super::decode::encode_over`]).
//!
//! ```text
//!   typed ──serialize──▶ Same(&tree) ── each struct field / map entry / element / scalar
//!                                       compared with the tree's, no allocation
//!   equal  ⇒ serde_json::to_value(typed) == tree   (the tree is kept)
//!   differs or unsure ⇒ false                       (the caller encodes as before)
//! ```
//!
//! It follows `serde_json::value::Serializer` (what `serde_json::to_value` uses) case by case,
//! so "equal" means exactly `to_value(typed) == tree`. Where following it would take more code
//! than it is worth (enum variants with fields, 128-bit integers, non-string map keys other
//! than integers and bools, serde_json's private raw-value structs) it answers "differs",
//! which is always safe: the caller then encodes. One assumption: a map or struct does not
//! serialize the same key twice (true of Rust structs, maps and `k8s-openapi`'s types; with a
//! repeated key `to_value` keeps the last, and this would count both).

use serde::ser::{self, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Whether `serde_json::to_value(value)` would equal `target` (see the module docs).
pub fn serializes_to<T: Serialize + ?Sized>(value: &T, target: &Value) -> bool {
    value.serialize(Same(target)).is_ok()
}

/// Why a comparison stopped: the values differ (or cannot be compared cheaply).
#[derive(Debug)]
pub struct Differs;

impl fmt::Display for Differs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value does not serialize to the tree")
    }
}

impl std::error::Error for Differs {}

impl ser::Error for Differs {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Differs
    }
}

/// Compares what is serialized into it with one JSON tree.
struct Same<'a>(&'a Value);

impl Same<'_> {
    /// Compares a scalar that `to_value` would build without allocating.
    fn scalar(self, v: Value) -> Result<(), Differs> {
        if *self.0 == v { Ok(()) } else { Err(Differs) }
    }
}

impl<'a> Same<'a> {
    fn object(&self) -> Result<&'a Map<String, Value>, Differs> {
        self.0.as_object().ok_or(Differs)
    }
}

/// The names of `serde_json`'s private structs that `to_value` turns into something else than
/// an object (a raw value, an arbitrary-precision number).
fn is_private_struct(name: &str) -> bool {
    name.starts_with("$serde_json::private::")
}

/// Enum variants with fields (tuple or struct variants), which neither serializer compares:
/// "different", always safe.
macro_rules! refuse_variants_with_fields {
    () => {
        fn serialize_tuple_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleVariant, Differs> {
            Err(Differs)
        }
        fn serialize_struct_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStructVariant, Differs> {
            Err(Differs)
        }
    };
}

/// Booleans and numbers, which `serde_json::to_value` turns into `Value::from(v)` (a float
/// that is not finite into `null`).
macro_rules! scalars {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), Differs> {
            self.scalar(Value::from(v))
        }
    )*};
}

impl<'a> ser::Serializer for Same<'a> {
    type Ok = ();
    type Error = Differs;
    type SerializeSeq = SameSeq<'a>;
    type SerializeTuple = SameSeq<'a>;
    type SerializeTupleStruct = SameSeq<'a>;
    type SerializeTupleVariant = ser::Impossible<(), Differs>;
    type SerializeMap = SameMap<'a>;
    type SerializeStruct = SameMap<'a>;
    type SerializeStructVariant = ser::Impossible<(), Differs>;

    scalars!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f32: f32,
        serialize_f64: f64
    );
    fn serialize_i128(self, _v: i128) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_u128(self, _v: u128) -> Result<(), Differs> {
        Err(Differs)
    }
    fn serialize_char(self, v: char) -> Result<(), Differs> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Differs> {
        if self.0.as_str() == Some(v) {
            Ok(())
        } else {
            Err(Differs)
        }
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Differs> {
        match self.0.as_array() {
            Some(a) if a.len() == v.len() => a
                .iter()
                .zip(v)
                .try_for_each(|(t, b)| Same(t).serialize_u8(*b)),
            _ => Err(Differs),
        }
    }
    fn serialize_none(self) -> Result<(), Differs> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Differs> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Differs> {
        self.scalar(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Differs> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Differs> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        // `{variant: value}`
        let map = self.object()?;
        match map.get(variant) {
            Some(inner) if map.len() == 1 => value.serialize(Same(inner)),
            _ => Err(Differs),
        }
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<SameSeq<'a>, Differs> {
        let items = self.0.as_array().ok_or(Differs)?;
        Ok(SameSeq {
            items: items.iter(),
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<SameSeq<'a>, Differs> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SameSeq<'a>, Differs> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<SameMap<'a>, Differs> {
        Ok(SameMap {
            map: self.object()?,
            seen: 0,
            pending: None,
        })
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<SameMap<'a>, Differs> {
        if is_private_struct(name) {
            return Err(Differs);
        }
        self.serialize_map(Some(len))
    }
    refuse_variants_with_fields!();
}

/// The elements of a sequence, compared in order with the tree's array.
struct SameSeq<'a> {
    items: std::slice::Iter<'a, Value>,
}

impl SameSeq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
        let target = self.items.next().ok_or(Differs)?;
        value.serialize(Same(target))
    }

    fn finish(mut self) -> Result<(), Differs> {
        match self.items.next() {
            None => Ok(()),
            Some(_) => Err(Differs),
        }
    }
}

/// The three sequence traits of serde, each an element at a time ([`SameSeq::element`]).
macro_rules! same_seq {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for SameSeq<'_> {
            type Ok = ();
            type Error = Differs;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
                self.element(value)
            }
            fn end(self) -> Result<(), Differs> {
                self.finish()
            }
        }
    )*};
}

same_seq!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

/// The entries of a map or the fields of a struct, each looked up in the tree's object; at
/// the end the object must have had no others.
struct SameMap<'a> {
    map: &'a Map<String, Value>,
    seen: usize,
    /// The tree's value under the key just serialized.
    pending: Option<&'a Value>,
}

impl<'a> SameMap<'a> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Differs> {
        let target = self.map.get(key).ok_or(Differs)?;
        self.seen += 1;
        value.serialize(Same(target))
    }

    fn finish(self) -> Result<(), Differs> {
        if self.seen == self.map.len() {
            Ok(())
        } else {
            Err(Differs)
        }
    }
}

impl ser::SerializeMap for SameMap<'_> {
    type Ok = ();
    type Error = Differs;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Differs> {
        let target = key.serialize(KeyOf(self.map))?;
        self.seen += 1;
        self.pending = Some(target);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differs> {
        let target = self.pending.take().ok_or(Differs)?;
        value.serialize(Same(target))
    }
    fn end(self) -> Result<(), Differs> {
        self.finish()
    }
}

impl ser::SerializeStruct for SameMap<'_> {
    type Ok = ();
    type Error = Differs;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Differs> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Differs> {
        self.finish()
    }
}

/// A map key, as `serde_json`'s `MapKeySerializer` turns it into a string, looked up in the
/// tree's object: the tree's value under it (a missing key differs).
struct KeyOf<'a>(&'a Map<String, Value>);

impl<'a> KeyOf<'a> {
    fn get(self, key: &str) -> Result<&'a Value, Differs> {
        self.0.get(key).ok_or(Differs)
    }
}

/// Integer map keys, which `serde_json` writes as their decimal strings.
macro_rules! integer_keys {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<&'a Value, Differs> {
            self.get(&v.to_string())
        }
    )*};
}

impl<'a> ser::Serializer for KeyOf<'a> {
    type Ok = &'a Value;
    type Error = Differs;
    type SerializeSeq = ser::Impossible<&'a Value, Differs>;
    type SerializeTuple = ser::Impossible<&'a Value, Differs>;
    type SerializeTupleStruct = ser::Impossible<&'a Value, Differs>;
    type SerializeTupleVariant = ser::Impossible<&'a Value, Differs>;
    type SerializeMap = ser::Impossible<&'a Value, Differs>;
    type SerializeStruct = ser::Impossible<&'a Value, Differs>;
    type SerializeStructVariant = ser::Impossible<&'a Value, Differs>;

    fn serialize_str(self, v: &str) -> Result<&'a Value, Differs> {
        self.get(v)
    }
    fn serialize_char(self, v: char) -> Result<&'a Value, Differs> {
        self.get(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_bool(self, v: bool) -> Result<&'a Value, Differs> {
        self.get(if v { "true" } else { "false" })
    }
    integer_keys!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64
    );
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<&'a Value, Differs> {
        self.get(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<&'a Value, Differs> {
        value.serialize(self)
    }
    fn serialize_f32(self, _v: f32) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_f64(self, _v: f64) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_none(self) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_unit(self) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<&'a Value, Differs> {
        Err(Differs)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Differs> {
        Err(Differs)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Differs> {
        Err(Differs)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Differs> {
        Err(Differs)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Differs> {
        Err(Differs)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Differs> {
        Err(Differs)
    }
    refuse_variants_with_fields!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// A running pod as the kubelet reports it, decoded into its type.
    fn pod() -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1",
                "labels": {"app": "web"}, "resourceVersion": "7",
                "creationTimestamp": "2026-12-02T22:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs-1", "controller": true}]},
            "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "nginx", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-12-02T22:00:01Z"}],
                "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0,
                    "image": "nginx:1.27", "imageID": "", "started": true,
                    "state": {"running": {"startedAt": "2026-12-02T22:00:01Z"}}}]}
        }))
        .expect("a pod")
    }

    #[test]
    fn a_typed_object_serializes_to_its_own_encoding() {
        let pod = pod();
        let tree = serde_json::to_value(&pod).expect("encodes");
        assert!(serializes_to(&pod, &tree));
        let map: BTreeMap<String, Vec<Option<i32>>> = [
            ("a".to_string(), vec![Some(1), None]),
            ("b".to_string(), vec![]),
        ]
        .into();
        assert!(serializes_to(&map, &json!({"a": [1, null], "b": []})));
        assert!(serializes_to(&(1u8, "x", true), &json!([1, "x", true])));
        assert!(serializes_to(&1.5f64, &json!(1.5)));
    }

    #[test]
    fn any_difference_from_the_encoding_is_found() {
        let pod = pod();
        let tree = serde_json::to_value(&pod).expect("encodes");
        type Edit = (&'static str, fn(&mut Value));
        let edits: [Edit; 9] = [
            ("a changed string", |t| {
                t["status"]["podIP"] = json!("10.0.0.6")
            }),
            ("a changed number", |t| {
                t["spec"]["terminationGracePeriodSeconds"] = json!(31)
            }),
            ("an integer written as a float", |t| {
                t["spec"]["terminationGracePeriodSeconds"] = json!(30.0)
            }),
            ("a changed bool", |t| {
                t["status"]["containerStatuses"][0]["ready"] = json!(false)
            }),
            ("an extra member", |t| {
                t["spec"]["hostNetwork"] = json!(false)
            }),
            ("an explicit null the encoding omits", |t| {
                t["spec"]["nodeSelector"] = Value::Null
            }),
            ("a missing member", |t| {
                if let Some(m) = t["metadata"].as_object_mut() {
                    m.remove("uid");
                }
            }),
            ("an extra list element", |t| {
                if let Some(a) = t["spec"]["containers"].as_array_mut() {
                    a.push(json!({"name": "sidecar"}));
                }
            }),
            ("an extra map entry", |t| {
                t["metadata"]["labels"]["tier"] = json!("a")
            }),
        ];
        for (what, edit) in edits {
            let mut changed = tree.clone();
            edit(&mut changed);
            assert_ne!(changed, tree, "{what}: the edit changes the tree");
            assert!(!serializes_to(&pod, &changed), "{what} is not found");
        }
    }

    #[test]
    fn what_is_not_compared_counts_as_different() {
        #[derive(serde::Serialize)]
        enum E {
            S { a: i32 },
        }
        assert!(!serializes_to(&E::S { a: 1 }, &json!({"S": {"a": 1}})));
        assert!(!serializes_to(&1u128, &json!(1)));
        assert!(!serializes_to(&1, &json!("1")));
    }
}
