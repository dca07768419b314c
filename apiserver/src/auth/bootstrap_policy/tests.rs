//! Tests of the bootstrap policy: the metadata of every object, the names and counts
//! Kubernetes has, and specific rules checked against Kubernetes 1.33's golden files.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller_roles::CONTROLLER_ROLE_PREFIX;
use super::rules::{AUTOUPDATE_ANNOTATION, BOOTSTRAPPING_LABEL, BOOTSTRAPPING_VALUE};
use super::*;

/// The number of objects in Kubernetes 1.33's golden files: `cluster-roles.yaml` (31) plus
/// `controller-roles.yaml` (35).
const CLUSTER_ROLES: usize = 31 + 35;
/// `cluster-role-bindings.yaml` (12) plus `controller-role-bindings.yaml` (35).
const CLUSTER_ROLE_BINDINGS: usize = 12 + 35;
/// `namespace-roles.yaml`.
const ROLES: usize = 7;
/// `namespace-role-bindings.yaml`.
const ROLE_BINDINGS: usize = 7;

/// Every feature gate on, as `cluster-roles-featuregates.yaml` was generated (AllAlpha and
/// AllBeta).
const ALL_GATES: FeatureGates = FeatureGates {
    dynamic_resource_allocation: true,
    dra_device_taints: true,
    cluster_trust_bundle: true,
    kubelet_service_account_token_for_credential_providers: true,
    kubelet_fine_grained_authz: true,
    multi_cidr_service_allocator: true,
    component_flagz: true,
    component_statusz: true,
    volume_attributes_class: true,
    storage_version_api: true,
    api_server_identity: true,
    storage_version_migrator: true,
    selinux_change_policy: true,
    stateful_set_auto_delete_pvc: true,
};

/// The strings, owned.
fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The name of an object.
fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The ClusterRole of this name.
fn cluster_role(roles: &[ClusterRole], wanted: &str) -> ClusterRole {
    roles
        .iter()
        .find(|r| name(&r.metadata) == wanted)
        .unwrap_or_else(|| panic!("no ClusterRole {wanted}"))
        .clone()
}

/// The rules of the ClusterRole of this name.
fn rules_of(roles: &[ClusterRole], wanted: &str) -> Vec<PolicyRule> {
    cluster_role(roles, wanted).rules.unwrap_or_default()
}

/// The ClusterRoleBinding of this name.
fn cluster_binding(bindings: &[ClusterRoleBinding], wanted: &str) -> ClusterRoleBinding {
    bindings
        .iter()
        .find(|b| name(&b.metadata) == wanted)
        .unwrap_or_else(|| panic!("no ClusterRoleBinding {wanted}"))
        .clone()
}

/// A non-resource rule allowing `verbs` on `urls`.
fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: Some(strings(urls)),
        ..PolicyRule::default()
    }
}

/// A resource rule.
fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        ..PolicyRule::default()
    }
}

/// A User or Group subject.
fn rbac_subject(kind: &str, subject: &str) -> Subject {
    Subject {
        api_group: Some("rbac.authorization.k8s.io".to_string()),
        kind: kind.to_string(),
        name: subject.to_string(),
        namespace: None,
    }
}

/// Whether `rules` allow `verb` on `resource` of the core group (wildcards included).
fn allows_core(rules: &[PolicyRule], verb: &str, resource: &str) -> bool {
    let has = |list: &Option<Vec<String>>, item: &str| {
        list.iter()
            .flatten()
            .any(|entry| entry == item || entry == "*")
    };
    rules.iter().any(|r| {
        r.verbs.iter().any(|v| v == verb || v == "*")
            && has(&r.api_groups, "")
            && has(&r.resources, resource)
    })
}

