//! `manageJob`: the pods a Job needs now — delete the surplus (or all of them while
//! suspended), create the missing ones after the failure back-off, one per pending index for
//! Indexed Jobs (`pkg/controller/job/job_controller.go` `manageJob`, `deleteJobPods`,
//! `deleteActivePods`, `indexed_job_utils.go` `firstPendingIndexes`).

use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::api::core::v1::Pod;

use super::backoff::{finished_time, remaining_for_failures};
use super::conditions::ensure_condition;
use super::indexes::{duplicated_index_pods, first_pending_indexes, valid_index};
use super::pods::{
    has_tracking_finalizer, index_absolute_failure_count, is_pod_terminating, new_pod,
    only_replace_failed_pods, pod_template, rank_for_removal,
};
use super::track::remove_finalizers;
use super::{Ctx, MAX_POD_CREATE_DELETE_PER_SYNC, completions, is_indexed, spec_of, suspended};
use crate::action::{Action, event};
use crate::expectations::Expectations;
use crate::pod_readiness::is_pod_ready;
use crate::replicaset::pods::slow_start_batches;

/// Deletes `pods` (all active pods when `None`); with `strip`, their finalizers go first
/// (`deleteJobPods`, for suspension and surplus) — otherwise they stay until counted
/// (`deleteActivePods`). Returns `(deleted, deleted ready)`, assuming the deletes succeed.
pub(super) fn delete_pods(
    ctx: &mut Ctx<'_>,
    expectations: &mut Expectations,
    key: &ObjectKey,
    job_ref: &ObjectRef,
    strip: bool,
    pods: Option<Vec<&Pod>>,
) -> (i32, i32) {
    let victims: Vec<&Pod> = pods.unwrap_or_else(|| ctx.active_pods.clone());
    if victims.is_empty() {
        return (0, 0);
    }
    let keys: Vec<ObjectKey> = victims
        .iter()
        .map(|p| ObjectKey::from_meta(&p.metadata))
        .collect();
    let ready = victims.iter().filter(|p| is_pod_ready(p)).count() as i32;
    if strip {
        let carrying: Vec<&Pod> = victims
            .iter()
            .copied()
            .filter(|p| has_tracking_finalizer(p))
            .collect();
        if !carrying.is_empty() {
            ctx.actions.push(remove_finalizers(job_ref, &carrying));
        }
    }
    expectations.expect_deletions(key, &keys, ctx.now);
    ctx.notes.push(format!("delete {} pods", keys.len()));
    ctx.actions.push(Action::DeletePods {
        controller: job_ref.clone(),
        pods: keys.clone(),
    });
    (keys.len() as i32, ready)
}

