//! One scrape: every node's kubelet asked for `/metrics/resource` at once, the answers read
//! into one batch.
//!
//! Mirrors metrics-server's `pkg/scraper/scraper.go` (`Scrape`: all nodes in parallel, each
//! within the kubelet request timeout, failures logged and left out) and
//! `pkg/scraper/client/resource/client.go` (`GetMetrics`: `GET /metrics/resource` on the
//! node's kubelet port, `status.daemonEndpoints.kubeletEndpoint.port`).
//!
//! Each kubelet is reached over HTTPS with the metrics-server's own credentials, or plain
//! HTTP with `--deprecated-kubelet-completely-insecure` ([`crate::kubelet_client`]).
//!
//! Simplification, as the API server's node proxy makes it: every simulated kubelet is on
//! this machine, so a node's kubelet is dialled at `127.0.0.1:<its port>`, with
//! `Host: <node name>:<port>` naming the node (metrics-server dials the node's `InternalIP`).
//! At most [`CONCURRENCY`] requests are in flight; connections are kept alive between
//! scrapes.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Empty};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use crate::decode::{MetricsBatch, decode_batch};
use crate::kubelet_client::KubeletTransport;

/// Requests to kubelets in flight at once.
pub const CONCURRENCY: usize = 64;
/// The most of a kubelet's answer read (a node with hundreds of pods answers ~100 KiB).
pub const MAX_BODY: usize = 32 << 20;

/// The kubelets' HTTP client.
#[derive(Clone)]
pub struct Scraper {
    http: Http,
    /// `Authorization` of every request, when the credentials are a token.
    bearer: Option<http::HeaderValue>,
    timeout: Duration,
}

/// A pooled client over plain HTTP or HTTPS.
#[derive(Clone)]
enum Http {
    Plain(Client<HttpConnector, Empty<Bytes>>),
    Tls(Client<HttpsConnector<HttpConnector>, Empty<Bytes>>),
}

/// A node's kubelet port (`status.daemonEndpoints.kubeletEndpoint.port`), if it has one.
pub fn kubelet_port(node: &Node) -> Option<u16> {
    let port = node
        .status
        .as_ref()?
        .daemon_endpoints
        .as_ref()?
        .kubelet_endpoint
        .as_ref()?
        .port;
    u16::try_from(port).ok().filter(|p| *p > 0)
}

/// Whether the node reports `Ready=True`.
pub fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

impl Scraper {
    /// A plain-HTTP client whose requests each take at most `timeout`
    /// (`--deprecated-kubelet-completely-insecure`).
    pub fn new(timeout: Duration) -> Self {
        Self::with_transport(timeout, &KubeletTransport::plain())
    }

    /// A client over `transport` whose requests each take at most `timeout`.
    pub fn with_transport(timeout: Duration, transport: &KubeletTransport) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        connector.enforce_http(false);
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(Duration::from_secs(90));
        let http = match &transport.tls {
            None => Http::Plain(builder.build(connector)),
            Some(tls) => Http::Tls(
                builder.build(
                    hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(rustls::ClientConfig::clone(tls))
                        .https_only()
                        .enable_http1()
                        .wrap_connector(connector),
                ),
            ),
        };
        let bearer = transport
            .bearer
            .as_ref()
            .and_then(|t| http::HeaderValue::from_str(&format!("Bearer {t}")).ok());
        Scraper {
            http,
            bearer,
            timeout,
        }
    }

    /// `GET /metrics/resource` on `node`'s kubelet: the body, or why not.
    pub async fn fetch(&self, node: &str, port: u16) -> Result<String, String> {
        let scheme = match self.http {
            Http::Plain(_) => "http",
            Http::Tls(_) => "https",
        };
        let mut request =
            http::Request::get(format!("{scheme}://127.0.0.1:{port}/metrics/resource"))
                .header(http::header::HOST, format!("{node}:{port}"))
                .body(Empty::<Bytes>::new())
                .map_err(|e| e.to_string())?;
        if let Some(bearer) = &self.bearer {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, bearer.clone());
        }
        let attempt = async {
            let response = match &self.http {
                Http::Plain(c) => c.request(request).await,
                Http::Tls(c) => c.request(request).await,
            }
            .map_err(|e| format!("request failed: {e}"))?;
            let status = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "request failed, status: {:?}",
                    status.canonical_reason().unwrap_or(status.as_str())
                ));
            }
            String::from_utf8(body.to_vec()).map_err(|e| e.to_string())
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(format!("timed out after {:?}", self.timeout)),
        }
    }

    /// Scrapes every node in `nodes`; `now` gives each answer's time (the default timestamp
    /// of samples without one).
    pub async fn scrape(
        &self,
        nodes: &[std::sync::Arc<Node>],
        now: impl Fn() -> Timestamp,
    ) -> MetricsBatch {
        let now = &now;
        let answers = futures::stream::iter(nodes.iter().cloned())
            .map(|node| async move {
                let name = node.metadata.name.clone().unwrap_or_default();
                let Some(port) = kubelet_port(&node) else {
                    tracing::debug!(node = %name, "no kubelet port");
                    return None;
                };
                match self.fetch(&name, port).await {
                    Ok(text) => Some(decode_batch(&text, now(), &name)),
                    Err(e) if !node_is_ready(&node) => {
                        tracing::debug!(node = %name, error = %e, "failed to scrape node, node is not ready");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "failed to scrape node");
                        None
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        let mut batch = MetricsBatch::default();
        for answer in answers.into_iter().flatten() {
            for (name, point) in answer.nodes {
                batch.nodes.entry(name).or_insert(point);
            }
            for (pod, containers) in answer.pods {
                batch.pods.entry(pod).or_insert(containers);
            }
        }
        batch
    }
}