/// Every metadata of the policy, with what it names.
fn all_metadata() -> Vec<(String, ObjectMeta)> {
    let (ccm_role, ccm_binding) = cloud_controller_manager();
    let mut all: Vec<(String, ObjectMeta)> = Vec::new();
    all.extend(
        cluster_roles()
            .into_iter()
            .chain([ccm_role])
            .map(|o| ("ClusterRole".to_string(), o.metadata)),
    );
    all.extend(
        cluster_role_bindings()
            .into_iter()
            .chain([ccm_binding])
            .map(|o| ("ClusterRoleBinding".to_string(), o.metadata)),
    );
    all.extend(
        namespace_roles()
            .into_iter()
            .map(|o| ("Role".to_string(), o.metadata)),
    );
    all.extend(
        namespace_role_bindings()
            .into_iter()
            .map(|o| ("RoleBinding".to_string(), o.metadata)),
    );
    all
}

/// Every rule of the policy, with the name of its role; the CCM's (written unsorted) left out.
fn all_rules() -> Vec<(String, PolicyRule)> {
    let mut all = Vec::new();
    for role in cluster_roles_with(&ALL_GATES) {
        let role_name = name(&role.metadata).to_string();
        for rule in role.rules.unwrap_or_default() {
            all.push((role_name.clone(), rule));
        }
    }
    for role in namespace_roles() {
        let role_name = name(&role.metadata).to_string();
        for rule in role.rules.unwrap_or_default() {
            all.push((role_name.clone(), rule));
        }
    }
    all
}

#[test]
fn counts_equal_kubernetes_golden_files() {
    assert_eq!(cluster_roles().len(), CLUSTER_ROLES);
    assert_eq!(cluster_role_bindings().len(), CLUSTER_ROLE_BINDINGS);
    assert_eq!(namespace_roles().len(), ROLES);
    assert_eq!(namespace_role_bindings().len(), ROLE_BINDINGS);
    // `cluster-roles-featuregates.yaml`: every gate on adds
    // system:cluster-trust-bundle-discovery.
    assert_eq!(cluster_roles::cluster_roles(&ALL_GATES).len(), 32);
}

#[test]
fn every_object_has_the_bootstrap_label_and_autoupdate_annotation() {
    for (kind, meta) in all_metadata() {
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(BOOTSTRAPPING_LABEL).map(String::as_str),
            Some(BOOTSTRAPPING_VALUE),
            "{kind} {}",
            name(&meta)
        );
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations,
            BTreeMap::from([(AUTOUPDATE_ANNOTATION.to_string(), "true".to_string())]),
            "{kind} {}",
            name(&meta)
        );
    }
}

#[test]
fn names_are_unique_per_kind_and_namespace() {
    let mut seen = BTreeSet::new();
    for (kind, meta) in all_metadata() {
        let key = (kind, meta.namespace.clone(), name(&meta).to_string());
        assert!(seen.insert(key.clone()), "duplicate {key:?}");
    }
}

#[test]
fn kubernetes_role_names_are_there() {
    let roles = cluster_roles();
    let names: BTreeSet<&str> = roles.iter().map(|r| name(&r.metadata)).collect();
    for wanted in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
        "system:monitoring",
        "system:auth-delegator",
        "system:kube-controller-manager",
        "system:kube-scheduler",
        "system:volume-scheduler",
        "system:node",
        "system:node-proxier",
        "system:kubelet-api-admin",
        "system:service-account-issuer-discovery",
        "system:controller:deployment-controller",
        "system:controller:replicaset-controller",
        "system:controller:endpointslice-controller",
        "system:controller:generic-garbage-collector",
        "system:controller:namespace-controller",
        "system:controller:node-controller",
        "system:controller:service-account-controller",
        "system:controller:clusterrole-aggregation-controller",
        "system:controller:selinux-warning-controller",
        "system:controller:service-cidrs-controller",
    ] {
        assert!(names.contains(wanted), "missing ClusterRole {wanted}");
    }
    // Off by default in 1.33 (alpha, or beta APIs).
    for absent in [
        "system:cluster-trust-bundle-discovery",
        "system:controller:resource-claim-controller",
        "system:controller:volumeattributesclass-protection-controller",
        "system:controller:storage-version-migrator-controller",
        "system:controller:storage-version-garbage-collector",
    ] {
        assert!(!names.contains(absent), "unexpected ClusterRole {absent}");
    }

    let roles = namespace_roles();
    let names: BTreeSet<(&str, &str)> = roles
        .iter()
        .map(|r| {
            (
                r.metadata.namespace.as_deref().unwrap_or_default(),
                name(&r.metadata),
            )
        })
        .collect();
    for wanted in [
        ("kube-system", "extension-apiserver-authentication-reader"),
        (
            "kube-system",
            "system::leader-locking-kube-controller-manager",
        ),
        ("kube-system", "system::leader-locking-kube-scheduler"),
        ("kube-system", "system:controller:bootstrap-signer"),
        ("kube-public", "system:controller:bootstrap-signer"),
    ] {
        assert!(names.contains(&wanted), "missing Role {wanted:?}");
    }
}

