//! The cloud-controller-manager process: `k8s.io/cloud-provider/app/controllermanager.go`
//! (`Run`, `startControllers`, leader election) and `app/core.go` (the `start*` functions).
//!
//! ```text
//!   CloudControllerManager::bind(config, cloud)   kube client, /healthz + /metrics listener
//!      ▼ run(shutdown)
//!   --leader-elect? ─▶ campaign for Lease kube-system/cloud-controller-manager
//!      ▼ leading (or no election)
//!   SharedInformerFactory: Nodes, Services (one watch each)
//!   controllers: cloud-node, cloud-node-lifecycle, route (with a cluster CIDR), service
//!   factory.start ─▶ wait_for_cache_sync ─▶ pauses in force applied ─▶ start them
//!      ▼ shutdown: queues drained, tasks joined, informers stopped, lease released
//! ```
//!
//! The work queues of `cloud-node` and `service` are reported to the API server and obey
//! pause faults like kube-controller-manager's (`controllers::manager::admin`). Like Kubernetes'
//! CCM it never reads or writes EndpointSlices: their controller is kube-controller-manager's.
//! The process parts (client, health port, leader election, informers, pauses) are the ones
//! kube-controller-manager uses, `controllers::manager::shell`, as Kubernetes' two binaries
//! share `k8s.io/controller-manager`.

use std::net::SocketAddr;
use std::sync::Arc;

use client::ClientConfig;
use controllers::manager::shell::{ControllerSet, Shell};
use tokio_util::sync::CancellationToken;

use crate::Result;
use crate::config::Config;
use crate::node::controller::CloudNodeController;
use crate::node_lifecycle::CloudNodeLifecycleController;
use crate::route::RouteController;
use crate::service::controller::ServiceController;

/// The component name of its spans, events' source and User-Agent.
pub const COMPONENT: &str = "cloud-controller-manager";

/// A cloud-controller-manager with its client built and its health port bound.
pub struct CloudControllerManager {
    config: Config,
    cloud: Arc<dyn cloud::Interface>,
    shell: Shell,
}

impl CloudControllerManager {
    /// Builds the kube client and binds the `/healthz` + `/metrics` listener.
    pub async fn bind(config: Config, cloud: Arc<dyn cloud::Interface>) -> Result<Self> {
        let client_config = ClientConfig {
            source: config.api_server.clone(),
            rate_limit: config.rate_limit,
            tracing: config.tracing,
            user_agent: None,
            bearer_token: None,
        };
        let shell = Shell::bind(COMPONENT, client_config, config.listen).await?;
        Ok(CloudControllerManager {
            config,
            cloud,
            shell,
        })
    }

    /// Where `/healthz` and `/metrics` are served, if anywhere.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shell.local_addr()
    }

    /// Runs until `shutdown` fires; `Err(LeaderElectionLost)` if leadership was lost first.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let CloudControllerManager {
            config,
            cloud,
            shell,
        } = self;
        shell
            .run(config.leader_election.as_ref(), shutdown, |set| {
                run_controllers(&config, &cloud, set)
            })
            .await
    }
}

/// Builds the enabled controllers on the set's informer factory and runs them until shutdown.
async fn run_controllers(
    config: &Config,
    cloud: &Arc<dyn cloud::Interface>,
    mut set: ControllerSet,
) -> Result<()> {
    if config.runs("cloud-node") {
        let c = CloudNodeController::new(
            set.factory(),
            cloud.clone(),
            set.executor("cloud-node-controller"),
            config.node_status_update_frequency,
        );
        let n = config.concurrent_node_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if config.runs("cloud-node-lifecycle") {
        let c = CloudNodeLifecycleController::new(
            set.factory(),
            cloud.clone(),
            set.executor("cloud-node-lifecycle-controller"),
            config.node_monitor_period,
        );
        set.add(Box::new(move |t, s| {
            t.spawn(c.run(s));
        }));
    }
    if let Some(cidr) = config.cluster_cidr.filter(|_| config.runs("route")) {
        let c = RouteController::new(
            set.factory(),
            cloud.clone(),
            set.executor("route_controller"),
            config.cluster_name.clone(),
            cidr,
            config.route_reconciliation_period,
        );
        set.add(Box::new(move |t, s| {
            t.spawn(c.run(s));
        }));
    }
    if config.runs("service") {
        let c = ServiceController::new(
            set.factory(),
            cloud.clone(),
            set.executor("service-controller"),
            config.cluster_name.clone(),
        );
        let n = config.concurrent_service_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    set.run(&config.controllers).await
}
