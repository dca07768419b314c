//! `trackJobStatusAndRemoveFinalizers`: finished pods are counted through the Job's status
//! (`uncountedTerminatedPods`, then the counters), their tracking finalizers removed in
//! between, and the terminal condition written once nothing is uncounted or terminating
//! (`pkg/controller/job/job_controller.go` `trackJobStatusAndRemoveFinalizers`,
//! `flushUncountedAndRemoveFinalizers`, `cleanUncountedPodsWithoutFinalizers`,
//! `enactJobFinished`, `recordJobFinished`).

use std::collections::HashSet;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;

use super::conditions::{ensure_condition, new_condition};
use super::failure_policy::match_pod_failure_policy;
use super::indexes::{format_indexes, valid_index};
use super::pods::{has_tracking_finalizer, is_pod_failed};
use super::{
    Ctx, JOB_TRACKING_FINALIZER, MAX_UNCOUNTED_PODS, completions, is_indexed, spec_of, uid_of,
};
use crate::action::{Action, event};
use crate::pod_readiness::pod_phase;

/// `removeTrackingFinalizerFromPods` as one action.
pub(super) fn remove_finalizers(job_ref: &ObjectRef, pods: &[&Pod]) -> Action {
    Action::RemovePodFinalizers {
        controller: job_ref.clone(),
        pods: pods
            .iter()
            .map(|p| (ObjectKey::from_meta(&p.metadata), uid_of(p).to_owned()))
            .collect(),
        finalizer: JOB_TRACKING_FINALIZER.to_owned(),
    }
}

/// Whether the pod's finalizer may go now (`canRemoveFinalizer`).
fn can_remove_finalizer(ctx: &Ctx<'_>, pod: &Pod, considered_failed: bool) -> bool {
    if ctx.job.metadata.deletion_timestamp.is_some()
        || ctx.finished_condition.is_some()
        || pod_phase(pod) == "Succeeded"
    {
        return true;
    }
    if !considered_failed {
        return false;
    }
    let completions = completions(&ctx.job);
    !valid_index(pod, completions).is_some_and(|ix| {
        ctx.delayed_deletion
            .get(&ix)
            .is_some_and(|d| uid_of(d) == uid_of(pod))
    })
}

