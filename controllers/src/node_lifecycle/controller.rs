//! The node lifecycle controller's async shell: `NodeLifecycleController.Run` /
//! `monitorNodeHealth` in `pkg/controller/nodelifecycle/node_lifecycle_controller.go` and the
//! deleting half of `pkg/controller/tainteviction/taint_eviction.go`.
//!
//! ```text
//!   informers: Nodes, Leases (kube-node-lease), Pods (indexed by spec.nodeName)
//!   every node-monitor-period:
//!     for each node: monitor_node (sans-IO) ─▶ PATCH node status conditions (Unknown)
//!                    Ready True → not True: event NodeNotReady on the Node, each Ready pod
//!                    on it PUT not Ready + Warning NodeNotReady (MarkPodsNotReady)
//!                                           ─▶ PATCH node spec.taints
//!     for each pod on a node with NoExecute taints: eviction (sans-IO)
//!        Now ─▶ event TaintManagerEviction + DELETE pod (UID precondition)
//! ```
//!
//! Unlike Kubernetes, eviction is checked on the monitor tick rather than through a per-pod
//! timed worker queue, and `tolerationSeconds` count from the taint's `timeAdded` (Kubernetes
//! counts from when its taint manager saw the taint; the two agree unless the controller
//! restarts). Zone-based rate limiting of evictions (`--node-eviction-rate`,
//! disruption modes) is not simulated.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::{EventType, ObjectKey};
use client::indexer::{NODE_NAME_INDEX, pod_node_name_index_func};
use client::shared_informer::SharedIndexInformer;
use client::{EventRecorder, SharedClock, SharedInformerFactory};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Taint};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    Config, Eviction, NodeHealth, became_not_ready, eviction, mark_pod_not_ready, monitor_node,
};
use crate::error::Result;

/// The namespace of node Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node lifecycle controller (node health, taints, taint-based eviction).
pub struct NodeLifecycleController {
    client: Client,
    factory: SharedInformerFactory,
    nodes: SharedIndexInformer<Node>,
    leases: SharedIndexInformer<Lease>,
    pods: SharedIndexInformer<Pod>,
    config: Config,
    recorder: EventRecorder,
    clock: SharedClock,
    /// `nodeHealthMap`: what was last observed of each node, on this controller's clock.
    health: HashMap<String, NodeHealth>,
}

impl NodeLifecycleController {
    /// Builds the controller on `factory`'s Node, Lease and Pod informers (call before the
    /// factory starts: it adds the pods' node-name index). Events go to `recorder`
    /// (component `node-controller` in Kubernetes).
    pub fn new(
        client: Client,
        factory: &SharedInformerFactory,
        config: Config,
        recorder: EventRecorder,
        clock: SharedClock,
    ) -> Self {
        let pods = factory.informer::<Pod>();
        if !pods.indexer().has_index(NODE_NAME_INDEX) {
            pods.add_indexer(NODE_NAME_INDEX, Arc::new(pod_node_name_index_func));
        }
        NodeLifecycleController {
            client,
            factory: factory.clone(),
            nodes: factory.informer::<Node>(),
            leases: factory.informer::<Lease>(),
            pods,
            config,
            recorder,
            clock,
            health: HashMap::new(),
        }
    }

