//! Watches: a stream of change events from a revision on (etcd's `watchable_store.go`).
//!
//! A watcher is served from history (events older than "now" but not compacted) and then from
//! live writes, in revision order with no gap and no duplicate. Its buffer is bounded: a watcher
//! that does not keep up is ended with [`crate::Error::WatcherTooSlow`] rather than growing memory
//! or blocking writers.

use crate::{Event, KeyRange, Result, Revision};
use tokio::sync::mpsc;

/// What to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRequest {
    /// The key or prefix to watch.
    pub range: KeyRange,
    /// First revision to deliver; `None` means "changes after now" (current revision + 1).
    pub start_revision: Option<Revision>,
}

/// A batch of events, all of one or more consecutive revisions, in revision order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchResponse {
    /// The changes, in revision order (a transaction's changes share one revision).
    pub events: Vec<Event>,
}

/// The receiving end of a watch. Dropping it cancels the watch.
#[derive(Debug)]
pub struct Watcher {
    rx: mpsc::Receiver<Result<WatchResponse>>,
}

impl Watcher {
    /// Wraps the receiving end of a watcher's bounded channel (for backend implementations).
    pub fn from_receiver(rx: mpsc::Receiver<Result<WatchResponse>>) -> Self {
        Watcher { rx }
    }

    /// The next batch of events; `None` once the store has shut down. After an `Err` (for
    /// example [`crate::Error::WatcherTooSlow`]) the watch is over and yields `None`.
    pub async fn recv(&mut self) -> Option<Result<WatchResponse>> {
        self.rx.recv().await
    }
}
