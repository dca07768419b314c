//! The controller-manager process: `cmd/kube-controller-manager/app/controllermanager.go`
//! (`Run`, `StartControllers`, leader election) and `apps.go` / `core.go` (the `start*`
//! functions).
//!
//! ```text
//!   ControllerManager::bind(config)          kube client (kubeconfig / --master, QPS/burst)
//!      │                                     /healthz + /metrics listener
//!      ▼ run(shutdown)
//!   --leader-elect? ─▶ campaign for Lease kube-system/kube-controller-manager
//!      │                 (lost while leading ─▶ Err(LeaderElectionLost): the process exits)
//!      ▼ leading (or no election)
//!   tracer (unless --tracing=false) ─▶ exporter task posting spans to the API server
//!   SharedInformerFactory: Deployments, ReplicaSets, ReplicationControllers, DaemonSets, ControllerRevisions, Pods,
//!                          Services, Endpoints,
//!                          EndpointSlices, Nodes, Namespaces, ... (one watch each)
//!   controllers: deployment, replicaset, replicationcontroller, disruption, endpoint, endpointslice, garbagecollector,
//!                namespace, nodeipam (with --allocate-node-cidrs), nodelifecycle,
//!                serviceaccount, clusterrole-aggregation, root-ca-cert-publisher,
//!                csrsigning (with --cluster-signing-*-file), job, cronjob,
//!                horizontalpodautoscaling (metrics from metrics.k8s.io), ttl-after-finished,
//!                podgc, daemonset, statefulset, persistentvolume-binder,
//!                simulated-provisioner (--controllers)
//!      each: handlers ─▶ its RateLimitingQueue ─▶ N workers ─▶ sync ─▶ Executor
//!   factory.start ─▶ wait_for_cache_sync ─▶ start the workers
//!      ▼ shutdown
//!   queues shut down and drained ─▶ workers joined ─▶ informers stopped ─▶ lease released
//! ```
//!
//! Files: [`config`] (flags as a struct), [`metrics`] (controller counters + work-queue
//! metrics), [`health`] (`/healthz`, `/metrics`), [`admin`] (pause/step faults, queue reports
//! to the API server), [`shell`] (the process parts this manager shares with the
//! cloud-controller-manager: client, health port, leader election, informers, pauses).

pub mod admin;
pub mod config;
pub mod health;
pub mod metrics;
pub mod shell;

use std::net::SocketAddr;
use std::sync::Arc;

use client::{ClientConfig, ClusterSource};
use tokio_util::sync::CancellationToken;

pub use self::config::{ApiServer, Config, EnabledControllers, LeaderElection};
use self::metrics::Registry;
use self::shell::{ControllerSet, Shell};
use crate::clusterrole_aggregation::controller::{
    self as clusterrole_aggregation, ClusterRoleAggregationController,
};
use crate::cronjob::controller::CronJobController;
use crate::csrsigning::controller::CsrSigningController;
use crate::daemonset::controller::DaemonSetsController;
use crate::deployment::controller::DeploymentController;
use crate::disruption::controller::DisruptionController;
use crate::endpoint::controller::EndpointsController;
use crate::endpointslice::controller::EndpointSliceController;
use crate::error::{Error, Result};
use crate::garbage_collector::controller::GarbageCollector;
use crate::job::controller::JobController;
use crate::namespace::controller::NamespaceController;
use crate::node_ipam::controller::{self as node_ipam, NodeIpamController};
use crate::node_lifecycle::controller::NodeLifecycleController;
use crate::podautoscaler::controller::HorizontalController;
use crate::podautoscaler::metrics::KubeMetricsSource;
use crate::podgc::controller::PodGcController;
use crate::replicaset::controller::ReplicaSetController;
use crate::replication::ReplicationManager;
use crate::root_ca_cert_publisher::controller::{self as root_ca_cert_publisher, Publisher};
use crate::serviceaccount::controller::ServiceAccountsController;
use crate::statefulset::controller::StatefulSetController;
use crate::ttl_after_finished::controller::TtlAfterFinishedController;
use crate::volume::controller::VolumeController;

/// A controller-manager with its client built and its health port bound, ready to run.
pub struct ControllerManager {
    config: Config,
    shell: Shell,
}

/// The component name of the controller-manager's spans.
pub const COMPONENT: &str = "kube-controller-manager";

/// Builds and runs a controller-manager until `shutdown` fires (or leadership is lost).
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    ControllerManager::bind(config).await?.run(shutdown).await
}

impl ControllerManager {
    /// Builds the kube client and binds the `/healthz` + `/metrics` listener.
    pub async fn bind(config: Config) -> Result<Self> {
        let source = match &config.api_server {
            ApiServer::Kubeconfig(path) => ClusterSource::Kubeconfig(path.clone()),
            ApiServer::Master(url) => ClusterSource::Url(url.clone()),
        };
        let client_config = ClientConfig {
            source,
            rate_limit: config.rate_limit,
            tracing: config.tracing,
            user_agent: None,
            bearer_token: None,
        };
        let shell = Shell::bind(COMPONENT, client_config, config.listen).await?;
        Ok(ControllerManager { config, shell })
    }

