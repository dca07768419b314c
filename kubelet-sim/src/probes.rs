//! Startup, liveness and readiness probes, simulated: when a probe first passes and when it
//! has failed often enough to count. Mirrors the kubelet's prober workers
//! (`pkg/kubelet/prober/worker.go`: one worker per probe, an attempt every `periodSeconds`,
//! results ignored before `initialDelaySeconds`, `successThreshold` successes in a row to pass
//! and `failureThreshold` failures in a row to fail; liveness and readiness wait for the
//! startup probe) and the events of `prober/prober.go`.
//!
//! No request is sent: a probe succeeds, unless an annotation
//! (`miniplane.dev/<probe>-fails-after`, see [`crate::annotations`]) says from when on it
//! fails. Times are pure functions of the container's start, so nothing is stored per probe.
//!
//! ```text
//!   start   initialDelay   attempts every period            fails-after
//!     │──────────▶│ a0 ─── a1 ─── a2 ─── a3 ─── a4 ─── a5 ─── │ a6 ─── a7 ─── a8
//!                 passes at a(successThreshold-1)               fails at a(6+failureThreshold-1)
//! ```
//!
//! Unlike the kubelet, whose workers start at a random point of the first period, the first
//! attempt is exactly `initialDelaySeconds` after the start (or when the startup probe passed).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The timing fields of a probe, defaulted as the API server defaults them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
}

fn seconds(value: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
}

impl Timing {
    /// The timing of `probe`.
    pub fn of(probe: &Probe) -> Self {
        let count = |v: Option<i32>, default: u32| {
            v.and_then(|v| u32::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Timing {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }

    /// Attempt `k` (from 0) when the first is at `first`.
    fn attempt(&self, first: Timestamp, k: u32) -> Timestamp {
        crate::stages::after(first, self.period.saturating_mul(k))
    }

    /// When the probe passes (`successThreshold` attempts in a row succeed), attempts starting
    /// at `first`, for a container started at `start` whose probe fails from
    /// `start + fails_after` on; none: never.
    pub fn passes_at(
        &self,
        start: Timestamp,
        first: Timestamp,
        fails_after: Option<Duration>,
    ) -> Option<Timestamp> {
        let at = self.attempt(first, self.success_threshold - 1);
        match fails_after {
            Some(d) if at >= crate::stages::after(start, d) => None,
            _ => Some(at),
        }
    }

    /// When the probe has failed `failureThreshold` times in a row (none: it never fails).
    pub fn fails_at(
        &self,
        start: Timestamp,
        first: Timestamp,
        fails_after: Option<Duration>,
    ) -> Option<Timestamp> {
        let failing = crate::stages::after(start, fails_after?);
        // The first attempt at or after `failing`.
        let k0 = if failing <= first {
            0
        } else {
            let gap = Duration::try_from(failing.duration_since(first)).unwrap_or(Duration::ZERO);
            let period = self.period.as_nanos().max(1);
            u32::try_from(gap.as_nanos().div_ceil(period)).unwrap_or(u32::MAX)
        };
        Some(self.attempt(first, k0.saturating_add(self.failure_threshold - 1)))
    }
}

/// What a failed probe reports, as `prober.go` words it for each kind of handler (the event
/// is `"<Kind> probe failed: <this>"`).
pub fn failure_output(probe: &Probe, pod_ip: &str) -> String {
    let port = |p: &IntOrString| match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    if probe.http_get.is_some() {
        "HTTP probe failed with statuscode: 500".into()
    } else if let Some(tcp) = &probe.tcp_socket {
        format!(
            "dial tcp {pod_ip}:{}: connect: connection refused",
            port(&tcp.port)
        )
    } else if probe.grpc.is_some() {
        "service unhealthy (responded with \"NOT_SERVING\")".into()
    } else {
        // An exec probe reports the command's output, which a simulated command has none of.
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn timing(initial: i32, period: i32, success: i32, failure: i32) -> Timing {
        Timing::of(&Probe {
            initial_delay_seconds: Some(initial),
            period_seconds: Some(period),
            success_threshold: Some(success),
            failure_threshold: Some(failure),
            ..Default::default()
        })
    }

    #[test]
    fn defaults_are_the_api_servers() {
        assert_eq!(
            Timing::of(&Probe::default()),
            Timing {
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
    }

    #[test]
    fn passing_takes_success_threshold_attempts() {
        let p = timing(5, 10, 1, 3);
        assert_eq!(p.passes_at(t(0), t(5), None), Some(t(5)));
        let p = timing(5, 10, 3, 3);
        assert_eq!(p.passes_at(t(0), t(5), None), Some(t(25)));
        // Failing before the third success: it never passes.
        assert_eq!(p.passes_at(t(0), t(5), Some(Duration::from_secs(20))), None);
        assert_eq!(
            p.passes_at(t(0), t(5), Some(Duration::from_secs(26))),
            Some(t(25))
        );
    }

    #[test]
    fn failing_takes_failure_threshold_attempts_from_the_first_failing_one() {
        let p = timing(0, 10, 1, 3);
        assert_eq!(p.fails_at(t(0), t(0), None), None);
        // Fails from 30 s: attempts at 30, 40, 50 fail → counted at 50.
        assert_eq!(
            p.fails_at(t(0), t(0), Some(Duration::from_secs(30))),
            Some(t(50))
        );
        // From 31 s: the first failing attempt is at 40.
        assert_eq!(
            p.fails_at(t(0), t(0), Some(Duration::from_secs(31))),
            Some(t(60))
        );
        // Failing from the start with one allowed failure.
        let p = timing(2, 5, 1, 1);
        assert_eq!(p.fails_at(t(0), t(2), Some(Duration::ZERO)), Some(t(2)));
    }

    #[test]
    fn failure_output_names_the_handler() {
        let tcp = Probe {
            tcp_socket: Some(k8s_openapi::api::core::v1::TCPSocketAction {
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            failure_output(&tcp, "10.244.0.5"),
            "dial tcp 10.244.0.5:8080: connect: connection refused"
        );
        let http = Probe {
            http_get: Some(Default::default()),
            ..Default::default()
        };
        assert_eq!(
            failure_output(&http, "10.244.0.5"),
            "HTTP probe failed with statuscode: 500"
        );
    }
}
