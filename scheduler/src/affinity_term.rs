//! A pod's inter-pod affinity terms, parsed once when the pod enters the scheduler
//! (`pkg/scheduler/framework/types.go`: `AffinityTerm`, `WeightedAffinityTerm`,
//! `newAffinityTerm`, `getNamespacesFromPodAffinityTerm`, `AffinityTerm.Matches`).
//!
//! ```text
//! podAntiAffinity.required: [{topologyKey: kubernetes.io/hostname,
//!                             labelSelector: {app: web}}]          on pod default/web-1
//!   → AffinityTerm { namespaces: {default}, selector: app=web,
//!                    namespace_selector: nothing, topology_key: kubernetes.io/hostname }
//!   matches pod P  ⇔  (P's namespace ∈ namespaces  or  namespace_selector matches P's
//!                      namespace's labels)  and  selector matches P's labels
//! ```
//!
//! A term without `namespaces` and without `namespaceSelector` means the pod's own namespace;
//! an empty `namespaceSelector` (`{}`) means every namespace.
//!
//! A `namespaceSelector` is matched against the labels of the namespace of the pod being
//! checked, as the scheduler's namespace informer last saw them ([`Namespaces`]; the API
//! server labels every namespace `kubernetes.io/metadata.name: <name>`); a namespace not seen
//! has no labels. That is what Kubernetes gets by merging the namespaces a selector picks into
//! the incoming pod's terms (`mergeAffinityTermNamespacesIfNotEmpty`) and by passing the
//! incoming pod's namespace labels to the existing pods' terms. Unlike Kubernetes, which
//! rejects a pod whose term has an invalid label selector ("parsing pod"), such a term
//! matches no pod here (the API server's validation refuses those selectors anyway).

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::Selector;
use k8s_openapi::api::core::v1::{Affinity, Pod, PodAffinityTerm, WeightedPodAffinityTerm};

/// The label the API server sets on every namespace (`v1.LabelMetadataName`).
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";

/// Namespace labels by namespace name (what Kubernetes' plugin reads from its `nsLister`).
pub type Namespaces = BTreeMap<String, BTreeMap<String, String>>;

/// One parsed `PodAffinityTerm` (`framework.AffinityTerm`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    /// Namespaces named by the term (the pod's own when it names none and has no selector).
    pub namespaces: BTreeSet<String>,
    /// Which pods the term is about (`labelSelector`; missing: none).
    pub selector: Selector,
    /// The node label whose value defines a topology domain.
    pub topology_key: String,
    /// Which namespaces the term is about, by their labels (`namespaceSelector`; missing: none,
    /// empty: every namespace).
    pub namespace_selector: Selector,
}

/// A preferred term and its weight (`framework.WeightedAffinityTerm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// 1–100.
    pub weight: i32,
}

impl AffinityTerm {
    /// `newAffinityTerm`: parses `term` of a pod in namespace `namespace`.
    pub fn new(namespace: &str, term: &PodAffinityTerm) -> Self {
        let selector = Selector::from_label_selector(term.label_selector.as_ref())
            .unwrap_or_else(|_| Selector::nothing());
        let namespace_selector = Selector::from_label_selector(term.namespace_selector.as_ref())
            .unwrap_or_else(|_| Selector::nothing());
        let named = term.namespaces.as_deref().unwrap_or_default();
        let namespaces = if named.is_empty() && term.namespace_selector.is_none() {
            BTreeSet::from([namespace.to_owned()])
        } else {
            named.iter().cloned().collect()
        };
        AffinityTerm {
            namespaces,
            selector,
            topology_key: term.topology_key.clone(),
            namespace_selector,
        }
    }

    /// `AffinityTerm.Matches`: whether `pod` is one of the pods this term is about, its
    /// namespace's labels taken from `namespaces`.
    pub fn matches(&self, pod: &Pod, namespaces: &Namespaces) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.matches_labels(namespace, pod.metadata.labels.as_ref(), namespaces)
    }

    /// [`AffinityTerm::matches`] for a pod in `namespace` with `labels` (what the scheduler's
    /// pod groups keep of their pods, `crate::pod_groups`).
    pub fn matches_labels(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        namespaces: &Namespaces,
    ) -> bool {
        (self.namespaces.contains(namespace)
            || self.namespace_selector.matches(&namespaces.get(namespace)))
            && self.selector.matches(&labels)
    }
}

