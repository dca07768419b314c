//! `/healthz` and `/metrics`: what kube-controller-manager serves on its secure port
//! (`cmd/kube-controller-manager/app/serve.go`, `k8s.io/apiserver/pkg/server/healthz`).
//!
//! Unlike Kubernetes (HTTPS on 10257 with delegated authentication), miniplane serves plain
//! HTTP without authentication on the `--listen` address.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::metrics::Registry;

/// The router: `GET /healthz` → `ok`, `GET /metrics` → Prometheus text.
pub fn router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .with_state(registry)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        registry.render(),
    )
}

/// Serves [`router`] on `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, registry: Arc<Registry>, shutdown: CancellationToken) {
    let result = axum::serve(listener, router(registry))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    if let Err(err) = result {
        tracing::warn!(%err, "health server failed");
    }
}
