//! [`Cluster`]: a whole miniplane cluster started from Rust — API server, controller-manager,
//! scheduler and simulated nodes — for tests, and for `miniplane up`.
//!
//! controller-runtime's envtest starts a real kube-apiserver and etcd for a test, without
//! controllers, scheduler or kubelets; kind starts all of Kubernetes in containers, in tens of
//! seconds. A `Cluster` starts every component in milliseconds, so each test can have its own:
//!
//! ```text
//!   Cluster::builder().nodes(3).start()          caller's thread: lock the data dir, wait
//!        │                                                         for "ready" (or the error)
//!        ▼ thread "miniplane-cluster": its own tokio runtime
//!   apiserver (store in <dir>/store, 127.0.0.1:<port|free>) ─▶ kubeconfig written
//!   controller-manager · scheduler · kubelet (N nodes)        each over HTTP, as processes do
//!   every node Ready through the API ─▶ start() returns the Cluster
//!        │
//!   cluster.stop() / drop(cluster)  ─▶ components stop (API server last, store closed),
//!                                      runtime shut down, temporary directory removed
//! ```
//!
//! The cluster owns its runtime on its own thread, so it works the same from a plain `#[test]`
//! and from `#[tokio::test]`: dropping it from inside an async test blocks that thread for the
//! few milliseconds the shutdown takes, but never drops a runtime inside another one.
//!
//! Unlike envtest there is no authentication: the API server serves plain HTTP on 127.0.0.1.
//!
//! The launcher's files, from the bottom up: `plan` (what to start: components, nodes,
//! port, tracing, the kubelets' settings), `data_dir` (the directory's layout and lock),
//! `supervisor` (the running members, stopped in order), `readiness`, the two ways to run
//! the components (`in_process`, `separate`), `apiservers` (the first API server and, with
//! `ClusterBuilder::apiservers`, the ones after it), `component_faults` (the `StopComponent`
//! fault: stopping and restarting one), `builder` ([`ClusterBuilder`]), and this module, which
//! composes them.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use apiserver::TracingOptions;
use client::ClusterSource;
use tokio_util::sync::CancellationToken;

mod apiservers;
mod builder;
mod cloud;
mod component_faults;
mod data_dir;
mod in_process;
mod pki;
mod plan;
mod readiness;
mod separate;
mod supervisor;

use crate::error::{Error, Result};
use crate::kubeconfig;
use crate::progress::{Component, Progress};
pub use builder::ClusterBuilder;
use component_faults::Restarter;
use data_dir::DataDir;
pub use plan::KubeletProfile;
use plan::{KubeletOptions, Plan};
use separate::Launcher;
use supervisor::{Members, Reporter};

/// How long a start may take before it fails (generous: CI machines are small and shared).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the runtime waits for stray blocking tasks after every component stopped.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// What a started cluster hands back to [`ClusterBuilder::start`].
struct Ready {
    url: String,
    /// Every API server's URL, the first's (`url`) first.
    apiserver_urls: Vec<String>,
    /// The web UI's address, with its login token in a secure cluster.
    ui_url: String,
    /// How the components reach the API server (kept for restarts).
    access: pki::Access,
    kubeconfig: String,
    kubelet_url: Option<String>,
    etcd_endpoint: Option<std::net::SocketAddr>,
    client: kube::Client,
}

/// A running cluster; stopped by [`Cluster::stop`] or on drop.
///
/// ```no_run
/// # fn main() -> miniplane::Result<()> {
/// let cluster = miniplane::Cluster::builder().nodes(2).start()?;
/// println!("API server at {}", cluster.url());
/// std::fs::write("kubeconfig", cluster.kubeconfig()).ok(); // for kubectl
/// cluster.stop()?; // or let it drop
/// # Ok(())
/// # }
/// ```
pub struct Cluster {
    url: String,
    apiserver_urls: Vec<String>,
    ui_url: String,
    kubeconfig: String,
    kubeconfig_path: PathBuf,
    data_dir: PathBuf,
    kubelet_url: Option<String>,
    etcd_endpoint: Option<std::net::SocketAddr>,
    /// Built on the cluster's runtime, so it works from any runtime (requests hop over a
    /// channel to it) until the cluster stops.
    client: kube::Client,
    /// Asks the cluster's thread to stop every component.
    stop: CancellationToken,
    /// Cancelled once the cluster's thread has stopped every component.
    stopped: CancellationToken,
    /// The thread that owns the runtime; its result is the shutdown's.
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    /// The temporary data directory, removed on drop (after the thread has closed the store).
    _temp: Option<tempfile::TempDir>,
}

