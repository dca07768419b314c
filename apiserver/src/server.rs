//! Serving: the `run`/`serve` entry points with graceful shutdown, and the bootstrap of a
//! new server's state.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/server/` (`genericapiserver.go`'s
//! `PrepareRun().Run(stopCh)`) in the shape of mini-redis' `server::run`: a library that takes
//! a bound listener and a shutdown signal.
//!
//! ```text
//!   Config ─▶ Server::bind (store, listener) ─▶ serve_with ─▶ AppState::new + bootstrap
//!                                                          └▶ connections::serve(router)
//!   shutdown token cancelled ─▶ watch streams end ─▶ connections drain ─▶ tasks joined
//! ```
//!
//! The top of the crate: it builds the [`AppState`] ([`crate::state`]) and serves the
//! [`router`] ([`crate::router`]) on the connection layer ([`crate::connections`]).

use crate::admin;
use crate::connections;
use crate::error::Result;
use crate::handlers;
use crate::router::router;
use crate::span_sink::SpanSink;
use crate::state::{AppState, ServerOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::Backend;
use tokio_util::sync::CancellationToken;

/// How `miniplane apiserver` is configured.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the store keeps its data.
    pub data_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Acknowledge writes before they are on disk (tests, benchmarks).
    pub no_fsync: bool,
    /// The most bytes of history the store keeps before it compacts the oldest early
    /// (`store::StoreConfig::history_budget`; `None`: no bound).
    pub store_history_budget: Option<u64>,
    /// How much of its history (replaced and deleted versions: watches from older
    /// resourceVersions, `miniplane history`) the embedded store keeps before compacting it,
    /// within `store_history_budget`.
    pub store_history: HistoryRetention,
    /// Tunables of the serving path; HTTPS with `options.connections.tls`
    /// ([`crate::ConnectionLimits::tls`], built by [`apimachinery::pki::tls_server_config`]), plain
    /// HTTP without.
    pub options: ServerOptions,
    /// Keep the objects in an etcd cluster instead of the embedded store in `data_dir`
    /// (kube-apiserver's `--etcd-servers`, `--etcd-prefix`, `--etcd-compaction-interval`,
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`).
    pub etcd: Option<EtcdStorage>,
}

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_ETCD_PREFIX: &str = store::etcd::DEFAULT_PREFIX;

/// The etcd cluster the objects live in (kube-apiserver's etcd flags).
#[derive(Debug, Clone)]
pub struct EtcdStorage {
    /// The members' client URLs (`--etcd-servers`).
    pub servers: Vec<String>,
    /// What replaces `/registry` in the keys (`--etcd-prefix`, default `/registry`).
    pub prefix: String,
    /// How often the API server compacts etcd's history (`--etcd-compaction-interval`,
    /// default 5 minutes; zero: never), as kube-apiserver's compactor does
    /// (`store::etcd::Compactor`).
    pub compaction_interval: Duration,
    /// The TLS files for the members (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`);
    /// `None`: none (plain `http://`; `https://` members verified with the system's trust
    /// store).
    pub tls: Option<EtcdTlsFiles>,
}

/// kube-apiserver's etcd TLS files (PEM), read when the server connects
/// (`store::etcd::EtcdTls`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTlsFiles {
    /// `--etcd-cafile`: the CA the members' serving certificates are verified with.
    pub ca_file: Option<PathBuf>,
    /// `--etcd-certfile`: the client certificate presented to the members.
    pub cert_file: Option<PathBuf>,
    /// `--etcd-keyfile`: its private key.
    pub key_file: Option<PathBuf>,
}

impl EtcdStorage {
    /// Storage on these members (`--etcd-servers`) with kube-apiserver's defaults: prefix
    /// `/registry`, compaction every 5 minutes, no TLS files.
    pub fn new(servers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        EtcdStorage {
            servers: servers.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_ETCD_PREFIX.to_string(),
            compaction_interval: store::etcd::DEFAULT_COMPACTION_INTERVAL,
            tls: None,
        }
    }
}

