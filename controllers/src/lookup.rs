//! Finding related objects in the informer caches: `resolveControllerRef` and the
//! `getDeploymentsForReplicaSet` / `getPodReplicaSets` helpers of
//! `pkg/controller/deployment/deployment_controller.go` and
//! `pkg/controller/replicaset/replica_set.go`.
//!
//! Informer handlers get one object and must find the controller keys to enqueue:
//!
//! ```text
//!   ReplicaSet web-5d4f8 ── controllerRef {kind Deployment, name web, uid d1}
//!        │ resolve_controller_ref: lister.get(ns, "web"), same uid? ─▶ enqueue default/web
//!        └ no controllerRef (orphan): every Deployment in ns whose selector matches ─▶ enqueue
//! ```

use std::sync::Arc;

use apimachinery::Selector;
use client::Lister;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::Resource;

/// `resolveControllerRef`: the cached controller `r` points to, if it is of kind `C` and
/// has the referenced UID (a namesake re-created since is not the controller).
pub fn resolve_controller_ref<C>(
    lister: &Lister<C>,
    namespace: Option<&str>,
    r: &OwnerReference,
) -> Option<Arc<C>>
where
    C: Resource<DynamicType = ()> + 'static,
{
    if r.kind != C::kind(&()) {
        return None;
    }
    let controller = lister.get(namespace, &r.name)?;
    (controller.meta().uid.as_deref() == Some(r.uid.as_str())).then_some(controller)
}

/// The controllers in `namespace` whose selector matches `labels` — who might adopt an
/// orphan. Controllers with an empty or invalid selector are skipped, as in Kubernetes.
pub fn selecting_controllers<C>(
    lister: &Lister<C>,
    namespace: Option<&str>,
    labels: &std::collections::BTreeMap<String, String>,
    selector_of: impl Fn(&C) -> Option<&LabelSelector>,
) -> Vec<Arc<C>>
where
    C: Resource<DynamicType = ()> + 'static,
{
    lister
        .list(namespace, &apimachinery::Selector::everything())
        .into_iter()
        .filter(|c| {
            Selector::from_label_selector(selector_of(c))
                .is_ok_and(|s| !s.is_everything() && s.matches(labels))
        })
        .collect()
}
