//! [`ClusterBuilder`]: what a [`Cluster`] starts (components, nodes, store, port, security,
//! tracing), set method by method, and [`ClusterBuilder::start`], which locks the data
//! directory and hands the plan to the cluster's thread (`super::run`).

use std::path::PathBuf;
use std::sync::mpsc;

use apiserver::TracingOptions;
use tokio_util::sync::CancellationToken;

use super::data_dir::DataDir;
use super::plan::{self, Plan};
use super::separate::Launcher;
use super::supervisor::{ProgressFn, Reporter};
use super::{Cluster, KubeletProfile, cloud, run};
use crate::error::{Error, Result};
use crate::progress::Progress;

/// What to start; see [`Cluster::builder`].
#[must_use = "a builder does nothing until `start`"]
pub struct ClusterBuilder {
    pub(super) plan: Plan,
    pub(super) allocate_node_cidrs: bool,
    pub(super) cloud: bool,
    pub(super) data_dir: Option<PathBuf>,
    pub(super) fresh: bool,
    pub(super) restore: Option<Vec<u8>>,
    pub(super) fsync: Option<bool>,
    pub(super) exe: Option<PathBuf>,
    pub(super) progress: Option<ProgressFn>,
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

    /// How many API servers serve the cluster (`miniplane up --apiservers`): 1 by default.
    /// Several share the etcd cluster of [`ClusterBuilder::etcd`], as kube-apiserver replicas
    /// do; without one, the first keeps the embedded store and serves it to the others over
    /// etcd's API (writable, on [`ClusterBuilder::etcd_listen`]'s address or a free port).
    /// They listen on the port and the ones after it (6443, 6444, ...; free ports for port 0);
    /// the kubeconfig and the other components use the first ([`Cluster::apiserver_urls`]
    /// lists them all).
    pub fn apiservers(mut self, count: usize) -> Self {
        self.plan.apiservers = count;
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

    /// Starts from a snapshot (a `miniplane snapshot save` file's bytes): restored as the
    /// store before the API server opens it, each object at its resourceVersion, the store's
    /// revision `apiserver::snapshot::DEFAULT_BUMP` past the snapshot's and compacted there
    /// (clients that saw later revisions list again). The data directory's store must be
    /// empty (with [`ClusterBuilder::fresh`] it is). Not with an etcd cluster as the store.
    pub fn restore(mut self, snapshot: Vec<u8>) -> Self {
        self.restore = Some(snapshot);
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

    /// How long the embedded store keeps replaced and deleted versions for watches and
    /// `miniplane history` (default one hour, within its 256 MiB budget of history).
    pub fn history_window(mut self, window: std::time::Duration) -> Self {
        self.plan.history.window = window;
        self
    }

    /// Also keeps at least the last `revisions` revisions of history, however old (within
    /// the same budget); `0` drops the rule (the default).
    pub fn history_revisions(mut self, revisions: u64) -> Self {
        self.plan.history.revisions = Some(revisions).filter(|n| *n > 0);
        self
    }

    /// Starts the cluster on a virtual clock running at `speed` cluster seconds per machine
    /// second (0: paused) that every component reads and `miniplane clock` moves; a
    /// cluster restarted on its data dir keeps the clock it had.
    pub fn virtual_clock(mut self, speed: f64) -> Self {
        self.plan.virtual_clock = Some(speed);
        self
    }

    /// Starts a new virtual clock ([`Self::virtual_clock`]) at `start` instead of the
    /// machine's time.
    pub fn clock_start(mut self, start: jiff::Timestamp) -> Self {
        self.plan.clock_start = Some(start);
        self
    }

    /// Draws the API server's generated names and new objects' UIDs, and the scheduler's
    /// tie-breaks, from `seed`: with a paused virtual clock started at a fixed time, the same
    /// steps on a fresh cluster give the same objects every run.
    pub fn seed(mut self, seed: u64) -> Self {
        self.plan.seed = Some(seed);
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
            restore,
            fsync,
            exe,
            progress,
        } = self;
        plan.fsync = fsync.unwrap_or(data_dir.is_some());
        plan::check_apiservers(&plan)?;
        plan.share_store();
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
        if let Some(snapshot) = restore {
            if plan.etcd.is_some() {
                return Err(Error::Restore(
                    "the store is an etcd cluster: restore it with etcdutl snapshot restore".into(),
                ));
            }
            let store = dir.store();
            apiserver::snapshot::restore(&snapshot, &store, apiserver::snapshot::DEFAULT_BUMP)
                .map_err(|e| match e {
                    // The store refuses a target that is not empty: say how to replace it.
                    apiserver::snapshot::Error::Io(io)
                        if io.kind() == std::io::ErrorKind::AlreadyExists =>
                    {
                        Error::Restore(format!(
                            "{} already holds a store (--fresh replaces it)",
                            store.display()
                        ))
                    }
                    e => Error::Restore(e.to_string()),
                })?;
        }
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
            apiserver_urls: ready.apiserver_urls,
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
