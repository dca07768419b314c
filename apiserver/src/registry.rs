//! The resource registry: one row per served resource, and the rows miniplane starts with.
//!
//! Kubernetes wires each resource by hand in `pkg/registry/<group>/<resource>/storage/storage.go`
//! (a `genericregistry.Store` plus a strategy) and installs it in
//! `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go`. Here a resource is only data, a
//! [`ResourceInfo`] row; the handlers, discovery and OpenAPI are all computed from the rows, so
//! adding a resource (or, later, a CRD at run time) is adding a row:
//!
//! ```text
//!   group  version kind        plural       scope      short  subresources     strategy
//!   apps   v1      Deployment  deployments  Namespaced deploy status, scale    Deployment's
//!   ""     v1      Pod         pods         Namespaced po     status, binding… Pod's
//! ```

use crate::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
use crate::service_alloc::ServiceAllocations;
use crate::strategy::{DefaultStrategy, Strategy};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

mod builtin;
pub use builtin::builtin_resources;

/// A subresource served under `.../{name}/{subresource}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subresource {
    /// `/status`: get/update/patch of `.status` only.
    Status,
    /// `/scale`: an `autoscaling/v1 Scale` view of `spec.replicas`.
    Scale,
    /// `pods/binding`: the scheduler's POST of a `Binding`.
    Binding,
    /// `pods/eviction`: a `policy/v1 Eviction` (a delete that honours grace periods).
    Eviction,
    /// `namespaces/finalize`: update of a namespace's `spec.finalizers`.
    Finalize,
    /// `serviceaccounts/token`: the TokenRequest API, a token for the ServiceAccount.
    Token,
    /// `certificatesigningrequests/approval`: a CSR's Approved and Denied conditions.
    Approval,
    /// `pods/ephemeralcontainers`: get/update/patch of a pod's `spec.ephemeralContainers`
    /// only (`kubectl debug`).
    EphemeralContainers,
}

impl Subresource {
    /// The URL segment.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Finalize => "finalize",
            Subresource::Token => "token",
            Subresource::Approval => "approval",
            Subresource::EphemeralContainers => "ephemeralcontainers",
        }
    }

    /// Parses a URL segment.
    pub fn parse(s: &str) -> Option<Subresource> {
        [
            Subresource::Status,
            Subresource::Scale,
            Subresource::Binding,
            Subresource::Eviction,
            Subresource::Finalize,
            Subresource::Token,
            Subresource::Approval,
            Subresource::EphemeralContainers,
        ]
        .into_iter()
        .find(|sub| sub.name() == s)
    }

    /// The kind the subresource speaks, when it differs from the parent's.
    pub fn response_kind(self) -> Option<GroupVersionKind> {
        match self {
            Subresource::Status
            | Subresource::Finalize
            | Subresource::Approval
            | Subresource::EphemeralContainers => None,
            Subresource::Scale => Some(GroupVersionKind::new("autoscaling", "v1", "Scale")),
            Subresource::Binding => Some(GroupVersionKind::new("", "v1", "Binding")),
            Subresource::Eviction => Some(GroupVersionKind::new("policy", "v1", "Eviction")),
            Subresource::Token => Some(GroupVersionKind::new(
                "authentication.k8s.io",
                "v1",
                "TokenRequest",
            )),
        }
    }

    /// The verbs discovery lists for it.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status
            | Subresource::Scale
            | Subresource::Approval
            | Subresource::EphemeralContainers => &["get", "patch", "update"],
            Subresource::Binding | Subresource::Eviction | Subresource::Token => &["create"],
            Subresource::Finalize => &["update"],
        }
    }
}

/// How a delete proceeds for a kind (the per-kind parts of `genericregistry.Store.Delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletePolicy {
    /// Delete now unless finalizers remain.
    Standard,
    /// Pods: graceful deletion when bound to a node (`pkg/registry/core/pod/strategy.go`
    /// `CheckGracefulDelete`).
    GracefulPod,
    /// Namespaces: mark `Terminating` and wait for `spec.finalizers` to empty
    /// (`pkg/registry/core/namespace/storage/storage.go`).
    Namespace,
}

