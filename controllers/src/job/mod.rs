//! The Job controller: run pods until enough succeed, or give up.
//!
//! Mirrors `pkg/controller/job/job_controller.go` (`syncJob`, `manageJob`,
//! `trackJobStatusAndRemoveFinalizers`, `flushUncountedAndRemoveFinalizers`,
//! `enactJobFinished`) as Kubernetes 1.33 runs it (pod replacement policy and delayed terminal
//! conditions on). Files: [`pods`] (pods from the template, failed/terminating),
//! [`indexes`] (Indexed Jobs' intervals), [`failure_policy`] (`podFailurePolicy`),
//! [`backoff`] (the 10 s … 10 min delay), [`conditions`] (conditions, success policy),
//! `decide` (when the Job ends), `manage` (pods to create or delete), `track` (counting
//! finished pods and the terminal condition), [`controller`] (the async shell).
//!
//! ```text
//!  sync_job(Job, its pods, expectations, now)
//!   ├─ finished already (Complete/Failed) ─▶ only strip leftover finalizers
//!   ├─ count: active, ready, terminating; succeeded/failed = status + uncounted + new
//!   ├─ decide the end: podFailurePolicy FailJob, backoffLimit, activeDeadlineSeconds,
//!   │   maxFailedIndexes / failed indexes, successPolicy, completions reached
//!   │     end decided ─▶ DELETE the active pods
//!   │     otherwise   ─▶ manage_job: suspended → delete all; too many → delete;
//!   │                    too few → (after the failure back-off) create, slow start 1, 2, 4…
//!   └─ track: finished pods' UIDs → status.uncountedTerminatedPods (PUT /status)
//!             ─▶ strip their batch.kubernetes.io/job-tracking finalizers (PATCH)
//!             ─▶ move them to succeeded/failed, add Complete/Failed once no pod
//!                terminates (PUT /status) ─▶ events Completed / BackoffLimitExceeded …
//! ```
//!
//! A pod is counted exactly once, through its finalizer: while it carries
//! `batch.kubernetes.io/job-tracking` the API server keeps it, and the controller removes the
//! finalizer only after the pod's UID is in the Job's status. Terminal conditions come in two
//! steps as in Kubernetes 1.33: `SuccessCriteriaMet` or `FailureTarget` when decided, then
//! `Complete` or `Failed` once no pod of the Job is still terminating.
//!
//! Simplified: the `managedBy` field is not consulted (every Job is this controller's), and the
//! job metrics (`job_sync_total`, `job_pods_finished_total`, …) are not exported.

pub mod backoff;
pub mod conditions;
pub mod controller;
mod decide;
pub mod failure_policy;
pub mod indexes;
mod manage;
pub mod pods;
mod track;

use std::collections::{BTreeMap, HashSet};

use apimachinery::{EventType, ObjectKey, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;

use self::backoff::BackoffRecord;
use self::conditions::{is_finished, new_condition};
use self::decide::decide_end;
use self::failure_policy::match_pod_failure_policy;
use self::indexes::{Indexes, valid_index};
use self::manage::{delete_pods, manage_job, update_suspend_condition};
use self::pods::{has_tracking_finalizer, is_pod_failed, is_pod_terminating};
use self::track::{remove_finalizers, track_status};
use crate::action::{Action, event};
use crate::expectations::Expectations;
use crate::pod_readiness::{filter_active_pods, is_pod_ready, pod_phase};

/// `batch.kubernetes.io/job-tracking`: the finalizer that keeps a finished pod until the Job
/// has counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The annotation (and label) with an Indexed Job pod's index.
pub const JOB_COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Counted failures of the index before this pod (`backoffLimitPerIndex`).
pub const JOB_INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// Failures of the index the pod failure policy ignored.
pub const JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// `MaxUncountedPods`: at most this many UIDs wait in `uncountedTerminatedPods` per sync.
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// `MaxPodCreateDeletePerSync`.
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;

/// The Job's spec (defaulted by the API server; an empty one if missing).
pub fn spec_of(job: &Job) -> &JobSpec {
    static EMPTY: std::sync::OnceLock<JobSpec> = std::sync::OnceLock::new();
    job.spec
        .as_ref()
        .unwrap_or_else(|| EMPTY.get_or_init(JobSpec::default))
}

/// Everything one Job sync reads.
#[derive(Debug, Clone, Copy)]
pub struct JobSyncInput<'a> {
    /// The Job (from the lister).
    pub job: &'a Job,
    /// The pods it controls, claimed, in any phase.
    pub pods: &'a [&'a Pod],
    /// UIDs whose finalizer removal was sent and not yet observed
    /// (`finalizerExpectations`): counted already.
    pub expected_rm_finalizers: &'a HashSet<String>,
    /// The Job's failure back-off as last stored.
    pub backoff: &'a BackoffRecord,
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSync {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
    /// The back-off record to keep once the status is written.
    pub backoff: BackoffRecord,
    /// UIDs whose finalizer the actions remove (the shell expects to observe them).
    pub rm_finalizers: Vec<String>,
    /// Whether the Job is finished after these actions (its back-off record can go).
    pub finished: bool,
}

