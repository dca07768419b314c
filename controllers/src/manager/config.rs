//! The controller-manager's configuration: kube-controller-manager's flags as a struct.
//!
//! Mirrors `cmd/kube-controller-manager/app/options/options.go` and the defaults in
//! `pkg/controller/*/config/v1alpha1/defaults.go`. The `ctl` binary maps clap flags onto
//! [`Config`]; tests and `miniplane up` build it directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use client::RateLimit;

use crate::error::{Error, Result};

/// The controllers this process knows, by their `--controllers` names.
pub const KNOWN_CONTROLLERS: [&str; 23] = [
    "deployment",
    "replicaset",
    "replicationcontroller",
    "disruption",
    "endpoint",
    "endpointslice",
    "garbagecollector",
    "namespace",
    "nodeipam",
    "nodelifecycle",
    "serviceaccount",
    "clusterrole-aggregation",
    "root-ca-cert-publisher",
    "csrsigning",
    "job",
    "cronjob",
    "horizontalpodautoscaling",
    "ttl-after-finished",
    "podgc",
    "daemonset",
    "statefulset",
    "persistentvolume-binder",
    "simulated-provisioner",
];

/// Which controllers run: kube-controller-manager's `--controllers` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnabledControllers {
    enabled: Vec<&'static str>,
}

impl EnabledControllers {
    /// Every known controller (`--controllers=*`).
    pub fn all() -> Self {
        EnabledControllers {
            enabled: KNOWN_CONTROLLERS.to_vec(),
        }
    }

    /// Parses a `--controllers` list: `*` enables every controller that is on by default,
    /// `name` enables one, `-name` disables one (`*,-namespace`). Unknown names are an error.
    pub fn parse(list: &[String]) -> Result<Self> {
        let mut enabled: Vec<&'static str> = Vec::new();
        let mut disabled: Vec<&'static str> = Vec::new();
        let mut star = false;
        for item in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
                continue;
            }
            let (name, off) = match item.strip_prefix('-') {
                Some(name) => (name, true),
                None => (item, false),
            };
            let Some(known) = KNOWN_CONTROLLERS.iter().find(|k| **k == name) else {
                return Err(Error::Config(format!(
                    "{name:?} is not in the list of known controllers ({})",
                    KNOWN_CONTROLLERS.join(", ")
                )));
            };
            if off {
                disabled.push(known);
            } else {
                enabled.push(known);
            }
        }
        let enabled = KNOWN_CONTROLLERS
            .iter()
            .copied()
            .filter(|c| (star || enabled.contains(c)) && !disabled.contains(c))
            .collect();
        Ok(EnabledControllers { enabled })
    }

    /// Whether `name` runs.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.enabled.contains(&name)
    }

    /// The enabled names, in start order.
    pub fn names(&self) -> &[&'static str] {
        &self.enabled
    }
}

/// Leader election settings (`--leader-elect-*`), shared with the scheduler; the Lease is
/// `kube-system/kube-controller-manager` ([`Config::leader_election_for_controller_manager`]).
pub use client::LeaderElection;

/// The Lease kube-controller-manager campaigns for, in `kube-system`.
pub const LEASE_NAME: &str = "kube-controller-manager";

/// `--endpoint-updates-batch-period` and `--endpointslice-updates-batch-period` unless set.
///
/// Kubernetes' default is 0: every pod change syncs the Services selecting the pod at once.
/// Each sync reads all of a Service's pods, so while pods keep changing the two controllers
/// sync back to back; on nodes that start pods as fast as the simulated kubelets do, a Service
/// over a 10,000-replica Deployment then kept both cores busy and stretched the rollout from
/// 7.4 s to 77-100 s (`docs/benchmarks.md`, "Apply to Running at scale"). Joining a Service's
/// pod changes for this long bounds it to a sync per period; Service changes still sync at
/// once. `--endpoint-updates-batch-period 0` gives Kubernetes' timing.
pub const DEFAULT_ENDPOINT_BATCH_PERIOD: Duration = Duration::from_secs(1);

