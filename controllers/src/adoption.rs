//! Claiming with I/O: `ControllerRefManager.ClaimObject` with its `canAdopt` check
//! (`pkg/controller/controller_ref_manager.go`, `RecheckDeletionTimestamp`).
//!
//! [`crate::controller_ref::claim_objects`] decides from the cache; before the first
//! adoption Kubernetes re-reads the controller **live**, because a controller deleted a
//! moment ago (not yet in the cache) must not adopt anything:
//!
//! ```text
//!   claim_objects(controller, selector, candidates) ─▶ claimed, adoptions, releases
//!   adoptions? ─▶ GET controller: same UID, no deletionTimestamp? ─▶ PATCH adoptions
//!   PATCH releases
//!   ─▶ claimed objects (adopted ones carrying the new controllerRef, as the PATCH returned)
//! ```

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use apimachinery::Selector;
use client::Indexer;
use client::indexer::{CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::controller_ref::claim_objects;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::owner_ref::{get_controller_of, new_controller_ref};

/// Claims `candidates` for `controller` and carries out the adoption and release patches.
pub async fn claim<C, K>(
    executor: &Executor,
    controller: &C,
    selector: &Selector,
    candidates: &[K],
) -> Result<Vec<K>>
where
    C: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + Clone
        + DeserializeOwned
        + Debug,
    K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    let claims = claim_objects(controller, selector, candidates);
    let adopt = !claims.adoptions.is_empty() && can_adopt(executor, controller).await?;
    let mut patches = claims.releases.clone();
    if adopt {
        patches.extend(claims.adoptions.iter().cloned());
    }
    if !patches.is_empty() {
        executor.execute(patches, None).await.map_err(|f| f.error)?;
    }
    let controller_ref = new_controller_ref(controller);
    Ok(claims
        .claimed
        .into_iter()
        .filter_map(|obj| {
            let mut obj = obj.clone();
            let meta = obj.metadata_mut();
            if get_controller_of(meta).is_none() {
                if !adopt {
                    return None;
                }
                meta.owner_references
                    .get_or_insert_with(Vec::new)
                    .push(controller_ref.clone());
            }
            Some(obj)
        })
        .collect())
}

/// `claimPods` of the ReplicaSet and DaemonSet controllers: the pods `controller` controls
/// plus the orphans `selector` matches in its namespace, claimed.
///
/// The pods it already controls and still selects (nearly all of them, nearly always) are
/// taken from the cache as they are; only the rest (orphans to adopt, owned pods no longer
/// selected, to release) go through [`claim`] and its patches. The orphans come from the
/// same controller-UID index (`FilterPodsByOwner` with `includeOrphanedPods`), not from a walk
/// over every pod of the namespace: a sync costs the controller's own pods.
pub async fn claim_pods<C>(
    executor: &Executor,
    pods: &Indexer<Pod>,
    controller: &C,
    selector: &Selector,
) -> Result<Vec<Arc<Pod>>>
where
    C: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let uid = controller.uid().unwrap_or_default();
    let empty = BTreeMap::new();
    let selects = |p: &Pod| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty));
    let (mut claimed, mut unsettled): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = pods
        .by_index(CONTROLLER_UID_INDEX, &uid)
        .unwrap_or_default()
        .into_iter()
        .partition(|p| selects(p));
    let namespace = controller.namespace();
    unsettled.extend(
        pods.by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.metadata.namespace == namespace && selects(p)),
    );
    if !unsettled.is_empty() {
        let candidates: Vec<Pod> = unsettled.iter().map(|p| (**p).clone()).collect();
        claimed.extend(
            claim(executor, controller, selector, &candidates)
                .await?
                .into_iter()
                .map(Arc::new),
        );
    }
    Ok(claimed)
}

/// `RecheckDeletionTimestamp`: a live GET; adopt only if the controller still exists with the
/// same UID and is not being deleted.
async fn can_adopt<C>(executor: &Executor, controller: &C) -> Result<bool>
where
    C: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let api: Api<C> = Api::namespaced(
        executor.client().clone(),
        &controller.namespace().unwrap_or_default(),
    );
    let name = controller.name_any();
    let fresh = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::from_kube("get", format!("{} {name}", C::kind(&())), e))?;
    Ok(fresh.is_some_and(|f| {
        f.meta().uid == controller.meta().uid && f.meta().deletion_timestamp.is_none()
    }))
}
