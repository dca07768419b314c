//! The controller-manager process: `cmd/kube-controller-manager/app/controllermanager.go`
//! (`Run`, `StartControllers`, leader election) and `apps.go` / `core.go` (the `start*`
//! functions).
//!
//! ```text
//!   ControllerManager::bind(config)          kube client (kubeconfig / --master, QPS/burst)
//!      │                                     /healthz + /metrics listener
//!      ▼ run(shutdown)
//!   --leader-elect? ─▶ campaign for Lease kube-system/kube-controller-manager
//!      │                 (lost while leading ─▶ Err(LeaderElectionLost): the process exits)
//!      ▼ leading (or no election)
//!   tracer (unless --tracing=false) ─▶ exporter task posting spans to the API server
//!   SharedInformerFactory: Deployments, ReplicaSets, Pods, Services, Endpoints,
//!                          EndpointSlices, Nodes, Namespaces, ... (one watch each)
//!   controllers: deployment, replicaset, endpoint, endpointslice, garbagecollector,
//!                namespace, nodeipam (with --allocate-node-cidrs), nodelifecycle (--controllers)
//!      each: handlers ─▶ its RateLimitingQueue ─▶ N workers ─▶ sync ─▶ Executor
//!   factory.start ─▶ wait_for_cache_sync ─▶ start the workers
//!      ▼ shutdown
//!   queues shut down and drained ─▶ workers joined ─▶ informers stopped ─▶ lease released
//! ```
//!
//! Files: [`config`] (flags as a struct), [`metrics`] (controller counters + work-queue
//! metrics), [`health`] (`/healthz`, `/metrics`), [`admin`] (pause/step faults, queue reports
//! to the API server).

pub mod admin;
pub mod config;
pub mod health;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use client::events::{ApiEventSink, new_recorder};
use client::trace::Exporter;
use client::{ClientConfig, ClusterSource, SharedInformerFactory, TokioClock, Tracer};
use kube::Client;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::admin::{Controlled, PauseState};
pub use self::config::{ApiServer, Config, EnabledControllers, LeaderElection};
use self::metrics::Registry;
use crate::deployment::controller::DeploymentController;
use crate::endpoint::controller::EndpointsController;
use crate::endpointslice::controller::EndpointSliceController;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::garbage_collector::controller::GarbageCollector;
use crate::namespace::controller::NamespaceController;
use crate::node_ipam::controller::{self as node_ipam, NodeIpamController};
use crate::node_lifecycle::controller::NodeLifecycleController;
use crate::replicaset::controller::ReplicaSetController;

/// A controller-manager with its client built and its health port bound, ready to run.
pub struct ControllerManager {
    config: Config,
    client: Client,
    listener: Option<TcpListener>,
    registry: Arc<Registry>,
    tracer: Tracer,
    /// Sends the tracer's spans; runs until the controllers have stopped.
    exporter: Option<Exporter>,
}

/// How long a starting controller-manager waits for the faults in force before its workers
/// start anyway.
const FIRST_FAULTS_WAIT: Duration = Duration::from_secs(5);

/// The component name of the controller-manager's spans.
pub const COMPONENT: &str = "kube-controller-manager";

/// Builds and runs a controller-manager until `shutdown` fires (or leadership is lost).
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    ControllerManager::bind(config).await?.run(shutdown).await
}

impl ControllerManager {
    /// Builds the kube client and binds the `/healthz` + `/metrics` listener.
    pub async fn bind(config: Config) -> Result<Self> {
        let source = match &config.api_server {
            ApiServer::Kubeconfig(path) => ClusterSource::Kubeconfig(path.clone()),
            ApiServer::Master(url) => ClusterSource::Url(url.clone()),
        };
        let client_config = ClientConfig {
            source,
            rate_limit: config.rate_limit,
            tracing: config.tracing,
            user_agent: Some(COMPONENT.to_string()),
        };
        let client = client::build_client(&client_config)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        let (tracer, exporter) = client::trace::start(&client_config, COMPONENT)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        let listener = match config.listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| Error::Bind {
                addr: addr.to_string(),
                message: e.to_string(),
                in_use: e.kind() == std::io::ErrorKind::AddrInUse,
            })?),
            None => None,
        };
        Ok(ControllerManager {
            config,
            client,
            listener,
            registry: Arc::new(Registry::default()),
            tracer,
            exporter,
        })
    }

    /// Where `/healthz` and `/metrics` are served, if anywhere.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The metrics registry (benchmarks read sync counts from it).
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Runs until `shutdown` fires; `Err(LeaderElectionLost)` if leadership was lost first.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let tracker = TaskTracker::new();
        let serving = CancellationToken::new();
        if let Some(exporter) = self.exporter {
            tracker.spawn(exporter.run(serving.clone()));
        }
        if let Some(listener) = self.listener {
            tracker.spawn(health::serve(
                listener,
                self.registry.clone(),
                serving.clone(),
            ));
        }
        let result = match &self.config.leader_election {
            None => {
                self.registry.set_leader(true);
                run_controllers(
                    &self.client,
                    &self.config,
                    &self.registry,
                    &self.tracer,
                    shutdown.clone(),
                )
                .await
            }
            Some(election) => {
                run_with_leader_election(
                    &self.client,
                    &self.config,
                    election,
                    &self.registry,
                    &self.tracer,
                    &shutdown,
                )
                .await
            }
        };
        serving.cancel();
        tracker.close();
        tracker.wait().await;
        result
    }
}