/// `trackJobStatusAndRemoveFinalizers`: count finished pods through the status, strip their
/// finalizers, then write the counters (and the terminal condition). Returns the UIDs whose
/// finalizers the actions remove and whether the Job finished.
pub(super) fn track_status(
    ctx: &mut Ctx<'_>,
    job_ref: &ObjectRef,
    mut needs_flush: bool,
) -> (Vec<String>, bool) {
    let indexed = is_indexed(&ctx.job);
    let completions = completions(&ctx.job);
    let mut pods = ctx.pods.clone();
    if indexed {
        pods.sort_by_key(|p| valid_index(p, i32::MAX).unwrap_or(i32::MAX));
    }
    let mut with_finalizer: HashSet<String> = pods
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !ctx.expected_rm.contains(uid_of(p)))
        .map(|p| uid_of(p).to_owned())
        .collect();
    if clean_uncounted(&mut ctx.job, &with_finalizer) {
        needs_flush = true;
    }
    let policy = spec_of(&ctx.job).pod_failure_policy.clone();
    let mut to_remove: Vec<&Pod> = Vec::new();
    let mut new_succeeded_indexes: Vec<i32> = Vec::new();
    let mut reached_max = false;
    let finished_is_failure = ctx
        .finished_condition
        .as_ref()
        .is_some_and(|c| c.type_ != "SuccessCriteriaMet");
    let mut newly: (usize, usize) = (0, 0);
    for pod in &pods {
        let uid = uid_of(pod);
        if !has_tracking_finalizer(pod) || ctx.expected_rm.contains(uid) {
            continue;
        }
        let considered_failed = is_pod_failed(pod, &ctx.job);
        if !can_remove_finalizer(ctx, pod, considered_failed) {
            continue;
        }
        to_remove.push(pod);
        let uncounted = ctx
            .job
            .status
            .get_or_insert_with(JobStatus::default)
            .uncounted_terminated_pods
            .get_or_insert_with(UncountedTerminatedPods::default);
        if pod_phase(pod) == "Succeeded" && !ctx.uncounted_failed.contains(uid) {
            if indexed {
                if let Some(ix) = valid_index(pod, completions)
                    && !ctx.prev_succeeded_indexes.contains(&ix)
                {
                    new_succeeded_indexes.push(ix);
                    needs_flush = true;
                }
            } else if !ctx.uncounted_succeeded.contains(uid) {
                needs_flush = true;
                uncounted
                    .succeeded
                    .get_or_insert_with(Vec::new)
                    .push(uid.to_owned());
                newly.0 += 1;
            }
        } else if (considered_failed || finished_is_failure)
            && !ctx.uncounted_failed.contains(uid)
            && (!indexed || valid_index(pod, completions).is_some())
            && match_pod_failure_policy(policy.as_ref(), pod).count_failed
        {
            needs_flush = true;
            uncounted
                .failed
                .get_or_insert_with(Vec::new)
                .push(uid.to_owned());
            newly.1 += 1;
        }
        let pending = new_succeeded_indexes.len()
            + uncounted.succeeded.as_ref().map_or(0, Vec::len)
            + uncounted.failed.as_ref().map_or(0, Vec::len);
        if pending >= MAX_UNCOUNTED_PODS {
            reached_max = true;
            break;
        }
    }
    let status = ctx.job.status.get_or_insert_with(JobStatus::default);
    if indexed {
        ctx.succeeded_indexes
            .extend(new_succeeded_indexes.iter().copied());
        let text = format_indexes(&ctx.succeeded_indexes);
        if status.completed_indexes.as_deref().unwrap_or("") != text {
            needs_flush = true;
        }
        status.succeeded = Some(ctx.succeeded_indexes.len() as i32);
        status.completed_indexes = Some(text);
        let failed_text = ctx.failed_indexes.as_ref().map(format_indexes);
        if status.failed_indexes != failed_text {
            status.failed_indexes = failed_text;
            needs_flush = true;
        }
    }
    if newly != (0, 0) {
        ctx.notes.push(format!(
            "count {} succeeded, {} failed pods through uncountedTerminatedPods",
            newly.0, newly.1
        ));
    }
    // The interim condition goes out with the first write; the final one waits.
    if let Some(cond) = ctx.finished_condition.clone() {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let (final_type, interim_present) = match cond.type_.as_str() {
            "FailureTarget" => (
                "Failed",
                conditions.iter().any(|c| c.type_ == "FailureTarget"),
            ),
            _ => (
                "Complete",
                conditions.iter().any(|c| c.type_ == "SuccessCriteriaMet"),
            ),
        };
        if !interim_present {
            conditions.push(cond.clone());
            needs_flush = true;
            ctx.notes.push(format!(
                "{} ({})",
                cond.type_,
                cond.reason.as_deref().unwrap_or("")
            ));
        }
        ctx.finished_condition = Some(new_condition(
            final_type,
            cond.reason.as_deref().unwrap_or(""),
            cond.message.as_deref().unwrap_or(""),
            ctx.now,
        ));
    }
    if needs_flush {
        ctx.actions
            .push(Action::UpdateJobStatus(Box::new(ctx.job.clone())));
        needs_flush = false;
    }
    let rm: Vec<String> = to_remove.iter().map(|p| uid_of(p).to_owned()).collect();
    if !to_remove.is_empty() {
        ctx.actions.push(remove_finalizers(job_ref, &to_remove));
        for uid in &rm {
            with_finalizer.remove(uid);
        }
    }
    if clean_uncounted(&mut ctx.job, &with_finalizer) {
        needs_flush = true;
    }
    let finished = !reached_max && enact_finished(ctx);
    if finished {
        needs_flush = true;
    }
    if needs_flush {
        ctx.actions
            .push(Action::UpdateJobStatus(Box::new(ctx.job.clone())));
        if finished && let Some(cond) = ctx.finished_condition.clone() {
            record_finished(ctx, job_ref, &cond);
        }
    }
    (rm, finished)
}

