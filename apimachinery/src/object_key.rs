//! How components name objects:
//!
//! - [`ObjectKey`]: client-go's `MetaNamespaceKeyFunc` / `SplitMetaNamespaceKey`
//!   (`tools/cache/store.go`) as a type instead of a string. Caches, work queues and tombstones
//!   all identify an object by `namespace/name` (or just `name` for cluster-scoped objects).
//! - [`ObjectRef`]: one incarnation of an object of some kind (`apiVersion`, `kind`,
//!   namespace, name, `uid`), what the garbage collector calls `objectReference` and an
//!   Event's `involvedObject` holds (`core/v1.ObjectReference`'s identifying fields).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource as TypedResource};
use kube_core::{Resource, ResourceExt};

/// The cache key of an object: `namespace/name`, or `name` when cluster-scoped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts; an empty namespace means cluster-scoped.
    pub fn new(namespace: Option<&str>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_owned),
            name: name.into(),
        }
    }

    /// The key of `obj` (client-go's `MetaNamespaceKeyFunc`).
    pub fn of<K: Resource>(obj: &K) -> Self {
        ObjectKey::new(obj.meta().namespace.as_deref(), obj.name_any())
    }

    /// The key of an object's metadata (missing fields become empty).
    pub fn from_meta(meta: &ObjectMeta) -> Self {
        ObjectKey::new(
            meta.namespace.as_deref(),
            meta.name.clone().unwrap_or_default(),
        )
    }

    /// Parses `namespace/name` or `name` (client-go's `SplitMetaNamespaceKey`); `None` for
    /// more than one `/` or an empty name.
    pub fn parse(key: &str) -> Option<Self> {
        let mut parts = key.split('/');
        let key = match (parts.next(), parts.next(), parts.next()) {
            (Some(name), None, None) => ObjectKey::new(None, name),
            (Some(ns), Some(name), None) => ObjectKey::new(Some(ns), name),
            _ => return None,
        };
        (!key.name.is_empty()).then_some(key)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Identity of one incarnation of any object: what the garbage collector calls
/// `objectReference` and what an event's `involvedObject` holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// `apps/v1`, `v1`, ...
    pub api_version: String,
    /// `Deployment`, `Pod`, ...
    pub kind: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID; identifies this incarnation (a re-created object with the same name differs).
    pub uid: String,
}

impl ObjectRef {
    /// The reference of a typed object.
    pub fn from_object<K: TypedResource + Metadata<Ty = ObjectMeta>>(obj: &K) -> ObjectRef {
        let meta = obj.metadata();
        ObjectRef {
            api_version: K::API_VERSION.to_string(),
            kind: K::KIND.to_string(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }

    /// `namespace/name` of the referenced object.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace.as_deref(), self.name.clone())
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    #[test]
    fn keys_round_trip() {
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some("web".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&pod).to_string(), "default/web");
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some("kube-system".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&ns).to_string(), "kube-system");
        assert_eq!(ObjectKey::parse("default/web"), Some(ObjectKey::of(&pod)));
        assert_eq!(ObjectKey::parse("kube-system"), Some(ObjectKey::of(&ns)));
        assert_eq!(ObjectKey::parse("a/b/c"), None);
        assert_eq!(ObjectKey::parse("ns/"), None);
        assert_eq!(ObjectKey::from_meta(&pod.metadata), ObjectKey::of(&pod));
        assert_eq!(ObjectKey::new(Some(""), "n").namespace, None);
    }

    #[test]
    fn references_name_kind_and_key() {
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some("web".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = ObjectRef::from_object(&pod);
        assert_eq!((r.api_version.as_str(), r.kind.as_str()), ("v1", "Pod"));
        assert_eq!(r.uid, "u1");
        assert_eq!(r.key(), ObjectKey::of(&pod));
        assert_eq!(r.to_string(), "Pod default/web");
    }
}
