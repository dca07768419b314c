//! The garbage collector's async shell: `pkg/controller/garbagecollector/graph_builder.go`
//! (monitors feeding the owner graph) and `garbagecollector.go` (`attemptToDeleteWorker`,
//! `attemptToOrphanWorker`).
//!
//! ```text
//!   informers (every built-in kind but Events) ─▶ monitor: graph.observe / graph.forget
//!        │ enqueue the UIDs whose decision may have changed:
//!        │   added/changed object with owners or being deleted → itself, unless its
//!        │     decision is already known to be "nothing to do" (every owner present)
//!        │   added object → its dependents (their "virtual" owner now exists)
//!        │   deleted object → its dependents (owner gone) and its owners (one blocker less)
//!        ▼
//!   queue "garbage_collector_attempt_to_delete" (UIDs) ─▶ 20 workers:
//!        orphan finalizer? attempt_to_orphan : attempt_to_delete_item   (sans-IO, on the graph)
//!        ─▶ Executor (DELETE with UID precondition, PATCH ownerReferences / finalizers,
//!           live GET before trusting that an owner is gone)
//! ```
//!
//! Coverage: Kubernetes' graph builder watches every deletable resource found by discovery
//! (as metadata), except Events (`DefaultIgnoredResources`). miniplane's garbage collector
//! watches the built-in kinds that take part in ownership — Pods, ReplicaSets,
//! ReplicationControllers, Deployments, DaemonSets, StatefulSets, ControllerRevisions,
//! PersistentVolumeClaims, PersistentVolumes, PodDisruptionBudgets, Jobs, CronJobs, Services, Endpoints, EndpointSlices,
//! ConfigMaps,
//! Secrets, ServiceAccounts, Leases, Nodes and Namespaces — with typed informers shared with
//! the other controllers, and every custom resource of an established CRD
//! ([`super::custom_resources`]). One queue serves deletion and orphaning.

use std::sync::{Arc, Mutex, MutexGuard};

use client::{DeltaObject, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, ReplicationController};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::executor::Executor;
use crate::garbage_collector::custom_resources::CustomMonitors;
use crate::garbage_collector::graph::{FINALIZER_ORPHAN_DEPENDENTS, OwnerGraph};
use crate::garbage_collector::{attempt_to_delete_item, attempt_to_orphan, reason};
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// The garbage collector (cheap to clone).
#[derive(Clone)]
pub struct GarbageCollector {
    graph: Arc<Mutex<OwnerGraph>>,
    queue: RateLimitingQueue<String>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
    /// The informers of custom resources, started and stopped as CRDs come and go.
    custom: Arc<CustomMonitors>,
}

