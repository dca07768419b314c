//! Tests of the RBAC kinds' rules: validation messages as Kubernetes words them, defaults,
//! update rules and table rows.

use super::*;
use crate::strategy::typed::Typed;
use crate::strategy::{Strategy, messages};
use serde_json::json;

/// Defaults then validates `obj` as a create does.
fn create_errors<S: Strategy>(s: &S, obj: &Value) -> Vec<String> {
    let mut obj = obj.clone();
    s.default(&mut obj).unwrap();
    messages(&s.validate_create(&obj))
}

/// Defaults `new` then validates it against `old` as an update does.
fn update_errors<S: Strategy>(s: &S, new: &Value, old: &Value) -> Vec<String> {
    let mut new = new.clone();
    let (errs, _) = s.admit_update(&mut new, old, true).unwrap();
    messages(&errs)
}

fn role(rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": "pod-reader", "namespace": "default"}, "rules": rules})
}

fn cluster_role(extra: Value) -> Value {
    let mut obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": "monitoring"}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        obj[k] = v.clone();
    }
    obj
}

fn role_binding(role_ref: Value, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": "read-pods", "namespace": "default"},
           "roleRef": role_ref, "subjects": subjects})
}

fn cluster_role_binding(role_ref: Value, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "read-all"}, "roleRef": role_ref, "subjects": subjects})
}

#[test]
fn valid_roles_pass() {
    let s = Typed(RoleRules);
    let ok = role(json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"], "verbs": ["*"]}
    ]));
    assert_eq!(create_errors(&s, &ok), Vec::<String>::new());
    assert_eq!(create_errors(&s, &role(json!([]))), Vec::<String>::new());
    let c = Typed(ClusterRoleRules);
    let ok = cluster_role(json!({"rules": [
        {"nonResourceURLs": ["/healthz", "/metrics"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
    ]}));
    assert_eq!(create_errors(&c, &ok), Vec::<String>::new());
    let aggregated = cluster_role(json!({"aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    ]}}));
    assert_eq!(create_errors(&c, &aggregated), Vec::<String>::new());
}

#[test]
fn policy_rules_are_worded_as_kubernetes() {
    let s = Typed(RoleRules);
    assert_eq!(
        create_errors(
            &s,
            &role(json!([{"apiGroups": [""], "resources": ["pods"]}]))
        ),
        ["rules[0].verbs: Required value: verbs must contain at least one value"]
    );
    assert_eq!(
        create_errors(&s, &role(json!([{"verbs": ["get"]}]))),
        [
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[0].resources: Required value: resource rules must supply at least one resource",
        ]
    );
    assert_eq!(
        create_errors(
            &s,
            &role(json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]))
        ),
        [
            "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"
        ]
    );
    let c = Typed(ClusterRoleRules);
    assert_eq!(
        create_errors(
            &c,
            &cluster_role(json!({"rules": [
                {"verbs": ["get"], "apiGroups": [], "resources": []},
                {"nonResourceURLs": ["/a", "/b"], "resources": ["pods"], "verbs": ["get"]}
            ]}))
        ),
        [
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[0].resources: Required value: resource rules must supply at least one resource",
            "rules[1].nonResourceURLs: Invalid value: []string{\"/a\", \"/b\"}: rules cannot apply to both regular resources and non-resource URLs",
        ]
    );
}

#[test]
fn aggregation_rules_need_valid_selectors() {
    let c = Typed(ClusterRoleRules);
    assert_eq!(
        create_errors(&c, &cluster_role(json!({"aggregationRule": {}}))),
        [
            "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
        ]
    );
    let bad = cluster_role(json!({"aggregationRule": {"clusterRoleSelectors": [
        {"matchExpressions": [{"key": "tier", "operator": "Has"}]},
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["no good"]}]}
    ]}}));
    assert_eq!(
        create_errors(&c, &bad),
        [
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator",
            "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            "aggregationRule.clusterRoleSelectors[1].matchExpressions[0].values[0]: Invalid value: \"no good\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "aggregationRule.clusterRoleSelectors[1]: Invalid value: \"null\": invalid label selector.",
        ]
    );
}

#[test]
fn names_are_path_segments() {
    let s = Typed(ClusterRoleRules);
    let mut colon = cluster_role(json!({}));
    colon["metadata"]["name"] = json!("system:aggregate-to-view");
    assert_eq!(create_errors(&s, &colon), Vec::<String>::new());
    let mut slash = cluster_role(json!({}));
    slash["metadata"]["name"] = json!("a/b");
    assert_eq!(
        create_errors(&s, &slash),
        ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
    );
}

