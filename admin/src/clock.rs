//! The cluster clock: a virtual time every component reads instead of the machine's, kept
//! in the ConfigMap `kube-system/miniplane-clock` and moved through `/miniplane/v1/clock`.
//!
//! No Kubernetes counterpart: Kubernetes components read the machine's clock (client-go
//! threads `k8s.io/utils/clock` through its workqueues, backoffs and leader election only so
//! that tests can swap in a fake one). miniplane swaps in one clock for the whole cluster, so
//! a learner advances time instead of waiting for a grace period.
//!
//! ```text
//!   ConfigMap kube-system/miniplane-clock
//!     data: {time: 2026-01-01T00:05:00Z, anchor: 2026-12-07T08:00:00Z, speed: "0"}
//!   cluster now = time + (machine now - anchor) × speed        (speed 0: paused)
//!
//!   POST /miniplane/v1/clock {"advance": {"by": "10m"}}  runs at 100× until 10 minutes
//!        later (6 s), then at the pace it had: every timer fires in order on the way
//!   POST /miniplane/v1/clock {"run": {"speed": 60}}     a minute of cluster time a second
//!   POST /miniplane/v1/clock "pause"                    speed 0
//! ```
//!
//! A cluster without the ConfigMap runs on the machine's clock. The clock never moves back:
//! the admin API refuses a negative advance, and every reader ignores a state that would put
//! its "now" before the last one it saw.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// Namespace of the ConfigMap holding the cluster clock.
pub const CLOCK_NAMESPACE: &str = "kube-system";

/// Name of the ConfigMap holding the cluster clock; a cluster without it runs on real time.
pub const CLOCK_CONFIGMAP: &str = "miniplane-clock";

/// Cluster seconds per machine second of an `advance` that names no speed: 5 minutes of
/// grace periods pass in 3 seconds, while a heartbeat every 10 s of cluster time still comes
/// every 100 ms, well inside the 40 s grace a node has.
pub const DEFAULT_ADVANCE_SPEED: f64 = 100.0;

/// The state of a virtual cluster clock, as the ConfigMap stores it.
///
/// An advance does not jump: the clock runs fast (`speed`) until `until`, then goes on at
/// `then_speed`, so every component sees the time pass in order (each heartbeat before the
/// grace period that waits for it), only sooner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockState {
    /// The cluster's time at `anchor`.
    pub time: Timestamp,
    /// The machine's time at which the cluster's time was `time`.
    pub anchor: Timestamp,
    /// Cluster seconds per machine second from `anchor` on; 0 when paused.
    pub speed: f64,
    /// Where an advance in progress stops running at `speed`.
    pub until: Option<Timestamp>,
    /// The pace after `until` (the pace the advance interrupted; 0: paused).
    pub then_speed: f64,
}

/// Why a clock state or a change of it was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    /// The change would move the clock back.
    #[error("the cluster clock cannot move backwards (advance {0})")]
    Backwards(String),
    /// A speed that is negative, zero where time must run, or not a number.
    #[error("speed: Invalid value: {0}: must be a positive number (use pause to stop the clock)")]
    Speed(f64),
    /// A data key missing or unreadable.
    #[error("{CLOCK_NAMESPACE}/{CLOCK_CONFIGMAP}: {0}")]
    Data(String),
}

/// A change of the cluster clock, the body of `POST /miniplane/v1/clock`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClockRequest {
    /// Move the cluster's time forward by a Go duration (`10m`, `1h30m`), running at
    /// `speed` ([`DEFAULT_ADVANCE_SPEED`] if unset) until there, then at the pace it had.
    Advance {
        /// How far (a Go duration; negative is refused).
        by: String,
        /// Cluster seconds per machine second while advancing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        speed: Option<f64>,
    },
    /// Let the cluster's time run at `speed` cluster seconds per machine second.
    Run {
        /// Cluster seconds per machine second (> 0).
        speed: f64,
    },
    /// Stop the cluster's time (speed 0).
    Pause,
}

/// What `GET /miniplane/v1/clock` answers: the clock's kind and the cluster's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClockStatus {
    /// `Virtual` or `Real`.
    pub mode: ClockMode,
    /// The cluster's time when the answer was made (RFC 3339).
    pub now: String,
    /// Cluster seconds per machine second now (1 for a real clock, 0 when paused).
    pub speed: f64,
    /// Where an advance in progress stops (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advancing_to: Option<String>,
}

