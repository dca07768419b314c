//! # kubelet_sim — many simulated kubelets in one process
//!
//! A real kubelet registers its Node, keeps it alive with a Lease and status updates, and
//! reports the pods bound to it as they are pulled, created, started, probed and stopped.
//! This crate does all of that for hundreds or thousands of **simulated** nodes at once,
//! without containers — the role kwok (`kubernetes-sigs/kwok`) plays for Kubernetes' own
//! scale tests. Only the API is real: every write goes through the API server over HTTP,
//! and each node's writes (its Node, Lease, pod statuses, Events) act as that node's kubelet,
//! `system:node:<name>` in `system:nodes` ([`client::impersonation`] over the one connection
//! of the simulator's own user, [`USER`]).
//!
//! ```text
//!                 ┌──────────────────────── one process ──────────────────────────┐
//!   API server ◀──┤ node-0 … node-N: register, Lease every 10 s, status (node.rs)  │
//!       │         │ one pod informer ─▶ dispatch by spec.nodeName ─▶ work queue    │
//!       └────────▶│   ─▶ workers: stages::step (pure) ─▶ PATCH status, events,     │
//!    pods, nodes  │      DELETE grace 0 (pod_workers.rs)                           │
//!                 │ control API: /healthz, heartbeat stop/start, remove (control)  │
//!                 └────────────────────────────────────────────────────────────────┘
//! ```
//!
//! | module | Kubernetes |
//! | --- | --- |
//! | [`stages`] | `pkg/kubelet/pod_workers.go`, `kuberuntime/kuberuntime_manager.go` `SyncPod` (+ kwok's Stages) |
//! | [`containers`] | `kuberuntime_manager.go` `computePodActions`, `doBackOff`: init containers, sidecars, restarts, processes that exit (`kill 1`) |
//! | [`ephemeral`] | `computePodActions`' `EphemeralContainersToStart`: `kubectl debug` containers pulled and started |
//! | [`recover`] | a restarted kubelet's view of its pods, from their posted status |
//! | [`plan`] | what each container will do: its kind, run, probe timeline (no counterpart) |
//! | [`command`] | what a container's process does (`sleep 5`, `sh -c "...; exit 3"`; no counterpart) |
//! | [`probes`] | `pkg/kubelet/prober/worker.go` (startup, liveness, readiness timing) |
//! | [`termination`] | `kuberuntime_container.go` `killContainer`, preStop hooks, grace period |
//! | [`pod_status`], [`conditions`] | `kubelet_pods.go` `generateAPIPodStatus`, `getPhase`; `status/generate.go` |
//! | [`annotations`] | per-pod and per-container overrides (kwok's chaos-stage annotations) |
//! | [`node_status`], [`node`] | `pkg/kubelet/kubelet_node_status.go`, `nodestatus/setters.go`, `nodelease/` |
//! | [`pod_ip`] | CNI host-local IPAM |
//! | [`pod_workers`] | `pkg/kubelet/pod_workers.go`, `status/status_manager.go` |
//! | [`recorder`], [`events_cache`] | `pkg/kubelet/events/event.go` + client-go's recorder and `tools/record/events_cache.go` |
//! | [`logs`] | `pkg/kubelet/kuberuntime/logs/logs.go` `ReadLogs`, `kubelet_pods.go` `validateContainerLogStatus`: container logs derived from the Pod |
//! | [`shell`] | what `kubectl exec`/`attach`/`cp`/`debug` reach: a small shell answering from the Pod (`kubelet_pods.go` `makeEnvironmentVariables`, `managedHostsFileContent`) |
//! | [`server`] | `pkg/kubelet/server/server.go` + the CRI streaming server: the kubelet API (logs, exec, attach, port-forward, `/pods`, `/stats/summary`, `/metrics/resource`) |
//! | [`usage`] | what cAdvisor measures: each running container's CPU and memory, from its requests and annotations |
//! | [`load`] | the load `miniplane load` sets on a workload, read from the ConfigMap `kube-system/miniplane-load` (no counterpart) |
//! | [`control`] | fault injection (no Kubernetes counterpart) |
//!
//! Entry point: [`run`] (or [`Simulator::bind`] → [`Simulator::handle`] → [`Simulator::run`]
//! to keep a handle for faults). The kubelet API listens on [`Config::kubelet_listen`]
//! (127.0.0.1, a free port by default); [`Simulator::kubelet_addr`] tells where, and every
//! Node advertises that port as `status.daemonEndpoints.kubeletEndpoint.port`. With
//! [`Config::kubelet_tls`] it serves HTTPS, and [`Config::kubelet_auth`] says who may call it
//! ([`server::auth`]).

