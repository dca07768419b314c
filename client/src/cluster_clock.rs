//! The cluster's clock as a component reads it: the machine's ([`TokioClock`]) unless the
//! ConfigMap `kube-system/miniplane-clock` exists, then a [`VirtualClock`] that follows it
//! through an ordinary watch (the `admin` crate's `clock` module has the rule).
//!
//! No client-go counterpart: client-go takes a `clock.Clock` in its workqueues, backoffs and
//! leader election so that tests can pass a fake one; here every component of a cluster
//! started with `--clock virtual` is handed the same virtual clock, so their timers (queue
//! delays, backoffs, heartbeats, grace periods, leases) all move when the user moves it.
//!
//! ```text
//!   discover(client) ── GET configmaps/miniplane-clock ──▶ 404: TokioClock
//!                                                     └──▶ found: VirtualClock + ClockWatcher
//!   ClockWatcher: watcher(ConfigMap, metadata.name=miniplane-clock) ─▶ watch channel
//!   VirtualClock::sleep_until(d): loop { now >= d → done;
//!                                        sleep(machine time until d) or a clock change }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use admin::{CLOCK_CONFIGMAP, CLOCK_NAMESPACE, ClockState};
use futures::StreamExt;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SharedClock, TokioClock};

/// How long [`discover`] keeps trying to reach the API server before giving up.
const DISCOVER_PATIENCE: Duration = Duration::from_secs(60);

/// A clock that reads the cluster's virtual time from a channel of [`ClockState`]s.
///
/// Its monotonic [`Clock::now`] is its origin instant plus the cluster time elapsed since;
/// the cluster time never moves back (a state that would is ignored by the watcher), so
/// neither does it.
#[derive(Debug, Clone)]
pub struct VirtualClock {
    origin: Instant,
    origin_wall: Timestamp,
    states: watch::Receiver<ClockState>,
}

impl VirtualClock {
    /// A clock following `states`.
    pub fn new(states: watch::Receiver<ClockState>) -> Self {
        let origin_wall = states.borrow().now(Timestamp::now());
        VirtualClock {
            origin: Instant::now(),
            origin_wall,
            states,
        }
    }

    fn wall_of(&self, at: Instant) -> Timestamp {
        let since = at.saturating_duration_since(self.origin);
        jiff::SignedDuration::try_from(since)
            .ok()
            .and_then(|d| self.origin_wall.checked_add(d).ok())
            .unwrap_or(self.origin_wall)
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        let since = self.wall().duration_since(self.origin_wall);
        self.origin + Duration::try_from(since).unwrap_or_default()
    }

    fn wall(&self) -> Timestamp {
        self.states.borrow().now(Timestamp::now())
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let target = self.wall_of(deadline);
        let mut states = self.states.clone();
        Box::pin(async move {
            loop {
                let state = *states.borrow_and_update();
                match state.machine_time_until(Timestamp::now(), target) {
                    Some(Duration::ZERO) => return,
                    Some(wait) => {
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            changed = states.changed() => if changed.is_err() {
                                // No more changes: the speed stays; sleep the rest out.
                                tokio::time::sleep(wait).await;
                            }
                        }
                    }
                    None => {
                        if states.changed().await.is_err() {
                            // Paused for good (the watcher stopped).
                            std::future::pending::<()>().await;
                        }
                    }
                }
            }
        })
    }
}

/// Keeps a [`VirtualClock`]'s channel current from the ConfigMap; see [`discover`].
pub struct ClockWatcher {
    client: kube::Client,
    tx: watch::Sender<ClockState>,
}

/// The cluster's clock: a [`VirtualClock`] (with the watcher to run beside it) if the
/// ConfigMap `kube-system/miniplane-clock` exists, else the machine's clock. Retries while
/// the API server cannot be reached, for up to a minute; a clock that cannot be read is an
/// error rather than a silent fall back to real time.
pub async fn discover(
    client: &kube::Client,
) -> Result<(SharedClock, Option<ClockWatcher>), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), CLOCK_NAMESPACE);
    let started = std::time::Instant::now();
    let mut delay = Duration::from_millis(50);
    let found = loop {
        match api.get_opt(CLOCK_CONFIGMAP).await {
            Ok(found) => break found,
            Err(kube::Error::Api(e)) if e.code == 403 => {
                return Err(format!(
                    "reading {CLOCK_NAMESPACE}/{CLOCK_CONFIGMAP}: {}",
                    e.message
                ));
            }
            Err(e) if started.elapsed() < DISCOVER_PATIENCE => {
                tracing::debug!(error = %e, "cluster clock not readable yet (retrying)");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(format!("reading {CLOCK_NAMESPACE}/{CLOCK_CONFIGMAP}: {e}")),
        }
    };
    let Some(cm) = found else {
        return Ok((TokioClock::shared(), None));
    };
    let state = ClockState::from_data(&data_of(&cm)).map_err(|e| e.to_string())?;
    let (tx, rx) = watch::channel(state);
    let watcher = ClockWatcher {
        client: client.clone(),
        tx,
    };
    Ok((std::sync::Arc::new(VirtualClock::new(rx)), Some(watcher)))
}

