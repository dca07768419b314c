use super::cache::Snapshot;
use super::*;
use axum::http::Method;
use serde_json::json;

/// A snapshot built from stored JSON, as the cache builds it.
fn snapshot(objects: &[(&str, serde_json::Value)]) -> Snapshot {
    let mut s = Snapshot::default();
    for (key, value) in objects {
        let key = format!("/registry/{key}");
        s.apply_for_tests(key.as_bytes(), &serde_json::to_vec(value).unwrap());
    }
    s
}

fn pod_reader() -> serde_json::Value {
    json!({"rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]})
}

fn binding(kind: &str, role: &str, subjects: serde_json::Value) -> serde_json::Value {
    json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": subjects})
}

fn request(user: UserInfo, method: Method, path: &str) -> Attributes {
    Attributes::of_request(user, &method, path, None)
}

#[test]
fn a_role_binding_grants_its_rules_in_its_namespace_only() {
    let s = snapshot(&[
        ("roles/dev/pod-reader", pod_reader()),
        (
            "rolebindings/dev/read-pods",
            binding(
                "Role",
                "pod-reader",
                json!([{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]),
            ),
        ),
    ]);
    let alice = UserInfo::new("alice", &["system:authenticated"]);
    let d = authorize(
        &s,
        &request(alice.clone(), Method::GET, "/api/v1/namespaces/dev/pods"),
    );
    assert_eq!(
        d,
        Decision {
            allowed: true,
            reason: r#"RBAC: allowed by RoleBinding "read-pods/dev" of Role "pod-reader" to User "alice""#.into()
        }
    );
    assert!(
        !authorize(
            &s,
            &request(alice.clone(), Method::GET, "/api/v1/namespaces/prod/pods")
        )
        .allowed
    );
    assert!(
        !authorize(
            &s,
            &request(
                alice.clone(),
                Method::DELETE,
                "/api/v1/namespaces/dev/pods/p"
            )
        )
        .allowed
    );
    assert!(!authorize(&s, &request(alice, Method::GET, "/api/v1/pods")).allowed);
    let bob = UserInfo::new("bob", &["system:authenticated"]);
    assert!(
        !authorize(
            &s,
            &request(bob, Method::GET, "/api/v1/namespaces/dev/pods")
        )
        .allowed
    );
}

#[test]
fn cluster_role_bindings_apply_everywhere_and_groups_and_service_accounts_match() {
    let s = snapshot(&[
        ("clusterroles/pod-reader", pod_reader()),
        (
            "clusterrolebindings/ops",
            binding(
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "Group", "name": "ops", "apiGroup": "rbac.authorization.k8s.io"}]),
            ),
        ),
        (
            "rolebindings/ci/builder",
            binding(
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "ServiceAccount", "name": "builder"}]),
            ),
        ),
    ]);
    let carol = UserInfo::new("carol", &["ops"]);
    let d = authorize(&s, &request(carol, Method::GET, "/api/v1/pods"));
    assert!(d.allowed);
    assert_eq!(
        d.reason,
        r#"RBAC: allowed by ClusterRoleBinding "ops" of ClusterRole "pod-reader" to Group "ops""#
    );
    let builder = UserInfo::new(
        "system:serviceaccount:ci:builder",
        &["system:serviceaccounts"],
    );
    let d = authorize(
        &s,
        &request(builder.clone(), Method::GET, "/api/v1/namespaces/ci/pods"),
    );
    assert_eq!(
        d.reason,
        r#"RBAC: allowed by RoleBinding "builder/ci" of ClusterRole "pod-reader" to ServiceAccount "builder/ci""#
    );
    // The binding's ServiceAccount defaults to the binding's namespace: the same name in
    // another namespace is someone else.
    let other = UserInfo::new("system:serviceaccount:prod:builder", &[]);
    assert!(
        !authorize(
            &s,
            &request(other, Method::GET, "/api/v1/namespaces/ci/pods")
        )
        .allowed
    );
    assert!(
        !authorize(
            &s,
            &request(builder, Method::GET, "/api/v1/namespaces/prod/pods")
        )
        .allowed
    );
}

#[test]
fn a_binding_to_a_missing_role_says_so_in_the_reason() {
    let s = snapshot(&[
        (
            "clusterrolebindings/a",
            binding(
                "ClusterRole",
                "gone",
                json!([{"kind": "User", "name": "alice"}]),
            ),
        ),
        (
            "rolebindings/dev/b",
            binding("Role", "absent", json!([{"kind": "User", "name": "alice"}])),
        ),
    ]);
    let alice = UserInfo::new("alice", &[]);
    let d = authorize(
        &s,
        &request(alice.clone(), Method::GET, "/api/v1/namespaces/dev/pods"),
    );
    assert_eq!(
        d,
        Decision {
            allowed: false,
            reason: r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "absent" not found]"#.into()
        }
    );
    let d = authorize(&s, &request(alice, Method::GET, "/api/v1/pods"));
    assert_eq!(
        d.reason,
        r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#
    );
}

#[test]
fn rules_for_lists_cluster_wide_then_namespace_rules() {
    let s = snapshot(&[
        ("clusterroles/pod-reader", pod_reader()),
        (
            "roles/dev/cm",
            json!({"rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]}]}),
        ),
        (
            "clusterrolebindings/all",
            binding(
                "ClusterRole",
                "pod-reader",
                json!([{"kind": "Group", "name": "system:authenticated"}]),
            ),
        ),
        (
            "rolebindings/dev/cm",
            binding("Role", "cm", json!([{"kind": "User", "name": "alice"}])),
        ),
    ]);
    let alice = UserInfo::new("alice", &["system:authenticated"]);
    let (rules, errors) = rules_for(&s, &alice, "dev");
    assert!(errors.is_empty());
    let resources: Vec<_> = rules
        .iter()
        .map(|r| r.resources.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        resources,
        [vec!["pods".to_string()], vec!["configmaps".to_string()]]
    );
    let (rules, _) = rules_for(&s, &alice, "prod");
    assert_eq!(rules.len(), 1);
}
