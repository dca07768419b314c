//! `miniplane cloud-controller-manager`: a cloud-controller-manager's flags (as
//! `k8s.io/cloud-provider/options` names them), the cloud named by `--cloud-config`, then
//! `cloud_controller_manager::CloudControllerManager::run` until Ctrl-C or SIGTERM.
//!
//! The only provider is `miniplane`, the simulated cloud (`docs/cloud.md`): its
//! `--cloud-config` file says where the cloud's API is (`miniplane up` writes
//! `<data-dir>/cloud/cloud-config.json`). Once the client is built and the health port bound
//! it prints one line on stdout: `miniplane cloud-controller-manager started (healthz and
//! metrics on http://127.0.0.1:PORT)`. Like Kubernetes' CCM it campaigns for the Lease
//! `kube-system/cloud-controller-manager` unless `--leader-elect=false`; `--secure-port`
//! (10258) is where `/healthz` is served, over plain HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::duration::parse_duration;
use cloud_controller_manager::config::{DEFAULT_PORT, LEASE_NAME};
use cloud_controller_manager::{CloudControllerManager, Config};

use super::flags::{LeaderElectArgs, health_address, manager_bind_error, serve_manager};

/// Flags of `miniplane cloud-controller-manager`.
#[derive(Debug, clap::Args)]
pub struct CloudControllerManagerArgs {
    /// Kubeconfig file with the API server's address.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides the kubeconfig's).
    #[arg(long, value_name = "URL")]
    master: Option<String>,
    /// The cloud provider: `miniplane`, the simulated cloud.
    #[arg(long, value_name = "NAME", default_value = "miniplane", value_parser = ["miniplane"])]
    cloud_provider: String,
    /// The cloud provider's configuration file (for `miniplane`: where the cloud's API is).
    #[arg(long, value_name = "FILE")]
    cloud_config: PathBuf,
    /// Controllers to run: `*`, a name, or `-name` (cloud-node, cloud-node-lifecycle, route,
    /// service).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// What this cluster's cloud resources are named after.
    #[arg(long, default_value = "kubernetes")]
    cluster_name: String,
    /// Nodes get pod CIDRs (from kube-controller-manager): routes are made for them.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    allocate_node_cidrs: bool,
    /// The range the Nodes' pod CIDRs come from; the route controller owns the routes in it.
    #[arg(long, value_name = "CIDR")]
    cluster_cidr: Option<String>,
    /// Make cloud routes for the Nodes' pod CIDRs (with --allocate-node-cidrs).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    configure_cloud_routes: bool,
    /// How often initialized Nodes' addresses are checked against the cloud.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    node_status_update_frequency: Duration,
    /// How often Nodes that are not Ready are looked up in the cloud.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    node_monitor_period: Duration,
    /// How often the routes are reconciled.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    route_reconciliation_period: Duration,
    /// Service workers.
    #[arg(long, default_value_t = 1)]
    concurrent_service_syncs: usize,
    /// Cloud node controller workers (Nodes initialized at once).
    #[arg(long, default_value_t = 1)]
    concurrent_node_syncs: usize,
    #[command(flatten)]
    leader_election: LeaderElectArgs,
    /// Port of /healthz and /metrics on 127.0.0.1 (0: not served).
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_PORT)]
    secure_port: u16,
    /// Address of /healthz and /metrics, overriding --secure-port (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Trace the work this component does and report spans to the API server's collector.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    tracing: bool,
}

fn config(args: &CloudControllerManagerArgs) -> anyhow::Result<Config> {
    let source = match (&args.master, &args.kubeconfig) {
        (Some(url), _) => client::ClusterSource::Url(url.clone()),
        (None, Some(path)) => client::ClusterSource::Kubeconfig(path.clone()),
        (None, None) => anyhow::bail!("one of --kubeconfig or --master is required"),
    };
    let mut config = Config::new(source);
    config.controllers =
        Config::parse_controllers(&args.controllers).map_err(anyhow::Error::msg)?;
    config.cluster_name.clone_from(&args.cluster_name);
    if args.allocate_node_cidrs {
        let Some(cidr) = &args.cluster_cidr else {
            anyhow::bail!("--cluster-cidr is required with --allocate-node-cidrs");
        };
        config.cluster_cidr = Some(
            cidr.parse()
                .map_err(|e| anyhow::anyhow!("--cluster-cidr: {e}"))?,
        );
    }
    config.configure_cloud_routes = args.configure_cloud_routes;
    config.node_status_update_frequency = args.node_status_update_frequency;
    config.node_monitor_period = args.node_monitor_period;
    config.route_reconciliation_period = args.route_reconciliation_period;
    config.concurrent_service_syncs = args.concurrent_service_syncs;
    config.concurrent_node_syncs = args.concurrent_node_syncs;
    config.listen = health_address(args.listen, args.secure_port);
    config.tracing = args.tracing;
    config.leader_election = args.leader_election.election(LEASE_NAME)?;
    Ok(config)
}

/// Runs the cloud-controller-manager until a shutdown signal.
pub fn main(args: CloudControllerManagerArgs) -> anyhow::Result<()> {
    let config = config(&args)?;
    let cloud = cloud::sim::HttpCloud::from_cloud_config(&args.cloud_config)
        .map_err(|e| anyhow::anyhow!("--cloud-config {}: {e}", args.cloud_config.display()))?;
    let runtime = super::client_runtime()?;
    runtime.block_on(async move {
        let listen = config.listen;
        let manager = CloudControllerManager::bind(config, Arc::new(cloud))
            .await
            .map_err(|e| manager_bind_error("cloud-controller-manager", listen, e))?;
        serve_manager(
            "cloud-controller-manager",
            manager.local_addr(),
            |shutdown| manager.run(shutdown),
        )
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
        args: CloudControllerManagerArgs,
    }

    fn parsed(flags: &[&str]) -> anyhow::Result<Config> {
        let cli = Cli::try_parse_from(
            [
                "cloud-controller-manager",
                "--master",
                "http://127.0.0.1:1",
                "--cloud-config",
                "/nonexistent",
            ]
            .iter()
            .chain(flags),
        )?;
        config(&cli.args)
    }

    #[test]
    fn flags_map_to_the_config_with_kubernetes_defaults() {
        let c = parsed(&[]).expect("defaults");
        assert_eq!(c.cluster_name, "kubernetes");
        assert_eq!(c.node_monitor_period, Duration::from_secs(5));
        assert_eq!(c.route_reconciliation_period, Duration::from_secs(10));
        assert!(
            c.leader_election.is_some(),
            "--leader-elect defaults to true"
        );
        assert!(!c.runs("route"), "no --allocate-node-cidrs");
        let c = parsed(&[
            "--allocate-node-cidrs",
            "--cluster-cidr",
            "10.244.0.0/16",
            "--controllers",
            "*,-cloud-node-lifecycle",
            "--leader-elect=false",
        ])
        .expect("valid");
        assert!(c.runs("route"));
        assert!(!c.runs("cloud-node-lifecycle"));
        assert!(c.leader_election.is_none());
        let err = |flags: &[&str]| parsed(flags).err().map(|e| e.to_string());
        assert_eq!(
            err(&["--allocate-node-cidrs"]).as_deref(),
            Some("--cluster-cidr is required with --allocate-node-cidrs")
        );
        assert!(err(&["--controllers", "bogus"]).is_some_and(|e| e.contains("bogus")));
    }
}