/// Whose time the cluster runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClockMode {
    /// The machine's clock (no `miniplane-clock` ConfigMap).
    Real,
    /// The ConfigMap's clock, moved by the user.
    Virtual,
}

/// `from + elapsed × speed`, or `from` when nothing has elapsed or the clock stands.
fn run(from: Timestamp, elapsed: SignedDuration, speed: f64) -> Timestamp {
    if speed <= 0.0 || elapsed <= SignedDuration::ZERO {
        return from;
    }
    SignedDuration::try_from_secs_f64(elapsed.as_secs_f64() * speed)
        .ok()
        .and_then(|d| from.checked_add(d).ok())
        .unwrap_or(from)
}

/// The machine time `span` of cluster time takes at `speed`; `None` if it stands.
fn machine_time(span: SignedDuration, speed: f64) -> Option<Duration> {
    (speed > 0.0).then(|| Duration::from_secs_f64(span.as_secs_f64().max(0.0) / speed))
}

impl ClockState {
    /// A virtual clock that reads the machine's time `real_now` now and runs at `speed`.
    pub fn starting(real_now: Timestamp, speed: f64) -> Self {
        ClockState {
            time: real_now,
            anchor: real_now,
            speed,
            until: None,
            then_speed: speed,
        }
    }

    /// The machine's time at which an advance reaches `until`.
    fn reached(&self, until: Timestamp) -> Timestamp {
        machine_time(until.duration_since(self.time), self.speed)
            .and_then(|d| SignedDuration::try_from(d).ok())
            .and_then(|d| self.anchor.checked_add(d).ok())
            .unwrap_or(self.anchor)
    }

    /// The cluster's time when the machine's time is `real_now`; never before `time` (a
    /// machine clock stepped back reads as a paused cluster clock).
    pub fn now(&self, real_now: Timestamp) -> Timestamp {
        let fast = run(self.time, real_now.duration_since(self.anchor), self.speed);
        match self.until {
            Some(until) if fast >= until => {
                let reached = self.reached(until);
                run(until, real_now.duration_since(reached), self.then_speed)
            }
            _ => fast,
        }
    }

    /// The pace at the machine's time `real_now`.
    pub fn pace(&self, real_now: Timestamp) -> f64 {
        match self.until {
            Some(until) if self.now(real_now) >= until => self.then_speed,
            _ => self.speed,
        }
    }

    /// How long after the machine's time `real_now` the cluster's time reaches `target`;
    /// `None` if it never does without a change (paused short of it).
    pub fn machine_time_until(&self, real_now: Timestamp, target: Timestamp) -> Option<Duration> {
        let now = self.now(real_now);
        if now >= target {
            return Some(Duration::ZERO);
        }
        match self.until {
            Some(until) if now < until => {
                if target <= until {
                    machine_time(target.duration_since(now), self.speed)
                } else {
                    let first = machine_time(until.duration_since(now), self.speed)?;
                    let rest = machine_time(target.duration_since(until), self.then_speed)?;
                    Some(first + rest)
                }
            }
            _ => machine_time(target.duration_since(now), self.pace(real_now)),
        }
    }

    /// The state after `request`, made at the machine's time `real_now`. `advance` is the
    /// request's duration already parsed (negative refused here).
    pub fn apply(
        &self,
        request: &ClockRequest,
        advance: Option<SignedDuration>,
        real_now: Timestamp,
    ) -> Result<ClockState, ClockError> {
        let now = self.now(real_now);
        let pace = self.pace(real_now);
        let check = |speed: f64| {
            if speed.is_finite() && speed > 0.0 {
                Ok(speed)
            } else {
                Err(ClockError::Speed(speed))
            }
        };
        match request {
            ClockRequest::Advance { by, speed } => {
                let step = advance.unwrap_or(SignedDuration::ZERO);
                if step < SignedDuration::ZERO {
                    return Err(ClockError::Backwards(by.clone()));
                }
                let speed = check(speed.unwrap_or(DEFAULT_ADVANCE_SPEED))?;
                // An advance during an advance goes on from where that one was headed.
                let after = if self.until.is_some_and(|u| u > now) {
                    self.then_speed
                } else {
                    pace
                };
                let from = self.until.filter(|u| *u > now).unwrap_or(now);
                let until = from
                    .checked_add(step)
                    .map_err(|e| ClockError::Data(format!("time out of range: {e}")))?;
                Ok(ClockState {
                    time: now,
                    anchor: real_now,
                    speed: speed.max(after),
                    until: Some(until),
                    then_speed: after,
                })
            }
            ClockRequest::Run { speed } => {
                let speed = check(*speed)?;
                Ok(ClockState {
                    time: now,
                    anchor: real_now,
                    speed,
                    until: None,
                    then_speed: speed,
                })
            }
            ClockRequest::Pause => Ok(ClockState {
                time: now,
                anchor: real_now,
                speed: 0.0,
                until: None,
                then_speed: 0.0,
            }),
        }
    }

