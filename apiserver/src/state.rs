//! The API server's shared state: what every request handler reaches through [`AppState`]
//! (the registry, the storage, the watch caches, the trace collector, the fault table, the
//! task tracker and shutdown token) and the serving tunables ([`ServerOptions`]).
//!
//! Mirrors the parts of `staging/src/k8s.io/apiserver/pkg/server/` that a handler sees
//! (`GenericAPIServer`'s fields, `config.go`'s `Config`). It sits below the handlers: it
//! imports none of them, and neither the router ([`crate::router`]) nor the serving entry
//! points ([`crate::server`], which adds [`AppState::bootstrap`]).

use crate::access::AccessOptions;
use crate::admin::fault_table::FaultTable;
use crate::admin::reports::Reports;
use crate::admission::AdmissionOptions;
use crate::auth::{Auth, AuthOptions};
use crate::cacher::{DEFAULT_CLIENT_BUFFER, DEFAULT_RING_BYTES, DEFAULT_RING_CAPACITY, WatchCache};
use crate::collector::Collector;
use crate::connections::ConnectionLimits;
use crate::gvk::GroupVersion;
use crate::metrics::LongRunning;
use crate::registry::Registry;
use crate::request_trace::TracingOptions;
use crate::service_alloc::ServiceAllocations;
use crate::storage::Storage;
use std::sync::Arc;
use std::time::Duration;
use store::Backend;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Tunables of the serving path (defaults as in Kubernetes where it has one).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// How long a watch without `timeoutSeconds` stays open.
    pub default_watch_timeout: Duration,
    /// Events each resource's watch cache keeps.
    pub watch_cache_capacity: usize,
    /// Stored bytes (keys + objects) of the events each resource's watch cache keeps.
    pub watch_cache_bytes: usize,
    /// Events queued per watch client before it is cut off.
    pub watch_client_buffer: usize,
    /// Request spans, the trace annotation and the collector's size.
    pub tracing: TracingOptions,
    /// The connection cap and the timeouts of slow clients.
    pub connections: ConnectionLimits,
    /// The server's names and the origins allowed to call it.
    pub access: AccessOptions,
    /// Where `componentstatuses` finds the scheduler and the controller-manager.
    pub component_probes: crate::ComponentProbes,
    /// The address the `kubernetes` Service's endpoints name (kube-apiserver's
    /// `--advertise-address`); `None`: the address of the interface of the default route, as
    /// kube-apiserver picks it when bound to a loopback address
    /// ([`crate::kubernetes_service::host_interface_address`]).
    pub advertise_address: Option<std::net::IpAddr>,
    /// Who may authenticate, and how requests are authorized.
    pub auth: AuthOptions,
    /// The admission plugins in force (`--enable-admission-plugins`,
    /// `--disable-admission-plugins`); kube-apiserver's defaults, `ServiceAccount` among them.
    pub admission: AdmissionOptions,
    /// How the connect subresources reach the kubelets over HTTPS
    /// (`--kubelet-client-certificate`, `--kubelet-client-key`,
    /// `--kubelet-certificate-authority`); `None`: plain HTTP.
    pub kubelet_client: Option<crate::connect::tls::KubeletClientTls>,
    /// Start the cluster on a virtual clock running at this speed (cluster seconds per
    /// machine second; 0: paused) if it has none yet (`--clock virtual`,
    /// [`crate::admin::clock`]); `None`: the clock it has, the machine's for a new cluster.
    pub virtual_clock: Option<f64>,
    /// The virtual clock's time when it is made (`--clock-start`); `None`: the machine's.
    pub clock_start: Option<jiff::Timestamp>,
    /// Draw generated names and UIDs from this seed (`--seed`, [`crate::ids`]); `None`:
    /// random, as kube-apiserver's.
    pub seed: Option<u64>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(30 * 60),
            watch_cache_capacity: DEFAULT_RING_CAPACITY,
            watch_cache_bytes: DEFAULT_RING_BYTES,
            watch_client_buffer: DEFAULT_CLIENT_BUFFER,
            tracing: TracingOptions::default(),
            connections: ConnectionLimits::default(),
            access: AccessOptions::default(),
            component_probes: crate::ComponentProbes::default(),
            advertise_address: None,
            auth: AuthOptions::default(),
            admission: AdmissionOptions::default(),
            kubelet_client: None,
            virtual_clock: None,
            clock_start: None,
            seed: None,
        }
    }
}

