//! [`HttpCloud`]: the client of the simulated cloud's HTTP API. It is the cloud provider (the
//! `Interface` and its parts are in `provider.rs`), as `legacy-cloud-providers/aws` wraps the
//! EC2 and ELB APIs, and it has the admin calls `miniplane cloud` and the cluster launcher use
//! (launch, stop, start and delete instances; list load balancers and routes; faults).
//!
//! ```text
//!   HttpCloud::from_cloud_config("<dir>/cloud-config.json")   {"endpoint": "http://127.0.0.1:PORT"}
//!     .launch_instance("node-1", Some(10.0.0.5))  ──POST /v1/instances──▶  201 {"id": "i-..."}
//!     .instance_metadata(&node)                   ──GET  /v1/instances?name=node-1──▶ 200 {"items": [...]}
//! ```
//!
//! Every call is plain HTTP/1.1 with a JSON body, over pooled connections, and has a deadline
//! ([`DEFAULT_TIMEOUT`]): a cloud that cannot be reached or does not answer in time is
//! [`CloudError::Unavailable`]; an error answer is [`CloudError::Api`] with the cloud's own
//! message (404 on an instance is [`CloudError::InstanceNotFound`]).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::CloudError;

use super::api::{ErrorBody, LaunchRequest, List};
use super::error::{Error, Result};
use super::faults::{Fault, FaultApi};
use super::instances::CloudInstance;
use super::load_balancers::CloudLoadBalancer;
use super::routes::CloudRoute;
use super::server::CloudConfig;

/// How long one call may take by default (as a cloud SDK's request timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `ensure_load_balancer` waits for a new load balancer to be active by default.
pub const DEFAULT_PROVISIONING_WAIT: Duration = Duration::from_secs(60);

/// How long an unused connection is kept for the next call.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of the simulated cloud; cheap to clone (the clones share connections).
#[derive(Debug, Clone)]
pub struct HttpCloud {
    /// `http://host:port`, without a trailing slash.
    endpoint: String,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    pub(super) provisioning_wait: Duration,
}

impl HttpCloud {
    /// A client of the cloud at `endpoint` (`http://127.0.0.1:PORT`). Fails when the endpoint
    /// is not a plain `http://` URL with a host.
    pub fn new(endpoint: &str) -> Result<HttpCloud> {
        let invalid = |reason: &str| Error::Endpoint {
            endpoint: endpoint.to_owned(),
            reason: reason.to_owned(),
        };
        let uri: http::Uri = endpoint.parse().map_err(|_| invalid("not a URL"))?;
        if uri.scheme_str() != Some("http") {
            return Err(invalid("only http:// is served"));
        }
        if uri.host().is_none() {
            return Err(invalid("no host"));
        }
        if (uri.path() != "/" && !uri.path().is_empty()) || uri.query().is_some() {
            return Err(invalid("a path or query is not expected"));
        }
        Ok(HttpCloud {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .build_http(),
            timeout: DEFAULT_TIMEOUT,
            provisioning_wait: DEFAULT_PROVISIONING_WAIT,
        })
    }

