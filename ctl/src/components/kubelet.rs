//! `miniplane kubelet --nodes N`: simulated kubelets for N nodes in this process, then
//! `kubelet_sim::Simulator::run` until Ctrl-C or SIGTERM.
//!
//! Once every node has registered it prints one line on stdout:
//! `miniplane kubelet: N nodes registered (control API on http://127.0.0.1:PORT) (kubelet API
//! on http(s)://127.0.0.1:PORT)`, each part only when served. The kubelet API (logs, exec,
//! attach, port-forward, stats: `kubelet_sim::server`) is one listener for all the nodes, on
//! `--kubelet-port` (a free port by default), which every Node advertises. With the kubelet's
//! `--tls-cert-file` and `--tls-private-key-file` it serves HTTPS (`kubelet API on
//! https://...`), with `--client-ca-file` client certificates authenticate, and
//! `--anonymous-auth`, `--authentication-token-webhook` and `--authorization-mode` say who
//! may call it, as the kubelet's flags do (defaults: the kubelet's, which let anyone in).
//! On SIGTERM heartbeats stop and the Node objects stay, as when real kubelets stop.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use apimachinery::duration::parse_duration;
use client::ClusterSource;
use k8s_openapi::api::core::v1::Taint;
use kubelet_sim::{Config, Simulator, StageConfig};
use tokio_util::sync::CancellationToken;