pub mod annotations;
pub mod command;
pub mod conditions;
pub mod config;
pub mod containers;
pub mod control;
pub mod ephemeral;
pub mod error;
pub mod events_cache;
pub mod faults;
pub mod load;
pub mod logs;
pub mod node;
pub mod node_status;
pub mod plan;
pub mod pod_ip;
pub mod pod_status;
pub mod pod_workers;
pub mod probes;
pub mod recorder;
pub mod recover;
pub mod server;
pub mod shell;
pub mod stages;
pub mod termination;
pub mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use client::list_watch::ApiListerWatcher;
use client::trace::Exporter;
use client::{ClientConfig, SharedClock, SharedInformerFactory};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::{
    Capacity, Config, Heartbeat, ServingAuth, ServingAuthorization, ServingTls, StageConfig,
};
pub use control::SimHandle;
pub use error::{Error, Result};

use node::NodeState;
use pod_workers::{NodeTable, PodWorkers};
use server::KubeletServer;

/// The field selector of the shared pod watch: pods bound to a node.
pub const BOUND_PODS_SELECTOR: &str = "spec.nodeName!=";

/// How many nodes register at the same time (so a thousand do not stampede the API server).
pub const REGISTRATION_CONCURRENCY: usize = 32;

/// A simulator with its client built and its control port bound, ready to run.
pub struct Simulator {
    config: Arc<Config>,
    client: kube::Client,
    listener: Option<TcpListener>,
    /// The kubelet API's listener and server (none when [`Config::kubelet_listen`] is unset).
    kubelet: Option<(TcpListener, KubeletServer)>,
    clock: SharedClock,
    /// Keeps a virtual cluster clock current while the simulator runs.
    clock_watcher: Option<client::cluster_clock::ClockWatcher>,
    factory: SharedInformerFactory,
    handle: SimHandle,
    registered: watch::Sender<bool>,
    recorder_writer: recorder::RecorderWriter,
    /// Sends the pod workers' spans (none when tracing is off).
    exporter: Option<Exporter>,
}

/// The user the simulator's kubeconfig names in a secure cluster (`<data dir>/kubelet.conf`):
/// it watches the pods and Nodes of every simulated node, deletes the Node of a removed one,
/// and impersonates each node's kubelet for that node's writes (the `miniplane:kubelet-sim`
/// ClusterRole of the API server's bootstrap policy).
pub const USER: &str = "miniplane:kubelet-sim";

/// The component name of the kubelets' spans.
pub const COMPONENT: &str = "kubelet";

/// Builds and runs the simulator until `shutdown` fires.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    Simulator::bind(config).await?.run(shutdown).await
}

impl Simulator {
    /// Builds the client, binds the control API (if `config.listen`) and the kubelet API (if
    /// `config.kubelet_listen`), and prepares the nodes.
    /// The kubelets run on the cluster's clock ([`client::cluster_clock`]): stage delays,
    /// heartbeats, Leases, restart back-offs and probes move with a virtual clock.
    pub async fn bind(config: Config) -> Result<Self> {
        Self::bind_on(config, None).await
    }

    /// [`Simulator::bind`] on an injected clock.
    pub async fn bind_with_clock(config: Config, clock: SharedClock) -> Result<Self> {
        Self::bind_on(config, Some(clock)).await
    }

