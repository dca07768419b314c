//! The ReplicaSets the Deployment controller wrote that its informer has not delivered yet.
//!
//! The Deployment controller sizes a new ReplicaSet, and decides how far it may scale one up,
//! from the sum of every ReplicaSet's `spec.replicas` in its cache (`NewRSNewReplicas`:
//! `replicas + maxSurge - Σ spec.replicas`). kube-controller-manager reads that sum from its
//! informer alone, with no expectations for its own ReplicaSet writes (the ReplicaSet
//! controller has them for pods; `pkg/controller/deployment` has none). When a sync follows
//! the previous one's write before the informer has delivered it, as it does when a new
//! template arrives in the same instant or when the informer reconnects after the API server
//! restarted, the sum misses that write and the Deployment overshoots maxSurge:
//!
//! ```text
//!   sync 1: Σ = 6 of 7 → scale rs-b 1 → 2           (write OK, informer still says 1)
//!   new template
//!   sync 2: cache Σ = 6 → create rs-c with 1 pod     (Σ is really 8 > replicas + maxSurge)
//! ```
//!
//! Unlike Kubernetes, the controller lays the ReplicaSets it wrote over its cache until the
//! informer catches up: a write replaces the cached copy while its resourceVersion is newer,
//! a created ReplicaSet counts before the informer has it, and an entry goes once the cache
//! holds that version or a newer one, the informer reports the ReplicaSet deleted, a
//! different object (another UID) took the name, or [`MAX_AGE`] passed. Comparing
//! resourceVersions as numbers relies on miniplane's (they are the store's revisions);
//! Kubernetes calls them opaque.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use apimachinery::ObjectKey;
use k8s_openapi::api::apps::v1::ReplicaSet;

/// How long a write is laid over the cache at most (an informer that has not delivered it by
/// then relists, and its list holds it).
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// ReplicaSet writes not yet seen in the informer's cache (see the module docs).
#[derive(Debug, Default)]
pub struct RecentWrites {
    entries: Mutex<HashMap<ObjectKey, (ReplicaSet, Instant)>>,
}

fn resource_version(rs: &ReplicaSet) -> Option<u64> {
    rs.metadata.resource_version.as_deref()?.parse().ok()
}

impl RecentWrites {
    /// Records what the API server answered to a create or update of a ReplicaSet at `now`.
    pub fn record(&self, rs: ReplicaSet, now: Instant) {
        let key = ObjectKey::new(
            rs.metadata.namespace.as_deref(),
            rs.metadata.name.clone().unwrap_or_default(),
        );
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let newer = entries
            .get(&key)
            .is_none_or(|(old, _)| resource_version(&rs) >= resource_version(old));
        if newer {
            entries.insert(key, (rs, now));
        }
    }

    /// The informer saw the ReplicaSet `key` deleted: nothing of it is laid over any more.
    pub fn forget(&self, key: &ObjectKey) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Lays the recorded writes of `namespace` over `cached` (the informer's ReplicaSets of
    /// that namespace), dropping those the cache has caught up with.
    pub fn overlay(&self, namespace: Option<&str>, cached: &mut Vec<ReplicaSet>, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|key, (written, at)| {
            if key.namespace.as_deref() != namespace.filter(|ns| !ns.is_empty()) {
                return true;
            }
            if now.duration_since(*at) > MAX_AGE {
                return false;
            }
            match cached
                .iter_mut()
                .find(|c| c.metadata.name == written.metadata.name)
            {
                Some(c) if c.metadata.uid != written.metadata.uid => false,
                Some(c) if resource_version(c) >= resource_version(written) => false,
                Some(c) => {
                    *c = written.clone();
                    true
                }
                None => {
                    cached.push(written.clone());
                    true
                }
            }
        });
    }

    /// How many writes are laid over the cache (for tests and logs).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no write is laid over the cache.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn rs(name: &str, uid: &str, rv: u64, replicas: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                resource_version: Some(rv.to_string()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn replicas(list: &[ReplicaSet]) -> Vec<(String, i32)> {
        let mut v: Vec<(String, i32)> = list
            .iter()
            .map(|r| {
                (
                    r.metadata.name.clone().unwrap_or_default(),
                    r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// The module's example: the scale-up of `b` and the creation of `c` count before the
    /// informer delivers them, and go once it has.
    #[test]
    fn writes_count_until_the_cache_has_them() {
        let t0 = Instant::now();
        let writes = RecentWrites::default();
        writes.record(rs("b", "uid-b", 12, 2), t0);
        writes.record(rs("c", "uid-c", 13, 1), t0);

        let mut cached = vec![rs("a", "uid-a", 5, 5), rs("b", "uid-b", 10, 1)];
        writes.overlay(Some("default"), &mut cached, t0);
        assert_eq!(
            replicas(&cached),
            [("a".into(), 5), ("b".into(), 2), ("c".into(), 1)]
        );
        assert_eq!(writes.len(), 2);

        // The informer delivers both (c already scaled on by someone else): the cache wins.
        let mut cached = vec![
            rs("a", "uid-a", 5, 5),
            rs("b", "uid-b", 12, 2),
            rs("c", "uid-c", 14, 3),
        ];
        writes.overlay(Some("default"), &mut cached, t0);
        assert_eq!(
            replicas(&cached),
            [("a".into(), 5), ("b".into(), 2), ("c".into(), 3)]
        );
        assert!(writes.is_empty());
    }

    #[test]
    fn deleted_replaced_other_namespaces_and_old_writes() {
        let t0 = Instant::now();
        let writes = RecentWrites::default();
        writes.record(rs("gone", "uid-1", 20, 1), t0);
        writes.forget(&ObjectKey::new(Some("default"), "gone"));
        // A name taken by another object: the write was of the old one.
        writes.record(rs("b", "uid-old", 21, 4), t0);
        // An older answer never replaces a newer one.
        writes.record(rs("c", "uid-c", 30, 2), t0);
        writes.record(rs("c", "uid-c", 29, 9), t0);
        let mut other = rs("x", "uid-x", 31, 1);
        other.metadata.namespace = Some("other".into());
        writes.record(other, t0);

        let mut cached = vec![rs("b", "uid-new", 3, 1)];
        writes.overlay(Some("default"), &mut cached, t0);
        assert_eq!(replicas(&cached), [("b".into(), 1), ("c".into(), 2)]);
        assert_eq!(writes.len(), 2, "c, and x of the other namespace");

        let mut cached = Vec::new();
        writes.overlay(
            Some("default"),
            &mut cached,
            t0 + MAX_AGE + Duration::from_secs(1),
        );
        assert!(cached.is_empty(), "too old to lay over: {cached:?}");
        assert_eq!(writes.len(), 1, "x of the other namespace stays");
    }
}
