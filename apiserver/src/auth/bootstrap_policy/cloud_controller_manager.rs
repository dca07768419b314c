//! The cloud-controller-manager's ClusterRole and binding. Kubernetes does not bootstrap these
//! (the CCM ships its own manifests); miniplane does, with the rules of the ClusterRole the
//! project's seed article shows.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

use super::bindings::binding;
use super::rules::{COORDINATION, KUBE_SYSTEM, LEGACY, bootstrap_metadata, rule};

/// The name of the role, of its binding and of the user the CCM's client certificate names.
pub(super) const CLOUD_CONTROLLER_MANAGER: &str = "system:cloud-controller-manager";
/// The ServiceAccount (in kube-system) a CCM running as a pod would use.
const CLOUD_CONTROLLER_MANAGER_SA: &str = "cloud-controller-manager";

/// The ClusterRole `system:cloud-controller-manager` (rules in the article's order, verbs
/// unsorted) and its binding to the user of that name and to the ServiceAccount
/// `kube-system/cloud-controller-manager`.
pub(super) fn cloud_controller_manager() -> (ClusterRole, ClusterRoleBinding) {
    let rules = [
        rule(&["create", "patch", "update"])
            .groups(&[LEGACY])
            .resources(&["events"]),
        rule(&["*"]).groups(&[LEGACY]).resources(&["nodes"]),
        rule(&["patch"])
            .groups(&[LEGACY])
            .resources(&["nodes/status"]),
        rule(&["list", "patch", "update", "watch"])
            .groups(&[LEGACY])
            .resources(&["services"]),
        rule(&["list", "patch", "update", "watch"])
            .groups(&[LEGACY])
            .resources(&["services/status"]),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts"]),
        rule(&["get", "list", "update", "watch"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumes"]),
        rule(&["create", "get", "list", "watch", "update"])
            .groups(&[LEGACY])
            .resources(&["endpoints"]),
        rule(&["get", "create", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"]),
    ];
    let role = ClusterRole {
        metadata: bootstrap_metadata(CLOUD_CONTROLLER_MANAGER, None, &[]),
        rules: Some(rules.into_iter().map(|r| r.build_as_written()).collect()),
        aggregation_rule: None,
    };
    let role_binding = binding(CLOUD_CONTROLLER_MANAGER)
        .users(&[CLOUD_CONTROLLER_MANAGER])
        .service_accounts(KUBE_SYSTEM, &[CLOUD_CONTROLLER_MANAGER_SA])
        .cluster();
    (role, role_binding)
}
