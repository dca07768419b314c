//! The DaemonSet controller's async shell: `pkg/controller/daemon/daemon_controller.go`
//! (`NewDaemonSetsController`, the DaemonSet, pod, node and history handlers, `syncDaemonSet`'s
//! I/O half, `getDaemonPods`) and the I/O of `constructHistory`/`snapshot` in `update.go`.
//!
//! ```text
//!   DaemonSet informer ─ add/update/delete ─────────────────────▶ queue "daemonset" (ns/name)
//!   Pod informer ─ add: creation_observed ─ delete / deletionTimestamp: deletion_observed
//!                ─ orphan: every DaemonSet selecting it ───────────▶   │
//!   Node informer ─ add, or labels/taints/conditions changed:          │ 2 workers
//!                   the DaemonSets whose placement changed ────────────▶│
//!   ControllerRevision informer ─ its DaemonSet ────────────────────────▶│
//!                                                                      ▼
//!     sync(key): claim pods ─▶ claim revisions ─▶ construct history (label, create the
//!                current one or raise its number, delete duplicates) ─▶ sync_daemon_set
//!                ─▶ Executor (POST pods with node affinity, DELETE pods and old revisions,
//!                PUT /status, events)
//! ```
//!
//! Unlike Kubernetes, a node update wakes the DaemonSets only when its labels, taints, name
//! or condition statuses changed (not on every heartbeat); that is what
//! `shouldIgnoreNodeUpdate` tests too, with fewer fields compared.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::{ObjectKey, ObjectRef};
use client::indexer::{CONTROLLER_UID_INDEX, controller_uid_index_func};
use client::{DeltaObject, Indexer, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::Api;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::failed_pods_backoff::FailedPodsBackoff;
use super::history::{
    CONTROLLER_REVISION_HASH_LABEL, History, matches, new_revision, revision_hash,
};
use super::placement::node_should_run_daemon_pod;
use super::{DaemonSetSyncInput, selects_everything, sync_daemon_set};
use crate::action::Action;
use crate::adoption::{claim, claim_pods};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::expectations::Expectations;
use crate::lookup::{resolve_controller_ref, selecting_controllers};
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::pod_readiness::is_pod_ready;
use crate::selector;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The DaemonSet controller (cheap to clone).
#[derive(Clone)]
pub struct DaemonSetsController {
    daemon_sets: Lister<DaemonSet>,
    pods: Indexer<Pod>,
    nodes: Lister<Node>,
    revisions: Lister<ControllerRevision>,
    queue: RateLimitingQueue<ObjectKey>,
    expectations: Arc<Mutex<Expectations>>,
    /// `failedPodsBackoff`.
    backoff: Arc<Mutex<FailedPodsBackoff>>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether two versions of a node place daemon pods alike (`shouldIgnoreNodeUpdate`): same
/// name, labels, taints, `unschedulable` and condition statuses.
fn same_placement(a: &Node, b: &Node) -> bool {
    let conditions = |n: &Node| -> Vec<(String, String)> {
        n.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    };
    let spec = |n: &Node| n.spec.as_ref().map(|s| (s.taints.clone(), s.unschedulable));
    a.metadata.name == b.metadata.name
        && a.metadata.labels == b.metadata.labels
        && spec(a) == spec(b)
        && conditions(a) == conditions(b)
}

impl DaemonSetsController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let ds_informer = factory.informer::<DaemonSet>();
        let pod_informer = factory.informer::<Pod>();
        let node_informer = factory.informer::<Node>();
        let revision_informer = factory.informer::<ControllerRevision>();
        if !pod_informer.indexer().has_index(CONTROLLER_UID_INDEX) {
            pod_informer.add_indexer(
                CONTROLLER_UID_INDEX,
                Arc::new(controller_uid_index_func::<Pod>),
            );
        }
        let this = DaemonSetsController {
            daemon_sets: Lister::new(ds_informer.indexer().clone()),
            pods: pod_informer.indexer().clone(),
            nodes: Lister::new(node_informer.indexer().clone()),
            revisions: Lister::new(revision_informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("daemonset", executor.clock().clone()),
            expectations: Arc::new(Mutex::new(Expectations::new())),
            backoff: Arc::new(Mutex::new(FailedPodsBackoff::new())),
            executor,
            metrics: Arc::new(ControllerMetrics::new("daemonset")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        ds_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |ds: Arc<DaemonSet>, _| add.queue.add(ObjectKey::of(ds.as_ref())))
                .on_update(move |_, ds: Arc<DaemonSet>| {
                    update.queue.add(ObjectKey::of(ds.as_ref()))
                })
                .on_delete(move |ds: DeltaObject<DaemonSet>| {
                    let key = ds.key();
                    lock(&delete.expectations).delete_expectations(&key);
                    delete.queue.add(key);
                }),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| add.add_pod(&pod))
                .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| update.update_pod(&old, &cur))
                .on_delete(move |pod: DeltaObject<Pod>| delete.delete_pod(pod.object())),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        node_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |node: Arc<Node>, _| add.enqueue_for_node(None, &node))
                .on_update(move |old: Arc<Node>, cur: Arc<Node>| {
                    if !same_placement(&old, &cur) {
                        update.enqueue_for_node(Some(&old), &cur);
                    }
                })
                .on_delete(move |_: DeltaObject<Node>| delete.enqueue_all()),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        revision_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |r: Arc<ControllerRevision>, _| add.enqueue_for_revision(&r))
                .on_update(move |_, r: Arc<ControllerRevision>| update.enqueue_for_revision(&r))
                .on_delete(move |r: DeltaObject<ControllerRevision>| {
                    delete.enqueue_for_revision(r.object())
                }),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
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
            object_context: Some(object_context_of(&self.daemon_sets)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    fn controller_of(&self, meta: &kube::api::ObjectMeta) -> Option<Arc<DaemonSet>> {
        let r = get_controller_of(meta)?;
        resolve_controller_ref(&self.daemon_sets, meta.namespace.as_deref(), r)
    }

    fn enqueue_adopters(&self, meta: &kube::api::ObjectMeta) {
        let empty = BTreeMap::new();
        let labels = meta.labels.as_ref().unwrap_or(&empty);
        for ds in selecting_controllers(&self.daemon_sets, meta.namespace.as_deref(), labels, |d| {
            d.spec.as_ref().map(|s| &s.selector)
        }) {
            self.queue.add(ObjectKey::of(ds.as_ref()));
        }
    }

    fn enqueue_all(&self) {
        for ds in self
            .daemon_sets
            .list(None, &apimachinery::Selector::everything())
        {
            self.queue.add(ObjectKey::of(ds.as_ref()));
        }
    }

    /// `addNode` / `updateNode`: the DaemonSets whose placement on this node is (or changed).
    fn enqueue_for_node(&self, old: Option<&Node>, cur: &Node) {
        for ds in self
            .daemon_sets
            .list(None, &apimachinery::Selector::everything())
        {
            let template = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            let now = node_should_run_daemon_pod(template, cur);
            let changed = match old {
                None => now.should_run,
                Some(old) => node_should_run_daemon_pod(template, old) != now,
            };
            if changed {
                self.queue.add(ObjectKey::of(ds.as_ref()));
            }
        }
    }

    /// `addHistory` / `updateHistory` / `deleteHistory`.
    fn enqueue_for_revision(&self, revision: &ControllerRevision) {
        if get_controller_of(&revision.metadata).is_some() {
            if let Some(ds) = self.controller_of(&revision.metadata) {
                self.queue.add(ObjectKey::of(ds.as_ref()));
            }
            return;
        }
        self.enqueue_adopters(&revision.metadata);
    }

    /// `addPod`.
    fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return self.delete_pod(pod);
        }
        if get_controller_of(&pod.metadata).is_some() {
            if let Some(ds) = self.controller_of(&pod.metadata) {
                let key = ObjectKey::of(ds.as_ref());
                lock(&self.expectations).creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        self.enqueue_adopters(&pod.metadata);
    }

    /// `updatePod`: a deletionTimestamp counts as the deletion; a pod turning ready wakes
    /// its DaemonSet again once `minReadySeconds` passed.
    fn update_pod(&self, old: &Pod, cur: &Pod) {
        if old.resource_version() == cur.resource_version() {
            return;
        }
        if cur.metadata.deletion_timestamp.is_some() {
            self.delete_pod(cur);
            return;
        }
        let old_ref = get_controller_of(&old.metadata).map(|r| r.uid.clone());
        let cur_ref = get_controller_of(&cur.metadata).map(|r| r.uid.clone());
        if old_ref != cur_ref
            && let Some(ds) = self.controller_of(&old.metadata)
        {
            self.queue.add(ObjectKey::of(ds.as_ref()));
        }
        if cur_ref.is_some() {
            if let Some(ds) = self.controller_of(&cur.metadata) {
                let key = ObjectKey::of(ds.as_ref());
                let min_ready = ds
                    .spec
                    .as_ref()
                    .and_then(|s| s.min_ready_seconds)
                    .unwrap_or(0);
                if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(cur) {
                    self.queue
                        .add_after(key.clone(), Duration::from_secs(min_ready as u64 + 1));
                }
                self.queue.add(key);
            }
            return;
        }
        if old.metadata.labels != cur.metadata.labels || old_ref != cur_ref {
            self.enqueue_adopters(&cur.metadata);
        }
    }

    /// `deletePod`.
    fn delete_pod(&self, pod: &Pod) {
        let Some(ds) = self.controller_of(&pod.metadata) else {
            return;
        };
        let key = ObjectKey::of(ds.as_ref());
        lock(&self.expectations).deletion_observed(&key, &ObjectKey::from_meta(&pod.metadata));
        self.queue.add(key);
    }

    /// `syncDaemonSet` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.daemon_sets.get(key.namespace.as_deref(), &key.name) else {
            tracing::debug!(daemonset = %key, "daemon set has been deleted");
            lock(&self.expectations).delete_expectations(key);
            return Ok(None);
        };
        let ds: DaemonSet = (*cached).clone();
        let now = self.executor.clock().wall();
        let nodes: Vec<Arc<Node>> = self.nodes.list(None, &apimachinery::Selector::everything());
        let nodes: Vec<&Node> = nodes.iter().map(Arc::as_ref).collect();
        let (claimed, hash, old) =
            if selects_everything(&ds) || ds.metadata.deletion_timestamp.is_some() {
                (Vec::new(), String::new(), Vec::new())
            } else {
                let claimed = self.claim_pods(&ds).await?;
                let (current, old) = self.construct_history(&ds).await?;
                (claimed, revision_hash(&current), old)
            };
        let pods: Vec<&Pod> = claimed.iter().map(Arc::as_ref).collect();
        let out = {
            let mut expectations = lock(&self.expectations);
            let mut backoff = lock(&self.backoff);
            backoff.gc(now);
            sync_daemon_set(
                &mut expectations,
                &mut backoff,
                DaemonSetSyncInput {
                    daemon_set: &ds,
                    nodes: &nodes,
                    pods: &pods,
                    hash: &hash,
                    old_revisions: &old,
                    now,
                },
            )
        };
        tracing::info!(daemonset = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        match self
            .executor
            .execute(out.actions, Some(&self.expectations))
            .await
        {
            Ok(outcome) => Ok(outcome.requeue_after),
            Err(failure) => Err(failure.error),
        }
    }

    /// `getDaemonPods`: the pods this DaemonSet controls plus the orphans its selector
    /// matches, claimed.
    async fn claim_pods(&self, ds: &DaemonSet) -> Result<Vec<Arc<Pod>>> {
        let selector = selector::from_label_selector(ds.spec.as_ref().map(|s| &s.selector))?;
        claim_pods(&self.executor, &self.pods, ds, &selector).await
    }

    /// `controlledHistories`: the ControllerRevisions this DaemonSet controls, after adopting
    /// orphans its selector matches and releasing those it no longer selects.
    async fn controlled_histories(&self, ds: &DaemonSet) -> Result<Vec<ControllerRevision>> {
        let selector = selector::from_label_selector(ds.spec.as_ref().map(|s| &s.selector))?;
        let uid = ds.uid().unwrap_or_default();
        let candidates: Vec<ControllerRevision> = self
            .revisions
            .list(
                ds.namespace().as_deref(),
                &apimachinery::Selector::everything(),
            )
            .into_iter()
            .filter(|r| match get_controller_of(&r.metadata) {
                Some(owner) => owner.uid == uid,
                None => true,
            })
            .map(|r| (*r).clone())
            .collect();
        claim(&self.executor, ds, &selector, &candidates).await
    }

    /// `constructHistory`: the current revision (created, renumbered or deduplicated as
    /// needed) and the old ones.
    async fn construct_history(
        &self,
        ds: &DaemonSet,
    ) -> Result<(ControllerRevision, Vec<ControllerRevision>)> {
        let mut revisions = self.controlled_histories(ds).await?;
        for revision in &mut revisions {
            // Older revisions may lack the hash label: use the name, as Kubernetes does.
            let has_label = revision
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(CONTROLLER_REVISION_HASH_LABEL));
            if !has_label {
                let mut labeled = revision.clone();
                let name = labeled.name_any();
                labeled
                    .metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(CONTROLLER_REVISION_HASH_LABEL.to_owned(), name);
                *revision = self
                    .write_revision(Action::UpdateControllerRevision(Box::new(labeled)))
                    .await?;
            }
        }
        let history = History::split(ds, revisions);
        let next = history.next_revision();
        let History { current, old } = history;
        let mut current = current.into_iter();
        let Some(keep) = current.next() else {
            return Ok((self.snapshot(ds, next).await?, old));
        };
        // `dedupCurHistories`: duplicates of the current revision go.
        let duplicates: Vec<Action> = current
            .map(|dup| Action::Delete {
                target: ObjectRef::from_object(&dup),
                propagation: None,
            })
            .collect();
        if !duplicates.is_empty() {
            self.executor
                .execute(duplicates, None)
                .await
                .map_err(|f| f.error)?;
        }
        if keep.revision < next {
            let mut raised = keep.clone();
            raised.revision = next;
            let updated = self
                .write_revision(Action::UpdateControllerRevision(Box::new(raised)))
                .await?;
            return Ok((updated, old));
        }
        Ok((keep, old))
    }

    async fn write_revision(&self, action: Action) -> Result<ControllerRevision> {
        let outcome = self
            .executor
            .execute(vec![action], None)
            .await
            .map_err(|f| f.error)?;
        outcome
            .controller_revisions
            .into_iter()
            .next()
            .ok_or_else(|| Error::StaleInformerCache("the API server returned no revision".into()))
    }

    /// `snapshot`: creates the revision of the current template. On a name collision with a
    /// revision of another template, `status.collisionCount` is raised (changing the hash) and
    /// the sync is retried.
    async fn snapshot(&self, ds: &DaemonSet, revision: i64) -> Result<ControllerRevision> {
        let wanted = new_revision(ds, revision);
        let create = Action::CreateControllerRevision(Box::new(wanted.clone()));
        let error = match self.write_revision(create).await {
            Ok(created) => return Ok(created),
            Err(e) if e.is_already_exists() => e,
            Err(e) => return Err(e),
        };
        let name = wanted.name_any();
        let namespace = ds.namespace().unwrap_or_default();
        let revisions: Api<ControllerRevision> =
            Api::namespaced(self.executor.client(), &namespace);
        let existing = revisions
            .get(&name)
            .await
            .map_err(|e| Error::from_kube("get", format!("ControllerRevision {name}"), e))?;
        if matches(ds, &existing) {
            return Ok(existing);
        }
        let daemon_sets: Api<DaemonSet> = Api::namespaced(self.executor.client(), &namespace);
        let ds_name = ds.name_any();
        let mut latest = daemon_sets
            .get(&ds_name)
            .await
            .map_err(|e| Error::from_kube("get", format!("DaemonSet {ds_name}"), e))?;
        let collisions = |d: &DaemonSet| d.status.as_ref().and_then(|s| s.collision_count);
        if collisions(&latest) != collisions(ds) {
            return Err(Error::StaleInformerCache(format!(
                "found a stale collision count ({}, expected {}) of DaemonSet {ds_name:?} while processing; will retry until it is updated",
                collisions(ds).unwrap_or(0),
                collisions(&latest).unwrap_or(0)
            )));
        }
        let status = latest.status.get_or_insert_with(Default::default);
        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
        tracing::info!(daemonset = %ds_name, "found a hash collision: bumping collisionCount");
        self.executor
            .execute(vec![Action::UpdateDaemonSetStatus(Box::new(latest))], None)
            .await
            .map_err(|f| f.error)?;
        Err(error)
    }
}
