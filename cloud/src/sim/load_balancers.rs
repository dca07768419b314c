//! Load balancers: one per Service of type LoadBalancer, as an ELB or a GCE forwarding rule
//! is. The service controller creates, updates and deletes them through the `LoadBalancer`
//! part of `k8s.io/cloud-provider`'s `cloud.go`.
//!
//! ```text
//!   PUT /v1/loadbalancers/a3f2...   ──▶ provisioning ──(provisioning delay, 1 s)──▶ active
//!        ingress IP 203.0.113.1 taken at once, kept for the load balancer's life
//!   DELETE                           ──▶ gone, 203.0.113.1 free for the next one
//! ```
//!
//! * Named by `cloudprovider.DefaultLoadBalancerName` (`a` + the Service's UID without
//!   dashes, 32 characters) and keyed by that name.
//! * The ingress IP is the lowest free address of 203.0.113.0/24; when all 254 are taken a new
//!   load balancer is refused (409) as a cloud refuses one over quota.
//! * It is *provisioning* until its `active_at`, then *active*; the state is worked out from
//!   the clock when read, so nothing has to run when the delay ends, and it survives a restart.
//! * Ensuring one that exists updates its ports and backends and keeps its IP and state.
//!
//! Unlike a real cloud, no traffic flows: the backends are node names, the ports a record.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::LoadBalancerPort;

use super::address_pool::INGRESS;
use super::api::{EnsureLoadBalancerRequest, Rejection, check_name};
use super::state::CloudState;

/// The Service a load balancer belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerService {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// Whether a load balancer is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadBalancerState {
    /// Created, not ready yet: the provisioning delay has not passed.
    Provisioning,
    /// Ready.
    Active,
}

impl LoadBalancerState {
    /// `provisioning` or `active`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadBalancerState::Provisioning => "provisioning",
            LoadBalancerState::Active => "active",
        }
    }
}

/// A load balancer as the cloud answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudLoadBalancer {
    /// Its name (`cloudprovider.DefaultLoadBalancerName`).
    pub name: String,
    /// The cluster it serves.
    pub cluster: String,
    /// The Service it belongs to.
    pub service: LoadBalancerService,
    /// Its ports.
    pub ports: Vec<LoadBalancerPort>,
    /// The node names it forwards to, sorted.
    pub backends: Vec<String>,
    /// Its address, from 203.0.113.0/24.
    pub ingress_ip: Ipv4Addr,
    /// Provisioning or active, as of the answer.
    pub state: LoadBalancerState,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it is (or was) active.
    pub active_at: Timestamp,
}

/// A load balancer as the cloud keeps it (its state is worked out when read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LoadBalancerRecord {
    pub cluster: String,
    pub service: LoadBalancerService,
    pub ports: Vec<LoadBalancerPort>,
    pub backends: Vec<String>,
    pub ingress_ip: Ipv4Addr,
    pub created_at: Timestamp,
    pub active_at: Timestamp,
}

impl LoadBalancerRecord {
    fn view(&self, name: &str, now: Timestamp) -> CloudLoadBalancer {
        CloudLoadBalancer {
            name: name.to_owned(),
            cluster: self.cluster.clone(),
            service: self.service.clone(),
            ports: self.ports.clone(),
            backends: self.backends.clone(),
            ingress_ip: self.ingress_ip,
            state: if now >= self.active_at {
                LoadBalancerState::Active
            } else {
                LoadBalancerState::Provisioning
            },
            created_at: self.created_at,
            active_at: self.active_at,
        }
    }
}

impl CloudState {
    /// Every load balancer, by name.
    pub(crate) fn load_balancers(&self, now: Timestamp) -> Vec<CloudLoadBalancer> {
        self.load_balancers
            .iter()
            .map(|(name, lb)| lb.view(name, now))
            .collect()
    }

    /// The load balancer `name`.
    pub(crate) fn load_balancer(
        &self,
        name: &str,
        now: Timestamp,
    ) -> Result<CloudLoadBalancer, Rejection> {
        self.load_balancers
            .get(name)
            .map(|lb| lb.view(name, now))
            .ok_or_else(|| not_found(name))
    }

