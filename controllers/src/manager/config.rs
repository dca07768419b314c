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
pub const KNOWN_CONTROLLERS: [&str; 5] = [
    "deployment",
    "replicaset",
    "garbagecollector",
    "namespace",
    "nodelifecycle",
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

/// Leader election timing (`--leader-elect-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElection {
    /// `--leader-elect-lease-duration` (15 s).
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline` (10 s).
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period` (2 s).
    pub retry_period: Duration,
    /// Namespace of the Lease (`kube-system`).
    pub namespace: String,
    /// Name of the Lease (`kube-controller-manager`).
    pub name: String,
    /// This candidate's identity; `hostname_<uuid>` as kube-controller-manager makes it.
    pub identity: String,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            namespace: "kube-system".into(),
            name: "kube-controller-manager".into(),
            identity: default_identity(),
        }
    }
}

/// `hostname_uuid` (`cmd/kube-controller-manager/app/controllermanager.go`: `id + "_" +
/// string(uuid.NewUUID())`).
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

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
    /// `--concurrent-gc-syncs` (20).
    pub concurrent_gc_syncs: usize,
    /// `--concurrent-namespace-syncs` (10).
    pub concurrent_namespace_syncs: usize,
    /// `--leader-elect` (off by default in miniplane: one controller-manager per cluster is
    /// the common case, and a Lease round-trip would slow every start; Kubernetes defaults
    /// to on).
    pub leader_election: Option<LeaderElection>,
    /// `--kube-api-qps` / `--kube-api-burst`; `None`: no client-side limit (Kubernetes: 20/30).
    pub rate_limit: Option<RateLimit>,
    /// Where `/healthz` and `/metrics` are served (`--secure-port`, here plain HTTP); port 0
    /// picks a free port. `None`: not served.
    pub listen: Option<SocketAddr>,
    /// `--node-monitor-grace-period` / `--node-monitor-period` of the node lifecycle
    /// controller.
    pub node_lifecycle: crate::node_lifecycle::Config,
    /// `--tracing`: continue the traces of the objects the controllers react to and report
    /// spans to the API server's collector (on by default).
    pub tracing: bool,
}

impl Config {
    /// Kubernetes' defaults for the API server at `api_server`.
    pub fn new(api_server: ApiServer) -> Self {
        Config {
            api_server,
            controllers: EnabledControllers::all(),
            concurrent_deployment_syncs: 5,
            concurrent_replicaset_syncs: 5,
            concurrent_gc_syncs: 20,
            concurrent_namespace_syncs: 10,
            leader_election: None,
            rate_limit: None,
            listen: None,
            node_lifecycle: crate::node_lifecycle::Config::default(),
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
                "garbagecollector",
                "nodelifecycle"
            ]
        );
        assert_eq!(parse("replicaset").unwrap_or_default(), vec!["replicaset"]);
        assert!(parse("*,bogus").is_err());
    }

    #[test]
    fn identity_is_hostname_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap_or_default();
        assert!(!host.is_empty() && uuid.len() == 36, "{id}");
    }
}
