//! Object keys: client-go's `MetaNamespaceKeyFunc` / `SplitMetaNamespaceKey`
//! (`tools/cache/store.go`), as a type instead of a string.
//!
//! Caches, work queues and tombstones all identify an object by `namespace/name` (or just
//! `name` for cluster-scoped objects). [`ObjectKey`] displays and parses exactly that form.

use std::fmt;

use kube::{Resource, ResourceExt};

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube::api::ObjectMeta;

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
    }
}
