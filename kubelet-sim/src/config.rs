//! Configuration of the simulated kubelets: what a real kubelet reads from its
//! `KubeletConfiguration` (`pkg/kubelet/apis/config/types.go`: `nodeLeaseDurationSeconds`,
//! `nodeStatusUpdateFrequency`, `nodeStatusReportFrequency`, `maxPods`), plus how long each
//! simulated pod stage takes ([`StageConfig`], in the spirit of kwok's Stages), and how the
//! kubelet API is served ([`ServingTls`], [`ServingAuth`]: the kubelet's `--tls-cert-file`,
//! `--tls-private-key-file`, `--client-ca-file`, `--anonymous-auth`,
//! `--authentication-token-webhook` and `--authorization-mode`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use client::{ClusterSource, RateLimit};
use k8s_openapi::api::core::v1::Taint;

/// How long the simulated pod stages take and how back-off grows.
///
/// Two presets: [`StageConfig::fast`] (no delays: tests) and [`StageConfig::realistic`]
/// (about what a laptop kubelet shows: labs). Per-pod annotations override some of them
/// (see [`crate::annotations`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StageConfig {
    /// Pulling → Pulled (the simulated image pull).
    pub pull_delay: Duration,
    /// Pulled → Started (create + start of the container).
    pub start_delay: Duration,
    /// Started → Ready when the pod has no readiness probe and no annotation.
    pub ready_delay: Duration,
    /// How long a container with `miniplane.dev/fail: crash|exit-0|exit-1` (or an
    /// `exit-code.<container>` knob on a container that would otherwise run forever) runs
    /// before it exits (unless `miniplane.dev/run-for` says otherwise).
    pub exit_after: Duration,
    /// First back-off of a crashing container (from its second exit: the first restarts at
    /// once) and of a failing image pull (Kubernetes: 10 s).
    pub backoff_base: Duration,
    /// Back-off cap (Kubernetes: 5 min).
    pub backoff_max: Duration,
    /// ErrImagePull → ImagePullBackOff: the kubelet's next pod sync after a failed pull.
    pub pull_retry_sync: Duration,
    /// Upper bound on the simulated graceful termination: a pod is deleted (grace 0) after
    /// `min(its grace period, max_termination_grace)`.
    pub max_termination_grace: Duration,
}

impl StageConfig {
    /// No delays; back-off 1 s doubling to 8 s; termination capped at 200 ms. For tests.
    pub fn fast() -> Self {
        StageConfig {
            pull_delay: Duration::ZERO,
            start_delay: Duration::ZERO,
            ready_delay: Duration::ZERO,
            exit_after: Duration::from_millis(500),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            pull_retry_sync: Duration::from_millis(200),
            max_termination_grace: Duration::from_millis(200),
        }
    }

    /// Delays of a real laptop cluster and Kubernetes' back-off (10 s doubling to 5 min).
    pub fn realistic() -> Self {
        StageConfig {
            pull_delay: Duration::from_millis(1200),
            start_delay: Duration::from_millis(300),
            ready_delay: Duration::ZERO,
            exit_after: Duration::from_secs(2),
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            pull_retry_sync: Duration::from_secs(1),
            max_termination_grace: Duration::from_secs(30),
        }
    }

    /// The preset named by `--profile` (`fast` or `realistic`).
    pub fn profile(name: &str) -> Option<Self> {
        match name {
            "fast" => Some(Self::fast()),
            "realistic" => Some(Self::realistic()),
            _ => None,
        }
    }
}

impl Default for StageConfig {
    fn default() -> Self {
        Self::fast()
    }
}

/// What each simulated node reports as capacity (= allocatable: no reservations).
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// `cpu` quantity, e.g. `"4"`.
    pub cpu: String,
    /// `memory` quantity, e.g. `"16Gi"`.
    pub memory: String,
    /// `pods` (the kubelet's `--max-pods`, 110).
    pub pods: u32,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
        }
    }
}

