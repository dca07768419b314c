//! The cloud node lifecycle controller: a Node whose instance is gone from the cloud is
//! deleted, one whose instance is shut down is tainted `node.cloudprovider.kubernetes.io/shutdown`.
//!
//! Mirrors `k8s.io/cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go`
//! (`MonitorNodes`). Only Nodes that are not Ready are asked about: a Ready Node's instance is
//! running by definition, and its shutdown taint (if any) is removed.
//!
//! ```text
//!   every --node-monitor-period (5 s), for each Node:
//!     Ready True ─▶ remove the shutdown taint if present
//!     else cloud InstanceExists? no ─▶ event DeletingNode, DELETE Node
//!          yes: InstanceShutdown? ─▶ add node.cloudprovider.kubernetes.io/shutdown:NoSchedule
//! ```
//!
//! Like kube-controller-manager's node lifecycle controller it is a periodic loop, not a work
//! queue: there is nothing to pause or step.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::EventType;
use client::{Lister, SharedInformerFactory};
use controllers::Event;
use controllers::executor::Executor;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::node::controller::node_object_ref;
use crate::node::node_ref;

/// `cloudproviderapi.TaintNodeShutdown`.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// What to do to one Node after asking the cloud.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing to change.
    Keep,
    /// Its instance is gone: delete the Node.
    Delete,
    /// Write this taint list (the shutdown taint added or removed).
    Taints(Vec<Taint>),
}

/// Whether the Node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// A Ready Node: remove the shutdown taint if it has one.
pub fn ready_verdict(node: &Node) -> Verdict {
    let current = taints(node);
    if current.iter().any(|t| t.key == TAINT_SHUTDOWN) {
        Verdict::Taints(
            current
                .into_iter()
                .filter(|t| t.key != TAINT_SHUTDOWN)
                .collect(),
        )
    } else {
        Verdict::Keep
    }
}

/// A Node that is not Ready, given what the cloud says of its instance.
pub fn not_ready_verdict(node: &Node, exists: bool, shutdown: bool) -> Verdict {
    if !exists {
        return Verdict::Delete;
    }
    let mut current = taints(node);
    if shutdown && !current.iter().any(|t| t.key == TAINT_SHUTDOWN) {
        current.push(Taint {
            key: TAINT_SHUTDOWN.into(),
            value: None,
            effect: "NoSchedule".into(),
            time_added: None,
        });
        return Verdict::Taints(current);
    }
    Verdict::Keep
}

/// The controller.
pub struct CloudNodeLifecycleController {
    nodes: Lister<Node>,
    cloud: Arc<dyn cloud::Interface>,
    executor: Executor,
    period: Duration,
}

impl CloudNodeLifecycleController {
    /// Builds it on the factory's Node informer; `period` is `--node-monitor-period`.
    pub fn new(
        factory: &SharedInformerFactory,
        cloud: Arc<dyn cloud::Interface>,
        executor: Executor,
        period: Duration,
    ) -> Self {
        CloudNodeLifecycleController {
            nodes: Lister::new(factory.informer::<Node>().indexer().clone()),
            cloud,
            executor,
            period,
        }
    }

    /// Checks the Nodes every period until `shutdown` fires (call after the caches synced).
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            self.monitor_nodes().await;
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.executor.clock().sleep(self.period) => {}
            }
        }
    }

    /// `MonitorNodes`: one pass over every Node.
    pub async fn monitor_nodes(&self) {
        let Some(instances) = self.cloud.instances_v2() else {
            return;
        };
        for node in self.nodes.list(None, &apimachinery::Selector::everything()) {
            let name = node.metadata.name.clone().unwrap_or_default();
            let verdict = if is_ready(&node) {
                ready_verdict(&node)
            } else {
                let reference = node_ref(&node);
                let exists = match instances.instance_exists(&reference).await {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "error checking if node exists");
                        continue;
                    }
                };
                let shutdown = exists
                    && match instances.instance_shutdown(&reference).await {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(node = %name, error = %e, "error checking if node is shutdown");
                            false
                        }
                    };
                not_ready_verdict(&node, exists, shutdown)
            };
            self.carry_out(&node, verdict).await;
        }
    }

    async fn carry_out(&self, node: &Node, verdict: Verdict) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let api: Api<Node> = Api::all(self.executor.client());
        match verdict {
            Verdict::Keep => {}
            Verdict::Delete => {
                tracing::info!(node = %name, "deleting node since it is no longer present in cloud provider");
                self.executor.record(&Event {
                    regarding: node_object_ref(node),
                    type_: EventType::Normal,
                    reason: "DeletingNode".into(),
                    message: format!(
                        "Deleting node {name} because it does not exist in the cloud provider"
                    ),
                });
                if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                    tracing::warn!(node = %name, error = %e, "unable to delete node");
                    self.executor.record(&Event {
                        regarding: node_object_ref(node),
                        type_: EventType::Warning,
                        reason: "DeletingNodeFailed".into(),
                        message: format!("Failed deleting node {name}: {e}"),
                    });
                }
            }
            Verdict::Taints(taints) => {
                let shut = taints.iter().any(|t| t.key == TAINT_SHUTDOWN);
                // With the resourceVersion it was decided on: the node lifecycle controller
                // of kube-controller-manager writes the same list (a conflict waits a period).
                let patch = json!({
                    "metadata": { "resourceVersion": node.metadata.resource_version },
                    "spec": { "taints": if taints.is_empty() { json!(null) } else { json!(taints) } },
                });
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) if shut => {
                        tracing::info!(node = %name, "instance shut down: node tainted {TAINT_SHUTDOWN}")
                    }
                    Ok(_) => tracing::info!(node = %name, "node Ready: {TAINT_SHUTDOWN} removed"),
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "error patching node taints")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    use super::*;

    fn node(ready: &str, shutdown_taint: bool) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: shutdown_taint.then(|| {
                    vec![Taint {
                        key: TAINT_SHUTDOWN.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn ready_nodes_lose_the_shutdown_taint_and_are_not_asked_about() {
        assert!(is_ready(&node("True", false)));
        assert_eq!(ready_verdict(&node("True", false)), Verdict::Keep);
        assert_eq!(
            ready_verdict(&node("True", true)),
            Verdict::Taints(Vec::new())
        );
    }

    #[test]
    fn gone_instances_delete_the_node_and_stopped_ones_taint_it_once() {
        let n = node("Unknown", false);
        assert!(!is_ready(&n));
        assert_eq!(not_ready_verdict(&n, false, false), Verdict::Delete);
        match not_ready_verdict(&n, true, true) {
            Verdict::Taints(t) => {
                assert_eq!(t.len(), 1);
                assert_eq!(t[0].key, TAINT_SHUTDOWN);
                assert_eq!(t[0].effect, "NoSchedule");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            not_ready_verdict(&node("False", true), true, true),
            Verdict::Keep
        );
        assert_eq!(not_ready_verdict(&n, true, false), Verdict::Keep);
    }
}
