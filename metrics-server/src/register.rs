//! Registering with the aggregation layer as metrics-server's install manifest
//! (`components.yaml`) does, and as miniplane's aggregator routes (see the API server's
//! `aggregator` module): the ClusterRole `system:aggregated-metrics-reader` (aggregated into
//! `view`, `edit` and `admin`), the Service `kube-system/metrics-server` (port `https` 443),
//! its EndpointSlice with this server's address and port, and the APIService
//! `v1beta1.metrics.k8s.io` (`groupPriorityMinimum` 100, `versionPriority` 100,
//! `insecureSkipTLSVerify`).
//!
//! Differences from the manifest, because no pod runs metrics-server here: the Service has no
//! selector, and metrics-server writes its EndpointSlice itself (label
//! `kubernetes.io/service-name: metrics-server`, managed by `metrics-server.miniplane.dev`,
//! so the EndpointSlice controller leaves it alone) with the machine's address and the port it
//! listens on; on shutdown it deletes that slice, as the endpoint of a deleted pod goes, and
//! the APIService turns `False (EndpointsNotFound)`. Each object is created when missing and
//! merge-patched to what it should be otherwise.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The Service's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The Service's (and the EndpointSlice's) name.
pub const SERVICE: &str = "metrics-server";
/// The APIService's name.
pub const APISERVICE: &str = "v1beta1.metrics.k8s.io";
/// The ClusterRole that lets `view`, `edit` and `admin` read metrics.
pub const READER_ROLE: &str = "system:aggregated-metrics-reader";
/// Who manages the EndpointSlice (`endpointslice.kubernetes.io/managed-by`).
pub const MANAGED_BY: &str = "metrics-server.miniplane.dev";
/// The address written when the machine has no interface with a default route: the first
/// address of the simulated nodes' network, standing for the control-plane machine.
pub const FALLBACK_ADDRESS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(172, 16, 0, 1));

/// The address of the interface of the default route (as kube-apiserver picks its advertise
/// address; no packet is sent), else [`FALLBACK_ADDRESS`].
pub fn host_address() -> IpAddr {
    let found = std::net::UdpSocket::bind(("0.0.0.0", 0))
        .and_then(|s| {
            s.connect(("198.51.100.1", 9))?;
            s.local_addr()
        })
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    found.unwrap_or(FALLBACK_ADDRESS)
}

fn labels() -> Value {
    json!({"k8s-app": "metrics-server"})
}

/// The aggregated reader ClusterRole.
pub fn reader_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": READER_ROLE,
            "labels": {
                "k8s-app": "metrics-server",
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                "rbac.authorization.k8s.io/aggregate-to-view": "true",
            },
        },
        "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}],
    })
}

/// The Service (no selector: its endpoints are written by [`endpoint_slice`]'s owner).
pub fn service(port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": labels()},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
    })
}

/// The EndpointSlice: `address`, ready, port `https` = `port`.
pub fn endpoint_slice(address: IpAddr, port: u16) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "labels": {
                "k8s-app": "metrics-server",
                "kubernetes.io/service-name": SERVICE,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": if address.is_ipv6() { "IPv6" } else { "IPv4" },
        "endpoints": [{
            "addresses": [address.to_string()],
            "conditions": {"ready": true, "serving": true, "terminating": false},
        }],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    })
}

/// The APIService.
pub fn apiservice() -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": APISERVICE, "labels": labels()},
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": true,
            "service": {"name": SERVICE, "namespace": NAMESPACE},
        },
    })
}

/// Creates `obj` through `api`, or merge-patches the existing one to it.
async fn ensure<K>(api: &Api<K>, obj: &Value) -> kube::Result<()>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if api.get_opt(name).await?.is_none() {
        let typed: K = serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &typed).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    api.patch(name, &PatchParams::default(), &Patch::Merge(obj))
        .await
        .map(|_| ())
}

/// Writes every object, the APIService last (its backend must be reachable first).
pub async fn register(client: &kube::Client, address: IpAddr, port: u16) -> kube::Result<()> {
    ensure(&Api::<ClusterRole>::all(client.clone()), &reader_role()).await?;
    ensure(
        &Api::<Service>::namespaced(client.clone(), NAMESPACE),
        &service(port),
    )
    .await?;
    ensure(
        &Api::<EndpointSlice>::namespaced(client.clone(), NAMESPACE),
        &endpoint_slice(address, port),
    )
    .await?;
    ensure(&Api::<APIService>::all(client.clone()), &apiservice()).await
}

/// Deletes the EndpointSlice (gone already: fine).
pub async fn unregister(client: &kube::Client) -> kube::Result<()> {
    let api = Api::<EndpointSlice>::namespaced(client.clone(), NAMESPACE);
    match api.delete(SERVICE, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objects_decode_into_their_kinds() {
        let svc: Service = serde_json::from_value(service(4443)).expect("a Service");
        let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
        assert_eq!(ports[0].port, 443);
        assert_eq!(ports[0].name.as_deref(), Some("https"));
        let slice: EndpointSlice =
            serde_json::from_value(endpoint_slice("192.0.2.7".parse().expect("ip"), 4443))
                .expect("an EndpointSlice");
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(slice.endpoints[0].addresses, ["192.0.2.7"]);
        assert_eq!(
            slice.ports.unwrap_or_default()[0].port,
            Some(4443),
            "the port it listens on"
        );
        let api: APIService = serde_json::from_value(apiservice()).expect("an APIService");
        let spec = api.spec.unwrap_or_default();
        assert_eq!(spec.group.as_deref(), Some("metrics.k8s.io"));
        assert_eq!(spec.group_priority_minimum, 100);
        let role: ClusterRole = serde_json::from_value(reader_role()).expect("a ClusterRole");
        assert_eq!(
            role.rules.unwrap_or_default()[0].verbs,
            ["get", "list", "watch"]
        );
        let ip = host_address();
        assert!(!ip.is_loopback() && !ip.is_unspecified());
    }
}
