//! The base work queue: client-go's `util/workqueue/queue.go` (`Typed[T]`).
//!
//! Three collections under one lock give the two guarantees controllers rely on:
//!
//! ```text
//!   add(k):  k ∈ dirty?       → nothing (coalesced with the pending add)
//!            dirty += k; k ∈ processing? → wait for done(k) ; else queue.push(k)
//!   get():   k = queue.pop(); processing += k; dirty -= k
//!   done(k): processing -= k; k ∈ dirty? → queue.push(k)   (re-added while processing)
//! ```
//!
//! * a burst of events for one key is processed once (dedup via `dirty`), and
//! * a key is never handed to two workers at the same time (`processing`): an add that
//!   arrives while a worker holds the key is parked until `done`.
//!
//! Each add made while handling a traced event also records its [`Cause`] with the key (see
//! [`crate::trace`]); a key added several times before a worker takes it keeps every cause,
//! and the worker reads them with [`Queue::take_causes`] after `get`.
//!
//! A queue can be **paused** (miniplane's fault injection, no client-go counterpart): `get`
//! then hands out nothing, while adds still queue and merge; each granted **step** lets one
//! key through. That is how a lab watches a controller's queue pile up and then steps it.
//!
//! The delayed adds of [`super::delaying`] share the same lock: unlike client-go, which runs a
//! `waitingLoop` goroutine, waiting workers move ready items from the heap into the queue
//! themselves, so the queue owns no task.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use super::delaying::WaitingHeap;
use super::metrics::QueueMetrics;
use crate::clock::{SharedClock, TokioClock};
use crate::trace::{Cause, take_cause};

/// Causes kept per key: a hot key merging thousands of events keeps the first ones only.
const MAX_CAUSES_PER_KEY: usize = 32;

/// What a work queue can hold: usually an [`apimachinery::ObjectKey`].
pub trait QueueItem: Clone + Eq + Hash + Debug + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + Debug + Send + Sync + 'static> QueueItem for T {}

/// A work queue handle (cheap to clone; clones share the queue).
pub struct Queue<T: QueueItem> {
    shared: Arc<Shared<T>>,
}

impl<T: QueueItem> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Queue {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<T> {
    /// Queue name, the `name` label of the metrics (client-go: `"deployment"`, `"replicaset"`).
    name: String,
    state: Mutex<State<T>>,
    /// Wakes workers blocked in `get` (client-go's `cond.Signal`).
    ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set shrinks.
    drained: Notify,
    clock: SharedClock,
    metrics: Arc<QueueMetrics>,
}

struct State<T> {
    /// Keys ready for a worker, in order; each key at most once.
    queue: VecDeque<T>,
    /// Keys that need processing (queued, or re-added while being processed).
    dirty: HashSet<T>,
    /// Keys a worker holds between `get` and `done`.
    processing: HashSet<T>,
    shutting_down: bool,
    /// Items waiting for their ready time (`add_after`).
    waiting: WaitingHeap<T>,
    /// First add time of each dirty key, for the queue-wait metric.
    add_times: HashMap<T, Instant>,
    /// When each processing key was handed out, for the work-duration metric.
    processing_start: HashMap<T, Instant>,
    /// Why each queued key was added, when traced.
    causes: HashMap<T, Vec<Cause>>,
    /// Why each delayed key was added (`add_after`): they join `causes` when the delay ends,
    /// so a sync that runs before then does not take them.
    waiting_causes: HashMap<T, Vec<Cause>>,
    /// The causes of keys handed out, until the worker takes them or calls `done`.
    handed_causes: HashMap<T, Vec<Cause>>,
    /// Paused: `get` hands out only granted steps (ignored once shutting down, so a paused
    /// queue still drains).
    paused: bool,
    /// Steps granted while paused and not yet taken.
    steps: u64,
}

/// A point-in-time view of a queue, for the admin API (`/miniplane/v1/controllers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSnapshot<T> {
    /// Keys ready for a worker, in order (at most the limit asked for).
    pub queued: Vec<T>,
    /// Number of keys ready for a worker.
    pub depth: usize,
    /// Keys being processed (at most the limit asked for).
    pub processing: Vec<T>,
    /// Number of keys being processed.
    pub in_flight: usize,
    /// Keys waiting for their ready time (`add_after`).
    pub waiting: usize,
    /// Whether the queue is paused.
    pub paused: bool,
    /// Steps granted and not yet taken.
    pub steps_pending: u64,
}

