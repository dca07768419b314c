//! Unit tests of the DaemonSet's rolling update: one node at a time without surge, new pods
//! first with surge, percentages rounded up.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use k8s_openapi::api::apps::v1::DaemonSet;

use super::nodes_to_daemon_pods;
use super::rolling::{RollingStep, rolling_update};
use super::tests::{creates_and_deletes, daemon_set, node, pod, run, status_of, with_surge};
use crate::testing::at;

/// Nodes with no labels or taints, named `names`.
fn plain_nodes(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| node(n, &[], vec![])).collect()
}

/// A Ready pod `logger-<node>` of revision `h1` on each node.
fn old_pods(nodes: &[Node]) -> Vec<Pod> {
    nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.as_deref().unwrap_or("");
            pod(&format!("logger-{name}"), name, "h1", 0, Some(0))
        })
        .collect()
}

/// One rolling-update step towards revision `h2` at second `t`.
fn step_at(ds: &DaemonSet, nodes: &[Node], pods: &[Pod], t: i64) -> RollingStep {
    let node_refs: Vec<&Node> = nodes.iter().collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    rolling_update(
        ds,
        &node_refs,
        &nodes_to_daemon_pods(&refs, false),
        "h2",
        None,
        at(t),
    )
}

#[test]
fn rolling_update_without_surge_replaces_one_node_at_a_time() {
    let ds = daemon_set("logger:v2");
    let nodes = plain_nodes(&["a", "b", "c"]);
    let old = old_pods(&nodes);
    let step = step_at(&ds, &nodes, &old, 10);
    assert_eq!((step.max_surge, step.max_unavailable), (0, 1));
    assert_eq!(step.pods_to_delete, ["logger-a"]);
    assert!(step.nodes_to_create.is_empty());
    // a has its new pod, not yet ready: nothing more this step.
    let mid = [
        pod("logger-a2", "a", "h2", 20, None),
        pod("logger-b", "b", "h1", 0, Some(0)),
        pod("logger-c", "c", "h1", 0, Some(0)),
    ];
    let step = step_at(&ds, &nodes, &mid, 30);
    assert!(step.pods_to_delete.is_empty());
    // Ready: b goes next. Through the whole sync, the status counts 1 updated of 3.
    let ready = [
        pod("logger-a2", "a", "h2", 20, Some(25)),
        pod("logger-b", "b", "h1", 0, Some(0)),
        pod("logger-c", "c", "h1", 0, Some(0)),
    ];
    let (out, _) = run(&ds, &nodes, &ready, "h2", 30);
    assert_eq!(
        creates_and_deletes(&out.actions),
        (vec![], vec!["logger-b".to_owned()])
    );
    let status = status_of(&out.actions).expect("status");
    assert_eq!(status.updated_number_scheduled, Some(1));
    assert_eq!(status.number_available, Some(3));
    assert_eq!(status.number_ready, 3);
}

#[test]
fn max_unavailable_as_a_percentage_rounds_up() {
    let mut ds = daemon_set("logger:v2");
    if let Some(ru) = ds
        .spec
        .as_mut()
        .and_then(|s| s.update_strategy.as_mut())
        .and_then(|u| u.rolling_update.as_mut())
    {
        ru.max_unavailable = Some(IntOrString::String("50%".into()));
    }
    let nodes = plain_nodes(&["a", "b", "c"]);
    let old = old_pods(&nodes);
    let step = step_at(&ds, &nodes, &old, 10);
    assert_eq!(step.max_unavailable, 2, "50% of 3, rounded up");
    assert_eq!(step.pods_to_delete, ["logger-a", "logger-b"]);
}

#[test]
fn rolling_update_with_surge_creates_first_and_deletes_once_available() {
    let ds = with_surge(daemon_set("logger:v2"), 1);
    let nodes = plain_nodes(&["a", "b"]);
    let old = old_pods(&nodes);
    let step = step_at(&ds, &nodes, &old, 10);
    assert_eq!((step.max_surge, step.max_unavailable), (1, 0));
    assert_eq!(step.nodes_to_create, ["a"]);
    assert!(step.pods_to_delete.is_empty());
    // a surged; its new pod is not available yet: wait, b is not started (surge used up).
    let surged = [
        pod("logger-a", "a", "h1", 0, Some(0)),
        pod("logger-a2", "a", "h2", 20, None),
        pod("logger-b", "b", "h1", 0, Some(0)),
    ];
    let step = step_at(&ds, &nodes, &surged, 21);
    assert!(step.nodes_to_create.is_empty() && step.pods_to_delete.is_empty());
    // Available: a's old pod goes, b surges.
    let available = [
        pod("logger-a", "a", "h1", 0, Some(0)),
        pod("logger-a2", "a", "h2", 20, Some(22)),
        pod("logger-b", "b", "h1", 0, Some(0)),
    ];
    let step = step_at(&ds, &nodes, &available, 30);
    assert_eq!(step.pods_to_delete, ["logger-a"]);
    assert_eq!(step.nodes_to_create, ["b"]);
    // The manage step with surge keeps old + new on one node while the new one is not
    // available, and removes the old once it is.
    let (out, _) = run(&ds, &nodes, &surged, "h2", 21);
    assert!(
        creates_and_deletes(&out.actions).1.is_empty(),
        "{}",
        out.summary
    );
    let (out, _) = run(&ds, &nodes, &available, "h2", 30);
    assert_eq!(creates_and_deletes(&out.actions).1, ["logger-a"]);
}
