//! Exponential backoff with jitter and reset: apimachinery's
//! `pkg/util/wait/backoff.go` (`NewExponentialBackoffManager`), as the reflector uses it
//! between list-and-watch attempts:
//!
//! ```text
//!   initial 800 ms, factor 2, cap 30 s, jitter 1.0, reset after 2 min without a backoff
//!   800 ms · 1.6 s · 3.2 s · 6.4 s · 12.8 s · 25.6 s · 30 s · 30 s …   (each · (1 + rand·jitter))
//! ```
//!
//! The manager is a plain value over an explicit `now`; the seeded RNG keeps tests
//! reproducible.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Exponential backoff that starts over after a quiet period.
#[derive(Debug, Clone)]
pub struct BackoffManager {
    initial: Duration,
    cap: Duration,
    reset_after: Duration,
    factor: f64,
    jitter: f64,
    /// The next un-jittered delay.
    current: Duration,
    last_backoff_start: Option<Instant>,
    rng: StdRng,
}

impl BackoffManager {
    /// The reflector's defaults: 800 ms, ×2, cap 30 s, reset after 2 min, jitter 1.0.
    pub fn reflector_default() -> Self {
        Self::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            1.0,
        )
    }

    /// A custom backoff.
    pub fn new(
        initial: Duration,
        cap: Duration,
        reset_after: Duration,
        factor: f64,
        jitter: f64,
    ) -> Self {
        BackoffManager {
            initial,
            cap,
            reset_after,
            factor,
            jitter,
            current: initial,
            last_backoff_start: None,
            rng: StdRng::from_rng(&mut rand::rng()),
        }
    }

    /// Uses a fixed RNG seed (tests).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    /// The next delay at time `now`.
    pub fn next(&mut self, now: Instant) -> Duration {
        let quiet = self
            .last_backoff_start
            .is_none_or(|start| now.saturating_duration_since(start) > self.reset_after);
        if quiet {
            self.current = self.initial;
        }
        self.last_backoff_start = Some(now);
        let base = self.current;
        self.current = base.mul_f64(self.factor).min(self.cap);
        if self.jitter > 0.0 {
            base + base.mul_f64(self.rng.random::<f64>() * self.jitter)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_resets_after_quiet_period() {
        let mut backoff = BackoffManager::reflector_default();
        backoff.jitter = 0.0;
        let t0 = Instant::now();
        let delays: Vec<u128> = (0..8)
            .map(|i| backoff.next(t0 + Duration::from_secs(i)).as_millis())
            .collect();
        assert_eq!(
            delays,
            vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]
        );
        let later = t0 + Duration::from_secs(7 + 121);
        assert_eq!(backoff.next(later), Duration::from_millis(800));
    }

    #[test]
    fn jitter_stays_within_one_extra_base() {
        let mut backoff = BackoffManager::reflector_default().with_seed(7);
        let d = backoff.next(Instant::now());
        assert!(
            d >= Duration::from_millis(800) && d <= Duration::from_millis(1600),
            "{d:?}"
        );
    }
}
