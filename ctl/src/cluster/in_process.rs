//! Every component in this process (`miniplane up`'s default and the library's only mode
//! unless [`crate::ClusterBuilder::separate`]): the API server as a task of the cluster's
//! runtime (two workers, as `miniplane apiserver` has on 2 cores), and the controller-manager,
//! the scheduler and the kubelets each on a thread of its own with a one-thread runtime, as
//! each of them runs as a process of its own ([`super::supervisor::Members::spawn_thread`]).
//!
//! Each component is started through its library entry, exactly as its subcommand does
//! (`apiserver::Server::bind`, `controllers::manager::ControllerManager::bind`,
//! `scheduler::run`, `kubelet_sim::Simulator::bind`, `metrics_server::MetricsServer::bind`),
//! and each builds its own kube client to
//! the API server's URL, inside its own runtime: they share a process, not state or threads.
//! Every request still crosses the loopback interface as HTTP, so what a trace or a lab shows
//! is what separate processes do.
//!
//! The controller-manager and the scheduler serve `/healthz` (Kubernetes' ports 10257 and
//! 10259 when the API server's port is fixed, free ports otherwise, which the API server's
//! `componentstatuses` probes are told) and, with [`Plan::leader_elect`], campaign for their
//! Leases as the subcommands do.

use std::hash::BuildHasher;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use client::ClientConfig;
use controllers::manager::{ApiServer, ControllerManager};
use kubelet_sim::Simulator;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::pki::{Access, ClusterPki};
use super::plan::Plan;
use super::supervisor::Members;
use crate::error::{Error, Result};
use crate::progress::Component;

/// Heartbeat and node-monitor period of [`Plan::fast_node_lifecycle`].
pub(crate) const FAST_PERIOD: std::time::Duration = std::time::Duration::from_millis(200);

/// Node-monitor grace period of [`Plan::fast_node_lifecycle`].
pub(crate) const FAST_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// `/healthz` port of the controller-manager (kube-controller-manager's `--secure-port`).
const CONTROLLER_MANAGER_PORT: u16 = 10257;
/// `/healthz` port of the scheduler (kube-scheduler's `--secure-port`).
const SCHEDULER_PORT: u16 = 10259;
/// The controller-manager's name in `componentstatuses`.
const CONTROLLER_MANAGER: &str = "controller-manager";
/// The scheduler's name in `componentstatuses`.
const SCHEDULER: &str = "scheduler";

