//! The scheduler's view of PersistentVolumeClaims, PersistentVolumes and StorageClasses, with
//! the claims and volumes a decision has assumed on top of what the API server said
//! (`pkg/scheduler/util/assumecache/assume_cache.go` with the binder's `PVCAssumeCache` and
//! `PVAssumeCache`, plus the StorageClass lister).
//!
//! ```text
//!   informer  ── set_pvc / set_pv ──▶  API object ──────────────┐
//!   Reserve   ── assume_pvc (selected-node set)  ─▶ assumed ────┤ pvc(): the assumed one
//!   Unreserve ── restore_pvc ─▶ assumed dropped                 │ while the API has nothing
//!   informer delivers a newer resourceVersion ─▶ assumed dropped┘ newer
//! ```
//!
//! The next decision sees what an earlier one assumed (a claim shared by two pods goes to the
//! node chosen first; a static volume is not handed out twice), while PreBind waits on the
//! API objects only ([`VolumeCache::api_pvc`], [`VolumeCache::api_pv`]), as the binder's
//! `checkBindings` does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `(namespace, name)` of a claim.
pub type ClaimKey = (String, String);

/// The key of a claim object.
pub fn claim_key(pvc: &PersistentVolumeClaim) -> ClaimKey {
    (
        pvc.metadata.namespace.clone().unwrap_or_default(),
        pvc.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether `new` is at least as recent as `old` (resourceVersions compared as numbers, as
/// `etcd3.APIObjectVersioner` does; an unparsable version counts as newer).
pub fn is_not_older(new: &ObjectMeta, old: &ObjectMeta) -> bool {
    let version = |m: &ObjectMeta| m.resource_version.as_deref()?.parse::<u64>().ok();
    match (version(new), version(old)) {
        (Some(new), Some(old)) => new >= old,
        _ => true,
    }
}

/// Claims, volumes and classes as the informers delivered them, plus assumed claims and
/// volumes.
#[derive(Debug, Default)]
pub struct VolumeCache {
    pvcs: BTreeMap<ClaimKey, Arc<PersistentVolumeClaim>>,
    assumed_pvcs: BTreeMap<ClaimKey, Arc<PersistentVolumeClaim>>,
    pvs: BTreeMap<String, Arc<PersistentVolume>>,
    assumed_pvs: BTreeMap<String, Arc<PersistentVolume>>,
    classes: BTreeMap<String, Arc<StorageClass>>,
}

impl VolumeCache {
    /// An empty cache.
    pub const fn new() -> Self {
        VolumeCache {
            pvcs: BTreeMap::new(),
            assumed_pvcs: BTreeMap::new(),
            pvs: BTreeMap::new(),
            assumed_pvs: BTreeMap::new(),
            classes: BTreeMap::new(),
        }
    }

    /// A claim as decisions see it: the assumed version if there is one (`GetPVC`).
    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.assumed_pvcs.get(&key).or_else(|| self.pvcs.get(&key))
    }

    /// A claim as the API server last said (`GetAPIPVC`).
    pub fn api_pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.pvcs.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// A volume as decisions see it (`GetPV`).
    pub fn pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.assumed_pvs.get(name).or_else(|| self.pvs.get(name))
    }

    /// A volume as the API server last said (`GetAPIPV`).
    pub fn api_pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.pvs.get(name)
    }

    /// The volumes of one class, assumed versions included (`ListPVs(storageClassName)`).
    pub fn pvs_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.pvs
            .keys()
            .filter_map(|name| self.pv(name))
            .filter(|pv| super::binder::persistent_volume_class(pv) == class)
            .cloned()
            .collect()
    }

    /// A StorageClass.
    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    /// A claim was added or updated: an assumed version no newer than it is dropped.
    pub fn set_pvc(&mut self, pvc: Arc<PersistentVolumeClaim>) {
        let key = claim_key(&pvc);
        if self
            .assumed_pvcs
            .get(&key)
            .is_some_and(|assumed| is_not_older(&pvc.metadata, &assumed.metadata))
        {
            self.assumed_pvcs.remove(&key);
        }
        self.pvcs.insert(key, pvc);
    }

    /// A claim was deleted.
    pub fn delete_pvc(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.pvcs.remove(&key);
        self.assumed_pvcs.remove(&key);
    }

    /// A volume was added or updated: an assumed version no newer than it is dropped.
    pub fn set_pv(&mut self, pv: Arc<PersistentVolume>) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        if self
            .assumed_pvs
            .get(&name)
            .is_some_and(|assumed| is_not_older(&pv.metadata, &assumed.metadata))
        {
            self.assumed_pvs.remove(&name);
        }
        self.pvs.insert(name, pv);
    }

    /// A volume was deleted.
    pub fn delete_pv(&mut self, name: &str) {
        self.pvs.remove(name);
        self.assumed_pvs.remove(name);
    }

    /// A StorageClass was added or updated.
    pub fn set_class(&mut self, class: Arc<StorageClass>) {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.classes.insert(name, class);
    }

    /// A StorageClass was deleted.
    pub fn delete_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    /// Reserve's claim (with `selected-node`) until the API server has a newer one (`Assume`).
    pub fn assume_pvc(&mut self, pvc: Arc<PersistentVolumeClaim>) {
        self.assumed_pvcs.insert(claim_key(&pvc), pvc);
    }

    /// Reserve's volume (with its `claimRef`) until the API server has a newer one.
    pub fn assume_pv(&mut self, pv: Arc<PersistentVolume>) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        self.assumed_pvs.insert(name, pv);
    }

    /// Drops an assumed claim (`Restore`).
    pub fn restore_pvc(&mut self, namespace: &str, name: &str) {
        self.assumed_pvcs
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Drops an assumed volume (`Restore`).
    pub fn restore_pv(&mut self, name: &str) {
        self.assumed_pvs.remove(name);
    }

    /// Drops what Reserve assumed for one pod (`RevertAssumedPodVolumes`).
    pub fn restore_all(&mut self, volumes: &super::PodVolumes) {
        super::unreserve(self, volumes);
    }
}
