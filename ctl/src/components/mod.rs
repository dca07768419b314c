//! The subcommands that run one Kubernetes component each as a process of its own, as
//! Kubernetes ships `kube-apiserver`, `kube-controller-manager`, `kube-scheduler` and the
//! `kubelet` (here many simulated kubelets, as kwok runs them), and a cloud's
//! `cloud-controller-manager`, and the metrics-server add-on: `miniplane apiserver`,
//! `controller-manager`, `scheduler`, `kubelet`, `cloud-controller-manager`,
//! `metrics-server`. Each parses the component's flags and calls its library's `run`;
//! `miniplane up --separate` starts them as children.

pub(crate) mod apiserver;
pub(crate) mod cloud_controller_manager;
pub(crate) mod controller_manager;
pub(crate) mod flags;
pub(crate) mod kubelet;
pub(crate) mod metrics_server;
pub(crate) mod scheduler;

/// The runtime of a client component run as its own process (`kubelet`, `scheduler`,
/// `controller-manager`): one thread. These processes wait on the API server most of the time
/// and do a few hundred microseconds of work per pod; on a small machine shared with the API
/// server, a multi-threaded runtime spends more on waking its idle workers (futex calls,
/// context switches, work stealing) than it gains from running them side by side. With 1,000
/// nodes and 10,000 pods on 2 cores, one thread cut these processes' CPU by about 13%
/// (`docs/benchmarks.md`, "Apply to Running at scale"). The API server keeps a worker per
/// core: it needs more than one core at times.
pub(crate) fn client_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