struct Inner {
    registry: Arc<Registry>,
    storage: Storage,
    watch_cache: WatchCache,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    options: ServerOptions,
    /// Recent spans of every component (empty when tracing is off).
    collector: Collector,
    /// The faults in force (`crate::admin`).
    faults: FaultTable,
    /// The cluster clock (`crate::admin::clock`).
    clock: crate::admin::clock::ServerClock,
    /// Where new objects' generated names and UIDs come from (`crate::ids`).
    ids: Arc<crate::ids::Ids>,
    /// Components' work-queue reports and the lab status.
    reports: Reports,
    /// Who holds which Service cluster IP and node port (`crate::service_alloc`).
    service_allocations: Arc<ServiceAllocations>,
    /// Authentication, authorization and the RBAC objects (`crate::auth`).
    auth: Auth,
    /// The connect tunnels open now (`crate::connect`).
    long_running: Arc<LongRunning>,
    /// The APIServices as the aggregation proxy and discovery see them (`crate::aggregator`).
    aggregator: Arc<crate::aggregator::Aggregator>,
}

/// Everything a request handler needs, cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

impl AppState {
    /// State over `backend` with the built-in resources. Tasks it starts (watch caches, watch
    /// streams) stop when `shutdown` is cancelled.
    pub fn new(
        backend: Arc<dyn Backend>,
        options: ServerOptions,
        shutdown: CancellationToken,
    ) -> Self {
        let tasks = TaskTracker::new();
        let ids = Arc::new(match options.seed {
            Some(seed) => crate::ids::Ids::seeded(seed, backend.current_revision().0),
            None => crate::ids::Ids::random(),
        });
        let storage = Storage::new(backend.clone());
        let watch_cache = WatchCache::new(
            backend,
            tasks.clone(),
            shutdown.clone(),
            options.watch_cache_capacity,
            options.watch_client_buffer,
        )
        .with_handoff(storage.handoff().clone())
        .with_ring_bytes(options.watch_cache_bytes);
        let collector = Collector::new(
            if options.tracing.enabled {
                options.tracing.max_spans
            } else {
                0
            },
            options.tracing.max_spans_per_trace,
        );
        let service_allocations = Arc::new(ServiceAllocations::default());
        let registry = Registry::builtin();
        registry.modify(&GroupVersion::new("", "v1"), "services", |row| {
            row.allocations = Some(service_allocations.clone());
        });
        AppState(Arc::new(Inner {
            auth: Auth::new(options.auth.clone()),
            collector,
            faults: FaultTable::default(),
            clock: Default::default(),
            ids,
            reports: Reports::default(),
            registry: Arc::new(registry),
            service_allocations,
            storage,
            watch_cache,
            tasks,
            shutdown,
            options,
            long_running: Arc::default(),
            aggregator: Arc::default(),
        }))
    }

    /// The resource registry (rows may be added at run time).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.0.registry
    }

    /// The store, as objects.
    pub fn storage(&self) -> &Storage {
        &self.0.storage
    }

    /// The watch caches.
    pub fn watch_cache(&self) -> &WatchCache {
        &self.0.watch_cache
    }

    /// The owner of every task the server spawns.
    pub fn tasks(&self) -> &TaskTracker {
        &self.0.tasks
    }

    /// Cancelled when the server shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    /// The connect tunnels open now (`exec`, `attach`, `portforward`).
    pub fn long_running(&self) -> &Arc<LongRunning> {
        &self.0.long_running
    }

    /// The aggregation layer's view of the APIServices (`crate::aggregator`).
    pub fn aggregator(&self) -> &crate::aggregator::Aggregator {
        &self.0.aggregator
    }

    /// The serving tunables.
    pub fn options(&self) -> &ServerOptions {
        &self.0.options
    }

    /// The Service cluster IP and node port allocations.
    pub fn service_allocations(&self) -> &Arc<ServiceAllocations> {
        &self.0.service_allocations
    }

    /// Authentication and authorization.
    pub fn auth(&self) -> &Auth {
        &self.0.auth
    }

    /// The trace collector.
    pub fn collector(&self) -> &Collector {
        &self.0.collector
    }

    /// The faults in force.
    pub fn faults(&self) -> &FaultTable {
        &self.0.faults
    }

    /// What components and the lab runner reported.
    pub fn reports(&self) -> &Reports {
        &self.0.reports
    }

    /// The cluster clock's time: the machine's, or the virtual clock's
    /// (`crate::admin::clock`).
    pub fn now(&self) -> jiff::Timestamp {
        self.0.clock.now()
    }

    /// Where new objects' generated names and UIDs come from.
    pub fn ids(&self) -> &Arc<crate::ids::Ids> {
        &self.0.ids
    }

    /// The cluster clock.
    pub fn clock(&self) -> &crate::admin::clock::ServerClock {
        &self.0.clock
    }

    /// Waits for every spawned task (after `shutdown` was cancelled).
    pub async fn wait_for_tasks(&self) {
        self.0.tasks.close();
        self.0.tasks.wait().await;
    }
}
