//! The vocabulary the policy is written in: API group names, verb sets, well-known user and
//! group names, the `PolicyRule` builder and the metadata every bootstrap object carries.
//!
//! Mirrors the top of `policy.go` (`Write`, `Read`, ..., the group constants,
//! `addDefaultMetadata`, `eventsRule`) and `pkg/apis/rbac/v1/helpers.go`'s `PolicyRuleBuilder`.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The label on every bootstrap object (`bootstrappolicy.Label`).
pub(super) const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";
/// The value of [`BOOTSTRAPPING_LABEL`].
pub(super) const BOOTSTRAPPING_VALUE: &str = "rbac-defaults";
/// The annotation telling the API server to reconcile the object at every start
/// (`rbacv1.AutoUpdateAnnotationKey`).
pub(super) const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The verbs that change objects (`bootstrappolicy.Write`).
pub(super) const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
/// The verbs that read and change objects (`bootstrappolicy.ReadWrite`).
pub(super) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
/// The verbs that read objects (`bootstrappolicy.Read`).
pub(super) const READ: &[&str] = &["get", "list", "watch"];
/// The verbs that read and update objects (`bootstrappolicy.ReadUpdate`).
pub(super) const READ_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];

/// The core ("legacy") API group.
pub(super) const LEGACY: &str = "";
/// `apps`.
pub(super) const APPS: &str = "apps";
/// `authentication.k8s.io`.
pub(super) const AUTHENTICATION: &str = "authentication.k8s.io";
/// `authorization.k8s.io`.
pub(super) const AUTHORIZATION: &str = "authorization.k8s.io";
/// `autoscaling`.
pub(super) const AUTOSCALING: &str = "autoscaling";
/// `batch`.
pub(super) const BATCH: &str = "batch";
/// `certificates.k8s.io`.
pub(super) const CERTIFICATES: &str = "certificates.k8s.io";
/// `coordination.k8s.io`.
pub(super) const COORDINATION: &str = "coordination.k8s.io";
/// `discovery.k8s.io`.
pub(super) const DISCOVERY: &str = "discovery.k8s.io";
/// `extensions`.
pub(super) const EXTENSIONS: &str = "extensions";
/// `policy`.
pub(super) const POLICY: &str = "policy";
/// `rbac.authorization.k8s.io`, also the API group of RBAC subjects and role references.
pub(super) const RBAC: &str = "rbac.authorization.k8s.io";
/// `resource.k8s.io` (dynamic resource allocation).
pub(super) const RESOURCE: &str = "resource.k8s.io";
/// `storage.k8s.io`.
pub(super) const STORAGE: &str = "storage.k8s.io";
/// `node.k8s.io`.
pub(super) const NODE: &str = "node.k8s.io";
/// `metrics.k8s.io`.
pub(super) const RESOURCE_METRICS: &str = "metrics.k8s.io";
/// `custom.metrics.k8s.io`.
pub(super) const CUSTOM_METRICS: &str = "custom.metrics.k8s.io";
/// `external.metrics.k8s.io`.
pub(super) const EXTERNAL_METRICS: &str = "external.metrics.k8s.io";
/// `networking.k8s.io`.
pub(super) const NETWORKING: &str = "networking.k8s.io";
/// `events.k8s.io`.
pub(super) const EVENTS: &str = "events.k8s.io";
/// `internal.apiserver.k8s.io`.
pub(super) const INTERNAL_API_SERVER: &str = "internal.apiserver.k8s.io";
/// `admissionregistration.k8s.io`.
pub(super) const ADMISSION_REGISTRATION: &str = "admissionregistration.k8s.io";
/// `storagemigration.k8s.io`.
pub(super) const STORAGE_VERSION_MIGRATION: &str = "storagemigration.k8s.io";

/// The group of cluster administrators (`user.SystemPrivilegedGroup`).
pub(super) const SYSTEM_MASTERS: &str = "system:masters";
/// The group allowed to read the monitoring endpoints (`user.MonitoringGroup`).
pub(super) const MONITORING_GROUP: &str = "system:monitoring";
/// The group of every authenticated user (`user.AllAuthenticated`).
pub(super) const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials (`user.AllUnauthenticated`).
pub(super) const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group of every ServiceAccount (`serviceaccount.AllServiceAccountsGroup`).
pub(super) const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// kube-proxy's user (`user.KubeProxy`).
pub(super) const KUBE_PROXY: &str = "system:kube-proxy";
/// The kube-controller-manager's user (`user.KubeControllerManager`).
pub(super) const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
/// The kube-scheduler's user (`user.KubeScheduler`).
pub(super) const KUBE_SCHEDULER: &str = "system:kube-scheduler";

