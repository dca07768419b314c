//! The Deployment controller's async shell: `pkg/controller/deployment/deployment_controller.go`
//! (`NewDeploymentController`, the informer handlers, `syncDeployment`'s I/O half,
//! `getReplicaSetsForDeployment`).
//!
//! ```text
//!   Deployment informer ─ add/update/delete ──────────────▶ queue "deployment" (ns/name)
//!   ReplicaSet informer ─ controllerRef → its Deployment ─▶   │
//!                       └ orphan → Deployments selecting it   │ 5 workers
//!   Pod informer ─ deleted, Recreate ─▶ its Deployment        ▼
//!     sync(key): lister snapshot + own recent RS writes ─▶ claim RSs (live GET before
//!                adopting) ─▶ sync_deployment (sans-IO) ─▶ Executor (POST/PUT RS, PUT status,
//!                events) ─▶ remember the RSs written until the informer has them
//! ```
//!
//! Unlike kube-controller-manager, the ReplicaSets it wrote count before its informer
//! delivers them ([`RecentWrites`]), so that a sync right after a write never sizes a
//! ReplicaSet past replicas + maxSurge from a stale sum.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::ObjectKey;
use client::indexer::CONTROLLER_UID_INDEX;
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::action::Action;
use crate::adoption::claim;
use crate::deployment::recent_writes::RecentWrites;
use crate::deployment::sync::{on_replica_set_already_exists, on_replica_set_create_error};
use crate::deployment::util::strategy_type;
use crate::deployment::{DeploymentSyncInput, sync_deployment};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::lookup::{resolve_controller_ref, selecting_controllers};
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::selector;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The moments of a Deployment's life a trace marks, as the status it is about to write
/// reaches them: `Available` turning true, and a rollout completing (`Progressing` with
/// reason `NewReplicaSetAvailable`).
fn milestones(before: &Deployment, actions: &[Action]) -> Vec<(&'static str, String)> {
    let condition = |d: &Deployment, type_: &str| {
        d.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_).cloned())
    };
    let available = |d: &Deployment| condition(d, "Available").is_some_and(|c| c.status == "True");
    let complete = |d: &Deployment| {
        condition(d, "Progressing")
            .is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"))
    };
    let mut out = Vec::new();
    for action in actions {
        let Action::UpdateDeploymentStatus(after) = action else {
            continue;
        };
        let status = after.status.clone().unwrap_or_default();
        let counts = format!(
            "{} available of {} desired ({} updated)",
            status.available_replicas.unwrap_or(0),
            after.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            status.updated_replicas.unwrap_or(0),
        );
        if available(after) && !available(before) {
            let message = condition(after, "Available")
                .and_then(|c| c.message)
                .unwrap_or_default();
            out.push(("deployment available", format!("{counts}: {message}")));
        }
        if complete(after) && !complete(before) {
            let message = condition(after, "Progressing")
                .and_then(|c| c.message)
                .unwrap_or_default();
            out.push(("rollout complete", format!("{counts}: {message}")));
        }
    }
    out
}

/// `maxRetries`: a Deployment key is dropped after this many failed syncs in a row.
pub const MAX_RETRIES: u32 = 15;

