//! The async shell of the volume controllers: informers on PersistentVolumes,
//! PersistentVolumeClaims and StorageClasses, one queue per controller (a claim's key has its
//! namespace, a volume's none), and the execution of [`VolumeAction`]s.
//!
//! ```text
//!   PVC add/update ─▶ key ns/name ─┐                 ┌─ binder::sync_claim / sync_volume
//!   PVC delete ─▶ its volume's key ├─▶ queue ─▶ sync ┤  provisioner::sync_claim / sync_volume
//!   PV add/update/delete ─▶ name ──┘                 └─▶ execute (in order, stop on error)
//! ```
//!
//! Mirrors the informer wiring of `pkg/controller/volume/persistentvolume/pv_controller_base.go`
//! (`NewController`, `addClaim`, `deleteClaim`, `updateVolume`) and the external provisioner
//! library's claim and volume handlers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::ObjectKey;
use apimachinery::labels::Selector;
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Decision, VolumeAction, binder, provisioner};
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// How often a Pending claim is looked at again (`--pvclaimbinder-sync-period`, 15 s).
pub const CLAIM_RESYNC: Duration = Duration::from_secs(15);

/// Which of the two controllers a shell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The PV controller's binder (`persistentvolume-binder-controller`).
    Binder,
    /// The simulated external provisioner (`simulated-provisioner`).
    Provisioner,
}

