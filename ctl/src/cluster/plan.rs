//! What a cluster starts, whichever way it runs its components: the [`Plan`] (which
//! components, how many nodes, the port, tracing) and the simulated kubelets' settings
//! ([`KubeletProfile`], [`KubeletOptions`]). Both launchers (`in_process`, `separate`) and
//! the component restarts (`component_faults`) read it; it imports none of them.

use std::collections::BTreeMap;

use apiserver::TracingOptions;

/// The components and settings of a cluster being started.
#[derive(Clone)]
pub(crate) struct Plan {
    /// Simulated nodes (no kubelet process or task if 0).
    pub(crate) nodes: usize,
    /// Whether the controller-manager runs.
    pub(crate) controller_manager: bool,
    /// Whether the scheduler runs.
    pub(crate) scheduler: bool,
    /// Whether the controller-manager and the scheduler campaign for their Leases
    /// (`--leader-elect`).
    pub(crate) leader_elect: bool,
    /// Where the API server's `componentstatuses` probes the components' `/healthz`.
    pub(crate) component_probes: apiserver::ComponentProbes,
    /// The API server's port on 127.0.0.1 (0: a free one).
    pub(crate) port: u16,
    /// Whether a write is acknowledged only once it is on disk.
    pub(crate) fsync: bool,
    /// How much history the embedded store keeps (`--store-history-window`,
    /// `--store-history-revisions`).
    pub(crate) history: apiserver::HistoryRetention,
    /// Heartbeats every 200 ms and a 2 s node-monitor grace period (labs and tests of node
    /// failure), instead of Kubernetes' 10 s and 40 s.
    pub(crate) fast_node_lifecycle: bool,
    /// The API server's tracing settings; with `enabled` off the other components report no
    /// spans either.
    pub(crate) tracing: TracingOptions,
    /// How the simulated kubelets run pods and what their nodes look like.
    pub(crate) kubelet: KubeletOptions,
    /// The controller-manager's node IPAM settings (`--allocate-node-cidrs`): when set, the
    /// kubelets take their nodes' pod CIDRs from their Nodes. Decided for the whole cluster
    /// ([`node_ipam_for`]), so a restarted component keeps it.
    pub(crate) node_ipam: Option<controllers::node_ipam::Config>,
    /// The simulated cloud the nodes run on: when set, its cloud-controller-manager runs and
    /// the kubelets register as `--cloud-provider=external` ones.
    pub(crate) cloud: Option<super::cloud::CloudPlan>,
    /// HTTPS with the cluster's PKI, client certificates per component and RBAC
    /// ([`super::pki`]); plain HTTP with every request allowed otherwise.
    pub(crate) secure: bool,
    /// How a secure cluster's API server authorizes (`--authorization-mode`): RBAC unless
    /// asked otherwise; a plain-HTTP cluster allows every request.
    pub(crate) authorization_mode: apiserver::AuthorizationMode,
    /// The metrics-server, with its `--metric-resolution`, when it runs.
    pub(crate) metrics_server: Option<std::time::Duration>,
    /// The controller-manager's `--horizontal-pod-autoscaler-sync-period` when not the default
    /// 15 s.
    pub(crate) hpa_sync_period: Option<std::time::Duration>,
    /// The store's etcd v3 endpoint (`miniplane apiserver --etcd-listen`), if served, and
    /// whether etcd clients may write through it.
    pub(crate) etcd_listen: Option<(std::net::SocketAddr, bool)>,
    /// The etcd cluster the objects live in, instead of the embedded store.
    pub(crate) etcd: Option<apiserver::EtcdStorage>,
    /// How many API servers serve the cluster: on [`Plan::etcd`], or else on the first one's
    /// embedded store, which it serves to the others over etcd's API ([`Plan::share_store`]).
    pub(crate) apiservers: usize,
    /// Start the cluster on a virtual clock at this speed (0: paused) unless it has one
    /// (`--clock virtual`, `--clock-speed`); `None`: the clock it has.
    pub(crate) virtual_clock: Option<f64>,
    /// The time a new virtual clock starts at (`--clock-start`); `None`: the machine's.
    pub(crate) clock_start: Option<jiff::Timestamp>,
    /// The seed of generated names, UIDs and the scheduler's tie-breaks (`--seed`); `None`:
    /// random.
    pub(crate) seed: Option<u64>,
}

/// Refuses an API server count the cluster cannot run (none).
pub(crate) fn check_apiservers(plan: &Plan) -> crate::error::Result<()> {
    if plan.apiservers == 0 {
        return Err(crate::error::Error::component(
            crate::progress::Component::ApiServer,
            "--apiservers must be at least 1",
        ));
    }
    Ok(())
}

impl Plan {
    /// Whether the first API server's embedded store is the others' etcd: several API servers
    /// and no etcd cluster. Then the first serves its store over etcd's API, writable (on
    /// `--etcd-listen`'s address if given, else a free port; [`Plan::share_store`]).
    pub(crate) fn shares_store(&self) -> bool {
        self.apiservers > 1 && self.etcd.is_none()
    }

