//! The informer's cache: client-go's `ThreadSafeStore` + `Indexer` (`tools/cache/store.go`,
//! `thread_safe_store.go`, `index.go`).
//!
//! Objects are stored by [`ObjectKey`] as `Arc<K>`: readers share them and nobody mutates a
//! cached object (clone it first; client-go says "DeepCopy"). Named index functions map an
//! object to index values; the store keeps, per index, value → the objects with it (by key:
//! client-go keeps the keys only, and `ByIndex` looks each up again), updated on every
//! add/update/delete:
//!
//! ```text
//!   items:   "default/web-1" → Pod{node: n1}    indices["nodeName"]:  "n1" → {default/web-1, default/web-2}
//!            "default/web-2" → Pod{node: n1}                          "n2" → {kube-system/dns}
//!            "kube-system/dns" → Pod{node: n2}  indices["namespace"]: "default" → {web-1, web-2} ...
//! ```
//!
//! Built-in index functions: [`namespace_index_func`] (client-go's `MetaNamespaceIndexFunc`),
//! [`controller_uid_index_func`] (the controller ownerReference's uid, as the ReplicaSet and
//! garbage-collector controllers index pods) and [`pod_node_name_index_func`]
//! (`spec.nodeName`, as the kubelet and scheduler do).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};

use crate::error::{Error, Result};
use apimachinery::ObjectKey;

/// Name of the namespace index (client-go's `cache.NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";
/// Name of the controller-owner-uid index.
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";
/// Name of the pod node-name index.
pub const NODE_NAME_INDEX: &str = "spec.nodeName";

/// Maps an object to the values it is indexed under (client-go's `IndexFunc`).
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Indexes objects by namespace (cluster-scoped objects are not indexed).
pub fn namespace_index_func<K: Resource>(obj: &K) -> Vec<String> {
    obj.meta().namespace.iter().cloned().collect()
}

/// The [`CONTROLLER_UID_INDEX`] value of objects without a controller (client-go's
/// `OrphanPodIndexKey`), so a controller finds the orphans it may adopt without walking the
/// namespace.
pub const ORPHAN_INDEX_KEY: &str = "_ORPHAN_POD";

/// Indexes objects by the uid of their controller ownerReference (`controller: true`), and
/// objects without one under [`ORPHAN_INDEX_KEY`] (`AddPodControllerUIDIndexer` in
/// `pkg/controller/controller_utils.go`).
pub fn controller_uid_index_func<K: Resource>(obj: &K) -> Vec<String> {
    match obj
        .owner_references()
        .iter()
        .find(|owner| owner.controller == Some(true))
    {
        Some(owner) => vec![owner.uid.clone()],
        None => vec![ORPHAN_INDEX_KEY.to_owned()],
    }
}

/// Indexes pods by `spec.nodeName` (unscheduled pods are not indexed).
pub fn pod_node_name_index_func(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.clone())
        .filter(|node| !node.is_empty())
        .into_iter()
        .collect()
}

/// A thread-safe, indexed object cache (a cheap-to-clone handle).
pub struct Indexer<K> {
    store: Arc<RwLock<ThreadSafeStore<K>>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Indexer {
            store: self.store.clone(),
        }
    }
}

struct ThreadSafeStore<K> {
    items: HashMap<ObjectKey, Arc<K>>,
    indexers: BTreeMap<String, IndexFunc<K>>,
    /// index name → index value → the objects with that value, by key. The objects are held
    /// here as well as in `items` (client-go's index holds keys only), so that
    /// [`Indexer::by_index`] does not look each key up again: a controller reads thousands of
    /// pods by owner on every sync.
    indices: HashMap<String, Index<K>>,
}

/// One index: index value → the objects with that value, by key.
type Index<K> = HashMap<String, HashMap<ObjectKey, Arc<K>>>;

impl<K> ThreadSafeStore<K> {
    /// Moves `key` from the index values of `old` to those of `new` (either may be absent).
    /// A value both have (an update that does not change it, the usual case) only has its
    /// object replaced.
    fn update_indices(&mut self, old: Option<&K>, new: Option<&Arc<K>>, key: &ObjectKey) {
        for (name, index_fn) in &self.indexers {
            // Every indexer has its index: `add_indexer` makes it, `replace` empties it.
            let Some(index) = self.indices.get_mut(name) else {
                continue;
            };
            let old_values = old.map(|o| index_fn(o)).unwrap_or_default();
            let new_values = new.map(|n| index_fn(n)).unwrap_or_default();
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                if let Some(objects) = index.get_mut(value) {
                    objects.remove(key);
                    if objects.is_empty() {
                        index.remove(value);
                    }
                }
            }
            let Some(new) = new else {
                continue;
            };
            for value in new_values {
                let objects = index.entry(value).or_default();
                match objects.get_mut(key) {
                    Some(object) => *object = new.clone(),
                    None => {
                        objects.insert(key.clone(), new.clone());
                    }
                }
            }
        }
    }
}