/// Where a bound server keeps its objects.
enum Storage {
    /// The embedded store in the data directory.
    Embedded(Arc<store::Store>),
    /// An etcd cluster, with the compaction interval to run the compactor at.
    Etcd(Arc<store::EtcdBackend>, Duration),
}

impl Storage {
    fn backend(&self) -> Arc<dyn Backend> {
        match self {
            Storage::Embedded(s) => s.clone(),
            Storage::Etcd(e, _) => e.clone(),
        }
    }

    async fn close(&self) -> store::Result<()> {
        match self {
            Storage::Embedded(s) => s.close().await,
            Storage::Etcd(e, _) => {
                e.close().await;
                Ok(())
            }
        }
    }
}

/// The default [`Config::store_history_budget`] (`store::DEFAULT_HISTORY_BUDGET`, 256 MiB).
pub const DEFAULT_STORE_HISTORY_BUDGET: u64 = store::DEFAULT_HISTORY_BUDGET;

/// Errors of starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] store::Error),
    /// Creating the initial namespaces failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// Serving HTTP failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

impl AppState {
    /// Moves the objects of a store written with miniplane's earlier key layout
    /// ([`crate::key_layout`]), creates the namespaces every cluster has (`default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`) if they are missing, as kube-apiserver's bootstrap controller does,
    /// serves the resources of the stored CustomResourceDefinitions and starts the CRD
    /// controller (`crate::apiextensions::controller`), and registers the built-in groups as
    /// local APIServices before starting the aggregator's availability controller
    /// (`crate::aggregator`).
    pub async fn bootstrap(&self) -> Result<()> {
        // A store an earlier miniplane wrote: its objects to kube-apiserver's key layout.
        crate::key_layout::migrate(self.storage().backend(), &self.registry().snapshot())
            .await
            .map_err(crate::error::ApiError::from)?;
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            handlers::create::ensure_namespace(self, ns).await?;
        }
        // Serve the stored CRDs' resources before the first request, then follow changes.
        let outcome = crate::apiextensions::controller::sync(self).await?;
        // Who holds which Service address and node port, before the first Service write.
        crate::service_alloc::start(self).await?;
        // The default roles and bindings, then the RBAC objects the authorizer reads, both
        // before the first request (`rbac/bootstrap-roles`).
        let created = crate::auth::reconcile::ensure_policy(self).await?;
        tracing::debug!(created, "bootstrap policy");
        // `scheduling/bootstrap-system-priority-classes`.
        let created = crate::admission::priority::bootstrap_system_priority_classes(self).await?;
        tracing::debug!(created, "system priority classes");
        // The default StorageClass `standard`, as kind installs it.
        let created = crate::admission::storageclass::bootstrap_default_storage_class(self).await?;
        tracing::debug!(created, "default storage class");
        self.auth()
            .policy()
            .start(
                self.storage().backend().clone(),
                self.tasks(),
                self.shutdown().clone(),
            )
            .await
            .map_err(crate::error::ApiError::from)?;
        self.tasks()
            .spawn(crate::apiextensions::controller::run(self.clone(), outcome));
        // The local APIServices of the built-in groups (kube-apiserver's autoregister), then
        // the aggregator's availability controller over every APIService.
        let created = crate::aggregator::autoregister::ensure_local_apiservices(self).await?;
        tracing::debug!(created, "local APIServices");
        self.tasks()
            .spawn(crate::aggregator::available::run(self.clone()));
        Ok(())
    }
}

/// Serves on an already-bound listener until `shutdown` is cancelled, then drains open
/// requests, ends watches and joins every task.
pub async fn serve(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    serve_with(listener, backend, ServerOptions::default(), shutdown).await
}