    /// The ConfigMap's data.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::from([
            ("time".to_string(), self.time.to_string()),
            ("anchor".to_string(), self.anchor.to_string()),
            ("speed".to_string(), self.speed.to_string()),
        ]);
        if let Some(until) = self.until {
            data.insert("until".into(), until.to_string());
            data.insert("thenSpeed".into(), self.then_speed.to_string());
        }
        data
    }

    /// Reads the ConfigMap's data.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<ClockState, ClockError> {
        let field = |key: &str| {
            data.get(key)
                .ok_or_else(|| ClockError::Data(format!("data.{key}: Required value")))
        };
        let stamp = |key: &str| -> Result<Timestamp, ClockError> {
            let text = field(key)?;
            text.parse()
                .map_err(|e| ClockError::Data(format!("data.{key}: Invalid value: {text:?}: {e}")))
        };
        let speed = |key: &str| -> Result<f64, ClockError> {
            let text = field(key)?;
            let speed: f64 = text.parse().map_err(|_| {
                ClockError::Data(format!("data.{key}: Invalid value: {text:?}: not a number"))
            })?;
            if speed.is_finite() && speed >= 0.0 {
                Ok(speed)
            } else {
                Err(ClockError::Speed(speed))
            }
        };
        let pace = speed("speed")?;
        let (until, then_speed) = if data.contains_key("until") {
            (Some(stamp("until")?), speed("thenSpeed")?)
        } else {
            (None, pace)
        };
        Ok(ClockState {
            time: stamp("time")?,
            anchor: stamp("anchor")?,
            speed: pace,
            until,
            then_speed,
        })
    }

    /// This state as `GET /miniplane/v1/clock` shows it at the machine's time `real_now`.
    pub fn status(&self, real_now: Timestamp) -> ClockStatus {
        let now = self.now(real_now);
        ClockStatus {
            mode: ClockMode::Virtual,
            now: now.to_string(),
            speed: self.pace(real_now),
            advancing_to: self.until.filter(|u| *u > now).map(|u| u.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn advance(by: &str) -> ClockRequest {
        ClockRequest::Advance {
            by: by.into(),
            speed: None,
        }
    }

    #[test]
    fn paused_clock_stands_and_running_clock_scales() {
        let paused = ClockState {
            speed: 0.0,
            then_speed: 0.0,
            ..ClockState::starting(ts("2026-01-01T00:00:00Z"), 0.0)
        };
        let paused = ClockState {
            anchor: ts("2026-06-01T00:00:00Z"),
            ..paused
        };
        assert_eq!(
            paused.now(ts("2026-06-01T01:00:00Z")),
            ts("2026-01-01T00:00:00Z")
        );
        assert_eq!(
            paused.machine_time_until(paused.anchor, ts("2026-01-01T00:00:05Z")),
            None
        );
        let fast = ClockState {
            speed: 60.0,
            then_speed: 60.0,
            ..paused
        };
        assert_eq!(
            fast.now(ts("2026-06-01T00:00:10Z")),
            ts("2026-01-01T00:10:00Z")
        );
        assert_eq!(
            fast.machine_time_until(fast.anchor, ts("2026-01-01T00:10:00Z")),
            Some(Duration::from_secs(10))
        );
        // A machine clock before the anchor reads as the anchor's time.
        assert_eq!(
            fast.now(ts("2026-05-31T00:00:00Z")),
            ts("2026-01-01T00:00:00Z")
        );
    }

    #[test]
    fn an_advance_runs_fast_then_resumes_the_old_pace() {
        let start = ClockState::starting(ts("2026-01-01T00:00:00Z"), 0.0);
        let real = ts("2026-03-01T00:00:00Z");
        let advancing = start
            .apply(&advance("10m"), Some(SignedDuration::from_mins(10)), real)
            .expect("advance");
        assert_eq!(advancing.until, Some(ts("2026-01-01T00:10:00Z")));
        // 100x: a minute of cluster time in 0.6 s, the ten minutes in 6 s, then paused.
        assert_eq!(
            advancing.now(ts("2026-03-01T00:00:00.6Z")),
            ts("2026-01-01T00:01:00Z")
        );
        assert_eq!(
            advancing.machine_time_until(real, ts("2026-01-01T00:10:00Z")),
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            advancing.machine_time_until(real, ts("2026-01-01T00:10:01Z")),
            None,
            "paused after the advance"
        );
        let later = ts("2026-03-01T01:00:00Z");
        assert_eq!(advancing.now(later), ts("2026-01-01T00:10:00Z"));
        assert_eq!(advancing.status(later).advancing_to, None);
        assert_eq!(advancing.pace(later), 0.0);
        // Advancing a clock that runs at 1x goes back to 1x.
        let running = start
            .apply(&ClockRequest::Run { speed: 1.0 }, None, real)
            .expect("run");
        let advancing = running
            .apply(&advance("1m"), Some(SignedDuration::from_mins(1)), real)
            .expect("advance");
        assert_eq!(
            advancing.now(ts("2026-03-01T00:00:10.6Z")),
            ts("2026-01-01T00:01:10Z")
        );
        // An advance during an advance adds to where it was headed.
        let again = advancing
            .apply(&advance("1m"), Some(SignedDuration::from_mins(1)), real)
            .expect("advance");
        assert_eq!(again.until, Some(ts("2026-01-01T00:02:00Z")));
        assert_eq!(again.then_speed, 1.0);
    }

    #[test]
    fn run_and_pause_take_the_time_reached() {
        let start = ClockState::starting(ts("2026-01-01T00:00:00Z"), 0.0);
        let real = ts("2026-01-01T00:00:30Z");
        let running = start
            .apply(&ClockRequest::Run { speed: 2.0 }, None, real)
            .expect("run");
        let later = ts("2026-01-01T00:01:30Z");
        assert_eq!(running.now(later), ts("2026-01-01T00:02:00Z"));
        let paused = running
            .apply(&ClockRequest::Pause, None, later)
            .expect("pause");
        assert_eq!(paused.time, ts("2026-01-01T00:02:00Z"));
        assert_eq!(paused.now(ts("2027-01-01T00:00:00Z")), paused.time);
    }

    #[test]
    fn backwards_and_bad_speeds_are_refused() {
        let start = ClockState::starting(ts("2026-01-01T00:00:00Z"), 1.0);
        let err = start
            .apply(
                &advance("-5m"),
                Some(SignedDuration::from_mins(-5)),
                ts("2026-01-01T00:00:00Z"),
            )
            .expect_err("backwards");
        assert_eq!(
            err.to_string(),
            "the cluster clock cannot move backwards (advance -5m)"
        );
        for speed in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                start
                    .apply(&ClockRequest::Run { speed }, None, start.anchor)
                    .is_err(),
                "speed {speed}"
            );
        }
    }

    #[test]
    fn data_round_trips_and_bad_data_is_named() {
        let state = ClockState {
            time: ts("2026-01-01T00:00:00.5Z"),
            anchor: ts("2026-02-01T00:00:00Z"),
            speed: 100.0,
            until: Some(ts("2026-01-01T00:05:00Z")),
            then_speed: 0.0,
        };
        assert_eq!(ClockState::from_data(&state.to_data()), Ok(state));
        let plain = ClockState::starting(ts("2026-01-01T00:00:00Z"), 60.0);
        assert_eq!(ClockState::from_data(&plain.to_data()), Ok(plain));
        let mut data = state.to_data();
        data.insert("speed".into(), "fast".into());
        assert_eq!(
            ClockState::from_data(&data)
                .expect_err("bad speed")
                .to_string(),
            "kube-system/miniplane-clock: data.speed: Invalid value: \"fast\": not a number"
        );
        data.remove("time");
        assert!(ClockState::from_data(&data).is_err());
    }

    #[test]
    fn requests_have_a_plain_json_form() {
        let a: ClockRequest = serde_json::from_str(r#"{"advance":{"by":"10m"}}"#).expect("json");
        assert_eq!(a, advance("10m"));
        let run: ClockRequest = serde_json::from_str(r#"{"run":{"speed":60}}"#).expect("json");
        assert_eq!(run, ClockRequest::Run { speed: 60.0 });
        let pause: ClockRequest = serde_json::from_str(r#""pause""#).expect("json");
        assert_eq!(pause, ClockRequest::Pause);
    }
}