/// Where the API server is: `--kubeconfig` and/or `--master` (which overrides the
/// kubeconfig's server, as in Kubernetes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiServer {
    /// A kubeconfig file.
    Kubeconfig(PathBuf),
    /// A URL.
    Master(String),
}

/// Everything `run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the API server is.
    pub api_server: ApiServer,
    /// `--controllers`.
    pub controllers: EnabledControllers,
    /// `--concurrent-deployment-syncs` (5).
    pub concurrent_deployment_syncs: usize,
    /// `--concurrent-replicaset-syncs` (5).
    pub concurrent_replicaset_syncs: usize,
    /// `--concurrent-rc-syncs` (5): the replication manager's workers.
    pub concurrent_rc_syncs: usize,
    /// `--concurrent-job-syncs` (5).
    pub concurrent_job_syncs: usize,
    /// `--concurrent-cron-job-syncs` (5).
    pub concurrent_cron_job_syncs: usize,
    /// `--concurrent-daemonset-syncs` (2).
    pub concurrent_daemonset_syncs: usize,
    /// `--concurrent-statefulset-syncs` (5).
    pub concurrent_statefulset_syncs: usize,
    /// `--concurrent-ttl-after-finished-syncs` (5).
    pub concurrent_ttl_after_finished_syncs: usize,
    /// `--horizontal-pod-autoscaler-sync-period` (15 s): how often each HorizontalPodAutoscaler
    /// is synced.
    pub horizontal_pod_autoscaler_sync_period: Duration,
    /// `--concurrent-horizontal-pod-autoscaler-syncs` (5).
    pub concurrent_horizontal_pod_autoscaler_syncs: usize,
    /// The pod GC's settings: `--terminated-pod-gc-threshold` (12,500; 0 disables that
    /// pass) and its check period and node quarantine (Kubernetes' constants, 20 s and 40 s;
    /// shorter on clusters with fast node lifecycle).
    pub pod_gc: crate::podgc::Config,
    /// `--concurrent-endpoint-syncs` (5).
    pub concurrent_endpoint_syncs: usize,
    /// `--concurrent-service-endpoint-syncs` (5): the EndpointSlice controller's workers.
    pub concurrent_service_endpoint_syncs: usize,
    /// `--max-endpoints-per-slice` (100).
    pub max_endpoints_per_slice: usize,
    /// `--endpoint-updates-batch-period`: how long a pod change waits to be joined with
    /// others before the Endpoints controller syncs its Services ([`DEFAULT_ENDPOINT_BATCH_PERIOD`]).
    pub endpoint_updates_batch_period: Duration,
    /// `--endpointslice-updates-batch-period`: the same for the EndpointSlice controller.
    pub endpointslice_updates_batch_period: Duration,
    /// `--concurrent-gc-syncs` (20).
    pub concurrent_gc_syncs: usize,
    /// `--concurrent-namespace-syncs` (10).
    pub concurrent_namespace_syncs: usize,
    /// `--use-service-account-credentials`: each controller writes as its own ServiceAccount
    /// in `kube-system` (`system:serviceaccount:kube-system:deployment-controller`, ...), which
    /// the bootstrap policy's `system:controller:*` roles are bound to; the manager's own
    /// identity only reads and asks for the tokens. Off in [`Config::new`].
    pub use_service_account_credentials: bool,
    /// `--leader-elect`: run the controllers only while holding the Lease
    /// `kube-system/kube-controller-manager`. `None` in [`Config::new`] (a library user with
    /// one controller-manager needs no Lease); the `controller-manager` subcommand and
    /// `miniplane up` turn it on, as Kubernetes does by default.
    pub leader_election: Option<LeaderElection>,
    /// `--kube-api-qps` / `--kube-api-burst`; `None`: no client-side limit (Kubernetes: 20/30).
    pub rate_limit: Option<RateLimit>,
    /// Where `/healthz` and `/metrics` are served (`--secure-port`, here plain HTTP); port 0
    /// picks a free port. `None`: not served.
    pub listen: Option<SocketAddr>,
    /// `--node-monitor-grace-period` / `--node-monitor-period` of the node lifecycle
    /// controller.
    pub node_lifecycle: crate::node_lifecycle::Config,
    /// `--allocate-node-cidrs` with `--cluster-cidr`, `--node-cidr-mask-size` and
    /// `--service-cluster-ip-range`: the node IPAM controller's settings. `None` (Kubernetes'
    /// default, `--allocate-node-cidrs=false`): the `nodeipam` controller does not start even
    /// when enabled, as in kube-controller-manager.
    pub node_ipam: Option<crate::node_ipam::Config>,
    /// `--root-ca-file`: the CA the `root-ca-cert-publisher` publishes in every namespace's
    /// `kube-root-ca.crt`; `None`: the CA of the kubeconfig (none with `--master`).
    pub root_ca_file: Option<PathBuf>,
    /// `--cluster-signing-cert-file`, `--cluster-signing-key-file` and
    /// `--cluster-signing-duration`: the CA the `csrsigning` controller signs approved
    /// CertificateSigningRequests with. `None` (no files given): the controller does not
    /// start, as in kube-controller-manager.
    pub cluster_signing: Option<crate::csrsigning::controller::SigningConfig>,
    /// `--tracing`: continue the traces of the objects the controllers react to and report
    /// spans to the API server's collector (on by default).
    pub tracing: bool,
}

