//! The Endpoints controller: the core/v1 Endpoints named after each Service with a selector.
//!
//! Mirrors `pkg/controller/endpoint/endpoints_controller.go` (`syncService`,
//! `addEndpointSubset`, `truncateEndpoints`, `capacityAnnotationSetCorrectly`) and
//! `pkg/api/v1/endpoints/util.go` (`RepackSubsets`, `SortSubsets`). [`controller`] is the async
//! shell.
//!
//! ```text
//!  sync_endpoints(Service, its pods, current Endpoints, trigger time)
//!    ExternalName or no selector ─▶ nothing (the kubernetes Service's Endpoints are the API
//!                                  server's; others are written by hand)
//!    per pod with an IP of the Service's family (terminating ones only when
//!    publishNotReadyAddresses), per Service port it has:
//!        ready (or publishNotReadyAddresses) ─▶ addresses, else notReadyAddresses
//!    repack: one subset per set of ports, addresses sorted by IP
//!    unchanged subsets and labels ─▶ nothing; else POST or PUT, with the Service's labels,
//!    the trigger-time annotation, and over 1000 addresses truncated
//!    (annotation endpoints.kubernetes.io/over-capacity: truncated)
//! ```
//!
//! Unlike Kubernetes, subsets are ordered by their ports rather than by a hash of them.

pub mod controller;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::action::Action;
use crate::endpointslice::LAST_CHANGE_TRIGGER_TIME;
use crate::endpointslice::endpoints::{
    LABEL_HEADLESS, find_port, is_service_ip_set, pod_reference, should_pod_be_in_endpoints,
    should_set_hostname,
};
use crate::pod_readiness::is_pod_ready;

/// `maxCapacity`: addresses an Endpoints object holds before it is truncated.
pub const MAX_CAPACITY: usize = 1000;
/// `v1.EndpointsOverCapacity`.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";

/// Everything one sync of a Service's Endpoints reads.
#[derive(Debug, Clone, Copy)]
pub struct EndpointsSyncInput<'a> {
    /// The Service.
    pub service: &'a Service,
    /// The pods of its namespace its selector matches.
    pub pods: &'a [&'a Pod],
    /// Its Endpoints, if the cache has them.
    pub current: Option<&'a Endpoints>,
    /// The `last-change-trigger-time` for a write.
    pub trigger_time: Option<Timestamp>,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointsSync {
    /// At most one write: [`Action::CreateEndpoints`] or [`Action::UpdateEndpoints`].
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
}

/// `podToEndpointAddressForService`: the pod's IP of the Service's (first) family.
fn pod_address(service: &Service, pod: &Pod) -> Option<EndpointAddress> {
    let spec = service.spec.as_ref();
    let is_v6 = |ip: &str| ip.contains(':');
    let want_v6 = match spec
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
    {
        Some(family) => family == "IPv6",
        None if is_service_ip_set(service) => {
            is_v6(spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or(""))
        }
        None => is_v6(
            pod.status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .unwrap_or(""),
        ),
    };
    let ips = pod.status.as_ref().and_then(|s| s.pod_ips.as_deref());
    let ip = ips
        .unwrap_or_default()
        .iter()
        .find(|ip| is_v6(&ip.ip) == want_v6)?;
    Some(EndpointAddress {
        ip: ip.ip.clone(),
        node_name: Some(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        ),
        target_ref: Some(pod_reference(pod)),
        hostname: should_set_hostname(pod, service)
            .then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone()))
            .flatten(),
    })
}

