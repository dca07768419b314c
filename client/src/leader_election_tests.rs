//! Leader election on a fake clock and an in-memory Lease.

use super::*;
use crate::clock::{Clock, FakeClock};

fn elector(
    identity: &str,
    lock: &MemoryLeaseLock,
    clock: &FakeClock,
) -> LeaderElector<MemoryLeaseLock> {
    LeaderElector::new(
        LeaderElectionConfig::new(identity),
        lock.clone(),
        clock.shared(),
    )
}

#[tokio::test]
async fn acquires_a_missing_lease_and_renews_it() {
    let (clock, lock) = (FakeClock::new(), MemoryLeaseLock::new());
    let mut a = elector("a", &lock, &clock);
    let t0 = clock.wall();
    assert!(a.try_acquire_or_renew().await);
    let record = lock.record().expect("created");
    assert_eq!(record.holder_identity, "a");
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(
        (
            record.acquire_time,
            record.renew_time,
            record.leader_transitions
        ),
        (Some(t0), Some(t0), 0)
    );
    assert_eq!(*a.leader().borrow(), Some("a".to_string()));

    clock.advance(Duration::from_secs(2));
    assert!(a.try_acquire_or_renew().await);
    let renewed = lock.record().expect("renewed");
    assert_eq!(renewed.acquire_time, Some(t0), "renewal keeps acquireTime");
    assert_eq!(renewed.renew_time, Some(clock.wall()));
    assert_eq!(renewed.leader_transitions, 0);
}

#[tokio::test]
async fn another_candidate_takes_over_only_after_the_lease_expires() {
    let (clock, lock) = (FakeClock::new(), MemoryLeaseLock::new());
    let mut a = elector("a", &lock, &clock);
    let mut b = elector("b", &lock, &clock);
    assert!(a.try_acquire_or_renew().await);
    assert!(!b.try_acquire_or_renew().await, "a's lease is fresh");
    assert_eq!(*b.leader().borrow(), Some("a".to_string()));

    // a stops renewing. b judges expiry by its own clock since it first saw this record.
    clock.advance(Duration::from_secs(14));
    assert!(
        !b.try_acquire_or_renew().await,
        "14 s < 15 s lease duration"
    );
    clock.advance(Duration::from_secs(1));
    assert!(b.try_acquire_or_renew().await, "expired: b takes over");
    let record = lock.record().expect("taken over");
    assert_eq!(record.holder_identity, "b");
    assert_eq!(record.leader_transitions, 1);
    assert_eq!(record.acquire_time, Some(clock.wall()));

    // a wakes up: it sees b's fresh record and does not get the lease back.
    assert!(!a.try_acquire_or_renew().await);
    assert_eq!(
        lock.record().map(|r| r.holder_identity),
        Some("b".to_string())
    );
}

#[tokio::test]
async fn stale_resource_version_loses_the_race() {
    let (clock, lock) = (FakeClock::new(), MemoryLeaseLock::new());
    let mut a = elector("a", &lock, &clock);
    assert!(a.try_acquire_or_renew().await);
    let observed = lock.get().await.unwrap().unwrap();
    // Someone else writes first: an update against the old resourceVersion is a conflict.
    lock.update(observed.record.clone(), observed.resource_version.clone())
        .await
        .unwrap();
    let err = lock
        .update(observed.record, observed.resource_version)
        .await
        .unwrap_err();
    assert!(err.is_conflict());
}

/// Drives `run` on the fake clock: advance time whenever the elector is parked on it.
async fn drive<T>(
    clock: &FakeClock,
    task: &mut tokio::task::JoinHandle<T>,
    step: Duration,
    max_steps: usize,
) -> Option<T> {
    for _ in 0..max_steps {
        while clock.sleepers() == 0 && !task.is_finished() {
            tokio::task::yield_now().await;
        }
        if task.is_finished() {
            return Some(task.await.expect("run panicked"));
        }
        clock.advance(step);
    }
    None
}

#[tokio::test]
async fn leader_steps_down_when_renewals_fail_past_the_deadline() {
    let (clock, lock) = (FakeClock::new(), MemoryLeaseLock::new());
    let a = elector("a", &lock, &clock);
    let mut leading = a.is_leader();
    let shutdown = CancellationToken::new();
    let mut task = tokio::spawn(a.run(shutdown.clone()));
    leading.wait_for(|l| *l).await.expect("leads");
    let lost_from = clock.now();
    lock.set_unreachable(true);
    let result = drive(&clock, &mut task, Duration::from_secs(1), 60).await;
    assert!(
        matches!(result, Some(Ok(()))),
        "run returns after losing the lease"
    );
    assert!(!*leading.borrow());
    let waited = clock.now() - lost_from;
    assert!(
        waited >= Duration::from_secs(10) && waited <= Duration::from_secs(13),
        "{waited:?}"
    );
}

#[tokio::test]
async fn release_on_shutdown_lets_the_next_candidate_in_at_once() {
    let (clock, lock) = (FakeClock::new(), MemoryLeaseLock::new());
    let a = elector("a", &lock, &clock);
    let mut leading = a.is_leader();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(a.run(shutdown.clone()));
    leading.wait_for(|l| *l).await.expect("leads");
    shutdown.cancel();
    task.await.expect("run").expect("released");
    let released = lock.record().expect("record");
    assert_eq!(released.holder_identity, "");
    assert_eq!(released.lease_duration_seconds, 1);

    let mut b = elector("b", &lock, &clock);
    assert!(b.try_acquire_or_renew().await, "no need to wait 15 s");
    assert_eq!(lock.record().map(|r| r.leader_transitions), Some(1));
}