    /// Creates the load balancer `name` (provisioning for `delay`), or updates the ports and
    /// backends of the one that exists. Whether it was created comes with it.
    pub(crate) fn ensure_load_balancer(
        &mut self,
        name: &str,
        request: EnsureLoadBalancerRequest,
        now: Timestamp,
        delay: Duration,
    ) -> Result<(CloudLoadBalancer, bool), Rejection> {
        check_name("load balancer", name)?;
        check_ports(&request.ports)?;
        let backends = backends(request.backends)?;
        if let Some(lb) = self.load_balancers.get_mut(name) {
            if lb.service.uid != request.service.uid {
                return Err(Rejection::Conflict(format!(
                    "load balancer {name} belongs to service {}/{} (uid {})",
                    lb.service.namespace, lb.service.name, lb.service.uid
                )));
            }
            lb.ports = request.ports;
            lb.backends = backends;
            return Ok((lb.view(name, now), false));
        }
        let used: BTreeSet<Ipv4Addr> = self
            .load_balancers
            .values()
            .map(|lb| lb.ingress_ip)
            .collect();
        let ingress_ip = INGRESS.lowest_free(&used).ok_or_else(|| {
            Rejection::Conflict(format!(
                "no free ingress IP for load balancer {name}: all {} addresses of {INGRESS} are in use (delete a Service of type LoadBalancer)",
                INGRESS.host_count()
            ))
        })?;
        let delay = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
        let record = LoadBalancerRecord {
            cluster: request.cluster,
            service: request.service,
            ports: request.ports,
            backends,
            ingress_ip,
            created_at: now,
            active_at: now.checked_add(delay).unwrap_or(Timestamp::MAX),
        };
        let view = record.view(name, now);
        self.load_balancers.insert(name.to_owned(), record);
        Ok((view, true))
    }

    /// Replaces the backends of the load balancer `name`.
    pub(crate) fn update_backends(
        &mut self,
        name: &str,
        nodes: Vec<String>,
        now: Timestamp,
    ) -> Result<CloudLoadBalancer, Rejection> {
        let nodes = backends(nodes)?;
        let lb = self
            .load_balancers
            .get_mut(name)
            .ok_or_else(|| not_found(name))?;
        lb.backends = nodes;
        Ok(lb.view(name, now))
    }

    /// Deletes the load balancer `name`; its ingress IP is free again.
    pub(crate) fn delete_load_balancer(
        &mut self,
        name: &str,
        now: Timestamp,
    ) -> Result<CloudLoadBalancer, Rejection> {
        let lb = self
            .load_balancers
            .remove(name)
            .ok_or_else(|| not_found(name))?;
        Ok(lb.view(name, now))
    }
}

fn not_found(name: &str) -> Rejection {
    Rejection::NotFound(format!("load balancer {name} not found"))
}

/// Valid, distinct ports: 1-65535, node ports 0-65535 (0: none allocated), TCP/UDP/SCTP.
fn check_ports(ports: &[LoadBalancerPort]) -> Result<(), Rejection> {
    let mut seen = BTreeSet::new();
    for p in ports {
        if !matches!(p.protocol.as_str(), "TCP" | "UDP" | "SCTP") {
            return Err(Rejection::Invalid(format!(
                "port {}: protocol {:?} is not TCP, UDP or SCTP",
                p.port, p.protocol
            )));
        }
        if !(1..=65535).contains(&p.port) || !(0..=65535).contains(&p.node_port) {
            return Err(Rejection::Invalid(format!(
                "port {} (node port {}): ports are 1-65535",
                p.port, p.node_port
            )));
        }
        if !seen.insert((p.port, p.protocol.as_str())) {
            return Err(Rejection::Invalid(format!(
                "port {}/{} is given twice",
                p.port, p.protocol
            )));
        }
    }
    Ok(())
}