    /// A client of the cloud named in a cloud config file (`{"endpoint": "http://..."}`, what
    /// [`Server::bind`](super::Server::bind) writes to `<dir>/cloud-config.json`).
    pub fn from_cloud_config(path: &Path) -> Result<HttpCloud> {
        let invalid = |reason: String| Error::CloudConfig {
            path: path.to_owned(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| invalid(e.to_string()))?;
        let config: CloudConfig =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        HttpCloud::new(&config.endpoint)
    }

    /// Sets the deadline of each call.
    pub fn with_timeout(mut self, timeout: Duration) -> HttpCloud {
        self.timeout = timeout;
        self
    }

    /// Sets how long `ensure_load_balancer` waits for a new load balancer to be active.
    pub fn with_provisioning_wait(mut self, wait: Duration) -> HttpCloud {
        self.provisioning_wait = wait;
        self
    }

    /// The endpoint, `http://host:port`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    // --- admin calls -----------------------------------------------------------------------

    /// Every instance, in launch order (terminated ones for an hour after).
    pub async fn list_instances(&self) -> Result<Vec<CloudInstance>, CloudError> {
        self.list("/v1/instances").await
    }

    /// Every instance, unless none changed since the list whose `ETag` was `since` (then
    /// `None`: the server answered `304 Not Modified` and sent nothing). The list comes with
    /// its own `ETag`, to pass as `since` next time. This is how a poller watches thousands
    /// of instances at the cost of one empty answer while nothing happens.
    pub async fn list_instances_since(
        &self,
        since: Option<&str>,
    ) -> Result<Option<(Vec<CloudInstance>, String)>, CloudError> {
        let path = "/v1/instances";
        let headers: Vec<(http::header::HeaderName, &str)> = since
            .map(|tag| (http::header::IF_NONE_MATCH, tag))
            .into_iter()
            .collect();
        let (status, answer_headers, bytes) = self
            .send_with(Method::GET, path, None::<&()>, &headers)
            .await?;
        if status == StatusCode::NOT_MODIFIED {
            return Ok(None);
        }
        let tag = answer_headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let list: List<CloudInstance> = decode(Method::GET, path, status, &bytes)?;
        Ok(Some((list.items, tag)))
    }

    /// The instance named `name` that is not terminated ([`CloudError::InstanceNotFound`]
    /// when there is none).
    pub async fn get_instance(&self, name: &str) -> Result<CloudInstance, CloudError> {
        let path = format!("/v1/instances/{}", escape(name));
        not_found_as_instance(self.call(Method::GET, &path, None::<&()>).await)
    }

    /// Makes sure an instance named `name` exists: launches one (with `internal_ip` as its
    /// InternalIP, or one of 172.31.0.0/16) unless one that is not terminated exists, which
    /// is returned unchanged. This is how the cluster launcher makes sure its nodes have
    /// instances.
    pub async fn launch_instance(
        &self,
        name: &str,
        internal_ip: Option<Ipv4Addr>,
    ) -> Result<CloudInstance, CloudError> {
        let request = LaunchRequest {
            name: name.to_owned(),
            internal_ip,
            instance_type: None,
        };
        self.call(Method::POST, "/v1/instances", Some(&request))
            .await
    }

    /// Stops the instance `name` (its node shuts down).
    pub async fn stop_instance(&self, name: &str) -> Result<CloudInstance, CloudError> {
        let path = format!("/v1/instances/{}/stop", escape(name));
        not_found_as_instance(self.call(Method::POST, &path, None::<&()>).await)
    }

    /// Starts the stopped instance `name`.
    pub async fn start_instance(&self, name: &str) -> Result<CloudInstance, CloudError> {
        let path = format!("/v1/instances/{}/start", escape(name));
        not_found_as_instance(self.call(Method::POST, &path, None::<&()>).await)
    }

    /// Terminates the instance `name`: it no longer exists for `InstancesV2`.
    pub async fn delete_instance(&self, name: &str) -> Result<CloudInstance, CloudError> {
        let path = format!("/v1/instances/{}", escape(name));
        not_found_as_instance(self.call(Method::DELETE, &path, None::<&()>).await)
    }

    /// Every load balancer, by name.
    pub async fn list_load_balancers(&self) -> Result<Vec<CloudLoadBalancer>, CloudError> {
        self.list("/v1/loadbalancers").await
    }

    /// Every route of every cluster, by name.
    pub async fn list_all_routes(&self) -> Result<Vec<CloudRoute>, CloudError> {
        self.list("/v1/routes").await
    }

    /// The faults in force.
    pub async fn get_faults(&self) -> Result<Vec<Fault>, CloudError> {
        self.list("/v1/faults").await
    }

    /// Puts `fault` in force on its API group (replacing the one there); the faults in force
    /// after.
    pub async fn set_fault(&self, fault: &Fault) -> Result<Vec<Fault>, CloudError> {
        let list: List<Fault> = self.call(Method::PUT, "/v1/faults", Some(fault)).await?;
        Ok(list.items)
    }

    /// Clears the fault of `api`, or all of them; the faults in force after.
    pub async fn clear_faults(&self, api: Option<FaultApi>) -> Result<Vec<Fault>, CloudError> {
        let path = match api {
            Some(api) => format!("/v1/faults?api={api}"),
            None => "/v1/faults".to_owned(),
        };
        let list: List<Fault> = self.call(Method::DELETE, &path, None::<&()>).await?;
        Ok(list.items)
    }

    // --- the transport ---------------------------------------------------------------------

    /// `GET path`, answered `{"items": [...]}`.
    pub(super) async fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, CloudError> {
        let list: List<T> = self.call(Method::GET, path, None::<&()>).await?;
        Ok(list.items)
    }

    /// One call: `method path` with `body` as JSON; a 2xx answer's body decoded as `T`.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T, CloudError> {
        let (status, _, bytes) = self.send_with(method.clone(), path, body, &[]).await?;
        decode(method, path, status, &bytes)
    }