/// The Deployment controller (cheap to clone).
#[derive(Clone)]
pub struct DeploymentController {
    deployments: Lister<Deployment>,
    replica_sets: Lister<ReplicaSet>,
    pods: client::Indexer<Pod>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// ReplicaSets written by this controller that its informer has not delivered yet.
    recent_writes: Arc<RecentWrites>,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl DeploymentController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let d_informer = factory.informer::<Deployment>();
        let rs_informer = factory.informer::<ReplicaSet>();
        let pod_informer = factory.informer::<Pod>();
        pod_informer.add_indexer(
            CONTROLLER_UID_INDEX,
            Arc::new(client::indexer::controller_uid_index_func::<Pod>),
        );
        let this = DeploymentController {
            deployments: Lister::new(d_informer.indexer().clone()),
            replica_sets: Lister::new(rs_informer.indexer().clone()),
            pods: pod_informer.indexer().clone(),
            queue: RateLimitingQueue::on_clock("deployment", executor.clock().clone()),
            executor,
            recent_writes: Arc::default(),
            metrics: Arc::new(ControllerMetrics::new("deployment")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        d_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |d: Arc<Deployment>, _| add.enqueue(d.as_ref()))
                .on_update(move |_, d: Arc<Deployment>| update.enqueue(d.as_ref()))
                .on_delete(move |d: DeltaObject<Deployment>| delete.queue.add(d.key())),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        rs_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |rs: Arc<ReplicaSet>, _| add.add_replica_set(&rs))
                .on_update(move |old: Arc<ReplicaSet>, cur: Arc<ReplicaSet>| {
                    update.update_replica_set(&old, &cur)
                })
                .on_delete(move |rs: DeltaObject<ReplicaSet>| {
                    delete.recent_writes.forget(&rs.key());
                    delete.enqueue_controller_of(rs.object())
                }),
        );
        let delete = this.clone();
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_delete(move |pod: DeltaObject<Pod>| delete.delete_pod(pod.object())),
        );
        this
    }

    /// The controller's work queue (its metrics are served on `/metrics`).
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: Some(MAX_RETRIES),
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.deployments)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    fn enqueue(&self, d: &Deployment) {
        self.queue.add(ObjectKey::of(d));
    }

    /// `addReplicaSet`: enqueue its controller, or every Deployment that may adopt it.
    fn add_replica_set(&self, rs: &ReplicaSet) {
        if rs.metadata.deletion_timestamp.is_some() {
            return self.enqueue_controller_of(rs);
        }
        if get_controller_of(&rs.metadata).is_some() {
            return self.enqueue_controller_of(rs);
        }
        self.enqueue_adopters(rs);
    }

    /// `updateReplicaSet`: periodic resyncs (same resourceVersion) are ignored; a changed
    /// controllerRef enqueues both the old and the new controller.
    fn update_replica_set(&self, old: &ReplicaSet, cur: &ReplicaSet) {
        if old.resource_version() == cur.resource_version() {
            return;
        }
        let old_ref = get_controller_of(&old.metadata);
        let cur_ref = get_controller_of(&cur.metadata);
        if old_ref.is_some() && old_ref.map(|r| &r.uid) != cur_ref.map(|r| &r.uid) {
            self.enqueue_controller_of(old);
        }
        if cur_ref.is_some() {
            return self.enqueue_controller_of(cur);
        }
        if old.metadata.labels != cur.metadata.labels || old_ref.is_some() {
            self.enqueue_adopters(cur);
        }
    }

    fn enqueue_controller_of(&self, rs: &ReplicaSet) {
        let Some(r) = get_controller_of(&rs.metadata) else {
            return;
        };
        if let Some(d) = resolve_controller_ref(&self.deployments, rs.namespace().as_deref(), r) {
            self.enqueue(&d);
        }
    }

    fn enqueue_adopters(&self, rs: &ReplicaSet) {
        let empty = BTreeMap::new();
        let labels = rs.metadata.labels.as_ref().unwrap_or(&empty);
        for d in selecting_controllers(&self.deployments, rs.namespace().as_deref(), labels, |d| {
            d.spec.as_ref().map(|s| &s.selector)
        }) {
            self.enqueue(&d);
        }
    }

    /// `deletePod`: a Recreate Deployment waits for its old pods to be gone.
    fn delete_pod(&self, pod: &Pod) {
        let Some(r) = get_controller_of(&pod.metadata) else {
            return;
        };
        let ns = pod.namespace();
        let Some(rs) = resolve_controller_ref(&self.replica_sets, ns.as_deref(), r) else {
            return;
        };
        let Some(dr) = get_controller_of(&rs.metadata) else {
            return;
        };
        if let Some(d) = resolve_controller_ref(&self.deployments, ns.as_deref(), dr)
            && strategy_type(&d) == "Recreate"
        {
            self.enqueue(&d);
        }
    }

    /// `syncDeployment` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let ns = key.namespace.as_deref();
        let Some(cached) = self.deployments.get(ns, &key.name) else {
            tracing::debug!(%key, "deployment has been deleted");
            return Ok(None);
        };
        let d: Deployment = (*cached).clone();
        let replica_sets = self.get_replica_sets_for_deployment(&d).await?;
        let pods_by_replica_set = if strategy_type(&d) == "Recreate" {
            self.pods_by_replica_set(&replica_sets)
        } else {
            // Only Recreate looks at pods; skipping the copy keeps big rollouts cheap.
            BTreeMap::new()
        };
        let now = self.executor.clock().wall();
        let out = sync_deployment(DeploymentSyncInput {
            deployment: &d,
            replica_sets: &replica_sets,
            pods_by_replica_set: &pods_by_replica_set,
            now,
        });
        tracing::info!(deployment = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        let milestones = milestones(&d, &out.actions);
        let result = self.executor.execute(out.actions, None).await;
        let written = match &result {
            Ok(outcome) => &outcome.replica_sets,
            Err(failure) => &failure.outcome.replica_sets,
        };
        let now = Instant::now();
        for rs in written {
            self.recent_writes.record(rs.clone(), now);
        }
        match result {
            Ok(outcome) => match out.error {
                Some(e) => Err(e),
                None => {
                    for (name, summary) in milestones {
                        client::trace::mark(name, summary);
                    }
                    Ok(outcome.requeue_after)
                }
            },
            Err(failure) => match &failure.action {
                Action::CreateReplicaSet(rs) => self.on_create_failed(&d, rs, failure.error).await,
                _ => Err(failure.error),
            },
        }
    }

    /// The rest of `getNewReplicaSet` when creating the new ReplicaSet failed.
    async fn on_create_failed(&self, d: &Deployment, rs: &ReplicaSet, error: Error) -> SyncResult {
        let name = rs.name_any();
        if error.is_already_exists() {
            let api: Api<ReplicaSet> = Api::namespaced(
                self.executor.client().clone(),
                &d.namespace().unwrap_or_default(),
            );
            let existing = api
                .get(&name)
                .await
                .map_err(|e| Error::from_kube("get", format!("ReplicaSet {name}"), e))?;
            let actions = on_replica_set_already_exists(d, &existing);
            let collision = actions
                .iter()
                .any(|a| matches!(a, Action::UpdateDeploymentStatus(_)));
            self.executor
                .execute(actions, None)
                .await
                .map_err(|f| f.error)?;
            if collision {
                return Err(error);
            }
            // Ours, with the same template: the cache was behind. Look again.
            return Ok(Some(Duration::ZERO));
        }
        let actions =
            on_replica_set_create_error(d, &name, &error.to_string(), self.executor.clock().wall());
        self.executor
            .execute(actions, None)
            .await
            .map_err(|f| f.error)?;
        Err(error)
    }

    /// `getReplicaSetsForDeployment`: the namespace's ReplicaSets (with this controller's
    /// writes the informer has not delivered yet), claimed for `d`.
    async fn get_replica_sets_for_deployment(&self, d: &Deployment) -> Result<Vec<ReplicaSet>> {
        let selector = selector::from_label_selector(d.spec.as_ref().map(|s| &s.selector))?;
        let namespace = d.namespace();
        let mut candidates: Vec<ReplicaSet> = self
            .replica_sets
            .list(namespace.as_deref(), &apimachinery::Selector::everything())
            .into_iter()
            .map(|rs| (*rs).clone())
            .collect();
        self.recent_writes
            .overlay(namespace.as_deref(), &mut candidates, Instant::now());
        claim(&self.executor, d, &selector, &candidates).await
    }

    /// `getPodMapForDeployment`: pods by the UID of the ReplicaSet controlling them.
    fn pods_by_replica_set(&self, replica_sets: &[ReplicaSet]) -> BTreeMap<String, Vec<Pod>> {
        replica_sets
            .iter()
            .filter_map(|rs| rs.uid())
            .map(|uid| {
                let pods = self
                    .pods
                    .by_index(CONTROLLER_UID_INDEX, &uid)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| (*p).clone())
                    .collect();
                (uid, pods)
            })
            .collect()
    }
}
