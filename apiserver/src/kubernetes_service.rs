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
//! the advertise addresses of the API servers that are up, port `https`) and the
//! EndpointSlice `default/kubernetes` made from it (label `kubernetes.io/service-name:
//! kubernetes` only), written when missing or different on the same interval. The advertise
//! address is `--advertise-address`, else the address of the default route's interface; with
//! neither, no endpoints are written (kube-apiserver refuses to start then).
//!
//! Several API servers on one store: kube-apiserver's lease reconciler keeps a master lease
//! per API server (`/registry/masterleases/<ip>`, TTL 15 s) and lists their addresses, all on
//! one port. Here the API servers that are up are those whose identity Lease
//! ([`crate::identity_lease`]) was renewed within [`LEASE_TTL`], and since the API servers of
//! one machine differ by port, not address, one of them owns the Service and its endpoints:
//! the one up longest (the oldest `acquireTime`, then name; [`decide`]). It writes its port
//! and the addresses of the live API servers on that port; the others leave both alone, so
//! nothing flaps; when it stops renewing, the next one takes over within the TTL. A round
//! whose Leases cannot be read writes nothing.
//!
//! Simplifications: no master leases in the store (the identity Leases serve); the port is
//! named `https` though a plain cluster's API server speaks HTTP. The controller-manager's
//! Endpoints and EndpointSlice controllers leave the Service alone: it has no selector.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::identity_lease::{self, Peer};
use crate::registry::ResourceInfo;
use crate::rest::{self, WriteContext};
use crate::state::AppState;
use crate::storage::{ObjectRef, Update};

/// How often the Service is checked (kube-apiserver's `--endpoint-reconciler-interval`).
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The Service's namespace and name.
pub const NAMESPACE: &str = "default";
/// See [`NAMESPACE`].
pub const NAME: &str = "kubernetes";

/// How long after its identity Lease's last renewal an API server still counts as up
/// (kube-apiserver's `DefaultEndpointReconcilerTTL` for its master leases).
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// What this API server does with the Service on one round ([`decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// It owns the Service: its port, and endpoints at these addresses (the live API servers
    /// on its port, itself included; none without an advertise address).
    Owner {
        /// The endpoints' addresses, sorted.
        addresses: Vec<IpAddr>,
    },
    /// Another API server, up longer, owns it.
    Standby {
        /// That API server's identity Lease.
        owner: String,
    },
}

/// Who owns the Service among the live API servers `live` (their identity Leases) and this
/// one (`me`, its Lease's name, at `address`): the one up longest (oldest `acquireTime`, then
/// name). This one counts as up even before its Lease is written, as the newest.
pub fn decide(me: &str, address: Option<SocketAddr>, live: &[Peer]) -> Role {
    let owner = live
        .iter()
        .filter(|p| p.name != me)
        .map(|p| (p.since, p.name.as_str()))
        .chain(std::iter::once((
            live.iter()
                .find(|p| p.name == me)
                .map_or(jiff::Timestamp::MAX, |p| p.since),
            me,
        )))
        .min()
        .map_or(me, |(_, name)| name);
    if owner != me {
        return Role::Standby {
            owner: owner.to_string(),
        };
    }
    let Some(address) = address else {
        return Role::Owner { addresses: vec![] };
    };
    let mut addresses: Vec<IpAddr> = live
        .iter()
        .filter_map(|p| p.address)
        .filter(|a| a.port() == address.port() && a.is_ipv4() == address.is_ipv4())
        .map(|a| a.ip())
        .chain(std::iter::once(address.ip()))
        .collect();
    addresses.sort();
    addresses.dedup();
    Role::Owner { addresses }
}

