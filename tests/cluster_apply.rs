//! End to end through every component at once, as `miniplane up --separate` runs them: API
//! server, controller-manager, scheduler and three simulated kubelets as separate processes,
//! driven by the real kubectl. `kubectl apply` of a 3-replica Deployment ends with 3 Running pods spread
//! over the 3 nodes (`-o wide` shows NODE and IP), `kubectl rollout status` returns, and a
//! `kubectl set image` rolls out to the new image.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use support::component::Component;
use support::{DEADLINE, Server, deployment_yaml, eventually};

#[test]
fn apply_a_deployment_through_every_component_to_running_pods() {
    let s = Server::start();
    let _kubelet = Component::start(
        &s,
        &["kubelet", "--nodes", "3", "--listen", "127.0.0.1:0"],
        "miniplane kubelet:",
    );
    let _scheduler = Component::start(
        &s,
        &["scheduler", "--listen", "127.0.0.1:0"],
        "miniplane scheduler started",
    );
    let _cm = Component::start(
        &s,
        &["controller-manager", "--listen", "127.0.0.1:0"],
        "miniplane controller-manager started",
    );
    eventually("3 Ready nodes", DEADLINE, || {
        let out = s.kubectl_ok(&["get", "nodes", "--no-headers"]);
        (out.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count()
            == 3)
            .then_some(())
    });

    let applied = s.kubectl_run(
        &["apply", "-f", "-"],
        Some(&deployment_yaml("web", 3, "nginx")),
        &[],
    );
    assert!(applied.ok(), "apply failed: {applied}");
    let status = s.kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(status.ok(), "rollout status failed: {status}");

    // Three Running pods, one per node (the scheduler spreads one owner's pods), each with an IP.
    let wide = s.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "wide", "--no-headers"]);
    let rows: Vec<Vec<&str>> = wide
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{wide}");
    for row in &rows {
        assert_eq!(row[2], "Running", "{wide}");
        assert!(
            row[5].starts_with("10.244."),
            "pod IP from a node's podCIDR: {wide}"
        );
    }
    let nodes: BTreeSet<&str> = rows.iter().map(|r| r[6]).collect();
    assert_eq!(nodes.len(), 3, "spread over the 3 nodes: {wide}");

    // A rollout to a new image completes, and only new-image pods remain.
    s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.27"]);
    let status = s.kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(
        status.ok(),
        "rollout status after set image failed: {status}"
    );
    eventually("only nginx:1.27 pods", DEADLINE, || {
        let pods = s.kubectl_json(&["get", "pods", "-l", "app=web", "-o", "json"]);
        let items = pods["items"].as_array()?.clone();
        let images: Vec<String> = items
            .iter()
            .map(|p| {
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        (images.len() == 3 && images.iter().all(|i| i == "nginx:1.27")).then_some(())
    });
}
