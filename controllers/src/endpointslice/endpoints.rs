//! From a pod and its Service to one endpoint: `staging/src/k8s.io/endpointslice/utils.go`
//! (`podToEndpoint`, `getEndpointPorts`, `getEndpointAddresses`, `FindPort`,
//! `getAddressTypesForService`, `setEndpointSliceLabels`) and `util/controller_utils.go`
//! (`ShouldPodBeInEndpoints`, `ShouldSetHostname`, `EndpointsEqualBeyondHash`).
//!
//! ```text
//!   pod ready?  terminating (deletionTimestamp)?   → serving = ready
//!                                                   terminating = deletionTimestamp set
//!                                                   ready = publishNotReadyAddresses
//!                                                           || (ready && !terminating)
//!   targetPort 8080 → 8080;  targetPort "http" → the containerPort named "http" (same protocol)
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::pod_readiness::{is_pod_ready, pod_phase};

/// `discovery.LabelServiceName`: the Service a slice belongs to.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `discovery.LabelManagedBy`: which controller manages a slice.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `v1.IsHeadlessService`: set on the slices (and Endpoints) of a Service without cluster IP.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// The topology label a node's zone is read from (`v1.LabelTopologyZone`).
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

/// `ShouldPodBeInEndpoints`: not Succeeded or Failed, has an IP, and (unless
/// `include_terminating`) is not being deleted.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let phase = pod_phase(pod);
    if phase == "Succeeded" || phase == "Failed" {
        return false;
    }
    let status = pod.status.as_ref();
    let has_ip = status.is_some_and(|s| {
        s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
            || s.pod_ips.as_ref().is_some_and(|ips| !ips.is_empty())
    });
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// `ShouldSetHostname`: the pod names a hostname and its subdomain is the Service.
pub fn should_set_hostname(pod: &Pod, service: &Service) -> bool {
    let spec = pod.spec.as_ref();
    let hostname = spec.and_then(|s| s.hostname.as_deref()).unwrap_or("");
    let subdomain = spec.and_then(|s| s.subdomain.as_deref()).unwrap_or("");
    !hostname.is_empty()
        && Some(subdomain) == service.metadata.name.as_deref()
        && service.metadata.namespace == pod.metadata.namespace
}

/// `isServiceIPSet`: the Service has a cluster IP (is not headless).
pub fn is_service_ip_set(service: &Service) -> bool {
    let ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or("");
    !ip.is_empty() && ip != "None"
}

fn is_ipv6(ip: &str) -> bool {
    ip.parse::<IpAddr>()
        .is_ok_and(|ip| ip.to_canonical().is_ipv6())
}

/// `getAddressTypesForService`: `IPv4`/`IPv6` from `spec.ipFamilies`; without them the
/// cluster IP's family, and both for a headless Service.
pub fn address_types_for_service(service: &Service) -> Vec<&'static str> {
    let spec = service.spec.as_ref();
    let mut types = Vec::new();
    for family in spec
        .and_then(|s| s.ip_families.as_deref())
        .unwrap_or_default()
    {
        let t = match family.as_str() {
            "IPv4" => "IPv4",
            "IPv6" => "IPv6",
            _ => continue,
        };
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if !types.is_empty() {
        return types;
    }
    if is_service_ip_set(service) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        return vec![if is_ipv6(ip) { "IPv6" } else { "IPv4" }];
    }
    vec!["IPv4", "IPv6"]
}

/// `getEndpointAddresses`: the pod's `status.podIPs` of the address type, in canonical form.
pub fn endpoint_addresses(pod: &Pod, address_type: &str) -> Vec<String> {
    let ips = pod.status.as_ref().and_then(|s| s.pod_ips.as_deref());
    ips.unwrap_or_default()
        .iter()
        .filter_map(|ip| ip.ip.parse::<IpAddr>().ok())
        .filter(|ip| (address_type == "IPv6") == ip.is_ipv6())
        .map(|ip| ip.to_string())
        .collect()
}

/// `podToEndpoint`: the endpoint of `pod` (its node, for the zone, if known).
pub fn pod_to_endpoint(
    pod: &Pod,
    node: Option<&Node>,
    service: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let ready = publish || (serving && !terminating);
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let zone = node
        .and_then(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get(LABEL_TOPOLOGY_ZONE)
                .cloned()
        })
        .filter(|z| !z.is_empty());
    let hostname = should_set_hostname(pod, service)
        .then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone()))
        .flatten();
    Endpoint {
        addresses: endpoint_addresses(pod, address_type),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(pod_reference(pod)),
        node_name,
        zone,
        hostname,
        ..Default::default()
    }
}

/// The `targetRef` of a pod's endpoint or address: kind, namespace, name and UID.
pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// `FindPort`: a numeric `targetPort` as it is; a named one looked up among the pod's
/// container ports (and those of its sidecar init containers) with the same protocol.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        Some(IntOrString::Int(n)) => Some(*n),
        None => Some(port.port),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// `getEndpointPorts`: one port per Service port whose target the pod has (a headless
/// Service may have none).
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let ports = service.spec.as_ref().and_then(|s| s.ports.as_deref());
    ports
        .unwrap_or_default()
        .iter()
        .filter_map(|sp| {
            let number = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(number),
                protocol: Some(sp.protocol.clone().unwrap_or_default()),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// `isReservedLabelKey`: the labels the controller owns on a slice.
fn is_reserved_label(key: &str) -> bool {
    key == LABEL_SERVICE_NAME || key == LABEL_MANAGED_BY || key == LABEL_HEADLESS
}

/// `setEndpointSliceLabels`: the Service's labels plus the reserved ones; true when the
/// slice's own (non-reserved) labels differ from the Service's.
pub fn slice_labels(
    current: Option<&BTreeMap<String, String>>,
    service: &Service,
    controller_name: &str,
) -> (BTreeMap<String, String>, bool) {
    let own = |labels: Option<&BTreeMap<String, String>>| -> BTreeMap<String, String> {
        labels
            .into_iter()
            .flatten()
            .filter(|(k, _)| !is_reserved_label(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut labels = own(service.metadata.labels.as_ref());
    let changed = own(current) != labels;
    if !is_service_ip_set(service) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        service.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), controller_name.into());
    (labels, changed)
}

/// `EndpointsEqualBeyondHash`: node, zone, conditions and target equal (the addresses,
/// hostname and target name are the endpoint's identity, compared already).
pub fn endpoints_equal_beyond_hash(a: &Endpoint, b: &Endpoint) -> bool {
    let conditions = |e: &Endpoint| {
        let c = e.conditions.clone().unwrap_or_default();
        (c.ready, c.serving, c.terminating)
    };
    let target = |e: &Endpoint| {
        e.target_ref.clone().map(|mut r| {
            r.resource_version = None;
            r
        })
    };
    a.node_name == b.node_name
        && a.zone == b.zone
        && conditions(a) == conditions(b)
        && target(a) == target(b)
}

/// The identity of an endpoint in a set (`hashEndpoint`): sorted addresses, hostname and the
/// target's namespace and name.
pub type EndpointKey = (Vec<String>, String, String, String);

/// [`EndpointKey`] of an endpoint.
pub fn endpoint_key(e: &Endpoint) -> EndpointKey {
    let mut addresses = e.addresses.clone();
    addresses.sort();
    let (ns, name) = e
        .target_ref
        .as_ref()
        .map(|r| {
            (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    (addresses, e.hostname.clone().unwrap_or_default(), ns, name)
}
