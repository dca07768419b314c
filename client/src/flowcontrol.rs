//! A token bucket: the rate limiter behind client-go's client-side throttling
//! (`util/flowcontrol/throttle.go`, built on `golang.org/x/time/rate`) and the workqueue's
//! `BucketRateLimiter`.
//!
//! The bucket holds up to `burst` tokens and refills at `qps` tokens per second. Like
//! `rate.Limiter.Reserve`, [`TokenBucket::reserve`] always takes a token, letting the balance go
//! negative, and answers how long the caller must wait before using it:
//!
//! ```text
//!   qps 10, burst 100:   calls 1..=100 → wait 0     (the burst)
//!                        call 101     → wait 100 ms
//!                        call 102     → wait 200 ms  (one token per 100 ms after that)
//! ```
//!
//! The bucket is a plain value over an explicit `now`; callers supply the clock.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket refilled at `qps` tokens per second, holding at most `burst`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date.
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at time `now`. A `qps` of zero or less never refills.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        if now > self.last {
            self.last = now;
        }
        self.tokens = (self.tokens + elapsed * self.qps.max(0.0)).min(self.burst);
    }

    /// Takes a token now and returns how long to wait before acting on it (zero while the
    /// bucket has tokens).
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        if self.qps <= 0.0 {
            return Duration::MAX;
        }
        Duration::try_from_secs_f64(-self.tokens / self.qps).unwrap_or(Duration::MAX)
    }

    /// Takes a token if one is available now (client-go's `TryAccept`).
    pub fn try_accept(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 100, t0);
        for i in 0..100 {
            assert_eq!(
                bucket.reserve(t0),
                Duration::ZERO,
                "call {i} is within the burst"
            );
        }
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve(t0), Duration::from_millis(200));
        // One second later ten tokens have refilled; two were already promised to calls 101
        // and 102, so eight are free.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..8 {
            assert_eq!(bucket.reserve(t1), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(t1), Duration::from_millis(100));
    }

    #[test]
    fn try_accept_does_not_go_negative() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(1.0, 2, t0);
        assert!(bucket.try_accept(t0));
        assert!(bucket.try_accept(t0));
        assert!(!bucket.try_accept(t0));
        assert!(bucket.try_accept(t0 + Duration::from_secs(1)));
    }
}