fn data_of(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

impl ClockWatcher {
    /// A watcher feeding `tx` (tests build one around their own channel).
    pub fn new(client: kube::Client, tx: watch::Sender<ClockState>) -> Self {
        ClockWatcher { client, tx }
    }

    /// Publishes `state` unless it would move the clock back (then it is ignored, with a
    /// warning: the admin API refuses such a change, but the ConfigMap can be written by
    /// hand).
    pub fn publish(tx: &watch::Sender<ClockState>, state: ClockState) {
        let real = Timestamp::now();
        tx.send_if_modified(|current| {
            if *current == state {
                return false;
            }
            if state.now(real) < current.now(real) {
                tracing::warn!(
                    "ignoring a change of {CLOCK_NAMESPACE}/{CLOCK_CONFIGMAP} that moves the clock back"
                );
                return false;
            }
            *current = state;
            true
        });
    }

    /// Watches until `shutdown` fires. A deleted ConfigMap leaves the clock as it was
    /// (a cluster does not switch clocks while it runs).
    pub async fn run(self, shutdown: CancellationToken) {
        let api: Api<ConfigMap> = Api::namespaced(self.client, CLOCK_NAMESPACE);
        let config = watcher::Config::default().fields(&format!("metadata.name={CLOCK_CONFIGMAP}"));
        let stream = watcher(api, config).default_backoff();
        futures::pin_mut!(stream);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            let cm = match event {
                None => return,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "clock watch error (retrying)");
                    continue;
                }
                Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => cm,
                Some(Ok(_)) => continue,
            };
            match ClockState::from_data(&data_of(&cm)) {
                Ok(state) => Self::publish(&self.tx, state),
                Err(e) => tracing::warn!(error = %e, "ignoring an invalid cluster clock"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused_at(time: Timestamp) -> ClockState {
        ClockState {
            anchor: Timestamp::now(),
            ..ClockState::starting(time, 0.0)
        }
    }

    #[tokio::test]
    async fn a_paused_clock_sleeps_until_it_is_advanced() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let (tx, rx) = watch::channel(paused_at(start));
        let clock = VirtualClock::new(rx);
        assert_eq!(clock.wall(), start);
        let t0 = clock.now();
        let sleep = clock.sleep(Duration::from_secs(300));
        let handle = tokio::spawn(sleep);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !handle.is_finished(),
            "a paused clock must not wake a sleeper"
        );
        // Four minutes: still short of the deadline.
        ClockWatcher::publish(&tx, paused_at(start + jiff::SignedDuration::from_mins(4)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!handle.is_finished(), "woken before its deadline");
        ClockWatcher::publish(&tx, paused_at(start + jiff::SignedDuration::from_mins(5)));
        tokio::time::timeout(Duration::from_secs(5), handle)
            .await
            .expect("woken once the clock passed the deadline")
            .expect("sleeper task");
        assert_eq!(clock.now() - t0, Duration::from_secs(300));
    }

    #[tokio::test]
    async fn a_fast_clock_sleeps_for_a_fraction_of_the_time() {
        let start = Timestamp::now();
        let (_tx, rx) = watch::channel(ClockState::starting(start, 600.0));
        let clock = VirtualClock::new(rx);
        let real = std::time::Instant::now();
        // A minute of cluster time at 600×: a tenth of a second.
        tokio::time::timeout(Duration::from_secs(5), clock.sleep(Duration::from_secs(60)))
            .await
            .expect("a minute at 600x passes in well under 5 s");
        assert!(
            real.elapsed() >= Duration::from_millis(90),
            "{:?}",
            real.elapsed()
        );
    }

    #[tokio::test]
    async fn a_state_that_moves_the_clock_back_is_ignored() {
        let start: Timestamp = "2026-01-01T00:10:00Z".parse().expect("ts");
        let (tx, rx) = watch::channel(paused_at(start));
        let clock = VirtualClock::new(rx);
        ClockWatcher::publish(&tx, paused_at(start - jiff::SignedDuration::from_mins(5)));
        assert_eq!(clock.wall(), start);
    }
}
