//! The controllers' ClusterRoles and their bindings (`controller_policy.go`,
//! `buildControllerRoles()`), in the order Go registers them: here its original, alphabetical
//! list (`attachdetach-controller` to `ttl-controller`), the rest in
//! `controller_roles_later.rs`.
//!
//! Each controller of kube-controller-manager runs as the ServiceAccount `kube-system/<name>`
//! (with `--use-service-account-credentials`) and gets the ClusterRole
//! `system:controller:<name>`, bound to that ServiceAccount.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

use super::FeatureGates;
use super::bindings::binding;
use super::controller_roles_later;
use super::rules::{
    APPS, AUTOSCALING, BATCH, CUSTOM_METRICS, DISCOVERY, EXTENSIONS, EXTERNAL_METRICS, KUBE_SYSTEM,
    LEGACY, NETWORKING, POLICY, RBAC, RESOURCE_METRICS, Rule, STORAGE, cluster_role, events_rule,
    rule,
};

/// The prefix of the controllers' role names (`saRolePrefix`).
pub(super) const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

/// The controllers' ClusterRoles and ClusterRoleBindings, built together as
/// `addControllerRole` does.
#[derive(Debug, Default)]
pub(super) struct ControllerRoles {
    /// The ClusterRoles, `system:controller:<name>`.
    pub(super) roles: Vec<ClusterRole>,
    /// One binding per role, to the ServiceAccount `kube-system/<name>`.
    pub(super) bindings: Vec<ClusterRoleBinding>,
}

impl ControllerRoles {
    /// Adds the role of `controller` with these rules, and its binding (`addControllerRole`).
    pub(super) fn add(&mut self, controller: &str, rules: Vec<Rule>) {
        let name = format!("{CONTROLLER_ROLE_PREFIX}{controller}");
        self.roles.push(cluster_role(&name, rules));
        self.bindings.push(
            binding(&name)
                .service_accounts(KUBE_SYSTEM, &[controller])
                .cluster(),
        );
    }
}

