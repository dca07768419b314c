//! The Roles and RoleBindings of the reserved namespaces `kube-system` and `kube-public`
//! (`namespace_policy.go`), in the order Go registers them: `kube-system`'s, then
//! `kube-public`'s.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use super::bindings::binding;
use super::controller_roles::CONTROLLER_ROLE_PREFIX;
use super::rules::{
    COORDINATION, KUBE_CONTROLLER_MANAGER, KUBE_PUBLIC, KUBE_SCHEDULER, KUBE_SYSTEM, LEGACY, Rule,
    bootstrap_metadata, build_all, events_rule, rule,
};

/// The Roles of `NamespaceRoles()`, `kube-system`'s then `kube-public`'s.
pub(super) fn namespace_roles() -> Vec<Role> {
    vec![
        // Finding the authentication configuration to start a server with: this ConfigMap is
        // exposed on purpose.
        role(
            KUBE_SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .names(&["extension-apiserver-authentication"]),
            ],
        ),
        // The bootstrap signer inspects kube-system's Secrets.
        role(
            KUBE_SYSTEM,
            &controller("bootstrap-signer"),
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["secrets"]),
            ],
        ),
        // Cloud providers read and create kube-system's ConfigMaps (deprecated since 1.10).
        role(
            KUBE_SYSTEM,
            &controller("cloud-provider"),
            vec![
                rule(&["create", "get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"]),
            ],
        ),
        // The token cleaner removes Secrets, but only in kube-system.
        role(
            KUBE_SYSTEM,
            &controller("token-cleaner"),
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["secrets"]),
                events_rule(),
            ],
        ),
        // Leader election of the kube-controller-manager.
        role(
            KUBE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            leader_locking_rules("kube-controller-manager"),
        ),
        // Leader election of the kube-scheduler.
        role(
            KUBE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            leader_locking_rules("kube-scheduler"),
        ),
        // The bootstrap signer writes its ConfigMap.
        role(
            KUBE_PUBLIC,
            &controller("bootstrap-signer"),
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"]),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .names(&["cluster-info"]),
                events_rule(),
            ],
        ),
    ]
}

/// The RoleBindings of `NamespaceRoleBindings()`, `kube-system`'s then `kube-public`'s.
pub(super) fn namespace_role_bindings() -> Vec<RoleBinding> {
    let bootstrap_signer = controller("bootstrap-signer");
    let cloud_provider = controller("cloud-provider");
    let token_cleaner = controller("token-cleaner");
    vec![
        binding("extension-apiserver-authentication-reader")
            .named("system::extension-apiserver-authentication-reader")
            .users(&[KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER])
            .in_namespace(KUBE_SYSTEM),
        binding("system::leader-locking-kube-controller-manager")
            .users(&[KUBE_CONTROLLER_MANAGER])
            .service_accounts(
                KUBE_SYSTEM,
                &["kube-controller-manager", "leader-election-controller"],
            )
            .in_namespace(KUBE_SYSTEM),
        binding("system::leader-locking-kube-scheduler")
            .users(&[KUBE_SCHEDULER])
            .service_accounts(KUBE_SYSTEM, &["kube-scheduler"])
            .in_namespace(KUBE_SYSTEM),
        binding(&bootstrap_signer)
            .service_accounts(KUBE_SYSTEM, &["bootstrap-signer"])
            .in_namespace(KUBE_SYSTEM),
        // Deprecated since 1.10, like its role.
        binding(&cloud_provider)
            .service_accounts(KUBE_SYSTEM, &["cloud-provider"])
            .in_namespace(KUBE_SYSTEM),
        binding(&token_cleaner)
            .service_accounts(KUBE_SYSTEM, &["token-cleaner"])
            .in_namespace(KUBE_SYSTEM),
        binding(&bootstrap_signer)
            .service_accounts(KUBE_SYSTEM, &["bootstrap-signer"])
            .in_namespace(KUBE_PUBLIC),
    ]
}

/// A Role of `namespace` with bootstrap metadata and these rules.
fn role(namespace: &str, name: &str, rules: Vec<Rule>) -> Role {
    Role {
        metadata: bootstrap_metadata(name, Some(namespace), &[]),
        rules: Some(build_all(rules)),
    }
}

/// The role name of a controller's identity, `system:controller:<name>`.
fn controller(name: &str) -> String {
    format!("{CONTROLLER_ROLE_PREFIX}{name}")
}

/// The rules of a component's leader election in kube-system: its ConfigMap lock (of old) and
/// Leases, LeaseCandidates included.
fn leader_locking_rules(component: &str) -> Vec<Rule> {
    vec![
        rule(&["watch"])
            .groups(&[LEGACY])
            .resources(&["configmaps"]),
        rule(&["get", "update"])
            .groups(&[LEGACY])
            .resources(&["configmaps"])
            .names(&[component]),
        rule(&["get", "watch", "list", "create", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "watch", "list", "create", "update"])
            .groups(&[COORDINATION])
            .resources(&["leasecandidates"]),
    ]
}