    async fn bind_on(mut config: Config, clock: Option<SharedClock>) -> Result<Self> {
        let client_config = ClientConfig {
            source: config.api_server.clone(),
            rate_limit: config.rate_limit,
            tracing: config.tracing,
            user_agent: Some(COMPONENT.to_string()),
            bearer_token: None,
        };
        let own = client::build_client(&client_config)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        // What each node's kubelet writes goes as that node (`system:node:<name>`, see
        // `node::node_user`); the simulator's own user watches the pods and Nodes of all of
        // them and may impersonate the nodes (`miniplane:kubelet-sim`).
        let client = client::impersonation::impersonating_client(&own);
        let (tracer, exporter) = client::trace::start(&client_config, COMPONENT)
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        let listener = match config.listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| Error::Bind {
                addr: addr.to_string(),
                message: e.to_string(),
            })?),
            None => None,
        };
        let kubelet_listener = match config.kubelet_listen {
            Some(addr) => {
                let listener = TcpListener::bind(addr).await.map_err(|e| Error::Bind {
                    addr: addr.to_string(),
                    message: e.to_string(),
                })?;
                // The Nodes advertise the port actually bound.
                config.kubelet_listen = listener.local_addr().ok().or(Some(addr));
                Some(listener)
            }
            None => None,
        };
        // After the ports: a taken one is refused at once, not after the clock's retries.
        let (clock, clock_watcher) = match clock {
            Some(clock) => (clock, None),
            None => client::cluster_clock::discover(&own)
                .await
                .map_err(Error::Config)?,
        };
        let table: HashMap<String, Arc<NodeState>> = (0..config.nodes)
            .map(|i| {
                let state = Arc::new(NodeState::new(&config, i)?);
                Ok((state.name().to_owned(), state))
            })
            .collect::<Result<_>>()?;
        let nodes: NodeTable = Arc::new(RwLock::new(table));
        let factory =
            SharedInformerFactory::with_clock(client.clone(), Duration::ZERO, clock.clone());
        factory.set_tracer(tracer.clone());
        let (recorder, recorder_writer) = recorder::recorder(client.clone(), config.nodes);
        // One watch for all simulated nodes: every pod bound to some node (a real kubelet
        // watches `spec.nodeName=<itself>`); the handler keeps the ones simulated here. Pods
        // are kept without their managedFields, which nothing here reads (a real kubelet
        // decodes and keeps them).
        let pods = factory.informer_with::<Pod>(|| {
            Arc::new(
                ApiListerWatcher::new(kube::Api::all(client.clone()))
                    .field_selector(BOUND_PODS_SELECTOR)
                    .without_managed_fields(),
            )
        });
        let security = match kubelet_listener {
            Some(_) => serving_security(&config, &own)?,
            None => (None, None),
        };
        let kubelet = kubelet_listener.map(|listener| {
            let server = KubeletServer::new(
                nodes.clone(),
                pods.clone(),
                clock.clone(),
                Some(client.clone()),
                &config.capacity,
            );
            let (tls, auth) = security;
            server.secure(tls, auth);
            (listener, server)
        });
        let workers = PodWorkers::new(
            client.clone(),
            pods,
            nodes.clone(),
            recorder,
            clock.clone(),
            config.stages.clone(),
        )
        .with_tracer(tracer);
        workers.register_handler();
        if let Some((_, server)) = &kubelet {
            // `kill 1` through exec, a shell ending through attach: the workers end the run.
            server.set_workers(workers.clone());
        }
        if config.pod_cidr_from_node {
            watch_pod_cidrs(&factory, &nodes, &workers);
        }
        let (registered, registered_rx) = watch::channel(false);
        let handle = SimHandle {
            client: client.clone(),
            nodes,
            workers,
            registered: registered_rx,
            kubelet: kubelet.as_ref().map(|(_, server)| server.clone()),
        };
        Ok(Simulator {
            config: Arc::new(config),
            client,
            listener,
            kubelet,
            clock,
            clock_watcher,
            factory,
            handle,
            registered,
            recorder_writer,
            exporter,
        })
    }

    /// Where the control API listens, if anywhere.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Where the kubelet API listens, if anywhere (the port every Node advertises).
    pub fn kubelet_addr(&self) -> Option<SocketAddr> {
        self.kubelet
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    /// A handle for faults and for waiting until every node has registered.
    pub fn handle(&self) -> SimHandle {
        self.handle.clone()
    }

    /// Registers the nodes, then runs heartbeats and pod workers until `shutdown` fires.
    ///
    /// On shutdown heartbeats stop and the Node objects stay, as when a real kubelet stops:
    /// the node lifecycle controller marks them Unknown after its grace period.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let tracker = TaskTracker::new();
        let inner = shutdown.child_token();
        // The exporter outlives the workers, to send their last spans.
        let exporting = CancellationToken::new();
        if let Some(exporter) = self.exporter {
            tracker.spawn(exporter.run(exporting.clone()));
        }
        tracker.spawn(self.recorder_writer.run(inner.clone()));
        if let Some(watcher) = self.clock_watcher {
            // Until the exporter stops: the workers' last steps still read the clock.
            tracker.spawn(watcher.run(exporting.clone()));
        }
        if let Some(listener) = self.listener {
            tracker.spawn(control::serve(listener, self.handle.clone(), inner.clone()));
        }
        if let Some((listener, server)) = self.kubelet {
            tracker.spawn(server.serve(listener, inner.clone()));
        }
        let node_informer = self.factory.informer::<Node>();
        self.factory.start(&inner);
        let states: Vec<Arc<NodeState>> = {
            let table = self.handle.nodes.read().unwrap_or_else(|p| p.into_inner());
            let mut states: Vec<_> = table.values().cloned().collect();
            states.sort_by_key(|s| s.index);
            states
        };
        let registration = futures::stream::iter(states)
            .map(|state| {
                let (client, config, clock) = (&self.client, &self.config, &self.clock);
                let inner = &inner;
                async move {
                    let mut delay = Duration::from_millis(200);
                    loop {
                        match node::register(client, config, &state, clock).await {
                            Ok(()) => return Some(state),
                            Err(e) => {
                                tracing::warn!(node = state.name(), error = %e, "registration failed; retrying");
                            }
                        }
                        tokio::select! {
                            () = inner.cancelled() => return None,
                            () = clock.sleep(delay) => {}
                        }
                        delay = (delay * 2).min(Duration::from_secs(7));
                    }
                }
            })
            .buffer_unordered(REGISTRATION_CONCURRENCY);
        futures::pin_mut!(registration);
        while let Some(registered) = registration.next().await {
            let Some(state) = registered else { break };
            tracker.spawn(node::heartbeat_loop(
                self.client.clone(),
                self.config.clone(),
                state,
                node_informer.clone(),
                self.clock.clone(),
                inner.clone(),
            ));
        }
        if self.factory.wait_for_cache_sync(&inner).await {
            self.registered.send_replace(true);
            tracing::info!(nodes = self.config.nodes, "all nodes registered");
            for _ in 0..self.config.pod_workers.max(1) {
                tracker.spawn(self.handle.workers.clone().run_worker());
            }
            let (faults, watcher) = client::faults::fault_watch(self.client.clone());
            tracker.spawn(watcher.run(inner.clone()));
            tracker.spawn(faults::run(
                self.handle.clone(),
                self.config.clone(),
                self.clock.clone(),
                faults,
                inner.clone(),
            ));
        }
        shutdown.cancelled().await;
        self.handle.workers.shut_down();
        inner.cancel();
        self.factory.shutdown().await;
        exporting.cancel();
        tracker.close();
        tracker.wait().await;
        Ok(())
    }
}