/// Adds `cause` to `list` unless it is there already or the list is full.
fn push_cause(list: &mut Vec<Cause>, cause: Cause) {
    if list.len() < MAX_CAUSES_PER_KEY && !list.iter().any(|c| c.context == cause.context) {
        list.push(cause);
    }
}

impl<T: QueueItem> State<T> {
    fn remember_cause(&mut self, item: &T, cause: Option<Cause>) {
        if let Some(cause) = cause
            && !self.shutting_down
        {
            push_cause(self.causes.entry(item.clone()).or_default(), cause);
        }
    }

    fn remember_waiting_cause(&mut self, item: &T, cause: Option<Cause>) {
        if let Some(cause) = cause {
            push_cause(self.waiting_causes.entry(item.clone()).or_default(), cause);
        }
    }

    /// The delay of `item` ended: its delayed causes become queued causes, added now (the
    /// time in the queue counts from the end of the delay, as client-go's queue metrics do).
    fn delay_ended(&mut self, item: &T) {
        if let Some(waiting) = self.waiting_causes.remove(item) {
            let now = std::time::SystemTime::now();
            for cause in waiting {
                self.remember_cause(
                    item,
                    Some(Cause {
                        added: now,
                        ..cause
                    }),
                );
            }
        }
    }
}

impl<T: QueueItem> Queue<T> {
    /// A queue on the real clock.
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_clock(name, TokioClock::shared())
    }

    /// A queue on the given clock (a [`crate::FakeClock`] in tests).
    pub fn with_clock(name: impl Into<String>, clock: SharedClock) -> Self {
        let name = name.into();
        Queue {
            shared: Arc::new(Shared {
                metrics: Arc::new(QueueMetrics::new(name.clone())),
                name,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    shutting_down: false,
                    waiting: WaitingHeap::default(),
                    add_times: HashMap::new(),
                    processing_start: HashMap::new(),
                    causes: HashMap::new(),
                    waiting_causes: HashMap::new(),
                    handed_causes: HashMap::new(),
                    paused: false,
                    steps: 0,
                }),
                ready: Notify::new(),
                drained: Notify::new(),
                clock,
            }),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The queue's metrics, to be rendered by the process's metrics endpoint.
    pub fn metrics(&self) -> Arc<QueueMetrics> {
        self.shared.metrics.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state is plain collections; a panicking holder cannot leave it torn mid-update
        // in a way later calls cannot cope with, so recover from poisoning.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks `item` as needing processing. A no-op if it is already queued or the queue is
    /// shutting down; parked until `done` if a worker currently holds it.
    pub fn add(&self, item: T) {
        let cause = take_cause(&self.shared.name);
        let mut state = self.lock();
        state.remember_cause(&item, cause);
        if self.add_locked(&mut state, item) {
            drop(state);
            self.shared.ready.notify_one();
        }
    }

    /// `add` under the lock; true if the item was pushed to the ready queue.
    fn add_locked(&self, state: &mut State<T>, item: T) -> bool {
        if state.shutting_down || state.dirty.contains(&item) {
            return false;
        }
        self.shared.metrics.inc_adds();
        let now = self.shared.clock.now();
        state.add_times.entry(item.clone()).or_insert(now);
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            return false;
        }
        state.queue.push_back(item);
        self.shared.metrics.set_depth(state.queue.len());
        true
    }

    /// Moves delayed items whose time has come into the queue; returns how many were queued
    /// and the next ready time still waiting.
    fn pump_waiting(&self, state: &mut State<T>) -> (usize, Option<Instant>) {
        let now = self.shared.clock.now();
        let mut queued = 0;
        while let Some(item) = state.waiting.pop_ready(now) {
            state.delay_ended(&item);
            if self.add_locked(state, item) {
                queued += 1;
            }
        }
        (queued, state.waiting.next_ready_at())
    }

    /// Blocks until an item is ready and hands it out; the caller must call [`Queue::done`]
    /// with it. Returns `None` once the queue is shut down **and** empty (items queued before
    /// shutdown are still handed out, as in client-go).
    pub async fn get(&self) -> Option<T> {
        let span = tracing::debug_span!("workqueue.wait", queue = %self.shared.name);
        self.get_inner().instrument(span).await
    }

    async fn get_inner(&self) -> Option<T> {
        loop {
            let notified = self.shared.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_ready_at = {
                let mut state = self.lock();
                let (pumped, next_ready_at) = self.pump_waiting(&mut state);
                if let Some(item) = self.take_locked(&mut state) {
                    drop(state);
                    // Other workers may be parked: tell one per extra item we queued.
                    for _ in 1..pumped {
                        self.shared.ready.notify_one();
                    }
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
                next_ready_at
            };
            match next_ready_at {
                Some(at) => {
                    let sleep = self.shared.clock.sleep_until(at);
                    tokio::select! {
                        () = notified => {}
                        () = sleep => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    fn take_locked(&self, state: &mut State<T>) -> Option<T> {
        if state.paused && !state.shutting_down {
            if state.steps == 0 || state.queue.is_empty() {
                return None;
            }
            state.steps -= 1;
        }
        let item = state.queue.pop_front()?;
        let now = self.shared.clock.now();
        state.processing.insert(item.clone());
        state.dirty.remove(&item);
        state.processing_start.insert(item.clone(), now);
        if let Some(causes) = state.causes.remove(&item) {
            state.handed_causes.insert(item.clone(), causes);
        }
        self.shared.metrics.set_depth(state.queue.len());
        if let Some(added) = state.add_times.remove(&item) {
            let wait = now.saturating_duration_since(added);
            self.shared.metrics.observe_queue_duration(wait);
            tracing::debug!(queue = %self.shared.name, ?item, wait_seconds = wait.as_secs_f64(), "workqueue get");
        }
        Some(item)
    }

    /// Releases `item` after processing. If it was added again meanwhile, it goes back on the
    /// queue now.
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        state.processing.remove(item);
        state.handed_causes.remove(item);
        let now = self.shared.clock.now();
        if let Some(start) = state.processing_start.remove(item) {
            let work = now.saturating_duration_since(start);
            self.shared.metrics.observe_work_duration(work);
            tracing::debug!(queue = %self.shared.name, ?item, work_seconds = work.as_secs_f64(), "workqueue done");
        }
        let requeued = state.dirty.contains(item);
        if requeued {
            state.queue.push_back(item.clone());
            self.shared.metrics.set_depth(state.queue.len());
        }
        let idle = state.processing.is_empty();
        drop(state);
        if requeued {
            self.shared.ready.notify_one();
        }
        if idle {
            self.shared.drained.notify_waiters();
        }
    }

    /// Why `item` (just handed out by `get`) was queued: every traced add since it was last
    /// handed out, oldest first. Empty when nothing traced added it.
    pub fn take_causes(&self, item: &T) -> Vec<Cause> {
        self.lock().handed_causes.remove(item).unwrap_or_default()
    }

    /// A span for the work on `item`: instrument the sync with it so traces show the work
    /// next to the queue wait.
    pub fn work_span(&self, item: &T) -> tracing::Span {
        tracing::info_span!("workqueue.work", queue = %self.shared.name, item = ?item)
    }

    /// Number of items ready for a worker (client-go's `Len`; delayed items not yet due are
    /// not counted).
    pub fn len(&self) -> usize {
        let mut state = self.lock();
        self.pump_waiting(&mut state);
        state.queue.len()
    }

    /// True if no item is ready for a worker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting adds and wakes every waiting worker; `get` keeps handing out the items
    /// already queued and then returns `None`.
    pub fn shut_down(&self) {
        self.lock().shutting_down = true;
        self.shared.ready.notify_waiters();
    }

    /// [`Queue::shut_down`], then waits until every item handed out has been `done`.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.lock().processing.is_empty() {
                return;
            }
            drained.await;
        }
    }

    /// Pauses the queue: workers get nothing until [`Queue::resume`] or [`Queue::step`].
    pub fn pause(&self) {
        let mut state = self.lock();
        state.paused = true;
        state.steps = 0;
    }

    /// Ends a pause (and drops steps not taken).
    pub fn resume(&self) {
        {
            let mut state = self.lock();
            state.paused = false;
            state.steps = 0;
        }
        self.shared.ready.notify_waiters();
    }

    /// Lets `n` more keys through a paused queue (no effect when not paused).
    pub fn step(&self, n: u64) {
        {
            let mut state = self.lock();
            if !state.paused {
                return;
            }
            state.steps += n;
        }
        self.shared.ready.notify_waiters();
    }

    /// Whether the queue is paused.
    pub fn paused(&self) -> bool {
        self.lock().paused
    }

    /// The queue's keys and pause state, at most `limit` keys per list.
    pub fn snapshot(&self, limit: usize) -> QueueSnapshot<T> {
        let mut state = self.lock();
        self.pump_waiting(&mut state);
        QueueSnapshot {
            queued: state.queue.iter().take(limit).cloned().collect(),
            depth: state.queue.len(),
            processing: state.processing.iter().take(limit).cloned().collect(),
            in_flight: state.processing.len(),
            waiting: state.waiting.len(),
            paused: state.paused,
            steps_pending: state.steps,
        }
    }

    /// True once `shut_down` was called.
    pub fn shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Parks `item` until `duration` has passed on the queue's clock, then adds it. Several
    /// delayed adds of one item keep the **earliest** ready time (client-go's `AddAfter`).
    pub fn add_after(&self, item: T, duration: Duration) {
        if duration.is_zero() {
            return self.add(item);
        }
        let ready_at = self.shared.clock.now() + duration;
        let cause = take_cause(&self.shared.name);
        {
            let mut state = self.lock();
            if state.shutting_down {
                return;
            }
            state.remember_waiting_cause(&item, cause);
            state.waiting.insert(item, ready_at);
        }
        // A worker sleeping until a later ready time must re-arm for this one.
        self.shared.ready.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn dedups_queued_keys() {
        let q = Queue::new("test");
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.get().now_or_never().is_none(), "a third get must block");
        assert_eq!(q.metrics().adds(), 2);
    }

    #[tokio::test]
    async fn readd_while_processing_is_processed_again_after_done() {
        let q = Queue::new("test");
        q.add("a");
        let a = q.get().await;
        assert_eq!(a, Some("a"));
        q.add("a");
        q.add("a");
        assert_eq!(q.len(), 0, "a held key must not be handed out again");
        assert!(q.get().now_or_never().is_none());
        q.done(&"a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert_eq!(q.len(), 0);
    }

    #[tokio::test]
    async fn merged_adds_keep_every_cause_for_the_worker() {
        let q = Queue::new("test");
        let (a, b) = (
            trace::SpanContext::new_root(),
            trace::SpanContext::new_root(),
        );
        crate::trace::caused_by(a, || q.add("k"));
        crate::trace::caused_by(b, || q.add("k"));
        crate::trace::caused_by(a, || q.add("k"));
        q.add("k");
        assert_eq!(q.len(), 1, "merged into one item");
        let k = q.get().await.unwrap();
        let causes: Vec<_> = q.take_causes(&k).iter().map(|c| c.context).collect();
        assert_eq!(causes, [a, b], "each cause once, oldest first");
        // Added again while processing: the new cause waits for the next get.
        crate::trace::caused_by(b, || q.add("k"));
        q.done(&k);
        let k = q.get().await.unwrap();
        assert_eq!(q.take_causes(&k).len(), 1);
        q.done(&k);
        q.add("k");
        let k = q.get().await.unwrap();
        assert!(q.take_causes(&k).is_empty(), "an untraced add has no cause");
    }

    #[tokio::test]
    async fn a_delayed_cause_waits_for_its_delay() {
        let clock = crate::FakeClock::new();
        let q = Queue::with_clock("test", clock.shared());
        let (later, now) = (
            trace::SpanContext::new_root(),
            trace::SpanContext::new_root(),
        );
        crate::trace::caused_by(later, || q.add_after("k", Duration::from_secs(10)));
        crate::trace::caused_by(now, || q.add("k"));
        let k = q.get().await.unwrap();
        let causes: Vec<_> = q.take_causes(&k).iter().map(|c| c.context).collect();
        assert_eq!(causes, [now], "the delayed add has not happened yet");
        q.done(&k);
        clock.advance(Duration::from_secs(10));
        let k = q.get().await.unwrap();
        let causes: Vec<_> = q.take_causes(&k).iter().map(|c| c.context).collect();
        assert_eq!(causes, [later]);
    }

    #[tokio::test]
    async fn shutdown_hands_out_queued_items_then_none() {
        let q = Queue::new("test");
        q.add(1);
        q.shut_down();
        q.add(2);
        assert_eq!(q.get().await, Some(1));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test]
    async fn shutdown_wakes_blocked_workers() {
        let q: Queue<u32> = Queue::new("test");
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(worker.await.ok().flatten(), None);
    }

    #[tokio::test]
    async fn shutdown_with_drain_waits_for_done() {
        let q = Queue::new("test");
        q.add("a");
        let a = q.get().await.expect("queued");
        let mut drain = Box::pin(q.shut_down_with_drain());
        assert!(
            (&mut drain).now_or_never().is_none(),
            "drain must wait for done"
        );
        q.done(&a);
        drain.await;
    }

    /// Many workers, few keys, and every worker re-adds the key it holds (as a controller
    /// requeueing) plus the next one: the count of overlaps is non-zero if two workers ever
    /// hold the same key at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_hands_one_key_to_two_workers() {
        const KEYS: usize = 5;
        const ROUNDS: usize = 5000;
        let q: Queue<usize> = Queue::new("stress");
        let holders: Arc<Vec<AtomicUsize>> =
            Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
        // Counted rather than asserted in the worker, so a failure cannot leave a key held.
        let overlaps = Arc::new(AtomicUsize::new(0));
        let processed = Arc::new(AtomicUsize::new(0));
        (0..KEYS).for_each(|key| q.add(key));
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (q, holders) = (q.clone(), holders.clone());
            let (overlaps, processed) = (overlaps.clone(), processed.clone());
            workers.spawn(async move {
                while let Some(key) = q.get().await {
                    if holders[key].fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    q.add(key);
                    q.add((key + 1) % KEYS);
                    tokio::task::yield_now().await;
                    holders[key].fetch_sub(1, Ordering::SeqCst);
                    if processed.fetch_add(1, Ordering::SeqCst) + 1 >= ROUNDS {
                        q.shut_down();
                    }
                    q.done(&key);
                }
            });
        }
        let joined = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(result) = workers.join_next().await {
                result.expect("worker panicked");
            }
        })
        .await;
        assert!(joined.is_ok(), "workers did not finish");
        assert_eq!(
            overlaps.load(Ordering::SeqCst),
            0,
            "a key was handed to two workers at once"
        );
        assert!(processed.load(Ordering::SeqCst) >= ROUNDS);
    }

    #[tokio::test]
    async fn a_paused_queue_merges_adds_and_hands_out_one_key_per_step() {
        let q: Queue<&str> = Queue::new("test");
        q.pause();
        for key in ["a", "b", "a", "a"] {
            q.add(key);
        }
        let snap = q.snapshot(10);
        assert_eq!((snap.queued, snap.paused), (vec!["a", "b"], true));
        let blocked = tokio::time::timeout(Duration::from_millis(20), q.get()).await;
        assert!(blocked.is_err(), "a paused queue handed out a key");
        q.step(1);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.snapshot(10).steps_pending, 0);
        let blocked = tokio::time::timeout(Duration::from_millis(20), q.get()).await;
        assert!(blocked.is_err(), "one step let two keys through");
        q.done(&"a");
        q.resume();
        assert_eq!(q.get().await, Some("b"));
    }
}
