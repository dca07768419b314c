//! `miniplane scheduler`: flags, connect, serve `/healthz` and `/metrics`, schedule until
//! Ctrl-C or SIGTERM.
//!
//! Prints `miniplane scheduler started (scheduler-name default-scheduler[, metrics on
//! http://ADDR])` once the metrics port is bound and the scheduler task runs. As
//! kube-scheduler it serves `/healthz` on `--secure-port` (10259, plain HTTP here), campaigns
//! for the Lease `kube-system/kube-scheduler` unless `--leader-elect=false` (a standby binds
//! no pod), and exits non-zero with `leaderelection lost` when another takes the Lease.

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::flags::{LeaderElectArgs, bind_error, health_address};

/// Flags of `miniplane scheduler`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("cluster").required(true).args(["kubeconfig", "master"])))]
pub struct SchedulerArgs {
    /// Kubeconfig of the cluster (its current context).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// API server URL, e.g. http://127.0.0.1:6443 (overrides the kubeconfig).
    #[arg(long, value_name = "URL")]
    master: Option<String>,
    /// Schedule only pods whose spec.schedulerName is this.
    #[arg(long, default_value = "default-scheduler")]
    scheduler_name: String,
    /// Client-side request rate limit (unset: no limit; kube-scheduler's default is 50).
    #[arg(long, value_name = "QPS")]
    kube_api_qps: Option<f64>,
    /// Requests allowed in a burst with --kube-api-qps (kube-scheduler's default: 100).
    #[arg(long, value_name = "N", default_value_t = 100)]
    kube_api_burst: u32,
    /// Port of /healthz and /metrics on 127.0.0.1 (0: not served).
    #[arg(long, value_name = "PORT", default_value_t = 10259)]
    secure_port: u16,
    /// Address of /healthz and /metrics, overriding --secure-port (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    #[command(flatten)]
    leader_election: LeaderElectArgs,
    /// Seed of the tie-breaking RNG (default: random).
    #[arg(long)]
    seed: Option<u64>,
    /// Trace the work this component does and report spans to the API server's collector
    /// (`--tracing=false` turns it off).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    tracing: bool,
}

/// Runs the scheduler until a shutdown signal.
pub fn main(args: SchedulerArgs) -> anyhow::Result<()> {
    let runtime = super::client_runtime()?;
    runtime.block_on(async move {
        let source = match (args.master, args.kubeconfig) {
            (Some(url), _) => client::ClusterSource::Url(url),
            (None, Some(path)) => client::ClusterSource::Kubeconfig(path),
            (None, None) => anyhow::bail!("one of --kubeconfig or --master is required"),
        };
        let mut client = client::ClientConfig::new(source).tracing(args.tracing);
        if let Some(qps) = args.kube_api_qps {
            client = client.rate_limit(client::RateLimit {
                qps,
                burst: args.kube_api_burst,
            });
        }
        let leader_election = args
            .leader_election
            .election(scheduler::scheduler::LEASE_NAME)?;
        let listener = match health_address(args.listen, args.secure_port) {
            Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                let in_use = e.kind() == std::io::ErrorKind::AddrInUse;
                bind_error("scheduler", addr, in_use, &e.to_string())
            })?),
            None => None,
        };
        let metrics = scheduler::scheduler::listener_address(&listener)
            .map(|a| format!(", metrics on http://{a}"))
            .unwrap_or_default();
        let config = scheduler::Config {
            client,
            scheduler_name: args.scheduler_name.clone(),
            listener,
            seed: args.seed.unwrap_or_else(rand_seed),
            clock: None,
            leader_election,
        };
        let shutdown = CancellationToken::new();
        let mut run = tokio::spawn(scheduler::run(config, shutdown.clone()));
        println!(
            "miniplane scheduler started (scheduler-name {}{metrics})",
            args.scheduler_name
        );
        tokio::select! {
            result = &mut run => return Ok(result??),
            () = crate::components::apiserver::wait_for_signal() => {}
        }
        tracing::info!("shutting down");
        shutdown.cancel();
        Ok(run.await??)
    })
}

/// A seed from the clock: decisions differ between runs, as kube-scheduler's do.
fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
