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
//! Simplifications: the Service's endpoints are not written, and the port is named `https`
//! though the API server speaks plain HTTP. kube-apiserver's endpoint reconciler
//! (`pkg/controlplane/reconcilers/lease.go` through `endpointsadapter.go`) writes the Endpoints
//! `default/kubernetes` and an EndpointSlice of the same name (label
//! `kubernetes.io/service-name: kubernetes` only, no managed-by label) with its advertised
//! address; miniplane's address is a loopback one, which Endpoints and EndpointSlice
//! validation refuse. The controller-manager's Endpoints and EndpointSlice controllers leave
//! the Service alone: it has no selector.

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
    loop {
        if let Err(e) = ensure(&state, port).await {
            tracing::warn!(error = %e, "could not reconcile the default/kubernetes service");
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
    let r = ObjectRef {
        info: info.clone(),
        namespace: Some(NAMESPACE.into()),
        name: NAME.into(),
    };
    let wctx = WriteContext {
        manager: Some("kube-apiserver".into()),
        now: state.now(),
        part: WritePart::Main,
    };
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

fn services(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), "services")
        .ok_or_else(|| ApiError::Internal("services are not registered".into()))
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
