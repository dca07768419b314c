//! The cloud-controller-manager's configuration: its flags as a struct.
//!
//! Mirrors `k8s.io/cloud-provider/options` (`CloudControllerManagerOptions`, the
//! `KubeCloudShared` and `ServiceController` flags) with their defaults. The `ctl` binary maps
//! clap flags onto [`Config`]; `miniplane up` builds it directly.

use std::net::SocketAddr;
use std::time::Duration;

use apimachinery::Ipv4Cidr;
use client::{ClusterSource, LeaderElection, RateLimit};

/// The controllers this process knows, by their `--controllers` names.
pub const KNOWN_CONTROLLERS: [&str; 4] = ["cloud-node", "cloud-node-lifecycle", "route", "service"];

/// The Lease the cloud-controller-manager campaigns for, in `kube-system`.
pub const LEASE_NAME: &str = "cloud-controller-manager";

/// Where its `/healthz` and `/metrics` are served by default (`--secure-port` 10258).
pub const DEFAULT_PORT: u16 = 10258;

/// Everything [`crate::CloudControllerManager`] needs besides the cloud itself.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the API server is.
    pub api_server: ClusterSource,
    /// `--controllers` (all four by default).
    pub controllers: Vec<&'static str>,
    /// `--cluster-name` (`kubernetes`): the prefix of what this cluster owns in the cloud.
    pub cluster_name: String,
    /// `--allocate-node-cidrs` with `--cluster-cidr`: the route controller runs only when
    /// Nodes get pod CIDRs, and owns the routes inside this range.
    pub cluster_cidr: Option<Ipv4Cidr>,
    /// `--configure-cloud-routes` (true).
    pub configure_cloud_routes: bool,
    /// `--node-status-update-frequency` (5 min): how often initialized Nodes' addresses are
    /// checked against the cloud.
    pub node_status_update_frequency: Duration,
    /// `--node-monitor-period` (5 s): the node lifecycle controller's period.
    pub node_monitor_period: Duration,
    /// `--route-reconciliation-period` (10 s).
    pub route_reconciliation_period: Duration,
    /// `--concurrent-service-syncs` (1).
    pub concurrent_service_syncs: usize,
    /// `--concurrent-node-syncs` (1): the cloud node controller's workers.
    pub concurrent_node_syncs: usize,
    /// `--leader-elect`: run the controllers only while holding the Lease
    /// `kube-system/cloud-controller-manager`.
    pub leader_election: Option<LeaderElection>,
    /// `--kube-api-qps` / `--kube-api-burst`; `None`: no client-side limit.
    pub rate_limit: Option<RateLimit>,
    /// Where `/healthz` and `/metrics` are served (plain HTTP here); `None`: not served.
    pub listen: Option<SocketAddr>,
    /// `--tracing`: continue the traces of the objects it reacts to and report spans.
    pub tracing: bool,
}

impl Config {
    /// Kubernetes' defaults for the API server at `api_server`.
    pub fn new(api_server: ClusterSource) -> Self {
        Config {
            api_server,
            controllers: KNOWN_CONTROLLERS.to_vec(),
            cluster_name: "kubernetes".into(),
            cluster_cidr: None,
            configure_cloud_routes: true,
            node_status_update_frequency: Duration::from_secs(300),
            node_monitor_period: Duration::from_secs(5),
            route_reconciliation_period: Duration::from_secs(10),
            concurrent_service_syncs: 1,
            concurrent_node_syncs: 1,
            leader_election: None,
            rate_limit: None,
            listen: None,
            tracing: true,
        }
    }

    /// Parses a `--controllers` list as kube-controller-manager does: `*` for all, `name`,
    /// `-name`; an unknown name is an error.
    pub fn parse_controllers(list: &[String]) -> Result<Vec<&'static str>, String> {
        let mut star = false;
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for item in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
                continue;
            }
            let (name, disable) = match item.strip_prefix('-') {
                Some(n) => (n, true),
                None => (item, false),
            };
            let Some(known) = KNOWN_CONTROLLERS.iter().find(|k| **k == name) else {
                return Err(format!(
                    "{name:?} is not in the list of known controllers ({})",
                    KNOWN_CONTROLLERS.join(", ")
                ));
            };
            if disable {
                off.push(*known)
            } else {
                on.push(*known)
            }
        }
        Ok(KNOWN_CONTROLLERS
            .iter()
            .copied()
            .filter(|c| (star || on.contains(c)) && !off.contains(c))
            .collect())
    }

    /// Whether `name` runs (the route controller also needs a cluster CIDR and
    /// `--configure-cloud-routes`).
    pub fn runs(&self, name: &str) -> bool {
        self.controllers.contains(&name)
            && (name != "route" || (self.configure_cloud_routes && self.cluster_cidr.is_some()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_and_the_route_controllers_conditions() {
        let parse = |s: &str| Config::parse_controllers(&[s.to_string()]);
        assert_eq!(parse("*"), Ok(KNOWN_CONTROLLERS.to_vec()));
        assert_eq!(
            parse("*,-route"),
            Ok(vec!["cloud-node", "cloud-node-lifecycle", "service"])
        );
        assert!(parse("*,nodeipam").is_err());
        let mut c = Config::new(ClusterSource::Url("http://127.0.0.1:1".into()));
        assert!(c.runs("service"));
        assert!(!c.runs("route"), "no cluster CIDR");
        c.cluster_cidr = "10.244.0.0/16".parse().ok();
        assert!(c.runs("route"));
        c.configure_cloud_routes = false;
        assert!(!c.runs("route"));
    }
}
