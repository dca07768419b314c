//! The local APIServices of the built-in group versions, made when the server starts, as
//! kube-apiserver's autoregister controller makes them (`pkg/controlplane/apiserver/
//! aggregator.go`: `apiServicesToRegister`, `makeAPIService` with the
//! `apiVersionPriorities` table, label `kube-aggregator.kubernetes.io/automanaged: onstart`).
//!
//! So `kubectl get apiservice` lists `v1.`, `v1.apps`, `v2.autoscaling`, ... as `Local`, next
//! to `v1beta1.metrics.k8s.io` once a metrics-server registers. Only group versions the
//! registry serves and the table has a priority for get one (not CustomResourceDefinitions'
//! groups); an existing one is left as it is, and none is deleted.

use serde_json::{Value, json};

use super::{GROUP, RESOURCE};
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::rest::{self, WriteContext, WritePart};
use crate::state::AppState;
use crate::storage::ObjectRef;

/// The label of the APIServices made here.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// `(group, version, groupPriorityMinimum, versionPriority)` of the built-in group versions
/// miniplane serves, as kube-apiserver's table has them.
pub const PRIORITIES: &[(&str, &str, i32, i32)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// The APIService `makeAPIService` makes for a served built-in group version.
pub fn local_apiservice(
    group: &str,
    version: &str,
    group_priority: i32,
    version_priority: i32,
) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "APIService",
        "metadata": {
            "name": super::apiservice::required_name(group, version),
            "labels": {AUTOMANAGED_LABEL: "onstart"},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        },
    })
}

/// Creates the missing local APIServices; returns how many it made.
pub async fn ensure_local_apiservices(state: &AppState) -> Result<usize> {
    let Some(info) = state
        .registry()
        .lookup(&GroupVersion::new(GROUP, "v1"), RESOURCE)
    else {
        return Ok(0);
    };
    let served = state.registry().group_versions();
    let creates = PRIORITIES
        .iter()
        .filter(|(g, v, _, _)| served.contains(&GroupVersion::new(*g, *v)))
        .map(|&(group, version, gp, vp)| {
            let info = info.clone();
            async move {
                let r = ObjectRef {
                    info: info.clone(),
                    namespace: None,
                    name: super::apiservice::required_name(group, version),
                };
                if state.storage().get(&r).await?.is_some() {
                    return Ok(false);
                }
                let mut obj = local_apiservice(group, version, gp, vp);
                let wctx = WriteContext {
                    manager: Some("kube-apiserver".into()),
                    now: state.now(),
                    ids: state.ids().clone(),
                    part: WritePart::Main,
                    escalation: None,
                    service_account: None,
                    user: None,
                    signer_check: None,
                };
                rest::default(&info, &mut obj)?;
                rest::before_create(&info, None, &mut obj, &wctx)?;
                match state.storage().create(&r, obj).await {
                    Ok(_) => Ok(true),
                    Err(ApiError::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            }
        });
    let results = futures::future::join_all(creates).await;
    let mut created = 0;
    for r in results {
        if r? {
            created += 1;
        }
    }
    Ok(created)
}
