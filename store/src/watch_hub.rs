//! The watch hub: fans committed events out to watchers, replaying history for watchers that
//! start in the past (etcd's `server/storage/mvcc/watchable_store.go` and `watcher_group.go`).
//!
//! As in etcd, a watcher is in one of two groups:
//!
//! ```text
//!                    start <= published                 caught up to `published`
//!   watch(start) ───────────────────────▶ unsynced ──────────────────────────────▶ synced
//!        │          (catch-up task reads history     (checked and moved under the hub lock,
//!        │           in chunks, awaits channel room)  so no revision is missed or repeated)
//!        └── start > published ─────────────────────────────────────────────────▶ synced
//!
//!   syncer ──── publish(events, rev) ──▶ every synced watcher: try_send (never blocks)
//!                                         full ⇒ Err(WatcherTooSlow), watcher dropped
//! ```
//!
//! * **No gap, no duplicate at the switch-over.** A catch-up task reads history only up to the
//!   `published` revision it saw, and joins the synced group only if, under the hub lock,
//!   `published` has not moved past what it delivered; otherwise it reads the difference first.
//!   Events at or below `published` are always readable from history: a backend publishes a
//!   revision only after storing it (the durable store's history reads wait for its indexer
//!   to reach the revision they read).
//! * **Bounded.** Each watcher has a channel of `buffer + 1` responses. Sends of events always
//!   leave one slot free, so a watcher that falls behind can still be told
//!   [`Error::WatcherTooSlow`] before its channel closes. Writers never wait on watchers.
//! * **Cheap fan-out.** Events hold [`bytes::Bytes`], so handing one to many watchers is a
//!   reference-count increment, and one `publish` call hands a whole commit batch over at once.
//!
//! Unlike etcd, a slow synced watcher is cancelled instead of being parked as a "victim" and
//! retried; its client resumes with a new watch from the last revision it saw.

use crate::{Error, Event, KeyRange, Result, Revision, WatchResponse, Watcher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How many revisions a catch-up task reads from history in one go.
const CATCH_UP_CHUNK: u64 = 512;

/// Where a catch-up task reads history from.
pub(crate) trait EventSource: Send + Sync + 'static {
    /// Every event with `from <= revision <= to` whose key is in `range`, in revision order.
    /// Fails with [`Error::Compacted`] if `from` is below the compaction point.
    fn events(&self, range: &KeyRange, from: Revision, to: Revision) -> Result<Vec<Event>>;
}

type WatchTx = mpsc::Sender<Result<WatchResponse>>;

/// A watcher that receives events straight from `publish`.
struct Synced {
    range: KeyRange,
    /// First revision this watcher still needs; older published events are skipped.
    next: Revision,
    tx: WatchTx,
}

struct HubState {
    /// Highest revision handed to `publish`.
    published: Revision,
    synced: Vec<Synced>,
    closed: bool,
}

