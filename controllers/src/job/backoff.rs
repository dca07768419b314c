//! The delay before a Job replaces failed pods: 10 s after the first failure since the last
//! success, doubling with each further failure, at most 10 minutes.
//!
//! Mirrors `pkg/controller/job/backoff_utils.go` (`backoffRecord`, `newBackoffRecord`,
//! `getRemainingTimeForFailuresCount`, `getFinishedTime`) and the per-index variant
//! (`getRemainingTimePerIndex`) used with `backoffLimitPerIndex`.
//!
//! ```text
//!   failures after the last success:   1     2     3     4  ...  7+
//!   delay before the next pod:        10s   20s   40s   80s ... 10m
//!   counted from the finish time of the last failed pod
//! ```

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

/// `DefaultJobPodFailureBackOff`.
pub const DEFAULT_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// `MaxJobPodFailureBackOff`.
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// `backoffRecord`: what the controller remembers of a Job's recent failures (in memory, as
/// Kubernetes keeps it in `podBackoffStore`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Failed pods finished after the last succeeded one.
    pub failures_after_last_success: u32,
    /// When the last of them finished.
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// `newBackoffRecord`: this record updated with newly finished pods.
    pub fn next(&self, new_succeeded: &[&Pod], new_failed: &[&Pod]) -> BackoffRecord {
        let mut failed: Vec<Timestamp> = new_failed.iter().map(|p| finished_time(p)).collect();
        failed.sort();
        let last_success = new_succeeded.iter().map(|p| finished_time(p)).max();
        match last_success {
            None => match failed.last() {
                None => self.clone(),
                Some(last) => BackoffRecord {
                    failures_after_last_success: self.failures_after_last_success
                        + failed.len() as u32,
                    last_failure_time: Some(*last),
                },
            },
            Some(success) => {
                let after: Vec<&Timestamp> = failed.iter().filter(|t| **t > success).collect();
                BackoffRecord {
                    failures_after_last_success: after.len() as u32,
                    last_failure_time: after.last().map(|t| **t),
                }
            }
        }
    }

    /// `getRemainingTime`: how long pod creation must still wait at `now`.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        remaining_for_failures(
            self.failures_after_last_success,
            self.last_failure_time,
            now,
        )
    }
}

/// `getRemainingTimeForFailuresCount`: 10 s × 2^(failures − 1), capped at 10 min, minus the
/// time since the last failure.
pub fn remaining_for_failures(failures: u32, last: Option<Timestamp>, now: Timestamp) -> Duration {
    let Some(last) = last.filter(|_| failures > 0) else {
        return Duration::ZERO;
    };
    let mut delay = DEFAULT_POD_FAILURE_BACKOFF;
    for _ in 1..failures {
        delay *= 2;
        if delay >= MAX_POD_FAILURE_BACKOFF {
            delay = MAX_POD_FAILURE_BACKOFF;
            break;
        }
    }
    let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or(Duration::ZERO);
    delay.saturating_sub(elapsed)
}

/// `getFinishedTime`: the latest `finishedAt` of the pod's containers when all have
/// terminated, else when its Ready condition turned False (terminal pods), else its
/// `deletionTimestamp`, else its creation.
pub fn finished_time(pod: &Pod) -> Timestamp {
    let status = pod.status.as_ref();
    let from_containers = status.and_then(|s| {
        let statuses = s.container_statuses.as_ref().filter(|c| !c.is_empty())?;
        statuses
            .iter()
            .map(|c| {
                c.state
                    .as_ref()
                    .and_then(|st| st.terminated.as_ref())
                    .and_then(|t| t.finished_at.as_ref())
                    .map(|t| t.0)
            })
            .collect::<Option<Vec<Timestamp>>>()?
            .into_iter()
            .max()
    });
    let from_ready = || {
        let s = status?;
        if !matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")) {
            return None;
        }
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready" && c.status == "False")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    };
    from_containers
        .or_else(from_ready)
        .or_else(|| pod.metadata.deletion_timestamp.as_ref().map(|t| t.0))
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_finished_at(secs: i64) -> Pod {
        let at = Timestamp::from_second(secs).expect("time").to_string();
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "finishedAt": at}}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn delay_doubles_per_failure_and_is_capped() {
        let t0 = Timestamp::from_second(1_000).expect("time");
        let at = |s: i64| Timestamp::from_second(1_000 + s).expect("time");
        assert_eq!(remaining_for_failures(0, Some(t0), t0), Duration::ZERO);
        assert_eq!(
            remaining_for_failures(1, Some(t0), at(4)),
            Duration::from_secs(6)
        );
        assert_eq!(
            remaining_for_failures(3, Some(t0), t0),
            Duration::from_secs(40)
        );
        assert_eq!(
            remaining_for_failures(20, Some(t0), t0),
            MAX_POD_FAILURE_BACKOFF
        );
        assert_eq!(remaining_for_failures(2, Some(t0), at(25)), Duration::ZERO);
    }

    #[test]
    fn a_success_resets_the_count_to_the_failures_after_it() {
        let record = BackoffRecord::default();
        let (f1, f2) = (pod_finished_at(10), pod_finished_at(30));
        let next = record.next(&[], &[&f1, &f2]);
        assert_eq!(next.failures_after_last_success, 2);
        assert_eq!(
            next.last_failure_time,
            Some(Timestamp::from_second(30).expect("time"))
        );
        let mut success = pod_finished_at(20);
        if let Some(s) = success.status.as_mut() {
            s.phase = Some("Succeeded".into());
        }
        let after = next.next(&[&success], &[&f1, &f2]);
        assert_eq!(after.failures_after_last_success, 1);
        assert_eq!(next.next(&[], &[]), next);
    }
}