    /// Where `/healthz` and `/metrics` are served, if anywhere.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shell.local_addr()
    }

    /// The metrics registry (benchmarks read sync counts from it).
    pub fn registry(&self) -> Arc<Registry> {
        self.shell.registry()
    }

    /// Runs until `shutdown` fires; `Err(LeaderElectionLost)` if leadership was lost first
    /// (with `--leader-elect`, the controllers run only while holding the Lease).
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let ControllerManager { config, shell } = self;
        shell
            .run(config.leader_election.as_ref(), shutdown, |set| {
                run_controllers(&config, set)
            })
            .await
    }
}

/// Each controller's ServiceAccount in `kube-system` (`--use-service-account-credentials`).
const SERVICE_ACCOUNTS: &[(&str, &str)] = &[
    ("deployment", "deployment-controller"),
    ("replicaset", "replicaset-controller"),
    ("replicationcontroller", "replication-controller"),
    ("disruption", "disruption-controller"),
    ("endpoint", "endpoint-controller"),
    ("endpointslice", "endpointslice-controller"),
    ("garbagecollector", "generic-garbage-collector"),
    ("namespace", "namespace-controller"),
    ("nodeipam", "node-controller"),
    ("serviceaccount", "service-account-controller"),
    (
        "clusterrole-aggregation",
        "clusterrole-aggregation-controller",
    ),
    ("nodelifecycle", "node-controller"),
    ("root-ca-cert-publisher", "root-ca-cert-publisher"),
    ("csrsigning", "certificate-controller"),
    ("job", "job-controller"),
    ("cronjob", "cronjob-controller"),
    ("horizontalpodautoscaling", "horizontal-pod-autoscaler"),
    ("ttl-after-finished", "ttl-after-finished-controller"),
    ("podgc", "pod-garbage-collector"),
    ("daemonset", "daemon-set-controller"),
    ("statefulset", "statefulset-controller"),
    ("persistentvolume-binder", "persistent-volume-binder"),
];

