//! Actions: what a sync decided, for the async shell to carry out.
//!
//! Every sync function in this crate is a plain function from a snapshot of cached objects
//! (and `now`) to a list of [`Action`]s. The shell (informers → workqueue → sync → API
//! writes) executes them **in order** and **stops at the first failed write**, then requeues
//! the key with rate-limited backoff — exactly what Kubernetes does when a `syncDeployment`
//! or `syncReplicaSet` returns an error half-way. Later actions were decided assuming earlier
//! ones succeeded (Kubernetes continues with the object the API server returned), and events
//! come right after the write they report, so stopping early never emits an event for a write
//! that did not happen.
//!
//! ```text
//!   informer caches ──snapshot──▶ sync_*(input, now) ──▶ [Action, Action, ...] + summary
//!                                                              │ in order, stop on error
//!                                                              ▼
//!                                    POST / PUT / PATCH / DELETE, events, requeue
//! ```
//!
//! Writes carry the `resourceVersion` of the cached object they were decided from. When one
//! list writes the same object twice (a Deployment's status after creating its ReplicaSet,
//! then again after the rollout step), the shell should send the second write with the
//! `resourceVersion` the first one returned; Kubernetes reuses the stale one and pays for it
//! with a 409 and a retry.

use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// An event for the event recorder (`record.EventRecorder.Eventf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object the event is about (`involvedObject`).
    pub regarding: ObjectRef,
    /// Normal or Warning.
    pub type_: EventType,
    /// CamelCase reason, e.g. `ScalingReplicaSet`.
    pub reason: String,
    /// Human-readable message, worded as Kubernetes words it.
    pub message: String,
}

/// How a patch body is to be sent (`Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/strategic-merge-patch+json` (ownerReference adoption/release).
    StrategicMerge,
    /// `application/merge-patch+json` (finalizer removal by the garbage collector).
    Merge,
    /// `application/json-patch+json`.
    Json,
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Leave dependents, removing their ownerReference (finalizer `orphan`).
    Orphan,
    /// Delete now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first (finalizer `foregroundDeletion`), then the owner.
    Foreground,
}

