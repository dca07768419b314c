//! [`Snapshot`]: the cluster state lab checks read, fetched in one go through the API (objects
//! of the kinds the checks name, Events, the admin API's controllers and faults, the trace
//! collector's spans, the API server's answers to the access checks' SubjectAccessReviews). Checks are plain functions of a snapshot ([`super::check`]), so they
//! are tested with hand-made snapshots, without a cluster.

use std::collections::BTreeMap;

use admin::{ControllerStatus, Fault};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use super::spec::{AccessCheck, AccessRequest, Check, CheckSpec};
use crate::admin_client::AdminClient;

/// What a check can see.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Objects per kind, every namespace.
    pub objects: BTreeMap<String, Vec<Value>>,
    /// Whether each fetched kind is namespaced (kinds outside the built-in table).
    pub namespaced: BTreeMap<String, bool>,
    /// The controllers' queues (admin API).
    pub controllers: Vec<ControllerStatus>,
    /// The faults in force.
    pub faults: Vec<Fault>,
    /// Every span the trace collector keeps, oldest first.
    pub spans: Vec<trace::Span>,
    /// The authorizer's answers to the access checks' questions.
    pub reviews: BTreeMap<AccessQuestion, Review>,
}

/// Who asks to do what: one SubjectAccessReview.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccessQuestion {
    /// The user.
    pub user: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// The request.
    pub request: AccessRequest,
}

impl AccessQuestion {
    /// Every question `check` asks.
    pub fn of(check: &AccessCheck) -> impl Iterator<Item = AccessQuestion> + '_ {
        check
            .allowed
            .iter()
            .chain(&check.denied)
            .map(|r| AccessQuestion {
                user: check.user.clone(),
                groups: check.groups.clone(),
                request: r.clone(),
            })
    }
}

/// The authorizer's answer (a SubjectAccessReview's status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review {
    /// Allowed.
    pub allowed: bool,
    /// Why (`RBAC: allowed by RoleBinding ...`), as the authorizer says it; may be empty.
    pub reason: String,
}

/// `(group, version, plural, namespaced)` of a kind a lab may name.
pub fn resource_of(kind: &str) -> Option<(&'static str, &'static str, &'static str, bool)> {
    Some(match kind {
        "Pod" => ("", "v1", "pods", true),
        "Node" => ("", "v1", "nodes", false),
        "Event" => ("", "v1", "events", true),
        "ConfigMap" => ("", "v1", "configmaps", true),
        "Service" => ("", "v1", "services", true),
        "Endpoints" => ("", "v1", "endpoints", true),
        "EndpointSlice" => ("discovery.k8s.io", "v1", "endpointslices", true),
        "Namespace" => ("", "v1", "namespaces", false),
        "Deployment" => ("apps", "v1", "deployments", true),
        "ReplicaSet" => ("apps", "v1", "replicasets", true),
        "DaemonSet" => ("apps", "v1", "daemonsets", true),
        "StatefulSet" => ("apps", "v1", "statefulsets", true),
        "Job" => ("batch", "v1", "jobs", true),
        "CronJob" => ("batch", "v1", "cronjobs", true),
        "ReplicationController" => ("", "v1", "replicationcontrollers", true),
        "PodDisruptionBudget" => ("policy", "v1", "poddisruptionbudgets", true),
        "HorizontalPodAutoscaler" => ("autoscaling", "v2", "horizontalpodautoscalers", true),
        "Lease" => ("coordination.k8s.io", "v1", "leases", true),
        "ServiceAccount" => ("", "v1", "serviceaccounts", true),
        "Secret" => ("", "v1", "secrets", true),
        "Role" => ("rbac.authorization.k8s.io", "v1", "roles", true),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings", true),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles", false),
        "ClusterRoleBinding" => (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            false,
        ),
        _ => return None,
    })
}

/// Where to list a kind: group, version, plural, namespaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindRef {
    /// API group (empty for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Resource (plural).
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// Resolves `kind`: from `apiVersion` (+ `resource`, `namespaced`) when given (custom
/// resources), else from the built-in table.
pub fn kind_ref(
    kind: &str,
    api_version: Option<&str>,
    resource: Option<&str>,
    namespaced: Option<bool>,
) -> Result<KindRef, String> {
    match api_version {
        Some(av) => {
            let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
            Ok(KindRef {
                group: group.to_string(),
                version: version.to_string(),
                plural: resource
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{}s", kind.to_lowercase())),
                namespaced: namespaced.unwrap_or(true),
            })
        }
        None => {
            let (group, version, plural, namespaced) = resource_of(kind).ok_or_else(|| {
                format!("kind {kind} is not built in: give its apiVersion (and resource)")
            })?;
            Ok(KindRef {
                group: group.into(),
                version: version.into(),
                plural: plural.into(),
                namespaced,
            })
        }
    }
}

