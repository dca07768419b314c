//! Kubernetes' RBAC bootstrap policy as data: the ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings the API server reconciles at every start, so that `cluster-admin`, `admin`,
//! `edit`, `view`, the `system:*` roles of the components and the controllers' roles exist in
//! every cluster.
//!
//! Mirrors `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/` of Kubernetes 1.33, written as
//! code the way Go writes it (`rule(verbs).groups(..).resources(..)` for
//! `rbacv1helpers.NewRule(verbs...).Groups(...).Resources(...).RuleOrDie()`):
//!
//! | file | Go |
//! | --- | --- |
//! | `rules.rs` | the verb sets, group names, `addDefaultMetadata`, `eventsRule`, `PolicyRuleBuilder` |
//! | `cluster_roles.rs` | `policy.go`: `ClusterRoles()`, `viewRules`, `editRules` |
//! | `component_rules.rs` | `policy.go`: `NodeRules()` and the kubelet API, kube-proxy and scheduler rules |
//! | `bindings.rs` | `policy.go`: `ClusterRoleBindings()`; the binding builders |
//! | `controller_roles.rs` | `controller_policy.go`: `buildControllerRoles()`, to `ttl-controller` |
//! | `controller_roles_later.rs` | `controller_policy.go`: the roles registered after, and DRA's |
//! | `namespace_roles.rs` | `namespace_policy.go`: `NamespaceRoles()`, `NamespaceRoleBindings()` |
//! | `cloud_controller_manager.rs` | none: miniplane's addition, see below |
//!
//! Every object carries the label `kubernetes.io/bootstrapping: rbac-defaults` and the
//! annotation `rbac.authorization.kubernetes.io/autoupdate: "true"`, and every rule's lists
//! are sorted as `RuleOrDie` sorts them, so the output equals Kubernetes' golden files
//! (`bootstrappolicy/testdata/*.yaml`) object for object and rule for rule.
//!
//! Differences from Kubernetes:
//! - Feature gates are fixed at Kubernetes 1.33's defaults ([`FeatureGates::KUBERNETES_1_33`]),
//!   which are what the golden files were generated with. Note that not every beta gate is on:
//!   the beta gates of beta APIs (`DynamicResourceAllocation`, `ClusterTrustBundle`,
//!   `VolumeAttributesClass`) are off by default, so their rules and roles are left out, as
//!   are those of the alpha gates. Every gated branch is still written, behind its flag.
//! - `NamespaceRoles()` and `NamespaceRoleBindings()` are maps by namespace in Go; here they are
//!   one list each, `kube-system`'s objects then `kube-public`'s, each with its namespace set.
//! - A ServiceAccount subject's API group is the core group, which Go leaves out of the object
//!   (`omitempty`): its `api_group` is `None`, as in the golden files.
//! - [`cloud_controller_manager`] is not Kubernetes' bootstrap policy (the cloud-controller-
//!   manager ships its own manifests): it is the ClusterRole the project's seed article shows,
//!   for miniplane's CCM, which authenticates as the user `system:cloud-controller-manager`.
//! - The reconciler's migration tables (`ClusterRolesToAggregate`,
//!   `ClusterRoleBindingsToSplit`) are not mirrored.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

mod bindings;
mod cloud_controller_manager;
mod cluster_roles;
mod component_rules;
mod controller_roles;
mod controller_roles_later;
mod miniplane;
mod namespace_roles;
mod rules;
#[cfg(test)]
mod tests;

