//! The `default/kubernetes` Service, which in-cluster clients and client libraries expect:
//! kube-apiserver's "kubernetes service" controller
//! (`pkg/controlplane/controller/kubernetesservice/controller.go`,
//! `CreateOrUpdateMasterServiceIfNeeded`).
//!
//! ```text
//!   every INTERVAL (10 s, as kube-apiserver's --endpoint-reconciler-interval), from the start:
//!     default/kubernetes missing ─▶ create it            (deleted by hand: back within 10 s)
//!     ports or type changed      ─▶ put them back
//!   the Service: labels component=apiserver, provider=kubernetes; ClusterIP 10.96.0.1 (the
//!   first address of the service range); port https 443/TCP → the API server's port;
//!   sessionAffinity None; no selector (its endpoints are not a pod's)
//! ```
//!
//! Its endpoints are kube-apiserver's endpoint reconciler's
//! (`pkg/controlplane/reconcilers/lease.go` through `endpointsadapter.go`): the Endpoints
//! `default/kubernetes` (label `endpointslice.kubernetes.io/skip-mirror: "true"`, one subset:
//! the advertise address, port `https` = the API server's port) and the EndpointSlice
//! `default/kubernetes` made from it (label `kubernetes.io/service-name: kubernetes` only),
//! written when missing or different on the same interval. The advertise address is
//! `--advertise-address`, else the address of the default route's interface; with neither,
//! no endpoints are written (kube-apiserver refuses to start then).
//!
//! Simplifications: one API server, so no master leases (`masterleases`); the port is named
//! `https` though the API server speaks plain HTTP. The controller-manager's Endpoints and
//! EndpointSlice controllers leave the Service alone: it has no selector.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::registry::ResourceInfo;
use crate::rest::{self, WriteContext, WritePart};
use crate::state::AppState;
use crate::storage::{ObjectRef, Update};

/// How often the Service is checked (kube-apiserver's `--endpoint-reconciler-interval`).
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The Service's namespace and name.
pub const NAMESPACE: &str = "default";
/// See [`NAMESPACE`].
pub const NAME: &str = "kubernetes";

/// Keeps `default/kubernetes` in place, checking every `interval`, until the server shuts
/// down; `port` is the API server's (the Service's targetPort).
pub async fn run(state: AppState, port: u16, interval: Duration) {
    let advertise = state
        .options()
        .advertise_address
        .or_else(host_interface_address);
    if advertise.is_none() {
        tracing::warn!(
            "no advertise address (no default route): the kubernetes service gets no endpoints"
        );
    }
    loop {
        if let Err(e) = ensure(&state, port).await {
            tracing::warn!(error = %e, "could not reconcile the default/kubernetes service");
        }
        if let Some(ip) = advertise
            && let Err(e) = ensure_endpoints(&state, ip, port).await
        {
            tracing::warn!(error = %e, "could not reconcile the kubernetes service's endpoints");
        }
        tokio::select! {
            () = state.shutdown().cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// The ports the Service should have.
fn ports(port: u16) -> Value {
    json!([{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}])
}

/// Creates the Service if it is missing, or puts its ports and type back if they changed
/// (`CreateOrUpdateMasterServiceIfNeeded` with `reconcile`); true if it wrote.
pub async fn ensure(state: &AppState, port: u16) -> Result<bool> {
    let info = services(state)?;
    let (r, wctx) = target(&info, state);
    match state.storage().get(&r).await? {
        None => {
            let mut obj = json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": NAME,
                    "namespace": NAMESPACE,
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "ports": ports(port),
                    "clusterIP": crate::strategy::service::cluster_ip_for("default/kubernetes").to_string(),
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                },
            });
            rest::default(&info, &mut obj)?;
            rest::before_create(&info, Some(NAMESPACE), &mut obj, &wctx)?;
            match state.storage().create(&r, obj).await {
                Ok(_) => {
                    tracing::info!("created the default/kubernetes service");
                    Ok(true)
                }
                Err(ApiError::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(current) if needs_update(&current, port) => {
            let updated = state
                .storage()
                .guaranteed_update(&r, false, |current| {
                    let Some(current) = current else {
                        return Err(r.not_found());
                    };
                    if !needs_update(current, port) {
                        return Ok(Update::Keep(current.clone()));
                    }
                    let mut new = current.clone();
                    new["spec"]["ports"] = ports(port);
                    new["spec"]["type"] = json!("ClusterIP");
                    rest::before_update(&r, current, new, &wctx).map(Update::Put)
                })
                .await?;
            tracing::info!("put the default/kubernetes service's ports back");
            Ok(updated.object != current)
        }
        Some(_) => Ok(false),
    }
}

/// Whether the ports or the type differ from what they should be
/// (`getMasterServiceUpdateIfNeeded`).
fn needs_update(current: &Value, port: u16) -> bool {
    let spec = &current["spec"];
    let Some(current_ports) = spec["ports"].as_array() else {
        return true;
    };
    let want = ports(port);
    let same_ports = current_ports.len() == 1
        && ["name", "protocol", "port", "targetPort"]
            .iter()
            .all(|f| current_ports[0][f] == want[0][f]);
    !same_ports || spec["type"] != "ClusterIP"
}

/// `default/kubernetes` of `info`'s resource, and how kube-apiserver writes it.
fn target(info: &Arc<ResourceInfo>, state: &AppState) -> (ObjectRef, WriteContext) {
    let r = ObjectRef {
        info: info.clone(),
        namespace: Some(NAMESPACE.into()),
        name: NAME.into(),
    };
    let wctx = WriteContext {
        manager: Some("kube-apiserver".into()),
        now: state.now(),
        part: WritePart::Main,
        escalation: None,
        service_account: None,
        user: None,
        signer_check: None,
    };
    (r, wctx)
}

fn services(state: &AppState) -> Result<Arc<ResourceInfo>> {
    resource(state, "", "services")
}

fn resource(state: &AppState, group: &str, plural: &str) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new(group, "v1"), plural)
        .ok_or_else(|| ApiError::Internal(format!("{plural} are not registered")))
}

/// The address of the interface the default route leaves by (client-go's
/// `utilnet.ChooseHostInterface`, which kube-apiserver uses when bound to a loopback
/// address): the local address of a UDP socket "connected" to an outside address, which
/// sends nothing. `None` without such a route.
pub fn host_interface_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    socket.connect(("198.51.100.1", 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// The Endpoints kube-apiserver's reconciler writes for itself at `ip:port`.
fn endpoints_object(ip: IpAddr, port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [{
            "addresses": [{"ip": ip.to_string()}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }],
    })
}

/// `endpointSliceFromEndpoints` of [`endpoints_object`].
fn endpoint_slice_object(ip: IpAddr, port: u16) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": if ip.is_ipv6() { "IPv6" } else { "IPv4" },
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    })
}