/// What a sync knows about the Job (`syncJobCtx`).
struct Ctx<'a> {
    job: Job,
    pods: Vec<&'a Pod>,
    active_pods: Vec<&'a Pod>,
    expected_rm: &'a HashSet<String>,
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    succeeded: i32,
    ready: i32,
    terminating: i32,
    finished_condition: Option<JobCondition>,
    prev_succeeded_indexes: Indexes,
    succeeded_indexes: Indexes,
    failed_indexes: Option<Indexes>,
    delayed_deletion: BTreeMap<i32, &'a Pod>,
    new_backoff: BackoffRecord,
    now: Timestamp,
    notes: Vec<String>,
    actions: Vec<Action>,
}

fn uid_of(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn is_indexed(job: &Job) -> bool {
    spec_of(job).completion_mode.as_deref() == Some("Indexed")
}

fn suspended(job: &Job) -> bool {
    spec_of(job).suspend == Some(true)
}

fn completions(job: &Job) -> i32 {
    spec_of(job).completions.unwrap_or(0)
}

/// `syncJob` for one Job: the whole decision. Updates `expectations` for the creations and
/// deletions it decides.
pub fn sync_job(expectations: &mut Expectations, input: JobSyncInput<'_>) -> JobSync {
    let job_ref = ObjectRef::from_object(input.job);
    let key = ObjectKey::from_meta(&input.job.metadata);
    if is_finished(input.job) {
        // Pods that still carry the finalizer (adopted late, or a removal that failed) are
        // released, as the orphan-pod path of Kubernetes does.
        let leftovers: Vec<&Pod> = input
            .pods
            .iter()
            .copied()
            .filter(|p| {
                has_tracking_finalizer(p) && !input.expected_rm_finalizers.contains(uid_of(p))
            })
            .collect();
        let mut actions = Vec::new();
        let rm: Vec<String> = leftovers.iter().map(|p| uid_of(p).to_owned()).collect();
        if !leftovers.is_empty() {
            actions.push(remove_finalizers(&job_ref, &leftovers));
        }
        return JobSync {
            actions,
            summary: format!("finished: {} leftover finalizers", rm.len()),
            backoff: BackoffRecord::default(),
            rm_finalizers: rm,
            finished: true,
        };
    }
    let spec = spec_of(input.job);
    let mode = spec.completion_mode.as_deref().unwrap_or("NonIndexed");
    if mode != "NonIndexed" && mode != "Indexed" {
        return JobSync {
            actions: vec![event(
                job_ref,
                EventType::Warning,
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown",
            )],
            summary: format!("unknown completion mode {mode:?}: skipped"),
            backoff: input.backoff.clone(),
            rm_finalizers: Vec::new(),
            finished: false,
        };
    }
    let mut job = input.job.clone();
    let status = job.status.get_or_insert_with(JobStatus::default);
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default);
    let uncounted_succeeded: HashSet<String> =
        uncounted.succeeded.iter().flatten().cloned().collect();
    let uncounted_failed: HashSet<String> = uncounted.failed.iter().flatten().cloned().collect();
    let (status_succeeded, status_failed) =
        (status.succeeded.unwrap_or(0), status.failed.unwrap_or(0));

    let satisfied = expectations.satisfied_expectations(&key, input.now);
    let pods: Vec<&Pod> = input.pods.to_vec();
    let active_pods = filter_active_pods(pods.iter().copied());
    let ready = active_pods.iter().filter(|p| is_pod_ready(p)).count() as i32;
    let terminating = pods.iter().filter(|p| is_pod_terminating(p)).count() as i32;
    let mut ctx = Ctx {
        job,
        pods,
        active_pods,
        expected_rm: input.expected_rm_finalizers,
        uncounted_succeeded,
        uncounted_failed,
        succeeded: 0,
        ready,
        terminating,
        finished_condition: None,
        prev_succeeded_indexes: Indexes::new(),
        succeeded_indexes: Indexes::new(),
        failed_indexes: None,
        delayed_deletion: BTreeMap::new(),
        new_backoff: input.backoff.clone(),
        now: input.now,
        notes: Vec::new(),
        actions: Vec::new(),
    };
    let mut active = ctx.active_pods.len() as i32;
    let (new_succeeded, new_failed) = new_finished_pods(&ctx);
    let policy = spec_of(&ctx.job).pod_failure_policy.clone();
    let counted_new_failed = new_failed
        .iter()
        .filter(|p| match_pod_failure_policy(policy.as_ref(), p).count_failed)
        .count() as i32;
    ctx.succeeded =
        status_succeeded + new_succeeded.len() as i32 + ctx.uncounted_succeeded.len() as i32;
    let failed = status_failed + counted_new_failed + ctx.uncounted_failed.len() as i32;
    ctx.notes.push(format!(
        "active {active}, succeeded {}, failed {failed}",
        ctx.succeeded
    ));
    let suspended_now = suspended(&ctx.job);
    if let Some(s) = ctx.job.status.as_mut()
        && s.start_time.is_none()
        && !suspended_now
    {
        s.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            input.now,
        ));
    }
    ctx.new_backoff = input.backoff.next(&new_succeeded, &new_failed);

    decide_end(&mut ctx, failed);
    let satisfied_now = satisfied;
    let mut suspend_changed = false;
    if ctx.finished_condition.is_some() {
        // Remove the active pods; the end is declared once they are gone.
        let (deleted, deleted_ready) =
            delete_pods(&mut ctx, expectations, &key, &job_ref, false, None);
        if deleted != active || !satisfied_now {
            ctx.finished_condition = None;
        }
        active -= deleted;
        ctx.terminating += deleted;
        ctx.ready -= deleted_ready;
    } else {
        let mut managed = false;
        if satisfied_now && ctx.job.metadata.deletion_timestamp.is_none() {
            active = manage_job(&mut ctx, expectations, &key, &job_ref, active);
            managed = true;
        } else if !satisfied_now {
            ctx.notes
                .push("waiting for pod creations/deletions to be observed".into());
        }
        let complete = match spec_of(&ctx.job).completions {
            None => ctx.succeeded > 0 && active == 0,
            Some(c) => ctx.succeeded >= c && active == 0,
        };
        if complete {
            ctx.finished_condition = Some(new_condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                input.now,
            ));
        } else if managed {
            suspend_changed = update_suspend_condition(&mut ctx, &job_ref);
        }
    }
    let status = ctx.job.status.get_or_insert_with(JobStatus::default);
    let needs_update = suspend_changed
        || status.active.unwrap_or(0) != active
        || status.ready != Some(ctx.ready)
        || status.terminating != Some(ctx.terminating);
    if needs_update && !suspend_changed {
        ctx.notes.push(format!(
            "status: active {active}, ready {}, terminating {}",
            ctx.ready, ctx.terminating
        ));
    }
    let status = ctx.job.status.get_or_insert_with(JobStatus::default);
    status.active = Some(active);
    status.ready = Some(ctx.ready);
    status.terminating = Some(ctx.terminating);
    let (rm, finished) = track_status(&mut ctx, &job_ref, needs_update);
    JobSync {
        actions: ctx.actions,
        summary: ctx.notes.join(" → "),
        backoff: ctx.new_backoff,
        rm_finalizers: rm,
        finished,
    }
}

/// `getNewFinishedPods`: finished pods that carry the finalizer and are not counted yet.
fn new_finished_pods<'a>(ctx: &Ctx<'a>) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let indexed = is_indexed(&ctx.job);
    let completions = completions(&ctx.job);
    let valid = |p: &&Pod| {
        let uid = uid_of(p);
        has_tracking_finalizer(p)
            && !ctx.expected_rm.contains(uid)
            && (!indexed || valid_index(p, completions).is_some())
    };
    let succeeded = ctx
        .pods
        .iter()
        .copied()
        .filter(|p| valid(p) && !ctx.uncounted_succeeded.contains(uid_of(p)))
        .filter(|p| pod_phase(p) == "Succeeded")
        .collect();
    let failed = ctx
        .pods
        .iter()
        .copied()
        .filter(|p| valid(p) && !ctx.uncounted_failed.contains(uid_of(p)))
        .filter(|p| is_pod_failed(p, &ctx.job))
        .collect();
    (succeeded, failed)
}

#[cfg(test)]
mod tests;
