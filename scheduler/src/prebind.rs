//! VolumeBinding's PreBind in the async shell: the API writes Reserve decided, then the wait
//! for the PV controller (`BindPodVolumes` of
//! `pkg/scheduler/framework/plugins/volumebinding/binder.go`: `bindAPIUpdate`, then
//! `checkBindings` polled every second until `bindTimeoutSeconds`, 600 by default).
//!
//! ```text
//!   static volume  PUT persistentvolumes/<pv> with claimRef ─┐
//!   to provision   PATCH persistentvolumeclaims/<claim>       ├─▶ poll the informers' objects
//!                  {volume.kubernetes.io/selected-node: node} ┘   until every claim is Bound
//!                                                                 (bind-completed) ─▶ bind pod
//! ```
//!
//! The decision ([`binder::check_bindings`]) is sans-IO; this file only moves data. Unlike
//! Kubernetes, which updates the claim with a PUT of the assumed object, the claim gets a
//! merge PATCH of the one annotation (no conflict with the PV controller's writes); and the
//! wait does not look at whether the pod was deleted meanwhile (the binding then fails).

use std::sync::Arc;
use std::time::Duration;

use client::trace::SpanContext;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::plugins::volume_binding::{self, PodVolumes, binder};
use crate::scheduler::Shared;

/// What PreBind writes with and waits on.
pub(crate) struct PreBindWriter<'a> {
    /// The scheduler's client (continuing the decision's trace inside `under`).
    pub client: &'a kube::Client,
    /// The cache the wait reads.
    pub shared: &'a Shared,
    /// Ends the wait on shutdown.
    pub stop: &'a CancellationToken,
}

/// VolumeBinding's PreBind (`BindPodVolumes`): PUT each chosen static volume with its
/// `claimRef`, PATCH each claim to provision with `selected-node`, then poll every second
/// until the PV controller has bound them all (`checkBindings`), at most
/// [`volume_binding::BIND_TIMEOUT`]; the error is the plugin's status message.
pub(crate) async fn bind_pod_volumes(
    writer: &PreBindWriter<'_>,
    node: &str,
    volumes: &mut PodVolumes,
    trace: Option<SpanContext>,
) -> Result<(), String> {
    let tracer = &writer.shared.tracer;
    for binding in &mut volumes.static_bindings {
        let api: Api<PersistentVolume> = Api::all(writer.client.clone());
        let name = binding.pv.metadata.name.clone().unwrap_or_default();
        let params = PostParams::default();
        let put = api.replace(&name, &params, &binding.pv);
        let updated = match trace {
            Some(ctx) => client::trace::under(tracer, ctx, put).await,
            None => put.await,
        }
        .map_err(|e| client::Error::from(e).to_string())?;
        binding.pv = Arc::new(updated);
    }
    for claim in &mut volumes.dynamic_provisions {
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(writer.client.clone(), &namespace);
        let patch = serde_json::json!({"metadata": {"annotations": {
            binder::ANN_SELECTED_NODE: node,
        }}});
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        let patched = api.patch(&name, &params, &patch);
        let updated = match trace {
            Some(ctx) => client::trace::under(tracer, ctx, patched).await,
            None => patched.await,
        }
        .map_err(|e| client::Error::from(e).to_string())?;
        *claim = Arc::new(updated);
    }
    let clock = &writer.shared.clock;
    let deadline = clock.now() + volume_binding::BIND_TIMEOUT;
    loop {
        tokio::select! {
            () = writer.stop.cancelled() => return Err("binding volumes: context canceled".into()),
            () = clock.sleep(Duration::from_secs(1)) => {}
        }
        let checked = {
            let state = writer.shared.lock();
            let labels = state
                .cache
                .node(node)
                .map(|n| n.node.metadata.labels.clone().unwrap_or_default());
            binder::check_bindings(node, labels.as_ref(), volumes, &state.cache.volumes)
        };
        match checked {
            Ok(true) => return Ok(()),
            Ok(false) if clock.now() >= deadline => {
                return Err("binding volumes: context deadline exceeded".into());
            }
            Ok(false) => {}
            Err(err) => return Err(format!("binding volumes: {}", err.0)),
        }
    }
}

/// Why a binding cycle failed; displayed as the FailedScheduling event's message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BindError {
    /// VolumeBinding's PreBind (its message, as Kubernetes words it).
    #[error("running PreBind plugin \"VolumeBinding\": {0}")]
    PreBind(String),
    /// The binding request.
    #[error("Binding rejected: {0}")]
    Bind(client::Error),
}