/// The feature gates the bootstrap policy depends on (names as in `pkg/features`,
/// `k8s.io/apiserver/pkg/features` and `k8s.io/component-base/zpages/features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FeatureGates {
    /// `DynamicResourceAllocation` (beta, off by default in 1.33).
    dynamic_resource_allocation: bool,
    /// `DRADeviceTaints` (alpha).
    dra_device_taints: bool,
    /// `ClusterTrustBundle` (beta, off by default in 1.33).
    cluster_trust_bundle: bool,
    /// `KubeletServiceAccountTokenForCredentialProviders` (alpha).
    kubelet_service_account_token_for_credential_providers: bool,
    /// `KubeletFineGrainedAuthz` (beta, on).
    kubelet_fine_grained_authz: bool,
    /// `MultiCIDRServiceAllocator` (GA in 1.33).
    multi_cidr_service_allocator: bool,
    /// `ComponentFlagz` (alpha).
    component_flagz: bool,
    /// `ComponentStatusz` (alpha).
    component_statusz: bool,
    /// `VolumeAttributesClass` (beta, off by default in 1.33).
    volume_attributes_class: bool,
    /// `StorageVersionAPI` (alpha).
    storage_version_api: bool,
    /// `APIServerIdentity` (beta, on).
    api_server_identity: bool,
    /// `StorageVersionMigrator` (alpha).
    storage_version_migrator: bool,
    /// `SELinuxChangePolicy` (beta, on).
    selinux_change_policy: bool,
    /// `StatefulSetAutoDeletePVC` (GA, locked on).
    stateful_set_auto_delete_pvc: bool,
}

impl FeatureGates {
    /// Kubernetes 1.33's defaults.
    const KUBERNETES_1_33: FeatureGates = FeatureGates {
        dynamic_resource_allocation: false,
        dra_device_taints: false,
        cluster_trust_bundle: false,
        kubelet_service_account_token_for_credential_providers: false,
        kubelet_fine_grained_authz: true,
        multi_cidr_service_allocator: true,
        component_flagz: false,
        component_statusz: false,
        volume_attributes_class: false,
        storage_version_api: false,
        api_server_identity: true,
        storage_version_migrator: false,
        selinux_change_policy: true,
        stateful_set_auto_delete_pvc: true,
    };
}

/// The ClusterRoles Kubernetes reconciles at start (policy.go `ClusterRoles()` + the
/// controller roles), in a stable order: policy.go's, then controller_policy.go's.
pub(crate) fn cluster_roles() -> Vec<ClusterRole> {
    cluster_roles_with(&FeatureGates::KUBERNETES_1_33)
}

/// The ClusterRoleBindings (`ClusterRoleBindings()` + the controller role bindings), in the
/// same order as their roles.
pub(crate) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    cluster_role_bindings_with(&FeatureGates::KUBERNETES_1_33)
}

/// The namespaced Roles (`NamespaceRoles()`): `kube-system`'s, then `kube-public`'s.
pub(crate) fn namespace_roles() -> Vec<Role> {
    namespace_roles::namespace_roles()
}

/// The namespaced RoleBindings (`NamespaceRoleBindings()`): `kube-system`'s, then
/// `kube-public`'s.
pub(crate) fn namespace_role_bindings() -> Vec<RoleBinding> {
    namespace_roles::namespace_role_bindings()
}

/// miniplane's own additions ([`miniplane`]): ClusterRoles, ClusterRoleBindings, Roles and
/// RoleBindings.
pub(crate) fn miniplane() -> (
    Vec<ClusterRole>,
    Vec<ClusterRoleBinding>,
    Vec<Role>,
    Vec<RoleBinding>,
) {
    (
        miniplane::cluster_roles(),
        miniplane::cluster_role_bindings(),
        miniplane::roles(),
        miniplane::role_bindings(),
    )
}

/// The cloud-controller-manager's ClusterRole `system:cloud-controller-manager` and its
/// ClusterRoleBinding of the same name, to the user `system:cloud-controller-manager` and the
/// ServiceAccount `kube-system/cloud-controller-manager`.
pub(crate) fn cloud_controller_manager() -> (ClusterRole, ClusterRoleBinding) {
    cloud_controller_manager::cloud_controller_manager()
}

/// [`cluster_roles`] under `gates`.
fn cluster_roles_with(gates: &FeatureGates) -> Vec<ClusterRole> {
    let mut roles = cluster_roles::cluster_roles(gates);
    roles.extend(controller_roles::controller_roles(gates).roles);
    roles
}

/// [`cluster_role_bindings`] under `gates`.
fn cluster_role_bindings_with(gates: &FeatureGates) -> Vec<ClusterRoleBinding> {
    let mut bindings = bindings::cluster_role_bindings(gates);
    bindings.extend(controller_roles::controller_roles(gates).bindings);
    bindings
}
