//! `miniplane up`: the whole control plane — API server with its store in `--data-dir`,
//! controller-manager, scheduler, `--nodes` simulated nodes — in this process
//! ([`miniplane::Cluster`]) or, with `--separate`, as child processes; a kubeconfig in the data
//! dir; progress on stderr; what to do next on stdout; a graceful stop on Ctrl-C or SIGTERM.
//!
//! ```text
//! $ miniplane up
//! ✓ apiserver http://127.0.0.1:6443 (29 ms)
//! ✓ controller-manager (39 ms)
//! ✓ scheduler (42 ms)
//! ✓ cloud: 3 instances http://127.0.0.1:40127 (35 ms)
//! ✓ cloud-controller-manager (48 ms)
//! ✓ metrics-server http://127.0.0.1:41853 (50 ms)
//! ✓ kubelet: 3 nodes registered, control API http://127.0.0.1:38301 (64 ms)
//! ✓ 3/3 nodes Ready (85 ms)
//!
//! miniplane is ready at http://127.0.0.1:6443 ...
//! ```

use std::path::{Path, PathBuf};

use miniplane::{Cluster, ClusterBuilder, Error, KubeletProfile};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The line stdout starts with once the cluster is ready (tests wait for it).
pub const READY: &str = "miniplane is ready at ";

/// Flags of `miniplane up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Directory for the store, the kubeconfig and the logs (locked while the cluster runs).
    #[arg(long, value_name = "DIR", default_value = ".miniplane")]
    data_dir: PathBuf,
    /// How many simulated nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The API server's port on 127.0.0.1 (0 picks a free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Run each component as its own child process (so that one can be killed).
    #[arg(long)]
    separate: bool,
    /// Start from an empty store (deletes the objects kept in the data dir, and the cloud;
    /// with --etcd-servers the objects are in etcd, and stay).
    #[arg(long)]
    fresh: bool,
    /// Start from a snapshot file (`miniplane snapshot save`): every object back at its
    /// resourceVersion, the pods on their nodes. The store must be empty (or --fresh).
    #[arg(long, value_name = "FILE")]
    restore: Option<std::path::PathBuf>,
    /// Run the nodes on a simulated cloud with its cloud-controller-manager (docs/cloud.md):
    /// Nodes get providerIDs, zones and addresses from it, LoadBalancer Services an external
    /// IP (`--cloud=false`: a bare-metal-like cluster, as kind's).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    cloud: bool,
    /// Acknowledge writes before they reach the disk (tests and benchmarks only), as
    /// `miniplane apiserver --no-fsync`.
    #[arg(long)]
    no_fsync: bool,
    /// How long the store keeps replaced and deleted versions of objects: how far back
    /// `miniplane history` and watches from an older resourceVersion reach (within a 256 MiB
    /// budget of history).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = apimachinery::duration::parse_duration)]
    history_window: std::time::Duration,
    /// Also keep at least the last N revisions of history, however old (0: no such rule).
    #[arg(long, value_name = "N", default_value_t = 0)]
    history_revisions: u64,
    /// Serve HTTPS with a cluster CA kept in the data dir, a client certificate per component
    /// and RBAC, as kubeadm and kind do (`--secure=false`: plain HTTP, every request
    /// allowed).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    secure: bool,
    /// How the API server of a secure cluster authorizes requests, as kube-apiserver's flag:
    /// `RBAC` (as kubeadm sets it) or `AlwaysAllow` (authentication stays on).
    #[arg(long, value_name = "MODE", default_value = "RBAC", value_parser = apiserver::AuthorizationMode::parse)]
    authorization_mode: apiserver::AuthorizationMode,
    /// Run a metrics-server, registered through API aggregation, so `kubectl top` and
    /// HorizontalPodAutoscalers see the nodes' and pods' simulated usage
    /// (`--metrics-server=false`: none, as on a bare kubeadm cluster).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    metrics_server: bool,
    /// How often the metrics-server scrapes the kubelets (its `--metric-resolution`).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = apimachinery::duration::parse_duration)]
    metric_resolution: std::time::Duration,
    #[command(flatten)]
    trace: crate::components::apiserver::TraceArgs,
    #[command(flatten)]
    clock: crate::components::apiserver::ClockArgs,
    #[command(flatten)]
    etcd: crate::components::apiserver::EtcdArgs,
    #[command(flatten)]
    storage: crate::components::apiserver::EtcdStorageArgs,
    /// How many API servers to run, on --port and the ports after it. They share the etcd
    /// cluster of --etcd-servers; without one, the first keeps the store and serves it to the
    /// others over etcd's API (writable, on --etcd-listen's address or a free port).
    #[arg(long, value_name = "N", default_value_t = 1)]
    apiservers: usize,
    #[command(flatten)]
    node_args: NodeArgs,
}

