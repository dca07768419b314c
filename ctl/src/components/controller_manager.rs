//! `miniplane controller-manager`: kube-controller-manager's flags, then
//! `controllers::manager::run` until Ctrl-C or SIGTERM.
//!
//! Once the client is built and the health port bound it prints one line on stdout:
//! `miniplane controller-manager started (healthz and metrics on http://127.0.0.1:PORT)`.
//! Like kube-controller-manager it campaigns for the Lease `kube-system/kube-controller-manager`
//! unless `--leader-elect=false` (a standby runs no controller), and exits non-zero with
//! `leaderelection lost` when it stops leading. `--secure-port` (10257) is where `/healthz`
//! is served, over plain HTTP ([`super::flags`]).

use apimachinery::duration::parse_duration;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use controllers::manager::{ApiServer, Config, ControllerManager, EnabledControllers};

use super::flags::{LeaderElectArgs, health_address, manager_bind_error, serve_manager};

/// Flags of `miniplane controller-manager` (named as kube-controller-manager's).
#[derive(Debug, clap::Args)]
pub struct ControllerManagerArgs {
    /// Kubeconfig file with the API server's address.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides the kubeconfig's server).
    #[arg(long, value_name = "URL")]
    master: Option<String>,
    /// Controllers to run: `*` for all, `name` to enable, `-name` to disable
    /// (deployment, replicaset, endpoint, endpointslice, garbagecollector, namespace,
    /// nodeipam, nodelifecycle, serviceaccount, clusterrole-aggregation,
    /// root-ca-cert-publisher, csrsigning, job, cronjob, horizontalpodautoscaling,
    /// ttl-after-finished, podgc, daemonset).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Deployment workers.
    #[arg(long, default_value_t = 5)]
    concurrent_deployment_syncs: usize,
    /// ReplicaSet workers.
    #[arg(long, default_value_t = 5)]
    concurrent_replicaset_syncs: usize,
    /// Job controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_job_syncs: usize,
    /// CronJob controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_cron_job_syncs: usize,
    /// DaemonSet controller workers.
    #[arg(long, default_value_t = 2)]
    concurrent_daemonset_syncs: usize,
    /// StatefulSet controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_statefulset_syncs: usize,
    /// TTL-after-finished controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_ttl_after_finished_syncs: usize,
    /// How often the horizontal pod autoscaler syncs each HorizontalPodAutoscaler.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    horizontal_pod_autoscaler_sync_period: Duration,
    /// Horizontal pod autoscaler workers.
    #[arg(long, default_value_t = 5)]
    concurrent_horizontal_pod_autoscaler_syncs: usize,
    /// Terminated pods the pod GC keeps before deleting the oldest (0: keep all).
    #[arg(long, default_value_t = 12_500)]
    terminated_pod_gc_threshold: usize,
    /// Endpoints controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_endpoint_syncs: usize,
    /// EndpointSlice controller workers.
    #[arg(long, default_value_t = 5)]
    concurrent_service_endpoint_syncs: usize,
    /// The most endpoints an EndpointSlice controller's slice holds.
    #[arg(long, default_value_t = controllers::endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE)]
    max_endpoints_per_slice: usize,
    /// How long the Endpoints controller joins pod changes before it syncs their Services
    /// (Kubernetes' default: 0s; see `controllers::manager::config::DEFAULT_ENDPOINT_BATCH_PERIOD`).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    endpoint_updates_batch_period: Duration,
    /// The same for the EndpointSlice controller.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    endpointslice_updates_batch_period: Duration,
    /// Garbage-collector workers.
    #[arg(long, default_value_t = 20)]
    concurrent_gc_syncs: usize,
    /// Namespace workers.
    #[arg(long, default_value_t = 10)]
    concurrent_namespace_syncs: usize,
    #[command(flatten)]
    leader_election: LeaderElectArgs,
    /// Each controller writes as its own ServiceAccount in kube-system (made, and given a
    /// token, by the manager), under the bootstrap policy's `system:controller:*` roles.
    #[arg(long)]
    use_service_account_credentials: bool,
    /// The CA (PEM) the root-ca-cert-publisher puts in every namespace's `kube-root-ca.crt`
    /// (by default the CA of the kubeconfig, if it has one).
    #[arg(long, value_name = "FILE")]
    root_ca_file: Option<PathBuf>,
    /// Client-side queries per second to the API server (no limit unless set; Kubernetes: 20).
    #[arg(long)]
    kube_api_qps: Option<f64>,
    /// Client-side burst (Kubernetes: 30; defaults to twice the QPS when only QPS is set).
    #[arg(long)]
    kube_api_burst: Option<u32>,
    /// Silence (no Lease renewal, no status) after which a node is marked Unknown.
    #[arg(long, value_parser = parse_duration, default_value = "40s")]
    node_monitor_grace_period: Duration,
    /// How often the node lifecycle controller checks nodes.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    node_monitor_period: Duration,
    /// Give every Node a pod CIDR from --cluster-cidr (the node IPAM controller).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    allocate_node_cidrs: bool,
    /// The range Nodes' pod CIDRs come from (with --allocate-node-cidrs).
    #[arg(long, value_name = "CIDR", default_value = controllers::node_ipam::DEFAULT_CLUSTER_CIDR)]
    cluster_cidr: String,
    /// The prefix length of each Node's pod CIDR.
    #[arg(long, default_value_t = controllers::node_ipam::DEFAULT_NODE_CIDR_MASK_SIZE)]
    node_cidr_mask_size: u8,
    /// The Services' range, kept out of the Nodes' pod CIDRs where they overlap.
    #[arg(long, value_name = "CIDR", default_value = "10.96.0.0/12")]
    service_cluster_ip_range: String,
    /// The CA certificate (PEM) the csrsigning controller signs approved
    /// CertificateSigningRequests with; the controller runs only with it and its key.
    #[arg(long, value_name = "FILE")]
    cluster_signing_cert_file: Option<std::path::PathBuf>,
    /// The CA's private key (PEM).
    #[arg(long, value_name = "FILE")]
    cluster_signing_key_file: Option<std::path::PathBuf>,
    /// The longest certificate the csrsigning controller issues.
    #[arg(long, value_parser = parse_duration, default_value = "8760h")]
    cluster_signing_duration: Duration,
    /// Port of /healthz and /metrics on 127.0.0.1 (0: not served).
    #[arg(long, value_name = "PORT", default_value_t = 10257)]
    secure_port: u16,
    /// Address of /healthz and /metrics, overriding --secure-port (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Trace the work this component does and report spans to the API server's collector
    /// (`--tracing=false` turns it off).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    tracing: bool,
}