#[test]
fn cluster_admin_may_do_anything() {
    assert_eq!(
        rules_of(&cluster_roles(), "cluster-admin"),
        vec![
            resource_rule(&["*"], &["*"], &["*"]),
            url_rule(&["*"], &["*"]),
        ]
    );
    let binding = cluster_binding(&cluster_role_bindings(), "cluster-admin");
    assert_eq!(
        binding.subjects,
        Some(vec![rbac_subject("Group", "system:masters")])
    );
}

#[test]
fn discovery_and_public_info_urls() {
    let roles = cluster_roles();
    // Sorted, as RuleOrDie sorts them.
    assert_eq!(
        rules_of(&roles, "system:public-info-viewer"),
        vec![url_rule(
            &["get"],
            &["/healthz", "/livez", "/readyz", "/version", "/version/"]
        )]
    );
    assert_eq!(
        rules_of(&roles, "system:discovery"),
        vec![url_rule(
            &["get"],
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ]
        )]
    );
    assert_eq!(
        rules_of(&roles, "system:monitoring"),
        vec![url_rule(
            &["get"],
            &[
                "/healthz",
                "/healthz/*",
                "/livez",
                "/livez/*",
                "/metrics",
                "/metrics/slis",
                "/readyz",
                "/readyz/*",
            ]
        )]
    );

    let bindings = cluster_role_bindings();
    assert_eq!(
        cluster_binding(&bindings, "system:public-info-viewer").subjects,
        Some(vec![
            rbac_subject("Group", "system:authenticated"),
            rbac_subject("Group", "system:unauthenticated"),
        ])
    );
    assert_eq!(
        cluster_binding(&bindings, "system:discovery").subjects,
        Some(vec![rbac_subject("Group", "system:authenticated")])
    );
}

#[test]
fn admin_edit_view_aggregate_and_view_cannot_escalate() {
    let roles = cluster_roles();
    for (role, from, label) in [
        ("admin", "aggregate-to-admin", None),
        ("edit", "aggregate-to-edit", Some("aggregate-to-admin")),
        ("view", "aggregate-to-view", Some("aggregate-to-edit")),
    ] {
        let role = cluster_role(&roles, role);
        assert_eq!(role.rules, None, "{role:?}");
        let selectors = role
            .aggregation_rule
            .and_then(|a| a.cluster_role_selectors)
            .unwrap_or_default();
        assert_eq!(selectors.len(), 1);
        let wanted = BTreeMap::from([(
            format!("rbac.authorization.k8s.io/{from}"),
            "true".to_string(),
        )]);
        assert_eq!(selectors[0].match_labels.as_ref(), Some(&wanted));
        let labels = role.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get(&format!(
                    "rbac.authorization.k8s.io/{}",
                    label.unwrap_or("-")
                ))
                .map(String::as_str),
            label.map(|_| "true")
        );
    }

    // view grants reading the namespace's objects, but none of the escalating ones.
    let view = rules_of(&roles, "system:aggregate-to-view");
    assert!(allows_core(&view, "get", "pods"));
    assert!(allows_core(&view, "list", "configmaps"));
    for escalating in [
        "secrets",
        "pods/attach",
        "pods/proxy",
        "pods/exec",
        "pods/portforward",
        "services/proxy",
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(
                !allows_core(&view, verb, escalating),
                "view may {verb} {escalating}"
            );
        }
    }
    // edit may read and write Secrets.
    let edit = rules_of(&roles, "system:aggregate-to-edit");
    assert!(allows_core(&edit, "get", "secrets"));
    assert!(allows_core(&edit, "create", "secrets"));
    assert!(!allows_core(&edit, "create", "roles"));
}

