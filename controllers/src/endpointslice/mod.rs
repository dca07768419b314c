//! The EndpointSlice controller: for each Service with a selector, slices listing the pods it
//! selects.
//!
//! Mirrors `pkg/controller/endpointslice/endpointslice_controller.go` (`syncService`) and the
//! reconciler of `staging/src/k8s.io/endpointslice/reconciler.go` (`Reconcile`,
//! `reconcileByAddressType`, `reconcileByPortMapping`, `finalize`). Files: [`endpoints`]
//! (pod → endpoint, ports, labels), [`trackers`] (generations written, trigger times),
//! [`controller`] (the async shell).
//!
//! ```text
//!  sync_endpoint_slices(Service, its pods, its slices, nodes, trigger time)
//!    ExternalName or no selector ─▶ nothing (slices of such Services come from elsewhere)
//!    per address type of the Service (IPv4 / IPv6):
//!      desired endpoints, grouped by their ports (a named targetPort may differ per pod)
//!      per port group, over the existing slices (sorted by name):
//!        1. keep desired endpoints in place (update if changed), drop the others
//!        2. fill the slices being updated anyway, fullest first
//!        3. put what is left in the unchanged slice closest to full, or new slices
//!           of at most maxEndpointsPerSlice (100)
//!      no endpoints at all ─▶ one placeholder slice without endpoints or ports
//!      finalize: a create and a delete become an update of the slice to delete
//!    ─▶ POST new slices (generateName `<service>-`), PUT changed ones, DELETE the rest
//! ```
//!
//! Unlike Kubernetes, topology hints and `trafficDistribution` are not computed, and
//! endpoints fill slices in a fixed order (by address) where Go pops them from a map.

pub mod controller;
pub mod endpoints;
pub mod trackers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use apimachinery::ObjectKey;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use self::endpoints::{
    EndpointKey, address_types_for_service, endpoint_key, endpoint_ports,
    endpoints_equal_beyond_hash, pod_to_endpoint, should_pod_be_in_endpoints, slice_labels,
};
use crate::action::Action;

/// The value of the managed-by label on the slices this controller owns.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// `--max-endpoints-per-slice`'s default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// `v1.EndpointsLastChangeTriggerTime`.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// Everything one sync of a Service's slices reads.
#[derive(Debug, Clone, Copy)]
pub struct EndpointSliceSyncInput<'a> {
    /// The Service.
    pub service: &'a Service,
    /// The pods of its namespace its selector matches.
    pub pods: &'a [&'a Pod],
    /// Its slices managed by this controller (label `kubernetes.io/service-name`), without
    /// those being deleted.
    pub slices: &'a [&'a EndpointSlice],
    /// The nodes the pods run on, those that exist.
    pub nodes: &'a [&'a Node],
    /// `endpoints.kubernetes.io/last-change-trigger-time` for the slices written
    /// ([`trackers::TriggerTimeTracker::compute`]).
    pub trigger_time: Option<Timestamp>,
    /// `--max-endpoints-per-slice`.
    pub max_endpoints_per_slice: usize,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSliceSync {
    /// Creations, updates and deletions of slices, in that order, and a requeue when a pod
    /// had to be skipped.
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
}

/// The slices decided for one address type.
#[derive(Debug, Default)]
struct Plan {
    create: Vec<EndpointSlice>,
    update: Vec<EndpointSlice>,
    delete: Vec<EndpointSlice>,
}

/// Desired endpoints of one port group, in a fixed order.
type EndpointSet = BTreeMap<EndpointKey, Endpoint>;

