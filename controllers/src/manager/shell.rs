//! The process shell every controller manager shares: kube-controller-manager's (this
//! crate's [`super::ControllerManager`]) and the cloud-controller-manager's (its own crate).
//! Mirrors `k8s.io/controller-manager/app` and `k8s.io/cloud-provider/app`, which give both of
//! Kubernetes' binaries one start-up: a client with the component's User-Agent, the
//! `/healthz` + `/metrics` port, leader election, one informer factory, and here the pauses
//! of the faults in force applied before any worker takes a key.
//!
//! ```text
//!   Shell::bind(component, client config, listen)   client, tracer, health listener
//!   Shell::run(election, shutdown, |set| ...)        exporter + /healthz task; campaign for the
//!      │                                             Lease if asked (lost ─▶ LeaderElectionLost)
//!      ▼ leading (or no election): a ControllerSet
//!   set.factory() / set.executor(name)               the manager builds its controllers
//!   set.add_queued(metrics, queue, start) / add(start)
//!   set.run(names)                                   faults watched ─▶ informers started ─▶
//!                                                    caches synced ─▶ pauses applied ─▶ queue
//!                                                    reports ─▶ workers started ─▶ shutdown:
//!                                                    drained, joined, informers stopped
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use client::cluster_clock::ClockWatcher;
use client::events::{ApiEventSink, EventRecorder, new_recorder};
use client::trace::Exporter;
use client::workqueue::queue::QueueItem;
use client::{
    ClientConfig, LeaderElection, RateLimitingQueue, SharedClock, SharedInformerFactory, Tracer,
};
use kube::Client;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admin::{self, Controlled, PauseState};
use super::health;
use super::metrics::{ControllerMetrics, Registry};
use crate::error::{Error, Result};
use crate::executor::Executor;

/// How long a starting manager waits for the faults in force before its workers start
/// anyway.
const FIRST_FAULTS_WAIT: Duration = Duration::from_secs(5);

/// What starts a controller's workers or loop once the caches are synced.
pub type Start = Box<dyn FnOnce(&TaskTracker, CancellationToken) + Send>;

/// A controller manager's process parts, bound but not running.
pub struct Shell {
    component: &'static str,
    client: Client,
    /// Where the API server is, for the controllers' own clients
    /// ([`ControllerSet::use_service_account_credentials`]).
    client_config: ClientConfig,
    listener: Option<TcpListener>,
    /// The cluster's clock ([`client::cluster_clock`]): every timer, backoff, Lease and
    /// Event time of the controllers reads it.
    clock: SharedClock,
    /// Keeps a virtual clock current while the manager runs.
    clock_watcher: Option<ClockWatcher>,
    registry: Arc<Registry>,
    tracer: Tracer,
    /// Sends the tracer's spans; runs until the controllers have stopped.
    exporter: Option<Exporter>,
}

