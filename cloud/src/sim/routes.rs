//! Routes: the cloud network's route table, which sends each node's pod CIDR to that node, as
//! a VPC route table or GCE routes do. The route controller keeps it in step with the Nodes'
//! `spec.podCIDR` through the `Routes` part of `k8s.io/cloud-provider`'s `cloud.go`.
//!
//! ```text
//!   name                        target   destination      blackhole
//!   kubernetes-6c1f...-node-a   node-a   10.244.0.0/24    no
//!   kubernetes-9e2b...-node-b   node-b   10.244.1.0/24    yes  (node-b's instance stopped)
//! ```
//!
//! * Keyed by name, `<cluster>-<name hint>` (the route controller's hint is the Node's UID).
//! * A destination is a CIDR without host bits (`10.244.1.0/24`, not `10.244.1.5/24`), and
//!   two routes of a cluster never share one.
//! * *Blackhole* is worked out when read: the target node has no running instance, so the
//!   traffic would be dropped (AWS marks such routes `blackhole` too).
//! * Creating a route that exists with the same target and destination succeeds and changes
//!   nothing; with another, it is refused (409).

use std::net::IpAddr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::api::{CreateRouteRequest, Rejection, check_name};
use super::instances::InstanceState;
use super::state::CloudState;

/// A route as the cloud answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudRoute {
    /// `<cluster>-<name hint>`.
    pub name: String,
    /// The cluster it belongs to.
    pub cluster: String,
    /// The node traffic goes to.
    pub target_node: String,
    /// The destination CIDR.
    pub destination_cidr: String,
    /// The target node has no running instance.
    pub blackhole: bool,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A route as the cloud keeps it (blackhole is worked out when read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RouteRecord {
    pub cluster: String,
    pub target_node: String,
    pub destination_cidr: String,
    pub created_at: Timestamp,
}

impl CloudState {
    fn route_view(&self, name: &str, route: &RouteRecord) -> CloudRoute {
        let running = self
            .live_instance(&route.target_node)
            .is_some_and(|i| i.state == InstanceState::Running);
        CloudRoute {
            name: name.to_owned(),
            cluster: route.cluster.clone(),
            target_node: route.target_node.clone(),
            destination_cidr: route.destination_cidr.clone(),
            blackhole: !running,
            created_at: route.created_at,
        }
    }

    /// The routes of `cluster` (every route when `None`), by name.
    pub(crate) fn routes(&self, cluster: Option<&str>) -> Vec<CloudRoute> {
        self.routes
            .iter()
            .filter(|(_, r)| cluster.is_none_or(|c| r.cluster == c))
            .map(|(name, r)| self.route_view(name, r))
            .collect()
    }

    /// Creates a route; whether it was created (rather than found as asked) comes with it.
    pub(crate) fn create_route(
        &mut self,
        request: CreateRouteRequest,
        now: Timestamp,
    ) -> Result<(CloudRoute, bool), Rejection> {
        check_name("route", &request.name)?;
        check_name("target node", &request.target_node)?;
        check_cidr(&request.destination_cidr)?;
        if let Some(existing) = self.routes.get(&request.name) {
            if existing.cluster == request.cluster
                && existing.target_node == request.target_node
                && existing.destination_cidr == request.destination_cidr
            {
                return Ok((self.route_view(&request.name, existing), false));
            }
            return Err(Rejection::Conflict(format!(
                "route {} exists and sends {} to {}",
                request.name, existing.destination_cidr, existing.target_node
            )));
        }
        if let Some((name, other)) = self.routes.iter().find(|(_, r)| {
            r.cluster == request.cluster && r.destination_cidr == request.destination_cidr
        }) {
            return Err(Rejection::Conflict(format!(
                "route {name} already sends {} to {}",
                other.destination_cidr, other.target_node
            )));
        }
        let record = RouteRecord {
            cluster: request.cluster,
            target_node: request.target_node,
            destination_cidr: request.destination_cidr,
            created_at: now,
        };
        let view = self.route_view(&request.name, &record);
        self.routes.insert(request.name, record);
        Ok((view, true))
    }

    /// Deletes the route `name`.
    pub(crate) fn delete_route(&mut self, name: &str) -> Result<CloudRoute, Rejection> {
        let record = self
            .routes
            .remove(name)
            .ok_or_else(|| Rejection::NotFound(format!("route {name} not found")))?;
        Ok(self.route_view(name, &record))
    }
}

/// `cidr` is `address/prefix` (IPv4 or IPv6) with no host bits set.
fn check_cidr(cidr: &str) -> Result<(), Rejection> {
    let invalid = |why: &str| Rejection::Invalid(format!("destination {cidr:?}: {why}"));
    let (address, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| invalid("not a CIDR (address/prefix)"))?;
    let address: IpAddr = address.parse().map_err(|_| invalid("not an IP address"))?;
    let prefix: u32 = prefix
        .parse()
        .map_err(|_| invalid("the prefix is not a number"))?;
    let (bits, width) = match address {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    };
    if prefix > width {
        return Err(invalid("the prefix is too long"));
    }
    let host_mask = if prefix == 128 {
        0
    } else {
        (1u128 << (width - prefix)) - 1
    };
    if bits & host_mask != 0 {
        return Err(invalid("host bits are set"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::sim::api::LaunchRequest;

    fn request(name: &str, node: &str, cidr: &str) -> CreateRouteRequest {
        CreateRouteRequest {
            name: name.into(),
            cluster: "kubernetes".into(),
            target_node: node.into(),
            destination_cidr: cidr.into(),
        }
    }

    const T0: Timestamp = Timestamp::UNIX_EPOCH;

    #[test]
    fn create_list_and_delete() {
        let mut state = CloudState::default();
        let (route, created) = state
            .create_route(request("kubernetes-uid-a", "node-a", "10.244.0.0/24"), T0)
            .expect("create");
        assert!(created);
        assert_eq!(route.target_node, "node-a");
        let (_, created) = state
            .create_route(request("kubernetes-uid-a", "node-a", "10.244.0.0/24"), T0)
            .expect("the same again");
        assert!(!created);
        state
            .create_route(
                request("kubernetes-uid-b", "node-b", "fd00:10:244:1::/64"),
                T0,
            )
            .expect("IPv6");
        let mut other = request("other-uid-c", "node-c", "10.244.0.0/24");
        other.cluster = "other".into();
        state.create_route(other, T0).expect("another cluster may");
        let names = |routes: Vec<CloudRoute>| -> Vec<String> {
            routes.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(
            names(state.routes(Some("kubernetes"))),
            ["kubernetes-uid-a", "kubernetes-uid-b"]
        );
        assert_eq!(state.routes(None).len(), 3);
        assert_eq!(
            state
                .delete_route("kubernetes-uid-a")
                .map(|r| r.destination_cidr),
            Ok("10.244.0.0/24".into())
        );
        assert_eq!(
            state
                .delete_route("kubernetes-uid-a")
                .map_err(|e| e.status()),
            Err(404)
        );
    }

    #[test]
    fn conflicts_are_refused() {
        let mut state = CloudState::default();
        state
            .create_route(request("k-a", "node-a", "10.244.0.0/24"), T0)
            .expect("create");
        let moved = state.create_route(request("k-a", "node-b", "10.244.0.0/24"), T0);
        assert_eq!(moved.map_err(|e| e.status()), Err(409));
        let same_cidr = state
            .create_route(request("k-b", "node-b", "10.244.0.0/24"), T0)
            .expect_err("shared CIDR");
        assert_eq!(
            same_cidr.to_string(),
            "route k-a already sends 10.244.0.0/24 to node-a"
        );
    }

    #[test]
    fn bad_destinations_are_refused() {
        let mut state = CloudState::default();
        for (cidr, why) in [
            ("10.244.1.5/24", "host bits are set"),
            ("10.244.1.0", "not a CIDR"),
            ("10.244.1.0/33", "too long"),
            ("ten/8", "not an IP address"),
            ("10.0.0.0/x", "not a number"),
        ] {
            let err = state
                .create_route(request("k-a", "node-a", cidr), T0)
                .expect_err(cidr);
            assert_eq!(err.status(), 400);
            assert!(err.to_string().contains(why), "{cidr}: {err}");
        }
        assert!(
            state
                .create_route(request("k-a", "node-a", "0.0.0.0/0"), T0)
                .is_ok()
        );
    }

    #[test]
    fn a_route_to_a_node_without_a_running_instance_is_a_blackhole() {
        let mut state = CloudState::default();
        let launch = LaunchRequest {
            name: "node-a".into(),
            internal_ip: None,
            instance_type: None,
        };
        state
            .launch(&launch, T0, &mut StdRng::seed_from_u64(1))
            .expect("launch");
        state
            .create_route(request("k-a", "node-a", "10.244.0.0/24"), T0)
            .expect("create");
        state
            .create_route(request("k-b", "node-b", "10.244.1.0/24"), T0)
            .expect("create");
        let blackholes = |s: &CloudState| -> Vec<bool> {
            s.routes(None).into_iter().map(|r| r.blackhole).collect()
        };
        assert_eq!(blackholes(&state), [false, true]);
        state.stop("node-a").expect("stop");
        assert_eq!(blackholes(&state), [true, true]);
        state.start("node-a").expect("start");
        state.terminate("node-a", T0).expect("terminate");
        assert_eq!(blackholes(&state), [true, true]);
    }
}