#[test]
fn component_bindings() {
    let bindings = cluster_role_bindings();
    for (binding, kind, subject) in [
        (
            "system:kube-controller-manager",
            "User",
            "system:kube-controller-manager",
        ),
        ("system:kube-scheduler", "User", "system:kube-scheduler"),
        ("system:volume-scheduler", "User", "system:kube-scheduler"),
        ("system:node-proxier", "User", "system:kube-proxy"),
        ("system:basic-user", "Group", "system:authenticated"),
        ("system:monitoring", "Group", "system:monitoring"),
        (
            "system:service-account-issuer-discovery",
            "Group",
            "system:serviceaccounts",
        ),
    ] {
        let b = cluster_binding(&bindings, binding);
        assert_eq!(
            b.subjects,
            Some(vec![rbac_subject(kind, subject)]),
            "{binding}"
        );
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert_eq!(b.role_ref.name, binding);
        assert_eq!(b.role_ref.api_group, "rbac.authorization.k8s.io");
    }
    // Deprecated: kept without subjects so that reconciliation removes them.
    assert_eq!(cluster_binding(&bindings, "system:node").subjects, None);
}

#[test]
fn controllers_are_bound_to_their_service_accounts() {
    let roles = cluster_roles();
    let bindings = cluster_role_bindings();
    let controllers: Vec<&ClusterRole> = roles
        .iter()
        .filter(|r| name(&r.metadata).starts_with(CONTROLLER_ROLE_PREFIX))
        .collect();
    assert_eq!(controllers.len(), 35);
    for role in controllers {
        let role_name = name(&role.metadata);
        let b = cluster_binding(&bindings, role_name);
        assert_eq!(b.role_ref.name, role_name);
        assert_eq!(
            b.subjects,
            Some(vec![Subject {
                api_group: None,
                kind: "ServiceAccount".to_string(),
                name: role_name[CONTROLLER_ROLE_PREFIX.len()..].to_string(),
                namespace: Some("kube-system".to_string()),
            }])
        );
    }
    assert_eq!(
        rules_of(&roles, "system:controller:deployment-controller")[0],
        resource_rule(
            &["get", "list", "update", "watch"],
            &["apps", "extensions"],
            &["deployments"]
        )
    );
}

/// Only a few controllers may use `*` (Go's `TestNoStarsForControllers`).
#[test]
fn no_stars_for_controllers() {
    let allowed = [
        "namespace-controller",
        "generic-garbage-collector",
        "resourcequota-controller",
        "horizontal-pod-autoscaler",
        "clusterrole-aggregation-controller",
        "disruption-controller",
        // Alpha in 1.33; Go's test runs with default gates only.
        "storage-version-migrator-controller",
    ]
    .map(|c| format!("{CONTROLLER_ROLE_PREFIX}{c}"));
    for role in controller_roles::controller_roles(&ALL_GATES).roles {
        let role_name = name(&role.metadata).to_string();
        if allowed.contains(&role_name) {
            continue;
        }
        for rule in role.rules.unwrap_or_default() {
            let lists = [Some(rule.verbs.clone()), rule.api_groups, rule.resources];
            assert!(
                !lists.iter().flatten().flatten().any(|s| s == "*"),
                "{role_name} has a star"
            );
        }
    }
}

#[test]
fn rules_are_well_formed_and_sorted() {
    for (role, rule) in all_rules() {
        assert!(!rule.verbs.is_empty(), "{role}: no verbs");
        let urls = rule.non_resource_urls.clone().unwrap_or_default();
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        if urls.is_empty() {
            assert!(
                !groups.is_empty() && !resources.is_empty(),
                "{role}: {rule:?}"
            );
        } else {
            assert!(
                groups.is_empty() && resources.is_empty() && rule.resource_names.is_none(),
                "{role}: {rule:?}"
            );
        }
        for list in [
            Some(&rule.verbs),
            rule.api_groups.as_ref(),
            rule.resources.as_ref(),
            rule.resource_names.as_ref(),
            rule.non_resource_urls.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            assert!(list.is_sorted(), "{role}: unsorted {list:?}");
            assert!(!list.is_empty(), "{role}: empty list in {rule:?}");
        }
        // Go's TestClusterRoleVerbsConsistency.
        if rule.verbs.iter().any(|v| v == "list") {
            assert!(
                rule.verbs.iter().any(|v| v == "watch"),
                "{role}: list without watch"
            );
        }
    }
}