/// `manageJob`: delete surplus pods or create missing ones. Returns the new active count.
pub(super) fn manage_job(
    ctx: &mut Ctx<'_>,
    expectations: &mut Expectations,
    key: &ObjectKey,
    job_ref: &ObjectRef,
    mut active: i32,
) -> i32 {
    let spec = spec_of(&ctx.job).clone();
    let parallelism = spec.parallelism.unwrap_or(1);
    if suspended(&ctx.job) {
        let (removed, removed_ready) = delete_pods(ctx, expectations, key, job_ref, true, None);
        ctx.terminating += removed;
        ctx.ready -= removed_ready;
        if removed > 0 {
            ctx.notes.push("suspended".into());
        }
        return active - removed;
    }
    let want_active = match spec.completions {
        None if ctx.succeeded > 0 => active,
        None => parallelism,
        Some(c) => (c - ctx.succeeded).clamp(0, parallelism),
    };
    let rm_at_least = (active - want_active).max(0) as usize;
    let indexed = is_indexed(&ctx.job);
    let completions = completions(&ctx.job);
    let (mut rm, mut left) = if indexed {
        duplicated_index_pods(&ctx.active_pods, completions, rank_for_removal)
    } else {
        (Vec::new(), ctx.active_pods.clone())
    };
    if rm.len() < rm_at_least {
        rank_for_removal(&mut left);
        let more = rm_at_least - rm.len();
        rm.extend(left.into_iter().take(more));
    }
    rm.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !rm.is_empty() {
        let (removed, removed_ready) = delete_pods(ctx, expectations, key, job_ref, true, Some(rm));
        ctx.terminating += removed;
        ctx.ready -= removed_ready;
        return active - removed;
    }
    let terminating = if only_replace_failed_pods(&ctx.job) {
        ctx.terminating
    } else {
        0
    };
    let diff = want_active - terminating - active;
    if diff <= 0 {
        return active;
    }
    let mut diff = (diff as usize).min(MAX_POD_CREATE_DELETE_PER_SYNC);
    if spec.backoff_limit_per_index.is_none() {
        let wait = ctx.new_backoff.remaining(ctx.now);
        if !wait.is_zero() {
            ctx.notes.push(format!(
                "need {diff} more pods: back-off {}s after failures",
                wait.as_secs()
            ));
            ctx.actions.push(Action::RequeueAfter(wait));
            return active;
        }
    }
    let template = pod_template(&ctx.job, indexed);
    let pods: Vec<Pod> = if indexed {
        let mut non_pending = ctx.succeeded_indexes.clone();
        non_pending.extend(
            ctx.active_pods
                .iter()
                .filter_map(|p| valid_index(p, completions)),
        );
        if only_replace_failed_pods(&ctx.job) {
            non_pending.extend(
                ctx.pods
                    .iter()
                    .filter(|p| is_pod_terminating(p))
                    .filter_map(|p| valid_index(p, completions)),
            );
        }
        if let Some(failed) = &ctx.failed_indexes {
            non_pending.extend(failed.iter().copied());
        }
        let mut to_add = first_pending_indexes(&non_pending, diff, completions);
        if spec.backoff_limit_per_index.is_some() {
            let (now_ready, min_wait): (Vec<i32>, Option<Duration>) = {
                let mut ready = Vec::new();
                let mut min_wait: Option<Duration> = None;
                for ix in &to_add {
                    let wait = ctx.delayed_deletion.get(ix).map_or(Duration::ZERO, |p| {
                        remaining_for_failures(
                            index_absolute_failure_count(p) as u32 + 1,
                            Some(finished_time(p)),
                            ctx.now,
                        )
                    });
                    if wait.is_zero() {
                        ready.push(*ix);
                    } else {
                        min_wait = Some(min_wait.map_or(wait, |m| m.min(wait)));
                    }
                }
                (ready, min_wait)
            };
            if now_ready.is_empty()
                && let Some(wait) = min_wait
            {
                ctx.notes.push(format!(
                    "indexes wait {}s of per-index back-off",
                    wait.as_secs()
                ));
                ctx.actions.push(Action::RequeueAfter(wait));
                return active;
            }
            to_add = now_ready;
        }
        diff = to_add.len();
        to_add
            .iter()
            .map(|ix| {
                new_pod(
                    &ctx.job,
                    &template,
                    Some(*ix),
                    ctx.delayed_deletion.get(ix).copied(),
                )
            })
            .collect()
    } else {
        vec![new_pod(&ctx.job, &template, None, None)]
    };
    if diff == 0 {
        return active;
    }
    expectations.expect_creations(key, diff, ctx.now);
    let batches = slow_start_batches(diff);
    ctx.notes.push(format!(
        "want {want_active} active, have {active} → create {diff} in batches {}",
        batches
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if indexed {
        ctx.actions.push(Action::CreateDistinctPods {
            controller: job_ref.clone(),
            pods,
            batches,
        });
    } else if let Some(pod) = pods.into_iter().next() {
        ctx.actions.push(Action::CreatePods {
            controller: job_ref.clone(),
            pod: Box::new(pod),
            batches,
        });
    }
    active += diff as i32;
    active
}

/// The `Suspended` condition and its events when suspension changes.
pub(super) fn update_suspend_condition(ctx: &mut Ctx<'_>, job_ref: &ObjectRef) -> bool {
    let now = ctx.now;
    let is_suspended = suspended(&ctx.job);
    let status = ctx.job.status.get_or_insert_with(JobStatus::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let (value, reason, message) = if is_suspended {
        ("True", "JobSuspended", "Job suspended")
    } else {
        ("False", "JobResumed", "Job resumed")
    };
    if !ensure_condition(conditions, "Suspended", value, reason, message, now) {
        return false;
    }
    if is_suspended {
        ctx.notes.push("Job suspended".into());
        ctx.actions.push(event(
            job_ref.clone(),
            EventType::Normal,
            "Suspended",
            "Job suspended",
        ));
    } else {
        ctx.notes.push("Job resumed: startTime reset".into());
        ctx.actions.push(event(
            job_ref.clone(),
            EventType::Normal,
            "Resumed",
            "Job resumed",
        ));
        status.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
    }
    true
}
