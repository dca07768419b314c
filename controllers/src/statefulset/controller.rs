//! The StatefulSet controller's async shell: `pkg/controller/statefulset/stateful_set.go`
//! (`NewStatefulSetController`, the set, pod and revision handlers, `syncStatefulSet`,
//! `getPodsForStatefulSet`), the I/O of `getStatefulSetRevisions` in
//! `stateful_set_control.go`, `stateful_pod_control.go` (pod and claim writes with their
//! events) and `stateful_set_status_updater.go`.
//!
//! ```text
//!   StatefulSet informer ─ add/update/delete ──────────────────▶ queue "statefulset"
//!   Pod informer ─ its StatefulSet (orphans: the sets selecting it) ─▶   │ workers
//!   ControllerRevision informer ─ its StatefulSet ──────────────────▶    ▼
//!     sync(key): claim pods ─▶ claim revisions ─▶ update revision (create / renumber)
//!       ─▶ GET its claims ─▶ sync_stateful_set ─▶ pod and claim writes + events
//!       ─▶ PUT /status ─▶ DELETE revisions beyond revisionHistoryLimit
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use client::indexer::{CONTROLLER_UID_INDEX, controller_uid_index_func};
use client::{DeltaObject, Indexer, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::identity::{claim_name, end_ordinal, is_member_of, ordinal, start_ordinal};
use super::{SetAction, StatefulSetSyncInput, sync_stateful_set};
use crate::action::{Action, Event};
use crate::adoption::{claim, claim_pods};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::history::{
    RevisionParts, find_equal_revisions, hash_controller_revision, new_controller_revision,
    next_revision, sort_controller_revisions, template_patch,
};
use crate::lookup::{resolve_controller_ref, selecting_controllers};
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::{get_controller_of, name, new_controller_ref};
use crate::selector;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The StatefulSet controller (cheap to clone).
#[derive(Clone)]
pub struct StatefulSetController {
    sets: Lister<StatefulSet>,
    pods: Indexer<Pod>,
    revisions: Lister<ControllerRevision>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

/// `newRevision`: the revision of the set's template numbered `revision`, named after the
/// hash of its data and `collision_count`, annotated with the set's annotations.
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let template = set.spec.as_ref().map(|s| &s.template);
    let data = template_patch(template);
    let hash = hash_controller_revision(&data, Some(collision_count));
    let mut created = new_controller_revision(RevisionParts {
        parent: &set.metadata,
        controller_ref: new_controller_ref(set),
        template_labels: template
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref()),
        data,
        revision,
        hash,
    });
    created.metadata.annotations = set.metadata.annotations.clone();
    created
}

fn kube_error(verb: &'static str, what: String, e: kube::Error) -> Error {
    Error::from_kube(verb, what, e)
}