/// [`serve`] with explicit tunables; while serving, the `default/kubernetes` Service is kept
/// in place ([`crate::kubernetes_service`]) with the listener's port as its targetPort.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    options: ServerOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    serve_recording(listener, backend, options, shutdown, None).await
}

/// [`serve_with`], connecting `spans` (if any) to the server's trace collector.
async fn serve_recording(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    mut options: ServerOptions,
    shutdown: CancellationToken,
    spans: Option<&SpanSink>,
) -> Result<(), ServeError> {
    options.access.bind_address = Some(listener.local_addr()?.ip());
    let limits = options.connections.clone();
    let state = AppState::new(backend, options, shutdown.clone());
    if let Some(spans) = spans {
        spans.attach(&state);
    }
    // The clock first: the bootstrap's objects are stamped with the cluster's time.
    if let Some(speed) = state.options().virtual_clock {
        admin::clock::bootstrap(&state, speed, state.options().clock_start)
            .await
            .map_err(|e| ServeError::Bootstrap(format!("the virtual clock: {e}")))?;
    }
    admin::reload(&state).await;
    state
        .bootstrap()
        .await
        .map_err(|e| ServeError::Bootstrap(e.to_string()))?;
    let port = listener.local_addr()?.port();
    let advertise = state
        .options()
        .advertise_address
        .or_else(crate::kubernetes_service::host_interface_address);
    let identity =
        crate::identity_lease::Identity::new(port, advertise.map(|ip| SocketAddr::new(ip, port)));
    state.tasks().spawn(crate::kubernetes_service::run(
        state.clone(),
        port,
        crate::kubernetes_service::INTERVAL,
        identity.name.clone(),
    ));
    state.tasks().spawn(crate::identity_lease::run(
        state.clone(),
        identity,
        crate::identity_lease::RENEW_INTERVAL,
    ));
    let app = router(state.clone());
    connections::serve(listener, app, limits, shutdown.clone()).await;
    shutdown.cancel();
    state.wait_for_tasks().await;
    Ok(())
}

/// A bound server, so the caller can learn the port before serving (port 0).
pub struct Server {
    listener: tokio::net::TcpListener,
    store: Storage,
    options: ServerOptions,
    spans: SpanSink,
}

/// How much history the embedded store keeps (`--store-history-window`,
/// `--store-history-revisions`): a version stays while either rule still wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryRetention {
    /// Keep the revisions written in this long a time. Default
    /// [`DEFAULT_STORE_HISTORY_WINDOW`].
    pub window: Duration,
    /// Also keep at least the last N revisions, however old (`None`: no such rule).
    pub revisions: Option<u64>,
}

impl HistoryRetention {
    /// The store's auto-compaction for these rules, looking every 10 s.
    pub fn auto_compaction(&self) -> store::AutoCompaction {
        store::AutoCompaction {
            retain_revisions: self.revisions,
            retain_duration: Some(self.window),
            interval: Duration::from_secs(10),
        }
    }
}

impl Default for HistoryRetention {
    fn default() -> Self {
        HistoryRetention {
            window: DEFAULT_STORE_HISTORY_WINDOW,
            revisions: None,
        }
    }
}

/// The default [`HistoryRetention::window`]: an hour, twelve times kube-apiserver's
/// default `--etcd-compaction-interval` of 5 minutes, so that `miniplane history` reaches back
/// through a whole lab; the byte budget still bounds it.
pub const DEFAULT_STORE_HISTORY_WINDOW: Duration = Duration::from_secs(60 * 60);