/// The controllers' roles and bindings under `gates` (`buildControllerRoles()`).
pub(super) fn controller_roles(gates: &FeatureGates) -> ControllerRoles {
    let mut c = ControllerRoles::default();

    c.add(
        "attachdetach-controller",
        vec![
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumes", "persistentvolumeclaims"]),
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            rule(&["patch", "update"])
                .groups(&[LEGACY])
                .resources(&["nodes/status"]),
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
            rule(&["get", "create", "delete", "list", "watch"])
                .groups(&[STORAGE])
                .resources(&["volumeattachments"]),
            rule(&["get", "watch", "list"])
                .groups(&[STORAGE])
                .resources(&["csidrivers"]),
            rule(&["get", "watch", "list"])
                .groups(&[STORAGE])
                .resources(&["csinodes"]),
        ],
    );
    c.add(
        "clusterrole-aggregation-controller",
        vec![
            // Full permissions on ClusterRoles, to mutate them in any way.
            rule(&["escalate", "get", "list", "watch", "update", "patch"])
                .groups(&[RBAC])
                .resources(&["clusterroles"]),
        ],
    );
    c.add(
        "cronjob-controller",
        vec![
            rule(&["get", "list", "watch", "update"])
                .groups(&[BATCH])
                .resources(&["cronjobs"]),
            rule(&[
                "get", "list", "watch", "create", "update", "delete", "patch",
            ])
            .groups(&[BATCH])
            .resources(&["jobs"]),
            rule(&["update"])
                .groups(&[BATCH])
                .resources(&["cronjobs/status"]),
            rule(&["update"])
                .groups(&[BATCH])
                .resources(&["cronjobs/finalizers"]),
            rule(&["list", "watch", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "daemon-set-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["daemonsets"]),
            rule(&["update"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["daemonsets/status"]),
            rule(&["update"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["daemonsets/finalizers"]),
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            rule(&["list", "watch", "create", "delete", "patch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            rule(&["create"])
                .groups(&[LEGACY])
                .resources(&["pods/binding"]),
            rule(&[
                "get", "list", "watch", "create", "delete", "update", "patch",
            ])
            .groups(&[APPS])
            .resources(&["controllerrevisions"]),
            events_rule(),
        ],
    );
    c.add(
        "deployment-controller",
        vec![
            rule(&["get", "list", "watch", "update"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["deployments"]),
            rule(&["update"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["deployments/status"]),
            rule(&["update"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["deployments/finalizers"]),
            rule(&[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ])
            .groups(&[APPS, EXTENSIONS])
            .resources(&["replicasets"]),
            // update stays until kubernetes/kubernetes#36897 is resolved.
            rule(&["get", "list", "watch", "update"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "disruption-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["deployments"]),
            rule(&["get", "list", "watch"])
                .groups(&[APPS, EXTENSIONS])
                .resources(&["replicasets"]),
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["replicationcontrollers"]),
            rule(&["get", "list", "watch"])
                .groups(&[POLICY])
                .resources(&["poddisruptionbudgets"]),
            rule(&["get", "list", "watch"])
                .groups(&[APPS])
                .resources(&["statefulsets"]),
            rule(&["update"])
                .groups(&[POLICY])
                .resources(&["poddisruptionbudgets/status"]),
            rule(&["patch", "update"])
                .groups(&[LEGACY])
                .resources(&["pods/status"]),
            rule(&["get"]).groups(&["*"]).resources(&["*/scale"]),
            events_rule(),
        ],
    );
    c.add(
        "endpoint-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["services", "pods"]),
            rule(&["get", "list", "watch", "create", "update", "delete"])
                .groups(&[LEGACY])
                .resources(&["endpoints"]),
            rule(&["create"])
                .groups(&[LEGACY])
                .resources(&["endpoints/restricted"]),
            events_rule(),
        ],
    );
    c.add(
        "endpointslice-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["services", "pods", "nodes"]),
            // Setting a Service's finalizers, to create EndpointSlices owned by it with
            // blockOwnerDeletion.
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["services/finalizers"]),
            rule(&["get", "list", "watch", "create", "update", "delete"])
                .groups(&[DISCOVERY])
                .resources(&["endpointslices"]),
            events_rule(),
        ],
    );
    c.add(
        "endpointslicemirroring-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["services", "endpoints"]),
            // Setting the finalizers of the owning Service or Endpoints, to create
            // EndpointSlices owned by them with blockOwnerDeletion.
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["services/finalizers"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["endpoints/finalizers"]),
            rule(&["get", "list", "watch", "create", "update", "delete"])
                .groups(&[DISCOVERY])
                .resources(&["endpointslices"]),
            events_rule(),
        ],
    );
    c.add(
        "expand-controller",
        vec![
            rule(&["get", "list", "watch", "update", "patch"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumes"]),
            rule(&["update", "patch"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims/status"]),
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims"]),
            events_rule(),
            // The portworx volume plugin.
            rule(&["get"]).groups(&[LEGACY]).resources(&["services"]),
        ],
    );
    c.add(
        "ephemeral-volume-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["pods/finalizers"]),
            rule(&["get", "list", "watch", "create"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims"]),
            events_rule(),
        ],
    );
    if gates.dynamic_resource_allocation {
        controller_roles_later::add_dra_controllers(&mut c, gates);
    }
    c.add(
        "generic-garbage-collector",
        vec![
            // List and watch, selective gets, and updates of any resource.
            rule(&["get", "list", "watch", "patch", "update", "delete"])
                .groups(&["*"])
                .resources(&["*"]),
            events_rule(),
        ],
    );
    c.add(
        "horizontal-pod-autoscaler",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[AUTOSCALING])
                .resources(&["horizontalpodautoscalers"]),
            rule(&["update"])
                .groups(&[AUTOSCALING])
                .resources(&["horizontalpodautoscalers/status"]),
            rule(&["get", "update"])
                .groups(&["*"])
                .resources(&["*/scale"]),
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            // Resource, custom and external metrics.
            rule(&["list", "watch"])
                .groups(&[RESOURCE_METRICS])
                .resources(&["pods"]),
            rule(&["get", "list", "watch"])
                .groups(&[CUSTOM_METRICS])
                .resources(&["*"]),
            rule(&["get", "list", "watch"])
                .groups(&[EXTERNAL_METRICS])
                .resources(&["*"]),
            events_rule(),
        ],
    );
    c.add(
        "job-controller",
        vec![
            rule(&["get", "list", "watch", "update", "patch"])
                .groups(&[BATCH])
                .resources(&["jobs"]),
            rule(&["update"])
                .groups(&[BATCH])
                .resources(&["jobs/status"]),
            rule(&["update"])
                .groups(&[BATCH])
                .resources(&["jobs/finalizers"]),
            rule(&["list", "watch", "create", "delete", "patch"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "namespace-controller",
        vec![
            rule(&["get", "list", "watch", "delete"])
                .groups(&[LEGACY])
                .resources(&["namespaces"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["namespaces/finalize", "namespaces/status"]),
            rule(&["get", "list", "watch", "delete", "deletecollection"])
                .groups(&["*"])
                .resources(&["*"]),
        ],
    );
    c.add(
        "node-controller",
        vec![
            rule(&["get", "list", "watch", "update", "delete", "patch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            rule(&["patch", "update"])
                .groups(&[LEGACY])
                .resources(&["nodes/status"]),
            // Deleting pods.
            rule(&["patch", "update"])
                .groups(&[LEGACY])
                .resources(&["pods/status"]),
            rule(&["list", "watch", "get", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "persistent-volume-binder",
        vec![
            rule(&["get", "list", "watch", "update", "create", "delete"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumes"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumes/status"]),
            rule(&["get", "list", "watch", "update"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims/status"]),
            rule(&["list", "watch", "get", "create", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            rule(&["get", "list", "watch"])
                .groups(&[STORAGE])
                .resources(&["storageclasses"]),
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            events_rule(),
            // The recycler watches its pod.
            rule(&["watch"]).groups(&[LEGACY]).resources(&["events"]),
            // The portworx volume plugin.
            rule(&["get"]).groups(&[LEGACY]).resources(&["services"]),
        ],
    );
    c.add(
        "pod-garbage-collector",
        vec![
            rule(&["list", "watch", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            rule(&["patch"])
                .groups(&[LEGACY])
                .resources(&["pods/status"]),
        ],
    );
    c.add(
        "replicaset-controller",
        vec![
            rule(&["get", "list", "watch", "update"])
                .groups(&[APPS, EXTENSIONS])
                .resources(&["replicasets"]),
            rule(&["update"])
                .groups(&[APPS, EXTENSIONS])
                .resources(&["replicasets/status"]),
            rule(&["update"])
                .groups(&[APPS, EXTENSIONS])
                .resources(&["replicasets/finalizers"]),
            rule(&["list", "watch", "patch", "create", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "replication-controller",
        vec![
            // 1.0 controllers needed get and update: old controllers break without them.
            rule(&["get", "list", "watch", "update"])
                .groups(&[LEGACY])
                .resources(&["replicationcontrollers"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["replicationcontrollers/status"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["replicationcontrollers/finalizers"]),
            rule(&["list", "watch", "patch", "create", "delete"])
                .groups(&[LEGACY])
                .resources(&["pods"]),
            events_rule(),
        ],
    );
    c.add(
        "resourcequota-controller",
        vec![
            // Quota may count anything, so it must see everything.
            rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["resourcequotas/status"]),
            events_rule(),
        ],
    );
    c.add(
        "route-controller",
        vec![
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            rule(&["patch"])
                .groups(&[LEGACY])
                .resources(&["nodes/status"]),
            events_rule(),
        ],
    );
    c.add(
        "service-account-controller",
        vec![
            rule(&["create"])
                .groups(&[LEGACY])
                .resources(&["serviceaccounts"]),
            events_rule(),
        ],
    );
    c.add(
        "service-controller",
        vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["services"]),
            rule(&["patch", "update"])
                .groups(&[LEGACY])
                .resources(&["services/status"]),
            rule(&["list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            events_rule(),
        ],
    );
    if gates.multi_cidr_service_allocator {
        c.add(
            "service-cidrs-controller",
            vec![
                rule(&["get", "list", "watch", "patch", "update"])
                    .groups(&[NETWORKING])
                    .resources(&["servicecidrs"]),
                rule(&["patch", "update"])
                    .groups(&[NETWORKING])
                    .resources(&["servicecidrs/finalizers"]),
                rule(&["patch", "update"])
                    .groups(&[NETWORKING])
                    .resources(&["servicecidrs/status"]),
                rule(&["get", "list", "watch"])
                    .groups(&[NETWORKING])
                    .resources(&["ipaddresses"]),
                events_rule(),
            ],
        );
    }
    let mut statefulset_rules = vec![
        rule(&["list", "watch"])
            .groups(&[LEGACY])
            .resources(&["pods"]),
        rule(&["get", "list", "watch"])
            .groups(&[APPS])
            .resources(&["statefulsets"]),
        rule(&["update"])
            .groups(&[APPS])
            .resources(&["statefulsets/status"]),
        rule(&["update"])
            .groups(&[APPS])
            .resources(&["statefulsets/finalizers"]),
        rule(&["get", "create", "delete", "update", "patch"])
            .groups(&[LEGACY])
            .resources(&["pods"]),
        rule(&[
            "get", "create", "delete", "update", "patch", "list", "watch",
        ])
        .groups(&[APPS])
        .resources(&["controllerrevisions"]),
        rule(&["get", "create", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims"]),
        events_rule(),
    ];
    if gates.stateful_set_auto_delete_pvc {
        statefulset_rules.push(
            rule(&["update", "delete"])
                .groups(&[LEGACY])
                .resources(&["persistentvolumeclaims"]),
        );
        statefulset_rules.push(
            rule(&["update"])
                .groups(&[LEGACY])
                .resources(&["pods/finalizers"]),
        );
    }
    c.add("statefulset-controller", statefulset_rules);
    c.add(
        "ttl-controller",
        vec![
            rule(&["update", "patch", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["nodes"]),
            events_rule(),
        ],
    );
    controller_roles_later::add_later_controllers(&mut c, gates);
    c
}