/// `syncService` after its reads.
pub fn sync_endpoints(input: EndpointsSyncInput<'_>) -> EndpointsSync {
    let service = input.service;
    let spec = service.spec.clone().unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") {
        return no_action("type ExternalName: no endpoints from this controller");
    }
    if spec.selector.is_none() {
        return no_action("no selector: its Endpoints are written by others");
    }
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let ports = spec.ports.clone().unwrap_or_default();
    let headless = !is_service_ip_set(service);
    // (ports of the subset, address, ready)
    let mut entries: Vec<(Vec<EndpointPort>, EndpointAddress, bool)> = Vec::new();
    for pod in input.pods {
        if !should_pod_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(address) = pod_address(service, pod) else {
            continue;
        };
        let ready = publish || is_pod_ready(pod);
        if ports.is_empty() {
            if headless {
                entries.push((Vec::new(), address, ready));
            }
            continue;
        }
        for sp in &ports {
            let Some(number) = find_port(pod, sp) else {
                continue;
            };
            let port = EndpointPort {
                name: sp.name.clone().filter(|n| !n.is_empty()),
                port: number,
                protocol: sp.protocol.clone(),
                app_protocol: sp.app_protocol.clone(),
            };
            entries.push((vec![port], address.clone(), ready));
        }
    }
    let subsets = repack_subsets(entries);
    let (ready, not_ready) = count(&subsets);
    let name = service.metadata.name.clone().unwrap_or_default();
    let service_labels = service.metadata.labels.clone().unwrap_or_default();
    let mut note = format!("{ready} ready, {not_ready} not ready");
    if let Some(current) = input.current {
        let mut current_labels = current.metadata.labels.clone().unwrap_or_default();
        current_labels.remove(LABEL_HEADLESS);
        let current_subsets = current.subsets.clone().unwrap_or_default();
        if subsets_equal_ignoring_resource_version(&current_subsets, &subsets)
            && current_labels == service_labels
            && capacity_annotation_set_correctly(&current.metadata, &current_subsets)
        {
            note.push_str(" → Endpoints in sync");
            return EndpointsSync {
                actions: Vec::new(),
                summary: note,
            };
        }
    }
    let mut endpoints = input.current.cloned().unwrap_or_else(|| Endpoints {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: service.metadata.namespace.clone(),
            ..Default::default()
        },
        ..Default::default()
    });
    endpoints.subsets = Some(subsets);
    let mut labels = service_labels;
    if headless {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    endpoints.metadata.labels = Some(labels);
    let annotations = endpoints
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    match input.trigger_time {
        Some(t) => {
            annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), t.to_string());
        }
        None => {
            annotations.remove(LAST_CHANGE_TRIGGER_TIME);
        }
    }
    if truncate_endpoints(&mut endpoints) {
        note.push_str(&format!(" → over {MAX_CAPACITY}: truncated"));
        endpoints
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(OVER_CAPACITY.into(), "truncated".into());
    } else if let Some(a) = endpoints.metadata.annotations.as_mut() {
        a.remove(OVER_CAPACITY);
    }
    let action = if input.current.is_some() {
        note.push_str(" → update Endpoints");
        Action::UpdateEndpoints(Box::new(endpoints))
    } else {
        note.push_str(" → create Endpoints");
        Action::CreateEndpoints(Box::new(endpoints))
    };
    EndpointsSync {
        actions: vec![action],
        summary: note,
    }
}

fn no_action(summary: &str) -> EndpointsSync {
    EndpointsSync {
        actions: Vec::new(),
        summary: summary.to_owned(),
    }
}

fn count(subsets: &[EndpointSubset]) -> (usize, usize) {
    subsets.iter().fold((0, 0), |(r, n), s| {
        (
            r + s.addresses.as_ref().map_or(0, Vec::len),
            n + s.not_ready_addresses.as_ref().map_or(0, Vec::len),
        )
    })
}

/// The identity of an address in a subset (`addressKey`: IP and target UID).
type AddressKey = (String, String);

/// A set of addresses with their readiness: the key subsets are grouped by.
type AddressSetKey = Vec<(AddressKey, bool)>;

/// [`AddressKey`] of an address.
fn address_key(a: &EndpointAddress) -> AddressKey {
    let uid = a.target_ref.as_ref().and_then(|r| r.uid.clone());
    (a.ip.clone(), uid.unwrap_or_default())
}

