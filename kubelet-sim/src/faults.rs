//! The simulator's side of the admin API's node faults (`docs/faults.md`): `StopHeartbeats`
//! and `RemoveNode`, learnt from the faults ConfigMap (`client::faults`) so they work from any
//! process (`miniplane fault`, the web UI, a lab), as the control API's routes do for a
//! caller that knows the simulator's own port.
//!
//! No Kubernetes counterpart: in a real cluster one stops the kubelet on the VM, or deletes the
//! VM. [`NodeFaults::plan`] decides; `run` applies.
//!
//! ```text
//!   StopHeartbeats{node}  set ─▶ heartbeats off           cleared ─▶ heartbeats on, pods resynced
//!   RemoveNode{node}      set ─▶ heartbeats off, Node     cleared ─▶ registered again
//!                                object deleted                      (a new VM with the same name)
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use admin::{Fault, FaultSpec};
use client::SharedClock;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::control::SimHandle;
use crate::node;
use crate::pod_workers::lookup;

/// What to do to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeOp {
    /// Switch its heartbeats off.
    StopHeartbeats(String),
    /// Switch them off and delete the Node object.
    Remove(String),
    /// Register it again (after a removal).
    Register(String),
    /// Switch its heartbeats on.
    StartHeartbeats(String),
}

/// The node faults applied so far.
#[derive(Debug, Default)]
pub struct NodeFaults {
    stopped: BTreeSet<String>,
    removed: BTreeSet<String>,
}

impl NodeFaults {
    /// What to do so the nodes of `ours` match `faults`.
    pub fn plan(&mut self, faults: &[Fault], ours: &BTreeSet<String>) -> Vec<NodeOp> {
        let mut stopped = BTreeSet::new();
        let mut removed = BTreeSet::new();
        for f in faults {
            match &f.spec {
                FaultSpec::StopHeartbeats { node } if ours.contains(node) => {
                    stopped.insert(node.clone());
                }
                FaultSpec::RemoveNode { node } if ours.contains(node) => {
                    removed.insert(node.clone());
                }
                _ => {}
            }
        }
        let mut ops = Vec::new();
        for n in removed.difference(&self.removed) {
            ops.push(NodeOp::Remove(n.clone()));
        }
        for n in stopped.difference(&self.stopped) {
            if !removed.contains(n) && !self.removed.contains(n) {
                ops.push(NodeOp::StopHeartbeats(n.clone()));
            }
        }
        for n in self.removed.difference(&removed) {
            ops.push(NodeOp::Register(n.clone()));
            if !stopped.contains(n) {
                ops.push(NodeOp::StartHeartbeats(n.clone()));
            }
        }
        for n in self.stopped.difference(&stopped) {
            if !removed.contains(n) && !self.removed.contains(n) {
                ops.push(NodeOp::StartHeartbeats(n.clone()));
            }
        }
        self.stopped = stopped;
        self.removed = removed;
        ops
    }
}

/// Applies node faults from `faults` until `shutdown` fires.
pub(crate) async fn run(
    handle: SimHandle,
    config: Arc<Config>,
    clock: SharedClock,
    mut faults: watch::Receiver<Vec<Fault>>,
    shutdown: CancellationToken,
) {
    let ours: BTreeSet<String> = handle.node_names().into_iter().collect();
    let mut state = NodeFaults::default();
    loop {
        let current = faults.borrow_and_update().clone();
        for op in state.plan(&current, &ours) {
            apply(&handle, &config, &clock, &op).await;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = faults.changed() => if changed.is_err() { return },
        }
    }
}

async fn apply(handle: &SimHandle, config: &Config, clock: &SharedClock, op: &NodeOp) {
    tracing::info!(?op, "fault: node");
    let result = match op {
        NodeOp::StopHeartbeats(n) => handle.stop_heartbeat(n),
        NodeOp::StartHeartbeats(n) => handle.start_heartbeat(n),
        // The machine is gone: the simulator deletes the Node under its own user, as the
        // cloud's node lifecycle controller would (a kubelet may not delete its Node).
        NodeOp::Remove(n) => match handle.stop_heartbeat(n) {
            Ok(()) => match Api::<Node>::all(handle.client.clone())
                .delete(n, &Default::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.into()),
            },
            Err(e) => Err(e),
        },
        NodeOp::Register(n) => match lookup(&handle.nodes, n) {
            Some(state) => node::register(&handle.client, config, &state, clock).await,
            None => Err(crate::Error::NoSuchNode(n.clone())),
        },
    };
    if let Err(e) = result {
        tracing::warn!(?op, error = %e, "node fault not applied");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_remove_and_their_undo() {
        let ours: BTreeSet<String> = ["node-0", "node-1"].map(String::from).into();
        let mut state = NodeFaults::default();
        let stop = Fault::new(FaultSpec::StopHeartbeats {
            node: "node-0".into(),
        });
        let remove = Fault::new(FaultSpec::RemoveNode {
            node: "node-1".into(),
        });
        let other = Fault::new(FaultSpec::StopHeartbeats {
            node: "node-9".into(),
        });
        assert_eq!(
            state.plan(&[stop.clone(), remove.clone(), other], &ours),
            vec![
                NodeOp::Remove("node-1".into()),
                NodeOp::StopHeartbeats("node-0".into())
            ]
        );
        assert_eq!(state.plan(&[stop.clone(), remove], &ours), vec![]);
        assert_eq!(
            state.plan(&[stop], &ours),
            vec![
                NodeOp::Register("node-1".into()),
                NodeOp::StartHeartbeats("node-1".into())
            ]
        );
        assert_eq!(
            state.plan(&[], &ours),
            vec![NodeOp::StartHeartbeats("node-0".into())]
        );
    }
}