impl Shell {
    /// Builds the kube client (User-Agent `component`), the tracer, and binds the
    /// `/healthz` + `/metrics` listener at `listen`.
    pub async fn bind(
        component: &'static str,
        client_config: ClientConfig,
        listen: Option<SocketAddr>,
    ) -> Result<Self> {
        let client_config = ClientConfig {
            user_agent: Some(component.to_string()),
            ..client_config
        };
        let client = client::build_client(&client_config)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        let (tracer, exporter) = client::trace::start(&client_config, component)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        // The port first: a taken one is refused at once, not after the clock's retries.
        let listener = match listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| Error::Bind {
                addr: addr.to_string(),
                message: e.to_string(),
                in_use: e.kind() == std::io::ErrorKind::AddrInUse,
            })?),
            None => None,
        };
        let (clock, clock_watcher) = client::cluster_clock::discover(&client)
            .await
            .map_err(Error::Config)?;
        Ok(Shell {
            component,
            client,
            client_config,
            listener,
            clock,
            clock_watcher,
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

    /// Serves health and spans, then runs `controllers` on a fresh [`ControllerSet`]: at once
    /// without `election`, else only while holding its Lease
    /// ([`client::run_while_leading`]: `leaderelection.RunOrDie` with `OnStartedLeading:
    /// run`, `OnStoppedLeading: exit`). Returns when `shutdown` fires, or
    /// `Err(LeaderElectionLost)` if leadership was lost first.
    pub async fn run<F, Fut>(
        self,
        election: Option<&LeaderElection>,
        shutdown: CancellationToken,
        controllers: F,
    ) -> Result<()>
    where
        F: FnOnce(ControllerSet) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let tracker = TaskTracker::new();
        let serving = CancellationToken::new();
        if let Some(exporter) = self.exporter {
            tracker.spawn(exporter.run(serving.clone()));
        }
        if let Some(watcher) = self.clock_watcher {
            tracker.spawn(watcher.run(serving.clone()));
        }
        if let Some(listener) = self.listener {
            tracker.spawn(health::serve(
                listener,
                self.registry.clone(),
                serving.clone(),
            ));
        }
        let (client, tracer, registry, component) =
            (&self.client, &self.tracer, &self.registry, self.component);
        let (client_config, clock) = (&self.client_config, &self.clock);
        let set = |token: CancellationToken| {
            ControllerSet::new(
                component,
                client,
                client_config,
                tracer,
                registry,
                clock.clone(),
                token,
            )
        };
        let result = match election {
            None => {
                registry.set_leader(true);
                controllers(set(shutdown.clone())).await
            }
            Some(election) => {
                let leadership =
                    client::run_while_leading(client, election, clock, &shutdown, |token| async move {
                        registry.set_leader(true);
                        tracing::info!(identity = %election.identity, "became leader: starting controllers");
                        let result = controllers(set(token)).await;
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
        };
        serving.cancel();
        tracker.close();
        tracker.wait().await;
        result
    }
}

/// The controllers of one term of leadership: one informer factory, their queues as the
/// admin API sees them, and what starts them.
pub struct ControllerSet {
    component: &'static str,
    client: Client,
    client_config: ClientConfig,
    /// The controllers' own clients by ServiceAccount name (with
    /// `--use-service-account-credentials`); empty: every controller uses `client`.
    controller_clients: std::collections::HashMap<String, Client>,
    tracer: Tracer,
    registry: Arc<Registry>,
    factory: SharedInformerFactory,
    clock: SharedClock,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    starts: Vec<Start>,
    controlled: Vec<Controlled>,
}

impl ControllerSet {
    fn new(
        component: &'static str,
        client: &Client,
        client_config: &ClientConfig,
        tracer: &Tracer,
        registry: &Arc<Registry>,
        clock: SharedClock,
        shutdown: CancellationToken,
    ) -> Self {
        // Unlike Kubernetes (a resync every 12-24 h), informers never resync: every decision
        // is driven by watch events and the controllers' own requeues.
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        factory.set_tracer(tracer.clone());
        // As the managers' informers (`trim`): no controller reads managedFields.
        factory.set_without_managed_fields();
        ControllerSet {
            component,
            client: client.clone(),
            client_config: client_config.clone(),
            controller_clients: std::collections::HashMap::new(),
            tracer: tracer.clone(),
            registry: registry.clone(),
            factory,
            clock,
            tracker: TaskTracker::new(),
            shutdown,
            starts: Vec::new(),
            controlled: Vec::new(),
        }
    }

    /// The informer factory the controllers share.
    pub fn factory(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// The cluster's clock ([`client::cluster_clock`]).
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The manager's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Gives each of `accounts` (the controllers' ServiceAccount names in `kube-system`) a
    /// client that acts as that ServiceAccount (kube-controller-manager's
    /// `--use-service-account-credentials`, [`client::clientbuilder`]); the informers,
    /// leader election and reports stay on the manager's own client.
    pub async fn use_service_account_credentials(&mut self, accounts: &[&str]) -> Result<()> {
        for account in accounts {
            let client = client::clientbuilder::service_account_client(
                &self.client,
                &self.client_config,
                account,
            )
            .await
            .map_err(|e| Error::Config(format!("credentials of {account}: {e}")))?;
            self.controller_clients.insert(account.to_string(), client);
        }
        Ok(())
    }

    /// The client a controller writes with: its ServiceAccount's when
    /// [`ControllerSet::use_service_account_credentials`] made one, else the manager's.
    pub fn client_for(&self, account: &str) -> &Client {
        self.controller_clients.get(account).unwrap_or(&self.client)
    }

    /// An event recorder whose Events name `source` as their reporting component; its
    /// broadcaster runs until shutdown.
    pub fn recorder(&self, source: &str) -> EventRecorder {
        self.recorder_as(source, source)
    }

    /// [`ControllerSet::recorder`] writing with the client of ServiceAccount `account`.
    pub fn recorder_as(&self, source: &str, account: &str) -> EventRecorder {
        let (recorder, broadcaster) = new_recorder(
            Arc::new(ApiEventSink::new(self.client_for(account).clone())),
            source,
            self.clock.clone(),
        );
        self.tracker.spawn(broadcaster.run(self.shutdown.clone()));
        recorder
    }

    /// An executor whose Events name `source` as their reporting component.
    pub fn executor(&self, source: &str) -> Executor {
        self.executor_as(source, source)
    }

    /// An executor whose Events name `source`, writing with the client of ServiceAccount
    /// `account` ([`ControllerSet::client_for`]).
    pub fn executor_as(&self, source: &str, account: &str) -> Executor {
        Executor::new(
            self.client_for(account).clone(),
            self.recorder_as(source, account),
        )
        .with_tracer(self.tracer.clone())
        .with_clock(self.clock.clone())
    }

    /// A controller with a work queue: its counters and queue go to `/metrics` and to the
    /// admin API (where it can be paused), and `start` runs once the caches are synced.
    pub fn add_queued<T>(
        &mut self,
        metrics: &Arc<ControllerMetrics>,
        queue: &RateLimitingQueue<T>,
        start: Start,
    ) where
        T: QueueItem + std::fmt::Display + 'static,
    {
        self.registry.register(metrics.clone(), queue.metrics());
        self.controlled.push(Controlled {
            metrics: metrics.clone(),
            queue: Arc::new(queue.clone()),
        });
        self.starts.push(start);
    }

    /// A controller without a work queue (a periodic loop): `start` runs once the caches are
    /// synced.
    pub fn add(&mut self, start: Start) {
        self.starts.push(start);
    }

    /// Starts the informers, waits for their caches, applies the pauses in force, reports the
    /// queues to the admin API, starts the controllers, and on shutdown drains and joins
    /// everything. `names` are the controllers, for the log.
    pub async fn run(self, names: impl Debug) -> Result<()> {
        let ControllerSet {
            component,
            client,
            factory,
            tracker,
            shutdown,
            starts,
            controlled,
            ..
        } = self;
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
                component,
                client.clone(),
                controlled,
                faults,
                pauses,
                shutdown.clone(),
            ));
            for start in starts {
                start(&tracker, shutdown.clone());
            }
            tracing::info!(controllers = ?names, "caches synced: controllers started");
        }
        shutdown.cancelled().await;
        tracker.close();
        tracker.wait().await;
        factory.shutdown().await;
        tracing::info!("controllers stopped");
        Ok(())
    }
}