/// The kubelet API's TLS configuration (from [`Config::kubelet_tls`]) and its request checks
/// (from [`Config::kubelet_auth`], the reviews sent with `own`, the simulator's own client);
/// `None` for each that is not asked for.
fn serving_security(
    config: &Config,
    own: &kube::Client,
) -> Result<(
    Option<Arc<rustls::ServerConfig>>,
    Option<server::auth::RequestAuth>,
)> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("{flag} {}: {e}", path.display())))
    };
    let (tls, client_ca) = match &config.kubelet_tls {
        Some(files) => {
            let cert = read("--tls-cert-file", &files.cert_file)?;
            let key = read("--tls-private-key-file", &files.key_file)?;
            let ca = match &files.client_ca_file {
                Some(path) => Some(read("--client-ca-file", path)?),
                None => None,
            };
            let tls =
                apimachinery::pki::tls_server_config(&cert, &key, ca.as_deref()).map_err(|e| {
                    Error::Config(format!("--tls-cert-file/--tls-private-key-file: {e}"))
                })?;
            let ca_der = match &ca {
                Some(pem) => Some(
                    apimachinery::pki::first_certificate(pem)
                        .map_err(|e| Error::Config(format!("--client-ca-file: {e}")))?,
                ),
                None => None,
            };
            (Some(tls), ca_der)
        }
        None => (None, None),
    };
    let checks = (!config.kubelet_auth.allows_everything()).then(|| {
        server::auth::RequestAuth::new(config.kubelet_auth.clone(), client_ca, Some(own.clone()))
    });
    Ok((tls, checks))
}

/// Hands each simulated node the pod CIDR the node IPAM controller wrote into its Node (as a
/// kubelet's `updatePodCIDR` does) and resyncs the pods that were waiting for it.
fn watch_pod_cidrs(factory: &SharedInformerFactory, nodes: &NodeTable, workers: &PodWorkers) {
    let seen = {
        let (nodes, workers) = (nodes.clone(), workers.clone());
        move |node: &Node| {
            let Some(name) = node.metadata.name.as_deref() else {
                return;
            };
            let Some(cidr) = node
                .spec
                .as_ref()
                .and_then(|s| s.pod_cidr.as_deref())
                .and_then(|c| c.parse::<apimachinery::Ipv4Cidr>().ok())
            else {
                return;
            };
            if let Some(state) = pod_workers::lookup(&nodes, name)
                && state.set_pod_cidr(cidr)
            {
                workers.resync_node(name);
            }
        }
    };
    let on_update = seen.clone();
    factory.informer::<Node>().add_event_handler(
        client::ResourceEventHandlerFuncs::new()
            .on_add(move |n: Arc<Node>, _| seen(&n))
            .on_update(move |_, n: Arc<Node>| on_update(&n)),
    );
}
