//! The route controller: a cloud route for each Node's pod CIDR, so that pods on different
//! nodes reach each other through the cloud's network, and the Node's `NetworkUnavailable`
//! condition saying whether it has one.
//!
//! Mirrors `k8s.io/cloud-provider/controllers/route/route_controller.go` (`reconcile`,
//! `getRouteAction`, `updateNetworkingCondition`, `isResponsibleForRoute`). It runs only with
//! `--allocate-node-cidrs` and `--configure-cloud-routes` (default on), as in Kubernetes.
//!
//! ```text
//!   every --route-reconciliation-period (10 s):
//!     cloud ListRoutes + the Nodes ─▶ plan (sans-IO):
//!       a pod CIDR without a route to its node ─▶ CreateRoute(name hint = Node UID)
//!           failed ─▶ event FailedToCreateRoute (Warning)
//!       a route of ours (in --cluster-cidr) whose node or CIDR is gone, or blackholed
//!           ─▶ DeleteRoute
//!     then each Node: every pod CIDR routed ─▶ NetworkUnavailable False "RouteCreated"
//!                     none                ─▶ NetworkUnavailable True  "NoRouteCreated"
//! ```
//!
//! A periodic loop like Kubernetes' (no work queue to pause). As there, deletions and
//! creations run side by side, at most [`MAX_CONCURRENT_ROUTE_CREATIONS`] (200) of each in
//! flight (Kubernetes limits only the creations), and then the Nodes' conditions are written side by side (Kubernetes starts a
//! goroutine per Node; here at most [`MAX_CONCURRENT_CONDITION_UPDATES`] at once). With
//! 10,000 nodes one at a time would take minutes: each creation is a save of the cloud's
//! state, which creations in flight together share.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::{EventType, Ipv4Cidr};
use client::{Lister, SharedInformerFactory};
use cloud::Route;
use controllers::Event;
use controllers::executor::Executor;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::node::controller::node_object_ref;

/// `maxConcurrentRouteCreations`: creations in flight at once.
pub const MAX_CONCURRENT_ROUTE_CREATIONS: usize = 200;
/// Nodes' `NetworkUnavailable` updates in flight at once.
pub const MAX_CONCURRENT_CONDITION_UPDATES: usize = 200;

/// What one reconciliation does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoutePlan {
    /// Routes to delete.
    pub delete: Vec<Route>,
    /// Routes to create, each with its name hint (the Node's UID).
    pub create: Vec<(String, Route)>,
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

/// `isResponsibleForRoute`: the route's destination lies in the cluster CIDR.
pub fn is_responsible(route: &Route, cluster_cidr: &Ipv4Cidr) -> bool {
    route
        .destination_cidr
        .parse::<Ipv4Cidr>()
        .is_ok_and(|c| cluster_cidr.contains(c.network()))
}

/// `reconcile`'s decisions: which routes to delete and which to create.
pub fn plan(nodes: &[Arc<Node>], routes: &[Route], cluster_cidr: &Ipv4Cidr) -> RoutePlan {
    let mut existing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in routes.iter().filter(|r| !r.target_node.is_empty()) {
        existing
            .entry(r.target_node.as_str())
            .or_default()
            .insert(r.destination_cidr.as_str());
    }
    let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut plan = RoutePlan::default();
    for node in nodes {
        let cidrs = pod_cidrs(node);
        if cidrs.is_empty() {
            continue;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        for cidr in &cidrs {
            let routed = existing
                .get(name.as_str())
                .is_some_and(|c| c.contains(cidr.as_str()));
            if !routed {
                plan.create.push((
                    node.metadata.uid.clone().unwrap_or_default(),
                    Route {
                        name: String::new(),
                        target_node: name.clone(),
                        destination_cidr: cidr.clone(),
                        blackhole: false,
                    },
                ));
            }
        }
        wanted.insert(name, cidrs.into_iter().collect());
    }
    for route in routes {
        if !is_responsible(route, cluster_cidr) {
            continue;
        }
        let kept = wanted
            .get(&route.target_node)
            .is_some_and(|c| c.contains(&route.destination_cidr));
        if route.blackhole || !kept {
            plan.delete.push(route.clone());
        }
    }
    plan
}

/// The `NetworkUnavailable` condition to write on `node`, if it must change: False
/// "RouteCreated" once every pod CIDR has a route, True "NoRouteCreated" while none has.
pub fn network_condition(
    node: &Node,
    routed: usize,
    now: jiff::Timestamp,
) -> Option<NodeCondition> {
    let cidrs = pod_cidrs(node).len();
    if cidrs == 0 || (routed > 0 && routed < cidrs) {
        return None;
    }
    let created = routed == cidrs;
    let status = if created { "False" } else { "True" };
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "NetworkUnavailable"));
    if current.is_some_and(|c| c.status == status) {
        return None;
    }
    let (reason, message) = if created {
        ("RouteCreated", "RouteController created a route")
    } else {
        ("NoRouteCreated", "RouteController failed to create a route")
    };
    Some(NodeCondition {
        type_: "NetworkUnavailable".into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(Time(now)),
        last_heartbeat_time: Some(Time(now)),
    })
}

