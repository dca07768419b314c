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
//! the components (`in_process`, `separate`), `component_faults` (the `StopComponent`
//! fault: stopping and restarting one), and this module, which composes them.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use apiserver::TracingOptions;
use client::{ClientConfig, ClusterSource};
use tokio_util::sync::CancellationToken;

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
use component_faults::Restarter;
use data_dir::DataDir;
pub use plan::KubeletProfile;
use plan::{KubeletOptions, Plan};
use separate::Launcher;
use supervisor::{Members, ProgressFn, Reporter};

/// How long a start may take before it fails (generous: CI machines are small and shared).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the runtime waits for stray blocking tasks after every component stopped.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// What to start; see [`Cluster::builder`].
#[must_use = "a builder does nothing until `start`"]
pub struct ClusterBuilder {
    plan: Plan,
    allocate_node_cidrs: bool,
    cloud: bool,
    data_dir: Option<PathBuf>,
    fresh: bool,
    fsync: Option<bool>,
    exe: Option<PathBuf>,
    progress: Option<ProgressFn>,
}

impl ClusterBuilder {
    /// How many simulated nodes (`node-0`, `node-1`, ...): 3 by default; 0 runs no kubelet.
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.plan.nodes = nodes;
        self
    }

    /// Whether the controller-manager runs (default: yes). Without it a Deployment gets no
    /// ReplicaSet — a test of one's own controller may want exactly that.
    pub fn controller_manager(mut self, run: bool) -> Self {
        self.plan.controller_manager = run;
        self
    }

    /// Whether the controller-manager's node IPAM controller gives each Node its pod CIDR
    /// (`--allocate-node-cidrs`, as kind and kubeadm run it) and the simulated kubelets take
    /// their pods' IPs from it (default: yes). Off, or without a controller-manager, each node
    /// registers with its own `10.244.<i>.0/24`.
    pub fn allocate_node_cidrs(mut self, allocate: bool) -> Self {
        self.allocate_node_cidrs = allocate;
        self
    }

    /// Whether the cluster runs on a simulated cloud (`docs/cloud.md`; default: no, as kind;
    /// `miniplane up`: yes): the cloud (its state in `<data-dir>/cloud/`) gets an instance
    /// per node, the cloud-controller-manager runs, and the kubelets register with
    /// `--cloud-provider=external`, so Nodes are schedulable once the CCM has initialized them.
    pub fn cloud(mut self, cloud: bool) -> Self {
        self.cloud = cloud;
        self
    }

    /// Whether the scheduler runs (default: yes). Without it pods stay Pending.
    pub fn scheduler(mut self, run: bool) -> Self {
        self.plan.scheduler = run;
        self
    }

    /// Whether the controller-manager and the scheduler run with leader election, each only
    /// while holding its Lease in kube-system (`kube-controller-manager`, `kube-scheduler`), so
    /// that another copy started by hand waits as a standby. Default: no (as envtest, a test
    /// cluster needs no Lease); `miniplane up`: yes, as Kubernetes runs them.
    pub fn leader_elect(mut self, elect: bool) -> Self {
        self.plan.leader_elect = elect;
        self
    }

    /// Node heartbeats every 200 ms and a node-monitor grace period of 2 s (instead of 10 s
    /// and 40 s), so a node that stops heartbeating is `Unknown` within seconds: for labs and
    /// tests of node failure. In one process the pod GC also looks every 200 ms and deletes a
    /// removed node's pods after 2 s (instead of 20 s and 40 s).
    pub fn fast_node_lifecycle(mut self, fast: bool) -> Self {
        self.plan.fast_node_lifecycle = fast;
        self
    }

    /// How fast the simulated kubelets run pods (default: [`KubeletProfile::Fast`], no delays;
    /// `miniplane up` uses [`KubeletProfile::Realistic`]).
    pub fn kubelet_profile(mut self, profile: KubeletProfile) -> Self {
        self.plan.kubelet.profile = profile;
        self
    }

    /// Each node's `cpu` capacity (and allocatable), a quantity (`"8"`, `"500m"`); default 4.
    /// An invalid quantity fails the nodes' registration.
    pub fn node_cpu(mut self, cpu: impl Into<String>) -> Self {
        self.plan.kubelet.cpu = Some(cpu.into());
        self
    }

    /// Each node's `memory` capacity (and allocatable), a quantity (`"32Gi"`); default 16Gi.
    /// An invalid quantity fails the nodes' registration.
    pub fn node_memory(mut self, memory: impl Into<String>) -> Self {
        self.plan.kubelet.memory = Some(memory.into());
        self
    }

    /// Labels every node registers with besides the kubelet's own (`kubernetes.io/hostname`,
    /// `kubernetes.io/os`, ...), as the kubelet's `--node-labels`.
    pub fn node_labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.plan
            .kubelet
            .labels
            .extend(labels.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The simulated kubelets' API (what `kubectl logs`, `exec`, `attach`, `cp` and
    /// `port-forward` reach through the API server, and metrics-server scrapes): its port on
    /// 127.0.0.1, one for all the nodes, which every Node advertises as
    /// `status.daemonEndpoints.kubeletEndpoint.port`. Default `Some(0)`: a free port; `None`
    /// serves no kubelet API (the Nodes then advertise the kubelet's 10250).
    pub fn kubelet_port(mut self, port: Option<u16>) -> Self {
        self.plan.kubelet.api_port = port;
        self
    }

    /// Whether a metrics-server runs (default: no; `miniplane up`: yes): it registers
    /// `v1beta1.metrics.k8s.io` with the API server's aggregation layer and scrapes every
    /// node's kubelet every `resolution` (its `--metric-resolution`, 15 s on a cluster), so
    /// `kubectl top` and HorizontalPodAutoscalers see the simulated usage. `None`: none runs.
    pub fn metrics_server(mut self, resolution: Option<std::time::Duration>) -> Self {
        self.plan.metrics_server = resolution;
        self
    }

    /// How often the controller-manager's horizontal pod autoscaler syncs each
    /// HorizontalPodAutoscaler (its `--horizontal-pod-autoscaler-sync-period`; default 15 s,
    /// as on a cluster).
    pub fn horizontal_pod_autoscaler_sync_period(mut self, period: std::time::Duration) -> Self {
        self.plan.hpa_sync_period = Some(period);
        self
    }

    /// Also serve the store over etcd's v3 gRPC API on `addr` (127.0.0.1 only; port 0 picks a
    /// free port), so `etcdctl` reads what the API server wrote; read-only unless `writable`
    /// (`miniplane apiserver --etcd-listen`, `--etcd-listen-writable`). Default: none.
    pub fn etcd_listen(mut self, addr: std::net::SocketAddr, writable: bool) -> Self {
        self.plan.etcd_listen = Some((addr, writable));
        self
    }

    /// Keep the objects in an etcd cluster (`miniplane up --etcd-servers`) instead of the
    /// embedded store in the data directory. Default: the embedded store.
    pub fn etcd(mut self, storage: apiserver::EtcdStorage) -> Self {
        self.plan.etcd = Some(storage);
        self
    }

    /// How the cluster traces (default: on, with the collector's default sizes): the API
    /// server's settings (`miniplane apiserver --tracing`, `--trace-max-spans`,
    /// `--trace-max-spans-per-trace`); with `enabled` off the other components report no spans
    /// either.
    pub fn trace_options(mut self, options: TracingOptions) -> Self {
        self.plan.tracing = options;
        self
    }

    /// Serve HTTPS with a cluster CA (in the data dir's `pki/`), give every component a client
    /// certificate of its own identity and authorize with RBAC, as kubeadm and kind set a
    /// cluster up ([`pki`]); the kubeconfig carries the CA and an admin certificate (group
    /// `system:masters`). Off by default for the library (plain HTTP, every request allowed);
    /// `miniplane up` turns it on.
    pub fn secure(mut self, secure: bool) -> Self {
        self.plan.secure = secure;
        self
    }

    /// How a secure cluster's API server authorizes requests, as kube-apiserver's
    /// `--authorization-mode`: [`apiserver::AuthorizationMode::Rbac`] by default (as kubeadm
    /// sets it), [`apiserver::AuthorizationMode::AlwaysAllow`] to keep authentication but
    /// allow every authenticated or anonymous request (what the RBAC benchmark compares
    /// against). A cluster that is not [`secure`](Self::secure) allows every request anyway.
    pub fn authorization_mode(mut self, mode: apiserver::AuthorizationMode) -> Self {
        self.plan.authorization_mode = mode;
        self
    }

    /// Keeps the store in `dir` (created if missing, locked while the cluster runs) instead of
    /// a temporary directory removed on stop: a later start on the same directory brings every
    /// object back. The kubeconfig is written to `<dir>/kubeconfig`.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Starts from an empty store: removes `<data dir>/store` once the directory is locked.
    pub fn fresh(mut self, fresh: bool) -> Self {
        self.fresh = fresh;
        self
    }

    /// The API server's port on 127.0.0.1 (default 0: a free port). A port in use fails the
    /// start with [`Error::PortInUse`].
    pub fn port(mut self, port: u16) -> Self {
        self.plan.port = port;
        self
    }

    /// Whether a write is acknowledged only once it is on disk. Default: on with
    /// [`ClusterBuilder::data_dir`], off for a temporary store (nothing to keep, and faster).
    pub fn fsync(mut self, fsync: bool) -> Self {
        self.fsync = Some(fsync);
        self
    }

    /// Runs each component as a child process of `exe` (the `miniplane` binary:
    /// `miniplane apiserver`, `controller-manager`, `scheduler`, `kubelet`) instead of in
    /// this process; their stderr goes to `<data dir>/logs/<component>.log`.
    pub fn separate(mut self, exe: impl Into<PathBuf>) -> Self {
        self.exe = Some(exe.into());
        self
    }

    /// Calls `f` for each step of the start and for components that stop on their own
    /// (on the cluster's runtime: `f` must return quickly).
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(std::sync::Arc::new(f));
        self
    }

    /// Starts the cluster and returns once every node is Ready (or at once after the API
    /// server with 0 nodes). Blocks the calling thread meanwhile (milliseconds).
    ///
    /// Errors: [`Error::DataDirInUse`] if another cluster holds the data directory,
    /// [`Error::PortInUse`], or the first component that failed to start.
    pub fn start(self) -> Result<Cluster> {
        let ClusterBuilder {
            mut plan,
            allocate_node_cidrs,
            cloud,
            data_dir,
            fresh,
            fsync,
            exe,
            progress,
        } = self;
        plan.fsync = fsync.unwrap_or(data_dir.is_some());
        plan.node_ipam = (allocate_node_cidrs && plan.controller_manager)
            .then(|| plan::node_ipam_for(plan.nodes));
        let (path, temp) = match data_dir {
            Some(dir) => (dir, None),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("miniplane-")
                    .tempdir()
                    .map_err(Error::io(std::env::temp_dir()))?;
                (temp.path().to_owned(), Some(temp))
            }
        };
        let dir = DataDir::lock(&path, fresh)?;
        plan.cloud = cloud.then(|| cloud::CloudPlan { dir: dir.cloud() });
        plan.kubelet.external_cloud = cloud;
        let launcher = exe.map(|exe| Launcher {
            exe,
            logs: dir.logs(),
        });
        let reporter = Reporter::new(progress);
        let stop = CancellationToken::new();
        let stopped = CancellationToken::new();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("miniplane-cluster".into())
            .spawn({
                let (stop, stopped) = (stop.clone(), stopped.clone());
                move || run(plan, launcher, dir, reporter, ready_tx, stop, stopped)
            })
            .map_err(|e| Error::Runtime(format!("cannot start its thread: {e}")))?;
        let ready = match ready_rx.recv() {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            // The thread ended without a word: its result says why.
            Err(_) => {
                return Err(match thread.join() {
                    Ok(Err(e)) => e,
                    Ok(Ok(())) => Error::Runtime("stopped before it was ready".into()),
                    Err(_) => Error::Runtime("its thread panicked".into()),
                });
            }
        };
        Ok(Cluster {
            kubeconfig_path: path.join("kubeconfig"),
            data_dir: path,
            ui_url: ready.ui_url,
            url: ready.url,
            kubeconfig: ready.kubeconfig,
            kubelet_url: ready.kubelet_url,
            etcd_endpoint: ready.etcd_endpoint,
            client: ready.client,
            stop,
            stopped,
            thread: Some(thread),
            _temp: temp,
        })
    }
}

/// What a started cluster hands back to [`ClusterBuilder::start`].
struct Ready {
    url: String,
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
            },
            allocate_node_cidrs: true,
            cloud: false,
            data_dir: None,
            fresh: false,
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
    let store = dir.store();
    let pki = if plan.secure {
        Some(pki::ClusterPki::prepare(dir.path())?)
    } else {
        None
    };
    let (url, pid, etcd_endpoint) = match launcher {
        None => {
            let started = in_process::start_apiserver(members, store, plan, pki.as_ref());
            let (url, etcd) = started.await?;
            (url, None, etcd)
        }
        Some(launcher) => {
            let started = launcher.start_apiserver(members, &store, plan, pki.as_ref());
            let (url, pid, etcd) = started.await?;
            (url, pid, etcd)
        }
    };
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
    let client = client::build_client(&ClientConfig::new(access.source(Component::ApiServer)))
        .await
        .map_err(|e| Error::component(Component::ApiServer, e))?;
    readiness::wait_serving(&client).await;
    members
        .reporter()
        .started(Component::ApiServer, Some(url.clone()), pid, None);
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
        ui_url,
        access,
        kubeconfig,
        kubelet_url,
        etcd_endpoint,
        client,
    })
}
