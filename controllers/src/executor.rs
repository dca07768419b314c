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

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use apimachinery::{ObjectKey, ObjectRef};
use client::{EventRecorder, Tracer};
use futures::future::{BoxFuture, join_all};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, ObjectReference, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::{Client, Resource, ResourceExt};

use crate::action::{Action, Event, PatchType};
use crate::error::{Error, Result};
use crate::expectations::Expectations;
use crate::replicaset::pods::{
    created_event, deleted_event, failed_create_event, failed_delete_event,
};

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

/// The part of a created pod that `create_pods` reads from the reply: its generated name.
/// (client-go's `podControl.CreatePods` decodes the whole Pod and logs only its name; the rest
/// is skipped unparsed here.)
#[derive(serde::Deserialize)]
struct Created {
    metadata: CreatedMeta,
}

#[derive(serde::Deserialize)]
struct CreatedMeta {
    #[serde(default)]
    name: Option<String>,
}

/// POSTs `body` (an encoded pod) to `request`'s collection; returns the created pod's name.
async fn create_returning_name(
    client: &Client,
    request: &kube::core::Request,
    params: &PostParams,
    body: Vec<u8>,
) -> kube::Result<String> {
    let mut http_request = request
        .create(params, body)
        .map_err(kube::Error::BuildRequest)?;
    http_request.extensions_mut().insert("create");
    let created: Created = client.request(http_request).await?;
    Ok(created.metadata.name.unwrap_or_default())
}

impl Executor {
    /// An executor writing through `client` and recording events with `recorder`.
    pub fn new(client: Client, recorder: EventRecorder) -> Self {
        Executor {
            base: client.clone(),
            client,
            recorder,
            tracer: Tracer::disabled(),
        }
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
                    let updated = self.update_replica_set_status(rs).await?;
                    remember(run, "ReplicaSet", &updated.metadata);
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
                    let api: Api<Deployment> = self.namespaced(&d.metadata);
                    let name = d.name_any();
                    let updated = api
                        .replace_status(&name, &PostParams::default(), &d)
                        .await
                        .map_err(|e| {
                            Error::from_kube("update status of", format!("Deployment {name}"), e)
                        })?;
                    remember(run, "Deployment", &updated.metadata);
                }
                Action::CreatePods {
                    controller,
                    pod,
                    batches,
                } => self.create_pods(controller, pod, batches, run).await?,
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

    /// `updateReplicaSetStatus` (`replica_set_utils.go`): PUT /status; if that fails, GET the
    /// ReplicaSet and try once more with its latest resourceVersion (`statusUpdateRetries` =
    /// 1). The cached copy a sync works on is often one status write behind (its own previous
    /// write not yet seen by the informer), so the first PUT meets a 409 Conflict.
    async fn update_replica_set_status(&self, rs: ReplicaSet) -> Result<ReplicaSet> {
        const STATUS_UPDATE_RETRIES: usize = 1;
        let api: Api<ReplicaSet> = self.namespaced(&rs.metadata);
        let name = rs.name_any();
        let status = rs.status.clone();
        let mut rs = rs;
        let mut attempt = 0;
        loop {
            let error = match api.replace_status(&name, &PostParams::default(), &rs).await {
                Ok(updated) => return Ok(updated),
                Err(e) => Error::from_kube("update status of", format!("ReplicaSet {name}"), e),
            };
            if attempt >= STATUS_UPDATE_RETRIES {
                return Err(error);
            }
            attempt += 1;
            tracing::debug!(replicaset = %name, %error, "status update failed; retrying on the latest version");
            // If the GET fails the status can't be trusted anymore; its error is the one
            // worth reporting.
            rs = api
                .get(&name)
                .await
                .map_err(|e| Error::from_kube("get", format!("ReplicaSet {name}"), e))?;
            rs.status = status.clone();
        }
    }

    /// `slowStartBatch(diff, SlowStartInitialBatchSize, createPod)` of `manageReplicas`.
    async fn create_pods(
        &self,
        controller: &ObjectRef,
        pod: &Pod,
        batches: &[usize],
        run: &mut Run<'_>,
    ) -> Result<()> {
        let total: usize = batches.iter().sum();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)));
        let client = self.client();
        // Every pod of the batches is made from one template: encoded once.
        let body = serde_json::to_vec(pod).map_err(|e| {
            Error::from_kube(
                "create",
                format!("Pod for {controller}"),
                kube::Error::SerdeError(e),
            )
        })?;
        let mut created = 0usize;
        let mut first_error = None;
        let params = PostParams::default();
        for batch in batches {
            let creates = (0..*batch)
                .map(|_| create_returning_name(&client, &request, &params, body.clone()));
            let results = join_all(creates).await;
            for result in results {
                match result {
                    Ok(name) => {
                        created += 1;
                        run.outcome.writes += 1;
                        self.record_action(&created_event(controller, &name));
                    }
                    Err(e) => {
                        let e = Error::from_kube("create", format!("Pod for {controller}"), e);
                        self.record_action(&failed_create_event(controller, &e.to_string()));
                        first_error.get_or_insert(e);
                    }
                }
            }
            if first_error.is_some() {
                break;
            }
        }
        if let Some(expectations) = run.expectations {
            // The informer will never see the pods that were not created.
            let key = controller.key();
            let mut exp = expectations.lock().unwrap_or_else(|p| p.into_inner());
            for _ in created..total {
                exp.creation_observed(&key);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The parallel `podControl.DeletePod` calls of `manageReplicas`.
    async fn delete_pods(
        &self,
        controller: &ObjectRef,
        pods: &[ObjectKey],
        run: &mut Run<'_>,
    ) -> Result<()> {
        let deletes = pods.iter().map(|key| async move {
            let api: Api<Pod> =
                Api::namespaced(self.client(), key.namespace.as_deref().unwrap_or_default());
            (key, api.delete(&key.name, &DeleteParams::default()).await)
        });
        let mut first_error = None;
        for (key, result) in join_all(deletes).await {
            match result {
                Ok(_) => {
                    run.outcome.writes += 1;
                    self.record_action(&deleted_event(controller, &key.name));
                }
                Err(e) => {
                    let e = Error::from_kube("delete", format!("Pod {key}"), e);
                    if let Some(expectations) = run.expectations {
                        expectations
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .deletion_observed(&controller.key(), key);
                    }
                    if !e.is_not_found() {
                        self.record_action(&failed_delete_event(controller, &e.to_string()));
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
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

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
