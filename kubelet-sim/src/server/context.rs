//! Which container a stream reaches and what its shell knows: the running container of a pod
//! (`kubelet_pods.go` `findContainer`, which looks among the runtime's running containers
//! only), and the [`ContainerContext`] of an exec's shell, with the ConfigMaps and Secrets the
//! pod references and the `kubernetes` Service's address read through the API as the node's
//! kubelet reads them (`kubelet_pods.go` `makeEnvironmentVariables`, the volume plugins).
//!
//! Those reads are best effort: whatever cannot be read within [`READ_TIMEOUT`] (or is
//! forbidden) is left out of the shell's view, as a container would miss an optional
//! reference. The ServiceAccount token is not requested (a kubelet asks the TokenRequest API).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use client::impersonation::acting_as;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Service};
use kube::Api;

use super::KubeletServer;
use crate::node::NodeState;
use crate::shell::ContainerContext;

/// How long the reads of an exec's ConfigMaps, Secrets and Service may take together.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// A container whose current run is running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningContainer {
    /// Its name.
    pub name: String,
    /// `state.running.startedAt`.
    pub started: Timestamp,
    /// `restartCount` (which run this is).
    pub restarts: i32,
    /// The spec's `stdin`: the main process reads its standard input.
    pub stdin: bool,
    /// The spec's `tty`.
    pub tty: bool,
}

/// The container `name` of `pod` (regular, init or ephemeral) if it is running.
pub fn running_container(pod: &Pod, name: &str) -> Option<RunningContainer> {
    let status = pod.status.as_ref()?;
    let s = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .chain(status.ephemeral_container_statuses.iter().flatten())
        .find(|s| s.name == name)?;
    let started = s.state.as_ref()?.running.as_ref()?.started_at.as_ref()?.0;
    let spec = pod.spec.as_ref()?;
    let (stdin, tty) = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .map(|c| (c.stdin, c.tty))
        .or_else(|| {
            spec.ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == name)
                .map(|c| (c.stdin, c.tty))
        })?;
    Some(RunningContainer {
        name: name.to_owned(),
        started,
        restarts: s.restart_count,
        stdin: stdin.unwrap_or(false),
        tty: tty.unwrap_or(false),
    })
}

/// The shell's view of `container` in `pod` on `node`.
pub async fn container_context(
    server: &KubeletServer,
    pod: &Pod,
    node: &NodeState,
    container: &RunningContainer,
) -> ContainerContext {
    let mut ctx = ContainerContext::new(pod.clone(), container.name.clone());
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    ctx.copied = server.copied_files(uid, &container.name, container.restarts);
    if let Some(client) = server.client() {
        let reads = read_references(client.clone(), pod, &mut ctx);
        let _ = tokio::time::timeout(READ_TIMEOUT, acting_as(node.identity().clone(), reads)).await;
    }
    ctx
}

/// The names of the ConfigMaps and Secrets `pod` references (env, envFrom, volumes).
pub fn references(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut config_maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return (config_maps, secrets);
    };
    let mut from_container = |c: &Container| {
        for e in c.env.iter().flatten() {
            if let Some(from) = &e.value_from {
                if let Some(r) = &from.config_map_key_ref {
                    config_maps.insert(r.name.clone());
                }
                if let Some(r) = &from.secret_key_ref {
                    secrets.insert(r.name.clone());
                }
            }
        }
        for e in c.env_from.iter().flatten() {
            if let Some(r) = &e.config_map_ref {
                config_maps.insert(r.name.clone());
            }
            if let Some(r) = &e.secret_ref {
                secrets.insert(r.name.clone());
            }
        }
    };
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        from_container(c);
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            config_maps.insert(cm.name.clone());
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(s);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                secrets.insert(s.name.clone());
            }
        }
    }
    config_maps.retain(|n| !n.is_empty());
    secrets.retain(|n| !n.is_empty());
    (config_maps, secrets)
}

async fn read_references(client: kube::Client, pod: &Pod, ctx: &mut ContainerContext) {
    let namespace = ctx.namespace();
    let (config_maps, secrets) = references(pod);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    for name in config_maps {
        if let Ok(cm) = cms.get(&name).await {
            ctx.config_maps.insert(name, cm.data.unwrap_or_default());
        }
    }
    let secret_api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    for name in secrets {
        if let Ok(secret) = secret_api.get(&name).await {
            let data: BTreeMap<String, String> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect();
            ctx.secrets.insert(name, data);
        }
    }
    let services: Api<Service> = Api::namespaced(client, "default");
    if let Ok(svc) = services.get("kubernetes").await {
        ctx.kubernetes_service_ip = svc.spec.and_then(|s| s.cluster_ip);
    }
}