/// `syncService` after its reads: the whole decision for one Service.
pub fn sync_endpoint_slices(input: EndpointSliceSyncInput<'_>) -> EndpointSliceSync {
    let service = input.service;
    let spec = service.spec.clone().unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") {
        return no_action("type ExternalName: no endpoints from this controller");
    }
    if spec.selector.is_none() {
        return no_action("no selector: its slices are written by others");
    }
    let types = address_types_for_service(service);
    let mut notes = vec![format!("{} pods selected", input.pods.len())];
    let mut by_type: BTreeMap<&str, Vec<&EndpointSlice>> = BTreeMap::new();
    let mut plan = Plan::default();
    for slice in input.slices {
        match types.iter().find(|t| **t == slice.address_type) {
            Some(t) => by_type.entry(t).or_default().push(slice),
            None => plan.delete.push((*slice).clone()),
        }
    }
    let mut skipped = Vec::new();
    for address_type in &types {
        let existing = by_type.remove(address_type).unwrap_or_default();
        let (p, note) = reconcile_by_address_type(&input, address_type, &existing, &mut skipped);
        notes.push(note);
        plan.create.extend(p.create);
        plan.update.extend(p.update);
        plan.delete.extend(p.delete);
    }
    let plan = finalize(service, plan);
    let mut actions = Vec::new();
    let (creates, updates, deletes) = (plan.create.len(), plan.update.len(), plan.delete.len());
    for mut slice in plan.create {
        set_trigger_time(&mut slice.metadata, input.trigger_time);
        actions.push(Action::CreateEndpointSlice(Box::new(slice)));
    }
    for mut slice in plan.update {
        set_trigger_time(&mut slice.metadata, input.trigger_time);
        actions.push(Action::UpdateEndpointSlice(Box::new(slice)));
    }
    for slice in plan.delete {
        actions.push(Action::DeleteEndpointSlice(Box::new(slice)));
    }
    notes.push(if actions.is_empty() {
        "slices in sync".to_owned()
    } else {
        format!("create {creates}, update {updates}, delete {deletes}")
    });
    if !skipped.is_empty() {
        notes.push(format!(
            "skipped {} (node not found): retry",
            skipped.join(", ")
        ));
        actions.push(Action::RequeueAfter(Duration::ZERO));
    }
    EndpointSliceSync {
        actions,
        summary: notes.join(" → "),
    }
}

fn no_action(summary: &str) -> EndpointSliceSync {
    EndpointSliceSync {
        actions: Vec::new(),
        summary: summary.to_owned(),
    }
}

/// `addTriggerTimeAnnotation`.
fn set_trigger_time(meta: &mut ObjectMeta, trigger: Option<Timestamp>) {
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    match trigger {
        Some(t) => {
            annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), t.to_string());
        }
        None => {
            annotations.remove(LAST_CHANGE_TRIGGER_TIME);
        }
    }
}

/// `NewPortMapKey`: the ports, order aside.
fn port_map_key(ports: &[EndpointPort]) -> String {
    let mut each: Vec<String> = ports
        .iter()
        .map(|p| serde_json::to_string(p).unwrap_or_default())
        .collect();
    each.sort();
    each.join("\n")
}

/// `ownedBy`: the slice has an ownerReference to this Service (by UID).
fn owned_by(slice: &EndpointSlice, service: &Service) -> bool {
    let uid = service.metadata.uid.as_deref().unwrap_or("");
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.kind == "Service" && o.api_version == "v1")
}

/// `newEndpointSlice`: an empty slice for `service` (generateName `<service>-`).
pub fn new_endpoint_slice(
    service: &Service,
    ports: Vec<EndpointPort>,
    address_type: &str,
) -> EndpointSlice {
    let name = service.metadata.name.clone().unwrap_or_default();
    let (labels, _) = slice_labels(None, service, CONTROLLER_NAME);
    // `getEndpointSlicePrefix`: `<name>-` unless that is no longer a valid prefix.
    let prefix = format!("{name}-");
    let generate_name = if prefix.len() <= 253 {
        prefix
    } else {
        name.clone()
    };
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: service.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Service".into(),
                name,
                uid: service.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        address_type: address_type.to_owned(),
        endpoints: Vec::new(),
        ports: Some(ports),
    }
}

