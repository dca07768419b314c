//! The scheduling queue (`pkg/scheduler/backend/queue/scheduling_queue.go`, formerly
//! `internal/queue`): which pending pod to try next, and when to retry one that failed.
//!
//! ```text
//!         add ─────────────▶ activeQ (priority desc, then oldest first)
//!                              │ pop → in flight (never two attempts of one pod at once)
//!                              ▼
//!                   ┌── done ◀─ scheduled and bound
//!   in flight ──────┤
//!                   └── add_unschedulable_if_not_present
//!                         │ a move request came during the attempt → backoffQ
//!                         └ otherwise → unschedulable pods
//!   unschedulable ── move_all_to_active_or_backoff (node added/updated, pod deleted)
//!                 ├─ move_pods_waiting_for_pods (pod bound or relabelled; only pods that
//!                 │  InterPodAffinity or PodTopologySpread rejected)
//!                 ├─ move_pods_waiting_for_volumes (claim, volume or storage class added or
//!                 │  updated; only pods VolumeBinding rejected, by its queueing hints)
//!                 └─ flush_unschedulable_left_over (after 5 min) ──▶ backoffQ or activeQ
//!   backoffQ ── flush_backoff_completed (backoff 1 s, 2 s, 4 s … 10 s elapsed) ──▶ activeQ
//! ```
//!
//! Sans-IO: pods are held by key with the few fields ordering needs (the shell reads the
//! latest pod from its informer when it pops one), and every operation takes `now`.
//! Unlike Kubernetes 1.33 there are no queueing hints (any node event or pod deletion moves
//! every unschedulable pod, as before hints; a pod bound moves only those the two pod-aware
//! plugins rejected; a claim, volume or class event only those VolumeBinding rejected, with
//! its hints) and no PreEnqueue plugins (scheduling gates).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use apimachinery::ObjectKey;
use tokio::time::Instant;

/// `DefaultPodInitialBackoffDuration`.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// `DefaultPodMaxBackoffDuration`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// `DefaultPodMaxInUnschedulablePodsDuration`.
pub const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

/// Where a pod is in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Ready to be popped.
    Active,
    /// Waiting for its backoff to expire.
    Backoff,
    /// Failed; waits for a cluster change (or the 5 min flush).
    Unschedulable,
    /// Popped and being scheduled or bound.
    InFlight,
}

/// A pod in the queue (`QueuedPodInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPodInfo {
    /// The pod.
    pub key: ObjectKey,
    /// `spec.priority` (higher first).
    pub priority: i32,
    /// When it entered its current sub-queue (ordering, backoff and flush start from it).
    pub timestamp: Instant,
    /// Scheduling attempts so far (sets the backoff).
    pub attempts: u32,
    /// The scheduling cycle of its last pop.
    pub scheduling_cycle: u64,
    /// Where it is.
    pub location: Location,
}

/// The scheduling queue (`PriorityQueue`).
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    pods: HashMap<ObjectKey, QueuedPodInfo>,
    /// activeQ: ordered by (priority desc, timestamp, insertion sequence).
    active: BTreeMap<(Reverse<i32>, Instant, u64), ObjectKey>,
    /// backoffQ: ordered by backoff expiry.
    backoff: BTreeMap<(Instant, u64), ObjectKey>,
    /// Sort keys of pods in activeQ/backoffQ, to remove them.
    sort_keys: HashMap<ObjectKey, (Reverse<i32>, Instant, u64)>,
    seq: u64,
    /// Incremented by every pop.
    scheduling_cycle: u64,
    /// The scheduling cycle at the last move request: pods that failed in an attempt that
    /// started before it may have missed the change, so they go to backoffQ, not unschedulable.
    move_request_cycle: u64,
    /// Unschedulable pods that InterPodAffinity or PodTopologySpread rejected somewhere: a pod
    /// bound elsewhere may let them fit. Drained by [`SchedulingQueue::move_pods_waiting_for_pods`];
    /// a key whose pod left the unschedulable pods meanwhile is dropped then.
    waiting_for_pods: HashSet<ObjectKey>,
    /// Unschedulable pods that VolumeBinding rejected, with the names of the claims they use
    /// (for its PersistentVolumeClaim queueing hint). Drained by
    /// [`SchedulingQueue::move_pods_waiting_for_volumes`].
    waiting_for_volumes: HashMap<ObjectKey, Vec<String>>,
}

/// Backoff after `attempts` failures: 1 s doubled per further attempt, at most 10 s.
pub fn backoff_duration(attempts: u32) -> Duration {
    let mut duration = INITIAL_BACKOFF;
    for _ in 1..attempts {
        duration *= 2;
        if duration > MAX_BACKOFF {
            return MAX_BACKOFF;
        }
    }
    duration
}