impl Config {
    /// Leader election with Kubernetes' timing for the Lease `kube-system/kube-controller-manager`.
    pub fn leader_election_for_controller_manager() -> LeaderElection {
        LeaderElection::new(LEASE_NAME)
    }

    /// Kubernetes' defaults for the API server at `api_server`.
    pub fn new(api_server: ApiServer) -> Self {
        Config {
            api_server,
            controllers: EnabledControllers::all(),
            concurrent_deployment_syncs: 5,
            concurrent_replicaset_syncs: 5,
            concurrent_rc_syncs: 5,
            concurrent_job_syncs: 5,
            concurrent_cron_job_syncs: 5,
            concurrent_daemonset_syncs: 2,
            concurrent_statefulset_syncs: 5,
            concurrent_ttl_after_finished_syncs: 5,
            horizontal_pod_autoscaler_sync_period:
                crate::podautoscaler::controller::DEFAULT_SYNC_PERIOD,
            concurrent_horizontal_pod_autoscaler_syncs: 5,
            pod_gc: crate::podgc::Config::default(),
            concurrent_endpoint_syncs: 5,
            concurrent_service_endpoint_syncs: 5,
            max_endpoints_per_slice: crate::endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE,
            endpoint_updates_batch_period: DEFAULT_ENDPOINT_BATCH_PERIOD,
            endpointslice_updates_batch_period: DEFAULT_ENDPOINT_BATCH_PERIOD,
            concurrent_gc_syncs: 20,
            concurrent_namespace_syncs: 10,
            use_service_account_credentials: false,
            leader_election: None,
            rate_limit: None,
            listen: None,
            node_lifecycle: crate::node_lifecycle::Config::default(),
            node_ipam: None,
            root_ca_file: None,
            cluster_signing: None,
            tracing: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<&'static str>> {
        EnabledControllers::parse(&[s.to_string()]).map(|c| c.names().to_vec())
    }

    #[test]
    fn controllers_flag() {
        assert_eq!(parse("*").unwrap_or_default(), KNOWN_CONTROLLERS.to_vec());
        assert_eq!(
            parse("*,-namespace").unwrap_or_default(),
            vec![
                "deployment",
                "replicaset",
                "replicationcontroller",
                "disruption",
                "endpoint",
                "endpointslice",
                "garbagecollector",
                "nodeipam",
                "nodelifecycle",
                "serviceaccount",
                "clusterrole-aggregation",
                "root-ca-cert-publisher",
                "csrsigning",
                "job",
                "cronjob",
                "horizontalpodautoscaling",
                "ttl-after-finished",
                "podgc",
                "daemonset",
                "statefulset",
                "persistentvolume-binder",
                "simulated-provisioner"
            ]
        );
        assert_eq!(parse("replicaset").unwrap_or_default(), vec!["replicaset"]);
        assert!(parse("*,bogus").is_err());
    }
}
