//! One simulated node's registration and heartbeats: the Node object, its Lease renewed every
//! `lease_renew_interval` and its status posted every `status_update_frequency` when it
//! changed (or every `status_report_frequency` regardless).
//!
//! Mirrors `pkg/kubelet/kubelet_node_status.go` (`registerWithAPIServer`,
//! `syncNodeStatus` / `tryUpdateNodeStatus`) and `pkg/kubelet/nodelease/controller.go`
//! (renew loop, create-if-missing). Faults switch the heartbeats off and on ([`NodeState`]):
//! a node whose heartbeats are off behaves like a kubelet that died — no Lease renewals, no
//! status, and its pods are left alone — until they are switched on again.
//!
//! ```text
//!   register: POST Node (409 → PATCH status) ─▶ POST Lease (409 → PATCH renewTime)
//!   loop:  ──every renew interval·jitter──▶ PATCH lease.spec.renewTime
//!          ──every status frequency──▶ API conditions ≠ healthy, or report period over?
//!                                        └─▶ PATCH node status conditions
//! ```

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use client::SharedClock;
use client::impersonation::{Identity, acting_as};
use client::shared_informer::SharedIndexInformer;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::node_status::{
    LEASE_NAMESPACE, conditions_match, healthy_conditions, host_ip, lease_object, node_object,
    pod_cidr,
};
use crate::pod_ip::PodIpAllocator;
use crate::pod_status::NodeContext;

/// The shared state of one simulated node: what the pod workers, the heartbeat loop and the
/// control API all see.
pub struct NodeState {
    /// Index in `0..nodes` (drives CIDR, IP, jitter).
    pub index: usize,
    /// Name and host IP, as pod statuses show them.
    pub context: NodeContext,
    /// Who the node's kubelet is to the API server: `system:node:<name>` in `system:nodes`.
    identity: Arc<Identity>,
    /// Whether heartbeats (and pod work) run; the fault API flips it.
    heartbeat: watch::Sender<bool>,
    /// Fires when the node is removed from the simulation.
    pub removed: CancellationToken,
    /// Pod IPs of this node; `None` until its Node has a pod CIDR (with
    /// [`Config::pod_cidr_from_node`]).
    allocator: Mutex<Option<PodIpAllocator>>,
    /// The images pulled on this node so far (the container runtime's image store; a
    /// container whose image is here starts without a pull unless its policy is `Always`).
    /// Unlike a kubelet, nothing is garbage-collected and `status.images` is not reported.
    images: Mutex<HashSet<String>>,
}