impl Cluster {
    /// What to start: 3 nodes, the controller-manager and the scheduler, a temporary store,
    /// a free port — change any of it before [`ClusterBuilder::start`].
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            plan: Plan {
                nodes: 3,
                controller_manager: true,
                scheduler: true,
                leader_elect: false,
                component_probes: apiserver::ComponentProbes::default(),
                port: 0,
                fsync: false,
                history: apiserver::HistoryRetention::default(),
                virtual_clock: None,
                clock_start: None,
                seed: None,
                fast_node_lifecycle: false,
                tracing: TracingOptions::default(),
                kubelet: KubeletOptions::default(),
                node_ipam: None,
                cloud: None,
                secure: false,
                authorization_mode: apiserver::AuthorizationMode::Rbac,
                metrics_server: None,
                hpa_sync_period: None,
                etcd_listen: None,
                etcd: None,
                apiservers: 1,
            },
            allocate_node_cidrs: true,
            cloud: false,
            data_dir: None,
            fresh: false,
            restore: None,
            fsync: None,
            exe: None,
            progress: None,
        }
    }

    /// Starts the default cluster (`Cluster::builder().start()`).
    pub fn start() -> Result<Cluster> {
        Cluster::builder().start()
    }

    /// The API server's URL, `http://127.0.0.1:PORT` (`https://` for a secure cluster).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every API server's URL, [`Cluster::url`] first ([`ClusterBuilder::apiservers`]).
    pub fn apiserver_urls(&self) -> &[String] {
        &self.apiserver_urls
    }

    /// The web UI's address (`<url>/ui`); for a secure cluster with the login token that
    /// puts the browser's session cookie in place (`/ui?token=...`).
    pub fn ui_url(&self) -> &str {
        &self.ui_url
    }

    /// A kube client for the cluster (default namespace `default`). Usable from any tokio
    /// runtime; its requests fail once the cluster has stopped.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig (YAML) with context `miniplane`, for kubectl or another client.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// Where that kubeconfig is written (`<data dir>/kubeconfig`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The data directory (temporary unless [`ClusterBuilder::data_dir`]).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The simulated kubelets' control API (`POST /nodes/node-1/heartbeat?stop=true` makes a
    /// node stop heartbeating), if nodes run.
    pub fn kubelet_url(&self) -> Option<&str> {
        self.kubelet_url.as_deref()
    }

    /// The store's etcd v3 endpoint (`etcdctl --endpoints ADDR`), if
    /// [`ClusterBuilder::etcd_listen`] asked for one.
    pub fn etcd_endpoint(&self) -> Option<std::net::SocketAddr> {
        self.etcd_endpoint
    }

    /// Resolves once the cluster has stopped by itself: a component running in this process
    /// failed (then [`Cluster::stop`] returns its error). Components run with
    /// [`ClusterBuilder::separate`] that exit are reported, and the cluster keeps running.
    pub async fn stopped(&self) {
        self.stopped.cancelled().await;
    }

    /// Stops every component (the API server last, its store flushed and closed) and returns
    /// the first error one of them ended with.
    pub fn stop(mut self) -> Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<()> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.stop.cancel();
        thread
            .join()
            .unwrap_or_else(|_| Err(Error::Runtime("its thread panicked".into())))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(error) = self.shut_down() {
            tracing::warn!(%error, "cluster stopped with an error");
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.url)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