#[test]
fn bindings_default_their_api_groups() {
    let s = Typed(RoleBindingRules);
    let mut obj = role_binding(
        json!({"kind": "ClusterRole", "name": "view"}),
        json!([{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs", "apiGroup": ""},
               {"kind": "ServiceAccount", "name": "robot", "namespace": "default", "apiGroup": ""}]),
    );
    s.default(&mut obj).unwrap();
    assert_eq!(
        obj["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
    );
    assert_eq!(
        obj["subjects"],
        json!([
            {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}
        ])
    );
    assert_eq!(messages(&s.validate_create(&obj)), Vec::<String>::new());
}

#[test]
fn role_refs_are_worded_as_kubernetes() {
    let s = Typed(RoleBindingRules);
    assert_eq!(
        create_errors(
            &s,
            &role_binding(
                json!({"apiGroup": "example.com", "kind": "Secret", "name": ""}),
                json!([])
            )
        ),
        [
            "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
            "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", \"ClusterRole\"",
            "roleRef.name: Required value",
        ]
    );
    assert_eq!(
        create_errors(
            &s,
            &role_binding(json!({"kind": "Role", "name": ".."}), json!([]))
        ),
        ["roleRef.name: Invalid value: \"..\": may not be '..'"]
    );
    let c = Typed(ClusterRoleBindingRules);
    assert_eq!(
        create_errors(
            &c,
            &cluster_role_binding(json!({"kind": "Role", "name": "x"}), json!([]))
        ),
        ["roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""]
    );
}

#[test]
fn subjects_are_worded_as_kubernetes() {
    let s = Typed(RoleBindingRules);
    let role_ref = json!({"kind": "Role", "name": "pod-reader"});
    assert_eq!(
        create_errors(
            &s,
            &role_binding(
                role_ref.clone(),
                json!([
                    {"kind": "ServiceAccount", "name": "Robot_1", "apiGroup": "v1"},
                    {"kind": "User", "name": "", "apiGroup": "example.com"},
                    {"kind": "Robot", "name": "r2"},
                    {"kind": "ServiceAccount", "name": "robot"}
                ])
            )
        ),
        [
            "subjects[0].name: Invalid value: \"Robot_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "subjects[0].apiGroup: Unsupported value: \"v1\": supported values: \"\"",
            "subjects[1].name: Required value",
            "subjects[1].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
            "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
        ]
    );
    // A cluster binding must say which namespace a ServiceAccount is in.
    let c = Typed(ClusterRoleBindingRules);
    assert_eq!(
        create_errors(
            &c,
            &cluster_role_binding(
                json!({"kind": "ClusterRole", "name": "view"}),
                json!([{"kind": "ServiceAccount", "name": "robot"}])
            )
        ),
        ["subjects[0].namespace: Required value"]
    );
}

#[test]
fn role_ref_cannot_change_and_updates_validate_twice() {
    let s = Typed(ClusterRoleBindingRules);
    let mut old = cluster_role_binding(
        json!({"kind": "ClusterRole", "name": "view"}),
        json!([{"kind": "Group", "name": "devs"}]),
    );
    s.default(&mut old).unwrap();
    let mut same = old.clone();
    same["subjects"] = json!([{"kind": "User", "name": "bob"}]);
    assert_eq!(update_errors(&s, &same, &old), Vec::<String>::new());
    let mut changed = old.clone();
    changed["roleRef"]["name"] = json!("edit");
    assert_eq!(
        update_errors(&s, &changed, &old),
        [
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        ]
    );
    changed["subjects"] = json!([{"kind": "Robot", "name": "r"}]);
    let unsupported = "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"";
    assert_eq!(
        update_errors(&s, &changed, &old),
        [
            unsupported,
            unsupported,
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef",
        ]
    );
    let r = Typed(RoleBindingRules);
    let mut old = role_binding(json!({"kind": "Role", "name": "a"}), json!([]));
    r.default(&mut old).unwrap();
    let mut new = old.clone();
    new["roleRef"]["kind"] = json!("ClusterRole");
    assert_eq!(
        update_errors(&r, &new, &old),
        [
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"a\"}: cannot change roleRef"
        ]
    );
}

#[test]
fn an_invalid_label_value_already_stored_may_stay() {
    let c = Typed(ClusterRoleRules);
    let bad_value = cluster_role(json!({"aggregationRule": {"clusterRoleSelectors": [
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["no good"]}]}
    ]}}));
    // The old object had the invalid value: it is not reported again, but the selector
    // still does not build.
    assert_eq!(
        update_errors(&c, &bad_value, &bad_value),
        [
            "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
        ]
    );
}

#[test]
fn tables_as_kubernetes_prints_them() {
    let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
    let c = Typed(ClusterRoleRules);
    let columns: Vec<_> = c.table_columns().into_iter().map(|c| c.name).collect();
    assert_eq!(columns, ["Created At"]);
    assert_eq!(c.table_columns()[0].type_, "date");
    let mut obj = cluster_role(json!({}));
    obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert_eq!(c.table_row(&obj, now), [json!("2024-01-01T00:00:00Z")]);
    let r = Typed(RoleRules);
    let mut obj = role(json!([]));
    obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert_eq!(r.table_row(&obj, now), [json!("2024-01-01T00:00:00Z")]);

    let b = Typed(RoleBindingRules);
    let names: Vec<_> = b
        .table_columns()
        .into_iter()
        .map(|c| (c.name, c.priority))
        .collect();
    assert_eq!(
        names,
        [
            ("Role".into(), 0),
            ("Age".into(), 0),
            ("Users".into(), 1),
            ("Groups".into(), 1),
            ("ServiceAccounts".into(), 1)
        ]
    );
    let mut obj = role_binding(
        json!({"kind": "ClusterRole", "name": "view"}),
        json!([{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
               {"kind": "Group", "name": "devs"},
               {"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}]),
    );
    obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert_eq!(
        b.table_row(&obj, now),
        [
            json!("ClusterRole/view"),
            json!("5m"),
            json!("alice, bob"),
            json!("devs"),
            json!("ci/robot")
        ]
    );
    let cb = Typed(ClusterRoleBindingRules);
    assert_eq!(
        cb.table_columns()[2].description,
        "Users in the clusterRoleBinding"
    );
    let mut obj = cluster_role_binding(json!({"kind": "ClusterRole", "name": "edit"}), json!([]));
    obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert_eq!(
        cb.table_row(&obj, now),
        [
            json!("ClusterRole/edit"),
            json!("5m"),
            json!(""),
            json!(""),
            json!("")
        ]
    );
}