/// The kinds `checks` read, and where to list them.
pub fn kinds_of<'a>(
    checks: impl IntoIterator<Item = &'a CheckSpec>,
) -> Result<BTreeMap<String, KindRef>, String> {
    let mut kinds = BTreeMap::new();
    for c in checks {
        let (kind, resolved) = match &c.check {
            Check::Object(o) => (
                &o.kind,
                kind_ref(
                    &o.kind,
                    o.api_version.as_deref(),
                    o.resource.as_deref(),
                    o.namespaced,
                ),
            ),
            Check::Count(o) => (
                &o.kind,
                kind_ref(
                    &o.kind,
                    o.api_version.as_deref(),
                    o.resource.as_deref(),
                    o.namespaced,
                ),
            ),
            Check::Condition(o) => (
                &o.kind,
                kind_ref(
                    &o.kind,
                    o.api_version.as_deref(),
                    o.resource.as_deref(),
                    o.namespaced,
                ),
            ),
            Check::Event(_) => {
                kinds.insert("Event".to_string(), kind_ref("Event", None, None, None)?);
                continue;
            }
            Check::Controller(_)
            | Check::Fault(_)
            | Check::Writes(_)
            | Check::MaxAlive(_)
            | Check::Span(_)
            | Check::Access(_) => continue,
        };
        kinds.insert(kind.clone(), resolved?);
    }
    Ok(kinds)
}

/// Fetches what `checks` need.
pub async fn fetch(
    client: &kube::Client,
    admin: &AdminClient,
    checks: &[&CheckSpec],
) -> Result<Snapshot, String> {
    let mut snapshot = Snapshot::default();
    for (kind, at) in kinds_of(checks.iter().copied())? {
        let gvk = kube::api::GroupVersionKind::gvk(&at.group, &at.version, &kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &at.plural);
        let plural = at.plural.clone();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        // A resource not served (yet: a CRD not created) has no objects.
        let items = match api.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
                .collect(),
            Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
            Err(e) => return Err(format!("listing {plural}: {e}")),
        };
        snapshot.namespaced.insert(kind.clone(), at.namespaced);
        snapshot.objects.insert(kind, items);
    }
    let needs = |f: fn(&Check) -> bool| checks.iter().any(|c| f(&c.check));
    if needs(|c| matches!(c, Check::Controller(_))) {
        snapshot.controllers = admin.controllers().await.map_err(|e| e.to_string())?;
    }
    if needs(|c| matches!(c, Check::Fault(_))) {
        snapshot.faults = admin.faults().await.map_err(|e| e.to_string())?;
    }
    if needs(|c| matches!(c, Check::Writes(_) | Check::MaxAlive(_) | Check::Span(_))) {
        let request = http::Request::get(format!("{}?spans=all", trace::COLLECTOR_PATH))
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = client
            .request_text(request)
            .await
            .map_err(|e| format!("reading the trace collector: {e}"))?;
        #[derive(serde::Deserialize)]
        struct Spans {
            spans: Vec<trace::Span>,
        }
        let spans: Spans = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        snapshot.spans = spans.spans;
    }
    for c in checks {
        let Check::Access(access) = &c.check else {
            continue;
        };
        for question in AccessQuestion::of(access) {
            if let std::collections::btree_map::Entry::Vacant(slot) =
                snapshot.reviews.entry(question)
            {
                let answer = review(client, slot.key()).await?;
                slot.insert(answer);
            }
        }
    }
    Ok(snapshot)
}

/// Asks the API server's authorizer `question` (`POST subjectaccessreviews`, as
/// `kubectl auth can-i --as` asks it through a SelfSubjectAccessReview).
async fn review(client: &kube::Client, question: &AccessQuestion) -> Result<Review, String> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let r = &question.request;
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(question.user.clone()),
            groups: (!question.groups.is_empty()).then(|| question.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(r.verb.clone()),
                group: Some(r.group.clone()),
                resource: Some(r.resource.clone()),
                subresource: r.subresource.clone(),
                name: r.name.clone(),
                namespace: r.namespace.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&kube::api::PostParams::default(), &sar)
        .await
        .map_err(|e| format!("asking whether {} may {r}: {e}", question.user))?;
    let status = answer.status.unwrap_or_default();
    Ok(Review {
        allowed: status.allowed,
        reason: status
            .reason
            .or(status.evaluation_error)
            .unwrap_or_default(),
    })
}
