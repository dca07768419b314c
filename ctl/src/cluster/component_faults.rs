//! The `StopComponent` fault (`docs/faults.md`): the cluster's supervisor stops a component
//! while the fault is in force and starts it again when it is cleared — the "kill the
//! controller-manager, watch nothing reconcile, restart it and watch it catch up" lab.
//!
//! There is no Kubernetes counterpart beyond `systemctl stop kube-controller-manager` or
//! deleting a static pod's manifest. With `--separate` the component's process gets SIGTERM
//! and a new process is started; in one process its task is cancelled and a new task built
//! (the same code path the start used), so both modes behave alike: the restarted component
//! lists and watches from scratch, as a restarted binary does.
//!
//! ```text
//!   faults ─▶ wanted stopped {controller-manager}  vs  stopped now {}
//!              └─▶ plan: Stop(controller-manager)  ─▶ Members::stop_component
//!   cleared ─▶ plan: Start(controller-manager)     ─▶ start_clients(plan with just it)
//! ```

use std::collections::BTreeSet;

use admin::{Fault, FaultSpec};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::in_process;
use super::plan::Plan;
use super::separate::Launcher;
use super::supervisor::Members;
use crate::error::Result;
use crate::progress::{Component, Progress};

/// What to do to a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentOp {
    /// Stop it.
    Stop(Component),
    /// Start it again.
    Start(Component),
}

fn component(name: &str) -> Option<Component> {
    match name {
        "controller-manager" => Some(Component::ControllerManager),
        "scheduler" => Some(Component::Scheduler),
        "kubelet" => Some(Component::Kubelet),
        "cloud-controller-manager" => Some(Component::CloudControllerManager),
        _ => None,
    }
}

/// The components `faults` want stopped, among those the cluster runs.
pub(crate) fn wanted_stopped(faults: &[Fault], running: &[Component]) -> BTreeSet<Component> {
    faults
        .iter()
        .filter_map(|f| match &f.spec {
            FaultSpec::StopComponent { component: c } => component(c),
            _ => None,
        })
        .filter(|c| running.contains(c))
        .collect()
}

/// Steps from `stopped` to `wanted`.
pub(crate) fn plan(
    stopped: &BTreeSet<Component>,
    wanted: &BTreeSet<Component>,
) -> Vec<ComponentOp> {
    let mut ops: Vec<ComponentOp> = wanted
        .difference(stopped)
        .map(|c| ComponentOp::Stop(*c))
        .collect();
    ops.extend(stopped.difference(wanted).map(|c| ComponentOp::Start(*c)));
    ops
}

/// How to start a component again.
pub(crate) struct Restarter {
    /// How the components reach the API server.
    pub(crate) access: super::pki::Access,
    /// How many nodes the kubelet simulates.
    pub(crate) nodes: usize,
    /// Child processes, if the cluster runs them.
    pub(crate) launcher: Option<Launcher>,
    /// The cluster's node timing ([`Plan::fast_node_lifecycle`]).
    pub(crate) fast_node_lifecycle: bool,
    /// The controller-manager's HPA sync period ([`Plan::hpa_sync_period`]).
    pub(crate) hpa_sync_period: Option<std::time::Duration>,
    /// The cluster's tracing settings (a restarted component reports spans as before).
    pub(crate) tracing: apiserver::TracingOptions,
    /// The cluster's kubelet settings (a restarted kubelet runs pods and shapes nodes as
    /// before).
    pub(crate) kubelet: super::plan::KubeletOptions,
    /// Whether the components campaign for their Leases ([`Plan::leader_elect`]).
    pub(crate) leader_elect: bool,
    /// Told where a restarted component serves `/healthz` (on a free port).
    pub(crate) component_probes: apiserver::ComponentProbes,
    /// The cluster's node IPAM settings ([`Plan::node_ipam`]).
    pub(crate) node_ipam: Option<controllers::node_ipam::Config>,
    /// The cluster's cloud ([`Plan::cloud`]): where a restarted cloud-controller-manager
    /// finds it (the cloud itself is never stopped: it is not a cluster component).
    pub(crate) cloud: Option<super::cloud::CloudPlan>,
}

