//! [`Snapshot`]: the cluster state lab checks read, fetched in one go through the API (objects
//! of the kinds the checks name, Events, the admin API's controllers and faults, the trace
//! collector's spans). Checks are plain functions of a snapshot ([`super::check`]), so they
//! are tested with hand-made snapshots, without a cluster.

use std::collections::{BTreeMap, BTreeSet};

use admin::{ControllerStatus, Fault};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use super::spec::{Action, Check, CheckSpec};
use crate::admin_client::AdminClient;

/// What a check can see.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Objects per kind, every namespace.
    pub objects: BTreeMap<String, Vec<Value>>,
    /// The controllers' queues (admin API).
    pub controllers: Vec<ControllerStatus>,
    /// The faults in force.
    pub faults: Vec<Fault>,
    /// Every span the trace collector keeps, oldest first.
    pub spans: Vec<trace::Span>,
}

/// `(group, version, plural, namespaced)` of a kind a lab may name.
pub fn resource_of(kind: &str) -> Option<(&'static str, &'static str, &'static str, bool)> {
    Some(match kind {
        "Pod" => ("", "v1", "pods", true),
        "Node" => ("", "v1", "nodes", false),
        "Event" => ("", "v1", "events", true),
        "ConfigMap" => ("", "v1", "configmaps", true),
        "Service" => ("", "v1", "services", true),
        "Namespace" => ("", "v1", "namespaces", false),
        "Deployment" => ("apps", "v1", "deployments", true),
        "ReplicaSet" => ("apps", "v1", "replicasets", true),
        "Lease" => ("coordination.k8s.io", "v1", "leases", true),
        _ => return None,
    })
}

/// The kinds `checks` read.
pub fn kinds_of<'a>(checks: impl IntoIterator<Item = &'a CheckSpec>) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    for c in checks {
        match &c.check {
            Check::Object(o) => {
                kinds.insert(o.kind.clone());
            }
            Check::Count(o) => {
                kinds.insert(o.kind.clone());
            }
            Check::Condition(o) => {
                kinds.insert(o.kind.clone());
            }
            Check::Event(_) => {
                kinds.insert("Event".to_string());
            }
            Check::Controller(_)
            | Check::Fault(_)
            | Check::Writes(_)
            | Check::MaxAlive(_)
            | Check::Span(_) => {}
        }
    }
    kinds
}

/// Kinds named by checks inside actions (`waitFor`).
pub fn kinds_of_actions(actions: &[Action]) -> BTreeSet<String> {
    let checks: Vec<&CheckSpec> = actions
        .iter()
        .filter_map(|a| match a {
            Action::WaitFor(c) => Some(c.as_ref()),
            _ => None,
        })
        .collect();
    kinds_of(checks)
}

/// Fetches what `checks` need.
pub async fn fetch(
    client: &kube::Client,
    admin: &AdminClient,
    checks: &[&CheckSpec],
) -> Result<Snapshot, String> {
    let mut snapshot = Snapshot::default();
    for kind in kinds_of(checks.iter().copied()) {
        let (group, version, plural, _) =
            resource_of(&kind).ok_or_else(|| format!("kind {kind} is not supported in checks"))?;
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing {plural}: {e}"))?;
        let items = list
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
            .collect();
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
    Ok(snapshot)
}
