//! A whole cluster of separate processes, as `miniplane up --separate` runs it: the API
//! server, `miniplane kubelet --nodes N`, the scheduler and the controller-manager, each a
//! child process, driven by the real kubectl through [`Server`]. Everything stops on drop.

use super::component::Component;
use super::{DEADLINE, Server, eventually};

/// On a secure server ([`Server::start_secure`]): `miniplane kubelet --nodes N` and the
/// scheduler, each with a client certificate of its own identity (the kubelet simulator's
/// user, `system:kube-scheduler`), as `miniplane up` runs them; the caller starts the
/// controller-manager with the flags its test is about.
pub fn secure_nodes_and_scheduler(s: &Server, nodes: usize) -> (Component, Component) {
    let count = nodes.to_string();
    let kubelet = Component::start_as(
        s,
        &["kubelet", "--nodes", &count, "--listen", "127.0.0.1:0"],
        "miniplane kubelet:",
        kubelet_sim::USER,
        &[],
    );
    let scheduler = Component::start_as(
        s,
        &["scheduler", "--listen", "127.0.0.1:0"],
        "miniplane scheduler started",
        "system:kube-scheduler",
        &[],
    );
    (kubelet, scheduler)
}

/// The server and the components, stopped on drop.
pub struct ProcessCluster {
    /// The API server (and kubectl pointed at it).
    pub s: Server,
    _kubelet: Component,
    _scheduler: Component,
    _cm: Component,
}

impl ProcessCluster {
    /// `nodes` simulated nodes, all Ready before the scheduler and the controller-manager
    /// start.
    pub fn start(nodes: usize) -> ProcessCluster {
        ProcessCluster::start_with(nodes, |_| {})
    }

    /// [`ProcessCluster::start`], with `prepare` run once the nodes are Ready and before the
    /// scheduler starts (so the scheduler's first view of the nodes already holds what
    /// `prepare` changed, e.g. node labels).
    pub fn start_with(nodes: usize, prepare: impl FnOnce(&Server)) -> ProcessCluster {
        let s = Server::start();
        let count = nodes.to_string();
        let kubelet = Component::start(
            &s,
            &["kubelet", "--nodes", &count, "--listen", "127.0.0.1:0"],
            "miniplane kubelet:",
        );
        eventually(&format!("{nodes} Ready nodes"), DEADLINE, || {
            let out = s.kubectl_ok(&["get", "nodes", "--no-headers"]);
            (out.lines()
                .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
                .count()
                == nodes)
                .then_some(())
        });
        prepare(&s);
        let scheduler = Component::start(
            &s,
            &["scheduler", "--listen", "127.0.0.1:0"],
            "miniplane scheduler started",
        );
        let cm = Component::start(
            &s,
            &["controller-manager", "--listen", "127.0.0.1:0"],
            "miniplane controller-manager started",
        );
        ProcessCluster {
            s,
            _kubelet: kubelet,
            _scheduler: scheduler,
            _cm: cm,
        }
    }
}
