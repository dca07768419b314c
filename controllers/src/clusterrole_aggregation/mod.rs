//! The ClusterRole aggregation controller's decision: the rules an aggregated ClusterRole
//! gathers from the ClusterRoles its selectors pick. Mirrors
//! `pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go`
//! (`ClusterRoleAggregationController`, `syncClusterRole`), run by kube-controller-manager as
//! `clusterrole-aggregation`.
//!
//! ```text
//!   ClusterRole informer ─ add/update/delete of any ClusterRole
//!     ─▶ queue "ClusterRoleAggregator": every ClusterRole with an aggregationRule
//!   sync(name): gone, or no aggregationRule ─▶ nothing
//!     for each clusterRoleSelector, the ClusterRoles it matches by name (itself skipped):
//!       each of their rules not already gathered, in that order
//!     same as .rules ─▶ nothing; else server-side apply of .rules
//!       (field manager clusterrole-aggregation-controller, force)
//! ```
//!
//! The decision is [`aggregate`], a plain function of the role and the cached ClusterRoles,
//! and [`apply_body`] what is sent; the async shell is [`controller`]. Like Kubernetes, the
//! controller only writes rules: nothing authorizes requests with them yet in miniplane.

pub mod controller;

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use crate::error::Result;
use crate::selector::from_label_selector;

/// The field manager of the controller's applies (`applyClusterRoles`).
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// What a sync of one ClusterRole decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregation {
    /// The role has no `aggregationRule`: the controller leaves it alone.
    NotAggregated,
    /// `.rules` already hold the gathered rules.
    UpToDate,
    /// `.rules` must become these rules.
    Update(Vec<PolicyRule>),
}

