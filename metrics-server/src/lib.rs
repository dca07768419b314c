//! miniplane's metrics-server: the resource metrics pipeline of a cluster, mirroring
//! `sigs.k8s.io/metrics-server`. It scrapes every node's kubelet for `/metrics/resource`,
//! keeps the last two points of each node and container, and serves `metrics.k8s.io/v1beta1`
//! NodeMetrics and PodMetrics — what `kubectl top` and the HorizontalPodAutoscaler read —
//! behind the API server, registered through API aggregation.
//!
//! ```text
//!   bind: listen on 127.0.0.1:PORT
//!   run:  informers: Nodes, Pods with status.phase=Running (as metrics-server's listers)
//!         register (register.rs): ClusterRole system:aggregated-metrics-reader, Service and
//!           EndpointSlice kube-system/metrics-server (this machine's address, PORT),
//!           APIService v1beta1.metrics.k8s.io ─▶ the API server's aggregator finds it Available
//!         every --metric-resolution (15 s; the first at once) of the cluster's clock (its
//!         virtual one under `up --clock virtual`, client::cluster_clock):
//!           scraper.rs: GET /metrics/resource on each node's kubelet ─▶ decode.rs ─▶ batch
//!           storage.rs: last two points per node/container; CPU = Δcounter/Δt
//!         api.rs: GET /apis/metrics.k8s.io/v1beta1/{nodes,pods,namespaces/NS/pods}[/NAME]
//!   stop: the EndpointSlice deleted (the APIService turns unavailable), the server drained
//! ```
//!
//! The kubelets are scraped over HTTPS with the metrics-server's own credentials, as
//! metrics-server always does ([`kubelet_client`]: `--kubelet-certificate-authority`,
//! `--kubelet-insecure-tls`), or over plain HTTP with
//! `--deprecated-kubelet-completely-insecure` (miniplane's plain-HTTP clusters).
//!
//! Simplifications: the metrics API is plain HTTP on the loopback address (metrics-server
//! serves HTTPS and authenticates the aggregator's front-proxy certificate, then authorizes
//! each user with a SubjectAccessReview: here neither), kubelets reached at
//! `127.0.0.1:<kubelet port>` (see [`scraper`]), `--metric-resolution` allowed down to 1 s (metrics-server refuses
//! less than 10 s) so tests and labs need not wait, no `/metrics` of its own, no OpenAPI.

pub mod api;
pub mod decode;
pub mod kubelet_client;
pub mod objects;
pub mod register;
pub mod scraper;
pub mod storage;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use client::list_watch::ApiListerWatcher;
use client::{ClientConfig, ClusterSource, SharedInformerFactory};
use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// `--metric-resolution`'s default (the install manifest's 15 s).
pub const DEFAULT_METRIC_RESOLUTION: Duration = Duration::from_secs(15);
/// `--kubelet-request-timeout`'s default.
pub const DEFAULT_KUBELET_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest resolution allowed here (metrics-server's own minimum is 10 s).
pub const MIN_METRIC_RESOLUTION: Duration = Duration::from_secs(1);
/// The `User-Agent` program of its client.
pub const USER_AGENT: &str = "metrics-server";
/// How long a failed registration waits before it is tried again.
const REGISTER_RETRY: Duration = Duration::from_secs(1);

/// How a metrics-server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the API server is.
    pub source: ClusterSource,
    /// Where the metrics API is served (port 0: a free one).
    pub listen: SocketAddr,
    /// How often the kubelets are scraped (`--metric-resolution`).
    pub metric_resolution: Duration,
    /// How long one kubelet may take to answer (`--kubelet-request-timeout`).
    pub kubelet_request_timeout: Duration,
    /// The address its EndpointSlice names (default: [`register::host_address`]).
    pub advertise_address: Option<IpAddr>,
    /// Whether it registers its APIService, Service and EndpointSlice.
    pub register: bool,
    /// How the kubelets are reached (HTTPS by default).
    pub kubelet_client: kubelet_client::KubeletClientOptions,
}

impl Config {
    /// The defaults, against `source`, on a free port.
    pub fn new(source: ClusterSource) -> Self {
        Config {
            source,
            listen: SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
            metric_resolution: DEFAULT_METRIC_RESOLUTION,
            kubelet_request_timeout: DEFAULT_KUBELET_REQUEST_TIMEOUT,
            advertise_address: None,
            register: true,
            kubelet_client: kubelet_client::KubeletClientOptions::default(),
        }
    }

    /// `Options.validate`: the resolution at least [`MIN_METRIC_RESOLUTION`], and 90% of it
    /// at least the kubelet request timeout.
    pub fn validate(&self) -> Result<(), Error> {
        if self.metric_resolution < MIN_METRIC_RESOLUTION {
            return Err(Error::Config(format!(
                "metric-resolution should be a time duration at least 1s, but value {} provided",
                apimachinery::duration::go_duration(self.metric_resolution)
            )));
        }
        if self.metric_resolution * 9 / 10 < self.kubelet_request_timeout {
            return Err(Error::Config(format!(
                "metric-resolution should be larger than kubelet-request-timeout, but metric-resolution value {} kubelet-request-timeout value {} provided",
                apimachinery::duration::go_duration(self.metric_resolution),
                apimachinery::duration::go_duration(self.kubelet_request_timeout)
            )));
        }
        Ok(())
    }
}