fn config(args: ControllerManagerArgs) -> anyhow::Result<Config> {
    let api_server = match (args.master, args.kubeconfig) {
        (Some(url), _) => ApiServer::Master(url),
        (None, Some(path)) => ApiServer::Kubeconfig(path),
        (None, None) => anyhow::bail!("one of --kubeconfig or --master is required"),
    };
    let mut config = Config::new(api_server);
    config.controllers = EnabledControllers::parse(&args.controllers)?;
    config.concurrent_deployment_syncs = args.concurrent_deployment_syncs;
    config.concurrent_replicaset_syncs = args.concurrent_replicaset_syncs;
    config.concurrent_job_syncs = args.concurrent_job_syncs;
    config.concurrent_ttl_after_finished_syncs = args.concurrent_ttl_after_finished_syncs;
    config.concurrent_cron_job_syncs = args.concurrent_cron_job_syncs;
    config.horizontal_pod_autoscaler_sync_period = args.horizontal_pod_autoscaler_sync_period;
    config.concurrent_horizontal_pod_autoscaler_syncs =
        args.concurrent_horizontal_pod_autoscaler_syncs;
    config.concurrent_daemonset_syncs = args.concurrent_daemonset_syncs;
    config.concurrent_statefulset_syncs = args.concurrent_statefulset_syncs;
    config.pod_gc.terminated_pod_threshold = args.terminated_pod_gc_threshold;
    config.concurrent_endpoint_syncs = args.concurrent_endpoint_syncs;
    config.concurrent_service_endpoint_syncs = args.concurrent_service_endpoint_syncs;
    config.max_endpoints_per_slice = args.max_endpoints_per_slice;
    config.endpoint_updates_batch_period = args.endpoint_updates_batch_period;
    config.endpointslice_updates_batch_period = args.endpointslice_updates_batch_period;
    config.concurrent_gc_syncs = args.concurrent_gc_syncs;
    config.concurrent_namespace_syncs = args.concurrent_namespace_syncs;
    config.listen = health_address(args.listen, args.secure_port);
    config.tracing = args.tracing;
    config.node_lifecycle.node_monitor_grace_period = args.node_monitor_grace_period;
    config.node_lifecycle.node_monitor_period = args.node_monitor_period;
    config.rate_limit = match (args.kube_api_qps, args.kube_api_burst) {
        (None, None) => None,
        (qps, burst) => {
            let qps = qps.unwrap_or(client::RateLimit::CONTROLLER_MANAGER.qps);
            Some(client::RateLimit {
                qps,
                burst: burst.unwrap_or((qps * 2.0).ceil() as u32),
            })
        }
    };
    if args.allocate_node_cidrs {
        let parse = |flag: &str, value: &str| {
            value
                .parse::<apimachinery::Ipv4Cidr>()
                .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        let ipam = controllers::node_ipam::Config {
            cluster_cidr: parse("cluster-cidr", &args.cluster_cidr)?,
            node_cidr_mask_size: args.node_cidr_mask_size,
            service_cidr: Some(parse(
                "service-cluster-ip-range",
                &args.service_cluster_ip_range,
            )?),
        };
        ipam.validate().map_err(anyhow::Error::msg)?;
        config.node_ipam = Some(ipam);
    }
    config.cluster_signing = match (
        args.cluster_signing_cert_file,
        args.cluster_signing_key_file,
    ) {
        (Some(cert_file), Some(key_file)) => {
            Some(controllers::csrsigning::controller::SigningConfig {
                cert_file,
                key_file,
                duration: args.cluster_signing_duration,
            })
        }
        (None, None) => None,
        _ => {
            anyhow::bail!("--cluster-signing-cert-file and --cluster-signing-key-file go together")
        }
    };
    config.use_service_account_credentials = args.use_service_account_credentials;
    config.root_ca_file = args.root_ca_file;
    config.leader_election = args
        .leader_election
        .election(controllers::manager::config::LEASE_NAME)?;
    Ok(config)
}

/// Runs the controller-manager until a shutdown signal.
pub fn main(args: ControllerManagerArgs) -> anyhow::Result<()> {
    let config = config(args)?;
    let runtime = super::client_runtime()?;
    runtime.block_on(async move {
        let listen = config.listen;
        let manager = ControllerManager::bind(config)
            .await
            .map_err(|e| manager_bind_error("controller-manager", listen, e))?;
        serve_manager("controller-manager", manager.local_addr(), |shutdown| {
            manager.run(shutdown)
        })
        .await
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerManagerArgs,
    }

    fn parsed(flags: &[&str]) -> Config {
        let cli = Cli::try_parse_from(
            ["controller-manager", "--master", "http://127.0.0.1:1"]
                .iter()
                .chain(flags),
        )
        .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        config(cli.args).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
    }

    #[test]
    fn endpoint_batch_periods_default_to_a_second_and_take_go_durations() {
        let c = parsed(&[]);
        assert_eq!(
            c.endpoint_updates_batch_period,
            controllers::manager::config::DEFAULT_ENDPOINT_BATCH_PERIOD
        );
        assert_eq!(c.endpointslice_updates_batch_period, Duration::from_secs(1));
        let c = parsed(&[
            "--endpoint-updates-batch-period",
            "0s",
            "--endpointslice-updates-batch-period",
            "250ms",
        ]);
        assert_eq!(c.endpoint_updates_batch_period, Duration::ZERO);
        assert_eq!(
            c.endpointslice_updates_batch_period,
            Duration::from_millis(250)
        );
        let bad =
            Cli::try_parse_from(["controller-manager", "--endpoint-updates-batch-period", "3"]);
        assert!(bad.is_err_and(|e| e.to_string().contains("missing unit")));
    }

    #[test]
    fn csr_signing_runs_with_both_files_and_a_year_by_default() {
        assert_eq!(parsed(&[]).cluster_signing, None);
        let signing = parsed(&[
            "--cluster-signing-cert-file",
            "ca.crt",
            "--cluster-signing-key-file",
            "ca.key",
        ])
        .cluster_signing
        .expect("on");
        assert_eq!(signing.cert_file, std::path::PathBuf::from("ca.crt"));
        assert_eq!(signing.duration, Duration::from_secs(8760 * 3600));
        let cli = Cli::try_parse_from([
            "controller-manager",
            "--master",
            "http://127.0.0.1:1",
            "--cluster-signing-cert-file",
            "ca.crt",
        ])
        .expect("parses");
        assert!(config(cli.args).is_err());
    }

    #[test]
    fn node_ipam_runs_only_with_allocate_node_cidrs_and_checks_its_flags() {
        assert_eq!(parsed(&[]).node_ipam, None);
        let ipam = parsed(&["--allocate-node-cidrs", "--cluster-cidr", "10.200.0.0/14"])
            .node_ipam
            .expect("on");
        assert_eq!(ipam.cluster_cidr.to_string(), "10.200.0.0/14");
        assert_eq!(ipam.node_cidr_mask_size, 24);
        assert_eq!(
            ipam.service_cidr.map(|c| c.to_string()).as_deref(),
            Some("10.96.0.0/12")
        );
        let cli = Cli::try_parse_from([
            "controller-manager",
            "--master",
            "http://127.0.0.1:1",
            "--allocate-node-cidrs=true",
            "--cluster-cidr",
            "10.244.0.0",
        ])
        .expect("parses");
        assert_eq!(
            config(cli.args).map_err(|e| e.to_string()).err().as_deref(),
            Some("--cluster-cidr: invalid CIDR address: 10.244.0.0")
        );
    }
}