/// The standard verbs of a resource.
pub const STANDARD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource.
#[derive(Clone)]
pub struct ResourceInfo {
    /// Group, version and plural name.
    pub gvr: GroupVersionResource,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
    /// Lower-case singular name, e.g. `deployment`.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// `kubectl get deploy` names.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Verbs served on the main resource.
    pub verbs: Vec<String>,
    /// Subresources served.
    pub subresources: Vec<Subresource>,
    /// How deletion proceeds.
    pub delete_policy: DeletePolicy,
    /// Whether a delete answers with the deleted object rather than a `Status`: the
    /// registries with `ReturnDeletedObject: true` in Kubernetes (`pkg/registry`): pods,
    /// namespaces, services and serviceaccounts among the kinds served here.
    pub return_deleted_object: bool,
    /// Whether PUT to a missing name creates it (`AllowCreateOnUpdate`).
    pub allow_create_on_update: bool,
    /// The cluster IP and node port allocators a write of this kind checks against (the
    /// Service registry's, `crate::service_alloc`); set by the server for `services`.
    pub allocations: Option<Arc<ServiceAllocations>>,
    /// Whether `.status` written on create is dropped (`PrepareForCreate` of most kinds with a
    /// status subresource; nodes keep theirs).
    pub reset_status_on_create: bool,
    /// The kind's strategy.
    pub strategy: Arc<dyn Strategy>,
    /// The OpenAPI v3 schema of a custom resource (its version's `openAPIV3Schema`); `None`
    /// for built-in kinds, whose schemas come from `k8s-openapi`.
    pub openapi_schema: Option<Arc<serde_json::Value>>,
    /// The CustomResourceDefinition that serves this row (`None` for built-in rows).
    pub crd: Option<String>,
    /// Where `/scale` finds replicas in a custom resource; `None` for built-in kinds
    /// (`spec.replicas`, `status.replicas`, the selector in `spec.selector`).
    pub scale: Option<ScalePaths>,
    /// Whether its objects may nest deeper than a worker's stack can take (a custom resource
    /// that preserves unknown fields somewhere): its requests and its watch cache run on a
    /// large stack (`crate::deep`).
    pub deep_objects: bool,
    /// Whether the row's CRD is being deleted: its custom resources are still served, but
    /// no new one may be created.
    pub terminating: bool,
    /// The `Warning` every request of a deprecated kind is answered with
    /// (`deprecation.WarningMessage` from the type's `APILifecycleDeprecated`), e.g. core/v1
    /// Endpoints since 1.33.
    pub deprecation: Option<&'static str>,
}

/// The paths a custom resource's `/scale` subresource reads and writes
/// (`CustomResourceSubresourceScale`), as JSON paths like `.spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// `statusReplicasPath`, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// `labelSelectorPath`: a string field with the serialized selector, e.g. `.status.selector`.
    pub label_selector: Option<String>,
}

impl std::fmt::Debug for ResourceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceInfo")
            .field("gvr", &self.gvr)
            .field("kind", &self.kind)
            .field("namespaced", &self.namespaced)
            .finish_non_exhaustive()
    }
}

impl ResourceInfo {
    /// A row with Kubernetes' defaults: standard verbs, no subresources, a `DefaultStrategy`.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        let gvk = GroupVersionKind::new(group, version, kind);
        ResourceInfo {
            gvr: GroupVersionResource::new(group, version, plural),
            kind: kind.to_string(),
            singular: kind.to_lowercase(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: STANDARD_VERBS.iter().map(|v| v.to_string()).collect(),
            subresources: Vec::new(),
            delete_policy: DeletePolicy::Standard,
            return_deleted_object: false,
            allocations: None,
            allow_create_on_update: false,
            reset_status_on_create: false,
            strategy: Arc::new(DefaultStrategy { gvk }),
            openapi_schema: None,
            crd: None,
            scale: None,
            deep_objects: false,
            terminating: false,
            deprecation: None,
        }
    }

    /// Sets the short names (`kubectl get deploy`).
    pub fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    fn create_on_update(mut self) -> Self {
        self.allow_create_on_update = true;
        self
    }

    fn in_all(mut self) -> Self {
        self.categories = vec!["all".to_string()];
        self
    }

    /// Sets the subresources served; a `status` subresource also resets status on create.
    pub fn with(mut self, subs: &[Subresource]) -> Self {
        self.subresources = subs.to_vec();
        self.reset_status_on_create = subs.contains(&Subresource::Status);
        self
    }