impl<K: Resource + 'static> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + 'static> Indexer<K> {
    /// An empty cache with the namespace index.
    pub fn new() -> Self {
        let indexer = Indexer {
            store: Arc::new(RwLock::new(ThreadSafeStore {
                items: HashMap::new(),
                indexers: BTreeMap::new(),
                indices: HashMap::new(),
            })),
        };
        indexer.add_indexer(NAMESPACE_INDEX, Arc::new(namespace_index_func::<K>));
        indexer
    }

    // Holders of these locks never panic mid-update in a way that matters: recover.
    fn read(&self) -> RwLockReadGuard<'_, ThreadSafeStore<K>> {
        self.store.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, ThreadSafeStore<K>> {
        self.store.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds (or replaces) the index `name`, indexing the objects already cached.
    pub fn add_indexer(&self, name: &str, index_fn: IndexFunc<K>) {
        let mut store = self.write();
        store.indexers.insert(name.to_owned(), index_fn.clone());
        let mut index: Index<K> = HashMap::new();
        for (key, obj) in &store.items {
            for value in index_fn(obj) {
                index
                    .entry(value)
                    .or_default()
                    .insert(key.clone(), obj.clone());
            }
        }
        store.indices.insert(name.to_owned(), index);
    }

    /// Inserts or replaces the object under its key; returns the previous object.
    pub fn update(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = ObjectKey::of(obj.as_ref());
        let mut store = self.write();
        let old = store.items.insert(key.clone(), obj.clone());
        store.update_indices(old.as_deref(), Some(&obj), &key);
        old
    }

    /// Same as [`Indexer::update`] (client-go's `Add`).
    pub fn add(&self, obj: Arc<K>) -> Option<Arc<K>> {
        self.update(obj)
    }

    /// Removes the object stored under `key`; returns it.
    pub fn delete(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut store = self.write();
        let old = store.items.remove(key);
        if let Some(old) = &old {
            store.update_indices(Some(old), None, key);
        }
        old
    }

    /// Replaces the whole content with `items`, rebuilding every index.
    pub fn replace(&self, items: Vec<Arc<K>>) {
        let mut store = self.write();
        store.items = items
            .into_iter()
            .map(|obj| (ObjectKey::of(obj.as_ref()), obj))
            .collect();
        for index in store.indices.values_mut() {
            index.clear();
        }
        let items: Vec<(ObjectKey, Arc<K>)> = store
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, obj) in items {
            store.update_indices(None, Some(&obj), &key);
        }
    }