    /// Runs until `shutdown` fires: starts the informers it needs (if not already), waits
    /// for their caches, then checks every node each `node_monitor_period`.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        self.factory.start(&shutdown);
        if !self.factory.wait_for_cache_sync(&shutdown).await {
            return Ok(());
        }
        tracing::info!(
            grace = ?self.config.node_monitor_grace_period,
            period = ?self.config.node_monitor_period,
            "node lifecycle controller started"
        );
        loop {
            self.monitor_node_health().await;
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = self.clock.sleep(self.config.node_monitor_period) => {}
            }
        }
    }

    fn lease_renew_time(&self, node: &str) -> Option<Timestamp> {
        self.leases
            .get(&ObjectKey::new(Some(LEASE_NAMESPACE), node))
            .and_then(|l| {
                l.spec
                    .as_ref()
                    .and_then(|s| s.renew_time.as_ref().map(|t| t.0))
            })
    }

    /// One pass over every node (`monitorNodeHealth`), then taint eviction on each.
    pub async fn monitor_node_health(&mut self) {
        let now = self.clock.wall();
        let nodes = self.nodes.indexer().list();
        let names: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        self.health.retain(|name, _| names.contains(name));
        for node in nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let renew = self.lease_renew_time(&name);
            let previous = self.health.remove(&name);
            let (health, decision) = monitor_node(&node, renew, previous, &self.config, now);
            let not_ready_now = became_not_ready(&node, &decision);
            self.health.insert(name.clone(), health);
            if let Some(summary) = &decision.summary {
                tracing::info!("{summary}");
            }
            let api: Api<Node> = Api::all(self.client.clone());
            if let Some(conditions) = &decision.conditions {
                let patch = json!({ "status": { "conditions": conditions } });
                if let Err(e) = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!(node = %name, error = %e, "marking node Unknown failed");
                    continue;
                }
                if not_ready_now {
                    self.mark_pods_not_ready(&name, now).await;
                }
            }
            let taints = match decision.taints {
                Some(taints) => {
                    let patch = json!({ "spec": { "taints": taints } });
                    if let Err(e) = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        tracing::warn!(node = %name, error = %e, "updating node taints failed");
                        continue;
                    }
                    taints
                }
                None => node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
            };
            if taints.iter().any(|t| t.effect == "NoExecute") {
                self.evict_pods(&name, &taints, now).await;
            }
        }
    }

    /// `RecordNodeStatusChange(node, "NodeNotReady")` and `MarkPodsNotReady`: a Normal event on
    /// the Node, then each Ready pod on it turned not Ready with a Warning `NodeNotReady`.
    async fn mark_pods_not_ready(&self, name: &str, now: Timestamp) {
        let node_ref = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.to_owned()),
            // Kubernetes refers to nodes by name in their events' UID.
            uid: Some(name.to_owned()),
            ..Default::default()
        };
        self.recorder.event(
            &node_ref,
            EventType::Normal,
            "NodeNotReady",
            &format!("Node {name} status is now: NodeNotReady"),
        );
        let pods = self
            .pods
            .indexer()
            .by_index(NODE_NAME_INDEX, name)
            .unwrap_or_default();
        for pod in pods {
            let Some(updated) = mark_pod_not_ready(&pod, now) else {
                continue;
            };
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            match api
                .replace_status(&pod_name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {
                    tracing::info!(pod = %format!("{namespace}/{pod_name}"), node = name, "updating ready status of pod to false");
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: Some(pod_name),
                        namespace: Some(namespace),
                        uid: pod.metadata.uid.clone(),
                        ..Default::default()
                    };
                    self.recorder.event(
                        &reference,
                        EventType::Warning,
                        "NodeNotReady",
                        "Node is not ready",
                    );
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{namespace}/{pod_name}"), error = %e, "marking the pod not ready failed")
                }
            }
        }
    }

    /// `processPodOnNode` for every pod on `node`.
    async fn evict_pods(&self, node: &str, taints: &[Taint], now: Timestamp) {
        let pods = self
            .pods
            .indexer()
            .by_index(NODE_NAME_INDEX, node)
            .unwrap_or_default();
        for pod in pods {
            if pod.metadata.deletion_timestamp.is_some()
                || eviction(&pod, taints, now) != Eviction::Now
            {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let reference = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            };
            self.recorder.event(
                &reference,
                EventType::Normal,
                "TaintManagerEviction",
                &format!("Marking for deletion Pod {namespace}/{name}"),
            );
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match Api::<Pod>::namespaced(self.client.clone(), &namespace)
                .delete(&name, &params)
                .await
            {
                Ok(_) => {
                    tracing::info!(pod = %format!("{namespace}/{name}"), node, "evicted by taint")
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(pod = %format!("{namespace}/{name}"), error = %e, "eviction failed")
                }
            }
        }
    }
}