/// Shared by the hub and its catch-up tasks.
struct Shared {
    state: Mutex<HubState>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        // A panic while holding this lock leaves the watcher list consistent (every mutation is
        // a push or a retain), so a poisoned lock is safe to keep using.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Fan-out of committed events to watchers (see the module docs).
pub(crate) struct WatchHub {
    shared: Arc<Shared>,
    /// Responses a watcher may have queued before it counts as too slow.
    buffer: usize,
    /// Owns the catch-up tasks so `close` can wait for them.
    tasks: TaskTracker,
    /// Tells catch-up tasks to stop at shutdown.
    shutdown: CancellationToken,
}

impl WatchHub {
    /// A hub whose last published revision is `published`, with `buffer` responses per watcher.
    pub(crate) fn new(published: Revision, buffer: usize) -> Self {
        WatchHub {
            shared: Arc::new(Shared {
                state: Mutex::new(HubState {
                    published,
                    synced: Vec::new(),
                    closed: false,
                }),
            }),
            buffer: buffer.max(1),
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// Starts a watch delivering every event from `start` on. The caller has already checked
    /// `start` against the compaction point. Must be called inside a Tokio runtime.
    pub(crate) fn watch(
        &self,
        source: Arc<dyn EventSource>,
        range: KeyRange,
        start: Revision,
    ) -> Result<Watcher> {
        let (tx, rx) = mpsc::channel(self.buffer + 1);
        let mut state = self.shared.lock();
        if state.closed {
            return Err(Error::Closed);
        }
        if start > state.published {
            state.synced.push(Synced {
                range,
                next: start,
                tx,
            });
        } else {
            drop(state);
            let task = CatchUp {
                shared: self.shared.clone(),
                source,
                range,
                next: start,
                tx,
                shutdown: self.shutdown.clone(),
            };
            self.tasks.spawn(task.run());
        }
        Ok(Watcher::from_receiver(rx))
    }

    /// Hands the events of revisions up to `revision` to the synced watchers. Events must be
    /// in revision order and every revision up to `revision` must already be readable by
    /// catch-up tasks. Never blocks on a watcher.
    pub(crate) fn publish(&self, events: &[Event], revision: Revision) {
        let mut state = self.shared.lock();
        state.published = state.published.max(revision);
        state.synced.retain_mut(|w| deliver(w, events, revision));
    }

    /// Ends every watch (their channels close) and waits for the catch-up tasks.
    pub(crate) async fn close(&self) {
        {
            let mut state = self.shared.lock();
            state.closed = true;
            state.synced.clear();
        }
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Stops catch-up tasks without waiting (for `Drop` of a backend that was not closed).
    pub(crate) fn cancel(&self) {
        self.shared.lock().closed = true;
        self.shutdown.cancel();
    }
}

/// Sends one watcher its share of `events`; returns whether it stays registered.
fn deliver(w: &mut Synced, events: &[Event], revision: Revision) -> bool {
    let matching: Vec<Event> = events
        .iter()
        .filter(|e| e.kv.mod_revision >= w.next && w.range.contains(&e.kv.key))
        .cloned()
        .collect();
    w.next = w.next.max(revision.next());
    if w.tx.is_closed() {
        return false;
    }
    if matching.is_empty() {
        return true;
    }
    if w.tx.capacity() < 2 {
        // The last slot is reserved for this error, so it always fits.
        let _ = w.tx.try_send(Err(Error::WatcherTooSlow));
        return false;
    }
    w.tx.try_send(Ok(WatchResponse { events: matching }))
        .is_ok()
}

/// An unsynced watcher: replays history until it reaches the published revision.
struct CatchUp {
    shared: Arc<Shared>,
    source: Arc<dyn EventSource>,
    range: KeyRange,
    next: Revision,
    tx: WatchTx,
    shutdown: CancellationToken,
}

impl CatchUp {
    async fn run(mut self) {
        loop {
            let target = self.shared.lock().published;
            while self.next <= target {
                let to = Revision((self.next.0 + CATCH_UP_CHUNK - 1).min(target.0));
                let events = match self.source.events(&self.range, self.next, to) {
                    Ok(events) => events,
                    Err(e) => {
                        self.send(Err(e)).await;
                        return;
                    }
                };
                self.next = to.next();
                if !events.is_empty() && !self.send(Ok(WatchResponse { events })).await {
                    return;
                }
            }
            let mut state = self.shared.lock();
            if state.closed {
                return;
            }
            if state.published < self.next {
                state.synced.push(Synced {
                    range: self.range,
                    next: self.next,
                    tx: self.tx,
                });
                return;
            }
        }
    }

    /// Waits for room (keeping the reserved slot free) and sends; false if the watch is over.
    async fn send(&self, item: Result<WatchResponse>) -> bool {
        tokio::select! {
            permits = self.tx.reserve_many(2) => match permits {
                Ok(mut permits) => match permits.next() {
                    Some(permit) => {
                        permit.send(item);
                        true
                    }
                    None => false,
                },
                Err(_) => false,
            },
            () = self.shutdown.cancelled() => false,
        }
    }
}