    /// One exchange: `method path` with `body` as JSON and `headers`; the answer's status,
    /// headers and body.
    async fn send_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        headers: &[(http::header::HeaderName, &str)],
    ) -> Result<(StatusCode, http::HeaderMap, Bytes), CloudError> {
        let url = format!("{}{path}", self.endpoint);
        let mut request = Request::builder()
            .method(method)
            .uri(&url)
            .header(http::header::ACCEPT, "application/json");
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let body = match body {
            Some(body) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                serde_json::to_vec(body).map_err(|e| CloudError::Api {
                    status: 400,
                    message: format!("encoding the request: {e}"),
                })?
            }
            None => Vec::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| CloudError::Api {
                status: 400,
                message: format!("invalid request {url}: {e}"),
            })?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| CloudError::Unavailable(format!("{url}: {}", error_chain(&e))))?;
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| CloudError::Unavailable(format!("{url}: reading the answer: {e}")))?
                .to_bytes();
            Ok((status, headers, bytes))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                CloudError::Unavailable(format!(
                    "{url}: no answer within {}",
                    seconds(self.timeout)
                ))
            })?
    }
}

/// A 2xx answer's body decoded as `T`; any other status as [`CloudError::Api`] with the
/// server's message.
fn decode<T: DeserializeOwned>(
    method: Method,
    path: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Result<T, CloudError> {
    if !status.is_success() {
        let message = match serde_json::from_slice::<ErrorBody>(bytes) {
            Ok(body) => body.message,
            Err(_) if bytes.is_empty() => status.to_string(),
            Err(_) => String::from_utf8_lossy(bytes).trim().to_owned(),
        };
        return Err(CloudError::Api {
            status: status.as_u16(),
            message,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| CloudError::Api {
        status: status.as_u16(),
        message: format!("unexpected answer to {method} {path}: {e}"),
    })
}

/// A 404 on an instance path is `cloudprovider.InstanceNotFound`.
fn not_found_as_instance<T>(result: Result<T, CloudError>) -> Result<T, CloudError> {
    match result {
        Err(CloudError::Api { status: 404, .. }) => Err(CloudError::InstanceNotFound),
        other => other,
    }
}

/// `e` and its sources, `: `-separated (hyper's own message is only "client error (Connect)").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `10s`, `1.5s`, `0.25s`.
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// Percent-encodes `s` for a path segment or a query value (RFC 3986's unreserved characters
/// stay as they are).
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_plain_http() {
        assert_eq!(
            HttpCloud::new("http://127.0.0.1:8080/")
                .map(|c| c.endpoint)
                .ok(),
            Some("http://127.0.0.1:8080".into())
        );
        for bad in [
            "https://127.0.0.1:1",
            "127.0.0.1:1",
            "http://127.0.0.1:1/v1",
            "",
            "http://",
        ] {
            assert!(
                matches!(HttpCloud::new(bad), Err(Error::Endpoint { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn escapes_path_segments() {
        assert_eq!(escape("node-1.local"), "node-1.local");
        assert_eq!(escape("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(escape("é"), "%C3%A9");
    }

    #[test]
    fn a_missing_or_bad_cloud_config_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing =
            HttpCloud::from_cloud_config(&dir.path().join("nope.json")).expect_err("missing");
        assert!(
            missing.to_string().contains("nope.json: No such file"),
            "{missing}"
        );
        let path = dir.path().join("cloud-config.json");
        std::fs::write(&path, b"{\"endpont\": 1}").expect("write");
        let bad = HttpCloud::from_cloud_config(&path).expect_err("bad");
        assert!(
            bad.to_string().contains("missing field `endpoint`"),
            "{bad}"
        );
        std::fs::write(&path, b"{\"endpoint\": \"http://127.0.0.1:9\"}").expect("write");
        assert!(HttpCloud::from_cloud_config(&path).is_ok());
    }
}
