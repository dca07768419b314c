//! Delayed adds: client-go's `util/workqueue/delaying_queue.go`.
//!
//! `add_after(item, d)` parks the item in a min-heap ordered by ready time. An item parked
//! twice keeps the **earliest** ready time (client-go updates the heap entry in place; here the
//! later entry is left in the heap and skipped when popped, because `earliest` no longer
//! points at it).
//!
//! ```text
//!   add_after(b, 3s) ─┐      heap (by ready time)         queue
//!   add_after(a, 1s) ─┼──▶  [a@1s, b@3s]   ──now ≥ 1s──▶  [a]
//!   add_after(a, 5s) ─┘     (a keeps 1s)   ──now ≥ 3s──▶  [a, b]
//! ```
//!
//! The `add_after` method itself lives on [`super::Queue`], which shares its lock with the
//! heap; workers blocked in `get` sleep until the earliest ready time (unlike client-go's
//! `waitingLoop` goroutine with its 10 s maximum wait, no task is spawned).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

/// Items waiting for their ready time.
#[derive(Debug)]
pub struct WaitingHeap<T> {
    heap: BinaryHeap<Waiting<T>>,
    /// The earliest ready time of each parked item; heap entries that disagree are stale.
    earliest: HashMap<T, Instant>,
    /// Insertion counter: equal ready times pop in insertion order.
    seq: u64,
}

impl<T> Default for WaitingHeap<T> {
    fn default() -> Self {
        WaitingHeap {
            heap: BinaryHeap::new(),
            earliest: HashMap::new(),
            seq: 0,
        }
    }
}

#[derive(Debug)]
struct Waiting<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Waiting<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.ready_at, self.seq) == (other.ready_at, other.seq)
    }
}
impl<T> Eq for Waiting<T> {}
impl<T> PartialOrd for Waiting<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Waiting<T> {
    // Reversed: `BinaryHeap` is a max-heap, we want the earliest ready time on top.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

impl<T: Clone + Eq + Hash> WaitingHeap<T> {
    /// Parks `item` until `ready_at`, unless it is already parked with an earlier time.
    pub fn insert(&mut self, item: T, ready_at: Instant) {
        if let Some(existing) = self.earliest.get(&item)
            && *existing <= ready_at
        {
            return;
        }
        self.earliest.insert(item.clone(), ready_at);
        self.seq += 1;
        self.heap.push(Waiting {
            ready_at,
            seq: self.seq,
            item,
        });
    }

    /// Removes and returns the next item whose ready time is at or before `now`.
    pub fn pop_ready(&mut self, now: Instant) -> Option<T> {
        while let Some(top) = self.heap.peek() {
            if top.ready_at > now {
                return None;
            }
            let entry = self.heap.pop()?;
            if self.earliest.get(&entry.item) == Some(&entry.ready_at) {
                self.earliest.remove(&entry.item);
                return Some(entry.item);
            }
            // Stale entry: superseded by an earlier ready time already handed out.
        }
        None
    }

    /// The earliest ready time among parked items.
    pub fn next_ready_at(&mut self) -> Option<Instant> {
        // Drop stale entries on top so the answer is a real item's time.
        while let Some(top) = self.heap.peek() {
            if self.earliest.get(&top.item) == Some(&top.ready_at) {
                return Some(top.ready_at);
            }
            self.heap.pop();
        }
        None
    }

    /// Number of parked items.
    pub fn len(&self) -> usize {
        self.earliest.len()
    }

    /// True if nothing is parked.
    pub fn is_empty(&self) -> bool {
        self.earliest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Queue;
    use super::*;
    use crate::clock::FakeClock;
    use futures::FutureExt;
    use std::time::Duration;

    #[test]
    fn heap_pops_by_ready_time_and_keeps_earliest() {
        let t0 = Instant::now();
        let mut heap = WaitingHeap::default();
        heap.insert("b", t0 + Duration::from_secs(3));
        heap.insert("a", t0 + Duration::from_secs(1));
        heap.insert("a", t0 + Duration::from_secs(5));
        heap.insert("c", t0 + Duration::from_secs(2));
        heap.insert("c", t0 + Duration::from_millis(500));
        assert_eq!(heap.len(), 3);
        assert_eq!(heap.next_ready_at(), Some(t0 + Duration::from_millis(500)));
        let late = t0 + Duration::from_secs(10);
        let order: Vec<_> = std::iter::from_fn(|| heap.pop_ready(late)).collect();
        assert_eq!(order, vec!["c", "a", "b"]);
        assert!(heap.is_empty());
        assert_eq!(heap.next_ready_at(), None);
    }

    #[tokio::test]
    async fn delayed_adds_become_ready_in_time_order() {
        let clock = FakeClock::new();
        let q = Queue::with_clock("delayed", clock.shared());
        q.add_after("slow", Duration::from_secs(3));
        q.add_after("fast", Duration::from_secs(1));
        q.add_after("now", Duration::ZERO);
        assert_eq!(q.get().await, Some("now"));
        assert!(q.get().now_or_never().is_none(), "nothing else is due yet");
        clock.advance(Duration::from_secs(1));
        assert_eq!(q.get().await, Some("fast"));
        clock.advance(Duration::from_millis(1999));
        assert_eq!(q.len(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.get().await, Some("slow"));
    }

    #[tokio::test]
    async fn blocked_worker_wakes_when_delay_passes() {
        let clock = FakeClock::new();
        let q: Queue<&str> = Queue::with_clock("delayed", clock.shared());
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        q.add_after("x", Duration::from_secs(10));
        // Wait (without sleeping) until the worker is parked on the clock.
        while clock.sleepers() == 0 {
            tokio::task::yield_now().await;
        }
        clock.advance(Duration::from_secs(10));
        assert_eq!(worker.await.ok().flatten(), Some("x"));
    }
}
