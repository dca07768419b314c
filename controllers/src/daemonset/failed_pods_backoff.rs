//! The back-off between deleting failed daemon pods on one node.
//!
//! Mirrors the DaemonSet controller's `failedPodsBackoff`
//! (`flowcontrol.NewBackOff(1*time.Second, 15*time.Minute)` from
//! `staging/src/k8s.io/client-go/util/flowcontrol/backoff.go`), keyed by
//! `failedPodsBackoffKey`: `<ds uid>/<observedGeneration>/<node>`.
//!
//! A kubelet that rejects a daemon pod (say, a port conflict) fails it at once; without a
//! back-off the controller and the kubelet would delete and recreate it in a hot loop:
//!
//! ```text
//!   failed pod seen at t=0   ─▶ delete, back-off 1 s
//!   failed again at t=0.5 s  ─▶ in back-off: requeue after 1 s, leave the pod
//!   failed again at t=2 s    ─▶ delete, back-off 2 s ... doubling up to 15 min
//!   nothing for 30 min       ─▶ the entry expires: next time starts at 1 s again
//! ```
//!
//! Unlike client-go, there is no jitter (it is 0 for this back-off in Kubernetes too).

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;

/// The first delay.
pub const INITIAL: Duration = Duration::from_secs(1);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

/// Per-key back-off (`flowcontrol.Backoff`), with time passed in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailedPodsBackoff {
    entries: HashMap<String, Entry>,
}

/// `failedPodsBackoffKey`.
pub fn backoff_key(ds_uid: &str, observed_generation: i64, node: &str) -> String {
    format!("{ds_uid}/{observed_generation}/{node}")
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

fn has_expired(now: Timestamp, last_update: Timestamp) -> bool {
    elapsed(last_update, now) > 2 * MAX
}

impl FailedPodsBackoff {
    /// No entries.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Get`: the current delay of `key` (zero when it has none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// `IsInBackOffSinceUpdate`: less than the delay has passed since the last `next`.
    pub fn is_in_backoff_since_update(&self, key: &str, now: Timestamp) -> bool {
        self.entries.get(key).is_some_and(|e| {
            !has_expired(now, e.last_update) && elapsed(e.last_update, now) < e.backoff
        })
    }

    /// `Next`: start at [`INITIAL`] (or again after the entry expired), else double, up to
    /// [`MAX`].
    pub fn next(&mut self, key: &str, now: Timestamp) {
        let backoff = match self.entries.get(key) {
            Some(e) if !has_expired(now, e.last_update) => (e.backoff * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// `GC`: drops entries that expired.
    pub fn gc(&mut self, now: Timestamp) {
        self.entries.retain(|_, e| !has_expired(now, e.last_update));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_expires() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().expect("timestamp");
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let mut b = FailedPodsBackoff::new();
        assert!(!b.is_in_backoff_since_update("k", t0));
        b.next("k", t0);
        assert_eq!(b.get("k"), Duration::from_secs(1));
        assert!(b.is_in_backoff_since_update("k", t0));
        assert!(!b.is_in_backoff_since_update("k", at(1)));
        b.next("k", at(2));
        assert_eq!(b.get("k"), Duration::from_secs(2));
        for _ in 0..20 {
            b.next("k", at(3));
        }
        assert_eq!(b.get("k"), MAX);
        b.next("k", at(3 + 31 * 60));
        assert_eq!(b.get("k"), INITIAL, "expired after twice the cap");
        b.gc(at(10_000));
        assert_eq!(b.get("k"), Duration::ZERO);
    }
}