/// Where a component serves `/healthz`: Kubernetes' port when the API server has a fixed
/// port (`miniplane up`), so `kubectl get componentstatuses` finds it where kube-apiserver
/// looks; a free port otherwise (test clusters side by side), told to the API server's
/// probes once bound.
fn health_address(plan: &Plan, port: u16) -> SocketAddr {
    let port = if plan.port == 0 { 0 } else { port };
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Opens the store in `store`, binds 127.0.0.1 on the port of API server `replica` (0, 1, ...:
/// [`Plan::apiserver_port`]) and serves (the first one with the store's etcd endpoint when
/// the plan asks); returns the URL and the endpoint's address.
pub(crate) async fn start_apiserver(
    members: &mut Members,
    store: PathBuf,
    plan: &Plan,
    pki: Option<&ClusterPki>,
    replica: usize,
) -> Result<(String, Option<SocketAddr>)> {
    let port = plan.apiserver_port(replica)?;
    let mut options = apiserver::ServerOptions {
        tracing: plan.tracing.clone(),
        component_probes: plan.component_probes.clone(),
        virtual_clock: plan.virtual_clock,
        clock_start: plan.clock_start,
        seed: plan.seed,
        ..apiserver::ServerOptions::default()
    };
    if let Some(pki) = pki {
        pki.server_options(&mut options, plan.authorization_mode)?;
    }
    let scheme = if pki.is_some() { "https" } else { "http" };
    let config = apiserver::Config {
        data_dir: store,
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        no_fsync: !plan.fsync,
        store_history_budget: Some(apiserver::DEFAULT_STORE_HISTORY_BUDGET),
        store_history: plan.history,
        options,
        etcd: plan.etcd.clone(),
    };
    let server = apiserver::Server::bind(config).await.map_err(|e| match e {
        apiserver::ServeError::Bind { source, .. }
            if source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            Error::PortInUse { port }
        }
        e => Error::component(Component::ApiServer, e),
    })?;
    let addr = server
        .local_addr()
        .map_err(|e| Error::component(Component::ApiServer, e))?;
    let etcd = match plan.etcd_listen.filter(|_| replica == 0) {
        Some((at, writable)) => {
            let options = store_grpc::EtcdOptions {
                writable,
                observer: Some(crate::etcd_spans::EtcdSpans::observer(server.spans())),
                ..store_grpc::EtcdOptions::default()
            };
            let etcd = store_grpc::EtcdServer::bind(at, server.backend(), options)
                .await
                .map_err(|e| Error::component(Component::ApiServer, e))?;
            Some(etcd)
        }
        None => None,
    };
    let etcd_addr = etcd
        .as_ref()
        .map(store_grpc::EtcdServer::local_addr)
        .transpose()
        .map_err(|e| Error::component(Component::ApiServer, e))?;
    members.spawn_task(Component::ApiServer, |shutdown| async move {
        let endpoint = etcd.map(|etcd| tokio::spawn(etcd.run(shutdown.clone())));
        let served = server.run(shutdown).await;
        if let Some(endpoint) = endpoint
            && let Ok(Err(e)) = endpoint.await
        {
            tracing::warn!(error = %e, "the etcd endpoint stopped with an error");
        }
        served
    });
    Ok((format!("{scheme}://{addr}"), etcd_addr))
}

/// Starts the controller-manager, scheduler and kubelets the plan asks for against `url`, and
/// returns once every node has registered, with the kubelets' control API URL.
pub(crate) async fn start_clients(
    plan: &Plan,
    access: &Access,
    members: &mut Members,
) -> Result<Option<String>> {
    let url = access.url.as_str();
    if plan.controller_manager {
        let api_server = if access.is_secure() {
            ApiServer::Kubeconfig(
                access
                    .kubeconfig(Component::ControllerManager)
                    .to_path_buf(),
            )
        } else {
            ApiServer::Master(url.to_owned())
        };
        let mut config = controllers::manager::Config::new(api_server);
        // As kubeadm runs it: each controller as its own ServiceAccount.
        config.use_service_account_credentials = access.is_secure();
        // As kubeadm runs it: the cluster CA is published in every namespace.
        config.root_ca_file = access.root_ca_file().map(Path::to_path_buf);
        // As kubeadm runs it: the csrsigning controller signs with the cluster CA.
        config.cluster_signing = access.cluster_signing_files().map(|(cert, key)| {
            controllers::csrsigning::controller::SigningConfig {
                cert_file: cert.to_path_buf(),
                key_file: key.to_path_buf(),
                duration: controllers::csrsigning::DEFAULT_SIGNING_DURATION,
            }
        });
        config.tracing = plan.tracing.enabled;
        if plan.fast_node_lifecycle {
            config.node_lifecycle.node_monitor_grace_period = FAST_GRACE;
            config.node_lifecycle.node_monitor_period = FAST_PERIOD;
            config.node_lifecycle.node_startup_grace_period = FAST_GRACE;
            // A removed node's pods go within seconds too (Kubernetes: checked every 20 s
            // after a 40 s quarantine).
            config.pod_gc.check_period = FAST_PERIOD;
            config.pod_gc.quarantine = FAST_GRACE;
        }
        if let Some(period) = plan.hpa_sync_period {
            config.horizontal_pod_autoscaler_sync_period = period;
        }
        config.listen = Some(health_address(plan, CONTROLLER_MANAGER_PORT));
        config.node_ipam = plan.node_ipam.clone();
        if plan.leader_elect {
            config.leader_election =
                Some(controllers::manager::Config::leader_election_for_controller_manager());
        }
        let (bound_tx, bound_rx) = oneshot::channel();
        members.spawn_thread(Component::ControllerManager, move |shutdown| async move {
            match ControllerManager::bind(config).await {
                Ok(manager) => {
                    let _ = bound_tx.send(Ok(manager.local_addr()));
                    manager.run(shutdown).await
                }
                Err(e) => {
                    let _ = bound_tx.send(Err(e.to_string()));
                    idle_until(shutdown).await
                }
            }
        })?;
        if let Some(addr) = bound(Component::ControllerManager, bound_rx).await? {
            plan.component_probes.set(CONTROLLER_MANAGER, addr);
        }
        members
            .reporter()
            .started(Component::ControllerManager, None, None, None);
    }
    if plan.scheduler {
        let addr = health_address(plan, SCHEDULER_PORT);
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            Error::component(
                Component::Scheduler,
                format!("cannot serve /healthz on {addr}: {e}"),
            )
        })?;
        if let Ok(addr) = listener.local_addr() {
            plan.component_probes.set(SCHEDULER, addr);
        }
        // The listener is handed to the scheduler's own runtime as a std socket.
        let listener = listener
            .into_std()
            .map_err(|e| Error::component(Component::Scheduler, e))?;
        let leader_election = plan
            .leader_elect
            .then(|| client::LeaderElection::new(scheduler::scheduler::LEASE_NAME));
        let client =
            ClientConfig::new(access.source(Component::Scheduler)).tracing(plan.tracing.enabled);
        let seed = plan
            .seed
            .unwrap_or_else(|| std::collections::hash_map::RandomState::new().hash_one(url));
        members.spawn_thread(Component::Scheduler, move |shutdown| async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let config = scheduler::Config {
                client,
                scheduler_name: "default-scheduler".into(),
                listener: Some(listener),
                // Random tie-breaking, as kube-scheduler's (and `miniplane scheduler`'s)
                // default, unless the plan has a seed.
                seed,
                clock: None,
                leader_election,
            };
            scheduler::run(config, shutdown).await
        })?;
        members
            .reporter()
            .started(Component::Scheduler, None, None, None);
    }
    if let Some(cloud) = &plan.cloud {
        let mut config =
            cloud_controller_manager::Config::new(access.source(Component::CloudControllerManager));
        config.tracing = plan.tracing.enabled;
        config.cluster_cidr = plan.node_ipam.as_ref().map(|c| c.cluster_cidr);
        config.concurrent_node_syncs = super::plan::ccm_node_syncs(plan.nodes);
        if plan.fast_node_lifecycle {
            config.node_monitor_period = FAST_PERIOD;
        }
        config.listen = Some(health_address(
            plan,
            cloud_controller_manager::config::DEFAULT_PORT,
        ));
        if plan.leader_elect {
            config.leader_election = Some(client::LeaderElection::new(
                cloud_controller_manager::config::LEASE_NAME,
            ));
        }
        let cloud_config = cloud.cloud_config();
        let (bound_tx, bound_rx) = oneshot::channel();
        members.spawn_thread(
            Component::CloudControllerManager,
            move |shutdown| async move {
                let provider = match cloud::sim::HttpCloud::from_cloud_config(&cloud_config) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e.to_string()));
                        return idle_until(shutdown).await;
                    }
                };
                match cloud_controller_manager::CloudControllerManager::bind(
                    config,
                    std::sync::Arc::new(provider),
                )
                .await
                {
                    Ok(manager) => {
                        let _ = bound_tx.send(Ok(()));
                        manager.run(shutdown).await
                    }
                    Err(e) => {
                        let _ = bound_tx.send(Err(e.to_string()));
                        idle_until(shutdown).await
                    }
                }
            },
        )?;
        bound(Component::CloudControllerManager, bound_rx).await?;
        members
            .reporter()
            .started(Component::CloudControllerManager, None, None, None);
    }
    if let Some(resolution) = plan.metrics_server {
        start_metrics_server(access, members, resolution).await?;
    }
    if plan.nodes == 0 {
        return Ok(None);
    }
    let mut config = kubelet_sim::Config::new(access.source(Component::Kubelet), plan.nodes);
    config.tracing = plan.tracing.enabled;
    plan.kubelet.apply_to(&mut config);
    config.pod_cidr_from_node = plan.node_ipam.is_some();
    if plan.fast_node_lifecycle {
        config.heartbeat.lease_renew_interval = FAST_PERIOD;
        config.heartbeat.status_update_frequency = FAST_PERIOD;
    }
    // The control API (node faults) on a free port, so that labs and tests can use it.
    config.listen = Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    // A secure cluster's kubelet API: HTTPS, callers checked as kubeadm's kubelets do.
    let names: Vec<String> = (0..plan.nodes).map(|i| config.node_name(i)).collect();
    if let Some(serving) = access.kubelet_serving(&names)? {
        serving.apply_to(&mut config);
    }
    let (bound_tx, bound_rx) = oneshot::channel();
    members.spawn_thread(Component::Kubelet, move |shutdown| async move {
        match Simulator::bind(config).await {
            Ok(simulator) => {
                let control = simulator.local_addr().map(|a| format!("http://{a}"));
                if let Some(addr) = simulator.kubelet_addr() {
                    tracing::info!(%addr, "kubelet API serving (the port every Node advertises)");
                }
                let _ = bound_tx.send(Ok((control, simulator.handle())));
                simulator.run(shutdown).await
            }
            Err(e) => {
                let _ = bound_tx.send(Err(e.to_string()));
                idle_until(shutdown).await
            }
        }
    })?;
    let (control, handle) = bound(Component::Kubelet, bound_rx).await?;
    if !handle.wait_registered().await {
        return Err(Error::component(
            Component::Kubelet,
            "stopped before every node registered",
        ));
    }
    members
        .reporter()
        .started(Component::Kubelet, control.clone(), None, Some(plan.nodes));
    Ok(control)
}