impl Restarter {
    async fn start(&self, component: Component, members: &mut Members) -> Result<()> {
        let plan = Plan {
            nodes: if component == Component::Kubelet {
                self.nodes
            } else {
                0
            },
            controller_manager: component == Component::ControllerManager,
            scheduler: component == Component::Scheduler,
            leader_elect: self.leader_elect,
            component_probes: self.component_probes.clone(),
            port: 0,
            fsync: false,
            history: apiserver::HistoryRetention::default(),
            fast_node_lifecycle: self.fast_node_lifecycle,
            tracing: self.tracing.clone(),
            kubelet: self.kubelet.clone(),
            node_ipam: self.node_ipam.clone(),
            // Only a restarted cloud-controller-manager gets the cloud (a restarted kubelet
            // registers for it all the same: `kubelet.external_cloud`).
            cloud: self
                .cloud
                .clone()
                .filter(|_| component == Component::CloudControllerManager),
            secure: self.access.is_secure(),
            // Read by the API server only, which is never restarted here.
            authorization_mode: apiserver::AuthorizationMode::Rbac,
            // Not a `StopComponent` target: never restarted here.
            metrics_server: None,
            hpa_sync_period: self.hpa_sync_period,
            // Served by the API server, which is never restarted here.
            etcd_listen: None,
            etcd: None,
            // Read by the API server only (the components read the cluster's clock).
            virtual_clock: None,
            clock_start: None,
            seed: None,
            apiservers: 1,
        };
        match &self.launcher {
            None => in_process::start_clients(&plan, &self.access, members).await?,
            Some(launcher) => launcher.start_clients(&plan, &self.access, members).await?,
        };
        Ok(())
    }
}

/// Obeys `StopComponent` faults until `until` fires. `running` are the components the
/// cluster started (a fault for another one is ignored).
pub(crate) async fn supervise(
    members: &mut Members,
    restarter: &Restarter,
    running: Vec<Component>,
    mut faults: watch::Receiver<Vec<Fault>>,
    until: CancellationToken,
) {
    let mut stopped: BTreeSet<Component> = BTreeSet::new();
    loop {
        tokio::select! {
            () = until.cancelled() => return,
            changed = faults.changed() => if changed.is_err() { return },
        }
        let wanted = wanted_stopped(&faults.borrow_and_update(), &running);
        for op in plan(&stopped, &wanted) {
            tracing::info!(?op, "fault: component");
            match op {
                ComponentOp::Stop(c) => {
                    members.stop_component(c).await;
                    members.reporter().report(Progress::Exited {
                        component: c,
                        pid: None,
                        status: "stopped by a StopComponent fault".into(),
                    });
                    stopped.insert(c);
                }
                ComponentOp::Start(c) => {
                    // A failed restart leaves it stopped; clearing the fault again retries.
                    match restarter.start(c, members).await {
                        Ok(()) => {
                            stopped.remove(&c);
                        }
                        Err(e) => tracing::warn!(component = %c, error = %e, "restart failed"),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_and_start_follow_the_faults() {
        let running = [
            Component::ApiServer,
            Component::ControllerManager,
            Component::Scheduler,
        ];
        let stop_cm = Fault::new(FaultSpec::StopComponent {
            component: "controller-manager".into(),
        });
        let stop_kubelet = Fault::new(FaultSpec::StopComponent {
            component: "kubelet".into(),
        });
        let wanted = wanted_stopped(&[stop_cm, stop_kubelet], &running);
        assert_eq!(wanted, [Component::ControllerManager].into());
        let none = BTreeSet::new();
        assert_eq!(
            plan(&none, &wanted),
            vec![ComponentOp::Stop(Component::ControllerManager)]
        );
        assert_eq!(
            plan(&wanted, &none),
            vec![ComponentOp::Start(Component::ControllerManager)]
        );
        assert_eq!(plan(&wanted, &wanted), vec![]);
    }
}
