//! When is a starting cluster ready? When the API server serves and every node reports
//! `Ready=True` through the API — what `kubectl wait --for=condition=Ready node --all` checks —
//! and, on a cloud, the cloud-controller-manager has initialized it (pods can schedule there).

use std::collections::HashSet;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};

use crate::error::Result;

/// The first pause between polls; it doubles up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(2);
/// The longest pause between polls.
const MAX_POLL: Duration = Duration::from_millis(50);
/// How long one watch of the nodes lasts before it is made again (the server ends it).
const WATCH_SECONDS: u32 = 60;

/// Waits until the API server answers `GET /version` (it serves only once its bootstrap,
/// the default namespaces, is done). Retries until the caller's deadline.
pub(crate) async fn wait_serving(client: &kube::Client) {
    let mut pause = FIRST_POLL;
    while let Err(error) = client.apiserver_version().await {
        tracing::debug!(%error, "API server not serving yet");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// Waits until every node in `names` reports `Ready=True` (and, with `initialized`, has lost
/// the uninitialized taint). Nodes of an earlier run with more nodes (same data dir) are not
/// waited for.
///
/// As `kubectl wait` does: one list, then a watch from the list's resourceVersion that keeps
/// the set of nodes still waited for, until it is empty (a watch that ends or is refused lists
/// again). Polling the list instead would make the API server encode every node over and over
/// while 10,000 of them register.
pub(crate) async fn wait_nodes_ready(
    client: &kube::Client,
    names: &[String],
    initialized: bool,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    let done = |n: &Node| is_ready(n) && (!initialized || !is_uninitialized(n));
    let mut pause = FIRST_POLL;
    loop {
        let list = nodes.list(&ListParams::default()).await?;
        let mut waiting = wanted.clone();
        for n in list.items.iter().filter(|n| done(n)) {
            waiting.remove(n.metadata.name.as_deref().unwrap_or_default());
        }
        if waiting.is_empty() {
            return Ok(());
        }
        let version = list.metadata.resource_version.unwrap_or_default();
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let Ok(stream) = nodes.watch(&params, &version).await else {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
            continue;
        };
        let mut stream = std::pin::pin!(stream);
        while let Ok(Some(event)) = stream.try_next().await {
            let (node, gone) = match &event {
                WatchEvent::Added(n) | WatchEvent::Modified(n) => (n, false),
                WatchEvent::Deleted(n) => (n, true),
                // 410 Gone or another refusal: list again.
                WatchEvent::Error(_) => break,
                WatchEvent::Bookmark(_) => continue,
            };
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let Some(&name) = wanted.get(name) else {
                continue;
            };
            if !gone && done(node) {
                waiting.remove(name);
            } else {
                waiting.insert(name);
            }
            if waiting.is_empty() {
                return Ok(());
            }
        }
    }
}

/// Whether the node still waits for the cloud-controller-manager (tainted
/// `node.cloudprovider.kubernetes.io/uninitialized`): pods do not schedule onto it.
pub(crate) fn is_uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key == kubelet_sim::node_status::TAINT_UNINITIALIZED)
        })
}

/// Whether the node's `Ready` condition is `True`.
pub(crate) fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::is_ready;
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};

    fn node(conditions: &[(&str, &str)]) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            ..NodeCondition::default()
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn ready_means_the_ready_condition_is_true() {
        assert!(is_ready(&node(&[
            ("MemoryPressure", "False"),
            ("Ready", "True")
        ])));
        assert!(!is_ready(&node(&[("Ready", "Unknown")])));
        assert!(!is_ready(&node(&[("Ready", "False")])));
        assert!(!is_ready(&node(&[])));
        assert!(!is_ready(&Node::default()));
    }
}