/// `reconcileByAddressType`.
fn reconcile_by_address_type(
    input: &EndpointSliceSyncInput<'_>,
    address_type: &str,
    existing: &[&EndpointSlice],
    skipped: &mut Vec<String>,
) -> (Plan, String) {
    let service = input.service;
    let mut plan = Plan::default();
    let mut existing_by_ports: BTreeMap<String, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        if owned_by(slice, service) {
            let key = port_map_key(slice.ports.as_deref().unwrap_or_default());
            existing_by_ports.entry(key).or_default().push(slice);
        } else {
            plan.delete.push((*slice).clone());
        }
    }
    let publish = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let nodes: HashMap<&str, &Node> = input
        .nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, *n)))
        .collect();
    let mut desired: BTreeMap<String, (Vec<EndpointPort>, EndpointSet)> = BTreeMap::new();
    let (mut total, mut ready) = (0usize, 0usize);
    for pod in input.pods {
        if !should_pod_be_in_endpoints(pod, true) {
            continue;
        }
        let ports = endpoint_ports(service, pod);
        // The port group is desired even if this pod is skipped below, as in Go.
        let (_, set) = desired
            .entry(port_map_key(&ports))
            .or_insert_with(|| (ports, EndpointSet::new()));
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let node = node_name.and_then(|n| nodes.get(n).copied());
        if node.is_none() && !publish {
            skipped.push(pod.metadata.name.clone().unwrap_or_default());
            continue;
        }
        let endpoint = pod_to_endpoint(pod, node, service, address_type);
        if endpoint.addresses.is_empty() {
            continue;
        }
        total += 1;
        if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true) {
            ready += 1;
        }
        set.insert(endpoint_key(&endpoint), endpoint);
    }
    for (key, (ports, set)) in desired.iter_mut() {
        let current = existing_by_ports.get(key).cloned().unwrap_or_default();
        let p = reconcile_by_port_mapping(input, &current, set, ports, address_type);
        plan.create.extend(p.create);
        plan.update.extend(p.update);
        plan.delete.extend(p.delete);
    }
    for (key, slices) in &existing_by_ports {
        if !desired.contains_key(key) {
            plan.delete.extend(slices.iter().map(|s| (*s).clone()));
        }
    }
    // No slice would be left: a placeholder keeps the Service's slice list from being empty.
    if existing.len() == plan.delete.len() && plan.create.is_empty() {
        let placeholder = new_endpoint_slice(service, Vec::new(), address_type);
        if plan.delete.len() == 1 && is_placeholder(&plan.delete[0], &placeholder) {
            plan.delete.clear();
        } else {
            plan.create.push(placeholder);
        }
    }
    let note = format!("{address_type}: {total} endpoints ({ready} ready)");
    (plan, note)
}

/// `placeholderSliceCompare.DeepEqual`: the same type, labels and namespace, no endpoints,
/// no ports.
fn is_placeholder(slice: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    slice.address_type == placeholder.address_type
        && slice.endpoints.is_empty()
        && slice.ports.as_deref().unwrap_or_default().is_empty()
        && slice.metadata.namespace == placeholder.metadata.namespace
        && slice.metadata.labels.clone().unwrap_or_default()
            == placeholder.metadata.labels.clone().unwrap_or_default()
}

