//! Round trips of the rbac.authorization.k8s.io/v1 kinds: what `kubectl create role`,
//! `clusterrole`, `rolebinding` and `clusterrolebinding` send.

use super::fixtures::{object_meta, object_meta_json};
use super::{round_trip, s, strings};
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

fn rule(api_groups: &[&str], resources: &[&str], verbs: &[&str]) -> rbac::PolicyRule {
    rbac::PolicyRule {
        verbs: strings(verbs),
        api_groups: strings(api_groups),
        resources: strings(resources),
        resource_names: Vec::new(),
        non_resource_ur_ls: Vec::new(),
    }
}

#[test]
fn roles_and_cluster_roles() {
    let role = rbac::Role {
        metadata: Some(object_meta("pod-reader")),
        rules: vec![rbac::PolicyRule {
            resource_names: strings(&["web"]),
            ..rule(&[""], &["pods"], &["get", "list"])
        }],
    };
    round_trip::<k8s_openapi::api::rbac::v1::Role>(
        &role,
        json!({
            "metadata": object_meta_json("pod-reader"),
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"],
                       "resourceNames": ["web"]}]
        }),
    );

    let cluster_role = rbac::ClusterRole {
        metadata: Some(object_meta("monitoring")),
        rules: vec![rbac::PolicyRule {
            non_resource_ur_ls: strings(&["/healthz", "/metrics"]),
            ..rule(&[], &[], &["get"])
        }],
        aggregation_rule: Some(rbac::AggregationRule {
            cluster_role_selectors: vec![meta::LabelSelector {
                match_labels: super::map(&[("rbac.example.com/aggregate-to-monitoring", "true")]),
                match_expressions: Vec::new(),
            }],
        }),
    };
    round_trip::<k8s_openapi::api::rbac::v1::ClusterRole>(
        &cluster_role,
        json!({
            "metadata": object_meta_json("monitoring"),
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics"]}],
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}
            ]}
        }),
    );
}

#[test]
fn role_bindings_and_cluster_role_bindings() {
    let role_ref = |kind: &str, name: &str| rbac::RoleRef {
        api_group: s("rbac.authorization.k8s.io"),
        kind: s(kind),
        name: s(name),
    };
    let binding = rbac::RoleBinding {
        metadata: Some(object_meta("read-pods")),
        subjects: vec![
            rbac::Subject {
                kind: s("User"),
                api_group: s("rbac.authorization.k8s.io"),
                name: s("alice"),
                namespace: Some(String::new()),
            },
            rbac::Subject {
                kind: s("ServiceAccount"),
                api_group: Some(String::new()),
                name: s("robot"),
                namespace: s("ci"),
            },
        ],
        role_ref: Some(role_ref("Role", "pod-reader")),
    };
    round_trip::<k8s_openapi::api::rbac::v1::RoleBinding>(
        &binding,
        json!({
            "metadata": object_meta_json("read-pods"),
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}
        }),
    );

    let cluster_binding = rbac::ClusterRoleBinding {
        metadata: Some(object_meta("view-all")),
        subjects: vec![rbac::Subject {
            kind: s("Group"),
            api_group: s("rbac.authorization.k8s.io"),
            name: s("devs"),
            namespace: None,
        }],
        role_ref: Some(role_ref("ClusterRole", "view")),
    };
    round_trip::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(
        &cluster_binding,
        json!({
            "metadata": object_meta_json("view-all"),
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
        }),
    );
}