#[test]
fn every_binding_refers_to_a_bootstrap_role() {
    let roles: BTreeSet<String> = cluster_roles()
        .iter()
        .map(|r| name(&r.metadata).to_string())
        .collect();
    for b in cluster_role_bindings() {
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert!(roles.contains(&b.role_ref.name), "{}", b.role_ref.name);
    }
    let roles: BTreeSet<(String, String)> = namespace_roles()
        .iter()
        .map(|r| {
            (
                r.metadata.namespace.clone().unwrap_or_default(),
                name(&r.metadata).to_string(),
            )
        })
        .collect();
    for b in namespace_role_bindings() {
        assert_eq!(b.role_ref.kind, "Role");
        let key = (
            b.metadata.namespace.clone().unwrap_or_default(),
            b.role_ref.name.clone(),
        );
        assert!(roles.contains(&key), "{key:?}");
        assert!(b.subjects.is_some_and(|s| !s.is_empty()));
    }
}

#[test]
fn namespace_bindings() {
    let bindings = namespace_role_bindings();
    let reader = bindings
        .iter()
        .find(|b| name(&b.metadata) == "system::extension-apiserver-authentication-reader")
        .cloned()
        .unwrap_or_else(|| panic!("no authentication reader binding"));
    assert_eq!(reader.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        reader.role_ref.name,
        "extension-apiserver-authentication-reader"
    );
    assert_eq!(
        reader.subjects,
        Some(vec![
            rbac_subject("User", "system:kube-controller-manager"),
            rbac_subject("User", "system:kube-scheduler"),
        ])
    );
}

#[test]
fn cloud_controller_manager_role_and_binding() {
    let (role, binding) = cloud_controller_manager();
    assert_eq!(name(&role.metadata), "system:cloud-controller-manager");
    let core = |verbs: &[&str], resource: &str| resource_rule(verbs, &[""], &[resource]);
    assert_eq!(
        role.rules,
        Some(vec![
            core(&["create", "patch", "update"], "events"),
            core(&["*"], "nodes"),
            core(&["patch"], "nodes/status"),
            core(&["list", "patch", "update", "watch"], "services"),
            core(&["list", "patch", "update", "watch"], "services/status"),
            core(&["create"], "serviceaccounts"),
            core(&["get", "list", "update", "watch"], "persistentvolumes"),
            core(&["create", "get", "list", "watch", "update"], "endpoints"),
            resource_rule(
                &["get", "create", "update"],
                &["coordination.k8s.io"],
                &["leases"]
            ),
            core(&["create"], "serviceaccounts/token"),
        ])
    );
    assert_eq!(name(&binding.metadata), "system:cloud-controller-manager");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.role_ref.name, "system:cloud-controller-manager");
    assert_eq!(
        binding.subjects,
        Some(vec![
            rbac_subject("User", "system:cloud-controller-manager"),
            Subject {
                api_group: None,
                kind: "ServiceAccount".to_string(),
                name: "cloud-controller-manager".to_string(),
                namespace: Some("kube-system".to_string()),
            },
        ])
    );
}

