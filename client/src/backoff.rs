//! Exponential backoff with jitter and reset: apimachinery's
//! `pkg/util/wait/backoff.go` (`NewExponentialBackoffManager`), as the reflector uses it
//! between list-and-watch attempts:
//!
//! ```text
//!   initial 800 ms, factor 2, cap 30 s, jitter 1.0, reset after 2 min without a backoff
//!   800 ms · 1.6 s · 3.2 s · 6.4 s · 12.8 s · 25.6 s · 30 s · 30 s …   (each · (1 + rand·jitter))
//! ```
//!
//! The sequence of delays is `backon`'s [`ExponentialBackoff`] (its jitter adds a random
//! fraction of the delay, client-go's `Jitter(d, 1.0)`); what this type adds is client-go's
//! reset: a backoff that comes more than `reset_after` after the previous one starts the
//! sequence over, and delays exact to the millisecond (backon computes in `f32`). It is a plain value over an explicit `now`, and a fixed jitter seed keeps
//! tests reproducible.
//!
//! The workqueue's per-item exponential rate limiter (`workqueue/rate_limiting.rs`) is not
//! built on this: it computes `base · 2^failures` from a per-key failure count that
//! `forget` resets, which is a rate limiter over many keys, not one retry loop's delays.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

/// Exponential backoff that starts over after a quiet period.
#[derive(Debug)]
pub struct BackoffManager {
    builder: ExponentialBuilder,
    reset_after: Duration,
    cap: Duration,
    /// The delays since the last reset.
    delays: ExponentialBackoff,
    last_backoff_start: Option<Instant>,
}

impl BackoffManager {
    /// The reflector's defaults: 800 ms, ×2, cap 30 s, reset after 2 min, jitter 1.0.
    pub fn reflector_default() -> Self {
        Self::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            true,
        )
    }

    /// A custom backoff; `jitter` adds up to one more delay at random (client-go's jitter 1.0).
    pub fn new(
        initial: Duration,
        cap: Duration,
        reset_after: Duration,
        factor: f32,
        jitter: bool,
    ) -> Self {
        let builder = ExponentialBuilder::new()
            .with_min_delay(initial)
            .with_max_delay(cap)
            .with_factor(factor)
            .without_max_times();
        let builder = if jitter {
            builder.with_jitter()
        } else {
            builder
        };
        Self::from_builder(builder, reset_after, cap)
    }

    fn from_builder(builder: ExponentialBuilder, reset_after: Duration, cap: Duration) -> Self {
        BackoffManager {
            delays: builder.build(),
            builder,
            reset_after,
            cap,
            last_backoff_start: None,
        }
    }

    /// Uses a fixed jitter seed (tests).
    pub fn with_seed(self, seed: u64) -> Self {
        let builder = self.builder.with_jitter_seed(seed);
        Self::from_builder(builder, self.reset_after, self.cap)
    }

    /// The next delay at time `now`.
    pub fn next(&mut self, now: Instant) -> Duration {
        let quiet = self
            .last_backoff_start
            .is_none_or(|start| now.saturating_duration_since(start) > self.reset_after);
        if quiet {
            self.delays = self.builder.build();
        }
        self.last_backoff_start = Some(now);
        // Without a maximum number of attempts the sequence never ends.
        round_to_millis(self.delays.next().unwrap_or(self.cap))
    }
}

/// backon multiplies in `f32` seconds (800 ms × 2 is 1.600000023 s); client-go's delays are
/// exact products, so the delay is rounded to the millisecond.
fn round_to_millis(delay: Duration) -> Duration {
    let millis = (delay.as_nanos() + 500_000) / 1_000_000;
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_resets_after_quiet_period() {
        let mut backoff = BackoffManager::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            false,
        );
        let t0 = Instant::now();
        let delays: Vec<Duration> = (0..8)
            .map(|i| backoff.next(t0 + Duration::from_secs(i)))
            .collect();
        let millis = [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000];
        assert_eq!(delays, millis.map(Duration::from_millis));
        let later = t0 + Duration::from_secs(7 + 121);
        assert_eq!(backoff.next(later), Duration::from_millis(800));
    }

    #[test]
    fn jitter_stays_within_one_extra_base() {
        let mut backoff = BackoffManager::reflector_default().with_seed(7);
        let t0 = Instant::now();
        for (i, base) in [800, 1600, 3200].into_iter().enumerate() {
            let d = backoff.next(t0 + Duration::from_secs(i as u64));
            let base = Duration::from_millis(base);
            assert!(d >= base && d <= base * 2, "{d:?}");
        }
    }
}
