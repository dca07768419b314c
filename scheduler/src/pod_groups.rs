//! The scheduled pods grouped by what InterPodAffinity and PodTopologySpread match them on,
//! kept by the cache next to its nodes.
//!
//! Kubernetes' PreFilters of both plugins walk every pod of every node for each pod they
//! schedule (`getIncomingAffinityAntiAffinityCounts`, `getExistingAntiAffinityCounts`,
//! `calPreFilterState`), spread over 16 goroutines. A term or a spread selector only reads a
//! pod's namespace and labels, and the pods of one workload share both; an existing pod's
//! anti-affinity only matters through its terms, which its replicas share too. So the cache
//! keeps, as pods come and go:
//!
//! ```text
//!   by labels:   (default, {app: web, pod-template-hash: 5d4f})  node-1: 2 (2 not terminating)
//!                                                                 node-7: 1 (0 not terminating)
//!   by required anti-affinity term:
//!                {ns: default, app=web, kubernetes.io/hostname}   node-1: 2, node-7: 1
//! ```
//!
//! and a PreFilter matches each group once and adds its per-node counts to the topology pairs,
//! instead of matching every pod: the same counts as the walk (the tests compare both), at a
//! cost that grows with the groups and the nodes holding them rather than with the pods.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::affinity_term::AffinityTerm;
use crate::node_info::PodInfo;

/// A group's pods on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Every pod (InterPodAffinity counts terminating pods too).
    pub all: u32,
    /// The pods not being deleted (PodTopologySpread skips terminating pods).
    pub live: u32,
}

/// The key of a label group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LabelKey {
    namespace: String,
    labels: BTreeMap<String, String>,
}

/// Pods per node, by their namespace and labels and by their required anti-affinity terms.
#[derive(Debug, Default)]
pub struct PodGroups {
    by_labels: HashMap<LabelKey, HashMap<Arc<str>, Count>>,
    by_anti_affinity_term: HashMap<AffinityTerm, HashMap<Arc<str>, u32>>,
}

impl PodGroups {
    /// No pod.
    pub fn new() -> Self {
        Self::default()
    }

    fn label_key(pod: &PodInfo) -> LabelKey {
        LabelKey {
            namespace: pod.key.namespace.clone().unwrap_or_default(),
            labels: pod.pod.metadata.labels.clone().unwrap_or_default(),
        }
    }

    /// `pod` now counts on `node`.
    pub fn add(&mut self, node: &Arc<str>, pod: &PodInfo) {
        let live = u32::from(pod.pod.metadata.deletion_timestamp.is_none());
        let count = self
            .by_labels
            .entry(Self::label_key(pod))
            .or_default()
            .entry(node.clone())
            .or_default();
        count.all += 1;
        count.live += live;
        for term in &pod.affinity_terms().required_anti_affinity {
            *self
                .by_anti_affinity_term
                .entry(term.clone())
                .or_default()
                .entry(node.clone())
                .or_default() += 1;
        }
    }