/// `syncClusterRole`'s decision for `role` among `cluster_roles` (every cached ClusterRole,
/// `role` included or not; their order does not matter): for each of its
/// `clusterRoleSelectors` in turn, the ClusterRoles the selector matches sorted by name, but
/// not `role` itself, and each of their rules that is not among the rules gathered so far.
/// Rules compare as `equality.Semantic.DeepEqual` compares them: a missing list equals an
/// empty one, order within a list counts. A selector that does not convert is an error (the
/// key is retried with back-off), as in Kubernetes.
pub fn aggregate(role: &ClusterRole, cluster_roles: &[Arc<ClusterRole>]) -> Result<Aggregation> {
    let Some(aggregation) = &role.aggregation_rule else {
        return Ok(Aggregation::NotAggregated);
    };
    let mut by_name: Vec<&ClusterRole> = cluster_roles.iter().map(AsRef::as_ref).collect();
    by_name.sort_by_cached_key(|r| r.name_any());
    let own_name = role.name_any();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in aggregation.cluster_role_selectors.iter().flatten() {
        let selector = from_label_selector(Some(selector))?;
        for other in by_name.iter().filter(|r| selector.matches(r.labels())) {
            if other.name_any() == own_name {
                continue;
            }
            for rule in other.rules.iter().flatten() {
                if !rules.iter().any(|r| same_rule(r, rule)) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    let current = role.rules.as_deref().unwrap_or_default();
    let unchanged =
        rules.len() == current.len() && rules.iter().zip(current).all(|(a, b)| same_rule(a, b));
    Ok(if unchanged {
        Aggregation::UpToDate
    } else {
        Aggregation::Update(rules)
    })
}

/// `equality.Semantic.DeepEqual` of two rules: a missing list is an empty one.
pub fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    let list = |l: &Option<Vec<String>>| l.as_deref().unwrap_or_default().to_vec();
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

/// The body of the server-side apply that sets `name`'s rules, as client-go's
/// `rbacv1ac.ClusterRole(name).WithRules(...)` encodes it: every list of a rule and the rules
/// themselves are `omitempty`, so no rules at all is an apply without `rules` (the
/// controller then owns none).
pub fn apply_body(name: &str, rules: &[PolicyRule]) -> Value {
    let mut body = json!({
        "kind": "ClusterRole",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": name},
    });
    let rules: Vec<Value> = rules
        .iter()
        .map(|rule| {
            let mut out = Map::new();
            let lists = [
                ("resources", rule.resources.as_deref()),
                ("resourceNames", rule.resource_names.as_deref()),
                ("apiGroups", rule.api_groups.as_deref()),
                ("nonResourceURLs", rule.non_resource_urls.as_deref()),
                ("verbs", Some(rule.verbs.as_slice())),
            ];
            for (field, list) in lists {
                if let Some(list) = list.filter(|l| !l.is_empty()) {
                    out.insert(field.to_owned(), json!(list));
                }
            }
            Value::Object(out)
        })
        .collect();
    if !rules.is_empty() {
        body["rules"] = Value::Array(rules);
    }
    body
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use kube::api::ObjectMeta;

    use super::*;

    fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(resources.iter().map(|r| r.to_string()).collect()),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn role(name: &str, label: &[(&str, &str)], rules: Vec<PolicyRule>) -> Arc<ClusterRole> {
        Arc::new(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels(label)),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        })
    }

    fn aggregated(
        name: &str,
        selectors: Vec<LabelSelector>,
        rules: Vec<PolicyRule>,
    ) -> ClusterRole {
        ClusterRole {
            aggregation_rule: Some(AggregationRule {
                cluster_role_selectors: Some(selectors),
            }),
            ..(*role(name, &[], rules)).clone()
        }
    }

    fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(pairs)),
            match_expressions: None,
        }
    }

    #[test]
    fn a_role_without_aggregation_rule_is_left_alone() {
        let plain = role("view", &[], vec![rule(&["pods"], &["get"])]);
        assert_eq!(
            aggregate(&plain, std::slice::from_ref(&plain)).unwrap(),
            Aggregation::NotAggregated
        );
    }

    #[test]
    fn rules_are_gathered_by_selector_then_name_without_repeats() {
        let pods = rule(&["pods"], &["get"]);
        let services = rule(&["services"], &["get", "list"]);
        let secrets = rule(&["secrets"], &["get"]);
        let roles = vec![
            // Listed out of order: the decision sorts by name.
            role(
                "z-extra",
                &[("agg", "a")],
                vec![services.clone(), pods.clone()],
            ),
            role("a-base", &[("agg", "a")], vec![pods.clone()]),
            role(
                "m-secrets",
                &[("more", "yes")],
                vec![secrets.clone(), pods.clone()],
            ),
            role(
                "unrelated",
                &[("agg", "b")],
                vec![rule(&["nodes"], &["list"])],
            ),
        ];
        let monitoring = aggregated(
            "monitoring",
            vec![
                match_labels(&[("agg", "a")]),
                LabelSelector {
                    match_labels: None,
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "more".into(),
                        operator: "Exists".into(),
                        values: None,
                    }]),
                },
            ],
            Vec::new(),
        );
        assert_eq!(
            aggregate(&monitoring, &roles).unwrap(),
            Aggregation::Update(vec![pods.clone(), services.clone(), secrets.clone()])
        );
        // Once written, nothing more to do.
        let done = ClusterRole {
            rules: Some(vec![pods.clone(), services.clone(), secrets.clone()]),
            ..monitoring.clone()
        };
        assert_eq!(aggregate(&done, &roles).unwrap(), Aggregation::UpToDate);
        // Rules in another order are rewritten in Kubernetes' order.
        let reordered = ClusterRole {
            rules: Some(vec![services.clone(), pods.clone(), secrets]),
            ..monitoring
        };
        assert!(matches!(
            aggregate(&reordered, &roles).unwrap(),
            Aggregation::Update(_)
        ));
    }

    #[test]
    fn the_role_never_aggregates_itself_and_empty_equals_missing() {
        // An aggregated role carrying the label it selects.
        let mut own = aggregated("self", vec![match_labels(&[("agg", "a")])], Vec::new());
        own.metadata.labels = Some(labels(&[("agg", "a")]));
        own.rules = None;
        let own = Arc::new(own);
        assert_eq!(
            aggregate(&own, std::slice::from_ref(&own)).unwrap(),
            Aggregation::UpToDate,
            "no rules gathered, and none (nil) is the same as none ([])"
        );
        // Rules that were aggregated before go when their role goes.
        let stale = ClusterRole {
            rules: Some(vec![rule(&["pods"], &["get"])]),
            ..(*own).clone()
        };
        assert_eq!(
            aggregate(&stale, &[]).unwrap(),
            Aggregation::Update(Vec::new())
        );
    }

    #[test]
    fn rules_compare_semantically() {
        let missing = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz".into()]),
            ..Default::default()
        };
        let empty = PolicyRule {
            api_groups: Some(Vec::new()),
            resources: Some(Vec::new()),
            resource_names: Some(Vec::new()),
            ..missing.clone()
        };
        assert!(same_rule(&missing, &empty));
        let other_order = PolicyRule {
            verbs: vec!["list".into(), "get".into()],
            ..rule(&["pods"], &[])
        };
        assert!(!same_rule(&other_order, &rule(&["pods"], &["get", "list"])));
        // The same rule from two roles is gathered once.
        let roles = vec![
            role("a", &[("agg", "a")], vec![missing.clone()]),
            role("b", &[("agg", "a")], vec![empty]),
        ];
        let agg = aggregated("agg", vec![match_labels(&[("agg", "a")])], Vec::new());
        assert_eq!(
            aggregate(&agg, &roles).unwrap(),
            Aggregation::Update(vec![missing])
        );
    }

    #[test]
    fn an_unconvertible_selector_is_an_error() {
        let bad = aggregated(
            "bad",
            vec![LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "Has".into(),
                    values: None,
                }]),
            }],
            Vec::new(),
        );
        assert!(aggregate(&bad, &[]).is_err());
    }

    #[test]
    fn the_apply_body_is_client_gos_apply_configuration() {
        let rules = vec![
            PolicyRule {
                resource_names: Some(Vec::new()),
                ..rule(&["pods"], &["get"])
            },
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/metrics".into()]),
                ..Default::default()
            },
        ];
        assert_eq!(
            apply_body("monitoring", &rules),
            json!({
                "kind": "ClusterRole",
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": {"name": "monitoring"},
                "rules": [
                    {"resources": ["pods"], "apiGroups": [""], "verbs": ["get"]},
                    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
                ]
            })
        );
        assert_eq!(
            apply_body("empty", &[]),
            json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
                   "metadata": {"name": "empty"}})
        );
    }
}
