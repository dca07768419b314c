//! The executor: carrying out [`Action`]s against the API server.
//!
//! This is the shell's half of the contract in [`crate::action`], and what client-go
//! controllers do through `podControl`, `rsControl` and the typed clientset
//! (`pkg/controller/controller_utils.go`: `RealPodControl.CreatePods`/`DeletePod`,
//! `RealRSControl.PatchReplicaSet`; `garbagecollector/operations.go`: `deleteObject`,
//! `patchObject`, `getObject`):
//!
//! ```text
//!   [Action, Action, ...] ──in order──▶ POST / PUT / PUT .../status / PATCH / DELETE
//!        │                                 │ first failure
//!        │                                 ▼
//!        │                        Err(Failure { action, error }) ─▶ the worker requeues
//!        └─ Event ─▶ EventRecorder    RequeueAfter ─▶ Outcome::requeue_after
//! ```
//!
//! * A second write of the same object in one list is sent with the `resourceVersion` the
//!   first write returned (Kubernetes reuses the stale one and pays with a 409 and a retry).
//! * `CreatePods` follows the slow-start plan (batches 1, 2, 4, ... in parallel, stop after
//!   the first batch with an error) and tells the [`Expectations`] about every pod that will
//!   never be observed; `DeletePods` does the same for failed deletions.
//! * Every request goes through a `client::trace::sync_client`: inside a traced sync it
//!   carries the sync's trace (`traceparent`) and records a client span.
//! * `Delete` carries a UID precondition, so a re-created namesake is spared; NotFound and a
//!   failed precondition mean "already gone" and count as success.
//!
//! Files: `pods` (pod creation in slow-start batches, parallel deletes, finalizer removal),
//! `status` (the status writes with a retry policy of their own).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use apimachinery::{ObjectKey, ObjectRef};
use client::{EventRecorder, SharedClock, TokioClock, Tracer};
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, ObjectReference};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::{Client, ResourceExt};

use crate::action::{Action, Event, PatchType};
use crate::error::{Error, Result};
use crate::expectations::Expectations;

/// What executing a list of actions asks of the worker afterwards.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    /// The earliest `RequeueAfter` among the actions (zero: rate-limited requeue).
    pub requeue_after: Option<Duration>,
    /// How many writes were made (for logs).
    pub writes: usize,
    /// The ReplicaSets created or updated, as the API server answered (the Deployment
    /// controller lays them over its cache until its informer has them).
    pub replica_sets: Vec<ReplicaSet>,
    /// The EndpointSlices created or updated, as the API server answered (for the
    /// EndpointSlice controller's generation tracker).
    pub endpoint_slices: Vec<EndpointSlice>,
    /// The EndpointSlices deleted (or found gone).
    pub deleted_endpoint_slices: Vec<EndpointSlice>,
    /// The Endpoints created or updated, as the API server answered.
    pub endpoints: Vec<Endpoints>,
    /// UIDs of the pods whose finalizer was removed (or which were gone already): the Job
    /// controller expects to observe exactly these, not the ones whose removal failed or was
    /// never sent because an earlier action failed.
    pub removed_finalizers: Vec<String>,
    /// The Jobs created, as the API server answered.
    pub jobs: Vec<Job>,
    /// The ControllerRevisions created or updated, as the API server answered.
    pub controller_revisions: Vec<ControllerRevision>,
}

/// The first action that failed, and why. Actions after it were not attempted.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The action that failed.
    pub action: Action,
    /// The error of its (first failed) request.
    pub error: Error,
    /// What the actions before it asked for.
    pub outcome: Outcome,
}

/// Executes actions for one controller (cheap to clone).
#[derive(Clone)]
pub struct Executor {
    /// The client it was given.
    base: Client,
    /// `base`, continuing the trace of the sync that sends each request when tracing.
    client: Client,
    recorder: EventRecorder,
    /// The controller's tracer (its workers record their syncs with it).
    tracer: Tracer,
    /// The cluster's clock: the controller's "now" and its queue's delays.
    clock: SharedClock,
}

/// `(kind, namespace/name)`: whose resourceVersion a write returned.
type RvKey = (&'static str, ObjectKey);

/// State of one `execute` call.
struct Run<'a> {
    expectations: Option<&'a Mutex<Expectations>>,
    /// resourceVersions returned by writes of this run.
    versions: HashMap<RvKey, String>,
    outcome: Outcome,
}

impl Executor {
    /// An executor writing through `client` and recording events with `recorder`.
    pub fn new(client: Client, recorder: EventRecorder) -> Self {
        Executor {
            base: client.clone(),
            client,
            recorder,
            tracer: Tracer::disabled(),
            clock: TokioClock::shared(),
        }
    }

