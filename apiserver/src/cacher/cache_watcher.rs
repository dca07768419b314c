//! One client's watch: the events of one resource after a revision, from the cacher's ring
//! and then its fan-out, or from the store's history until the client has caught up with the
//! ring.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go`
//! (`cacheWatcher`: a bounded buffer per watcher; a watcher that does not keep up is closed,
//! never waited for) and the fallback of `cacher.go`'s `Watch` to the store for a
//! resourceVersion older than the cache holds.

use super::watch_cache::{CachedEvent, convert};
use std::collections::VecDeque;
use std::sync::Arc;
use store::{Revision, Watcher};
use tokio::sync::mpsc;

/// Events queued for one client before it is cut off as too slow (kube-apiserver's cacheWatcher
/// buffers up to 1,000 for a watch without an index, then waits briefly before closing it).
pub const DEFAULT_CLIENT_BUFFER: usize = 1024;

/// Where a watch served from the store's history joins the shared cache ([`super::Cacher`]).
pub(super) trait Subscribe: Send + Sync {
    /// A subscription for a client that has seen every event up to `after`, or `None` while
    /// the ring does not reach back that far.
    fn subscribe(&self, after: Revision, buffer: usize) -> Option<Source>;
}

/// Why a watch stream stopped delivering events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// The start revision has been compacted: the client must re-list (410 Expired).
    TooOld {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still available.
        oldest: Revision,
    },
}

pub(super) enum Source {
    Cached {
        backlog: VecDeque<Arc<CachedEvent>>,
        rx: mpsc::Receiver<Arc<CachedEvent>>,
    },
    Store {
        watcher: Watcher,
        pending: VecDeque<Arc<CachedEvent>>,
        /// The resource's cacher, joined as soon as the client has caught up with its ring.
        cacher: Arc<dyn Subscribe>,
        /// The client buffer to subscribe with.
        buffer: usize,
    },
}

/// The events of one resource after a revision, for one client.
pub struct EventStream {
    pub(super) source: Source,
    pub(super) after: Revision,
    pub(super) requested: Revision,
}

impl EventStream {
    /// Whether the cache has cut this stream off (a client too slow to keep its buffer from
    /// filling): the events already queued are all it will get.
    pub fn is_cut_off(&self) -> bool {
        match &self.source {
            Source::Cached { rx, .. } => rx.is_closed(),
            Source::Store { .. } => false,
        }
    }

    /// The next event; `None` when the stream is over (cut off, store closed), `Some(Err)` when
    /// the start revision is too old.
    pub async fn next(&mut self) -> Option<Result<Arc<CachedEvent>, StreamEnd>> {
        loop {
            let ev = match &mut self.source {
                Source::Cached { backlog, rx } => match backlog.pop_front() {
                    Some(ev) => ev,
                    None => rx.recv().await?,
                },
                Source::Store {
                    watcher,
                    pending,
                    cacher,
                    buffer,
                } => match pending.pop_front() {
                    Some(ev) => ev,
                    // Caught up with the cacher's window: go on from the shared cache (each
                    // event decoded and encoded once for all its clients) and drop the store
                    // watch, which decodes every event (and its previous version) for this
                    // client alone.
                    None => match cacher.subscribe(self.after, *buffer) {
                        Some(cached) => {
                            self.source = cached;
                            continue;
                        }
                        None => match watcher.recv().await? {
                            Ok(resp) => {
                                pending.extend(
                                    resp.events.into_iter().filter_map(convert).map(Arc::new),
                                );
                                continue;
                            }
                            Err(store::Error::Compacted { compacted, .. }) => {
                                return Some(Err(StreamEnd::TooOld {
                                    requested: self.requested,
                                    oldest: compacted,
                                }));
                            }
                            Err(_) => return None,
                        },
                    },
                },
            };
            // The cacher may still deliver events the client has already seen in its list.
            if ev.revision > self.after {
                self.after = ev.revision;
                return Some(Ok(ev));
            }
        }
    }

    /// The revision of the last event delivered (or the start revision): a safe bookmark.
    pub fn progress(&self) -> Revision {
        self.after
    }
}