    /// The kind's group/version/kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.gvr.group, &self.gvr.version, &self.kind)
    }

    /// The group/version.
    pub fn group_version(&self) -> GroupVersion {
        self.gvr.group_version()
    }

    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        self.group_version().api_version()
    }

    /// `DeploymentList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether the subresource is served.
    pub fn has(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// Whether the verb is served on the main resource.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether writes keep spec and status apart (a status subresource).
    pub fn has_status(&self) -> bool {
        self.has(Subresource::Status)
    }
}

/// The set of served resources, shared by every request. Reads take a snapshot (an `Arc` of
/// the rows), so a row added at run time is seen by the next request and never half-way.
#[derive(Debug, Default)]
pub struct Registry {
    rows: RwLock<Arc<Vec<Arc<ResourceInfo>>>>,
    /// For each resource served for a CRD, cancelled when it stops being served: its watches
    /// end then, as kube-apiserver's `crdHandler` stops a removed CRD's storage (and with it
    /// the watch cache its watches read from).
    served: Mutex<HashMap<GroupVersionResource, CancellationToken>>,
}

impl Registry {
    /// A registry with the built-in resources.
    pub fn builtin() -> Self {
        let reg = Registry::default();
        for row in builtin_resources() {
            reg.add(row);
        }
        reg
    }

    /// Adds (or replaces, by group/version/plural) a resource.
    pub fn add(&self, info: ResourceInfo) {
        let mut guard = self.rows.write().unwrap_or_else(|e| e.into_inner());
        if info.crd.is_some() {
            self.served
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(info.gvr.clone())
                .or_default();
        }
        let mut rows: Vec<Arc<ResourceInfo>> = guard.as_ref().clone();
        rows.retain(|r| r.gvr != info.gvr);
        rows.push(Arc::new(info));
        *guard = Arc::new(rows);
    }

    /// Changes the row of `gv`/`plural` in place (keeping its position); false if none.
    pub fn modify(
        &self,
        gv: &GroupVersion,
        plural: &str,
        change: impl FnOnce(&mut ResourceInfo),
    ) -> bool {
        let mut guard = self.rows.write().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<Arc<ResourceInfo>> = guard.as_ref().clone();
        let Some(row) = rows
            .iter_mut()
            .find(|r| r.group_version() == *gv && r.gvr.resource == plural)
        else {
            return false;
        };
        let mut changed = row.as_ref().clone();
        change(&mut changed);
        *row = Arc::new(changed);
        *guard = Arc::new(rows);
        true
    }

    /// Replaces every row served for a CustomResourceDefinition by `rows` at once (the CRD
    /// controller's view of the established CRDs), leaving built-in rows alone. Rows keep the
    /// order they are given in, after the built-in ones.
    ///
    /// A resource no longer among them stops being served: [`Registry::until_unserved`]'s
    /// token for it is cancelled.
    pub fn set_custom(&self, rows: Vec<ResourceInfo>) {
        let mut guard = self.rows.write().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Arc<ResourceInfo>> =
            guard.iter().filter(|r| r.crd.is_none()).cloned().collect();
        for row in rows {
            if !out.iter().any(|r| r.gvr == row.gvr) {
                out.push(Arc::new(row));
            }
        }
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        served.retain(|gvr, token| {
            let kept = out.iter().any(|r| r.crd.is_some() && &r.gvr == gvr);
            if !kept {
                token.cancel();
            }
            kept
        });
        for row in out.iter().filter(|r| r.crd.is_some()) {
            served.entry(row.gvr.clone()).or_default();
        }
        *guard = Arc::new(out);
    }

    /// Cancelled when the resource of `info` stops being served (its CRD deleted, or the
    /// version no longer served); `None` for a built-in resource, which always is. A
    /// custom resource that is already gone gets a cancelled token.
    pub fn until_unserved(&self, info: &ResourceInfo) -> Option<CancellationToken> {
        info.crd.as_ref()?;
        let served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        Some(served.get(&info.gvr).cloned().unwrap_or_else(|| {
            let gone = CancellationToken::new();
            gone.cancel();
            gone
        }))
    }