/// Starts the metrics-server on a free port of 127.0.0.1, scraping every `resolution`; it
/// registers itself with the aggregation layer (with the admin's credentials in a secure
/// cluster, as its install manifest is applied by an admin), and scrapes the kubelets over
/// HTTPS with those credentials in a secure cluster.
async fn start_metrics_server(
    access: &Access,
    members: &mut Members,
    resolution: std::time::Duration,
) -> Result<()> {
    let mut config = metrics_server::Config::new(access.source(Component::MetricsServer));
    config.metric_resolution = resolution;
    // HTTPS to the kubelets in a secure cluster, verified with the cluster CA; plain HTTP
    // (`--deprecated-kubelet-completely-insecure`) to a plain cluster's.
    config.kubelet_client.completely_insecure = !access.is_secure();
    config.kubelet_client.certificate_authority = access.root_ca_file().map(Path::to_path_buf);
    config.kubelet_request_timeout = config.kubelet_request_timeout.min(resolution * 9 / 10);
    let (bound_tx, bound_rx) = oneshot::channel();
    members.spawn_thread(Component::MetricsServer, move |shutdown| async move {
        match metrics_server::MetricsServer::bind(config).await {
            Ok(server) => {
                let _ = bound_tx.send(server.local_addr().map_err(|e| e.to_string()));
                server.run(shutdown).await
            }
            Err(e) => {
                let _ = bound_tx.send(Err(e.to_string()));
                idle_until(shutdown).await
            }
        }
    })?;
    let addr = bound(Component::MetricsServer, bound_rx).await?;
    members.reporter().started(
        Component::MetricsServer,
        Some(format!("http://{addr}")),
        None,
        None,
    );
    Ok(())
}

/// What a client component's thread reports once it has bound (or why it could not).
async fn bound<T>(component: Component, rx: oneshot::Receiver<Result<T, String>>) -> Result<T> {
    match rx.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(Error::component(component, message)),
        Err(_) => Err(Error::component(
            component,
            "its thread ended before it bound",
        )),
    }
}

/// What the thread of a component that could not bind does: its start has failed (the caller
/// reports why), so it waits to be stopped with the rest instead of ending, which would be
/// reported as a second failure.
async fn idle_until<E>(shutdown: CancellationToken) -> std::result::Result<(), E> {
    shutdown.cancelled().await;
    Ok(())
}
