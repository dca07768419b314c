//! Typed listers: client-go's generated listers (`listers/apps/v1/deployment.go`:
//! `DeploymentLister.List(selector)`, `Deployments(ns).Get(name)`) and the generic
//! `tools/cache/listers.go` (`ListAll`, `ListAllByNamespace`).
//!
//! A lister is a read-only view over an informer's [`Indexer`]: reads never hit the API
//! server. Results are shared `Arc`s of cached objects: clone before changing anything.
//! Lists are sorted by key so controllers iterate deterministically.

use std::sync::Arc;

use kube::{Resource, ResourceExt};

use crate::indexer::{Indexer, NAMESPACE_INDEX};
use apimachinery::ObjectKey;
use apimachinery::Selector;

/// Read access to cached objects of one type.
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K: Resource + 'static> Lister<K> {
    /// A lister over `indexer` (usually `informer.indexer().clone()`).
    pub fn new(indexer: Indexer<K>) -> Self {
        Lister { indexer }
    }

    /// Objects in `namespace` (all namespaces for `None`) whose labels match `selector`.
    pub fn list(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        let candidates = match namespace {
            // Served from the namespace index when there is one.
            Some(ns) => self
                .indexer
                .by_index(NAMESPACE_INDEX, ns)
                .unwrap_or_else(|_| {
                    let ns = Some(ns.to_owned());
                    self.indexer
                        .list()
                        .into_iter()
                        .filter(|o| o.meta().namespace == ns)
                        .collect()
                }),
            None => self.indexer.list(),
        };
        let mut matched: Vec<Arc<K>> = candidates
            .into_iter()
            .filter(|obj| selector.matches(obj.labels()))
            .collect();
        matched.sort_by_cached_key(|obj| ObjectKey::of(obj.as_ref()));
        matched
    }

    /// The object `namespace/name` (`name` alone when cluster-scoped).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(&ObjectKey::new(namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn deploy(ns: &str, name: &str, app: &str) -> Arc<Deployment> {
        Arc::new(Deployment {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn lists_by_namespace_and_selector_and_gets_by_name() {
        let indexer = Indexer::new();
        indexer.add(deploy("default", "web-b", "web"));
        indexer.add(deploy("default", "web-a", "web"));
        indexer.add(deploy("default", "db", "db"));
        indexer.add(deploy("prod", "web", "web"));
        let lister = Lister::new(indexer);
        let web = Selector::parse("app=web").unwrap();
        let names = |v: Vec<Arc<Deployment>>| v.iter().map(|d| d.name_any()).collect::<Vec<_>>();
        assert_eq!(
            names(lister.list(Some("default"), &web)),
            ["web-a", "web-b"]
        );
        assert_eq!(names(lister.list(None, &web)), ["web-a", "web-b", "web"]);
        assert_eq!(lister.list(None, &Selector::everything()).len(), 4);
        assert!(lister.list(None, &Selector::nothing()).is_empty());
        assert!(lister.get(Some("prod"), "web").is_some());
        assert!(lister.get(Some("default"), "web").is_none());
    }
}