    /// `pod` no longer counts on `node` (it was [`PodGroups::add`]ed there).
    pub fn remove(&mut self, node: &str, pod: &PodInfo) {
        let live = u32::from(pod.pod.metadata.deletion_timestamp.is_none());
        let key = Self::label_key(pod);
        if let Some(nodes) = self.by_labels.get_mut(&key) {
            if let Some(count) = nodes.get_mut(node) {
                count.all = count.all.saturating_sub(1);
                count.live = count.live.saturating_sub(live);
                if count.all == 0 {
                    nodes.remove(node);
                }
            }
            if nodes.is_empty() {
                self.by_labels.remove(&key);
            }
        }
        for term in &pod.affinity_terms().required_anti_affinity {
            if let Some(nodes) = self.by_anti_affinity_term.get_mut(term) {
                if let Some(n) = nodes.get_mut(node) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        nodes.remove(node);
                    }
                }
                if nodes.is_empty() {
                    self.by_anti_affinity_term.remove(term);
                }
            }
        }
    }

    /// Every label group: its namespace, its labels and its pods per node name.
    pub fn label_groups(
        &self,
    ) -> impl Iterator<Item = (&str, &BTreeMap<String, String>, &HashMap<Arc<str>, Count>)> {
        self.by_labels
            .iter()
            .map(|(k, nodes)| (k.namespace.as_str(), &k.labels, nodes))
    }

    /// Every required anti-affinity term of a scheduled pod, with how many pods carry it per
    /// node name.
    pub fn anti_affinity_terms(
        &self,
    ) -> impl Iterator<Item = (&AffinityTerm, &HashMap<Arc<str>, u32>)> {
        self.by_anti_affinity_term.iter()
    }

    /// How many label groups there are.
    pub fn label_group_count(&self) -> usize {
        self.by_labels.len()
    }

    /// Whether no pod counts anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_labels.is_empty() && self.by_anti_affinity_term.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, pod};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn labelled(name: &str, app: &str) -> PodInfo {
        let mut p = pod(name, "100m", "");
        p.metadata.labels = Some(BTreeMap::from([("app".to_owned(), app.to_owned())]));
        info(p)
    }

    /// A pod of app `app` in `namespace`, with a required anti-affinity (hostname) to its
    /// own app when `anti`, a required affinity (zone) to app `near` when given, and a spread
    /// constraint over zones when `spread`.
    fn workload_pod(
        name: &str,
        namespace: &str,
        app: &str,
        anti: bool,
        near: Option<&str>,
        spread: bool,
    ) -> Pod {
        use k8s_openapi::api::core::v1::{
            Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        let selector = |app: &str| LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            match_expressions: None,
        };
        let term = |app: &str, key: &str| PodAffinityTerm {
            label_selector: Some(selector(app)),
            topology_key: key.into(),
            ..Default::default()
        };
        let mut p = pod(name, "100m", "");
        p.metadata.namespace = Some(namespace.into());
        p.metadata.labels = Some(BTreeMap::from([("app".to_owned(), app.to_owned())]));
        let spec = p.spec.get_or_insert_default();
        if anti || near.is_some() {
            spec.affinity = Some(Affinity {
                pod_anti_affinity: anti.then(|| PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term(
                        app,
                        "kubernetes.io/hostname",
                    )]),
                    ..Default::default()
                }),
                pod_affinity: near.map(|near| PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term(
                        near, "zone",
                    )]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        if spread {
            spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selector(app)),
                ..Default::default()
            }]);
        }
        p
    }

    #[test]
    fn the_prefilters_count_the_same_from_groups_as_from_every_pod() {
        use crate::cache::{Cache, Snapshot};
        use crate::cycle_state::AffinityOnCluster;
        use crate::plugins::fixtures::labelled_node;
        use crate::plugins::{inter_pod_affinity, pod_topology_spread};
        let mut cache = Cache::new();
        for i in 0..12 {
            let (name, zone) = (format!("n{i}"), format!("z{}", i % 3));
            cache.add_node(Arc::new(labelled_node(
                &name,
                &[
                    ("kubernetes.io/hostname", name.as_str()),
                    ("zone", zone.as_str()),
                ],
            )));
        }
        // A pseudo-random but fixed cluster: apps in two namespaces, some with anti-affinity,
        // some near another app, some terminating, one on a node the cache does not know.
        let mut seed: u64 = 7;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let apps = ["web", "db", "cache", "queue"];
        for i in 0..120 {
            let app = apps[next(4) as usize];
            let namespace = if next(5) == 0 { "other" } else { "default" };
            let near = (next(6) == 0).then(|| apps[next(4) as usize]);
            let mut p = workload_pod(&format!("p{i}"), namespace, app, next(2) == 0, near, false);
            if next(10) == 0 {
                p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
            }
            let node = if i == 0 {
                "gone".to_owned()
            } else {
                format!("n{}", next(12))
            };
            p.spec.get_or_insert_default().node_name = Some(node);
            cache.add_pod(Arc::new(p));
        }
        // Moves, removals and a removed node keep the groups in step with the nodes.
        cache.remove_pod(&apimachinery::ObjectKey::new(Some("default"), "p5"));
        cache.remove_node("n11");
        let snapshot = cache.snapshot();
        assert!(snapshot.groups.is_some());
        let walked = Snapshot {
            groups: None,
            ..snapshot
        };
        let on = AffinityOnCluster::of(snapshot.nodes);
        let mut compared = 0;
        for (i, app) in apps.iter().enumerate() {
            for (anti, near, spread) in [
                (true, None, false),
                (false, Some(apps[(i + 1) % 4]), false),
                (true, Some(*app), true),
                (false, None, true),
                (false, None, false),
            ] {
                let incoming = info(workload_pod("new", "default", app, anti, near, spread));
                let grouped = inter_pod_affinity::pre_filter(&incoming, snapshot, on);
                assert_eq!(
                    grouped,
                    inter_pod_affinity::pre_filter(&incoming, walked, on),
                    "{app} anti {anti} near {near:?}"
                );
                compared += usize::from(grouped.is_some());
                let grouped = pod_topology_spread::pre_filter_with_groups(
                    &incoming,
                    snapshot.nodes,
                    snapshot.groups,
                );
                assert_eq!(
                    grouped,
                    pod_topology_spread::pre_filter(&incoming, snapshot.nodes),
                    "{app} spread {spread}"
                );
                compared += usize::from(grouped.is_some());
            }
        }
        assert!(
            compared > 20,
            "the cases must exercise the counts: {compared}"
        );
    }

    #[test]
    fn pods_with_the_same_labels_share_a_group_and_leave_no_trace() {
        let (n1, n2): (Arc<str>, Arc<str>) = (Arc::from("n1"), Arc::from("n2"));
        let mut groups = PodGroups::new();
        let (a, b, c) = (
            labelled("a", "web"),
            labelled("b", "web"),
            labelled("c", "db"),
        );
        let mut terminating = labelled("d", "web");
        let mut d = (*terminating.pod).clone();
        d.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        terminating.pod = Arc::new(d);
        groups.add(&n1, &a);
        groups.add(&n1, &b);
        groups.add(&n2, &c);
        groups.add(&n2, &terminating);
        assert_eq!(groups.label_group_count(), 2);
        let web: HashMap<&str, Count> = groups
            .label_groups()
            .find(|(_, labels, _)| labels.get("app").map(String::as_str) == Some("web"))
            .map(|(_, _, nodes)| nodes.iter().map(|(n, c)| (&**n, *c)).collect())
            .unwrap_or_default();
        assert_eq!(web.get("n1"), Some(&Count { all: 2, live: 2 }));
        assert_eq!(web.get("n2"), Some(&Count { all: 1, live: 0 }));
        for (node, pod) in [(&n1, &a), (&n1, &b), (&n2, &c), (&n2, &terminating)] {
            groups.remove(node, pod);
        }
        assert!(groups.is_empty());
    }
}
