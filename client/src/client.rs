//! Building a typed client: client-go's `rest/config.go` + `tools/clientcmd` (where the
//! server is) and `util/flowcontrol/throttle.go` (client-side QPS/burst throttling).
//!
//! miniplane uses kube-rs's HTTP client and k8s-openapi's types as they are; this module only
//! decides where the client points and whether it throttles itself:
//!
//! ```text
//!   ClientConfig { source: Kubeconfig(path) | Url(url) | Infer, rate_limit: None | Some(qps, burst) }
//!        │ build_client()
//!        ▼
//!   kube::Client = Buffer ─▶ [TokenBucketService: wait for a token] ─▶ kube's default stack (auth, HTTP)
//! ```
//!
//! Throttling is off by default (as for kubectl); the controller-manager selects
//! [`RateLimit::CONTROLLER_MANAGER`] (20 qps, burst 30, kube-controller-manager's defaults).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::{Layer, Service};

use crate::clock::{SharedClock, TokioClock};
use crate::error::{Error, Result};
use crate::flowcontrol::TokenBucket;

/// Where the API server is.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// A kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// A server URL, e.g. `http://127.0.0.1:6443` (no authentication).
    Url(String),
    /// kube's inference: `$KUBECONFIG`, `~/.kube/config`, then in-cluster.
    Infer,
}

/// Client-side request rate limit (client-go's `rest.Config.QPS` / `Burst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second.
    pub qps: f64,
    /// Requests allowed at once after a quiet period.
    pub burst: u32,
}

impl RateLimit {
    /// kube-controller-manager's `--kube-api-qps=20 --kube-api-burst=30`.
    pub const CONTROLLER_MANAGER: RateLimit = RateLimit {
        qps: 20.0,
        burst: 30,
    };
    /// client-go's `rest.DefaultQPS` / `DefaultBurst` (5 / 10).
    pub const CLIENT_GO_DEFAULT: RateLimit = RateLimit {
        qps: 5.0,
        burst: 10,
    };
}

/// How to build a client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Where the API server is.
    pub source: ClusterSource,
    /// Client-side throttling; `None` (the default) sends requests as they come.
    pub rate_limit: Option<RateLimit>,
    /// Whether the component traces its work and reports spans ([`crate::trace`]; on by
    /// default, `--tracing=false` turns it off).
    pub tracing: bool,
    /// The `User-Agent` program the requests carry (`kube-scheduler`), as client-go's
    /// `rest.Config.UserAgent`: the API server names the field manager after it, and the
    /// `WatchEvents`/`FailWrites` faults pick their component by it. `None`: kube-rs' default.
    pub user_agent: Option<String>,
    /// A bearer token to present instead of the source's credentials (client-go's
    /// `rest.Config.BearerToken`; a ServiceAccount token of [`crate::clientbuilder`]).
    pub bearer_token: Option<String>,
}

impl ClientConfig {
    /// A config for `source` without throttling.
    pub fn new(source: ClusterSource) -> Self {
        ClientConfig {
            source,
            rate_limit: None,
            tracing: true,
            user_agent: None,
            bearer_token: None,
        }
    }

    /// Sets the `User-Agent` program (`kube-controller-manager`).
    pub fn user_agent(mut self, program: impl Into<String>) -> Self {
        self.user_agent = Some(program.into());
        self
    }

    /// Turns tracing on or off.
    pub fn tracing(mut self, on: bool) -> Self {
        self.tracing = on;
        self
    }

    /// Throttles requests with `rate_limit`.
    pub fn rate_limit(mut self, rate_limit: RateLimit) -> Self {
        self.rate_limit = Some(rate_limit);
        self
    }
}

/// The API server's URL `source` names (the kubeconfig's current cluster, or the URL).
pub async fn server_url(source: &ClusterSource) -> Result<String> {
    Ok(kube_config(source)
        .await?
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned())
}