impl Server {
    /// Opens the store in the data directory (failing if another process holds it), or
    /// connects to the etcd cluster of [`Config::etcd`], and binds the listen address.
    pub async fn bind(config: Config) -> Result<Server, ServeError> {
        let store = match &config.etcd {
            None => Storage::Embedded(Self::open_embedded(&config).await?),
            Some(etcd) => {
                let mut etcd_config = store::EtcdConfig::new(etcd.servers.iter().cloned());
                etcd_config.prefix = etcd.prefix.clone();
                etcd_config.tls = etcd.tls.as_ref().map(|t| {
                    store::etcd::EtcdTls::from_files(
                        t.ca_file.clone(),
                        t.cert_file.clone(),
                        t.key_file.clone(),
                    )
                });
                let backend = store::EtcdBackend::connect(etcd_config).await?;
                Storage::Etcd(Arc::new(backend), etcd.compaction_interval)
            }
        };
        let listener = match tokio::net::TcpListener::bind(config.listen).await {
            Ok(l) => l,
            Err(source) => {
                let _ = store.close().await;
                return Err(ServeError::Bind {
                    addr: config.listen,
                    source,
                });
            }
        };
        Ok(Server {
            listener,
            store,
            options: config.options,
            spans: SpanSink::default(),
        })
    }

    /// The embedded store of `config`'s data directory, compacting itself.
    async fn open_embedded(config: &Config) -> Result<Arc<store::Store>, ServeError> {
        let mut store_config = store::StoreConfig::new(&config.data_dir);
        store_config.fsync = !config.no_fsync;
        store_config.history_budget = config.store_history_budget;
        store_config.auto_compaction = config.store_history.auto_compaction();
        Ok(Arc::new(store::Store::open(store_config).await?))
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// The store the server keeps its objects in, for a second front end over the same data
    /// (the etcd v3 endpoint of `miniplane apiserver --etcd-listen`, `store-grpc`).
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.store.backend()
    }

    /// A handle that records spans into this server's trace collector once it serves (the
    /// etcd v3 endpoint's spans of component `etcd`; [`SpanSink`]).
    pub fn spans(&self) -> SpanSink {
        self.spans.clone()
    }

    /// Serves until `shutdown` is cancelled (compacting etcd on its interval when the objects
    /// live there), then closes the store.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let backend = self.store.backend();
        let compactor = match &self.store {
            Storage::Etcd(etcd, interval) => Some(store::etcd::Compactor::start(
                etcd,
                *interval,
                shutdown.clone(),
            )),
            Storage::Embedded(_) => None,
        };
        let served = serve_recording(
            self.listener,
            backend,
            self.options,
            shutdown,
            Some(&self.spans),
        )
        .await;
        if let Some(compactor) = compactor {
            compactor.stop().await;
        }
        let closed = self.store.close().await;
        served?;
        closed?;
        Ok(())
    }
}

/// Binds and serves until `shutdown` is cancelled (`miniplane apiserver`).
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), ServeError> {
    Server::bind(config).await?.run(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::HistoryRetention;
    use std::time::{Duration, Instant};
    use store::{AutoCompactor, Revision};

    /// A version stays while either rule wants it: the window alone compacts what is older
    /// than it; with a number of revisions too, the last N stay however old.
    #[test]
    fn history_is_kept_while_either_rule_wants_it() {
        let start = Instant::now();
        let window = Duration::from_secs(60);
        let run = |retention: HistoryRetention| {
            let mut policy = AutoCompactor::new(retention.auto_compaction());
            let mut compacted = Revision::ZERO;
            // 100 revisions a minute for five minutes.
            for minute in 0..=5u64 {
                let at = start + Duration::from_secs(minute * 60);
                if let Some(to) = policy.tick(at, Revision(1 + minute * 100), compacted) {
                    compacted = to;
                }
            }
            compacted
        };
        let window_only = run(HistoryRetention {
            window,
            revisions: None,
        });
        assert_eq!(
            window_only,
            Revision(401),
            "the minute before the last sample stays"
        );
        let both = run(HistoryRetention {
            window,
            revisions: Some(250),
        });
        assert_eq!(both, Revision(251), "the last 250 revisions stay");
        assert_eq!(
            HistoryRetention::default().window,
            Duration::from_secs(3600)
        );
    }
}