impl SchedulingQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where `key` is, if queued.
    pub fn location(&self, key: &ObjectKey) -> Option<Location> {
        self.pods.get(key).map(|p| p.location)
    }

    /// Pods per location: (active, backoff, unschedulable, in flight).
    pub fn lens(&self) -> (usize, usize, usize, usize) {
        let count = |l| self.pods.values().filter(|p| p.location == l).count();
        (
            self.active.len(),
            self.backoff.len(),
            count(Location::Unschedulable),
            count(Location::InFlight),
        )
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Takes `key` out of activeQ/backoffQ (not out of `pods`).
    fn unlink(&mut self, key: &ObjectKey) {
        if let Some(sort) = self.sort_keys.remove(key) {
            self.active.remove(&sort);
            self.backoff.remove(&(sort.1, sort.2));
        }
    }

    fn push_active(&mut self, mut info: QueuedPodInfo) {
        let sort = (Reverse(info.priority), info.timestamp, self.next_seq());
        self.active.insert(sort, info.key.clone());
        self.sort_keys.insert(info.key.clone(), sort);
        info.location = Location::Active;
        self.pods.insert(info.key.clone(), info);
    }

    fn push_backoff(&mut self, mut info: QueuedPodInfo) {
        let expiry = info.timestamp + backoff_duration(info.attempts);
        let seq = self.next_seq();
        self.backoff.insert((expiry, seq), info.key.clone());
        self.sort_keys
            .insert(info.key.clone(), (Reverse(info.priority), expiry, seq));
        info.location = Location::Backoff;
        self.pods.insert(info.key.clone(), info);
    }

    fn is_backing_off(info: &QueuedPodInfo, now: Instant) -> bool {
        info.timestamp + backoff_duration(info.attempts) > now
    }

    /// A new pending pod (`Add`); an already queued pod is updated instead.
    pub fn add(&mut self, key: ObjectKey, priority: i32, now: Instant) {
        if self.pods.contains_key(&key) {
            self.update(key, priority, now);
            return;
        }
        self.push_active(QueuedPodInfo {
            key,
            priority,
            timestamp: now,
            attempts: 0,
            scheduling_cycle: 0,
            location: Location::Active,
        });
    }

    /// The pod's spec or metadata changed (`Update`; status-only changes should not be
    /// passed in). An unschedulable pod may fit now, so it is moved to backoffQ or activeQ;
    /// a pod in flight is left alone.
    pub fn update(&mut self, key: ObjectKey, priority: i32, now: Instant) {
        let Some(mut info) = self.pods.remove(&key) else {
            return self.add(key, priority, now);
        };
        self.unlink(&key);
        info.priority = priority;
        match info.location {
            Location::InFlight => {
                self.pods.insert(key, info);
            }
            Location::Active => self.push_active(info),
            Location::Backoff => self.push_backoff(info),
            Location::Unschedulable if Self::is_backing_off(&info, now) => self.push_backoff(info),
            Location::Unschedulable => self.push_active(info),
        }
    }

    /// The pod was deleted or got bound by someone else (`Delete`).
    pub fn delete(&mut self, key: &ObjectKey) {
        self.unlink(key);
        self.pods.remove(key);
    }

    /// The next pod to schedule, now in flight (`Pop`); backoffs that expired by `now` are
    /// flushed first.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPodInfo> {
        self.flush_backoff_completed(now);
        let (sort, key) = self.active.pop_first()?;
        self.sort_keys.remove(&key);
        let _ = sort;
        self.scheduling_cycle += 1;
        let info = self.pods.get_mut(&key)?;
        info.location = Location::InFlight;
        info.attempts += 1;
        info.scheduling_cycle = self.scheduling_cycle;
        Some(info.clone())
    }

    /// The attempt for `key` is over and the pod is placed (`Done`): it leaves the queue.
    pub fn done(&mut self, key: &ObjectKey) {
        if self.location(key) == Some(Location::InFlight) {
            self.pods.remove(key);
        }
    }

    /// The attempt for `key` failed (`AddUnschedulableIfNotPresent`): to backoffQ if a move
    /// request came while it was in flight, else to the unschedulable pods. Ignored unless
    /// the pod is in flight (a pod deleted meanwhile is not brought back).
    pub fn add_unschedulable_if_not_present(&mut self, key: &ObjectKey, now: Instant) {
        let Some(mut info) = self.pods.remove(key) else {
            return;
        };
        if info.location != Location::InFlight {
            self.pods.insert(key.clone(), info);
            return;
        }
        info.timestamp = now;
        if self.move_request_cycle >= info.scheduling_cycle {
            self.push_backoff(info);
        } else {
            info.location = Location::Unschedulable;
            self.pods.insert(key.clone(), info);
        }
    }

    /// Notes that the failed attempt for `key` was rejected by InterPodAffinity or
    /// PodTopologySpread on some node: those plugins register for `AssignedPodAdd`, so the
    /// pod is moved when a pod is bound (Kubernetes keeps the rejecting plugins in
    /// `QueuedPodInfo.UnschedulablePlugins` for the same purpose).
    pub fn note_waiting_for_pods(&mut self, key: &ObjectKey) {
        self.waiting_for_pods.insert(key.clone());
    }

    /// A pod was bound, or a bound pod's labels changed (`AssignedPodAdd`/`Update`): the
    /// unschedulable pods noted by [`SchedulingQueue::note_waiting_for_pods`] go to backoffQ
    /// or activeQ, as the two plugins' queueing hints may allow. Returns how many moved; costs
    /// nothing when no pod waits (the common case, on every binding).
    pub fn move_pods_waiting_for_pods(&mut self, now: Instant) -> usize {
        if self.waiting_for_pods.is_empty() {
            return 0;
        }
        let keys: Vec<ObjectKey> = std::mem::take(&mut self.waiting_for_pods)
            .into_iter()
            .filter(|k| self.location(k) == Some(Location::Unschedulable))
            .collect();
        let moved = keys.len();
        self.move_to_active_or_backoff(keys, now);
        moved
    }

    /// Notes that the failed attempt for `key` was rejected by VolumeBinding: a claim, volume or
    /// storage class event may let it fit (the plugin's `EventsToRegister`); `claims` are the
    /// claim names the pod uses.
    pub fn note_waiting_for_volumes(&mut self, key: &ObjectKey, claims: Vec<String>) {
        self.waiting_for_volumes.insert(key.clone(), claims);
    }

    /// A claim, volume or storage class was added or updated: the unschedulable pods noted by
    /// [`SchedulingQueue::note_waiting_for_volumes`] for which `may_help(pod, claims)` (the
    /// event's queueing hint) go to backoffQ or activeQ; the others keep waiting. Returns how
    /// many moved.
    pub fn move_pods_waiting_for_volumes(
        &mut self,
        now: Instant,
        may_help: impl Fn(&ObjectKey, &[String]) -> bool,
    ) -> usize {
        if self.waiting_for_volumes.is_empty() {
            return 0;
        }
        let mut keys = Vec::new();
        let waiting = std::mem::take(&mut self.waiting_for_volumes);
        for (key, claims) in waiting {
            if self.location(&key) != Some(Location::Unschedulable) {
                continue;
            }
            if may_help(&key, &claims) {
                keys.push(key);
            } else {
                self.waiting_for_volumes.insert(key, claims);
            }
        }
        let moved = keys.len();
        self.move_to_active_or_backoff(keys, now);
        moved
    }

    /// A cluster change that may make pods fit (`MoveAllToActiveOrBackoffQueue`): every
    /// unschedulable pod goes to backoffQ (if still backing off) or activeQ.
    pub fn move_all_to_active_or_backoff(&mut self, now: Instant) {
        let keys: Vec<ObjectKey> = self
            .pods
            .values()
            .filter(|p| p.location == Location::Unschedulable)
            .map(|p| p.key.clone())
            .collect();
        self.move_to_active_or_backoff(keys, now);
        self.move_request_cycle = self.scheduling_cycle;
    }

    fn move_to_active_or_backoff(&mut self, keys: Vec<ObjectKey>, now: Instant) {
        for key in keys {
            let Some(info) = self.pods.remove(&key) else {
                continue;
            };
            if Self::is_backing_off(&info, now) {
                self.push_backoff(info);
            } else {
                self.push_active(info);
            }
        }
    }

    /// Moves pods whose backoff expired by `now` to activeQ (`flushBackoffQCompleted`).
    pub fn flush_backoff_completed(&mut self, now: Instant) {
        while let Some(entry) = self.backoff.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.sort_keys.remove(&key);
            if let Some(info) = self.pods.remove(&key) {
                self.push_active(info);
            }
        }
    }

    /// Moves pods unschedulable for longer than 5 minutes (`flushUnschedulablePodsLeftover`).
    pub fn flush_unschedulable_left_over(&mut self, now: Instant) {
        let keys: Vec<ObjectKey> = self
            .pods
            .values()
            .filter(|p| {
                p.location == Location::Unschedulable && now - p.timestamp > MAX_IN_UNSCHEDULABLE
            })
            .map(|p| p.key.clone())
            .collect();
        self.move_to_active_or_backoff(keys, now);
    }

    /// When the earliest backoff expires (the shell sleeps until then at most).
    pub fn next_backoff_expiry(&self) -> Option<Instant> {
        self.backoff.first_key_value().map(|((at, _), _)| *at)
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