/// `reconcileByPortMapping`: which slices of one port group to create, update and delete.
fn reconcile_by_port_mapping(
    input: &EndpointSliceSyncInput<'_>,
    existing: &[&EndpointSlice],
    desired: &mut EndpointSet,
    ports: &[EndpointPort],
    address_type: &str,
) -> Plan {
    let service = input.service;
    let max = input.max_endpoints_per_slice.max(1);
    let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut unchanged: BTreeSet<String> = BTreeSet::new();
    let mut to_update: BTreeSet<String> = BTreeSet::new();
    let mut to_delete: BTreeSet<String> = BTreeSet::new();
    let mut sorted: Vec<&EndpointSlice> = existing.to_vec();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    // 1. Keep the desired endpoints where they are, drop the others.
    for slice in sorted {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let mut kept = Vec::new();
        let mut changed = false;
        for endpoint in &slice.endpoints {
            if let Some(want) = desired.remove(&endpoint_key(endpoint)) {
                changed |= !endpoints_equal_beyond_hash(&want, endpoint);
                kept.push(want);
            }
        }
        let (labels, labels_changed) =
            slice_labels(slice.metadata.labels.as_ref(), service, CONTROLLER_NAME);
        if changed || kept.len() != slice.endpoints.len() {
            if kept.is_empty() {
                to_delete.insert(name.clone());
                by_name.insert(name, slice.clone());
            } else {
                let mut copy = slice.clone();
                copy.endpoints = kept;
                copy.metadata.labels = Some(labels);
                to_update.insert(name.clone());
                by_name.insert(name, copy);
            }
        } else if labels_changed {
            let mut copy = slice.clone();
            copy.metadata.labels = Some(labels);
            to_update.insert(name.clone());
            by_name.insert(name, copy);
        } else {
            unchanged.insert(name.clone());
            by_name.insert(name, slice.clone());
        }
    }
    // 2. Fill the slices that change anyway, fullest first.
    if !desired.is_empty() && !to_update.is_empty() {
        let mut names: Vec<String> = to_update.iter().cloned().collect();
        names.sort_by_key(|n| std::cmp::Reverse(by_name.get(n).map_or(0, |s| s.endpoints.len())));
        for name in names {
            if let Some(slice) = by_name.get_mut(&name) {
                fill(slice, desired, max);
            }
        }
    }
    // 3. The rest: into the unchanged slice closest to full, or new slices.
    let mut create = Vec::new();
    while !desired.is_empty() {
        let mut target = None;
        if desired.len() < max && !unchanged.is_empty() {
            target = slice_to_fill(&unchanged, &by_name, desired.len(), max);
        }
        match target {
            Some(name) => {
                if let Some(slice) = by_name.get_mut(&name) {
                    fill(slice, desired, max);
                }
                unchanged.remove(&name);
                to_update.insert(name);
            }
            None => {
                let mut slice = new_endpoint_slice(service, ports.to_vec(), address_type);
                fill(&mut slice, desired, max);
                create.push(slice);
            }
        }
    }
    let take = |names: &BTreeSet<String>, by_name: &BTreeMap<String, EndpointSlice>| {
        names
            .iter()
            .filter_map(|n| by_name.get(n).cloned())
            .collect::<Vec<_>>()
    };
    Plan {
        create,
        update: take(&to_update, &by_name),
        delete: take(&to_delete, &by_name),
    }
}

/// Moves desired endpoints into `slice` until it holds `max`.
fn fill(slice: &mut EndpointSlice, desired: &mut EndpointSet, max: usize) {
    while slice.endpoints.len() < max {
        let Some((_, endpoint)) = desired.pop_first() else {
            break;
        };
        slice.endpoints.push(endpoint);
    }
}

/// `getSliceToFill`: the unchanged slice that `n` more endpoints bring closest to `max`.
fn slice_to_fill(
    unchanged: &BTreeSet<String>,
    by_name: &BTreeMap<String, EndpointSlice>,
    n: usize,
    max: usize,
) -> Option<String> {
    let mut best: Option<(usize, &String)> = None;
    for name in unchanged {
        let Some(slice) = by_name.get(name) else {
            continue;
        };
        let Some(diff) = max.checked_sub(n + slice.endpoints.len()) else {
            continue;
        };
        if best.is_none_or(|(d, _)| diff < d) {
            best = Some((diff, name));
            if diff == 0 {
                break;
            }
        }
    }
    best.map(|(_, n)| n.clone())
}

/// `finalize`'s decisions: a slice to create takes the place of one to delete (an update
/// instead of a create and a delete); nothing is created for a Service being deleted.
fn finalize(service: &Service, mut plan: Plan) -> Plan {
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        let victim = &plan.delete[i];
        let same_type = plan
            .create
            .last()
            .is_some_and(|last| last.address_type == victim.address_type);
        if same_type
            && owned_by(victim, service)
            && let Some(mut slice) = plan.create.pop()
        {
            let victim = plan.delete.remove(i);
            slice.metadata.name = victim.metadata.name;
            plan.update.push(slice);
        } else {
            i += 1;
        }
    }
    if service.metadata.deletion_timestamp.is_some() {
        plan.create.clear();
    }
    plan
}

/// `namespace/name` of the Service a slice belongs to (its service-name label).
pub fn service_key_of(slice: &EndpointSlice) -> Option<ObjectKey> {
    let name = slice
        .metadata
        .labels
        .as_ref()?
        .get(endpoints::LABEL_SERVICE_NAME)?;
    Some(ObjectKey::new(slice.metadata.namespace.as_deref(), name))
}

#[cfg(test)]
mod tests;
