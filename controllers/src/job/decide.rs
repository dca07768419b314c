//! The part of `syncJob` that decides whether a Job ends now and how: the pod failure
//! policy's `FailJob`, `backoffLimit` (with `OnFailure` restarts counted), the active
//! deadline, failed indexes and the success policy (`pkg/controller/job/job_controller.go`,
//! `indexed_job_utils.go` `calculateFailedIndexes`, `getPodsWithDelayedDeletionPerIndex`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::backoff::finished_time;
use super::conditions::{find_condition, match_success_policy, new_condition};
use super::failure_policy::{FailureAction, match_pod_failure_policy};
use super::indexes::{parse_indexes, valid_index};
use super::pods::{
    has_tracking_finalizer, index_absolute_failure_count, index_failure_count, is_pod_failed,
};
use super::{Ctx, completions, is_indexed, spec_of, suspended, uid_of};
use crate::action::Action;
use crate::pod_readiness::pod_phase;

/// The part of `syncJob` that decides whether the Job ends now, and how.
pub(super) fn decide_end(ctx: &mut Ctx<'_>, failed: i32) {
    let now = ctx.now;
    let spec = spec_of(&ctx.job).clone();
    ctx.finished_condition = find_condition(&ctx.job, "SuccessCriteriaMet")
        .filter(|c| c.status == "True")
        .cloned();
    if ctx.finished_condition.is_none() {
        if let Some(target) =
            find_condition(&ctx.job, "FailureTarget").filter(|c| c.status == "True")
        {
            ctx.finished_condition = Some(target.clone());
        } else if let Some(message) = ctx.pods.iter().find_map(|p| {
            is_pod_failed(p, &ctx.job)
                .then(|| {
                    match_pod_failure_policy(spec.pod_failure_policy.as_ref(), p).fail_job_message
                })
                .flatten()
        }) {
            ctx.notes.push(format!("pod failure policy: {message}"));
            ctx.finished_condition = Some(new_condition(
                "FailureTarget",
                "PodFailurePolicy",
                &message,
                now,
            ));
        }
    }
    if ctx.finished_condition.is_none() {
        let backoff_limit = spec.backoff_limit.unwrap_or(6);
        let start = ctx
            .job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0);
        if failed > backoff_limit || past_backoff_limit_on_failure(&ctx.job, &ctx.pods) {
            ctx.notes
                .push(format!("backoffLimit {backoff_limit} reached"));
            ctx.finished_condition = Some(new_condition(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            ));
        } else if let (Some(deadline), Some(start)) = (spec.active_deadline_seconds, start)
            && !suspended(&ctx.job)
        {
            let allowed = jiff::SignedDuration::from_secs(deadline);
            let elapsed = now.duration_since(start);
            if elapsed >= allowed {
                ctx.notes
                    .push(format!("activeDeadlineSeconds {deadline} passed"));
                ctx.finished_condition = Some(new_condition(
                    "FailureTarget",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                ));
            } else if let Ok(left) = Duration::try_from(allowed - elapsed) {
                ctx.actions.push(Action::RequeueAfter(left));
            }
        }
    }
    if is_indexed(&ctx.job) {
        let completions = completions(&ctx.job);
        let status = ctx.job.status.clone().unwrap_or_default();
        ctx.prev_succeeded_indexes = parse_indexes(
            status.completed_indexes.as_deref().unwrap_or(""),
            completions,
        );
        let mut succeeded = ctx.prev_succeeded_indexes.clone();
        for p in &ctx.pods {
            if pod_phase(p) == "Succeeded"
                && has_tracking_finalizer(p)
                && let Some(ix) = valid_index(p, completions)
            {
                succeeded.insert(ix);
            }
        }
        ctx.succeeded = succeeded.len() as i32;
        ctx.succeeded_indexes = succeeded;
        if let Some(per_index) = spec.backoff_limit_per_index {
            let mut failed_indexes =
                parse_indexes(status.failed_indexes.as_deref().unwrap_or(""), completions);
            for p in &ctx.pods {
                if has_tracking_finalizer(p)
                    && let Some(ix) = valid_index(p, completions)
                    && is_index_failed(&ctx.job, p, per_index)
                {
                    failed_indexes.insert(ix);
                }
            }
            let failed_total = failed_indexes.len() as i32;
            if ctx.finished_condition.is_none() {
                if spec.max_failed_indexes.is_some_and(|m| failed_total > m) {
                    ctx.finished_condition = Some(new_condition(
                        "FailureTarget",
                        "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes",
                        now,
                    ));
                } else if failed_total > 0 && failed_total + ctx.succeeded >= completions {
                    ctx.finished_condition = Some(new_condition(
                        "FailureTarget",
                        "FailedIndexes",
                        "Job has failed indexes",
                        now,
                    ));
                }
            }
            ctx.failed_indexes = Some(failed_indexes);
            ctx.delayed_deletion = pods_with_delayed_deletion(ctx);
        }
        if ctx.finished_condition.is_none()
            && let Some(message) = match_success_policy(
                spec.success_policy.as_ref(),
                completions,
                &ctx.succeeded_indexes,
            )
        {
            ctx.notes.push(format!("success policy: {message}"));
            ctx.finished_condition = Some(new_condition(
                "SuccessCriteriaMet",
                "SuccessPolicy",
                &message,
                now,
            ));
        }
    }
}

/// `isIndexFailed`: the pod failed for the last time its index may (`backoffLimitPerIndex`),
/// or its failure matched a `FailIndex` rule.
fn is_index_failed(job: &Job, pod: &Pod, per_index: i32) -> bool {
    if !is_pod_failed(pod, job) {
        return false;
    }
    let m = match_pod_failure_policy(spec_of(job).pod_failure_policy.as_ref(), pod);
    if m.action == Some(FailureAction::FailIndex) {
        return true;
    }
    m.count_failed && index_failure_count(pod) >= per_index
}

/// `getPodsWithDelayedDeletionPerIndex`: per still-open index, its latest failed pod, whose
/// finalizer stays until a replacement carries its failure count on.
fn pods_with_delayed_deletion<'a>(ctx: &Ctx<'a>) -> BTreeMap<i32, &'a Pod> {
    let completions = completions(&ctx.job);
    let mut out: BTreeMap<i32, &'a Pod> = BTreeMap::new();
    for p in ctx.pods.iter().copied() {
        if !has_tracking_finalizer(p)
            || ctx.expected_rm.contains(uid_of(p))
            || !is_pod_failed(p, &ctx.job)
        {
            continue;
        }
        let Some(ix) = valid_index(p, completions) else {
            continue;
        };
        if ctx.succeeded_indexes.contains(&ix)
            || ctx.failed_indexes.as_ref().is_some_and(|f| f.contains(&ix))
        {
            continue;
        }
        match out.get(&ix) {
            Some(last)
                if !(index_absolute_failure_count(last) <= index_absolute_failure_count(p)
                    && finished_time(p) >= finished_time(last)) => {}
            _ => {
                out.insert(ix, p);
            }
        }
    }
    out
}

/// `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure`, the container restarts of
/// running and pending pods count as failures.
fn past_backoff_limit_on_failure(job: &Job, pods: &[&Pod]) -> bool {
    let spec = spec_of(job);
    if spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        != Some("OnFailure")
    {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(pod_phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();
    let limit = spec.backoff_limit.unwrap_or(6);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}