    /// Every row, in registration order.
    pub fn snapshot(&self) -> Arc<Vec<Arc<ResourceInfo>>> {
        self.rows.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The row for a group/version/plural.
    pub fn lookup(&self, gv: &GroupVersion, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.snapshot()
            .iter()
            .find(|r| {
                r.gvr.group == gv.group && r.gvr.version == gv.version && r.gvr.resource == plural
            })
            .cloned()
    }

    /// Whether any resource is served in this group/version.
    pub fn serves(&self, gv: &GroupVersion) -> bool {
        self.snapshot().iter().any(|r| r.group_version() == *gv)
    }

    /// The served group/versions, core first, then groups in registration order.
    pub fn group_versions(&self) -> Vec<GroupVersion> {
        let mut out: Vec<GroupVersion> = Vec::new();
        for r in self.snapshot().iter() {
            let gv = r.group_version();
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
        out.sort_by_key(|gv| !gv.group.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rows_carry_kubernetes_names() {
        let reg = Registry::builtin();
        let d = reg
            .lookup(&GroupVersion::new("apps", "v1"), "deployments")
            .expect("deployments served");
        assert_eq!(d.short_names, vec!["deploy"]);
        assert!(d.has(Subresource::Scale));
        assert!(d.categories.contains(&"all".to_string()));
        let ns = reg
            .lookup(&GroupVersion::new("", "v1"), "namespaces")
            .expect("namespaces served");
        assert!(!ns.namespaced);
        assert_eq!(reg.group_versions()[0], GroupVersion::new("", "v1"));
    }

    #[test]
    fn rbac_rows_are_served_as_kubernetes_discovers_them() {
        let reg = Registry::builtin();
        let gv = GroupVersion::new("rbac.authorization.k8s.io", "v1");
        let rows: Vec<(String, String, bool)> = reg
            .snapshot()
            .iter()
            .filter(|r| r.group_version() == gv)
            .map(|r| (r.gvr.resource.clone(), r.singular.clone(), r.namespaced))
            .collect();
        let row = |plural: &str, singular: &str, namespaced| {
            (plural.to_owned(), singular.to_owned(), namespaced)
        };
        assert_eq!(
            rows,
            [
                row("clusterrolebindings", "clusterrolebinding", false),
                row("clusterroles", "clusterrole", false),
                row("rolebindings", "rolebinding", true),
                row("roles", "role", true),
            ]
        );
        for plural in [
            "clusterrolebindings",
            "clusterroles",
            "rolebindings",
            "roles",
        ] {
            let r = reg.lookup(&gv, plural).expect("served");
            assert!(
                r.short_names.is_empty() && r.categories.is_empty(),
                "{plural}"
            );
            assert!(
                r.subresources.is_empty() && r.allow_create_on_update,
                "{plural}"
            );
            assert_eq!(r.verbs, STANDARD_VERBS, "{plural}");
            assert_eq!(r.strategy.gvk(), r.gvk(), "{plural} has its own strategy");
        }
    }

    #[test]
    fn rows_can_be_added_at_run_time() {
        let reg = Registry::builtin();
        let gv = GroupVersion::new("example.com", "v1");
        assert!(!reg.serves(&gv));
        reg.add(ResourceInfo::new(
            "example.com",
            "v1",
            "Widget",
            "widgets",
            true,
        ));
        assert!(reg.lookup(&gv, "widgets").is_some());
    }

    #[test]
    fn a_custom_resource_no_longer_served_cancels_its_token() {
        let reg = Registry::builtin();
        let row = |plural: &str| ResourceInfo {
            crd: Some(format!("{plural}.example.com")),
            ..ResourceInfo::new("example.com", "v1", "Widget", plural, true)
        };
        // A row added ahead of the controller's pass (served before it is reported
        // Established) is served from then on.
        reg.add(row("widgets"));
        let widgets = reg.until_unserved(&row("widgets")).unwrap();
        assert!(!widgets.is_cancelled());
        reg.set_custom(vec![row("widgets"), row("gadgets")]);
        let gadgets = reg.until_unserved(&row("gadgets")).unwrap();
        // Each pass of the CRD controller sets the rows again: a kept row keeps its token.
        reg.set_custom(vec![row("widgets"), row("gadgets")]);
        assert!(!widgets.is_cancelled() && !gadgets.is_cancelled());
        reg.set_custom(vec![row("widgets")]);
        assert!(gadgets.is_cancelled(), "gadgets are no longer served");
        assert!(!widgets.is_cancelled());
        assert!(
            reg.until_unserved(&row("gadgets")).unwrap().is_cancelled(),
            "a watch that starts after the removal ends at once"
        );
        let pods = reg.lookup(&GroupVersion::new("", "v1"), "pods").unwrap();
        assert!(
            reg.until_unserved(&pods).is_none(),
            "built-ins are always served"
        );
    }
}