/// Builds the enabled controllers on the set's informer factory and runs them until shutdown.
async fn run_controllers(config: &Config, mut set: ControllerSet) -> Result<()> {
    let enabled = &config.controllers;
    if config.use_service_account_credentials {
        // The ServiceAccount each enabled controller writes as (the names of Kubernetes'
        // `system:controller:*` roles).
        let accounts: Vec<&str> = SERVICE_ACCOUNTS
            .iter()
            .filter(|(controller, _)| enabled.is_enabled(controller))
            .map(|(_, account)| *account)
            .collect();
        set.use_service_account_credentials(&accounts).await?;
    }
    if enabled.is_enabled("deployment") {
        let c = DeploymentController::new(
            set.factory(),
            set.executor_as("deployment-controller", "deployment-controller"),
        );
        let n = config.concurrent_deployment_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("replicaset") {
        let c = ReplicaSetController::<k8s_openapi::api::apps::v1::ReplicaSet>::new(
            set.factory(),
            set.executor_as("replicaset-controller", "replicaset-controller"),
        );
        let n = config.concurrent_replicaset_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("replicationcontroller") {
        let c = ReplicationManager::new(
            set.factory(),
            set.executor_as("replication-controller", "replication-controller"),
        );
        let n = config.concurrent_rc_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("disruption") {
        let c = DisruptionController::new(
            set.factory(),
            set.executor_as("controllermanager", "disruption-controller"),
        );
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(1, t, s)));
    }
    if enabled.is_enabled("endpoint") {
        let c = EndpointsController::new(
            set.factory(),
            set.executor_as("endpoint-controller", "endpoint-controller"),
            config.endpoint_updates_batch_period,
        );
        let n = config.concurrent_endpoint_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("endpointslice") {
        let c = EndpointSliceController::new(
            set.factory(),
            set.executor_as("endpoint-slice-controller", "endpointslice-controller"),
            config.max_endpoints_per_slice,
            config.endpointslice_updates_batch_period,
        );
        let n = config.concurrent_service_endpoint_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("garbagecollector") {
        let c = GarbageCollector::new(
            set.factory(),
            set.executor_as("garbage-collector-controller", "generic-garbage-collector"),
        );
        let n = config.concurrent_gc_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("namespace") {
        let c = NamespaceController::new(
            set.factory(),
            set.executor_as("namespace-controller", "namespace-controller"),
        );
        let n = config.concurrent_namespace_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if let Some(ipam) = config
        .node_ipam
        .as_ref()
        .filter(|_| enabled.is_enabled("nodeipam"))
    {
        ipam.validate().map_err(Error::Config)?;
        let c = NodeIpamController::new(
            set.factory(),
            set.executor_as("cidrAllocator", "node-controller"),
            ipam,
        );
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(
            &metrics,
            &queue,
            Box::new(move |t, s| c.spawn(node_ipam::WORKERS, t, s)),
        );
    }
    if enabled.is_enabled("serviceaccount") {
        let c = ServiceAccountsController::new(
            set.factory(),
            set.executor_as("serviceaccount-controller", "service-account-controller"),
        );
        // One worker, as kube-controller-manager runs it (`startServiceAccountController`).
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(1, t, s)));
    }
    if enabled.is_enabled("clusterrole-aggregation") {
        let c = ClusterRoleAggregationController::new(
            set.factory(),
            set.executor_as(
                "clusterrole-aggregation-controller",
                "clusterrole-aggregation-controller",
            ),
        );
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(
            &metrics,
            &queue,
            Box::new(move |t, s| c.spawn(clusterrole_aggregation::WORKERS, t, s)),
        );
    }
    if enabled.is_enabled("root-ca-cert-publisher") {
        let kubeconfig = match &config.api_server {
            ApiServer::Kubeconfig(path) => Some(path.as_path()),
            ApiServer::Master(_) => None,
        };
        let root_ca = root_ca_cert_publisher::root_ca(config.root_ca_file.as_deref(), kubeconfig)?;
        let c = Publisher::new(
            set.factory(),
            set.executor_as(
                "root-ca-certificate-publisher-controller",
                "root-ca-cert-publisher",
            ),
            root_ca,
        );
        // One worker, as kube-controller-manager runs it.
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(1, t, s)));
    }
    if enabled.is_enabled("nodelifecycle") {
        let c = NodeLifecycleController::new(
            set.client_for("node-controller").clone(),
            set.factory(),
            config.node_lifecycle.clone(),
            set.recorder_as("node-controller", "node-controller"),
            set.clock().clone(),
        );
        set.add(Box::new(move |t, s| {
            t.spawn(c.run(s));
        }));
    }
    if let Some(signing) = config
        .cluster_signing
        .as_ref()
        .filter(|_| enabled.is_enabled("csrsigning"))
    {
        let c = CsrSigningController::new(
            set.factory(),
            set.executor_as("csrsigning", "certificate-controller"),
            signing.load()?,
            signing.duration,
        );
        // kube-controller-manager's `--concurrent-certificate-syncs` default: 5.
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(5, t, s)));
    }
    if enabled.is_enabled("job") {
        let c = JobController::new(
            set.factory(),
            set.executor_as("job-controller", "job-controller"),
        );
        let n = config.concurrent_job_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("cronjob") {
        let c = CronJobController::new(
            set.factory(),
            set.executor_as("cronjob-controller", "cronjob-controller"),
        );
        let n = config.concurrent_cron_job_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("horizontalpodautoscaling") {
        let executor = set.executor_as("horizontal-pod-autoscaler", "horizontal-pod-autoscaler");
        // The resource metrics client: `metrics.k8s.io/v1beta1` through the API server.
        let source = KubeMetricsSource::new(executor.client());
        let c = HorizontalController::new(
            set.factory(),
            executor,
            source,
            config.horizontal_pod_autoscaler_sync_period,
        );
        let n = config.concurrent_horizontal_pod_autoscaler_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("ttl-after-finished") {
        let c = TtlAfterFinishedController::new(
            set.factory(),
            set.executor_as(
                "ttlafterfinished-controller",
                "ttl-after-finished-controller",
            ),
        );
        let n = config.concurrent_ttl_after_finished_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("daemonset") {
        let c = DaemonSetsController::new(
            set.factory(),
            set.executor_as("daemonset-controller", "daemon-set-controller"),
        );
        let n = config.concurrent_daemonset_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("statefulset") {
        let c = StatefulSetController::new(
            set.factory(),
            set.executor_as("statefulset-controller", "statefulset-controller"),
        );
        let n = config.concurrent_statefulset_syncs;
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(n, t, s)));
    }
    if enabled.is_enabled("persistentvolume-binder") {
        let c = VolumeController::binder(
            set.factory(),
            set.executor_as("persistentvolume-controller", "persistent-volume-binder"),
        );
        // kube-controller-manager runs one claim worker and one volume worker.
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(2, t, s)));
    }
    if enabled.is_enabled("simulated-provisioner") {
        let c = VolumeController::provisioner(
            set.factory(),
            // miniplane's own provisioner writes as the binder does (PVs, claims, events).
            set.executor_as(
                crate::volume::SIMULATED_PROVISIONER,
                "persistent-volume-binder",
            ),
        );
        let (metrics, queue) = (c.metrics.clone(), c.queue().clone());
        set.add_queued(&metrics, &queue, Box::new(move |t, s| c.spawn(2, t, s)));
    }
    if enabled.is_enabled("podgc") {
        let c = PodGcController::new(
            set.client_for("pod-garbage-collector").clone(),
            set.factory(),
            config.pod_gc.clone(),
            set.clock().clone(),
        );
        set.add(Box::new(move |t, s| {
            t.spawn(c.run(s));
        }));
    }
    set.run(enabled.names()).await
}