/// Heartbeat timing, as the kubelet's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    /// `nodeLeaseDurationSeconds` (40): written into the Lease.
    pub lease_duration_seconds: i32,
    /// How often the Lease is renewed (Kubernetes: duration / 4 = 10 s).
    pub lease_renew_interval: Duration,
    /// `nodeStatusUpdateFrequency` (10 s): how often the kubelet computes its status and
    /// posts it if it changed.
    pub status_update_frequency: Duration,
    /// `nodeStatusReportFrequency` (5 min): post the status even if unchanged after this long.
    pub status_report_frequency: Duration,
    /// Each node's writes are shifted by up to this fraction of the period so a thousand
    /// nodes do not renew in the same millisecond (client-go's `wait.Jitter`).
    pub jitter: f64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            lease_duration_seconds: 40,
            lease_renew_interval: Duration::from_secs(10),
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            jitter: 0.2,
        }
    }
}

/// HTTPS for the kubelet API: the kubelet's `--tls-cert-file`, `--tls-private-key-file` and
/// `--client-ca-file` (`KubeletConfiguration` `tlsCertFile`, `tlsPrivateKeyFile`,
/// `authentication.x509.clientCAFile`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServingTls {
    /// The serving certificate (PEM; the chain after the leaf).
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// The CA client certificates are verified against; a valid certificate's CN is the user
    /// and its O entries the groups. None: client certificates authenticate no one.
    pub client_ca_file: Option<PathBuf>,
}

/// How the kubelet API decides who may call it (`KubeletConfiguration.authorization.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServingAuthorization {
    /// Every authenticated request is allowed (the kubelet's flag default).
    #[default]
    AlwaysAllow,
    /// Each request is checked with a `SubjectAccessReview` sent to the API server (kubeadm's
    /// setting).
    Webhook,
}

impl ServingAuthorization {
    /// Reads `--authorization-mode` (`AlwaysAllow` or `Webhook`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "Webhook" => Ok(Self::Webhook),
            other => Err(format!(
                "unknown authorization mode {other:?} (AlwaysAllow, Webhook)"
            )),
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlwaysAllow => "AlwaysAllow",
            Self::Webhook => "Webhook",
        }
    }
}

/// Authentication and authorization of the kubelet API (`KubeletConfiguration.authentication`
/// and `.authorization`); the defaults are the kubelet's flag defaults, which let anyone in.
/// kubeadm sets `anonymous: false`, `webhook: true` and `Webhook` ([`ServingAuth::kubeadm`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ServingAuth {
    /// `--anonymous-auth`: a request without credentials is `system:anonymous` in
    /// `system:unauthenticated` (true), or answered 401 `Unauthorized` (false).
    pub anonymous: bool,
    /// `--authentication-token-webhook`: bearer tokens are checked with a `TokenReview`.
    pub token_webhook: bool,
    /// `--authentication-token-webhook-cache-ttl` (2 min).
    pub token_cache_ttl: Duration,
    /// `--authorization-mode`.
    pub authorization: ServingAuthorization,
    /// `--authorization-webhook-cache-authorized-ttl` (5 min).
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (30 s).
    pub unauthorized_ttl: Duration,
}

impl Default for ServingAuth {
    fn default() -> Self {
        ServingAuth {
            anonymous: true,
            token_webhook: false,
            token_cache_ttl: Duration::from_secs(120),
            authorization: ServingAuthorization::AlwaysAllow,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
        }
    }
}

impl ServingAuth {
    /// What kubeadm's `KubeletConfiguration` sets: no anonymous requests, tokens checked with
    /// the API server, every request authorized by it.
    pub fn kubeadm() -> Self {
        ServingAuth {
            anonymous: false,
            token_webhook: true,
            authorization: ServingAuthorization::Webhook,
            ..ServingAuth::default()
        }
    }

    /// Whether every request is let in as it comes (nothing to check).
    pub fn allows_everything(&self) -> bool {
        self.anonymous && self.authorization == ServingAuthorization::AlwaysAllow
    }
}

