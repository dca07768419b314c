//! The TTL-after-finished controller: delete a finished Job `ttlSecondsAfterFinished` after it
//! finished.
//!
//! Mirrors `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go` (`processTTL`,
//! `processJob`, `needsCleanup`, `timeLeft`, `jobFinishTime`). The async shell is in
//! [`controller`].
//!
//! ```text
//!   Job finished (Complete or Failed True) with ttlSecondsAfterFinished = T
//!     finish time = that condition's lastTransitionTime
//!     now < finish + T ─▶ look again at finish + T
//!     otherwise        ─▶ GET the Job live, check again ─▶ DELETE (Foreground, UID precondition)
//! ```

pub mod controller;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;

/// What to do with one Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlDecision {
    /// Not finished, or no TTL: nothing.
    Skip,
    /// Finished, its time not up yet: look again after this long.
    Wait(Duration),
    /// Its time is up: delete it (after re-checking the live Job).
    Delete,
}

/// `jobFinishTime`: when the Job's `Complete` or `Failed` condition turned True.
pub fn finish_time(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// `processTTL` / `timeLeft` for one Job at `now`.
pub fn decide(job: &Job, now: Timestamp) -> TtlDecision {
    if job.metadata.deletion_timestamp.is_some() {
        return TtlDecision::Skip;
    }
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return TtlDecision::Skip;
    };
    let Some(finished) = finish_time(job) else {
        return TtlDecision::Skip;
    };
    let expire_at = finished.saturating_add(SignedDuration::from_secs(i64::from(ttl)));
    let expire_at = expire_at.unwrap_or(Timestamp::MAX);
    if now >= expire_at {
        TtlDecision::Delete
    } else {
        TtlDecision::Wait(Duration::try_from(expire_at.duration_since(now)).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i32>, finished_at: Option<&str>) -> Job {
        let conditions = finished_at.map_or(
            json!([]),
            |t| json!([{"type": "Complete", "status": "True", "lastTransitionTime": t}]),
        );
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "namespace": "default"},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
            "status": {"conditions": conditions}
        }))
        .expect("job")
    }

    #[test]
    fn a_finished_job_waits_out_its_ttl_then_goes() {
        let now: Timestamp = "2025-01-01T00:01:00Z".parse().expect("time");
        assert_eq!(
            decide(&job(Some(100), Some("2025-01-01T00:00:00Z")), now),
            TtlDecision::Wait(Duration::from_secs(40))
        );
        assert_eq!(
            decide(&job(Some(60), Some("2025-01-01T00:00:00Z")), now),
            TtlDecision::Delete
        );
        assert_eq!(
            decide(&job(None, Some("2025-01-01T00:00:00Z")), now),
            TtlDecision::Skip
        );
        assert_eq!(decide(&job(Some(0), None), now), TtlDecision::Skip);
    }
}
