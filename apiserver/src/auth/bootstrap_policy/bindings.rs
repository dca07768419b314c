//! The bindings of `policy.go` (`ClusterRoleBindings()`) and the binding builder every file of
//! the policy uses (`rbacv1helpers.NewClusterBinding`, `NewRoleBinding`).

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};

use super::FeatureGates;
use super::cluster_roles::SYSTEM_NODE;
use super::rules::{
    ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, ALL_UNAUTHENTICATED, KUBE_CONTROLLER_MANAGER,
    KUBE_PROXY, KUBE_SCHEDULER, KUBE_SYSTEM, MONITORING_GROUP, RBAC, SYSTEM_MASTERS,
    bootstrap_metadata,
};

/// A binding being built: the role it grants and the subjects it grants it to.
#[derive(Debug, Clone)]
pub(super) struct Binding {
    /// The binding's name; the role's name unless [`Binding::named`] changes it.
    name: String,
    /// The name of the (Cluster)Role granted.
    role: String,
    /// Who gets the role.
    subjects: Vec<Subject>,
}

/// Starts a binding of the role `role`, named after it.
pub(super) fn binding(role: &str) -> Binding {
    Binding {
        name: role.to_string(),
        role: role.to_string(),
        subjects: Vec::new(),
    }
}

impl Binding {
    /// Names the binding differently from its role.
    pub(super) fn named(mut self, name: &str) -> Binding {
        self.name = name.to_string();
        self
    }

    /// Adds groups (API group `rbac.authorization.k8s.io`).
    pub(super) fn groups(mut self, groups: &[&str]) -> Binding {
        self.subjects
            .extend(groups.iter().map(|g| rbac_subject("Group", g)));
        self
    }

    /// Adds users (API group `rbac.authorization.k8s.io`).
    pub(super) fn users(mut self, users: &[&str]) -> Binding {
        self.subjects
            .extend(users.iter().map(|u| rbac_subject("User", u)));
        self
    }

    /// Adds ServiceAccounts of `namespace`. Their API group is the core group "", which Go
    /// leaves out of the object (`omitempty`), and so does this: `apiGroup` is `None`.
    pub(super) fn service_accounts(mut self, namespace: &str, names: &[&str]) -> Binding {
        self.subjects.extend(names.iter().map(|name| Subject {
            api_group: None,
            kind: "ServiceAccount".to_string(),
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        }));
        self
    }

    /// The ClusterRoleBinding granting the ClusterRole, with bootstrap metadata. Without
    /// subjects, `subjects` is left out.
    pub(super) fn cluster(self) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: bootstrap_metadata(&self.name, None, &[]),
            role_ref: role_ref("ClusterRole", &self.role),
            subjects: non_empty(self.subjects),
        }
    }

    /// The RoleBinding in `namespace` granting the Role of that namespace, with bootstrap
    /// metadata.
    pub(super) fn in_namespace(self, namespace: &str) -> RoleBinding {
        RoleBinding {
            metadata: bootstrap_metadata(&self.name, Some(namespace), &[]),
            role_ref: role_ref("Role", &self.role),
            subjects: non_empty(self.subjects),
        }
    }
}

/// The ClusterRoleBindings of `ClusterRoleBindings()` under `gates`, in Go's order.
pub(super) fn cluster_role_bindings(gates: &FeatureGates) -> Vec<ClusterRoleBinding> {
    let mut bindings = vec![
        binding("cluster-admin").groups(&[SYSTEM_MASTERS]).cluster(),
        binding("system:monitoring")
            .groups(&[MONITORING_GROUP])
            .cluster(),
        binding("system:discovery")
            .groups(&[ALL_AUTHENTICATED])
            .cluster(),
        binding("system:basic-user")
            .groups(&[ALL_AUTHENTICATED])
            .cluster(),
        binding("system:public-info-viewer")
            .groups(&[ALL_AUTHENTICATED, ALL_UNAUTHENTICATED])
            .cluster(),
        binding("system:node-proxier")
            .users(&[KUBE_PROXY])
            .cluster(),
        binding("system:kube-controller-manager")
            .users(&[KUBE_CONTROLLER_MANAGER])
            .cluster(),
        binding("system:kube-dns")
            .service_accounts(KUBE_SYSTEM, &["kube-dns"])
            .cluster(),
        binding("system:kube-scheduler")
            .users(&[KUBE_SCHEDULER])
            .cluster(),
        binding("system:volume-scheduler")
            .users(&[KUBE_SCHEDULER])
            .cluster(),
        // Binding system:node to the system:nodes group is deprecated since 1.7 (the Node
        // authorizer took over): the binding stays, without subjects, so that reconciliation
        // removes the subject from existing clusters.
        binding(SYSTEM_NODE).cluster(),
        // In-cluster workloads read the OIDC discovery endpoints. A ServiceAccount can already
        // learn the issuer from its own token; binding all (un)authenticated users is left to
        // the cluster admin.
        binding("system:service-account-issuer-discovery")
            .groups(&[ALL_SERVICE_ACCOUNTS])
            .cluster(),
    ];
    // ServiceAccounts read ClusterTrustBundle objects.
    if gates.cluster_trust_bundle {
        bindings.push(
            binding("system:cluster-trust-bundle-discovery")
                .groups(&[ALL_SERVICE_ACCOUNTS])
                .cluster(),
        );
    }
    bindings
}

/// A User or Group subject.
fn rbac_subject(kind: &str, name: &str) -> Subject {
    Subject {
        api_group: Some(RBAC.to_string()),
        kind: kind.to_string(),
        name: name.to_string(),
        namespace: None,
    }
}

/// A reference to the RBAC role of this kind and name.
fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
    }
}

/// `None` for no subjects, as Go's `omitempty` leaves them out.
fn non_empty(subjects: Vec<Subject>) -> Option<Vec<Subject>> {
    (!subjects.is_empty()).then_some(subjects)
}
