//! The simulator's control API: health and node faults, over HTTP and as library methods
//! ([`SimHandle`]; the `miniplane fault` CLI and tests call these).
//!
//! | request | effect |
//! | --- | --- |
//! | `GET /healthz` | `ok` |
//! | `GET /nodes` | `[{"name": "node-0", "heartbeat": true}, ...]` |
//! | `POST /nodes/<name>/heartbeat?stop=true` | the node's kubelet "dies": no Lease, no status, no pod work |
//! | `POST /nodes/<name>/heartbeat?stop=false` | it comes back (renews at once) |
//! | `DELETE /nodes/<name>` | stops simulating the node and deletes its Node object |
//!
//! There is no Kubernetes counterpart: this is what kwok's chaos stages and "stop the
//! kubelet on that VM" do in a real lab.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{delete, get, post};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde::Deserialize;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::pod_workers::{NodeTable, PodWorkers, lookup};

/// A handle on a running simulator (cheap to clone).
#[derive(Clone)]
pub struct SimHandle {
    pub(crate) client: kube::Client,
    pub(crate) nodes: NodeTable,
    pub(crate) workers: PodWorkers,
    pub(crate) registered: watch::Receiver<bool>,
    /// The kubelet API, if served.
    pub(crate) kubelet: Option<crate::server::KubeletServer>,
}

impl SimHandle {
    /// Names of the simulated nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .nodes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// Whether `name`'s heartbeats run.
    pub fn heartbeat(&self, name: &str) -> Result<bool> {
        lookup(&self.nodes, name)
            .map(|n| n.alive())
            .ok_or_else(|| Error::NoSuchNode(name.into()))
    }

    /// Stops `name`'s heartbeats: its kubelet behaves as dead (no Lease renewals, no status
    /// updates, its pods left as they are).
    pub fn stop_heartbeat(&self, name: &str) -> Result<()> {
        let node = lookup(&self.nodes, name).ok_or_else(|| Error::NoSuchNode(name.into()))?;
        node.set_heartbeat(false);
        Ok(())
    }

    /// Restarts `name`'s heartbeats and resyncs its pods.
    pub fn start_heartbeat(&self, name: &str) -> Result<()> {
        let node = lookup(&self.nodes, name).ok_or_else(|| Error::NoSuchNode(name.into()))?;
        node.set_heartbeat(true);
        self.workers.resync_node(name);
        Ok(())
    }

    /// Stops simulating `name` and deletes its Node object (its Lease goes with it through
    /// the owner reference; its pods stay bound to a node that no longer exists).
    pub async fn remove_node(&self, name: &str) -> Result<()> {
        let node = self
            .nodes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
            .ok_or_else(|| Error::NoSuchNode(name.into()))?;
        node.removed.cancel();
        match Api::<Node>::all(self.client.clone())
            .delete(name, &Default::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// How many kubelet API streams (exec, attach, port-forward, followed logs) are open:
    /// back to 0 once their clients have gone.
    pub fn open_streams(&self) -> usize {
        self.kubelet.as_ref().map_or(0, |k| k.open_streams())
    }

    /// Waits until every node has registered (false if the simulator stopped first).
    pub async fn wait_registered(&self) -> bool {
        let mut registered = self.registered.clone();
        registered.wait_for(|done| *done).await.is_ok()
    }
}

#[derive(Deserialize)]
struct HeartbeatQuery {
    stop: Option<bool>,
}

fn error_response(e: Error) -> Response {
    let code = match e {
        Error::NoSuchNode(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_GATEWAY,
    };
    (code, Json(json!({ "error": e.to_string() }))).into_response()
}

async fn list_nodes(State(handle): State<SimHandle>) -> Response {
    let nodes: Vec<_> = handle
        .node_names()
        .into_iter()
        .map(|name| {
            let heartbeat = handle.heartbeat(&name).unwrap_or(false);
            json!({ "name": name, "heartbeat": heartbeat })
        })
        .collect();
    Json(nodes).into_response()
}

async fn set_heartbeat(
    State(handle): State<SimHandle>,
    Path(name): Path<String>,
    Query(query): Query<HeartbeatQuery>,
) -> Response {
    let stop = query.stop.unwrap_or(false);
    let result = if stop {
        handle.stop_heartbeat(&name)
    } else {
        handle.start_heartbeat(&name)
    };
    match result {
        Ok(()) => Json(json!({ "name": name, "heartbeat": !stop })).into_response(),
        Err(e) => error_response(e),
    }
}

async fn remove_node(State(handle): State<SimHandle>, Path(name): Path<String>) -> Response {
    match handle.remove_node(&name).await {
        Ok(()) => Json(json!({ "name": name, "removed": true })).into_response(),
        Err(e) => error_response(e),
    }
}

/// The control API's routes.
pub fn router(handle: SimHandle) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/nodes", get(list_nodes))
        .route("/nodes/{name}/heartbeat", post(set_heartbeat))
        .route("/nodes/{name}", delete(remove_node))
        .with_state(handle)
}

/// Serves the control API on `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, handle: SimHandle, shutdown: CancellationToken) {
    let app = router(handle);
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "control API stopped");
    }
}
