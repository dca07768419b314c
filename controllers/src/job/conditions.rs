//! A Job's conditions and its success policy.
//!
//! Mirrors `pkg/controller/job/job_controller.go` (`newCondition`, `ensureJobConditionStatus`,
//! `findConditionByType`), `pkg/controller/job/util/utils.go` (`IsJobFinished`) and
//! `pkg/controller/job/success_policy.go` (`matchSuccessPolicy`).
//!
//! | condition | reason | message |
//! | --- | --- | --- |
//! | `SuccessCriteriaMet`, then `Complete` | `CompletionsReached` | Reached expected number of succeeded pods |
//! | | `SuccessPolicy` | Matched rules at index N |
//! | `FailureTarget`, then `Failed` | `BackoffLimitExceeded` | Job has reached the specified backoff limit |
//! | | `DeadlineExceeded` | Job was active longer than specified deadline |
//! | | `PodFailurePolicy` | Container C for pod NS/P failed with exit code N matching FailJob rule at index I |
//! | | `FailedIndexes` | Job has failed indexes |
//! | | `MaxFailedIndexesExceeded` | Job has exceeded the specified maximal number of failed indexes |
//! | `Suspended` True / False | `JobSuspended` / `JobResumed` | Job suspended / Job resumed |

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, SuccessPolicy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::indexes::{Indexes, parse_indexes};

/// `newCondition`: status True with both times `now`.
pub fn new_condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    }
}

/// `findConditionByType`.
pub fn find_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// `IsJobFinished`: a `Complete` or `Failed` condition that is True.
pub fn is_finished(job: &Job) -> bool {
    ["Complete", "Failed"]
        .iter()
        .any(|t| find_condition(job, t).is_some_and(|c| c.status == "True"))
}

/// `ensureJobConditionStatus`: set the condition of `type_`; a missing one is added only when
/// not False. Returns whether the list changed.
pub fn ensure_condition(
    list: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let mut fresh = new_condition(type_, reason, message, now);
    fresh.status = status.to_owned();
    if let Some(existing) = list.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != status
            || existing.reason.as_deref() != Some(reason)
            || existing.message.as_deref() != Some(message)
        {
            *existing = fresh;
            return true;
        }
        return false;
    }
    if status != "False" {
        list.push(fresh);
        return true;
    }
    false
}

/// `matchSuccessPolicy`: `Matched rules at index N` for the first rule the succeeded indexes
/// satisfy.
pub fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded: &Indexes,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(text), count) => {
                let required = parse_indexes(text, completions);
                if required.is_empty() {
                    continue;
                }
                let done = required.intersection(succeeded).count();
                match count {
                    Some(c) => done as i64 >= i64::from(c),
                    None => done == required.len(),
                }
            }
            (None, Some(c)) => succeeded.len() as i64 >= i64::from(c),
            (None, None) => false,
        };
        if matched {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn success_policy_rules_match_as_kubernetes_counts_them() {
        let policy: SuccessPolicy = serde_json::from_value(json!({"rules": [
            {"succeededIndexes": "0,2-4"},
            {"succeededIndexes": "5-9", "succeededCount": 2},
            {"succeededCount": 8}
        ]}))
        .expect("policy");
        let set = |v: &[i32]| v.iter().copied().collect::<Indexes>();
        assert_eq!(
            match_success_policy(Some(&policy), 10, &set(&[0, 2, 3])),
            None
        );
        assert_eq!(
            match_success_policy(Some(&policy), 10, &set(&[0, 2, 3, 4])).as_deref(),
            Some("Matched rules at index 0")
        );
        assert_eq!(
            match_success_policy(Some(&policy), 10, &set(&[6, 9])).as_deref(),
            Some("Matched rules at index 1")
        );
    }

    #[test]
    fn a_false_condition_is_never_added_but_may_replace() {
        let now = Timestamp::UNIX_EPOCH;
        let mut list = Vec::new();
        assert!(!ensure_condition(
            &mut list,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert!(ensure_condition(
            &mut list,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(!ensure_condition(
            &mut list,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(ensure_condition(
            &mut list,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].status, "False");
    }
}
