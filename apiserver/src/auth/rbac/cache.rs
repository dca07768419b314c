//! The RBAC objects the authorizer reads: every Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding, kept in memory and following the store.
//!
//! Mirrors the shared informers kube-apiserver's RBAC authorizer reads through its listers
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go`'s `RoleGetter`, `RoleBindingLister`,
//! `ClusterRoleGetter`, `ClusterRoleBindingLister`). As there, a change takes effect when
//! the watch delivers it (within milliseconds), not within the write's request.
//!
//! ```text
//!   store /registry/{roles,rolebindings}/<ns>/<name>
//!         /registry/{clusterroles,clusterrolebindings}/<name>
//!     ── list the four at one revision, then watch each from it ──▶ Snapshot (rules and
//!        bindings, parsed once)
//! ```
//!
//! A watch that is cut off relists all four (as one informer's relist would its kind); the
//! other three go on from where they were, so a change they had not delivered yet may show
//! again, briefly, until they deliver what followed it.

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use store::{Backend, EventKind, RangeRequest, Revision};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the four kinds are stored (`crate::storage::resource_prefix`).
const PREFIXES: [&str; 4] = [
    "/registry/clusterroles/",
    "/registry/clusterrolebindings/",
    "/registry/roles/",
    "/registry/rolebindings/",
];

/// A binding's role and subjects.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The role granted.
    pub role_ref: RoleRef,
    /// To whom.
    #[serde(default)]
    pub subjects: Vec<Subject>,
}

#[derive(Deserialize)]
struct StoredRole {
    #[serde(default)]
    rules: Vec<PolicyRule>,
}

/// Everything the authorizer reads, at one point of the store's history.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// ClusterRoles' rules by name.
    pub cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    /// Roles' rules by (namespace, name).
    pub roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    /// ClusterRoleBindings by name.
    pub cluster_role_bindings: BTreeMap<String, Binding>,
    /// RoleBindings by namespace, then name.
    pub role_bindings: HashMap<String, BTreeMap<String, Binding>>,
}

/// Which object a key names.
enum Key<'a> {
    ClusterRole(&'a str),
    ClusterRoleBinding(&'a str),
    Role(&'a str, &'a str),
    RoleBinding(&'a str, &'a str),
}

fn parse_key(key: &[u8]) -> Option<Key<'_>> {
    let rest = std::str::from_utf8(key).ok()?.strip_prefix("/registry/")?;
    let (resource, rest) = rest.split_once('/')?;
    match resource {
        "clusterroles" => Some(Key::ClusterRole(rest)),
        "clusterrolebindings" => Some(Key::ClusterRoleBinding(rest)),
        "roles" => rest.split_once('/').map(|(ns, n)| Key::Role(ns, n)),
        "rolebindings" => rest.split_once('/').map(|(ns, n)| Key::RoleBinding(ns, n)),
        _ => None,
    }
}

impl Snapshot {
    /// Applies a stored object, as the watch would (for tests that build a snapshot by hand).
    #[cfg(test)]
    pub fn apply_for_tests(&mut self, key: &[u8], value: &[u8]) {
        self.apply(key, Some(value));
    }

    /// Applies a stored object (`value: Some`) or its deletion.
    fn apply(&mut self, key: &[u8], value: Option<&[u8]>) {
        let Some(parsed) = parse_key(key) else {
            return;
        };
        let rules = |v: &[u8]| -> Option<Arc<[PolicyRule]>> {
            match serde_json::from_slice::<StoredRole>(v) {
                Ok(r) => Some(r.rules.into()),
                Err(e) => {
                    tracing::warn!(key = %String::from_utf8_lossy(key), error = %e, "RBAC: a stored role does not parse");
                    None
                }
            }
        };
        let binding = |v: &[u8]| -> Option<Binding> {
            match serde_json::from_slice::<Binding>(v) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!(key = %String::from_utf8_lossy(key), error = %e, "RBAC: a stored binding does not parse");
                    None
                }
            }
        };
        match parsed {
            Key::ClusterRole(name) => match value.and_then(rules) {
                Some(r) => drop(self.cluster_roles.insert(name.to_string(), r)),
                None => drop(self.cluster_roles.remove(name)),
            },
            Key::Role(ns, name) => {
                let key = (ns.to_string(), name.to_string());
                match value.and_then(rules) {
                    Some(r) => drop(self.roles.insert(key, r)),
                    None => drop(self.roles.remove(&key)),
                }
            }
            Key::ClusterRoleBinding(name) => match value.and_then(binding) {
                Some(b) => drop(self.cluster_role_bindings.insert(name.to_string(), b)),
                None => drop(self.cluster_role_bindings.remove(name)),
            },
            Key::RoleBinding(ns, name) => match value.and_then(binding) {
                Some(b) => drop(
                    self.role_bindings
                        .entry(ns.to_string())
                        .or_default()
                        .insert(name.to_string(), b),
                ),
                None => {
                    if let Some(in_ns) = self.role_bindings.get_mut(ns) {
                        in_ns.remove(name);
                        if in_ns.is_empty() {
                            self.role_bindings.remove(ns);
                        }
                    }
                }
            },
        }
    }
}