impl PropagationPolicy {
    /// The string in `DeleteOptions`.
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// One thing the shell must do. See the module docs for the ordering and failure contract.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `POST` a ReplicaSet. On `AlreadyExists` the Deployment shell calls
    /// [`crate::deployment::sync::on_replica_set_already_exists`]; on any other error
    /// [`crate::deployment::sync::on_replica_set_create_error`] (then stops as usual).
    CreateReplicaSet(Box<ReplicaSet>),
    /// `PUT` a ReplicaSet (new `spec.replicas`, annotations, `minReadySeconds`).
    UpdateReplicaSet(Box<ReplicaSet>),
    /// `PUT .../replicasets/<name>/status`.
    UpdateReplicaSetStatus(Box<ReplicaSet>),
    /// `PUT .../replicationcontrollers/<name>/status` (the ReplicaSet sync's status, converted
    /// back by [`crate::replication`]).
    UpdateReplicationControllerStatus(Box<k8s_openapi::api::core::v1::ReplicationController>),
    /// `PUT .../poddisruptionbudgets/<name>/status` (the disruption controller's).
    UpdatePodDisruptionBudgetStatus(Box<k8s_openapi::api::policy::v1::PodDisruptionBudget>),
    /// `PUT` a Deployment (rollback: template and annotations restored, rollback annotation
    /// cleared).
    UpdateDeployment(Box<Deployment>),
    /// `PUT .../deployments/<name>/status`.
    UpdateDeploymentStatus(Box<Deployment>),
    /// Create `batches.iter().sum()` copies of `pod` (it has `generateName`) following the
    /// slow-start plan: each batch in parallel, stop after the first batch with an error.
    /// Per created pod emit `SuccessfulCreate` ([`crate::replicaset::pods::created_event`]),
    /// per error `FailedCreate` ([`crate::replicaset::pods::failed_create_event`]), and call
    /// [`crate::expectations::Expectations::creation_observed`] once for every pod that was
    /// not created (failed or never attempted: the informer will never see them). After an
    /// error, write the status from [`crate::replicaset::status_after_manage_error`].
    CreatePods {
        /// The ReplicaSet, for expectations and events.
        controller: ObjectRef,
        /// The pod to create (from the template, with ownerReference and generateName).
        pod: Box<Pod>,
        /// Batch sizes: 1, 2, 4, ... summing to the number of pods.
        batches: Vec<usize>,
    },
    /// Create these pods, each different (an Indexed Job's pods, one per index), following
    /// the slow-start plan as [`Action::CreatePods`] does, with the same events and
    /// expectations.
    CreateDistinctPods {
        /// The controller, for expectations and events.
        controller: ObjectRef,
        /// The pods, in the order to create them; `batches` sums to their number.
        pods: Vec<Pod>,
        /// Batch sizes: 1, 2, 4, ...
        batches: Vec<usize>,
    },
    /// Remove `finalizer` from these pods (`(key, uid)`), in parallel, with a strategic merge
    /// patch (`$deleteFromPrimitiveList/finalizers`); NotFound counts as done. The UIDs whose
    /// removal failed are reported in the outcome.
    RemovePodFinalizers {
        /// The controller, for logs.
        controller: ObjectRef,
        /// The pods and their UIDs.
        pods: Vec<(ObjectKey, String)>,
        /// The finalizer to remove.
        finalizer: String,
    },
    /// `PUT .../daemonsets/<name>/status`, once more on the latest version after a conflict
    /// (`storeDaemonSetStatus`' retry).
    UpdateDaemonSetStatus(Box<DaemonSet>),
    /// `POST` a ControllerRevision (the DaemonSet controller's snapshot of a template).
    CreateControllerRevision(Box<ControllerRevision>),
    /// `PUT` a ControllerRevision (a raised `revision`, an added hash label).
    UpdateControllerRevision(Box<ControllerRevision>),
    /// `PUT .../jobs/<name>/status`.
    UpdateJobStatus(Box<Job>),
    /// `POST` a Job (the CronJob controller's, with its deterministic name).
    CreateJob(Box<Job>),
    /// `PUT .../cronjobs/<name>/status`. Entries of `status.active` without a UID name Jobs
    /// created earlier in the same list: the shell fills in the UID and resourceVersion the
    /// API server answered with.
    UpdateCronJobStatus(Box<CronJob>),
    /// Delete these pods, in parallel. Per deleted pod emit `SuccessfulDelete`; on a failure
    /// other than NotFound call `Expectations::deletion_observed` for that pod and emit
    /// `FailedDelete`.
    DeletePods {
        /// The ReplicaSet, for expectations and events.
        controller: ObjectRef,
        /// Victims, in the order `getPodsToDelete` ranked them.
        pods: Vec<ObjectKey>,
    },
    /// `PATCH` an object (adopt/release ownerReferences, remove a finalizer).
    Patch {
        /// The object; for ownerReference patches the body also carries its UID as a
        /// precondition.
        target: ObjectRef,
        /// Content type of `body`.
        patch_type: PatchType,
        /// The patch document.
        body: serde_json::Value,
    },
    /// `DELETE` an object, with a UID precondition (so a re-created namesake is spared).
    Delete {
        /// The object.
        target: ObjectRef,
        /// `propagationPolicy`, `None` for the server's default.
        propagation: Option<PropagationPolicy>,
    },
    /// `GET` each owner live; only if every one is NotFound (or has another UID) carry out
    /// `then`. The garbage collector's check for "dangling" ownerReferences: the graph may
    /// lag behind the API server, so absence in the cache is not proof.
    VerifyOwnersAbsent {
        /// Owners that are absent from the snapshot.
        owners: Vec<ObjectRef>,
        /// What to do when they are confirmed absent.
        then: Box<Action>,
    },
    /// `PUT /api/v1/namespaces/<name>/status`.
    UpdateNamespaceStatus(Box<Namespace>),
    /// `PUT /api/v1/namespaces/<name>/finalize` with `spec.finalizers` emptied of
    /// `kubernetes`; the API server then removes the namespace.
    FinalizeNamespace(Box<Namespace>),
    /// `POST` an EndpointSlice (it has `generateName`); the shell tracks the generation the
    /// API server answered with.
    CreateEndpointSlice(Box<EndpointSlice>),
    /// `PUT` an EndpointSlice.
    UpdateEndpointSlice(Box<EndpointSlice>),
    /// `DELETE` an EndpointSlice; NotFound counts as done.
    DeleteEndpointSlice(Box<EndpointSlice>),
    /// `POST` an Endpoints object (named after its Service).
    CreateEndpoints(Box<Endpoints>),
    /// `PUT` an Endpoints object.
    UpdateEndpoints(Box<Endpoints>),
    /// Record an event.
    Event(Event),
    /// Add the key back to the workqueue after this delay (`AddAfter`); zero means "now,
    /// rate limited" (`AddRateLimited`).
    RequeueAfter(Duration),
}