    /// The object stored under `key`.
    pub fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.read().items.get(key).cloned()
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().items.values().cloned().collect()
    }

    /// Every cached key.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.read().items.keys().cloned().collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.read().items.len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects whose index `index_name` contains `value`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>> {
        let store = self.read();
        let index = store
            .indices
            .get(index_name)
            .ok_or_else(|| Error::IndexNotFound(index_name.to_owned()))?;
        Ok(index
            .get(value)
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default())
    }

    /// The keys whose index `index_name` contains `value` (client-go's `IndexKeys`).
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>> {
        let store = self.read();
        let index = store
            .indices
            .get(index_name)
            .ok_or_else(|| Error::IndexNotFound(index_name.to_owned()))?;
        Ok(index
            .get(value)
            .map(|objects| objects.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// The values present in index `index_name` (client-go's `ListIndexFuncValues`).
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.read()
            .indices
            .get(index_name)
            .map(|index| index.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// True if an index called `index_name` exists.
    pub fn has_index(&self, index_name: &str) -> bool {
        self.read().indexers.contains_key(index_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    fn pod(ns: &str, name: &str, node: Option<&str>, owner_uid: Option<&str>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                owner_references: owner_uid.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "rs".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn names(mut pods: Vec<Arc<Pod>>) -> Vec<String> {
        pods.sort_by_key(|p| p.name_any());
        pods.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn an_index_gives_the_newest_version_of_each_object_it_holds() {
        let indexer = Indexer::<Pod>::new();
        indexer.add_indexer(NODE_NAME_INDEX, Arc::new(pod_node_name_index_func));
        indexer.add(pod("default", "a", None, Some("rs-1")));
        indexer.add(pod("default", "b", Some("n1"), None));
        // An update that keeps the index value: the index holds the new version.
        let a_owned_elsewhere = pod("default", "a", None, Some("rs-2"));
        indexer.update(a_owned_elsewhere.clone());
        let in_namespace = indexer.by_index(NAMESPACE_INDEX, "default").unwrap();
        assert_eq!(names(in_namespace.clone()), ["a", "b"]);
        let a = in_namespace.iter().find(|p| p.name_any() == "a").unwrap();
        assert!(Arc::ptr_eq(a, &a_owned_elsewhere), "the version last added");
        // An update that changes it: the object moves from one value to the other.
        indexer.update(pod("default", "a", Some("n1"), Some("rs-2")));
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["a", "b"]
        );
        assert_eq!(
            indexer.index_keys(NODE_NAME_INDEX, "n1").unwrap().len(),
            2,
            "keys and objects agree"
        );
        // A delete takes it out of every index.
        indexer.delete(&ObjectKey::of(a_owned_elsewhere.as_ref()));
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["b"]
        );
        assert_eq!(
            names(indexer.by_index(NAMESPACE_INDEX, "default").unwrap()),
            ["b"]
        );
    }

    #[test]
    fn an_index_outlives_a_replace_that_empties_the_cache() {
        let indexer = Indexer::<Pod>::new();
        indexer.add_indexer(NODE_NAME_INDEX, Arc::new(pod_node_name_index_func));
        indexer.add(pod("default", "a", Some("n1"), None));
        indexer.replace(Vec::new());
        assert!(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap().is_empty());
        indexer.replace(vec![pod("default", "b", Some("n1"), None)]);
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["b"]
        );
    }

    #[test]
    fn indexes_by_namespace_owner_and_node() {
        let indexer = Indexer::<Pod>::new();
        indexer.add_indexer(
            CONTROLLER_UID_INDEX,
            Arc::new(controller_uid_index_func::<Pod>),
        );
        indexer.add_indexer(NODE_NAME_INDEX, Arc::new(pod_node_name_index_func));
        indexer.add(pod("default", "a", Some("n1"), Some("rs-1")));
        indexer.add(pod("default", "b", Some("n2"), Some("rs-1")));
        indexer.add(pod("other", "c", Some("n1"), None));
        indexer.add(pod("other", "pending", None, Some("rs-2")));

        assert_eq!(
            names(indexer.by_index(NAMESPACE_INDEX, "default").unwrap()),
            ["a", "b"]
        );
        assert_eq!(
            names(indexer.by_index(CONTROLLER_UID_INDEX, "rs-1").unwrap()),
            ["a", "b"]
        );
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["a", "c"]
        );
        assert_eq!(
            names(
                indexer
                    .by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY)
                    .unwrap()
            ),
            ["c"]
        );
        assert!(indexer.by_index("nope", "x").is_err());

        // An update moves the object between index values; a delete removes it.
        indexer.update(pod("default", "a", Some("n2"), Some("rs-1")));
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["c"]
        );
        assert_eq!(
            names(indexer.by_index(NODE_NAME_INDEX, "n2").unwrap()),
            ["a", "b"]
        );
        indexer.delete(&ObjectKey::new(Some("default"), "b"));
        assert_eq!(
            names(indexer.by_index(CONTROLLER_UID_INDEX, "rs-1").unwrap()),
            ["a"]
        );
        let mut nodes = indexer.list_index_func_values(NODE_NAME_INDEX);
        nodes.sort();
        assert_eq!(nodes, ["n1", "n2"]);
    }

    #[test]
    fn replace_rebuilds_items_and_indices() {
        let indexer = Indexer::<Pod>::new();
        indexer.add(pod("default", "old", None, None));
        indexer.replace(vec![pod("kube-system", "new", None, None)]);
        assert_eq!(indexer.len(), 1);
        assert!(
            indexer
                .by_index(NAMESPACE_INDEX, "default")
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            names(indexer.by_index(NAMESPACE_INDEX, "kube-system").unwrap()),
            ["new"]
        );
        assert!(
            indexer
                .get_by_key(&ObjectKey::new(Some("kube-system"), "new"))
                .is_some()
        );
    }
}