    /// The same executor on the cluster's `clock` (default: the machine's).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The cluster's clock, for the controller's "now" and its queue
    /// ([`client::RateLimitingQueue::on_clock`]).
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The same executor, tracing with `tracer`.
    pub fn with_tracer(mut self, tracer: Tracer) -> Self {
        self.client = client::trace::sync_client(&tracer, &self.base);
        self.tracer = tracer;
        self
    }

    /// The tracer the controller's workers record their syncs with.
    pub fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// The client for requests made now (for the live reads controllers make around their
    /// syncs too): inside a traced sync, one that carries the sync's trace.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Records `event` through the event recorder.
    pub fn record(&self, event: &Event) {
        let r = &event.regarding;
        let reference = ObjectReference {
            api_version: Some(r.api_version.clone()),
            kind: Some(r.kind.clone()),
            namespace: r.namespace.clone(),
            name: Some(r.name.clone()),
            uid: Some(r.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        self.recorder
            .event(&reference, event.type_, &event.reason, &event.message);
    }

    /// Executes `actions` in order, stopping at the first failure. `expectations` is the
    /// ReplicaSet controller's (for `CreatePods` / `DeletePods`).
    pub async fn execute(
        &self,
        actions: Vec<Action>,
        expectations: Option<&Mutex<Expectations>>,
    ) -> std::result::Result<Outcome, Box<Failure>> {
        let mut run = Run {
            expectations,
            versions: HashMap::new(),
            outcome: Outcome::default(),
        };
        for action in actions {
            if let Err(error) = self.execute_one(&action, &mut run).await {
                return Err(Box::new(Failure {
                    action,
                    error,
                    outcome: run.outcome,
                }));
            }
        }
        Ok(run.outcome)
    }

    fn execute_one<'a>(
        &'a self,
        action: &'a Action,
        run: &'a mut Run<'_>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match action {
                Action::CreateReplicaSet(rs) => {
                    let created = self.create_typed::<ReplicaSet>(rs).await?;
                    remember(run, "ReplicaSet", &created.metadata);
                    run.outcome.replica_sets.push(created);
                }
                Action::UpdateReplicaSet(rs) => {
                    let mut rs = (**rs).clone();
                    freshen(run, "ReplicaSet", &mut rs.metadata);
                    let api: Api<ReplicaSet> = self.namespaced(&rs.metadata);
                    let name = rs.name_any();
                    let updated = api
                        .replace(&name, &PostParams::default(), &rs)
                        .await
                        .map_err(|e| Error::from_kube("update", format!("ReplicaSet {name}"), e))?;
                    remember(run, "ReplicaSet", &updated.metadata);
                    run.outcome.replica_sets.push(updated);
                }
                Action::UpdateReplicaSetStatus(rs) => {
                    let mut rs = (**rs).clone();
                    freshen(run, "ReplicaSet", &mut rs.metadata);
                    let updated = self
                        .replace_status_retrying_once(rs, |latest, rs| {
                            latest.status = rs.status.clone()
                        })
                        .await?;
                    remember(run, "ReplicaSet", &updated.metadata);
                }
                Action::UpdateReplicationControllerStatus(rc) => {
                    let mut rc = (**rc).clone();
                    freshen(run, "ReplicationController", &mut rc.metadata);
                    let updated = self
                        .replace_status_retrying_once(rc, |latest, rc| {
                            latest.status = rc.status.clone()
                        })
                        .await?;
                    remember(run, "ReplicationController", &updated.metadata);
                }
                Action::UpdateDeployment(d) => {
                    let mut d = (**d).clone();
                    freshen(run, "Deployment", &mut d.metadata);
                    let api: Api<Deployment> = self.namespaced(&d.metadata);
                    let name = d.name_any();
                    let updated = api
                        .replace(&name, &PostParams::default(), &d)
                        .await
                        .map_err(|e| Error::from_kube("update", format!("Deployment {name}"), e))?;
                    remember(run, "Deployment", &updated.metadata);
                }
                Action::UpdateDeploymentStatus(d) => {
                    let mut d = (**d).clone();
                    freshen(run, "Deployment", &mut d.metadata);
                    let updated = self.replace_status_typed(&d).await?;
                    remember(run, "Deployment", &updated.metadata);
                }
                Action::CreatePods {
                    controller,
                    pod,
                    batches,
                } => {
                    let body = encode_pod(controller, pod)?;
                    let total: usize = batches.iter().sum();
                    let bodies = std::iter::repeat_n(body, total).collect();
                    self.create_pods(controller, pod, bodies, batches, run)
                        .await?
                }
                Action::CreateDistinctPods {
                    controller,
                    pods,
                    batches,
                } => {
                    let Some(first) = pods.first() else {
                        return Ok(());
                    };
                    let bodies = pods
                        .iter()
                        .map(|p| encode_pod(controller, p))
                        .collect::<Result<Vec<_>>>()?;
                    self.create_pods(controller, first, bodies, batches, run)
                        .await?
                }
                Action::RemovePodFinalizers {
                    controller,
                    pods,
                    finalizer,
                } => {
                    self.remove_finalizers(controller, pods, finalizer, run)
                        .await?
                }
                Action::CreateJob(job) => {
                    let created = self.create_typed::<Job>(job).await?;
                    run.outcome.jobs.push(created);
                }
                Action::UpdatePodDisruptionBudgetStatus(pdb) => {
                    let mut pdb = (**pdb).clone();
                    freshen(run, "PodDisruptionBudget", &mut pdb.metadata);
                    let updated = self.replace_status_typed(&pdb).await?;
                    remember(run, "PodDisruptionBudget", &updated.metadata);
                }
                Action::UpdateCronJobStatus(cj) => {
                    let mut cj = (**cj).clone();
                    freshen(run, "CronJob", &mut cj.metadata);
                    for r in cj
                        .status
                        .iter_mut()
                        .flat_map(|s| s.active.iter_mut().flatten())
                        .filter(|r| r.uid.is_none())
                    {
                        if let Some(job) =
                            run.outcome.jobs.iter().find(|j| j.metadata.name == r.name)
                        {
                            r.uid = job.metadata.uid.clone();
                            r.resource_version = job.metadata.resource_version.clone();
                        }
                    }
                    let updated = self.replace_status_typed(&cj).await?;
                    remember(run, "CronJob", &updated.metadata);
                }
                Action::UpdateDaemonSetStatus(ds) => {
                    let mut ds = (**ds).clone();
                    freshen(run, "DaemonSet", &mut ds.metadata);
                    let updated = self
                        .replace_status_retrying_once(ds, |latest, ds| {
                            latest.status = ds.status.clone()
                        })
                        .await?;
                    remember(run, "DaemonSet", &updated.metadata);
                }
                Action::CreateControllerRevision(revision) => {
                    let created = self.create_typed::<ControllerRevision>(revision).await?;
                    run.outcome.controller_revisions.push(created);
                }
                Action::UpdateControllerRevision(revision) => {
                    let updated = self.replace_typed::<ControllerRevision>(revision).await?;
                    run.outcome.controller_revisions.push(updated);
                }
                Action::UpdateJobStatus(job) => {
                    let mut job = (**job).clone();
                    freshen(run, "Job", &mut job.metadata);
                    let updated = self.replace_status_typed(&job).await?;
                    remember(run, "Job", &updated.metadata);
                }
                Action::DeletePods { controller, pods } => {
                    self.delete_pods(controller, pods, run).await?
                }
                Action::Patch {
                    target,
                    patch_type,
                    body,
                } => {
                    let patch = match patch_type {
                        PatchType::StrategicMerge => Patch::Strategic(body.clone()),
                        PatchType::Merge => Patch::Merge(body.clone()),
                        PatchType::Json => {
                            return Err(Error::Config(
                                "JSON patches are not produced by any controller".into(),
                            ));
                        }
                    };
                    self.dynamic(target)
                        .patch(&target.name, &PatchParams::default(), &patch)
                        .await
                        .map_err(|e| Error::from_kube("patch", target, e))?;
                }
                Action::Delete {
                    target,
                    propagation,
                } => {
                    let params = DeleteParams {
                        propagation_policy: propagation.map(|p| match p {
                            crate::PropagationPolicy::Orphan => {
                                kube::api::PropagationPolicy::Orphan
                            }
                            crate::PropagationPolicy::Background => {
                                kube::api::PropagationPolicy::Background
                            }
                            crate::PropagationPolicy::Foreground => {
                                kube::api::PropagationPolicy::Foreground
                            }
                        }),
                        preconditions: Some(Preconditions {
                            uid: Some(target.uid.clone()).filter(|u| !u.is_empty()),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    match self.dynamic(target).delete(&target.name, &params).await {
                        Ok(_) => {}
                        Err(e) => {
                            let e = Error::from_kube("delete", target, e);
                            // Gone already, or replaced by a namesake: nothing left to delete.
                            if !(e.is_not_found() || e.is_conflict()) {
                                return Err(e);
                            }
                        }
                    }
                }
                Action::VerifyOwnersAbsent { owners, then } => {
                    for owner in owners {
                        if self.exists(owner).await? {
                            // The graph lags the cluster (e.g. the owner was added while its
                            // informer was (re)listing): retry with back-off until it is
                            // observed or really gone, as Kubernetes requeues such items.
                            return Err(Error::OwnerNotObserved(owner.to_string()));
                        }
                    }
                    return self.execute_one(then, run).await;
                }
                Action::UpdateNamespaceStatus(ns) => {
                    let api: Api<Namespace> = Api::all(self.client());
                    let name = ns.name_any();
                    api.replace_status(&name, &PostParams::default(), ns.as_ref())
                        .await
                        .map_err(|e| {
                            Error::from_kube("update status of", format!("Namespace {name}"), e)
                        })?;
                }
                Action::FinalizeNamespace(ns) => {
                    let api: Api<Namespace> = Api::all(self.client());
                    let name = ns.name_any();
                    api.replace_subresource("finalize", &name, &PostParams::default(), ns.as_ref())
                        .await
                        .map_err(|e| {
                            Error::from_kube("finalize", format!("Namespace {name}"), e)
                        })?;
                }
                Action::CreateEndpointSlice(slice) => {
                    let created = self.create_typed::<EndpointSlice>(slice).await?;
                    run.outcome.endpoint_slices.push(created);
                }
                Action::UpdateEndpointSlice(slice) => {
                    let updated = self.replace_typed::<EndpointSlice>(slice).await?;
                    run.outcome.endpoint_slices.push(updated);
                }
                Action::DeleteEndpointSlice(slice) => {
                    let api: Api<EndpointSlice> = self.namespaced(&slice.metadata);
                    let name = slice.name_any();
                    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                        let e = Error::from_kube("delete", format!("EndpointSlice {name}"), e);
                        if !e.is_not_found() {
                            return Err(e);
                        }
                    }
                    run.outcome.deleted_endpoint_slices.push((**slice).clone());
                }
                Action::CreateEndpoints(endpoints) => {
                    let created = self.create_typed::<Endpoints>(endpoints).await?;
                    run.outcome.endpoints.push(created);
                }
                Action::UpdateEndpoints(endpoints) => {
                    let updated = self.replace_typed::<Endpoints>(endpoints).await?;
                    run.outcome.endpoints.push(updated);
                }
                Action::Event(event) => {
                    self.record(event);
                    return Ok(());
                }
                Action::RequeueAfter(after) => {
                    let earliest = run.outcome.requeue_after.map_or(*after, |d| d.min(*after));
                    run.outcome.requeue_after = Some(earliest);
                    return Ok(());
                }
            }
            run.outcome.writes += 1;
            Ok(())
        })
    }

    fn namespaced<K>(&self, meta: &kube::api::ObjectMeta) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(
            self.client(),
            meta.namespace.as_deref().unwrap_or("default"),
        )
    }

