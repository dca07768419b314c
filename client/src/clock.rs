//! Injected time: the `Clock` trait with a real and a fake implementation.
//!
//! Mirrors `k8s.io/utils/clock` (`clock.Clock`, `testing.FakeClock`), which client-go threads
//! through the workqueue, the reflector's backoff manager, leader election and the event
//! correlator. Decision logic asks the clock for "now" and sleeps through it, so tests step
//! time by hand:
//!
//! ```text
//!   let clock = FakeClock::new();
//!   queue.add_after(key, 5s)          // parked until fake now >= t0 + 5s
//!   clock.advance(5s)                 // wakes every sleeper whose deadline passed
//! ```
//!
//! [`TokioClock`] is the real clock. It reads tokio's time, so a test may also use
//! `tokio::time::pause()` with it and let tokio auto-advance while every task is idle.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use tokio::time::Instant;

/// A source of monotonic time, wall time and sleeps.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic "now": used for durations (queue wait, backoff, lease expiry).
    fn now(&self) -> Instant;
    /// Wall-clock "now": written into objects (lease renewTime, event timestamps).
    fn wall(&self) -> Timestamp;
    /// A future that completes once [`Clock::now`] has reached `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()>;
    /// A future that completes after `duration` of this clock's time.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep_until(self.now() + duration)
    }
}

/// A shared, type-erased clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The real clock: tokio's monotonic time and the system's wall time.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl TokioClock {
    /// The real clock as a [`SharedClock`].
    pub fn shared() -> SharedClock {
        Arc::new(TokioClock)
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(deadline))
    }
}

/// A clock that only moves when [`FakeClock::advance`] is called (client-go's `FakeClock`).
#[derive(Debug, Clone)]
pub struct FakeClock {
    inner: Arc<Mutex<FakeState>>,
}

#[derive(Debug)]
struct FakeState {
    /// Monotonic origin; fake now = origin + elapsed.
    origin: Instant,
    /// Wall time at the origin.
    wall_origin: Timestamp,
    elapsed: Duration,
    /// Parked sleepers by id: deadline and the waker to call once it has passed.
    sleepers: Vec<(u64, Instant, Waker)>,
    /// Id of the next sleep future.
    next_id: u64,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A fake clock starting at the current instant and at wall time 2024-01-01T00:00:00Z.
    pub fn new() -> Self {
        let wall_origin = Timestamp::from_second(1_704_067_200).unwrap_or(Timestamp::UNIX_EPOCH);
        FakeClock {
            inner: Arc::new(Mutex::new(FakeState {
                origin: Instant::now(),
                wall_origin,
                elapsed: Duration::ZERO,
                sleepers: Vec::new(),
                next_id: 0,
            })),
        }
    }

    /// This fake clock as a [`SharedClock`].
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }

    /// Moves time forward and wakes every sleeper whose deadline has passed.
    pub fn advance(&self, by: Duration) {
        let ready: Vec<Waker> = {
            let mut state = lock(&self.inner);
            state.elapsed += by;
            let now = state.origin + state.elapsed;
            let (ready, parked): (Vec<_>, Vec<_>) = state
                .sleepers
                .drain(..)
                .partition(|(_, deadline, _)| *deadline <= now);
            state.sleepers = parked;
            ready.into_iter().map(|(_, _, waker)| waker).collect()
        };
        for waker in ready {
            waker.wake();
        }
    }

    /// Number of futures currently parked on this clock: lets a test wait until a task is
    /// blocked on time before advancing it (instead of sleeping).
    pub fn sleepers(&self) -> usize {
        lock(&self.inner).sleepers.len()
    }
}

fn lock(state: &Mutex<FakeState>) -> std::sync::MutexGuard<'_, FakeState> {
    // A panic while holding this lock leaves plain data behind; keep going.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let state = lock(&self.inner);
        state.origin + state.elapsed
    }
    fn wall(&self) -> Timestamp {
        let state = lock(&self.inner);
        let elapsed = jiff::SignedDuration::try_from(state.elapsed).unwrap_or_default();
        state
            .wall_origin
            .checked_add(elapsed)
            .unwrap_or(state.wall_origin)
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let id = {
            let mut state = lock(&self.inner);
            state.next_id += 1;
            state.next_id
        };
        Box::pin(FakeSleep {
            clock: self.inner.clone(),
            id,
            deadline,
        })
    }
}

struct FakeSleep {
    clock: Arc<Mutex<FakeState>>,
    id: u64,
    deadline: Instant,
}

impl Drop for FakeSleep {
    fn drop(&mut self) {
        let id = self.id;
        lock(&self.clock)
            .sleepers
            .retain(|(sleeper, _, _)| *sleeper != id);
    }
}

impl Future for FakeSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.clock);
        if state.origin + state.elapsed >= self.deadline {
            return Poll::Ready(());
        }
        // Replace the waker registered by an earlier poll of this same future.
        let id = self.id;
        state.sleepers.retain(|(sleeper, _, _)| *sleeper != id);
        state.sleepers.push((id, self.deadline, cx.waker().clone()));
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn fake_sleep_completes_only_after_advance() {
        let clock = FakeClock::new();
        let mut sleep = clock.sleep(Duration::from_secs(5));
        assert!((&mut sleep).now_or_never().is_none());
        assert_eq!(clock.sleepers(), 1);
        clock.advance(Duration::from_secs(4));
        assert!((&mut sleep).now_or_never().is_none());
        clock.advance(Duration::from_secs(1));
        assert!(sleep.now_or_never().is_some());
        assert_eq!(clock.sleepers(), 0);
    }

    #[test]
    fn wall_time_moves_with_advance() {
        let clock = FakeClock::new();
        let before = clock.wall();
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.wall().duration_since(before).as_millis(), 1500);
    }
}