    /// Makes the first API server serve its store writable for the others when
    /// [`Plan::shares_store`].
    pub(crate) fn share_store(&mut self) {
        if self.shares_store() {
            let at = self.etcd_listen.map_or_else(
                || std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
                |(at, _)| at,
            );
            self.etcd_listen = Some((at, true));
        }
    }

    /// The plan of API servers 1, 2, ...: the first one's, with the etcd cluster they share
    /// (the first's store at `endpoint` when [`Plan::shares_store`], never compacted by them:
    /// the store compacts itself).
    pub(crate) fn for_replicas(&self, endpoint: Option<std::net::SocketAddr>) -> Plan {
        let mut plan = self.clone();
        if let (true, Some(endpoint)) = (self.shares_store(), endpoint) {
            let mut storage = apiserver::EtcdStorage::new([format!("http://{endpoint}")]);
            storage.compaction_interval = std::time::Duration::ZERO;
            plan.etcd = Some(storage);
        }
        plan
    }

    /// The port of API server `replica`: the plan's port plus `replica` (6443, 6444, ...), or
    /// a free one when the plan's port is 0.
    pub(crate) fn apiserver_port(&self, replica: usize) -> crate::error::Result<u16> {
        if self.port == 0 {
            return Ok(0);
        }
        u16::try_from(replica)
            .ok()
            .and_then(|r| self.port.checked_add(r))
            .ok_or_else(|| {
                crate::error::Error::component(
                    crate::progress::Component::ApiServer,
                    format!(
                        "no port for API server {replica}: {} + {replica} is past 65535",
                        self.port
                    ),
                )
            })
    }
}

/// The cloud-controller-manager's `--concurrent-node-syncs` for a cluster of `nodes` nodes:
/// Kubernetes' default of one worker up to 256 nodes, one more per 256 nodes after, at most 16.
/// One worker initializes a Node in about 3 ms (an instance lookup and two writes, each waiting
/// for its own sync to disk): 30 s for 10,000 Nodes. Workers side by side share the syncs.
pub(crate) fn ccm_node_syncs(nodes: usize) -> usize {
    nodes.div_ceil(256).clamp(1, 16)
}

/// The node IPAM settings of a cluster of `nodes` nodes: kind's `10.244.0.0/16` in /24 blocks,
/// widened for clusters of more than 256 nodes to the smallest range around it with a /24 per
/// node (`10.244.0.0/14` for 1,024 nodes, `10.192.0.0/10` for 16,384), which stays clear of
/// the Services' `10.96.0.0/12`.
pub(crate) fn node_ipam_for(nodes: usize) -> controllers::node_ipam::Config {
    let blocks = nodes.max(1).div_ceil(256).next_power_of_two();
    let prefix = 16u8.saturating_sub(blocks.trailing_zeros() as u8).max(9);
    controllers::node_ipam::Config {
        cluster_cidr: apimachinery::Ipv4Cidr::new(std::net::Ipv4Addr::new(10, 244, 0, 0), prefix)
            .unwrap_or_else(|| unreachable!("prefixes 9 to 16 are valid")),
        node_cidr_mask_size: controllers::node_ipam::DEFAULT_NODE_CIDR_MASK_SIZE,
        service_cidr: "10.96.0.0/12".parse().ok(),
    }
}

/// How fast the simulated kubelets move a pod through its stages: `miniplane kubelet
/// --profile` ([`kubelet_sim::StageConfig::fast`] and [`kubelet_sim::StageConfig::realistic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KubeletProfile {
    /// No delays: a pod is Running as soon as it is bound (tests; the library's default).
    #[default]
    Fast,
    /// About what a laptop's kubelet shows: a 1.2 s image pull, 0.3 s to start the container,
    /// Kubernetes' back-off (`miniplane up`'s default).
    Realistic,
}

impl KubeletProfile {
    /// Its name, as `miniplane kubelet --profile` and `miniplane up --kubelet-profile` take it.
    pub fn name(self) -> &'static str {
        match self {
            KubeletProfile::Fast => "fast",
            KubeletProfile::Realistic => "realistic",
        }
    }

    /// The stage timing it stands for.
    pub fn stages(self) -> kubelet_sim::StageConfig {
        match self {
            KubeletProfile::Fast => kubelet_sim::StageConfig::fast(),
            KubeletProfile::Realistic => kubelet_sim::StageConfig::realistic(),
        }
    }
}

impl std::str::FromStr for KubeletProfile {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "fast" => Ok(KubeletProfile::Fast),
            "realistic" => Ok(KubeletProfile::Realistic),
            other => Err(format!(
                "unknown kubelet profile {other:?} (fast, realistic)"
            )),
        }
    }
}