/// Keeps `default/kubernetes` in place, checking every `interval`, until the server shuts
/// down; `port` is the API server's (the Service's targetPort), `identity` its identity
/// Lease's name (see [`decide`] for several API servers).
pub async fn run(state: AppState, port: u16, interval: Duration, identity: String) {
    let advertise = state
        .options()
        .advertise_address
        .or_else(host_interface_address);
    if advertise.is_none() {
        tracing::warn!(
            "no advertise address (no default route): the kubernetes service gets no endpoints"
        );
    }
    let address = advertise.map(|ip| SocketAddr::new(ip, port));
    let mut last: Option<Role> = None;
    loop {
        // Without the Leases, nothing is written this round (as kube-apiserver's reconciler
        // gives up a round when it cannot list its master leases): an API server that cannot
        // see the others must not take the Service over.
        let role = match identity_lease::live(&state, LEASE_TTL).await {
            Ok(live) => Some(decide(&identity, address, &live)),
            Err(e) => {
                tracing::warn!(error = %e, "could not list the API servers' identity leases");
                None
            }
        };
        if let Some(role) = role {
            reconcile(&state, port, &role, last.as_ref()).await;
            last = Some(role);
        }
        tokio::select! {
            () = state.shutdown().cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// One round of [`run`] as `role` (`last`: the round before's, to log changes only).
async fn reconcile(state: &AppState, port: u16, role: &Role, last: Option<&Role>) {
    if last != Some(role) {
        match role {
            Role::Owner { .. } => {
                tracing::info!("this API server reconciles the kubernetes service")
            }
            Role::Standby { owner } => tracing::info!(
                %owner,
                "another API server, up longer, reconciles the kubernetes service"
            ),
        }
    }
    let Role::Owner { addresses } = role else {
        return;
    };
    if let Err(e) = ensure(state, port).await {
        tracing::warn!(error = %e, "could not reconcile the default/kubernetes service");
    }
    if !addresses.is_empty()
        && let Err(e) = ensure_endpoints(state, addresses, port).await
    {
        tracing::warn!(error = %e, "could not reconcile the kubernetes service's endpoints");
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
    let wctx = WriteContext::server_own("kube-apiserver", state.now(), state.ids().clone());
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

/// The Endpoints kube-apiserver's reconciler writes for the API servers at `addresses`, all on
/// `port`.
fn endpoints_object(addresses: &[IpAddr], port: u16) -> Value {
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|ip| json!({"ip": ip.to_string()}))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [{
            "addresses": addresses,
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }],
    })
}

/// `endpointSliceFromEndpoints` of [`endpoints_object`].
fn endpoint_slice_object(addresses: &[IpAddr], port: u16) -> Value {
    let ipv6 = addresses.first().is_some_and(IpAddr::is_ipv6);
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": if ipv6 { "IPv6" } else { "IPv4" },
        "endpoints": endpoints,
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    })
}

/// Writes the Endpoints and the EndpointSlice `default/kubernetes` when they are missing
/// or differ from the API servers' addresses and port (`doReconcile`,
/// `EnsureEndpointSliceFromEndpoints`); true if it wrote.
pub async fn ensure_endpoints(state: &AppState, addresses: &[IpAddr], port: u16) -> Result<bool> {
    let endpoints = resource(state, "", "endpoints")?;
    let slices = resource(state, "discovery.k8s.io", "endpointslices")?;
    let wrote_endpoints = ensure_object(
        state,
        endpoints,
        endpoints_object(addresses, port),
        &["subsets"],
    )
    .await?;
    let wrote_slice = ensure_object(
        state,
        slices,
        endpoint_slice_object(addresses, port),
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

    fn peer(name: &str, address: &str, since: &str) -> Peer {
        Peer {
            name: name.into(),
            address: Some(address.parse().unwrap()),
            since: since.parse().unwrap(),
        }
    }

    #[test]
    fn the_api_server_up_longest_owns_the_service() {
        let a = peer("apiserver-a", "192.0.2.1:6443", "2026-01-01T00:00:00Z");
        let b = peer("apiserver-b", "192.0.2.1:6444", "2026-01-01T00:00:05Z");
        let c = peer("apiserver-c", "192.0.2.2:6443", "2026-01-01T00:00:09Z");
        let live = [a.clone(), b.clone(), c.clone()];
        // The oldest owns it, with every live address on its port.
        assert_eq!(
            decide("apiserver-a", a.address, &live),
            Role::Owner {
                addresses: vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()]
            }
        );
        for me in [&b, &c] {
            assert_eq!(
                decide(&me.name, me.address, &live),
                Role::Standby {
                    owner: "apiserver-a".into()
                }
            );
        }
        // a gone: b takes over, with its own port (c is on another one).
        assert_eq!(
            decide("apiserver-b", b.address, &[b.clone(), c.clone()]),
            Role::Owner {
                addresses: vec!["192.0.2.1".parse().unwrap()]
            }
        );
        // A server whose Lease is not written yet is the newest: it waits for the others...
        let d: SocketAddr = "192.0.2.3:7000".parse().unwrap();
        assert_eq!(
            decide("apiserver-d", Some(d), &live),
            Role::Standby {
                owner: "apiserver-a".into()
            }
        );
        // ...and alone, it owns the Service at once.
        assert_eq!(
            decide("apiserver-d", Some(d), &[]),
            Role::Owner {
                addresses: vec![d.ip()]
            }
        );
        // Same creation time: the name decides.
        let twin = peer("apiserver-0", "192.0.2.9:6445", "2026-01-01T00:00:00Z");
        assert_eq!(
            decide("apiserver-a", a.address, &[a.clone(), twin]),
            Role::Standby {
                owner: "apiserver-0".into()
            }
        );
        // No advertise address: the owner writes the Service but no endpoints.
        assert_eq!(
            decide("apiserver-a", None, &live),
            Role::Owner { addresses: vec![] }
        );
    }
}