/// The RBAC objects, shared by every request's authorization.
#[derive(Debug, Default)]
pub struct PolicyCache {
    snapshot: RwLock<Snapshot>,
}

impl PolicyCache {
    /// Reads the current objects.
    pub fn read<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        let guard = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Snapshot> {
        self.snapshot.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Lists the stored RBAC objects (replacing what was held) and returns the revision.
    async fn load(&self, backend: &Arc<dyn Backend>) -> store::Result<Revision> {
        let mut fresh = Snapshot::default();
        let mut at = None;
        for prefix in PREFIXES {
            let mut request = RangeRequest::prefix(prefix);
            request.revision = at;
            let resp = backend.range(request).await?;
            for kv in &resp.kvs {
                fresh.apply(&kv.key, Some(&kv.value));
            }
            at = Some(resp.revision);
        }
        *self.write() = fresh;
        Ok(at.unwrap_or(Revision::ZERO))
    }

    /// Loads the stored objects, then follows the store's changes until `shutdown` (relisting
    /// when the watch is cut off). Returns once the first list is in.
    pub async fn start(
        self: &Arc<Self>,
        backend: Arc<dyn Backend>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> store::Result<()> {
        let revision = self.load(&backend).await?;
        for prefix in PREFIXES {
            let follower = CacheFollower {
                cache: self.clone(),
                backend: backend.clone(),
            };
            tasks.spawn(crate::prefix_follower::follow(
                backend.clone(),
                prefix,
                revision,
                shutdown.clone(),
                "RBAC",
                follower,
            ));
        }
        Ok(())
    }
}

/// What follows the stored RBAC objects for the cache.
struct CacheFollower {
    cache: Arc<PolicyCache>,
    backend: Arc<dyn Backend>,
}

impl crate::prefix_follower::Follower for CacheFollower {
    fn relist(&self) -> futures::future::BoxFuture<'_, Result<Revision, String>> {
        Box::pin(async move {
            self.cache
                .load(&self.backend)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn apply(&self, events: Vec<store::Event>) {
        let mut snapshot = self.cache.write();
        for event in events {
            let value = match event.kind {
                EventKind::Put => Some(&event.kv.value[..]),
                EventKind::Delete => None,
            };
            snapshot.apply(&event.kv.key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_objects_and_deletions_update_the_snapshot() {
        let mut s = Snapshot::default();
        let role = json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
        let bytes = |v: &serde_json::Value| serde_json::to_vec(v).unwrap();
        s.apply(b"/registry/roles/dev/r", Some(&bytes(&role)));
        s.apply(b"/registry/rolebindings/dev/b", Some(&bytes(&binding)));
        s.apply(b"/registry/clusterroles/c", Some(&bytes(&role)));
        s.apply(b"/registry/clusterrolebindings/cb", Some(&bytes(&binding)));
        s.apply(b"/registry/pods/dev/p", Some(b"{}"));
        assert_eq!(s.roles[&("dev".into(), "r".into())].len(), 1);
        assert_eq!(s.role_bindings["dev"]["b"].subjects[0].name, "alice");
        assert!(s.cluster_roles.contains_key("c"));
        assert_eq!(s.cluster_role_bindings["cb"].role_ref.name, "r");
        s.apply(b"/registry/rolebindings/dev/b", None);
        s.apply(b"/registry/roles/dev/r", None);
        assert!(s.role_bindings.is_empty());
        assert!(s.roles.is_empty());
        // A value that does not parse removes what was there rather than keeping stale rules.
        s.apply(b"/registry/clusterroles/c", Some(b"not json"));
        assert!(!s.cluster_roles.contains_key("c"));
    }
}