/// The cluster's thread: builds the runtime, starts the components, reports ready (or the
/// error), then waits to be stopped (or for a component to fail) and stops them all.
fn run(
    plan: Plan,
    launcher: Option<Launcher>,
    dir: DataDir,
    reporter: Reporter,
    ready_tx: mpsc::SyncSender<Result<Ready>>,
    stop: CancellationToken,
    stopped: CancellationToken,
) -> Result<()> {
    // Two workers are plenty for the API server (the other components run on a thread each,
    // `Members::spawn_thread`), and a test process that starts many clusters does not get one
    // thread per core for each.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("miniplane")
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let result = runtime.block_on(async {
        let failed = CancellationToken::new();
        let mut members = Members::new(reporter, failed.clone());
        let started = tokio::select! {
            started = tokio::time::timeout(START_TIMEOUT, start(&plan, launcher.as_ref(), &dir, &mut members)) => {
                Some(started.unwrap_or_else(|_| Err(Error::Timeout {
                    what: "every node to be Ready".into(),
                    seconds: START_TIMEOUT.as_secs(),
                })))
            }
            // A component failed: `stop` returns why.
            () = failed.cancelled() => None,
        };
        let supervised = match started {
            Some(Ok(ready)) => {
                let restarter = Restarter {
                    access: ready.access.clone(),
                    nodes: plan.nodes,
                    launcher: launcher.clone(),
                    fast_node_lifecycle: plan.fast_node_lifecycle,
                    hpa_sync_period: plan.hpa_sync_period,
                    tracing: plan.tracing.clone(),
                    kubelet: plan.kubelet.clone(),
                    leader_elect: plan.leader_elect,
                    component_probes: plan.component_probes.clone(),
                    node_ipam: plan.node_ipam.clone(),
                    cloud: plan.cloud.clone(),
                };
                let client = ready.client.clone();
                let _ = ready_tx.send(Ok(ready));
                (restarter, client)
            }
            Some(Err(e)) => {
                if let Err(stop_error) = members.stop().await {
                    tracing::warn!(error = %stop_error, "stopping after a failed start");
                }
                let _ = ready_tx.send(Err(e));
                return Ok(());
            }
            None => {
                let e = members.stop().await.err();
                let _ = ready_tx.send(Err(e.unwrap_or_else(|| {
                    Error::Runtime("a component stopped during the start".into())
                })));
                return Ok(());
            }
        };
        let (restarter, client) = supervised;
        // `StopComponent` faults until the cluster is asked to stop (or fails).
        let until = CancellationToken::new();
        let (faults, watcher) = client::faults::fault_watch(client);
        let watching = tokio::spawn(watcher.run(until.clone()));
        let running = members.components();
        tokio::select! {
            () = stop.cancelled() => {}
            () = failed.cancelled() => {}
            () = component_faults::supervise(&mut members, &restarter, running, faults, until.clone()) => {}
        }
        until.cancel();
        let _ = watching.await;
        members.stop().await
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    drop(dir);
    stopped.cancel();
    result
}

/// Starts the API server, writes the kubeconfig, starts the other components and waits for
/// every node to be Ready.
async fn start(
    plan: &Plan,
    launcher: Option<&Launcher>,
    dir: &DataDir,
    members: &mut Members,
) -> Result<Ready> {
    let pki = if plan.secure {
        Some(pki::ClusterPki::prepare(dir.path())?)
    } else {
        None
    };
    let (url, pid, etcd_endpoint) =
        apiservers::start_one(members, launcher, dir, plan, pki.as_ref(), 0).await?;
    let kubeconfig_path = dir.kubeconfig();
    let (kubeconfig, access) = match &pki {
        Some(pki) => {
            let (_, yaml) = pki.write_kubeconfig(Component::ApiServer, &url, dir.path())?;
            let access =
                pki::Access::secure(pki, url.clone(), kubeconfig_path.clone(), dir.path())?;
            (yaml, access)
        }
        None => {
            let yaml = kubeconfig::render(&url);
            kubeconfig::write_private(&kubeconfig_path, &yaml)
                .map_err(Error::io(&kubeconfig_path))?;
            (
                yaml,
                pki::Access::plain(url.clone(), kubeconfig_path.clone()),
            )
        }
    };
    let client =
        apiservers::serving(members, access.source(Component::ApiServer), &url, pid).await?;
    let mut apiserver_urls = vec![url.clone()];
    let replicas = plan.for_replicas(etcd_endpoint);
    apiserver_urls
        .extend(apiservers::start_replicas(members, launcher, dir, &replicas, pki.as_ref()).await?);
    let kubelet = kubelet_sim::Config::new(ClusterSource::Url(url.clone()), plan.nodes);
    let names: Vec<String> = (0..plan.nodes).map(|i| kubelet.node_name(i)).collect();
    let cloud = match &plan.cloud {
        Some(cloud) => {
            let machines: Vec<_> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), kubelet_sim::node_status::host_ip(i)))
                .collect();
            Some(cloud::start_cloud(cloud, &machines, members).await?)
        }
        None => None,
    };
    let kubelet_url = match launcher {
        None => in_process::start_clients(plan, &access, members).await?,
        Some(launcher) => launcher.start_clients(plan, &access, members).await?,
    };
    if let (Some(cloud), Some(kubelet_url)) = (cloud, &kubelet_url) {
        let (kubelet_url, nodes) = (kubelet_url.clone(), names.iter().cloned().collect());
        members.spawn_task(Component::Cloud, move |stop| async move {
            cloud::follow_power(cloud, kubelet_url, nodes, stop).await;
            Ok::<(), String>(())
        });
    }
    if plan.nodes > 0 {
        readiness::wait_nodes_ready(&client, &names, plan.cloud.is_some()).await?;
        members.reporter().report(Progress::NodesReady {
            nodes: plan.nodes,
            elapsed: members.reporter().elapsed(),
        });
    }
    let ui_url = match &pki {
        Some(pki) => format!("{url}/ui?token={}", pki.ui_token),
        None => format!("{url}/ui"),
    };
    Ok(Ready {
        url,
        apiserver_urls,
        ui_url,
        access,
        kubeconfig,
        kubelet_url,
        etcd_endpoint,
        client,
    })
}