impl StatefulSetController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let set_informer = factory.informer::<StatefulSet>();
        let pod_informer = factory.informer::<Pod>();
        let revision_informer = factory.informer::<ControllerRevision>();
        if !pod_informer.indexer().has_index(CONTROLLER_UID_INDEX) {
            pod_informer.add_indexer(
                CONTROLLER_UID_INDEX,
                Arc::new(controller_uid_index_func::<Pod>),
            );
        }
        let this = StatefulSetController {
            sets: Lister::new(set_informer.indexer().clone()),
            pods: pod_informer.indexer().clone(),
            revisions: Lister::new(revision_informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("statefulset", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("statefulset")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        set_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |s: Arc<StatefulSet>, _| add.queue.add(ObjectKey::of(s.as_ref())))
                .on_update(move |_, s: Arc<StatefulSet>| {
                    update.queue.add(ObjectKey::of(s.as_ref()))
                })
                .on_delete(move |s: DeltaObject<StatefulSet>| delete.queue.add(s.key())),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| add.enqueue_owner(&pod.metadata))
                .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| update.update_pod(&old, &cur))
                .on_delete(move |pod: DeltaObject<Pod>| {
                    delete.enqueue_owner(&pod.object().metadata)
                }),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        revision_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |r: Arc<ControllerRevision>, _| add.enqueue_owner(&r.metadata))
                .on_update(move |_, r: Arc<ControllerRevision>| update.enqueue_owner(&r.metadata))
                .on_delete(move |r: DeltaObject<ControllerRevision>| {
                    delete.enqueue_owner(&r.object().metadata)
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
            object_context: Some(object_context_of(&self.sets)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `addPod` / `deletePod` / `resolveControllerRef`: the set controlling the object, or for
    /// orphans every set selecting it.
    fn enqueue_owner(&self, meta: &kube::api::ObjectMeta) {
        if let Some(r) = get_controller_of(meta) {
            if let Some(set) = resolve_controller_ref(&self.sets, meta.namespace.as_deref(), r) {
                self.queue.add(ObjectKey::of(set.as_ref()));
            }
            return;
        }
        let empty = BTreeMap::new();
        let labels = meta.labels.as_ref().unwrap_or(&empty);
        for set in selecting_controllers(&self.sets, meta.namespace.as_deref(), labels, |s| {
            s.spec.as_ref().map(|s| &s.selector)
        }) {
            self.queue.add(ObjectKey::of(set.as_ref()));
        }
    }

    /// `updatePod`: its set (and the old one when the controller changed); a pod turning
    /// ready wakes the set again after `minReadySeconds`.
    fn update_pod(&self, old: &Pod, cur: &Pod) {
        if old.resource_version() == cur.resource_version() {
            return;
        }
        if get_controller_of(&old.metadata).map(|r| &r.uid)
            != get_controller_of(&cur.metadata).map(|r| &r.uid)
        {
            self.enqueue_owner(&old.metadata);
        }
        if let Some(r) = get_controller_of(&cur.metadata)
            && let Some(set) =
                resolve_controller_ref(&self.sets, cur.metadata.namespace.as_deref(), r)
        {
            let min_ready = set
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0);
            let key = ObjectKey::of(set.as_ref());
            if min_ready > 0
                && !crate::pod_readiness::is_pod_ready(old)
                && crate::pod_readiness::is_pod_ready(cur)
            {
                self.queue
                    .add_after(key.clone(), Duration::from_secs(min_ready as u64 + 1));
            }
            self.queue.add(key);
            return;
        }
        self.enqueue_owner(&cur.metadata);
    }

    /// `syncStatefulSet` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.sets.get(key.namespace.as_deref(), &key.name) else {
            tracing::debug!(statefulset = %key, "StatefulSet has been deleted");
            return Ok(None);
        };
        let set: StatefulSet = (*cached).clone();
        let selector = selector::from_label_selector(set.spec.as_ref().map(|s| &s.selector))?;
        let claimed = claim_pods(&self.executor, &self.pods, &set, &selector).await?;
        let pods: Vec<&Pod> = claimed
            .iter()
            .map(Arc::as_ref)
            .filter(|p| is_member_of(&set, p))
            .collect();
        let mut revisions = self.controlled_revisions(&set, &selector).await?;
        sort_controller_revisions(&mut revisions);
        let (current, update, collision_count) = self.revisions_of(&set, &revisions).await?;
        let claims = self.claims_of(&set, &pods).await?;
        let out = sync_stateful_set(StatefulSetSyncInput {
            set: &set,
            pods: &pods,
            current_revision: &current,
            update_revision: &update,
            collision_count,
            revisions: &revisions,
            claims: &claims,
            now: self.executor.clock().wall(),
        });
        tracing::info!(statefulset = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        client::trace::set_attribute(client::trace::attr::REASON, out.reason.as_str());
        let mut failed = None;
        for action in &out.actions {
            if let Err(e) = self.execute(&set, action).await {
                failed = Some(e);
                break;
            }
        }
        if let Some(status) = out.status {
            self.update_status(&set, status).await?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let deletes: Vec<Action> = out
            .delete_revisions
            .into_iter()
            .map(|target| Action::Delete {
                target,
                propagation: None,
            })
            .collect();
        self.executor
            .execute(deletes, None)
            .await
            .map_err(|f| f.error)?;
        Ok(out.requeue_after)
    }

    /// `ListRevisions` + `ClaimControllerRevisions`: the revisions this set controls, after
    /// adopting orphans its selector matches.
    async fn controlled_revisions(
        &self,
        set: &StatefulSet,
        selector: &apimachinery::Selector,
    ) -> Result<Vec<ControllerRevision>> {
        let uid = set.uid().unwrap_or_default();
        let candidates: Vec<ControllerRevision> = self
            .revisions
            .list(
                set.namespace().as_deref(),
                &apimachinery::Selector::everything(),
            )
            .into_iter()
            .filter(|r| get_controller_of(&r.metadata).is_none_or(|o| o.uid == uid))
            .map(|r| (*r).clone())
            .collect();
        claim(&self.executor, set, selector, &candidates).await
    }

    /// `getStatefulSetRevisions`: the current and update revisions, creating the update
    /// revision (`CreateControllerRevision`, bumping the collision count on a name taken by
    /// another template) or raising an equal older one's number (a rollback).
    async fn revisions_of(
        &self,
        set: &StatefulSet,
        revisions: &[ControllerRevision],
    ) -> Result<(ControllerRevision, ControllerRevision, i32)> {
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let wanted = new_revision(set, next_revision(revisions), collision_count);
        let equal = find_equal_revisions(revisions, &wanted);
        let update = match (equal.last(), revisions.last()) {
            (Some(eq), Some(last)) if name(&eq.metadata) == name(&last.metadata) => (*eq).clone(),
            (Some(eq), _) => {
                let mut raised = (*eq).clone();
                raised.revision = wanted.revision;
                let api: Api<ControllerRevision> =
                    Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
                api.replace(&raised.name_any(), &PostParams::default(), &raised)
                    .await
                    .map_err(|e| {
                        kube_error(
                            "update",
                            format!("ControllerRevision {}", raised.name_any()),
                            e,
                        )
                    })?
            }
            (None, _) => {
                self.create_revision(set, wanted.revision, &mut collision_count)
                    .await?
            }
        };
        let current_name = set.status.as_ref().and_then(|s| s.current_revision.clone());
        let current = revisions
            .iter()
            .find(|r| r.metadata.name.is_some() && r.metadata.name == current_name)
            .cloned()
            .unwrap_or_else(|| update.clone());
        Ok((current, update, collision_count))
    }

    /// `CreateControllerRevision`: on AlreadyExists with other data, the collision count goes
    /// up and a new name is tried.
    async fn create_revision(
        &self,
        set: &StatefulSet,
        revision: i64,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision> {
        let api: Api<ControllerRevision> =
            Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
        loop {
            let wanted = new_revision(set, revision, *collision_count);
            let name = wanted.name_any();
            match api.create(&PostParams::default(), &wanted).await {
                Ok(created) => return Ok(created),
                Err(kube::Error::Api(ae)) if ae.code == 409 => {
                    let existing = api
                        .get(&name)
                        .await
                        .map_err(|e| kube_error("get", format!("ControllerRevision {name}"), e))?;
                    if existing.data == wanted.data {
                        return Ok(existing);
                    }
                    *collision_count += 1;
                }
                Err(e) => {
                    return Err(kube_error(
                        "create",
                        format!("ControllerRevision {name}"),
                        e,
                    ));
                }
            }
        }
    }

    /// The claims of the set's templates for every ordinal in range or held by a pod.
    async fn claims_of(
        &self,
        set: &StatefulSet,
        pods: &[&Pod],
    ) -> Result<BTreeMap<String, PersistentVolumeClaim>> {
        let mut found = BTreeMap::new();
        let templates: Vec<String> = set
            .spec
            .iter()
            .flat_map(|s| s.volume_claim_templates.iter().flatten())
            .map(|t| name(&t.metadata).to_owned())
            .collect();
        if templates.is_empty() {
            return Ok(found);
        }
        let mut ordinals: Vec<i64> = (start_ordinal(set)..=end_ordinal(set)).collect();
        ordinals.extend(pods.iter().map(|p| ordinal(p)).filter(|o| *o >= 0));
        ordinals.sort_unstable();
        ordinals.dedup();
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
        for o in ordinals {
            for template in &templates {
                let claim = claim_name(set, template, o);
                match api.get_opt(&claim).await {
                    Ok(Some(c)) => {
                        found.insert(claim, c);
                    }
                    Ok(None) => {}
                    // The resource itself may be missing (404 on the path): no claims.
                    Err(kube::Error::Api(ae)) if ae.code == 404 => {}
                    Err(e) => {
                        return Err(kube_error(
                            "get",
                            format!("PersistentVolumeClaim {claim}"),
                            e,
                        ));
                    }
                }
            }
        }
        Ok(found)
    }

    fn record(&self, set: &StatefulSet, type_: EventType, reason: &str, message: String) {
        self.executor.record(&Event {
            regarding: ObjectRef::from_object(set),
            type_,
            reason: reason.to_owned(),
            message,
        });
    }

    /// `recordPodEvent`.
    fn pod_event(&self, set: &StatefulSet, verb: &str, pod: &str, err: Option<&Error>) {
        let title = format!("{}{}", verb[..1].to_uppercase(), &verb[1..]);
        let set_name = name(&set.metadata);
        match err {
            None => self.record(
                set,
                EventType::Normal,
                &format!("Successful{title}"),
                format!("{verb} Pod {pod} in StatefulSet {set_name} successful"),
            ),
            Some(e) => self.record(
                set,
                EventType::Warning,
                &format!("Failed{title}"),
                format!("{verb} Pod {pod} in StatefulSet {set_name} failed error: {e}"),
            ),
        }
    }

    /// `createPersistentVolumeClaims` with `recordClaimEvent`.
    async fn create_claims(
        &self,
        set: &StatefulSet,
        pod: &str,
        claims: &[PersistentVolumeClaim],
    ) -> Result<()> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
        let set_name = name(&set.metadata);
        let mut errors = Vec::new();
        for claim in claims {
            let claim_name = name(&claim.metadata);
            match api.create(&PostParams::default(), claim).await {
                Ok(_) => self.record(
                    set,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!(
                        "create Claim {claim_name} Pod {pod} in StatefulSet {set_name} success"
                    ),
                ),
                Err(kube::Error::Api(ae)) if ae.code == 409 => {
                    errors.push(kube_error(
                        "create",
                        format!("PersistentVolumeClaim {claim_name}"),
                        kube::Error::Api(ae),
                    ));
                }
                Err(e) => {
                    let e = kube_error("create", format!("PersistentVolumeClaim {claim_name}"), e);
                    self.record(
                        set,
                        EventType::Warning,
                        "FailedCreate",
                        format!("create Claim {claim_name} for Pod {pod} in StatefulSet {set_name} failed error: {e}"),
                    );
                    errors.push(e);
                }
            }
        }
        match errors.into_iter().next() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    async fn update_claims(
        &self,
        set: &StatefulSet,
        claims: &[PersistentVolumeClaim],
    ) -> Result<()> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
        for claim in claims {
            let claim_name = claim.name_any();
            api.replace(&claim_name, &PostParams::default(), claim)
                .await
                .map_err(|e| {
                    kube_error("update", format!("PersistentVolumeClaim {claim_name}"), e)
                })?;
        }
        Ok(())
    }

    /// Carries out one [`SetAction`] with its events.
    async fn execute(&self, set: &StatefulSet, action: &SetAction) -> Result<()> {
        let namespace = set.namespace().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.executor.client(), &namespace);
        match action {
            SetAction::CreatePod { pod, claims } => {
                let pod_name = pod.name_any();
                if let Err(e) = self.create_claims(set, &pod_name, claims).await {
                    self.pod_event(set, "create", &pod_name, Some(&e));
                    return Err(e);
                }
                match pods.create(&PostParams::default(), pod).await {
                    Ok(_) => {
                        self.pod_event(set, "create", &pod_name, None);
                        Ok(())
                    }
                    Err(kube::Error::Api(ae)) if ae.code == 409 => Err(kube_error(
                        "create",
                        format!("Pod {pod_name}"),
                        kube::Error::Api(ae),
                    )),
                    Err(e) => {
                        let e = kube_error("create", format!("Pod {pod_name}"), e);
                        self.pod_event(set, "create", &pod_name, Some(&e));
                        Err(e)
                    }
                }
            }
            SetAction::CreateClaims { pod, claims } => self.create_claims(set, pod, claims).await,
            SetAction::UpdatePod {
                pod,
                write_pod,
                claims,
            } => {
                let pod_name = pod.name_any();
                let mut result = self.update_claims(set, claims).await;
                if result.is_ok() && *write_pod {
                    result = pods
                        .replace(&pod_name, &PostParams::default(), pod)
                        .await
                        .map(|_| ())
                        .map_err(|e| kube_error("update", format!("Pod {pod_name}"), e));
                }
                self.pod_event(set, "update", &pod_name, result.as_ref().err());
                result
            }
            SetAction::UpdateClaims(claims) => self.update_claims(set, claims).await,
            SetAction::DeletePod(target) => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(target.uid.clone()).filter(|u| !u.is_empty()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match pods.delete(&target.name, &params).await {
                    Ok(_) => {
                        self.pod_event(set, "delete", &target.name, None);
                        Ok(())
                    }
                    Err(kube::Error::Api(ae)) if ae.code == 404 => Ok(()),
                    Err(e) => {
                        let e = kube_error("delete", format!("Pod {}", target.name), e);
                        self.pod_event(set, "delete", &target.name, Some(&e));
                        Err(e)
                    }
                }
            }
            SetAction::Event(a) => {
                self.executor.record_action(a);
                Ok(())
            }
        }
    }

    /// `UpdateStatefulSetStatus`: PUT /status, once more on the latest version after a
    /// conflict.
    async fn update_status(&self, set: &StatefulSet, status: StatefulSetStatus) -> Result<()> {
        let api: Api<StatefulSet> =
            Api::namespaced(self.executor.client(), &set.namespace().unwrap_or_default());
        let set_name = set.name_any();
        let mut updated = set.clone();
        updated.status = Some(status.clone());
        match api
            .replace_status(&set_name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(ae)) if ae.code == 409 => {
                let mut latest = api
                    .get(&set_name)
                    .await
                    .map_err(|e| kube_error("get", format!("StatefulSet {set_name}"), e))?;
                latest.status = Some(status);
                api.replace_status(&set_name, &PostParams::default(), &latest)
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        kube_error("update status of", format!("StatefulSet {set_name}"), e)
                    })
            }
            Err(e) => Err(kube_error(
                "update status of",
                format!("StatefulSet {set_name}"),
                e,
            )),
        }
    }
}
