//! The rows miniplane serves from start: every built-in kind with Kubernetes' short names,
//! categories and subresources, and the strategy of its kind (`builtin_strategies`).

use super::{DeletePolicy, ResourceInfo, Subresource};
use crate::apiextensions::definition::{CustomResourceDefinitionRules, GROUP, RESOURCE};
use crate::gvk::GroupVersionKind;
use crate::strategy::rbac::GROUP as RBAC;
use crate::strategy::typed::Typed;
use crate::strategy::{Strategy, builtin_strategies};
use std::collections::HashMap;
use std::sync::Arc;

/// The rows miniplane serves from start, with Kubernetes' short names and categories.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    use Subresource::*;
    let mut pods = ResourceInfo::new("", "v1", "Pod", "pods", true)
        .short(&["po"])
        .in_all()
        .with(&[Status, Binding, EphemeralContainers, Eviction]);
    pods.delete_policy = DeletePolicy::GracefulPod;
    pods.return_deleted_object = true;
    let mut namespaces = ResourceInfo::new("", "v1", "Namespace", "namespaces", false)
        .short(&["ns"])
        .with(&[Status, Finalize]);
    namespaces.delete_policy = DeletePolicy::Namespace;
    namespaces.return_deleted_object = true;
    namespaces.reset_status_on_create = false;
    // As in Kubernetes, namespaces are deleted one by one (`kubectl delete ns --all` lists
    // and deletes each): their REST storage has no DeleteCollection.
    namespaces.verbs.retain(|v| v != "deletecollection");
    let mut nodes = ResourceInfo::new("", "v1", "Node", "nodes", false)
        .short(&["no"])
        .with(&[Status]);
    nodes.reset_status_on_create = false;
    let mut services = ResourceInfo::new("", "v1", "Service", "services", true)
        .short(&["svc"])
        .in_all()
        .with(&[Status]);
    services.verbs.retain(|v| v != "deletecollection");
    services.return_deleted_object = true;
    let mut endpoints = ResourceInfo::new("", "v1", "Endpoints", "endpoints", true).short(&["ep"]);
    endpoints.singular = "endpoints".into();
    endpoints.deprecation =
        Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice");
    // `.create_on_update()` marks the kinds whose Kubernetes strategy has
    // `AllowCreateOnUpdate() == true`: a PUT to a missing name creates it.
    let leases =
        ResourceInfo::new("coordination.k8s.io", "v1", "Lease", "leases", true).create_on_update();
    let core_events = ResourceInfo::new("", "v1", "Event", "events", true)
        .short(&["ev"])
        .create_on_update();
    let events = ResourceInfo::new("events.k8s.io", "v1", "Event", "events", true)
        .short(&["ev"])
        .create_on_update();
    let mut service_accounts =
        ResourceInfo::new("", "v1", "ServiceAccount", "serviceaccounts", true)
            .with(&[Token])
            .short(&["sa"])
            .create_on_update();
    service_accounts.return_deleted_object = true;
    let services = services.create_on_update();
    let endpoints = endpoints.create_on_update();
    let mut rows = vec![
        namespaces,
        pods,
        nodes,
        core_events,
        ResourceInfo::new("", "v1", "ConfigMap", "configmaps", true).short(&["cm"]),
        ResourceInfo::new("", "v1", "Secret", "secrets", true),
        services,
        endpoints,
        service_accounts,
        ResourceInfo::new(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            true,
        )
        .short(&["rc"])
        .in_all()
        .with(&[Status, Scale]),
        ResourceInfo::new("apps", "v1", "Deployment", "deployments", true)
            .short(&["deploy"])
            .in_all()
            .with(&[Status, Scale]),
        ResourceInfo::new("apps", "v1", "ReplicaSet", "replicasets", true)
            .short(&["rs"])
            .in_all()
            .with(&[Status, Scale]),
        ResourceInfo::new("apps", "v1", "DaemonSet", "daemonsets", true)
            .short(&["ds"])
            .in_all()
            .with(&[Status]),
        ResourceInfo::new("apps", "v1", "StatefulSet", "statefulsets", true)
            .short(&["sts"])
            .in_all()
            .with(&[Status, Scale]),
        // `kubectl get controllerrevisions`: no short name, no category.
        ResourceInfo::new(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            true,
        ),
        leases,
        events,
        // `kubectl get endpointslices`: no short name, no category.
        ResourceInfo::new(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            true,
        ),
        ResourceInfo::new(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        )
        .short(&["pdb"])
        .with(&[Status]),
        // `kubectl get pc`: cluster-scoped, no category.
        ResourceInfo::new(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
        )
        .short(&["pc"]),
        // autoscaling: stored as v2 (the preferred version, listed first), served as v1 too
        // through its conversion (`crate::handlers::converted`).
        ResourceInfo::new(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
        )
        .short(&["hpa"])
        .in_all()
        .with(&[Status]),
        ResourceInfo::new(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
        )
        .short(&["hpa"])
        .in_all()
        .with(&[Status]),
        ResourceInfo::new("batch", "v1", "Job", "jobs", true)
            .in_all()
            .with(&[Status]),
        ResourceInfo::new("batch", "v1", "CronJob", "cronjobs", true)
            .short(&["cj"])
            .in_all()
            .with(&[Status]),
        // rbac.authorization.k8s.io: no short names, no categories, in the order Kubernetes'
        // discovery lists them; every RBAC strategy allows create on update.
        ResourceInfo::new(
            RBAC,
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
        )
        .create_on_update(),
        ResourceInfo::new(RBAC, "v1", "ClusterRole", "clusterroles", false).create_on_update(),
        ResourceInfo::new(RBAC, "v1", "RoleBinding", "rolebindings", true).create_on_update(),
        ResourceInfo::new(RBAC, "v1", "Role", "roles", true).create_on_update(),
        // certificates.k8s.io: `kubectl get csr`; `/approval` for `kubectl certificate
        // approve|deny`, `/status` for the signers.
        ResourceInfo::new(
            crate::strategy::certificates::GROUP,
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
        )
        .short(&["csr"])
        .with(&[Status, Approval]),
        // Persistent storage: `kubectl get pv,pvc,sc`.
        ResourceInfo::new("", "v1", "PersistentVolume", "persistentvolumes", false)
            .short(&["pv"])
            .with(&[Status]),
        ResourceInfo::new(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
        )
        .short(&["pvc"])
        .with(&[Status]),
        ResourceInfo::new(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
        )
        .short(&["sc"]),
    ];
    let strategies: HashMap<GroupVersionKind, Arc<dyn Strategy>> = builtin_strategies()
        .into_iter()
        .map(|s| (s.gvk(), s))
        .collect();
    for row in &mut rows {
        if let Some(s) = strategies.get(&row.gvk()) {
            row.strategy = s.clone();
        }
    }
    // CustomResourceDefinitions (short names `crd`, `crds`; category `api-extensions`, as in
    // Kubernetes), whose rules live with the rest of the CRD machinery.
    let mut definitions =
        ResourceInfo::new(GROUP, "v1", "CustomResourceDefinition", RESOURCE, false)
            .short(&["crd", "crds"])
            .with(&[Status]);
    definitions.categories = vec!["api-extensions".to_owned()];
    definitions.strategy = Arc::new(Typed(CustomResourceDefinitionRules));
    rows.push(definitions);
    // APIServices (`kubectl get apiservice`): cluster-scoped, category `api-extensions`, no
    // short name, as kube-aggregator serves them; their rules live with the aggregation layer.
    let mut apiservices = ResourceInfo::new(
        crate::aggregator::GROUP,
        "v1",
        "APIService",
        crate::aggregator::RESOURCE,
        false,
    )
    .with(&[Status]);
    apiservices.categories = vec!["api-extensions".to_owned()];
    apiservices.strategy = Arc::new(Typed(crate::aggregator::apiservice::APIServiceRules));
    rows.push(apiservices);
    // ComponentStatus (`cs`): cluster-scoped, `get` and `list` only, computed on every request
    // (`handlers::component_status`), never stored.
    let mut statuses =
        ResourceInfo::new("", "v1", "ComponentStatus", "componentstatuses", false).short(&["cs"]);
    statuses.verbs = vec!["get".into(), "list".into()];
    statuses.strategy = Arc::new(crate::strategy::componentstatus::ComponentStatusStrategy);
    rows.push(statuses);
    // The reviews (`crate::auth::review`): create only, answered and never stored.
    for (group, kind, plural, namespaced) in [
        (
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
            false,
        ),
        (
            "authentication.k8s.io",
            "TokenReview",
            "tokenreviews",
            false,
        ),
        (
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
        ),
        (
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
        ),
        (
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
        ),
        (
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
            false,
        ),
    ] {
        let mut row = ResourceInfo::new(group, "v1", kind, plural, namespaced);
        row.verbs = vec!["create".into()];
        rows.push(row);
    }
    rows
}