/// A volume controller (cheap to clone).
#[derive(Clone)]
pub struct VolumeController {
    role: Role,
    volumes: Lister<PersistentVolume>,
    claims: Lister<PersistentVolumeClaim>,
    classes: Lister<StorageClass>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl VolumeController {
    /// The PV controller's binder on the factory's informers.
    pub fn binder(factory: &SharedInformerFactory, executor: Executor) -> Self {
        Self::new(Role::Binder, factory, executor)
    }

    /// The simulated provisioner on the factory's informers.
    pub fn provisioner(factory: &SharedInformerFactory, executor: Executor) -> Self {
        Self::new(Role::Provisioner, factory, executor)
    }

    fn new(role: Role, factory: &SharedInformerFactory, executor: Executor) -> Self {
        let (queue_name, metrics_name) = match role {
            Role::Binder => ("persistentvolume", "persistentvolume-binder"),
            Role::Provisioner => ("simulated-provisioner", "simulated-provisioner"),
        };
        let volume_informer = factory.informer::<PersistentVolume>();
        let claim_informer = factory.informer::<PersistentVolumeClaim>();
        let class_informer = factory.informer::<StorageClass>();
        let this = VolumeController {
            role,
            volumes: Lister::new(volume_informer.indexer().clone()),
            claims: Lister::new(claim_informer.indexer().clone()),
            classes: Lister::new(class_informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock(queue_name, executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new(metrics_name)),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        claim_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |c: Arc<PersistentVolumeClaim>, _| add.queue.add(ObjectKey::of(&*c)))
                .on_update(move |_, c: Arc<PersistentVolumeClaim>| {
                    update.queue.add(ObjectKey::of(&*c))
                })
                .on_delete(move |c: DeltaObject<PersistentVolumeClaim>| {
                    // `deleteClaim`: the volume may now be Released.
                    let claim = c.object();
                    if let Some(v) = claim
                        .spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_deref())
                        .filter(|v| !v.is_empty())
                    {
                        delete.queue.add(ObjectKey::new(None, v));
                    }
                }),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        volume_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |v: Arc<PersistentVolume>, _| add.queue.add(ObjectKey::of(&*v)))
                .on_update(move |_, v: Arc<PersistentVolume>| update.queue.add(ObjectKey::of(&*v)))
                .on_delete(move |v: DeltaObject<PersistentVolume>| {
                    // A bound claim whose volume went away is Lost.
                    let volume = v.object();
                    if let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
                        && let (Some(ns), Some(name)) = (&r.namespace, &r.name)
                    {
                        delete.queue.add(ObjectKey::new(Some(ns), name.clone()));
                    }
                }),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker`.
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    fn all_volumes(&self) -> Vec<PersistentVolume> {
        self.volumes
            .list(None, &Selector::everything())
            .into_iter()
            .map(|v| (*v).clone())
            .collect()
    }

    fn all_classes(&self) -> Vec<StorageClass> {
        self.classes
            .list(None, &Selector::everything())
            .into_iter()
            .map(|c| (*c).clone())
            .collect()
    }

    /// One sync of a claim (`namespace` set) or a volume.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let now = self.executor.clock().wall();
        let mut requeue = None;
        let decision = match &key.namespace {
            Some(ns) => {
                let Some(claim) = self.claims.get(Some(ns), &key.name) else {
                    return Ok(None);
                };
                match self.role {
                    Role::Binder => {
                        let d = binder::sync_claim(
                            &claim,
                            &self.all_volumes(),
                            &self.all_classes(),
                            now,
                        );
                        if super::claim_phase(&claim) != "Bound" {
                            requeue = Some(CLAIM_RESYNC);
                        }
                        d
                    }
                    Role::Provisioner => {
                        let name = provisioner::volume_name_for(&claim);
                        let exists = self.volumes.get(None, &name).is_some();
                        provisioner::sync_claim(&claim, &self.all_classes(), exists)
                    }
                }
            }
            None => {
                let Some(volume) = self.volumes.get(None, &key.name) else {
                    return Ok(None);
                };
                match self.role {
                    Role::Binder => {
                        let claim = self.claim_of(&volume).await?;
                        binder::sync_volume(&volume, claim.as_ref(), now)
                    }
                    Role::Provisioner => provisioner::sync_volume(&volume),
                }
            }
        };
        self.execute(decision).await?;
        Ok(requeue)
    }

    /// The claim a volume's claimRef names: from the cache, else (before calling it gone) live
    /// from the API server, as `syncVolume` checks a claim missing from its cache.
    async fn claim_of(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Option<PersistentVolumeClaim>, Error> {
        let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            return Ok(None);
        };
        let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
            return Ok(None);
        };
        if let Some(c) = self.claims.get(Some(ns), name) {
            return Ok(Some((*c).clone()));
        }
        if r.uid.as_deref().unwrap_or("").is_empty() {
            return Ok(None);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.executor.client(), ns);
        api.get_opt(name)
            .await
            .map_err(|e| Error::from_kube("get", format!("PersistentVolumeClaim {ns}/{name}"), e))
    }

    /// Records the decision in the trace, then carries out its actions in order, stopping at
    /// the first failed write. A second write of the same object is sent with the
    /// resourceVersion the first returned.
    async fn execute(&self, decision: Decision) -> Result<(), Error> {
        tracing::debug!("{}", decision.summary);
        client::trace::set_summary(&decision.summary);
        client::trace::set_attribute(client::trace::attr::REASON, decision.summary.as_str());
        let client = self.executor.client();
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let mut versions: HashMap<ObjectKey, String> = HashMap::new();
        for action in decision.actions {
            tracing::debug!("{}", action.describe());
            match action {
                VolumeAction::CreateVolume(pv) => {
                    if let Err(e) = volumes.create(&PostParams::default(), &pv).await {
                        let e = Error::from_kube(
                            "create",
                            format!("PersistentVolume {}", key_of(&pv.metadata)),
                            e,
                        );
                        if !e.is_already_exists() {
                            return Err(e);
                        }
                    }
                }
                VolumeAction::UpdateVolume(pv) => {
                    write(&volumes, *pv, false, &mut versions).await?;
                }
                VolumeAction::UpdateVolumeStatus(pv) => {
                    write(&volumes, *pv, true, &mut versions).await?;
                }
                VolumeAction::UpdateClaim(c) => {
                    let api: Api<PersistentVolumeClaim> = Api::namespaced(
                        client.clone(),
                        c.metadata.namespace.as_deref().unwrap_or_default(),
                    );
                    write(&api, *c, false, &mut versions).await?;
                }
                VolumeAction::UpdateClaimStatus(c) => {
                    let api: Api<PersistentVolumeClaim> = Api::namespaced(
                        client.clone(),
                        c.metadata.namespace.as_deref().unwrap_or_default(),
                    );
                    write(&api, *c, true, &mut versions).await?;
                }
                VolumeAction::DeleteVolume(target) => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: Some(target.uid.clone()).filter(|u| !u.is_empty()),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    if let Err(e) = volumes.delete(&target.name, &params).await {
                        let e = Error::from_kube("delete", &target, e);
                        if !(e.is_not_found() || e.is_conflict()) {
                            return Err(e);
                        }
                    }
                }
                VolumeAction::EnqueueClaim(key) => self.queue.add(key),
                VolumeAction::Event(event) => self.executor.record(&event),
            }
        }
        Ok(())
    }
}

/// `PUT` of `obj` (or of its `/status`), with the resourceVersion an earlier write of this
/// sync returned for it.
async fn write<K>(
    api: &Api<K>,
    mut obj: K,
    status: bool,
    versions: &mut HashMap<ObjectKey, String>,
) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let key = ObjectKey::from_meta(obj.meta());
    if let Some(rv) = versions.get(&key) {
        obj.meta_mut().resource_version = Some(rv.clone());
    }
    let name = key.name.clone();
    let what = format!("{} {key}", K::kind(&()));
    let result = if status {
        api.replace_status(&name, &PostParams::default(), &obj)
            .await
    } else {
        api.replace(&name, &PostParams::default(), &obj).await
    };
    let updated = result.map_err(|e| Error::from_kube("update", what, e))?;
    if let Some(rv) = updated.meta().resource_version.clone() {
        versions.insert(key, rv);
    }
    Ok(())
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectKey {
    ObjectKey::from_meta(meta)
}