    async fn create_typed<K>(&self, obj: &K) -> Result<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = self.namespaced(obj.meta());
        api.create(&PostParams::default(), obj).await.map_err(|e| {
            Error::from_kube("create", format!("{} {}", K::kind(&()), obj.name_any()), e)
        })
    }

    async fn replace_typed<K>(&self, obj: &K) -> Result<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = self.namespaced(obj.meta());
        let name = obj.name_any();
        api.replace(&name, &PostParams::default(), obj)
            .await
            .map_err(|e| Error::from_kube("update", format!("{} {name}", K::kind(&())), e))
    }

    /// An untyped API for `target`'s kind (the garbage collector and namespace controller act
    /// on objects of any kind).
    pub fn dynamic(&self, target: &ObjectRef) -> Api<DynamicObject> {
        let (group, version) = match target.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", target.api_version.as_str()),
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &target.kind));
        match &target.namespace {
            Some(ns) => Api::namespaced_with(self.client(), ns, &resource),
            None => Api::all_with(self.client(), &resource),
        }
    }

    /// `GET` `target` live: true if an object with its name **and UID** exists.
    pub async fn exists(&self, target: &ObjectRef) -> Result<bool> {
        let found = self
            .dynamic(target)
            .get_opt(&target.name)
            .await
            .map_err(|e| Error::from_kube("get", target, e))?;
        Ok(found.is_some_and(|obj| obj.uid().as_deref() == Some(target.uid.as_str())))
    }

    /// Records `action` if it is an [`Action::Event`] (for events a shell decides after a
    /// failed write).
    pub fn record_action(&self, action: &Action) {
        if let Action::Event(event) = action {
            self.record(event);
        }
    }
}

/// Sets the resourceVersion an earlier write of this run returned for the object.
fn freshen(run: &Run<'_>, kind: &'static str, meta: &mut kube::api::ObjectMeta) {
    if let Some(rv) = run.versions.get(&(kind, ObjectKey::from_meta(meta))) {
        meta.resource_version = Some(rv.clone());
    }
}

/// Remembers the resourceVersion a write returned.
fn remember(run: &mut Run<'_>, kind: &'static str, meta: &kube::api::ObjectMeta) {
    if let Some(rv) = &meta.resource_version {
        run.versions
            .insert((kind, ObjectKey::from_meta(meta)), rv.clone());
    }
}

mod pods;
mod status;

use self::pods::encode_pod;

#[cfg(test)]
mod tests;