impl GarbageCollector {
    /// Builds the collector and its monitors on the factory's informers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let this = GarbageCollector {
            graph: Arc::new(Mutex::new(OwnerGraph::new())),
            queue: RateLimitingQueue::on_clock(
                "garbage_collector_attempt_to_delete",
                executor.clock().clone(),
            ),
            custom: Arc::new(CustomMonitors::new(executor.client())),
            executor,
            metrics: Arc::new(ControllerMetrics::new("garbagecollector")),
        };
        this.monitor::<Deployment>(factory);
        this.monitor::<ReplicaSet>(factory);
        this.monitor::<Pod>(factory);
        this.monitor::<DaemonSet>(factory);
        this.monitor::<StatefulSet>(factory);
        this.monitor::<ControllerRevision>(factory);
        this.monitor::<ReplicationController>(factory);
        this.monitor::<PersistentVolumeClaim>(factory);
        this.monitor::<PersistentVolume>(factory);
        this.monitor::<PodDisruptionBudget>(factory);
        this.monitor::<Job>(factory);
        this.monitor::<CronJob>(factory);
        this.monitor::<Service>(factory);
        this.monitor::<Endpoints>(factory);
        this.monitor::<EndpointSlice>(factory);
        this.monitor::<ConfigMap>(factory);
        this.monitor::<Secret>(factory);
        this.monitor::<ServiceAccount>(factory);
        this.monitor::<Lease>(factory);
        this.monitor::<Node>(factory);
        this.monitor::<Namespace>(factory);
        this.monitor_custom_resources(factory);
        this
    }

    /// The collector's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    pub(super) fn custom_monitors(&self) -> &CustomMonitors {
        &self.custom
    }

    fn graph(&self) -> MutexGuard<'_, OwnerGraph> {
        self.graph.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A graph-builder monitor for kind `K`.
    fn monitor<K>(&self, factory: &SharedInformerFactory)
    where
        K: kube::Resource<DynamicType = ()>
            + k8s_openapi::Resource
            + k8s_openapi::Metadata<Ty = ObjectMeta>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let (add, update, delete) = (self.clone(), self.clone(), self.clone());
        factory.informer::<K>().add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |obj: Arc<K>, _| add.observe::<K>(None, obj.metadata()))
                .on_update(move |old: Arc<K>, cur: Arc<K>| {
                    update.observe::<K>(Some(old.metadata()), cur.metadata())
                })
                .on_delete(move |obj: DeltaObject<K>| delete.forget(obj.object().metadata())),
        );
    }

    fn observe<K: k8s_openapi::Resource>(&self, old: Option<&ObjectMeta>, meta: &ObjectMeta) {
        self.observe_as(K::API_VERSION, K::KIND, old, meta);
    }

    /// Records an object of `api_version`/`kind` in the graph and queues what it affects.
    pub(super) fn observe_as(
        &self,
        api_version: &str,
        kind: &str,
        old: Option<&ObjectMeta>,
        meta: &ObjectMeta,
    ) {
        let Some(uid) = meta.uid.as_deref() else {
            return;
        };
        // Most updates (a pod's binding, its status) change nothing the graph decides on:
        // only the resourceVersion is recorded, and nothing is queued (as below, where such
        // an update queues nothing).
        let changed = old.is_none_or(|old| !same_decision_inputs(old, meta));
        if !changed
            && old.is_some_and(|old| old.uid.as_deref() == Some(uid))
            && self
                .graph()
                .observe_resource_version(uid, meta.resource_version.as_deref())
        {
            return;
        }
        let uid = uid.to_owned();
        let mut to_enqueue = Vec::new();
        let settled = {
            let mut graph = self.graph();
            graph.observe_meta(api_version, kind, meta);
            if old.is_none() {
                to_enqueue.extend(
                    graph
                        .dependents(&uid)
                        .iter()
                        .map(|d| d.identity.uid.clone()),
                );
            }
            // An object that is not being deleted and whose owners are all in the graph
            // (none dangling, none waiting for its deletion) would be decided "nothing to
            // collect" by a worker: it is not queued. Kubernetes' graph builder likewise queues
            // a new dependent only through a missing ("virtual") owner; a later change of an
            // owner queues its dependents again.
            meta.deletion_timestamp.is_none()
                && graph
                    .get(&uid)
                    .is_some_and(|node| attempt_to_delete_item(&graph, node).is_empty())
        };
        let interesting = meta
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty())
            || meta.deletion_timestamp.is_some();
        if changed && interesting && !settled {
            to_enqueue.push(uid);
        }
        for uid in to_enqueue {
            self.queue.add(uid);
        }
    }

    pub(super) fn forget(&self, meta: &ObjectMeta) {
        let Some(uid) = meta.uid.as_deref() else {
            return;
        };
        let to_enqueue: Vec<String> = {
            let mut graph = self.graph();
            let dependents: Vec<String> = graph
                .dependents(uid)
                .iter()
                .map(|d| d.identity.uid.clone())
                .collect();
            graph.forget(uid);
            dependents
                .into_iter()
                .chain(
                    meta.owner_references
                        .iter()
                        .flatten()
                        .map(|o| o.uid.clone()),
                )
                .collect()
        };
        for uid in to_enqueue {
            self.queue.add(uid);
        }
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let custom = self.custom.clone();
        let stop = shutdown.clone();
        tracker.spawn(async move {
            stop.cancelled().await;
            custom.stop().await;
        });
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: None,
        }
        .spawn(tracker, shutdown, move |uid| {
            let this = this.clone();
            async move { this.sync(&uid).await }
        });
    }

    /// `attemptToDeleteItem` / `attemptToOrphan` for the object with `uid`.
    ///
    /// As in Kubernetes, a decision to act is checked against the object read **live**: the
    /// graph may lag (an orphaning patch that dropped an ownerReference, say, not yet seen),
    /// so when the live metadata differs the graph is updated and the decision made again.
    pub async fn sync(&self, uid: &str) -> SyncResult {
        let Some((identity, actions, why)) = self.decide(uid) else {
            client::trace::set_summary(format!("{uid}: no longer in the graph"));
            return Ok(None);
        };
        if actions.is_empty() {
            client::trace::set_summary(format!(
                "{} {}: owners present, nothing to collect",
                identity.kind, identity.name
            ));
            return Ok(None);
        }
        let live = self
            .executor
            .dynamic(&identity)
            .get_opt(&identity.name)
            .await
            .map_err(|e| crate::error::Error::from_kube("get", &identity, e))?;
        let Some(live) = live.filter(|l| l.metadata.uid.as_deref() == Some(uid)) else {
            // Gone, or replaced by a namesake: the informer will tell the graph.
            return Ok(None);
        };
        let (actions, why) = {
            let mut graph = self.graph();
            let node = graph.get(uid).cloned();
            let stale = node.is_none_or(|n| {
                n.owners != live.metadata.owner_references.clone().unwrap_or_default()
                    || n.finalizers != live.metadata.finalizers.clone().unwrap_or_default()
                    || n.being_deleted != live.metadata.deletion_timestamp.is_some()
            });
            if stale {
                graph.observe_meta(&identity.api_version, &identity.kind, &live.metadata);
                drop(graph);
                match self.decide(uid) {
                    Some((_, actions, why)) => (actions, why),
                    None => return Ok(None),
                }
            } else {
                (actions, why)
            }
        };
        for action in &actions {
            tracing::info!(%uid, "garbage collector: {}", action.describe());
        }
        // The span says why, as Kubernetes' garbage collector logs it, then what.
        client::trace::set_attribute(client::trace::attr::REASON, why.as_str());
        client::trace::set_summary(format!(
            "{} {}: {why} → {}",
            identity.kind,
            identity.key(),
            actions
                .iter()
                .map(|a| a.describe())
                .collect::<Vec<_>>()
                .join("; ")
        ));
        self.executor
            .execute(actions, None)
            .await
            .map(|outcome| outcome.requeue_after)
            .map_err(|f| f.error)
    }

    /// The sans-IO decision for `uid` on the current graph.
    /// The decision about `uid` on the graph as it is: the object, what to do and why.
    fn decide(
        &self,
        uid: &str,
    ) -> Option<(apimachinery::ObjectRef, Vec<crate::action::Action>, String)> {
        let graph = self.graph();
        let node = graph.get(uid)?;
        let actions = if node.being_deleted && node.has_finalizer(FINALIZER_ORPHAN_DEPENDENTS) {
            attempt_to_orphan(&graph, node)
        } else {
            attempt_to_delete_item(&graph, node)
        };
        let why = if actions.is_empty() {
            String::new()
        } else {
            reason(&graph, node)
        };
        Some((node.identity.clone(), actions, why))
    }
}

