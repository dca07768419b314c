//! Decoding objects without their `metadata.managedFields`: the informer transform
//! kube-controller-manager and kube-scheduler install (`trim` in
//! `cmd/kube-controller-manager/app/controllermanager.go` `CreateControllerContext`, and in
//! `pkg/scheduler/scheduler.go` `newPodInformer`; client-go's
//! `cache.TransformStripManagedFields`), applied while decoding instead of after.
//!
//! A controller never reads managedFields, yet every Pod event carries several entries, each
//! a tree of `fieldsV1` that a typed decode builds as nested JSON maps, and that the caches
//! then keep, clone and drop. client-go decodes them and clears the field in the transform;
//! here [`WithoutManagedFields`] skips their bytes in the decoder, so they are never built.
//! The result is the object client-go's transform leaves in the cache: everything but
//! `metadata.managedFields`, which is `None`.
//!
//! Writing a stripped object back is safe, as it is for Kubernetes' controllers: an update
//! that leaves managedFields out keeps the stored ones (the API server's rule).
//!
//! The skip applies when the type decodes itself as a struct or map whose `metadata` member
//! is a struct or map (every `k8s-openapi` type, `kube`'s `Object` and `DynamicObject`); a type
//! that decodes through `deserialize_any` (a `serde_json::Value`) is decoded whole.

use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::{Deserialize, Serialize};

/// The member of an object's metadata that is skipped.
const MANAGED_FIELDS: &str = "managedFields";
/// The member of an object that holds its metadata.
const METADATA: &str = "metadata";

/// `K` decoded without `metadata.managedFields` (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct WithoutManagedFields<K>(pub K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for WithoutManagedFields<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Skipping {
            inner: deserializer,
            level: Level::Object,
        })
        .map(WithoutManagedFields)
    }
}

/// Where in the object a map being decoded sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// The object itself: its `metadata` member is decoded at [`Level::Metadata`].
    Object,
    /// The object's metadata: its `managedFields` member is skipped.
    Metadata,
}

/// A deserializer that decodes structs and maps through [`SkippingMap`] and everything else
/// as `inner` does.
struct Skipping<D> {
    inner: D,
    level: Level,
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Skipping<D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = SkippingVisitor {
            inner: visitor,
            level: self.level,
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = SkippingVisitor {
            inner: visitor,
            level: self.level,
        };
        self.inner.deserialize_map(visitor)
    }