/// Everything `kubelet_sim::run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the API server is.
    pub api_server: ClusterSource,
    /// Client-side throttling (none by default: the simulator is one process for many nodes).
    pub rate_limit: Option<RateLimit>,
    /// How many nodes to simulate.
    pub nodes: usize,
    /// Node names are `<prefix><index>` (`node-0`, `node-1`, ...).
    pub node_name_prefix: String,
    /// Capacity and allocatable of every node.
    pub capacity: Capacity,
    /// Extra labels on every node (`--node-labels`).
    pub labels: BTreeMap<String, String>,
    /// Taints every node registers with (`--register-with-taints`).
    pub taints: Vec<Taint>,
    /// Lease and status timing.
    pub heartbeat: Heartbeat,
    /// Pod stage timing.
    pub stages: StageConfig,
    /// Pod workers shared by all nodes.
    pub pod_workers: usize,
    /// The control API (`/healthz`, faults); none if unset.
    pub listen: Option<SocketAddr>,
    /// The kubelet API (the kubelet's `--address` and `--port`: logs, exec, attach,
    /// port-forward, stats; see [`crate::server`]), one listener for all the nodes: 127.0.0.1
    /// with a free port (0) by default. [`crate::Simulator::bind`] replaces a port 0 with the
    /// port it bound, which every Node advertises. None: not served, and the Nodes advertise
    /// the kubelet's 10250.
    pub kubelet_listen: Option<SocketAddr>,
    /// Serve the kubelet API over HTTPS (plain HTTP when unset). One certificate serves every
    /// node of the process (a kubelet has its own), so it names them all.
    pub kubelet_tls: Option<ServingTls>,
    /// Who may call the kubelet API (see [`crate::server::auth`]).
    pub kubelet_auth: ServingAuth,
    /// Take each node's pod CIDR from its Node's `spec.podCIDR`, written by the
    /// controller-manager's node IPAM controller (`--allocate-node-cidrs`), as a kubelet does;
    /// pods on a node wait for it. Off: each node registers with its own `10.244.<i>.0/24`,
    /// as a kubelet given `--pod-cidr`.
    pub pod_cidr_from_node: bool,
    /// `--cloud-provider=external`: nodes register tainted
    /// `node.cloudprovider.kubernetes.io/uninitialized:NoSchedule` for the
    /// cloud-controller-manager to initialize (addresses, providerID, zone labels).
    pub cloud_provider_external: bool,
    /// `--tracing`: continue the traces of the pods the kubelets run and report spans to the
    /// API server's collector (on by default).
    pub tracing: bool,
}

impl Config {
    /// Defaults for `nodes` nodes against `api_server`.
    pub fn new(api_server: ClusterSource, nodes: usize) -> Self {
        Config {
            api_server,
            rate_limit: None,
            nodes,
            node_name_prefix: "node-".into(),
            capacity: Capacity::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            heartbeat: Heartbeat::default(),
            stages: StageConfig::default(),
            pod_workers: 64,
            listen: None,
            kubelet_listen: Some(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0))),
            kubelet_tls: None,
            kubelet_auth: ServingAuth::default(),
            pod_cidr_from_node: false,
            cloud_provider_external: false,
            tracing: true,
        }
    }

    /// The port the Nodes advertise as `daemonEndpoints.kubeletEndpoint.port`: the kubelet
    /// API's, else the kubelet's default 10250.
    pub fn kubelet_port(&self) -> u16 {
        self.kubelet_listen
            .map_or(crate::server::DEFAULT_PORT, |a| a.port())
    }

    /// The name of node `index`.
    pub fn node_name(&self, index: usize) -> String {
        format!("{}{index}", self.node_name_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles() {
        assert_eq!(StageConfig::profile("fast"), Some(StageConfig::fast()));
        assert_eq!(
            StageConfig::profile("realistic").map(|c| c.backoff_max),
            Some(Duration::from_secs(300))
        );
        assert!(StageConfig::profile("slow").is_none());
    }
}