/// `RepackSubsets` + `SortSubsets`: one subset per set of ports offered by the same
/// addresses; an address ready on one entry is ready.
fn repack_subsets(entries: Vec<(Vec<EndpointPort>, EndpointAddress, bool)>) -> Vec<EndpointSubset> {
    type Addresses = BTreeMap<AddressKey, (EndpointAddress, bool)>;
    // port (as JSON, None for the port-less sentinel) → its addresses
    let mut by_port: BTreeMap<Option<String>, (Option<EndpointPort>, Addresses)> = BTreeMap::new();
    for (ports, address, ready) in entries {
        let keyed: Vec<(Option<String>, Option<EndpointPort>)> = if ports.is_empty() {
            vec![(None, None)]
        } else {
            ports
                .into_iter()
                .map(|p| (serde_json::to_string(&p).ok(), Some(p)))
                .collect()
        };
        for (key, port) in keyed {
            let (_, addresses) = by_port
                .entry(key)
                .or_insert_with(|| (port, Addresses::new()));
            let entry = addresses
                .entry(address_key(&address))
                .or_insert_with(|| (address.clone(), ready));
            entry.1 |= ready;
        }
    }
    // addresses (with readiness) → the ports they offer
    let mut by_addresses: BTreeMap<AddressSetKey, EndpointSubset> = BTreeMap::new();
    for (_, (port, addresses)) in by_port {
        let key: AddressSetKey = addresses
            .iter()
            .map(|(k, (_, r))| (k.clone(), *r))
            .collect();
        let subset = by_addresses.entry(key).or_insert_with(|| {
            let (ready, not_ready): (Vec<_>, Vec<_>) = addresses.into_values().partition(|a| a.1);
            let list = |v: Vec<(EndpointAddress, bool)>| {
                let mut v: Vec<EndpointAddress> = v.into_iter().map(|(a, _)| a).collect();
                v.sort_by_key(address_key);
                Some(v).filter(|v| !v.is_empty())
            };
            EndpointSubset {
                addresses: list(ready),
                not_ready_addresses: list(not_ready),
                ports: None,
            }
        });
        if let Some(port) = port {
            subset.ports.get_or_insert_with(Vec::new).push(port);
        }
    }
    let mut subsets: Vec<EndpointSubset> = by_addresses.into_values().collect();
    for s in &mut subsets {
        if let Some(ports) = s.ports.as_mut() {
            ports.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
        }
    }
    subsets.sort_by(|a, b| {
        let key = |s: &EndpointSubset| serde_json::to_string(&s.ports).unwrap_or_default();
        key(a).cmp(&key(b))
    });
    subsets
}

/// `endpointSubsetsEqualIgnoreResourceVersion`.
fn subsets_equal_ignoring_resource_version(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    let strip = |subsets: &[EndpointSubset]| {
        let mut out = subsets.to_vec();
        for s in &mut out {
            for list in [&mut s.addresses, &mut s.not_ready_addresses] {
                for a in list.iter_mut().flatten() {
                    if let Some(r) = a.target_ref.as_mut() {
                        r.resource_version = None;
                    }
                }
                if list.as_ref().is_some_and(Vec::is_empty) {
                    *list = None;
                }
            }
            if s.ports.as_ref().is_some_and(Vec::is_empty) {
                s.ports = None;
            }
        }
        out
    };
    strip(a) == strip(b)
}

/// `capacityAnnotationSetCorrectly`: within capacity and without the over-capacity
/// annotation.
fn capacity_annotation_set_correctly(meta: &ObjectMeta, subsets: &[EndpointSubset]) -> bool {
    let (ready, not_ready) = count(subsets);
    if ready + not_ready > MAX_CAPACITY {
        return false;
    }
    !meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(OVER_CAPACITY))
}

/// `truncateEndpoints`: cut to [`MAX_CAPACITY`] addresses, not-ready ones first, each subset
/// keeping its share (rounded up); true if anything was cut.
fn truncate_endpoints(endpoints: &mut Endpoints) -> bool {
    let subsets = endpoints.subsets.get_or_insert_with(Vec::new);
    let (total_ready, total_not_ready) = count(subsets);
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, total_ready)
    } else {
        (MAX_CAPACITY - total_ready, total_not_ready)
    };
    let mut can_be_added = max;
    for subset in subsets.iter_mut() {
        let in_subset = if truncate_ready {
            subset.addresses.as_ref().map_or(0, Vec::len)
        } else {
            subset.not_ready_addresses.as_ref().map_or(0, Vec::len)
        };
        let share = (in_subset * max).div_ceil(total.max(1));
        let to_be_added = share.min(can_be_added);
        if truncate_ready {
            if let Some(a) = subset.addresses.as_mut() {
                a.truncate(to_be_added);
            }
            subset.not_ready_addresses = Some(Vec::new());
            can_be_added -= subset.addresses.as_ref().map_or(0, Vec::len);
        } else {
            if let Some(a) = subset.not_ready_addresses.as_mut() {
                a.truncate(to_be_added);
            }
            can_be_added -= subset.not_ready_addresses.as_ref().map_or(0, Vec::len);
        }
    }
    true
}

#[cfg(test)]
mod tests;