/// How the simulated nodes look and run pods (`miniplane kubelet`'s flags, named for `up`).
#[derive(Debug, clap::Args)]
struct NodeArgs {
    /// Pod stage timing of the simulated kubelets: `realistic` (image pulls take 1.2 s,
    /// Kubernetes' back-off) or `fast` (no delays: pods are Running as soon as they are bound).
    #[arg(long, value_name = "PROFILE", default_value = "realistic", value_parser = parse_profile)]
    kubelet_profile: KubeletProfile,
    /// CPU capacity (and allocatable) of each node, a quantity (default 4).
    #[arg(long, value_name = "QUANTITY", value_parser = crate::components::kubelet::parse_quantity)]
    node_cpu: Option<String>,
    /// Memory capacity (and allocatable) of each node, a quantity (default 16Gi).
    #[arg(long, value_name = "QUANTITY", value_parser = crate::components::kubelet::parse_quantity)]
    node_memory: Option<String>,
    /// Labels every node registers with, `key=value,key2=value2` (as the kubelet's flag).
    #[arg(long, value_name = "LABELS", value_delimiter = ',', value_parser = crate::components::kubelet::parse_node_label)]
    node_labels: Vec<(String, String)>,
}

impl NodeArgs {
    fn apply_to(&self, builder: ClusterBuilder) -> ClusterBuilder {
        let mut builder = builder
            .kubelet_profile(self.kubelet_profile)
            .node_labels(self.node_labels.clone());
        if let Some(cpu) = &self.node_cpu {
            builder = builder.node_cpu(cpu);
        }
        if let Some(memory) = &self.node_memory {
            builder = builder.node_memory(memory);
        }
        builder
    }
}

pub(crate) fn parse_profile(s: &str) -> Result<KubeletProfile, String> {
    s.parse()
}

/// SIGINT (Ctrl-C) and SIGTERM, caught from before the start so that a signal during the
/// start also stops the cluster gracefully.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Runs the cluster until Ctrl-C, SIGTERM, or a component failing.
pub fn main(args: UpArgs) -> anyhow::Result<()> {
    // The cluster has its own runtime; this one only waits for signals.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut signals = {
        let _context = runtime.enter();
        Signals::new()?
    };
    let mut builder = Cluster::builder()
        .data_dir(&args.data_dir)
        .fresh(args.fresh)
        .fsync(!args.no_fsync)
        .history_window(args.history_window)
        .history_revisions(args.history_revisions)
        .port(args.port)
        .nodes(args.nodes)
        .leader_elect(true)
        .cloud(args.cloud)
        .secure(args.secure)
        .authorization_mode(args.authorization_mode)
        .trace_options(args.trace.options())
        .metrics_server(args.metrics_server.then_some(args.metric_resolution))
        .apiservers(args.apiservers)
        .on_progress(|p| eprintln!("{p}"));
    builder = args.node_args.apply_to(builder);
    if let Some(speed) = args.clock.virtual_speed()? {
        builder = builder.virtual_clock(speed);
    }
    if let Some(start) = args.clock.start() {
        builder = builder.clock_start(start);
    }
    if let Some(seed) = args.clock.seed() {
        builder = builder.seed(seed);
    }
    args.etcd.check()?;
    if let Some((at, writable)) = args.etcd.listen() {
        builder = builder.etcd_listen(at, writable);
    }
    if let Some(storage) = args.storage.storage()? {
        builder = builder.etcd(storage);
    }
    if args.separate {
        builder = builder.separate(std::env::current_exe()?);
    }
    if let Some(file) = &args.restore {
        let data =
            std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
        builder = builder.restore(data);
    }
    let cluster = builder.start().map_err(|e| match e {
        Error::PortInUse { .. } => anyhow::anyhow!("{e}; choose another with --port"),
        e => e.into(),
    })?;
    println!("{}", usage(&args, &cluster));
    let signalled = runtime.block_on(async {
        tokio::select! {
            () = signals.recv() => true,
            () = cluster.stopped() => false,
        }
    });
    if signalled {
        eprintln!("stopping…");
    }
    cluster.stop()?;
    eprintln!(
        "✓ stopped; {} keeps every object for the next `miniplane up`",
        args.data_dir.display()
    );
    Ok(())
}