/// The simulated kubelets' settings a cluster passes on (in this process, or as the flags of
/// `miniplane kubelet`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KubeletOptions {
    /// Pod stage timing (`--profile`).
    pub(crate) profile: KubeletProfile,
    /// Each node's `cpu` capacity and allocatable, a quantity (`--cpu`; the kubelet's default
    /// if unset).
    pub(crate) cpu: Option<String>,
    /// Each node's `memory` capacity and allocatable, a quantity (`--memory`).
    pub(crate) memory: Option<String>,
    /// Extra labels on every node (`--node-labels`).
    pub(crate) labels: BTreeMap<String, String>,
    /// Register the nodes for a cloud-controller-manager to initialize
    /// (`--cloud-provider=external`).
    pub(crate) external_cloud: bool,
    /// The kubelet API's port on 127.0.0.1 (`--kubelet-port`): 0 for a free one (the
    /// default), none to serve no kubelet API.
    pub(crate) api_port: Option<u16>,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            profile: KubeletProfile::default(),
            cpu: None,
            memory: None,
            labels: BTreeMap::new(),
            external_cloud: false,
            api_port: Some(0),
        }
    }
}

impl KubeletOptions {
    /// Applies these settings to a simulator's configuration.
    pub(crate) fn apply_to(&self, config: &mut kubelet_sim::Config) {
        config.stages = self.profile.stages();
        if let Some(cpu) = &self.cpu {
            config.capacity.cpu = cpu.clone();
        }
        if let Some(memory) = &self.memory {
            config.capacity.memory = memory.clone();
        }
        config.labels.extend(self.labels.clone());
        config.cloud_provider_external = self.external_cloud;
        config.kubelet_listen = self
            .api_port
            .map(|port| std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)));
    }

    /// The same settings as flags of `miniplane kubelet`.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = vec!["--profile".to_owned(), self.profile.name().to_owned()];
        if let Some(cpu) = &self.cpu {
            args.extend(["--cpu".to_owned(), cpu.clone()]);
        }
        if let Some(memory) = &self.memory {
            args.extend(["--memory".to_owned(), memory.clone()]);
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            args.extend(["--node-labels".to_owned(), labels.join(",")]);
        }
        if self.external_cloud {
            args.extend(["--cloud-provider".to_owned(), "external".to_owned()]);
        }
        match self.api_port {
            Some(0) => {}
            Some(port) => args.extend(["--kubelet-port".to_owned(), port.to_string()]),
            None => args.extend(["--kubelet-port".to_owned(), "off".to_owned()]),
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_api_is_on_a_free_port_unless_told_otherwise() {
        let mut options = KubeletOptions::default();
        let mut config =
            kubelet_sim::Config::new(client::ClusterSource::Url("http://127.0.0.1:1".into()), 1);
        options.apply_to(&mut config);
        assert_eq!(
            config.kubelet_listen,
            Some(std::net::SocketAddr::from((
                std::net::Ipv4Addr::LOCALHOST,
                0
            )))
        );
        assert!(!options.args().contains(&"--kubelet-port".to_owned()));
        options.api_port = Some(10250);
        options.apply_to(&mut config);
        assert_eq!(config.kubelet_listen.map(|a| a.port()), Some(10250));
        assert!(
            options
                .args()
                .ends_with(&["--kubelet-port".to_owned(), "10250".to_owned()])
        );
        options.api_port = None;
        options.apply_to(&mut config);
        assert_eq!(config.kubelet_listen, None);
        assert!(
            options
                .args()
                .ends_with(&["--kubelet-port".to_owned(), "off".to_owned()])
        );
    }

    #[test]
    fn the_cloud_node_workers_grow_with_the_nodes_from_kubernetes_default() {
        let workers: Vec<usize> = [0, 3, 256, 257, 1000, 4096, 10_000]
            .into_iter()
            .map(ccm_node_syncs)
            .collect();
        assert_eq!(workers, [1, 1, 1, 2, 4, 16, 16]);
    }

    #[test]
    fn the_cluster_cidr_grows_with_the_nodes_and_avoids_the_service_range() {
        let cidr = |n| node_ipam_for(n).cluster_cidr.to_string();
        assert_eq!(cidr(3), "10.244.0.0/16");
        assert_eq!(cidr(256), "10.244.0.0/16");
        assert_eq!(cidr(257), "10.244.0.0/15");
        assert_eq!(cidr(1000), "10.244.0.0/14");
        assert_eq!(cidr(10_000), "10.192.0.0/10");
        let service: apimachinery::Ipv4Cidr = "10.96.0.0/12".parse().expect("cidr");
        for n in [1, 1000, 10_000, 30_000] {
            let c = node_ipam_for(n);
            assert!(c.validate().is_ok());
            assert!(c.cluster_cidr.subnet_count(24) >= n as u64, "{n} nodes");
            assert!(
                !c.cluster_cidr.overlaps(&service),
                "{n} nodes: {}",
                c.cluster_cidr
            );
        }
    }
}