    // An optional or newtype member (`Option<ObjectMeta>`) reaches its struct through these.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = SkippingVisitor {
            inner: visitor,
            level: self.level,
        };
        self.inner.deserialize_option(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = SkippingVisitor {
            inner: visitor,
            level: self.level,
        };
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    forward! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Hands the map a struct or map is decoded from to `inner` as a [`SkippingMap`], and the
/// value inside an option or newtype to `inner` through a [`Skipping`] deserializer.
struct SkippingVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for SkippingVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(SkippingMap {
            inner: map,
            level: self.level,
            next_is_metadata: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Skipping {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Skipping {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    // A struct can also be decoded from a sequence or (by some formats) an enum: passed on.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// A map whose keys are read first as strings: at [`Level::Metadata`] the `managedFields`
/// member is skipped unread; at [`Level::Object`] the `metadata` member's value is decoded at
/// [`Level::Metadata`].
struct SkippingMap<A> {
    inner: A,
    level: Level,
    /// The key just returned was the object's `metadata`.
    next_is_metadata: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkippingMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            let name = key.as_str();
            if self.level == Level::Metadata && name == MANAGED_FIELDS {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.next_is_metadata = self.level == Level::Object && name == METADATA;
            return match key {
                Key::Borrowed(name) => seed.deserialize(BorrowedStrDeserializer::new(name)),
                Key::Owned(name) => seed.deserialize(StringDeserializer::new(name)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.next_is_metadata) {
            self.inner.next_value_seed(MetadataSeed(seed))
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Decodes the metadata member's value at [`Level::Metadata`].
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Skipping {
            inner: deserializer,
            level: Level::Metadata,
        })
    }
}

/// A map key, borrowed from the input when the format allows (JSON keys without escapes).
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }

            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }

            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{DynamicObject, ObjectList, WatchEvent};
    use serde_json::json;

    /// A pod as the API server sends it: managedFields between other metadata members,
    /// a `managedFields` key elsewhere (an annotation, a label) that must stay.
    fn pod_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "default",
                "labels": {"managedFields": "label value"},
                "managedFields": [{
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}}}}},
                    "subresource": "status"
                }],
                "annotations": {"a\"b": "escaped key", "managedFields": "annotation value"},
                "resourceVersion": "42"
            },
            "spec": {"containers": [{"name": "app", "image": "nginx"}], "nodeName": "node-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}
        })
    }

    /// The pod as client-go's transform leaves it: decoded whole, managedFields cleared.
    fn stripped(value: &serde_json::Value) -> Pod {
        let mut pod: Pod = serde_json::from_value(value.clone()).expect("pod");
        assert!(pod.metadata.managed_fields.is_some(), "the input has them");
        pod.metadata.managed_fields = None;
        pod
    }

    #[test]
    fn a_pod_decodes_whole_except_its_managed_fields() {
        let value = pod_json();
        let text = serde_json::to_string(&value).expect("json");
        let WithoutManagedFields(pod) =
            serde_json::from_str::<WithoutManagedFields<Pod>>(&text).expect("decode");
        assert_eq!(pod, stripped(&value));
        // Members named managedFields elsewhere, and escaped keys, are untouched.
        let labels = pod.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["managedFields"], "label value");
        let annotations = pod.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations["a\"b"], "escaped key");
        assert_eq!(annotations["managedFields"], "annotation value");
    }

    #[test]
    fn metadata_before_or_after_the_rest_and_from_a_value_decode_alike() {
        let value = pod_json();
        let want = stripped(&value);
        // Keys in another order: metadata last.
        let reordered = format!(
            r#"{{"status":{},"spec":{},"kind":"Pod","apiVersion":"v1","metadata":{}}}"#,
            value["status"], value["spec"], value["metadata"]
        );
        let WithoutManagedFields(pod) =
            serde_json::from_str::<WithoutManagedFields<Pod>>(&reordered).expect("decode");
        assert_eq!(pod, want);
        // From a reader (keys are not borrowed) and from a Value (a different deserializer).
        let bytes = serde_json::to_vec(&value).expect("json");
        let WithoutManagedFields(pod) =
            serde_json::from_reader::<_, WithoutManagedFields<Pod>>(bytes.as_slice())
                .expect("decode");
        assert_eq!(pod, want);
        let WithoutManagedFields(pod) =
            serde_json::from_value::<WithoutManagedFields<Pod>>(value.clone()).expect("decode");
        assert_eq!(pod, want);
    }

    #[test]
    fn watch_events_and_lists_decode_their_objects_without_managed_fields() {
        let value = pod_json();
        let want = stripped(&value);
        // As kube decodes a watch line, with "object" before or after "type".
        for line in [
            json!({"type": "MODIFIED", "object": value}).to_string(),
            format!(r#"{{"object":{value},"type":"ADDED"}}"#),
        ] {
            match serde_json::from_str::<WatchEvent<WithoutManagedFields<Pod>>>(&line) {
                Ok(WatchEvent::Added(WithoutManagedFields(pod)))
                | Ok(WatchEvent::Modified(WithoutManagedFields(pod))) => assert_eq!(pod, want),
                other => panic!("unexpected {other:?}"),
            }
        }
        let list = json!({
            "apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "43"},
            "items": [value, value]
        });
        let list: ObjectList<WithoutManagedFields<Pod>> =
            serde_json::from_value(list).expect("list");
        assert_eq!(list.items.len(), 2);
        assert!(list.items.iter().all(|item| item.0 == want));
        assert_eq!(list.metadata.resource_version.as_deref(), Some("43"));
    }

    #[test]
    fn dynamic_objects_lose_their_managed_fields_and_keep_their_data() {
        let value = pod_json();
        let WithoutManagedFields(object) =
            serde_json::from_value::<WithoutManagedFields<DynamicObject>>(value.clone())
                .expect("decode");
        assert!(object.metadata.managed_fields.is_none());
        assert_eq!(object.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(object.data["status"]["podIP"], "10.0.0.7");
        assert_eq!(object.data["spec"]["nodeName"], "node-1");
    }

    #[test]
    fn malformed_input_is_an_error_not_a_partial_object() {
        for text in [
            r#"{"metadata":{"name":"x","managedFields":[{"manager":"a"}"#,
            r#"{"metadata":{"name":"x","managedFields":[}]}}"#,
            r#"{"metadata":"not a map"}"#,
            r#"["not", "an", "object"]"#,
        ] {
            assert!(
                serde_json::from_str::<WithoutManagedFields<Pod>>(text).is_err(),
                "{text}"
            );
        }
    }
}