/// The four lists of a pod's inter-pod affinity (the `PodInfo` fields of the same names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinityTerms {
    /// `podAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_affinity: Vec<AffinityTerm>,
    /// `podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_anti_affinity: Vec<AffinityTerm>,
    /// `podAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    /// `podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
}

impl AffinityTerms {
    /// The terms of `pod`; `None` when it has no `podAffinity` and no `podAntiAffinity`
    /// (Kubernetes' `PodsWithAffinity` holds the pods for which this is `Some`).
    pub fn of(pod: &Pod) -> Option<Self> {
        let affinity: &Affinity = pod.spec.as_ref()?.affinity.as_ref()?;
        if affinity.pod_affinity.is_none() && affinity.pod_anti_affinity.is_none() {
            return None;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(namespace, t))
                .collect()
        };
        let preferred =
            |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<WeightedAffinityTerm> {
                terms
                    .into_iter()
                    .flatten()
                    .map(|t| WeightedAffinityTerm {
                        term: AffinityTerm::new(namespace, &t.pod_affinity_term),
                        weight: t.weight,
                    })
                    .collect()
            };
        let a = affinity.pod_affinity.as_ref();
        let anti = affinity.pod_anti_affinity.as_ref();
        Some(AffinityTerms {
            required_affinity: required(a.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti_affinity: required(anti.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_affinity: preferred(a.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti_affinity: preferred(anti.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn pod_in(namespace: &str, labels: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some(namespace.into());
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        );
        p
    }

    fn selector(labels: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            match_expressions: None,
        }
    }

    #[test]
    fn namespaces_default_to_the_pods_own_and_a_selector_widens_them() {
        let namespaces: Namespaces = ["team-a", "team-b", "team-c"]
            .map(|n| {
                let tier = if n == "team-c" { "prod" } else { "dev" };
                let labels = [(LABEL_METADATA_NAME, n), ("tier", tier)]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()));
                (n.to_owned(), labels.into())
            })
            .into();
        let own = AffinityTerm::new(
            "team-a",
            &PodAffinityTerm {
                label_selector: Some(selector(&[("app", "web")])),
                topology_key: "zone".into(),
                ..Default::default()
            },
        );
        assert!(own.matches(&pod_in("team-a", &[("app", "web")]), &namespaces));
        assert!(!own.matches(&pod_in("team-b", &[("app", "web")]), &namespaces));
        assert!(!own.matches(&pod_in("team-a", &[("app", "db")]), &namespaces));
        let every = AffinityTerm::new(
            "team-a",
            &PodAffinityTerm {
                label_selector: Some(selector(&[("app", "web")])),
                namespace_selector: Some(LabelSelector::default()),
                topology_key: "zone".into(),
                ..Default::default()
            },
        );
        assert!(every.matches(&pod_in("team-b", &[("app", "web")]), &namespaces));
        let by_tier = AffinityTerm::new(
            "team-a",
            &PodAffinityTerm {
                label_selector: Some(selector(&[("app", "web")])),
                namespace_selector: Some(selector(&[("tier", "prod")])),
                namespaces: Some(vec!["team-b".into()]),
                topology_key: "zone".into(),
                ..Default::default()
            },
        );
        assert!(by_tier.matches(&pod_in("team-b", &[("app", "web")]), &namespaces));
        assert!(by_tier.matches(&pod_in("team-c", &[("app", "web")]), &namespaces));
        // A namespace the informer has not seen has no labels.
        assert!(!by_tier.matches(&pod_in("team-d", &[("app", "web")]), &namespaces));
        let named = AffinityTerm::new(
            "team-a",
            &PodAffinityTerm {
                label_selector: Some(selector(&[("app", "web")])),
                namespace_selector: Some(selector(&[(LABEL_METADATA_NAME, "team-b")])),
                topology_key: "zone".into(),
                ..Default::default()
            },
        );
        assert!(named.matches(&pod_in("team-b", &[("app", "web")]), &namespaces));
        assert!(!named.matches(&pod_in("team-a", &[("app", "web")]), &namespaces));
        assert!(!by_tier.matches(&pod_in("team-a", &[("app", "web")]), &namespaces));
        // No label selector: no pod.
        let none = AffinityTerm::new(
            "team-a",
            &PodAffinityTerm {
                topology_key: "zone".into(),
                ..Default::default()
            },
        );
        assert!(!none.matches(&pod_in("team-a", &[("app", "web")]), &namespaces));
    }
}
