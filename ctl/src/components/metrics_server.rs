//! `miniplane metrics-server`: flags, bind, register with the API server's aggregation layer,
//! scrape the kubelets and serve `metrics.k8s.io/v1beta1` until Ctrl-C or SIGTERM
//! ([`metrics_server::MetricsServer`]).
//!
//! Prints `miniplane metrics-server started (metrics.k8s.io on http://ADDR)` once its port is
//! bound. Flags are metrics-server's where it has them (`--metric-resolution`,
//! `--kubelet-request-timeout`, `--secure-port`), plus `--master` and `--listen` as the
//! other components take them, and `--advertise-address` (the address its EndpointSlice
//! names; the API server dials the loopback address at the port either way). The kubelets
//! are scraped over HTTPS with the kubeconfig's credentials, verified with
//! `--kubelet-certificate-authority` (else the kubeconfig's CA) or not at all
//! (`--kubelet-insecure-tls`); `--deprecated-kubelet-completely-insecure` scrapes them over
//! plain HTTP without credentials (a plain-HTTP cluster's kubelets).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use apimachinery::duration::parse_duration;
use tokio_util::sync::CancellationToken;

use super::flags::health_address;

/// Flags of `miniplane metrics-server`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("cluster").required(true).args(["kubeconfig", "master"])))]
pub struct MetricsServerArgs {
    /// Kubeconfig of the cluster (its current context).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// API server URL, e.g. http://127.0.0.1:6443 (overrides the kubeconfig).
    #[arg(long, value_name = "URL")]
    master: Option<String>,
    /// How often every kubelet is scraped (at least 1s here; metrics-server requires 10s).
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    metric_resolution: Duration,
    /// How long one kubelet may take to answer (at most 90% of --metric-resolution).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    kubelet_request_timeout: Duration,
    /// Port of the metrics API on 127.0.0.1 (0: a free one).
    #[arg(long, value_name = "PORT", default_value_t = 4443)]
    secure_port: u16,
    /// Address of the metrics API, overriding --secure-port (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The address its EndpointSlice names (default: this machine's, as the `kubernetes`
    /// Service's endpoint).
    #[arg(long, value_name = "IP")]
    advertise_address: Option<IpAddr>,
    /// Register the APIService, its Service and EndpointSlice at start
    /// (`--register=false`: serve only).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    register: bool,
    /// The CA (PEM) the kubelets' serving certificates are verified with (default: the
    /// kubeconfig's certificate authority).
    #[arg(long, value_name = "FILE")]
    kubelet_certificate_authority: Option<PathBuf>,
    /// Do not verify the kubelets' serving certificates.
    #[arg(long)]
    kubelet_insecure_tls: bool,
    /// Scrape the kubelets over plain HTTP, without credentials or verification.
    #[arg(long)]
    deprecated_kubelet_completely_insecure: bool,
}

/// Runs the metrics-server until a shutdown signal.
pub fn main(args: MetricsServerArgs) -> anyhow::Result<()> {
    let runtime = super::client_runtime()?;
    runtime.block_on(async move {
        let source = match (args.master, args.kubeconfig) {
            (Some(url), _) => client::ClusterSource::Url(url),
            (None, Some(path)) => client::ClusterSource::Kubeconfig(path),
            (None, None) => anyhow::bail!("one of --kubeconfig or --master is required"),
        };
        let listen = health_address(args.listen, args.secure_port).ok_or_else(|| {
            anyhow::anyhow!(
                "--secure-port 0 serves nothing: use --listen 127.0.0.1:0 for a free port"
            )
        })?;
        let mut config = metrics_server::Config::new(source);
        config.listen = listen;
        config.metric_resolution = args.metric_resolution;
        config.kubelet_request_timeout = args.kubelet_request_timeout;
        config.advertise_address = args.advertise_address;
        config.register = args.register;
        config.kubelet_client = metrics_server::kubelet_client::KubeletClientOptions {
            completely_insecure: args.deprecated_kubelet_completely_insecure,
            insecure_tls: args.kubelet_insecure_tls,
            certificate_authority: args.kubelet_certificate_authority,
        };
        let server = match metrics_server::MetricsServer::bind(config).await {
            Ok(s) => s,
            Err(metrics_server::Error::Bind { addr, source }) => {
                let why = if source.kind() == std::io::ErrorKind::AddrInUse {
                    "the port is in use; choose another with --secure-port or --listen".to_owned()
                } else {
                    source.to_string()
                };
                anyhow::bail!("cannot serve the metrics API on {addr}: {why}");
            }
            Err(e) => return Err(e.into()),
        };
        let addr = server.local_addr()?;
        let shutdown = CancellationToken::new();
        let mut run = tokio::spawn(server.run(shutdown.clone()));
        println!("miniplane metrics-server started (metrics.k8s.io on http://{addr})");
        tokio::select! {
            result = &mut run => return Ok(result??),
            () = crate::components::apiserver::wait_for_signal() => {}
        }
        tracing::info!("shutting down");
        shutdown.cancel();
        Ok(run.await??)
    })
}
