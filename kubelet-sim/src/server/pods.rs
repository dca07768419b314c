//! `GET /pods`: the pods bound to the node, as the kubelet's pod manager has them.
//!
//! Mirrors `pkg/kubelet/server/server.go` `getPods` / `encodePods`: a v1 `PodList` of the
//! node's pods (here: the pod informer's copies of the pods bound to the node the `Host`
//! header names, sorted by namespace and name).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;

use super::{KubeletServer, json_response};

/// `GET /pods`.
pub async fn get_pods(State(server): State<KubeletServer>, headers: HeaderMap) -> Response {
    let node = match server.node_for(&headers) {
        Ok(n) => n,
        Err(response) => return *response,
    };
    let items: Vec<Pod> = server
        .pods_on(node.name())
        .iter()
        .map(|p| p.as_ref().clone())
        .collect();
    let list = k8s_openapi::List {
        items,
        metadata: ListMeta::default(),
    };
    json_response(serde_json::to_vec(&list).unwrap_or_default())
}
