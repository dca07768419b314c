//! `spec.podFailurePolicy`: what a failed pod means for its Job.
//!
//! Mirrors `pkg/controller/job/pod_failure_policy.go` (`matchPodFailurePolicy`,
//! `matchOnExitCodes`, `matchOnPodConditions`). Rules are tried in order; the first that
//! matches decides:
//!
//! | action | the failure counts toward `backoffLimit` | effect |
//! | --- | --- | --- |
//! | `FailJob` | yes | the Job fails (`PodFailurePolicy`, with the message below) |
//! | `FailIndex` | yes | the pod's index fails (with `backoffLimitPerIndex`) |
//! | `Ignore` | no | the pod is replaced without counting |
//! | `Count` | yes | the default |
//!
//! An `onExitCodes` rule looks at containers that terminated with a non-zero code (regular
//! containers first, then init containers); an `onPodConditions` rule at the pod's conditions
//! (`DisruptionTarget` for evictions and preemptions).

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

/// `PodFailurePolicyAction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    /// `FailJob`.
    FailJob,
    /// `FailIndex`.
    FailIndex,
    /// `Ignore`.
    Ignore,
    /// `Count`.
    Count,
}

/// What the policy says of one failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureMatch {
    /// For `FailJob`: the message of the Job's `FailureTarget`/`Failed` conditions.
    pub fail_job_message: Option<String>,
    /// Whether the failure counts toward `backoffLimit`.
    pub count_failed: bool,
    /// The matching rule's action, if a rule matched.
    pub action: Option<FailureAction>,
}

/// `matchPodFailurePolicy`: the first matching rule of `policy` for `pod`.
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> FailureMatch {
    let no_match = FailureMatch {
        fail_job_message: None,
        count_failed: true,
        action: None,
    };
    let Some(policy) = policy else {
        return no_match;
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let action = match rule.action.as_str() {
            "FailJob" => FailureAction::FailJob,
            "FailIndex" => FailureAction::FailIndex,
            "Ignore" => FailureAction::Ignore,
            "Count" => FailureAction::Count,
            _ => continue,
        };
        let message = if let Some(requirement) = &rule.on_exit_codes {
            let Some(status) = match_on_exit_codes(pod, requirement) else {
                continue;
            };
            let code = status
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map_or(0, |t| t.exit_code);
            format!(
                "Container {} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                status.name, rule.action
            )
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let Some(condition) = match_on_pod_conditions(pod, patterns) else {
                continue;
            };
            format!(
                "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                condition.type_, rule.action
            )
        } else {
            continue;
        };
        return FailureMatch {
            fail_job_message: (action == FailureAction::FailJob).then_some(message),
            count_failed: action != FailureAction::Ignore,
            action: Some(action),
        };
    }
    no_match
}

/// `matchOnExitCodes`: a container (regular first, then init) that terminated with a
/// non-zero code matching the requirement.
fn match_on_exit_codes<'a>(
    pod: &'a Pod,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    let matching = |list: &'a Option<Vec<ContainerStatus>>| {
        list.iter().flatten().find(|c| {
            let Some(terminated) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
                return false;
            };
            let named = requirement
                .container_name
                .as_ref()
                .is_none_or(|n| *n == c.name);
            let listed = requirement.values.contains(&terminated.exit_code);
            let operator_matches = match requirement.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            named && terminated.exit_code != 0 && operator_matches
        })
    };
    matching(&status.container_statuses).or_else(|| matching(&status.init_container_statuses))
}

/// `matchOnPodConditions`: a pod condition with a pattern's type and status.
fn match_on_pod_conditions<'a>(
    pod: &'a Pod,
    patterns: &[k8s_openapi::api::batch::v1::PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a PodCondition> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    patterns.iter().find_map(|pattern| {
        let status = pattern.status.as_str();
        conditions
            .iter()
            .find(|c| c.type_ == pattern.type_ && c.status == status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).expect("policy")
    }

    fn failed_pod(exit_codes: &[(&str, i32)], conditions: serde_json::Value) -> Pod {
        let statuses: Vec<_> = exit_codes
            .iter()
            .map(|(name, code)| json!({"name": name, "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code}}}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "job-abc", "namespace": "ns"},
            "status": {"phase": "Failed", "containerStatuses": statuses, "conditions": conditions}
        }))
        .expect("pod")
    }

    #[test]
    fn fail_job_on_an_exit_code_names_the_container_and_rule() {
        let p = policy(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
        ]));
        let m = match_pod_failure_policy(Some(&p), &failed_pod(&[("main", 42)], json!([])));
        assert_eq!(m.action, Some(FailureAction::FailJob));
        assert!(m.count_failed);
        assert_eq!(
            m.fail_job_message.as_deref(),
            Some(
                "Container main for pod ns/job-abc failed with exit code 42 matching FailJob rule at index 1"
            )
        );
        let ignored = match_pod_failure_policy(Some(&p), &failed_pod(&[("main", 1)], json!([])));
        assert_eq!(ignored.action, Some(FailureAction::Ignore));
        assert!(!ignored.count_failed);
    }

    #[test]
    fn not_in_never_matches_exit_code_zero_and_conditions_match_by_type_and_status() {
        let p = policy(json!([
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [5]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        ]));
        let zero = match_pod_failure_policy(Some(&p), &failed_pod(&[("main", 0)], json!([])));
        assert_eq!(zero.action, None);
        assert!(zero.count_failed);
        let disrupted = failed_pod(
            &[("main", 0)],
            json!([{"type": "DisruptionTarget", "status": "True"}]),
        );
        let m = match_pod_failure_policy(Some(&p), &disrupted);
        assert_eq!(m.action, Some(FailureAction::Ignore));
        assert!(!m.count_failed);
        assert_eq!(
            match_pod_failure_policy(None, &disrupted),
            FailureMatch {
                fail_job_message: None,
                count_failed: true,
                action: None
            }
        );
    }
}