/// `cleanUncountedPodsWithoutFinalizers`: UIDs whose pods no longer carry the finalizer move
/// from `uncountedTerminatedPods` to the counters.
fn clean_uncounted(job: &mut Job, with_finalizer: &HashSet<String>) -> bool {
    let status = job.status.get_or_insert_with(JobStatus::default);
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default);
    let mut moved = (0, 0);
    if let Some(list) = uncounted.succeeded.as_mut() {
        let before = list.len();
        list.retain(|u| with_finalizer.contains(u));
        moved.0 = (before - list.len()) as i32;
    }
    if let Some(list) = uncounted.failed.as_mut() {
        let before = list.len();
        list.retain(|u| with_finalizer.contains(u));
        moved.1 = (before - list.len()) as i32;
    }
    if uncounted.succeeded.as_ref().is_some_and(Vec::is_empty) {
        uncounted.succeeded = None;
    }
    if uncounted.failed.as_ref().is_some_and(Vec::is_empty) {
        uncounted.failed = None;
    }
    if moved == (0, 0) {
        return false;
    }
    status.succeeded = Some(status.succeeded.unwrap_or(0) + moved.0);
    status.failed = Some(status.failed.unwrap_or(0) + moved.1);
    true
}

/// `enactJobFinished`: the final condition, once nothing is uncounted or terminating.
fn enact_finished(ctx: &mut Ctx<'_>) -> bool {
    let Some(cond) = ctx.finished_condition.clone() else {
        return false;
    };
    let status = ctx.job.status.get_or_insert_with(JobStatus::default);
    let pending = status.uncounted_terminated_pods.as_ref().map_or(0, |u| {
        u.succeeded.as_ref().map_or(0, Vec::len) + u.failed.as_ref().map_or(0, Vec::len)
    });
    if pending > 0 {
        ctx.notes
            .push(format!("{} waits for {pending} uncounted pods", cond.type_));
        return false;
    }
    if ctx.terminating > 0 {
        ctx.notes.push(format!(
            "{} waits for {} terminating pods",
            cond.type_, ctx.terminating
        ));
        return false;
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    ensure_condition(
        conditions,
        &cond.type_,
        "True",
        cond.reason.as_deref().unwrap_or(""),
        cond.message.as_deref().unwrap_or(""),
        ctx.now,
    );
    if cond.type_ == "Complete" {
        status.completion_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            ctx.now,
        ));
    }
    ctx.notes.push(format!(
        "{} ({})",
        cond.type_,
        cond.reason.as_deref().unwrap_or("")
    ));
    true
}

/// `recordJobFinished`: `Completed` (and `TooManySucceededPods`), or the failure's reason as a
/// Warning.
fn record_finished(ctx: &mut Ctx<'_>, job_ref: &ObjectRef, cond: &JobCondition) {
    if cond.type_ == "Complete" {
        let succeeded = ctx
            .job
            .status
            .as_ref()
            .and_then(|s| s.succeeded)
            .unwrap_or(0);
        if spec_of(&ctx.job).completions.is_some_and(|c| succeeded > c) {
            ctx.actions.push(event(
                job_ref.clone(),
                EventType::Warning,
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            ));
        }
        ctx.actions.push(event(
            job_ref.clone(),
            EventType::Normal,
            "Completed",
            "Job completed",
        ));
    } else {
        ctx.actions.push(event(
            job_ref.clone(),
            EventType::Warning,
            cond.reason.as_deref().unwrap_or(""),
            cond.message.as_deref().unwrap_or(""),
        ));
    }
}
