//! The disruption controller's async shell (`pkg/controller/disruption/disruption.go`:
//! `NewDisruptionController`, the pod and PDB handlers, `getPdbForPod`, the finders, `sync`).
//!
//! ```text
//!   PDB informer ─ add/update/delete ─────────────────────────▶ queue "disruption"
//!   Pod informer ─ add/update/delete: the first PDB selecting it ▶   │ workers
//!   ReplicaSet, Deployment, ReplicationController, StatefulSet      ▼
//!   listers (the finders: a pod's controller and its scale)   sync(key): sync_pdb
//!                                                              ─▶ Executor (PUT /status,
//!                                                                 events); requeue when an
//!                                                                 evicted pod times out
//! ```
//!
//! As in Kubernetes, a change of a controller's replicas reaches a budget only through its
//! pods' events (the controllers are read through listers, not watched for changes).

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::{ObjectKey, Selector};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{ControllerScale, SyncInput, sync_pdb};
use crate::executor::Executor;
use crate::lookup::resolve_controller_ref;
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The disruption controller (cheap to clone).
#[derive(Clone)]
pub struct DisruptionController {
    pdbs: Lister<PodDisruptionBudget>,
    pods: Lister<Pod>,
    replica_sets: Lister<ReplicaSet>,
    deployments: Lister<Deployment>,
    replication_controllers: Lister<ReplicationController>,
    stateful_sets: Lister<StatefulSet>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl DisruptionController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let pdb_informer = factory.informer::<PodDisruptionBudget>();
        let pod_informer = factory.informer::<Pod>();
        let this = DisruptionController {
            pdbs: Lister::new(pdb_informer.indexer().clone()),
            pods: Lister::new(pod_informer.indexer().clone()),
            replica_sets: Lister::new(factory.informer::<ReplicaSet>().indexer().clone()),
            deployments: Lister::new(factory.informer::<Deployment>().indexer().clone()),
            replication_controllers: Lister::new(
                factory
                    .informer::<ReplicationController>()
                    .indexer()
                    .clone(),
            ),
            stateful_sets: Lister::new(factory.informer::<StatefulSet>().indexer().clone()),
            queue: RateLimitingQueue::on_clock("disruption", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("disruption")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pdb_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pdb: Arc<PodDisruptionBudget>, _| {
                    add.queue.add(ObjectKey::of(pdb.as_ref()))
                })
                .on_update(move |_, pdb: Arc<PodDisruptionBudget>| {
                    update.queue.add(ObjectKey::of(pdb.as_ref()))
                })
                .on_delete(move |pdb: DeltaObject<PodDisruptionBudget>| {
                    delete.queue.add(pdb.key())
                }),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| add.enqueue_pdb_of(&pod))
                .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| {
                    update.enqueue_pdb_of(&cur);
                    if old.metadata.labels != cur.metadata.labels {
                        update.enqueue_pdb_of(&old);
                    }
                })
                .on_delete(move |pod: DeltaObject<Pod>| delete.enqueue_pdb_of(pod.object())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// `getPdbForPod`: the first budget (by name) of the pod's namespace that selects it.
    fn enqueue_pdb_of(&self, pod: &Pod) {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let mut matching: Vec<Arc<PodDisruptionBudget>> = self
            .pdbs
            .list(pod.metadata.namespace.as_deref(), &Selector::everything())
            .into_iter()
            .filter(|pdb| {
                Selector::from_label_selector(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
                    .is_ok_and(|s| s.matches(labels))
            })
            .collect();
        matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if let Some(pdb) = matching.first() {
            self.queue.add(ObjectKey::of(pdb.as_ref()));
        }
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.pdbs)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// The finders (`finders()`): the pod's controller among the kinds whose scale is known,
    /// a ReplicaSet under a Deployment answering as the Deployment.
    fn scale_of(&self, r: &OwnerReference, namespace: &str) -> Option<ControllerScale> {
        let ns = Some(namespace);
        let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
        let scale = |uid: &Option<String>, replicas: Option<i32>| ControllerScale {
            uid: uid.clone().unwrap_or_default(),
            scale: replicas.unwrap_or(1),
        };
        match (group, r.kind.as_str()) {
            ("apps", "ReplicaSet") => {
                let rs = resolve_controller_ref(&self.replica_sets, ns, r)?;
                match get_controller_of(&rs.metadata) {
                    Some(owner) if owner.kind == "Deployment" => {
                        let d = resolve_controller_ref(&self.deployments, ns, owner)?;
                        Some(scale(
                            &d.metadata.uid,
                            d.spec.as_ref().and_then(|s| s.replicas),
                        ))
                    }
                    _ => Some(scale(
                        &rs.metadata.uid,
                        rs.spec.as_ref().and_then(|s| s.replicas),
                    )),
                }
            }
            ("", "ReplicationController") => {
                let rc = resolve_controller_ref(&self.replication_controllers, ns, r)?;
                Some(scale(
                    &rc.metadata.uid,
                    rc.spec.as_ref().and_then(|s| s.replicas),
                ))
            }
            ("apps", "StatefulSet") => {
                let sts = resolve_controller_ref(&self.stateful_sets, ns, r)?;
                Some(scale(
                    &sts.metadata.uid,
                    sts.spec.as_ref().and_then(|s| s.replicas),
                ))
            }
            _ => None,
        }
    }

    /// `sync` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(pdb) = self.pdbs.get(key.namespace.as_deref(), &key.name) else {
            return Ok(None);
        };
        // `getPodsForPdb`: a missing selector selects nothing, `{}` every pod.
        let selector =
            Selector::from_label_selector(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .unwrap_or_else(|_| Selector::nothing());
        let pods = self.pods.list(key.namespace.as_deref(), &selector);
        let pods: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let out = sync_pdb(SyncInput {
            pdb: &pdb,
            pods: &pods,
            scale_of: &|r, ns| self.scale_of(r, ns),
            now: self.executor.clock().wall(),
        });
        tracing::info!(pdb = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        client::trace::set_attribute(client::trace::attr::REASON, out.summary.as_str());
        self.executor
            .execute(out.actions, None)
            .await
            .map_err(|f| f.error)?;
        Ok(out.recheck_after)
    }
}
