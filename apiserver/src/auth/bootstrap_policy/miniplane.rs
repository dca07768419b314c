//! What miniplane adds to Kubernetes' bootstrap policy: access for its components to
//! miniplane's own surfaces, and the kubelets' role.
//!
//! - `miniplane:component` (ClusterRole and binding): `post` to the trace collector
//!   (`/miniplane/v1/traces`) and `put` of the work-queue reports
//!   (`/miniplane/v1/components/*`), for the controller-managers, the scheduler and the
//!   kubelets;
//! - `miniplane:admin` (ClusterRole, bound to the group `system:masters` as `cluster-admin`
//!   is): every verb on miniplane's own API, `/miniplane/*` (faults, work queues, labs, the
//!   trace collector); `cluster-admin`'s `nonResourceURLs: ["*"]` grants it too;
//! - `miniplane:viewer` (ClusterRole, bound to no one): reading the traces, the faults, the
//!   work queues, the lab's status and the clock, for `kubectl create clusterrolebinding ...
//!   --clusterrole=miniplane:viewer --user=...`;
//! - `miniplane:faults-reader` (Role and RoleBinding in `kube-system`): reading the
//!   `miniplane-faults` ConfigMap every component watches for the faults in force, and the
//!   `miniplane-load` ConfigMap the kubelets watch for the loads `miniplane load` sets, and
//!   the `miniplane-clock` ConfigMap of a cluster on a virtual clock;
//! - `miniplane:node` (ClusterRoleBinding): the `system:node` ClusterRole for the group
//!   `system:nodes`. Kubernetes bound it so before 1.8; since, the Node authorizer (which
//!   miniplane does not have) lets each kubelet reach its own node's objects;
//! - `miniplane:kubelet-sim` (ClusterRole and binding): the user of the process that simulates
//!   the kubelets. It watches the pods and Nodes of all of them, deletes the Node of a machine
//!   that is removed (as a cloud's node lifecycle controller does), and impersonates each
//!   node's kubelet (`system:node:<name>` in `system:nodes`) for that node's writes. Any user
//!   name may be impersonated (RBAC names no prefixes) but only the group `system:nodes`. It
//!   creates `tokenreviews` and `subjectaccessreviews` itself, as `system:node` may: its
//!   kubelet API checks each caller's token and access with them (one listener for all the
//!   nodes, so as the simulator, not as a node).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

use super::bindings::binding;
use super::rules::{
    AUTHENTICATION, AUTHORIZATION, KUBE_SYSTEM, LEGACY, bootstrap_metadata, cluster_role, rule,
};

/// The component identities: the managers' and the scheduler's users.
const COMPONENT_USERS: &[&str] = &[
    "system:kube-controller-manager",
    "system:kube-scheduler",
    "system:cloud-controller-manager",
];
/// The kubelets' group.
const NODES: &str = "system:nodes";
/// The kubelet simulator's user (`kubelet_sim::USER`).
const KUBELET_SIM: &str = "miniplane:kubelet-sim";

/// The ClusterRoles.
pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    vec![
        cluster_role(
            "miniplane:component",
            vec![
                rule(&["post"]).urls(&["/miniplane/v1/traces"]),
                rule(&["put"]).urls(&["/miniplane/v1/components/*"]),
            ],
        ),
        cluster_role(
            KUBELET_SIM,
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["pods", "nodes"]),
                rule(&["delete"]).groups(&[LEGACY]).resources(&["nodes"]),
                rule(&["impersonate"])
                    .groups(&[LEGACY])
                    .resources(&["users"]),
                rule(&["impersonate"])
                    .groups(&[LEGACY])
                    .resources(&["groups"])
                    .names(&[NODES]),
                // The kubelet API's webhook authentication and authorization (non-mutating
                // creates).
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["tokenreviews"]),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "miniplane:admin",
            vec![rule(&["*"]).urls(&["/miniplane", "/miniplane/*"])],
        ),
        cluster_role(
            "miniplane:viewer",
            vec![rule(&["get"]).urls(&[
                "/miniplane/v1/traces",
                "/miniplane/v1/traces/*",
                "/miniplane/v1/faults",
                "/miniplane/v1/controllers",
                "/miniplane/v1/lab",
                "/miniplane/v1/clock",
            ])],
        ),
    ]
}

/// The ClusterRoleBindings.
pub(super) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        binding("miniplane:component")
            .users(COMPONENT_USERS)
            .users(&[KUBELET_SIM])
            .groups(&[NODES])
            .cluster(),
        binding(KUBELET_SIM).users(&[KUBELET_SIM]).cluster(),
        binding("miniplane:admin")
            .groups(&["system:masters"])
            .cluster(),
        binding("system:node")
            .named("miniplane:node")
            .groups(&[NODES])
            .cluster(),
    ]
}

/// The Roles.
pub(super) fn roles() -> Vec<Role> {
    vec![Role {
        metadata: bootstrap_metadata("miniplane:faults-reader", Some(KUBE_SYSTEM), &[]),
        rules: Some(vec![
            rule(&["get", "list", "watch"])
                .groups(&[LEGACY])
                .resources(&["configmaps"])
                .names(&["miniplane-faults", "miniplane-load", "miniplane-clock"])
                .build(),
        ]),
    }]
}

/// The RoleBindings.
pub(super) fn role_bindings() -> Vec<RoleBinding> {
    vec![
        binding("miniplane:faults-reader")
            .users(COMPONENT_USERS)
            .users(&[KUBELET_SIM])
            .groups(&[NODES])
            .in_namespace(KUBE_SYSTEM),
    ]
}