/// Flags of `miniplane kubelet` (named as the kubelet's where one exists).
#[derive(Debug, clap::Args)]
pub struct KubeletArgs {
    /// How many nodes to simulate.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Node names are `<prefix><index>`.
    #[arg(long, default_value = "node-")]
    node_name_prefix: String,
    /// Kubeconfig file with the API server's address.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides the kubeconfig's server).
    #[arg(long, value_name = "URL")]
    master: Option<String>,
    /// Control API address (`/healthz`, heartbeat faults); port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The kubelet API's port on 127.0.0.1 (the kubelet's `--port`: logs, exec, attach,
    /// port-forward, stats), one for all the nodes, advertised in every Node's
    /// `daemonEndpoints`; 0 picks a free port, `off` serves none.
    #[arg(long, value_name = "PORT|off", default_value = "0", value_parser = parse_kubelet_port)]
    kubelet_port: KubeletPort,
    /// CPU capacity of each node.
    #[arg(long, default_value = "4", value_parser = parse_quantity)]
    cpu: String,
    /// Memory capacity of each node.
    #[arg(long, default_value = "16Gi", value_parser = parse_quantity)]
    memory: String,
    /// Pod capacity of each node.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Extra node labels, `k=v,k2=v2`.
    #[arg(long, value_delimiter = ',', value_parser = parse_node_label)]
    node_labels: Vec<(String, String)>,
    /// Taints to register with, `key=value:Effect` or `key:Effect`.
    #[arg(long, value_delimiter = ',')]
    register_with_taints: Vec<String>,
    /// Lease renewal interval (Kubernetes: 10 s = the 40 s lease / 4).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    lease_renew_interval: Duration,
    /// `nodeLeaseDurationSeconds`.
    #[arg(long, default_value_t = 40)]
    node_lease_duration_seconds: i32,
    /// How often the node status is computed and posted if changed.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    node_status_update_frequency: Duration,
    /// How often the node status is posted even if unchanged.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    node_status_report_frequency: Duration,
    /// Pod stage timing: `fast` (no delays, short back-off) or `realistic`.
    #[arg(long, default_value = "fast")]
    profile: String,
    /// Back-off cap for crash loops and image pulls (overrides the profile).
    #[arg(long, value_parser = parse_duration)]
    backoff_max: Option<Duration>,
    /// Take each node's pod CIDR from its Node's spec.podCIDR, written by the controller-manager
    /// (--allocate-node-cidrs), instead of registering with its own 10.244.<i>.0/24.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pod_cidr_from_node: bool,
    /// `external`: register the nodes tainted node.cloudprovider.kubernetes.io/uninitialized
    /// for the cloud-controller-manager to initialize (the kubelet's only choice since 1.29).
    #[arg(long, value_name = "PROVIDER", value_parser = ["external", ""], default_value = "")]
    cloud_provider: String,
    /// Pod workers shared by all nodes (a real kubelet has a goroutine per pod and a status
    /// manager per node; this bounds how many pods are synced at once).
    #[arg(long, default_value_t = 64)]
    pod_workers: usize,
    /// Trace the work this component does and report spans to the API server's collector
    /// (`--tracing=false` turns it off).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    tracing: bool,
    /// Serve the kubelet API over HTTPS with this certificate (PEM; the chain after the leaf).
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert-file`.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// The CA (PEM) client certificates are verified with (CN the user, O the groups).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    client_ca_file: Option<PathBuf>,
    /// Serve requests without credentials as `system:anonymous`; `--anonymous-auth=false`
    /// answers them 401.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// Check bearer tokens with a `TokenReview` sent to the API server.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    authentication_token_webhook: bool,
    /// How requests are authorized: `AlwaysAllow`, or `Webhook` (a `SubjectAccessReview`
    /// sent to the API server).
    #[arg(long, value_name = "MODE", default_value = "AlwaysAllow", value_parser = kubelet_sim::ServingAuthorization::parse)]
    authorization_mode: kubelet_sim::ServingAuthorization,
}

/// `--kubelet-port`: a port, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KubeletPort(Option<u16>);

/// Reads `--kubelet-port` (`0`-`65535` or `off`).
pub(crate) fn parse_kubelet_port(s: &str) -> Result<KubeletPort, String> {
    match s {
        "off" | "none" => Ok(KubeletPort(None)),
        port => port
            .parse()
            .map(|p| KubeletPort(Some(p)))
            .map_err(|_| format!("{s:?} is not a port (0-65535) or \"off\"")),
    }
}

/// A resource quantity flag (`4`, `500m`, `16Gi`): apimachinery's syntax, not negative.
pub(crate) fn parse_quantity(s: &str) -> Result<String, String> {
    match apimachinery::resource::quantity::Quantity::parse(s) {
        Ok(q) if q.nanos() < 0 => Err("must be greater than or equal to 0".into()),
        Ok(_) => Ok(s.to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// One `key=value` of `--node-labels` (the kubelet's `MapStringString` flag), validated as
/// the kubelet validates its node labels (`ValidateKubeletFlags`: a qualified name and a
/// label value).
pub(crate) fn parse_node_label(s: &str) -> Result<(String, String), String> {
    use apimachinery::validation::{is_label_value, is_qualified_name};
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("malformed pair, expect string=string: {s:?}"))?;
    let key = key.trim();
    let value = value.trim();
    for (what, errors) in [
        (key, is_qualified_name(key)),
        (value, is_label_value(value)),
    ] {
        if !errors.is_empty() {
            return Err(format!(
                "invalid node labels: '{what}' - {}",
                errors.join(", ")
            ));
        }
    }
    Ok((key.to_owned(), value.to_owned()))
}

fn parse_taint(s: &str) -> anyhow::Result<Taint> {
    let (kv, effect) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("taint {s:?}: want key=value:Effect"))?;
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_owned())),
        None => (kv, None),
    };
    Ok(Taint {
        key: key.into(),
        value,
        effect: effect.into(),
        time_added: None,
    })
}

fn config(args: KubeletArgs) -> anyhow::Result<Config> {
    let source = match (args.master, args.kubeconfig) {
        (Some(url), _) => ClusterSource::Url(url),
        (None, Some(path)) => ClusterSource::Kubeconfig(path),
        (None, None) => anyhow::bail!("one of --kubeconfig or --master is required"),
    };
    let mut config = Config::new(source, args.nodes);
    config.node_name_prefix = args.node_name_prefix;
    config.listen = args.listen;
    config.kubelet_listen = args
        .kubelet_port
        .0
        .map(|port| SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)));
    config.capacity.cpu = args.cpu;
    config.capacity.memory = args.memory;
    config.capacity.pods = args.max_pods;
    config.labels = args.node_labels.into_iter().collect::<BTreeMap<_, _>>();
    config.taints = args
        .register_with_taints
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| parse_taint(t))
        .collect::<anyhow::Result<_>>()?;
    config.heartbeat.lease_renew_interval = args.lease_renew_interval;
    config.heartbeat.lease_duration_seconds = args.node_lease_duration_seconds;
    config.heartbeat.status_update_frequency = args.node_status_update_frequency;
    config.heartbeat.status_report_frequency = args.node_status_report_frequency;
    config.stages = StageConfig::profile(&args.profile)
        .ok_or_else(|| anyhow::anyhow!("unknown --profile {:?} (fast, realistic)", args.profile))?;
    if let Some(max) = args.backoff_max {
        config.stages.backoff_max = max;
        config.stages.backoff_base = config.stages.backoff_base.min(max);
    }
    config.pod_workers = args.pod_workers;
    config.pod_cidr_from_node = args.pod_cidr_from_node;
    config.cloud_provider_external = args.cloud_provider == "external";
    config.tracing = args.tracing;
    if let (Some(cert), Some(key)) = (args.tls_cert_file, args.tls_private_key_file) {
        config.kubelet_tls = Some(kubelet_sim::ServingTls {
            cert_file: cert,
            key_file: key,
            client_ca_file: args.client_ca_file,
        });
    }
    config.kubelet_auth.anonymous = args.anonymous_auth;
    config.kubelet_auth.token_webhook = args.authentication_token_webhook;
    config.kubelet_auth.authorization = args.authorization_mode;
    Ok(config)
}

/// Runs the simulated kubelets until a shutdown signal.
pub fn main(args: KubeletArgs) -> anyhow::Result<()> {
    let config = config(args)?;
    let nodes = config.nodes;
    let kubelet_scheme = if config.kubelet_tls.is_some() {
        "https"
    } else {
        "http"
    };
    let runtime = super::client_runtime()?;
    runtime.block_on(async move {
        let simulator = Simulator::bind(config).await?;
        let addr = simulator.local_addr();
        let kubelet_api = simulator.kubelet_addr();
        let handle = simulator.handle();
        let shutdown = CancellationToken::new();
        let signal_token = shutdown.clone();
        tokio::spawn(async move {
            crate::components::apiserver::wait_for_signal().await;
            tracing::info!("shutting down");
            signal_token.cancel();
        });
        let announce = tokio::spawn(async move {
            if handle.wait_registered().await {
                let mut line = format!("miniplane kubelet: {nodes} nodes registered");
                if let Some(addr) = addr {
                    line.push_str(&format!(" (control API on http://{addr})"));
                }
                if let Some(addr) = kubelet_api {
                    line.push_str(&format!(" (kubelet API on {kubelet_scheme}://{addr})"));
                }
                println!("{line}");
            }
        });
        simulator.run(shutdown).await?;
        announce.abort();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{KubeletPort, parse_kubelet_port, parse_node_label, parse_quantity, parse_taint};

    #[test]
    fn kubelet_port_is_a_port_or_off() {
        assert_eq!(parse_kubelet_port("0"), Ok(KubeletPort(Some(0))));
        assert_eq!(parse_kubelet_port("10250"), Ok(KubeletPort(Some(10250))));
        assert_eq!(parse_kubelet_port("off"), Ok(KubeletPort(None)));
        assert!(parse_kubelet_port("70000").is_err());
    }

    #[test]
    fn node_labels_parse_as_the_kubelets_flag() {
        assert_eq!(
            parse_node_label(" topology.kubernetes.io/zone = a "),
            Ok(("topology.kubernetes.io/zone".into(), "a".into()))
        );
        assert_eq!(
            parse_node_label("empty="),
            Ok(("empty".into(), String::new()))
        );
        assert_eq!(
            parse_node_label("nokey"),
            Err("malformed pair, expect string=string: \"nokey\"".into())
        );
        let err = parse_node_label("-bad=x").expect_err("not a qualified name");
        assert!(
            err.starts_with("invalid node labels: '-bad' - name part must consist"),
            "{err}"
        );
        let err = parse_node_label("k=a b").expect_err("not a label value");
        assert!(
            err.starts_with("invalid node labels: 'a b' - a valid label must be"),
            "{err}"
        );
    }

    #[test]
    fn capacities_are_quantities() {
        assert_eq!(parse_quantity("500m"), Ok("500m".into()));
        assert_eq!(parse_quantity("32Gi"), Ok("32Gi".into()));
        assert!(parse_quantity("-1").is_err());
        assert!(parse_quantity("lots").is_err());
    }

    #[test]
    fn taints_parse() {
        let t = parse_taint("dedicated=gpu:NoSchedule").expect("valid");
        assert_eq!(
            (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
            ("dedicated", Some("gpu"), "NoSchedule")
        );
        let t = parse_taint("spot:NoExecute").expect("valid");
        assert_eq!(
            (t.key.as_str(), t.value, t.effect.as_str()),
            ("spot", None, "NoExecute")
        );
        assert!(parse_taint("nocolon").is_err());
    }
}