#[test]
fn miniplane_admin_and_viewer_cover_miniplanes_own_api() {
    use crate::auth::attributes::Attributes;
    use crate::auth::rbac::rules::rule_allows;
    use crate::auth::user::UserInfo;
    use axum::http::Method;
    let (roles, bindings, _, _) = miniplane();
    let allows = |role: &str, method: Method, path: &str| {
        let attrs = Attributes::of_request(UserInfo::new("u", &[]), &method, path, None);
        rules_of(&roles, role)
            .iter()
            .any(|r| rule_allows(&attrs, r))
    };
    for (method, path) in [
        (Method::GET, "/miniplane/v1/traces"),
        (
            Method::GET,
            "/miniplane/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        (Method::GET, "/miniplane/v1/faults"),
        (Method::GET, "/miniplane/v1/controllers"),
        (Method::GET, "/miniplane/v1/lab"),
    ] {
        assert!(allows("miniplane:admin", method.clone(), path), "{path}");
        assert!(allows("miniplane:viewer", method, path), "{path}");
    }
    // Changing the cluster's faults or reporting a component's queues is the admin's (and the
    // components') only.
    for (method, path) in [
        (Method::POST, "/miniplane/v1/faults"),
        (Method::DELETE, "/miniplane/v1/faults/pause-kubelet"),
        (Method::PUT, "/miniplane/v1/lab"),
        (Method::POST, "/miniplane/v1/traces"),
    ] {
        assert!(allows("miniplane:admin", method.clone(), path), "{path}");
        assert!(!allows("miniplane:viewer", method, path), "{path}");
    }
    assert!(!allows("miniplane:admin", Method::GET, "/api/v1/pods"));
    // The admin's binding is to the group kubeadm's admin certificate carries.
    assert_eq!(
        cluster_binding(&bindings, "miniplane:admin").subjects,
        Some(vec![rbac_subject("Group", "system:masters")])
    );
    assert!(
        bindings
            .iter()
            .all(|b| b.role_ref.name != "miniplane:viewer"),
        "the viewer role is bound by the admin, to whom they choose"
    );
}

#[test]
fn the_kubelet_simulator_may_act_as_a_node_and_no_more() {
    use crate::auth::attributes::Attributes;
    use crate::auth::rbac::rules::rule_allows;
    use crate::auth::user::UserInfo;
    let (roles, bindings, _, _) = miniplane();
    let rules = rules_of(&roles, "miniplane:kubelet-sim");
    let impersonates = |resource: &str, name: &str| {
        let attrs = Attributes {
            user: UserInfo::new("miniplane:kubelet-sim", &[]),
            verb: "impersonate".into(),
            resource_request: true,
            api_version: "v1".into(),
            resource: resource.into(),
            name: name.into(),
            ..Attributes::default()
        };
        rules.iter().any(|r| rule_allows(&attrs, r))
    };
    assert!(impersonates("users", "system:node:node-7"));
    assert!(impersonates("groups", "system:nodes"));
    assert!(!impersonates("groups", "system:masters"));
    assert!(!impersonates("serviceaccounts", "default"));
    // It reads what every node's kubelet reads, deletes the Node of a removed machine, and
    // writes nothing else itself (the nodes' writes go as the nodes).
    for (verb, resource) in [("watch", "pods"), ("list", "nodes"), ("delete", "nodes")] {
        assert!(allows_core(&rules, verb, resource), "{verb} {resource}");
    }
    for (verb, resource) in [
        ("patch", "pods"),
        ("create", "nodes"),
        ("create", "events"),
        ("update", "leases"),
    ] {
        assert!(!allows_core(&rules, verb, resource), "{verb} {resource}");
    }
    // Its kubelet API reviews its callers' tokens and access, as a kubelet's does.
    let creates = |group: &str, resource: &str| {
        let attrs = Attributes {
            user: UserInfo::new("miniplane:kubelet-sim", &[]),
            verb: "create".into(),
            resource_request: true,
            api_group: group.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            ..Attributes::default()
        };
        rules.iter().any(|r| rule_allows(&attrs, r))
    };
    assert!(creates("authentication.k8s.io", "tokenreviews"));
    assert!(creates("authorization.k8s.io", "subjectaccessreviews"));
    assert!(!creates(
        "authorization.k8s.io",
        "localsubjectaccessreviews"
    ));
    assert!(!creates(
        "certificates.k8s.io",
        "certificatesigningrequests"
    ));
    assert_eq!(
        cluster_binding(&bindings, "miniplane:kubelet-sim").subjects,
        Some(vec![rbac_subject("User", "miniplane:kubelet-sim")])
    );
}