/// The namespace of the control plane's own objects (`metav1.NamespaceSystem`).
pub(super) const KUBE_SYSTEM: &str = "kube-system";
/// The namespace readable by everyone (`metav1.NamespacePublic`).
pub(super) const KUBE_PUBLIC: &str = "kube-public";

/// The signer of legacy CSRs (`capi.LegacyUnknownSignerName`).
pub(super) const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";
/// The signer of kubelet serving certificates (`capi.KubeletServingSignerName`).
pub(super) const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The signer of API server client certificates (`capi.KubeAPIServerClientSignerName`).
pub(super) const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The signer of kubelet client certificates (`capi.KubeAPIServerClientKubeletSignerName`).
pub(super) const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";

/// A `PolicyRule` being built, like `rbacv1helpers.NewRule(verbs...).Groups(...)...`.
///
/// [`Rule::build`] sorts every list, as Go's `RuleOrDie` does, so the rules compare equal to
/// the objects Kubernetes reconciles.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    /// The verbs.
    verbs: Vec<String>,
    /// The API groups (resource rules).
    groups: Vec<String>,
    /// The resources, `resource/subresource` for subresources (resource rules).
    resources: Vec<String>,
    /// The object names the rule is limited to (empty: any).
    names: Vec<String>,
    /// The non-resource URLs (non-resource rules).
    urls: Vec<String>,
}

/// Starts a rule allowing `verbs` (`rbacv1helpers.NewRule`).
pub(super) fn rule(verbs: &[&str]) -> Rule {
    Rule {
        verbs: owned(verbs),
        groups: Vec::new(),
        resources: Vec::new(),
        names: Vec::new(),
        urls: Vec::new(),
    }
}

impl Rule {
    /// Adds API groups.
    pub(super) fn groups(mut self, groups: &[&str]) -> Rule {
        self.groups.extend(owned(groups));
        self
    }

    /// Adds resources.
    pub(super) fn resources(mut self, resources: &[&str]) -> Rule {
        self.resources.extend(owned(resources));
        self
    }

    /// Limits the rule to objects of these names.
    pub(super) fn names(mut self, names: &[&str]) -> Rule {
        self.names.extend(owned(names));
        self
    }

    /// Adds non-resource URLs (a rule has either these or groups and resources).
    pub(super) fn urls(mut self, urls: &[&str]) -> Rule {
        self.urls.extend(owned(urls));
        self
    }

    /// The `PolicyRule`, each list sorted as `RuleOrDie` sorts it; empty lists are left out.
    pub(super) fn build(mut self) -> PolicyRule {
        self.verbs.sort();
        self.groups.sort();
        self.resources.sort();
        self.names.sort();
        self.urls.sort();
        self.build_as_written()
    }

    /// The `PolicyRule` with every list in the order written.
    pub(super) fn build_as_written(self) -> PolicyRule {
        PolicyRule {
            verbs: self.verbs,
            api_groups: non_empty(self.groups),
            resources: non_empty(self.resources),
            resource_names: non_empty(self.names),
            non_resource_urls: non_empty(self.urls),
        }
    }
}

/// Builds each rule (sorted, see [`Rule::build`]).
pub(super) fn build_all(rules: Vec<Rule>) -> Vec<PolicyRule> {
    rules.into_iter().map(Rule::build).collect()
}

/// Creating and updating Events of both Event APIs (`eventsRule()`).
pub(super) fn events_rule() -> Rule {
    rule(&["create", "update", "patch"])
        .groups(&[LEGACY, EVENTS])
        .resources(&["events"])
}

/// The metadata of a bootstrap object (`addDefaultMetadata`): its name and namespace, the
/// bootstrapping label plus `extra_labels`, and the autoupdate annotation.
pub(super) fn bootstrap_metadata(
    name: &str,
    namespace: Option<&str>,
    extra_labels: &[(&str, &str)],
) -> ObjectMeta {
    let mut labels: BTreeMap<String, String> = extra_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.insert(
        BOOTSTRAPPING_LABEL.to_string(),
        BOOTSTRAPPING_VALUE.to_string(),
    );
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(
            AUTOUPDATE_ANNOTATION.to_string(),
            "true".to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// A ClusterRole with bootstrap metadata and these rules (built with [`Rule::build`]).
pub(super) fn cluster_role(name: &str, rules: Vec<Rule>) -> ClusterRole {
    ClusterRole {
        metadata: bootstrap_metadata(name, None, &[]),
        rules: Some(build_all(rules)),
        aggregation_rule: None,
    }
}

/// The strings, owned.
fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `None` for an empty list, as Go's `omitempty` leaves it out.
fn non_empty(items: Vec<String>) -> Option<Vec<String>> {
    (!items.is_empty()).then_some(items)
}
