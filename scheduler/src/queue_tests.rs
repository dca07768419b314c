use super::*;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("default"), name)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn backoff_doubles_up_to_ten_seconds() {
    let got: Vec<u64> = (1..=6).map(|a| backoff_duration(a).as_secs()).collect();
    assert_eq!(got, vec![1, 2, 4, 8, 10, 10]);
}

#[test]
fn active_queue_orders_by_priority_then_age() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("old-low"), 0, t0);
    q.add(key("new-high"), 100, t0 + secs(2));
    q.add(key("new-low"), 0, t0 + secs(1));
    let order: Vec<String> = std::iter::from_fn(|| q.pop(t0 + secs(3)))
        .map(|p| p.key.name)
        .collect();
    assert_eq!(order, vec!["new-high", "old-low", "new-low"]);
}

#[test]
fn a_pod_is_never_in_flight_twice() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("a"), 0, t0);
    let popped = q.pop(t0).expect("a is active");
    assert_eq!(popped.attempts, 1);
    // An informer update while in flight does not re-queue it.
    q.add(key("a"), 0, t0);
    q.update(key("a"), 0, t0);
    assert_eq!(q.pop(t0), None);
    assert_eq!(q.location(&key("a")), Some(Location::InFlight));
    q.done(&key("a"));
    assert_eq!(q.location(&key("a")), None);
}

#[test]
fn unschedulable_pods_wait_for_a_cluster_change_then_back_off() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("a"), 0, t0);
    q.pop(t0).expect("a");
    q.add_unschedulable_if_not_present(&key("a"), t0);
    assert_eq!(q.location(&key("a")), Some(Location::Unschedulable));
    // Nothing changes: it stays there, however long the scheduler polls (up to 5 min).
    assert_eq!(q.pop(t0 + secs(60)), None);
    // A node is added at t0 + 0.5 s: still in its 1 s backoff → backoffQ.
    q.move_all_to_active_or_backoff(t0 + Duration::from_millis(500));
    assert_eq!(q.location(&key("a")), Some(Location::Backoff));
    assert_eq!(q.next_backoff_expiry(), Some(t0 + secs(1)));
    assert_eq!(q.pop(t0 + Duration::from_millis(999)), None);
    let again = q.pop(t0 + secs(1)).expect("backoff expired");
    assert_eq!(again.attempts, 2);
    // Second failure: 2 s backoff; a node added after it moves it straight to active
    // once the backoff is over.
    q.add_unschedulable_if_not_present(&key("a"), t0 + secs(1));
    q.move_all_to_active_or_backoff(t0 + secs(4));
    assert_eq!(q.location(&key("a")), Some(Location::Active));
}

#[test]
fn a_move_request_during_the_attempt_sends_the_pod_to_backoff() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("a"), 0, t0);
    q.pop(t0).expect("a");
    // A node arrives while `a` is being scheduled against the old snapshot.
    q.move_all_to_active_or_backoff(t0);
    q.add_unschedulable_if_not_present(&key("a"), t0);
    assert_eq!(q.location(&key("a")), Some(Location::Backoff));
}

#[test]
fn leftover_unschedulable_pods_are_flushed_after_five_minutes() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("a"), 0, t0);
    q.pop(t0).expect("a");
    q.add_unschedulable_if_not_present(&key("a"), t0);
    q.flush_unschedulable_left_over(t0 + secs(299));
    assert_eq!(q.location(&key("a")), Some(Location::Unschedulable));
    q.flush_unschedulable_left_over(t0 + secs(301));
    assert_eq!(q.location(&key("a")), Some(Location::Active));
}

#[test]
fn deleted_pods_leave_every_sub_queue() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    q.add(key("a"), 0, t0);
    q.add(key("b"), 0, t0);
    q.delete(&key("a"));
    q.pop(t0).expect("b");
    q.delete(&key("b"));
    // A failure reported after the delete does not bring it back.
    q.add_unschedulable_if_not_present(&key("b"), t0);
    assert_eq!(q.lens(), (0, 0, 0, 0));
}

#[test]
fn only_pods_waiting_for_pods_move_when_a_pod_is_bound() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    for name in ["needs-db", "too-big"] {
        q.add(key(name), 0, t0);
        q.pop(t0).expect("queued");
        q.add_unschedulable_if_not_present(&key(name), t0);
    }
    q.note_waiting_for_pods(&key("needs-db"));
    // A pod is bound 2 s later: the affinity pod retries, the one lacking cpu waits on.
    assert_eq!(q.move_pods_waiting_for_pods(t0 + secs(2)), 1);
    assert_eq!(q.location(&key("needs-db")), Some(Location::Active));
    assert_eq!(q.location(&key("too-big")), Some(Location::Unschedulable));
    // Noted once, moved once: the next binding moves nothing.
    assert_eq!(q.move_pods_waiting_for_pods(t0 + secs(3)), 0);
    // A noted pod that left the unschedulable pods meanwhile is not moved.
    q.pop(t0 + secs(3)).expect("needs-db");
    q.add_unschedulable_if_not_present(&key("needs-db"), t0 + secs(3));
    q.note_waiting_for_pods(&key("needs-db"));
    q.delete(&key("needs-db"));
    assert_eq!(q.move_pods_waiting_for_pods(t0 + secs(4)), 0);
    assert_eq!(q.location(&key("needs-db")), None);
}

#[test]
fn claim_events_move_only_the_pods_their_hint_selects() {
    let t0 = Instant::now();
    let mut q = SchedulingQueue::new();
    for name in ["uses-data", "uses-logs", "too-big"] {
        q.add(key(name), 0, t0);
        q.pop(t0).expect("queued");
        q.add_unschedulable_if_not_present(&key(name), t0);
    }
    q.note_waiting_for_volumes(&key("uses-data"), vec!["data".into()]);
    q.note_waiting_for_volumes(&key("uses-logs"), vec!["logs".into()]);
    // Claim "data" created: only the pod using it retries.
    let hint = |claim: &'static str| {
        move |_: &ObjectKey, claims: &[String]| claims.iter().any(|c| c == claim)
    };
    assert_eq!(
        q.move_pods_waiting_for_volumes(t0 + secs(2), hint("data")),
        1
    );
    assert_eq!(q.location(&key("uses-data")), Some(Location::Active));
    assert_eq!(q.location(&key("uses-logs")), Some(Location::Unschedulable));
    assert_eq!(q.location(&key("too-big")), Some(Location::Unschedulable));
    // The other keeps waiting for its claim; a volume event (hint: always) moves it.
    assert_eq!(
        q.move_pods_waiting_for_volumes(t0 + secs(3), hint("data")),
        0
    );
    assert_eq!(
        q.move_pods_waiting_for_volumes(t0 + secs(3), |_, _| true),
        1
    );
    assert_eq!(q.location(&key("uses-logs")), Some(Location::Active));
    assert_eq!(q.location(&key("too-big")), Some(Location::Unschedulable));
}
