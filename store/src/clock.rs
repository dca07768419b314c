//! Time as a dependency, so decisions that depend on it (auto-compaction by age) can be tested
//! without sleeping (the role of `k8s.io/utils/clock` and etcd's `jonboulle/clockwork`).

use std::fmt::Debug;
use std::time::Instant;

/// A source of the current time.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Now.
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}