/// Whether two versions of an object agree on all the graph decides on: its owners, its
/// finalizers and whether it is being deleted.
fn same_decision_inputs(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.owner_references == b.owner_references
        && a.finalizers == b.finalizers
        && a.deletion_timestamp.is_some() == b.deletion_timestamp.is_some()
}

#[cfg(test)]
mod queue_tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn collector() -> GarbageCollector {
        // Never contacted: the test only feeds the graph and reads the queue.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let factory = SharedInformerFactory::new(client.clone(), std::time::Duration::ZERO);
        let sink = Arc::new(client::events::ApiEventSink::new(client.clone()));
        let (recorder, _broadcaster) = client::events::new_recorder(
            sink,
            "garbage-collector-controller",
            client::TokioClock::shared(),
        );
        GarbageCollector::new(&factory, Executor::new(client, recorder))
    }

    fn meta(uid: &str, owner: Option<(&str, &str)>) -> ObjectMeta {
        ObjectMeta {
            name: Some(format!("{uid}-name")),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            owner_references: owner.map(|(kind, uid)| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: format!("{uid}-name"),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_dependent_is_queued_only_when_a_worker_would_have_something_to_decide() {
        let gc = collector();
        gc.observe_as("apps/v1", "ReplicaSet", None, &meta("r1", None));
        assert_eq!(gc.queue().len(), 0, "no owners: nothing to collect");
        gc.observe_as("v1", "Pod", None, &meta("p1", Some(("ReplicaSet", "r1"))));
        assert_eq!(
            gc.queue().len(),
            0,
            "its owner is in the graph: nothing to decide"
        );
        gc.observe_as("v1", "Pod", None, &meta("p2", Some(("ReplicaSet", "gone"))));
        assert_eq!(
            gc.queue().len(),
            1,
            "an owner the graph has not seen must be verified"
        );
        let mut deleting = meta("p1", Some(("ReplicaSet", "r1")));
        deleting.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        deleting.finalizers = Some(vec!["foregroundDeletion".into()]);
        gc.observe_as(
            "v1",
            "Pod",
            Some(&meta("p1", Some(("ReplicaSet", "r1")))),
            &deleting,
        );
        assert_eq!(
            gc.queue().len(),
            2,
            "an object being deleted is always queued"
        );
    }

    #[tokio::test]
    async fn an_update_that_changes_nothing_decided_only_records_its_resource_version() {
        let gc = collector();
        // An owner the graph has not seen: the pod is queued when it is first observed.
        let added = meta("p1", Some(("ReplicaSet", "gone")));
        gc.observe_as("v1", "Pod", None, &added);
        assert_eq!(gc.queue().len(), 1);
        let queued = gc.queue().get().await.expect("queued");
        gc.queue().done(&queued);
        assert_eq!(gc.queue().len(), 0);
        let status_write = ObjectMeta {
            resource_version: Some("42".into()),
            ..added.clone()
        };
        gc.observe_as("v1", "Pod", Some(&added), &status_write);
        assert_eq!(gc.queue().len(), 0, "nothing it decides on changed");
        let graph = gc.graph();
        let node = graph.get("p1").expect("observed");
        assert_eq!(node.resource_version.as_deref(), Some("42"));
        assert_eq!(
            node.owners,
            added.owner_references.clone().unwrap_or_default()
        );
    }
}