impl Action {
    /// A short, human-readable line for logs and traces, e.g. `scale ReplicaSet default/web-abc to 3`.
    pub fn describe(&self) -> String {
        fn rs_line(verb: &str, rs: &ReplicaSet) -> String {
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            format!(
                "{verb} ReplicaSet {} (replicas {replicas})",
                ObjectKey::from_meta(&rs.metadata)
            )
        }
        fn slice_line(verb: &str, s: &EndpointSlice) -> String {
            let name = s
                .metadata
                .name
                .clone()
                .or_else(|| s.metadata.generate_name.clone())
                .unwrap_or_default();
            let namespace = s.metadata.namespace.as_deref();
            format!(
                "{verb} EndpointSlice {} ({} endpoints)",
                ObjectKey::new(namespace, name),
                s.endpoints.len()
            )
        }
        fn endpoints_line(verb: &str, e: &Endpoints) -> String {
            let (ready, not_ready) = e.subsets.iter().flatten().fold((0, 0), |(r, n), s| {
                (
                    r + s.addresses.as_ref().map_or(0, Vec::len),
                    n + s.not_ready_addresses.as_ref().map_or(0, Vec::len),
                )
            });
            format!(
                "{verb} Endpoints {} ({ready} ready, {not_ready} not ready)",
                ObjectKey::from_meta(&e.metadata)
            )
        }
        match self {
            Action::CreateReplicaSet(rs) => rs_line("create", rs),
            Action::UpdateReplicaSet(rs) => rs_line("update", rs),
            Action::UpdateReplicaSetStatus(rs) => {
                format!(
                    "update status of ReplicaSet {}",
                    ObjectKey::from_meta(&rs.metadata)
                )
            }
            Action::UpdateReplicationControllerStatus(rc) => {
                format!(
                    "update status of ReplicationController {}",
                    ObjectKey::from_meta(&rc.metadata)
                )
            }
            Action::UpdatePodDisruptionBudgetStatus(pdb) => {
                let allowed = pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed);
                format!(
                    "update status of PodDisruptionBudget {} (disruptionsAllowed {allowed})",
                    ObjectKey::from_meta(&pdb.metadata)
                )
            }
            Action::UpdateDeployment(d) => {
                format!("update Deployment {}", ObjectKey::from_meta(&d.metadata))
            }
            Action::UpdateDeploymentStatus(d) => {
                format!(
                    "update status of Deployment {}",
                    ObjectKey::from_meta(&d.metadata)
                )
            }
            Action::CreatePods {
                controller,
                batches,
                ..
            } => {
                let n: usize = batches.iter().sum();
                format!("create {n} pods for {controller} in batches {batches:?}")
            }
            Action::CreateDistinctPods {
                controller,
                pods,
                batches,
            } => {
                let names: Vec<&str> = pods
                    .iter()
                    .filter_map(|p| p.metadata.generate_name.as_deref())
                    .collect();
                let shown = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
                let more = if names.len() > 5 { ", ..." } else { "" };
                format!(
                    "create {} pods ({shown}{more}) for {controller} in batches {batches:?}",
                    pods.len()
                )
            }
            Action::RemovePodFinalizers {
                controller,
                pods,
                finalizer,
            } => format!(
                "remove finalizer {finalizer} from {} pods of {controller}",
                pods.len()
            ),
            Action::CreateJob(job) => {
                format!("create Job {}", ObjectKey::from_meta(&job.metadata))
            }
            Action::UpdateCronJobStatus(cj) => {
                format!(
                    "update status of CronJob {}",
                    ObjectKey::from_meta(&cj.metadata)
                )
            }
            Action::UpdateDaemonSetStatus(ds) => {
                format!(
                    "update status of DaemonSet {}",
                    ObjectKey::from_meta(&ds.metadata)
                )
            }
            Action::CreateControllerRevision(r) => format!(
                "create ControllerRevision {} (revision {})",
                ObjectKey::from_meta(&r.metadata),
                r.revision
            ),
            Action::UpdateControllerRevision(r) => format!(
                "update ControllerRevision {} (revision {})",
                ObjectKey::from_meta(&r.metadata),
                r.revision
            ),
            Action::UpdateJobStatus(job) => {
                format!(
                    "update status of Job {}",
                    ObjectKey::from_meta(&job.metadata)
                )
            }
            Action::DeletePods { controller, pods } => {
                let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
                format!("delete pods {} of {controller}", names.join(", "))
            }
            Action::Patch { target, .. } => format!("patch {target}"),
            Action::Delete {
                target,
                propagation,
            } => match propagation {
                Some(p) => format!("delete {target} ({})", p.as_str()),
                None => format!("delete {target}"),
            },
            Action::VerifyOwnersAbsent { owners, then } => {
                let owners: Vec<String> = owners.iter().map(|o| o.to_string()).collect();
                format!("if {} absent: {}", owners.join(", "), then.describe())
            }
            Action::UpdateNamespaceStatus(ns) => {
                format!(
                    "update status of Namespace {}",
                    ObjectKey::from_meta(&ns.metadata)
                )
            }
            Action::FinalizeNamespace(ns) => {
                format!("finalize Namespace {}", ObjectKey::from_meta(&ns.metadata))
            }
            Action::CreateEndpointSlice(s) => slice_line("create", s),
            Action::UpdateEndpointSlice(s) => slice_line("update", s),
            Action::DeleteEndpointSlice(s) => slice_line("delete", s),
            Action::CreateEndpoints(e) => endpoints_line("create", e),
            Action::UpdateEndpoints(e) => endpoints_line("update", e),
            Action::Event(e) => format!("event {} {}: {}", e.type_.as_str(), e.reason, e.message),
            Action::RequeueAfter(d) => format!("requeue after {}s", d.as_secs_f64()),
        }
    }
}

/// Helper for building an [`Action::Event`].
pub fn event(
    regarding: ObjectRef,
    type_: EventType,
    reason: &str,
    message: impl Into<String>,
) -> Action {
    Action::Event(Event {
        regarding,
        type_,
        reason: reason.to_string(),
        message: message.into(),
    })
}