/// The backends, checked, sorted and without duplicates.
fn backends(nodes: Vec<String>) -> Result<Vec<String>, Rejection> {
    for node in &nodes {
        check_name("backend node", node)?;
    }
    let set: BTreeSet<String> = nodes.into_iter().collect();
    Ok(set.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uid: &str, backends: &[&str]) -> EnsureLoadBalancerRequest {
        EnsureLoadBalancerRequest {
            cluster: "kubernetes".into(),
            service: LoadBalancerService {
                namespace: "default".into(),
                name: "web".into(),
                uid: uid.into(),
            },
            ports: vec![LoadBalancerPort {
                name: Some("http".into()),
                protocol: "TCP".into(),
                port: 80,
                node_port: 30080,
            }],
            backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        }
    }

    const T0: Timestamp = Timestamp::UNIX_EPOCH;
    const DELAY: Duration = Duration::from_secs(1);

    #[test]
    fn a_new_load_balancer_provisions_then_is_active() {
        let mut state = CloudState::default();
        let (lb, created) = state
            .ensure_load_balancer(
                "aweb",
                request("u1", &["node-b", "node-a", "node-b"]),
                T0,
                DELAY,
            )
            .expect("ensure");
        assert!(created);
        assert_eq!(lb.state, LoadBalancerState::Provisioning);
        assert_eq!(lb.ingress_ip, Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(lb.backends, ["node-a", "node-b"]);
        let later = T0 + SignedDuration::from_secs(1);
        assert_eq!(
            state.load_balancer("aweb", later).map(|lb| lb.state),
            Ok(LoadBalancerState::Active)
        );
    }

    #[test]
    fn ensuring_again_updates_and_keeps_the_ip_and_state() {
        let mut state = CloudState::default();
        state
            .ensure_load_balancer("aweb", request("u1", &["node-a"]), T0, DELAY)
            .expect("ensure");
        let mut again = request("u1", &["node-c"]);
        again.ports[0].port = 8080;
        let later = T0 + SignedDuration::from_secs(5);
        let (lb, created) = state
            .ensure_load_balancer("aweb", again, later, DELAY)
            .expect("ensure");
        assert!(!created);
        assert_eq!(lb.ingress_ip, Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(lb.state, LoadBalancerState::Active);
        assert_eq!(lb.backends, ["node-c"]);
        assert_eq!(lb.ports[0].port, 8080);
        let err = state
            .ensure_load_balancer("aweb", request("u2", &[]), later, DELAY)
            .expect_err("another service's name");
        assert_eq!(err.status(), 409);
    }

    #[test]
    fn delete_frees_the_ip_for_the_next_one() {
        let mut state = CloudState::default();
        state
            .ensure_load_balancer("a1", request("u1", &[]), T0, DELAY)
            .expect("a1");
        state
            .ensure_load_balancer("a2", request("u2", &[]), T0, DELAY)
            .expect("a2");
        let gone = state.delete_load_balancer("a1", T0).expect("delete");
        assert_eq!(gone.ingress_ip, Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(
            state.delete_load_balancer("a1", T0).map_err(|e| e.status()),
            Err(404)
        );
        let (a3, _) = state
            .ensure_load_balancer("a3", request("u3", &[]), T0, DELAY)
            .expect("a3");
        assert_eq!(a3.ingress_ip, Ipv4Addr::new(203, 0, 113, 1));
        let names: Vec<String> = state
            .load_balancers(T0)
            .into_iter()
            .map(|lb| lb.name)
            .collect();
        assert_eq!(names, ["a2", "a3"]);
    }

    #[test]
    fn an_exhausted_ingress_range_is_refused_clearly() {
        let mut state = CloudState::default();
        for n in 0..254 {
            state
                .ensure_load_balancer(&format!("a{n}"), request(&format!("u{n}"), &[]), T0, DELAY)
                .expect("room");
        }
        let err = state
            .ensure_load_balancer("full", request("u-full", &[]), T0, DELAY)
            .expect_err("exhausted");
        assert_eq!(err.status(), 409);
        assert!(
            err.to_string()
                .contains("all 254 addresses of 203.0.113.0/24 are in use"),
            "{err}"
        );
    }

    #[test]
    fn bad_ports_and_backends_are_refused() {
        let mut state = CloudState::default();
        let mut bad = request("u1", &[]);
        bad.ports[0].protocol = "HTTP".into();
        assert_eq!(
            state
                .ensure_load_balancer("a", bad, T0, DELAY)
                .map_err(|e| e.status()),
            Err(400)
        );
        let mut twice = request("u1", &[]);
        twice.ports.push(twice.ports[0].clone());
        assert_eq!(
            state
                .ensure_load_balancer("a", twice, T0, DELAY)
                .map_err(|e| e.status()),
            Err(400)
        );
        let bad_node = request("u1", &["Node A"]);
        assert_eq!(
            state
                .ensure_load_balancer("a", bad_node, T0, DELAY)
                .map_err(|e| e.status()),
            Err(400)
        );
        assert_eq!(
            state
                .update_backends("missing", vec![], T0)
                .map_err(|e| e.status()),
            Err(404)
        );
        assert!(state.load_balancers.is_empty());
    }
}