/// Why a metrics-server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value is refused.
    #[error("{0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The client could not be built.
    #[error("client: {0}")]
    Client(#[from] client::Error),
    /// Serving failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// A bound metrics-server (see the crate docs).
pub struct MetricsServer {
    config: Config,
    listener: TcpListener,
}

impl MetricsServer {
    /// Checks the config and binds the listen address.
    pub async fn bind(config: Config) -> Result<MetricsServer, Error> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        Ok(MetricsServer { config, listener })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves and scrapes until `shutdown` fires.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let MetricsServer { config, listener } = self;
        let port = listener.local_addr()?.port();
        let transport = kubelet_client::transport(&config.source, &config.kubelet_client)
            .await
            .map_err(|e| Error::Config(format!("the kubelets' client: {e}")))?;
        let client_config = ClientConfig::new(config.source.clone())
            .user_agent(USER_AGENT)
            .tracing(false);
        let client = client::build_client(&client_config).await?;
        // The cluster's clock: on a virtual one, scrapes come every resolution of its time.
        let (clock, clock_watcher) = client::cluster_clock::discover(&client)
            .await
            .map_err(Error::Config)?;
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        factory.set_without_managed_fields();
        let nodes = factory.informer::<Node>();
        let pods = {
            let client = client.clone();
            factory.informer_with::<Pod>(move || {
                Arc::new(
                    ApiListerWatcher::new(kube::Api::all(client))
                        .field_selector("status.phase=Running")
                        .without_managed_fields(),
                )
            })
        };
        let inner = shutdown.child_token();
        factory.start(&inner);
        if let Some(watcher) = clock_watcher {
            tokio::spawn(watcher.run(inner.clone()));
        }
        let shared = Arc::new(api::Shared {
            storage: RwLock::new(storage::Storage::new(config.metric_resolution)),
            nodes,
            pods,
            clock,
        });
        let app = api::router(shared.clone());
        let stop = inner.clone();
        let serving = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        });
        if !factory.wait_for_cache_sync(&inner).await {
            inner.cancel();
            factory.shutdown().await;
            return serving
                .await
                .map_err(std::io::Error::other)?
                .map_err(Error::Io);
        }
        let registering = config.register.then(|| {
            let (client, stop) = (client.clone(), inner.clone());
            let address = config.advertise_address.unwrap_or_else(register::host_address);
            tokio::spawn(async move {
                loop {
                    match register::register(&client, address, port).await {
                        Ok(()) => {
                            tracing::info!(%address, port, "registered v1beta1.metrics.k8s.io");
                            return true;
                        }
                        Err(e) => tracing::warn!(error = %e, "registering the metrics API failed; retrying"),
                    }
                    tokio::select! {
                        () = stop.cancelled() => return false,
                        () = tokio::time::sleep(REGISTER_RETRY) => {}
                    }
                }
            })
        });
        scrape_loop(&shared, &config, &transport, &inner).await;
        let registered = match registering {
            Some(task) => task.await.unwrap_or(false),
            None => false,
        };
        if registered {
            let gone = tokio::time::timeout(Duration::from_secs(2), register::unregister(&client));
            if let Ok(Err(e)) = gone.await {
                tracing::warn!(error = %e, "deleting the metrics-server EndpointSlice failed");
            }
        }
        inner.cancel();
        factory.shutdown().await;
        serving
            .await
            .map_err(std::io::Error::other)?
            .map_err(Error::Io)
    }
}

/// Scrapes at once, then every resolution of the cluster's clock, until `shutdown` fires
/// (`runScrape`, `tick`; a scrape that overran its period is followed by the next at once).
async fn scrape_loop(
    shared: &api::Shared,
    config: &Config,
    transport: &kubelet_client::KubeletTransport,
    shutdown: &CancellationToken,
) {
    let scraper = scraper::Scraper::with_transport(config.kubelet_request_timeout, transport);
    let clock = shared.clock.clone();
    let mut next = clock.now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = clock.sleep_until(next) => {}
        }
        next = clock.now().max(next) + config.metric_resolution;
        let started = std::time::Instant::now();
        let nodes = shared.nodes.indexer().list();
        let batch = tokio::select! {
            () = shutdown.cancelled() => return,
            b = scraper.scrape(&nodes, || clock.wall()) => b,
        };
        let (node_count, pod_count) = (batch.nodes.len(), batch.pods.len());
        shared
            .storage
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .store(batch);
        tracing::debug!(nodes = node_count, pods = pod_count, elapsed = ?started.elapsed(), "scrape finished");
    }
}