impl NodeState {
    /// The state of node `index` of `config`, heartbeats on; `Err` when its name cannot be
    /// a user name in an HTTP header.
    pub fn new(config: &Config, index: usize) -> Result<Self> {
        let name = config.node_name(index);
        let identity = Identity::new(&node_user(&name), &[NODES_GROUP]).map_err(Error::Config)?;
        Ok(NodeState {
            index,
            identity: Arc::new(identity),
            context: NodeContext {
                name,
                host_ip: host_ip(index).to_string(),
            },
            heartbeat: watch::Sender::new(true),
            removed: CancellationToken::new(),
            allocator: Mutex::new(
                (!config.pod_cidr_from_node).then(|| PodIpAllocator::new(pod_cidr(index))),
            ),
            images: Mutex::new(HashSet::new()),
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.context.name
    }

    /// The kubelet's identity, which its requests act as ([`acting_as`]).
    pub fn identity(&self) -> &Arc<Identity> {
        &self.identity
    }

    /// Whether the simulated kubelet is alive (heartbeats on, not removed).
    pub fn alive(&self) -> bool {
        *self.heartbeat.borrow() && !self.removed.is_cancelled()
    }

    /// Switches heartbeats (and pod work) on or off.
    pub fn set_heartbeat(&self, on: bool) {
        self.heartbeat.send_replace(on);
    }

    /// Watches the heartbeat switch.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.heartbeat.subscribe()
    }

    /// The pod IP allocator, `None` while the node has no pod CIDR (never held across an
    /// `.await`).
    pub fn allocator(&self) -> MutexGuard<'_, Option<PodIpAllocator>> {
        self.allocator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `cidr` (from the Node's `spec.podCIDR`) as the node's pod range, if it has none
    /// yet; returns whether it was new. A pod CIDR never changes once set (the API server
    /// forbids it), so a later, different one is ignored.
    pub fn set_pod_cidr(&self, cidr: apimachinery::Ipv4Cidr) -> bool {
        let mut allocator = self.allocator();
        if allocator.is_some() {
            return false;
        }
        tracing::info!(node = self.name(), pod_cidr = %cidr, "pod CIDR set");
        *allocator = Some(PodIpAllocator::new(cidr));
        true
    }

    fn images(&self) -> MutexGuard<'_, HashSet<String>> {
        self.images.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `image` has been pulled on this node.
    pub fn has_image(&self, image: &str) -> bool {
        self.images().contains(image)
    }

    /// Records images pulled on this node.
    pub fn add_images(&self, pulled: &[String]) {
        if !pulled.is_empty() {
            self.images().extend(pulled.iter().cloned());
        }
    }
}

/// The kubelets' group, as the node client certificates of kubeadm name it.
pub const NODES_GROUP: &str = "system:nodes";

/// The user of node `name`'s kubelet (`system:node:<name>`, what the Node authorizer and
/// NodeRestriction recognise).
pub fn node_user(name: &str) -> String {
    format!("system:node:{name}")
}

/// A fraction in `[0, 1)` for node `index`, spread evenly (golden-ratio sequence), so nodes'
/// periodic writes are staggered deterministically.
pub fn phase(index: usize) -> f64 {
    const GOLDEN: f64 = 0.618_033_988_749_895;
    (index as f64 * GOLDEN).fract()
}

fn jittered(period: Duration, jitter: f64, index: usize, tick: u64) -> Duration {
    let spread = phase(index.wrapping_add(tick as usize).wrapping_mul(7919));
    period.mul_f64(1.0 + jitter * (spread - 0.5))
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Registers node `state` (create, or take over an existing Node of that name as a restarted
/// kubelet does) and its Lease, as the node's kubelet.
pub async fn register(
    client: &Client,
    config: &Config,
    state: &NodeState,
    clock: &SharedClock,
) -> Result<()> {
    acting_as(
        state.identity.clone(),
        register_node(client, config, state, clock),
    )
    .await
}

async fn register_node(
    client: &Client,
    config: &Config,
    state: &NodeState,
    clock: &SharedClock,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = node_object(config, state.index, clock.wall());
    let uid = match nodes.create(&PostParams::default(), &node).await {
        Ok(created) => created.metadata.uid,
        Err(e) if is_status(&e, 409) => {
            let patch = json!({ "status": node.status });
            let existing = nodes
                .patch_status(state.name(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            existing.metadata.uid
        }
        Err(e) => return Err(e.into()),
    };
    renew_lease(client, config, state.name(), uid.as_deref(), clock).await
}

async fn renew_lease(
    client: &Client,
    config: &Config,
    name: &str,
    node_uid: Option<&str>,
    clock: &SharedClock,
) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let lease = lease_object(
        name,
        node_uid,
        config.heartbeat.lease_duration_seconds,
        clock.wall(),
    );
    let patch = json!({ "spec": lease.spec });
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Posts the node's status if the API's copy (from the node informer) is not what a healthy
/// kubelet reports, or if `force` (the report period is over). Returns whether it posted.
async fn sync_node_status(
    client: &Client,
    nodes: &SharedIndexInformer<Node>,
    name: &str,
    force: bool,
    clock: &SharedClock,
) -> Result<bool> {
    let current = nodes
        .get(&apimachinery::ObjectKey::new(None, name))
        .and_then(|n| n.status.as_ref().and_then(|s| s.conditions.clone()))
        .unwrap_or_default();
    if !force && conditions_match(&current) {
        return Ok(false);
    }
    let conditions = healthy_conditions(&current, clock.wall());
    let patch = json!({ "status": { "conditions": conditions } });
    Api::<Node>::all(client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

/// Runs node `state`'s heartbeats, as the node's kubelet, until `shutdown` fires or the node
/// is removed.
///
/// While the heartbeat switch is off nothing is written; when it comes back on the Lease is
/// renewed and the status posted at once (a restarted kubelet does the same).
pub async fn heartbeat_loop(
    client: Client,
    config: Arc<Config>,
    state: Arc<NodeState>,
    nodes: SharedIndexInformer<Node>,
    clock: SharedClock,
    shutdown: CancellationToken,
) {
    let who = state.identity.clone();
    acting_as(
        who,
        heartbeats(client, config, state, nodes, clock, shutdown),
    )
    .await;
}

async fn heartbeats(
    client: Client,
    config: Arc<Config>,
    state: Arc<NodeState>,
    nodes: SharedIndexInformer<Node>,
    clock: SharedClock,
    shutdown: CancellationToken,
) {
    let hb = &config.heartbeat;
    let mut switch = state.subscribe();
    let start = clock.now();
    let mut next_lease = start + hb.lease_renew_interval.mul_f64(phase(state.index));
    let mut next_status = start + hb.status_update_frequency.mul_f64(phase(state.index + 1));
    let mut last_report: Option<Instant> = Some(start);
    let mut tick: u64 = 0;
    loop {
        let deadline: Instant = next_lease.min(next_status);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = state.removed.cancelled() => return,
            changed = switch.changed() => {
                if changed.is_err() {
                    return;
                }
                if *switch.borrow_and_update() {
                    tracing::info!(node = state.name(), "heartbeats resumed");
                    next_lease = clock.now();
                    next_status = clock.now();
                    last_report = None; // report at once
                } else {
                    tracing::info!(node = state.name(), "heartbeats stopped");
                }
                continue;
            }
            () = clock.sleep_until(deadline) => {}
        }
        if !*switch.borrow() {
            // Dead kubelet: sleep until the switch flips.
            next_lease = clock.now() + Duration::from_secs(3600);
            next_status = next_lease;
            continue;
        }
        tick += 1;
        let now = clock.now();
        if now >= next_lease {
            if let Err(e) = renew_lease(&client, &config, state.name(), None, &clock).await {
                tracing::warn!(node = state.name(), error = %e, "lease renewal failed");
            }
            next_lease = now + jittered(hb.lease_renew_interval, hb.jitter, state.index, tick);
        }
        if now >= next_status {
            let force =
                last_report.is_none_or(|t| now.duration_since(t) >= hb.status_report_frequency);
            match sync_node_status(&client, &nodes, state.name(), force, &clock).await {
                Ok(true) => last_report = Some(now),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(node = state.name(), error = %e, "node status update failed")
                }
            }
            next_status = now + jittered(hb.status_update_frequency, hb.jitter, state.index, tick);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_spread_and_jitter_bounded() {
        let mut phases: Vec<f64> = (0..1000).map(phase).collect();
        phases.sort_by(f64::total_cmp);
        // Evenly spread: no gap wider than a few thousandths.
        let widest = phases.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
        assert!(widest < 0.005, "widest gap {widest}");
        for i in 0..100 {
            let d = jittered(Duration::from_secs(10), 0.2, i, 3);
            assert!(
                d >= Duration::from_secs(9) && d <= Duration::from_secs(11),
                "{d:?}"
            );
        }
    }
}