/// The route controller.
pub struct RouteController {
    nodes: Lister<Node>,
    cloud: Arc<dyn cloud::Interface>,
    executor: Executor,
    cluster_name: String,
    cluster_cidr: Ipv4Cidr,
    period: Duration,
}

impl RouteController {
    /// Builds it on the factory's Node informer; `period` is `--route-reconciliation-period`.
    pub fn new(
        factory: &SharedInformerFactory,
        cloud: Arc<dyn cloud::Interface>,
        executor: Executor,
        cluster_name: String,
        cluster_cidr: Ipv4Cidr,
        period: Duration,
    ) -> Self {
        RouteController {
            nodes: Lister::new(factory.informer::<Node>().indexer().clone()),
            cloud,
            executor,
            cluster_name,
            cluster_cidr,
            period,
        }
    }

    /// Reconciles every period until `shutdown` fires (call after the caches synced).
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            if let Err(e) = self.reconcile_node_routes().await {
                tracing::warn!(error = %e, "Couldn't reconcile node routes");
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.executor.clock().sleep(self.period) => {}
            }
        }
    }

    /// `reconcileNodeRoutes`: one pass.
    pub async fn reconcile_node_routes(&self) -> Result<(), String> {
        let Some(routes_api) = self.cloud.routes() else {
            return Err("the cloud provider does not support routes".into());
        };
        let routes = routes_api
            .list_routes(&self.cluster_name)
            .await
            .map_err(|e| format!("error listing routes: {e}"))?;
        let nodes = self.nodes.list(None, &apimachinery::Selector::everything());
        let plan = plan(&nodes, &routes, &self.cluster_cidr);
        let cluster = self.cluster_name.as_str();
        // Owned items: a stream over borrowed ones trips the compiler's check that the
        // controller's future is Send.
        let deletions = futures::stream::iter(plan.delete.clone())
            .map(|route| async move {
                let deleted = routes_api.delete_route(cluster, &route).await;
                (route, deleted)
            })
            .buffer_unordered(MAX_CONCURRENT_ROUTE_CREATIONS);
        futures::pin_mut!(deletions);
        while let Some((route, deleted)) = deletions.next().await {
            match deleted {
                Ok(()) => {
                    tracing::info!(route = %route.name, cidr = %route.destination_cidr, "Deleted route")
                }
                Err(e) => tracing::warn!(route = %route.name, error = %e, "Could not delete route"),
            }
        }
        let mut routed: BTreeMap<String, usize> = BTreeMap::new();
        for r in routes.iter().filter(|r| !plan.delete.contains(r)) {
            *routed.entry(r.target_node.clone()).or_default() += 1;
        }
        let by_name: HashMap<&str, &Arc<Node>> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
            .collect();
        let creations = futures::stream::iter(plan.create.clone())
            .map(|(hint, route)| async move {
                let started = std::time::Instant::now();
                let created = routes_api.create_route(cluster, &hint, &route).await;
                (hint, route, started.elapsed(), created)
            })
            .buffer_unordered(MAX_CONCURRENT_ROUTE_CREATIONS);
        futures::pin_mut!(creations);
        while let Some((hint, route, took, created)) = creations.next().await {
            match created {
                Ok(()) => {
                    tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, "Created route for node");
                    *routed.entry(route.target_node.clone()).or_default() += 1;
                }
                Err(e) => {
                    let message = format!(
                        "Could not create route {hint} {} for node {} after {took:?}: {e}",
                        route.destination_cidr, route.target_node,
                    );
                    tracing::warn!("{message}");
                    if let Some(node) = by_name.get(route.target_node.as_str()) {
                        self.executor.record(&Event {
                            regarding: node_object_ref(node),
                            type_: EventType::Warning,
                            reason: "FailedToCreateRoute".into(),
                            message,
                        });
                    }
                }
            }
        }
        let now = self.executor.clock().wall();
        let api = Api::<Node>::all(self.executor.client());
        let mut patches = Vec::new();
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let count = routed.get(&name).copied().unwrap_or(0);
            if let Some(condition) = network_condition(node, count, now) {
                patches.push((name, json!({ "status": { "conditions": [condition] } })));
            }
        }
        let updates = futures::stream::iter(patches)
            .map(|(name, patch)| {
                let api = api.clone();
                async move {
                    let patched = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                        .await;
                    (name, patched)
                }
            })
            .buffer_unordered(MAX_CONCURRENT_CONDITION_UPDATES);
        futures::pin_mut!(updates);
        while let Some((name, patched)) = updates.next().await {
            if let Err(e) = patched {
                tracing::warn!(node = %name, error = %e, "failed to update networking condition");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, cidr: Option<&str>) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: cidr.map(|c| vec![c.to_string()]),
                ..Default::default()
            }),
            status: Some(NodeStatus::default()),
        })
    }

    fn route(name: &str, node: &str, cidr: &str) -> Route {
        Route {
            name: name.into(),
            target_node: node.into(),
            destination_cidr: cidr.into(),
            blackhole: false,
        }
    }

    fn cluster() -> Ipv4Cidr {
        "10.244.0.0/16".parse().expect("cidr")
    }

    #[test]
    fn missing_routes_are_created_and_stale_ones_of_ours_deleted() {
        let nodes = [
            node("a", Some("10.244.0.0/24")),
            node("b", Some("10.244.1.0/24")),
            node("c", None),
        ];
        let routes = [
            route("k-uid-a", "a", "10.244.0.0/24"),
            route("k-old", "gone", "10.244.7.0/24"),
            route("k-moved", "b", "10.244.9.0/24"),
            route("someone-else", "x", "192.168.0.0/24"),
        ];
        let p = plan(&nodes, &routes, &cluster());
        assert_eq!(
            p.create,
            vec![("uid-b".to_string(), route("", "b", "10.244.1.0/24"))]
        );
        let deleted: Vec<&str> = p.delete.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(deleted, ["k-old", "k-moved"], "not someone-else's route");
    }

    #[test]
    fn blackholed_routes_are_replaced() {
        let nodes = [node("a", Some("10.244.0.0/24"))];
        let mut hole = route("k-uid-a", "a", "10.244.0.0/24");
        hole.blackhole = true;
        let p = plan(&nodes, &[hole.clone()], &cluster());
        assert_eq!(p.delete, vec![hole]);
        assert!(p.create.is_empty(), "the next pass creates it again");
    }

    #[test]
    fn network_unavailable_follows_the_routes_and_is_written_once() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let n = node("a", Some("10.244.0.0/24"));
        let c = network_condition(&n, 1, now).expect("changes");
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("RouteCreated"));
        assert_eq!(
            c.message.as_deref(),
            Some("RouteController created a route")
        );
        let mut with = (*n).clone();
        with.status = Some(NodeStatus {
            conditions: Some(vec![c]),
            ..Default::default()
        });
        assert_eq!(network_condition(&with, 1, now), None, "already False");
        let c = network_condition(&with, 0, now).expect("changes");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some("NoRouteCreated"))
        );
        assert_eq!(network_condition(&node("c", None), 0, now), None);
    }
}