/// Campaigns for the Lease and runs the controllers while leading
/// ([`client::run_while_leading`]: `leaderelection.RunOrDie` with `OnStartedLeading: run`,
/// `OnStoppedLeading: exit`).
async fn run_with_leader_election(
    client: &Client,
    config: &Config,
    election: &LeaderElection,
    registry: &Arc<Registry>,
    tracer: &Tracer,
    shutdown: &CancellationToken,
) -> Result<()> {
    let leadership = client::run_while_leading(client, election, shutdown, |token| async move {
        registry.set_leader(true);
        tracing::info!(identity = %election.identity, "became leader: starting controllers");
        let result = run_controllers(client, config, registry, tracer, token).await;
        registry.set_leader(false);
        result
    })
    .await;
    match leadership.output {
        _ if leadership.lost => Err(Error::LeaderElectionLost),
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Builds the enabled controllers on one informer factory, starts the informers, waits for
/// their caches, starts the workers, and on `shutdown` drains and joins everything.
async fn run_controllers(
    client: &Client,
    config: &Config,
    registry: &Registry,
    tracer: &Tracer,
    shutdown: CancellationToken,
) -> Result<()> {
    // Unlike Kubernetes (a resync every 12-24 h), informers never resync: every decision is
    // driven by watch events and the controllers' own requeues.
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    factory.set_tracer(tracer.clone());
    // As kube-controller-manager's informers (`trim`): no controller reads managedFields.
    factory.set_without_managed_fields();
    let tracker = TaskTracker::new();
    let executor = |component: &str| {
        let (recorder, broadcaster) = new_recorder(
            Arc::new(ApiEventSink::new(client.clone())),
            component,
            TokioClock::shared(),
        );
        tracker.spawn(broadcaster.run(shutdown.clone()));
        Executor::new(client.clone(), recorder).with_tracer(tracer.clone())
    };
    type Start = Box<dyn FnOnce(&TaskTracker, CancellationToken) + Send>;
    let mut starts: Vec<Start> = Vec::new();
    let mut controlled: Vec<Controlled> = Vec::new();
    let enabled = &config.controllers;
    if enabled.is_enabled("deployment") {
        let c = DeploymentController::new(&factory, executor("deployment-controller"));
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_deployment_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("replicaset") {
        let c = ReplicaSetController::new(&factory, executor("replicaset-controller"));
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_replicaset_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("endpoint") {
        let c = EndpointsController::new(
            &factory,
            executor("endpoint-controller"),
            config.endpoint_updates_batch_period,
        );
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_endpoint_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("endpointslice") {
        let c = EndpointSliceController::new(
            &factory,
            executor("endpoint-slice-controller"),
            config.max_endpoints_per_slice,
            config.endpointslice_updates_batch_period,
        );
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_service_endpoint_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("garbagecollector") {
        let c = GarbageCollector::new(&factory, executor("garbage-collector-controller"));
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_gc_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("namespace") {
        let c = NamespaceController::new(&factory, executor("namespace-controller"));
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        let n = config.concurrent_namespace_syncs;
        starts.push(Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if let Some(ipam) = config
        .node_ipam
        .as_ref()
        .filter(|_| enabled.is_enabled("nodeipam"))
    {
        ipam.validate().map_err(Error::Config)?;
        let c = NodeIpamController::new(&factory, executor("cidrAllocator"), ipam);
        registry.register(c.metrics.clone(), c.queue().metrics());
        controlled.push(Controlled {
            metrics: c.metrics.clone(),
            queue: Arc::new(c.queue().clone()),
        });
        starts.push(Box::new(move |t, s| c.spawn(node_ipam::WORKERS, t, s)));
    }
    if enabled.is_enabled("nodelifecycle") {
        let (recorder, broadcaster) = new_recorder(
            Arc::new(ApiEventSink::new(client.clone())),
            "node-controller",
            TokioClock::shared(),
        );
        tracker.spawn(broadcaster.run(shutdown.clone()));
        let c = NodeLifecycleController::new(
            client.clone(),
            &factory,
            config.node_lifecycle.clone(),
            recorder,
            TokioClock::shared(),
        );
        starts.push(Box::new(move |t, s| {
            t.spawn(c.run(s));
        }));
    }
    let (mut faults, fault_watcher) = client::faults::fault_watch(client.clone());
    tracker.spawn(fault_watcher.run(shutdown.clone()));
    factory.start(&shutdown);
    if factory.wait_for_cache_sync(&shutdown).await {
        // Pauses in force apply before any worker takes a key.
        let first = tokio::time::timeout(FIRST_FAULTS_WAIT, faults.changed()).await;
        if !matches!(first, Ok(Ok(()))) {
            tracing::warn!("faults not known yet: starting the controllers unpaused");
        }
        let mut pauses = PauseState::default();
        let current = faults.borrow_and_update().clone();
        admin::apply(&controlled, &pauses.plan(&current, true));
        tracker.spawn(admin::run(
            client.clone(),
            controlled,
            faults,
            pauses,
            shutdown.clone(),
        ));
        for start in starts {
            start(&tracker, shutdown.clone());
        }
        tracing::info!(controllers = ?enabled.names(), "caches synced: controllers started");
    }
    shutdown.cancelled().await;
    tracker.close();
    tracker.wait().await;
    factory.shutdown().await;
    tracing::info!("controllers stopped");
    Ok(())
}