async fn kube_config(source: &ClusterSource) -> Result<Config> {
    Ok(match source {
        ClusterSource::Kubeconfig(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| Error::KubeConfig(format!("{}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::KubeConfig(e.to_string()))?
        }
        ClusterSource::Url(url) => {
            let uri = url
                .parse()
                .map_err(|e| Error::KubeConfig(format!("{url}: {e}")))?;
            Config::new(uri)
        }
        ClusterSource::Infer => Config::infer()
            .await
            .map_err(|e| Error::KubeConfig(e.to_string()))?,
    })
}

/// Builds a kube client from `config`.
pub async fn build_client(config: &ClientConfig) -> Result<Client> {
    // kube's HTTPS connector needs a process-wide rustls crypto provider; pick ring (an
    // `Err` means another one is already installed, which is just as good).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut kube_config = kube_config(&config.source).await?;
    if let Some(token) = &config.bearer_token {
        kube_config.auth_info = kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..kube::config::AuthInfo::default()
        };
    }
    if let Some(program) = &config.user_agent {
        let value = format!("{program}/v1.33.0 (miniplane)");
        let value = http::HeaderValue::from_str(&value)
            .map_err(|e| Error::KubeConfig(format!("user agent {program:?}: {e}")))?;
        kube_config.headers.push((http::header::USER_AGENT, value));
    }
    let builder = kube::client::ClientBuilder::try_from(kube_config)?;
    Ok(match config.rate_limit {
        None => builder.build(),
        Some(limit) => builder
            .with_layer(&TokenBucketLayer::new(limit, TokioClock::shared()))
            .build(),
    })
}

/// A tower layer that makes every request wait for a token from one shared bucket.
#[derive(Clone)]
pub struct TokenBucketLayer {
    bucket: Arc<Mutex<TokenBucket>>,
    clock: SharedClock,
}

impl TokenBucketLayer {
    /// A layer with a full bucket of `limit.burst` tokens refilled at `limit.qps`.
    pub fn new(limit: RateLimit, clock: SharedClock) -> Self {
        let bucket = TokenBucket::new(limit.qps, limit.burst, clock.now());
        TokenBucketLayer {
            bucket: Arc::new(Mutex::new(bucket)),
            clock,
        }
    }
}

impl<S> Layer<S> for TokenBucketLayer {
    type Service = TokenBucketService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TokenBucketService {
            inner,
            bucket: self.bucket.clone(),
            clock: self.clock.clone(),
            wait: None,
            has_token: false,
        }
    }
}

/// The service of [`TokenBucketLayer`]: not ready until it holds a token (client-go's
/// `tokenBucketRateLimiter.Wait` before each request).
pub struct TokenBucketService<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    clock: SharedClock,
    /// The wait for the reserved token, if it was not immediately available.
    wait: Option<BoxFuture<'static, ()>>,
    /// A token is reserved for the next `call`.
    has_token: bool,
}

impl<S, Req> Service<Req> for TokenBucketService<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if !self.has_token {
            if self.wait.is_none() {
                let now = self.clock.now();
                let delay = self
                    .bucket
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .reserve(now);
                if delay.is_zero() {
                    self.has_token = true;
                } else {
                    self.wait = Some(self.clock.sleep(delay));
                }
            }
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
                self.has_token = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.has_token = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use futures::FutureExt;
    use std::time::Duration;
    use tower::ServiceExt;

    #[tokio::test]
    async fn requests_wait_for_tokens_after_the_burst() {
        let clock = FakeClock::new();
        let layer = TokenBucketLayer::new(RateLimit { qps: 2.0, burst: 2 }, clock.shared());
        let mut svc = layer.layer(tower::service_fn(|n: u32| async move {
            Ok::<_, std::convert::Infallible>(n)
        }));
        for n in 0..2 {
            let ready = svc
                .ready()
                .now_or_never()
                .expect("within the burst")
                .expect("infallible");
            assert_eq!(ready.call(n).await, Ok(n));
        }
        let mut third = Box::pin(async { svc.ready().await.map(|_| ()) });
        assert!(
            (&mut third).now_or_never().is_none(),
            "the third request waits for a token"
        );
        clock.advance(Duration::from_millis(499));
        assert!((&mut third).now_or_never().is_none());
        clock.advance(Duration::from_millis(1));
        assert!(third.now_or_never().is_some(), "one token per 500 ms");
    }

    #[tokio::test]
    async fn builds_a_client_for_a_url() {
        let config = ClientConfig::new(ClusterSource::Url("http://127.0.0.1:6443".into()))
            .rate_limit(RateLimit::CONTROLLER_MANAGER);
        assert!(build_client(&config).await.is_ok());
        assert!(
            build_client(&ClientConfig::new(ClusterSource::Kubeconfig(
                "/nonexistent".into()
            )))
            .await
            .is_err()
        );
    }
}