/// Writes the Endpoints and the EndpointSlice `default/kubernetes` when they are missing
/// or differ from the API server's address and port (`doReconcile`,
/// `EnsureEndpointSliceFromEndpoints`); true if it wrote.
pub async fn ensure_endpoints(state: &AppState, ip: IpAddr, port: u16) -> Result<bool> {
    let endpoints = resource(state, "", "endpoints")?;
    let slices = resource(state, "discovery.k8s.io", "endpointslices")?;
    let wrote_endpoints =
        ensure_object(state, endpoints, endpoints_object(ip, port), &["subsets"]).await?;
    let wrote_slice = ensure_object(
        state,
        slices,
        endpoint_slice_object(ip, port),
        &["addressType", "endpoints", "ports"],
    )
    .await?;
    Ok(wrote_endpoints || wrote_slice)
}

/// Creates `want`, or puts back its labels and `fields` where the stored object differs.
async fn ensure_object(
    state: &AppState,
    info: Arc<ResourceInfo>,
    want: Value,
    fields: &[&str],
) -> Result<bool> {
    let (r, wctx) = target(&info, state);
    let differs = |current: &Value| {
        fields.iter().any(|f| !same(&current[*f], &want[*f]))
            || want["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .any(|(k, v)| current["metadata"]["labels"][k] != *v)
    };
    match state.storage().get(&r).await? {
        None => {
            let mut obj = want.clone();
            rest::default(&info, &mut obj)?;
            rest::before_create(&info, Some(NAMESPACE), &mut obj, &wctx)?;
            match state.storage().create(&r, obj).await {
                Ok(_) => Ok(true),
                Err(ApiError::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(current) if differs(&current) => {
            state
                .storage()
                .guaranteed_update(&r, false, |current| {
                    let Some(current) = current else {
                        return Err(r.not_found());
                    };
                    if !differs(current) {
                        return Ok(Update::Keep(current.clone()));
                    }
                    let mut new = current.clone();
                    for f in fields {
                        new[*f] = want[*f].clone();
                    }
                    for (k, v) in want["metadata"]["labels"].as_object().into_iter().flatten() {
                        new["metadata"]["labels"][k] = v.clone();
                    }
                    rest::before_update(&r, current, new, &wctx).map(Update::Put)
                })
                .await?;
            tracing::info!(kind = %info.kind, "reset the kubernetes service's endpoints");
            Ok(true)
        }
        Some(_) => Ok(false),
    }
}

/// Whether a stored field holds what was written: the stored one may carry defaults the
/// wanted one leaves out (compared only where the wanted one says something).
fn same(stored: &Value, want: &Value) -> bool {
    match (stored, want) {
        (Value::Object(s), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| same(s.get(k).unwrap_or(&Value::Null), v)),
        (Value::Array(s), Value::Array(w)) => {
            s.len() == w.len() && s.iter().zip(w).all(|(a, b)| same(a, b))
        }
        (s, w) => s == w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_ports_or_type_need_an_update() {
        let ok = json!({"spec": {"ports": ports(6443), "type": "ClusterIP"}});
        assert!(!needs_update(&ok, 6443));
        assert!(needs_update(&ok, 7000));
        let mut node_port = ok.clone();
        node_port["spec"]["type"] = json!("NodePort");
        assert!(needs_update(&node_port, 6443));
        assert!(needs_update(&json!({"spec": {}}), 6443));
    }
}