/// What to do next: point kubectl at the cluster, and something to try.
fn usage(args: &UpArgs, cluster: &Cluster) -> String {
    let kubeconfig = std::path::absolute(cluster.kubeconfig_path())
        .unwrap_or_else(|_| cluster.kubeconfig_path().to_owned());
    let dir = args.data_dir.display();
    let data_dir_flag = if args.data_dir == Path::new(".miniplane") {
        String::new()
    } else {
        format!(" --data-dir {dir}")
    };
    let mode = if args.separate {
        "each component in its own process"
    } else {
        "all components in this process"
    };
    let example = Path::new("examples/nginx-deployment.yaml");
    let apply = if example.exists() {
        format!("kubectl apply -f {}", example.display())
    } else {
        "kubectl create deployment nginx --image=nginx:1.27 --replicas=3".to_owned()
    };
    let mut text = format!(
        "
{READY}{url} with {nodes} nodes ({mode}; data in {dir}).

Point kubectl at it:
    export KUBECONFIG={kubeconfig}
or add the `miniplane` context to your kubeconfig:
    miniplane kubeconfig{data_dir_flag} --merge

Then try:
    kubectl get nodes
    {apply}
    kubectl get deploy,rs,pods -o wide
    kubectl scale deploy/nginx --replicas=5
    kubectl set image deploy/nginx nginx=nginx:1.28 && kubectl rollout status deploy/nginx
{top}{cloud}
Watch it in a browser: {ui_url}
  (the board, the objects, the events{traces}{trust})
",
        ui_url = cluster.ui_url(),
        trust = if args.secure {
            "; the browser warns about the cluster's own CA, pki/ca.crt in the data dir, until you trust it"
        } else {
            ""
        },
        traces = if args.trace.options().enabled {
            ", each trace"
        } else {
            ""
        },
        top = if args.metrics_server {
            "    kubectl top nodes; kubectl top pods   (after two scrapes of the metrics-server)
"
        } else {
            ""
        },
        cloud = if args.cloud {
            "    kubectl expose deploy/nginx --type LoadBalancer --port 80 && kubectl get svc nginx -w
    miniplane cloud instances; miniplane cloud load-balancers
"
        } else {
            ""
        },
        url = cluster.url(),
        nodes = args.nodes,
        kubeconfig = kubeconfig.display(),
    );
    if let Ok(Some(speed)) = args.clock.virtual_speed() {
        let pace = if speed == 0.0 {
            "paused".to_string()
        } else {
            format!("running at {speed}x")
        };
        text.push_str(&format!(
            "
The cluster runs on a virtual clock ({pace}): nothing that waits on time moves unless you move it.
    miniplane clock advance 5m        (or: miniplane clock run --speed 60; miniplane clock pause)
"
        ));
    }
    if let Some(etcd) = cluster.etcd_endpoint() {
        let mode =
            if args.etcd.listen().is_some_and(|(_, w)| w) || cluster.apiserver_urls().len() > 1 {
                "writable"
            } else {
                "read-only"
            };
        text.push_str(&format!(
            "
The store speaks etcd's v3 API on {etcd} ({mode}):
    ETCDCTL_API=3 etcdctl --endpoints {etcd} get --prefix /registry/ --keys-only
"
        ));
    }
    if let [_, others @ ..] = cluster.apiserver_urls()
        && !others.is_empty()
    {
        let list: Vec<String> = others
            .iter()
            .enumerate()
            .map(|(i, url)| {
                format!(
                    "    {url}   KUBECONFIG={dir}/apiserver-{n}/kubeconfig kubectl get nodes",
                    n = i + 1
                )
            })
            .collect();
        text.push_str(&format!(
            "
{count} API servers share {store}; the components use the first. The others:
{list}
",
            count = others.len() + 1,
            store = if args.storage.storage().ok().flatten().is_some() {
                "the etcd cluster"
            } else {
                "the first one's store, over its etcd endpoint"
            },
            list = list.join("\n"),
        ));
    }
    if args.separate {
        text.push_str(&format!(
            "
Each component is a process (pids above, logs in {dir}/logs). Kill one, and start it again
by hand, e.g. `miniplane controller-manager --kubeconfig {kubeconfig}`.
",
            kubeconfig = kubeconfig.display()
        ));
    }
    text.push_str(&format!(
        "
Ctrl-C stops every component; {dir} keeps the objects for the next `miniplane up`."
    ));
    text
}
