//! A scripted API server for one resource: client-go's
//! `tools/cache/testing/fake_controller_source.go` (`FakeControllerSource`).
//!
//! [`FakeSource`] implements [`ListerWatcher`] over an in-memory map with its own
//! resourceVersion counter, so informer, reflector and controller tests run without a server:
//!
//! ```text
//!   source.add(pod)            rv 1 → ADDED to every open watch
//!   source.modify(pod)         rv 2 → MODIFIED
//!   source.delete_silently(p)  rv 3, nobody is told (a delete missed while the watch was down)
//!   source.expire_watches()    ERROR 410 to every open watch; watches from older RVs get 410
//!   source.bookmark()          BOOKMARK at the current RV
//! ```
//!
//! Every list and watch request is recorded so tests can assert on what the reflector asked.
//! Watch streams are unbounded channels: this is test scaffolding, and a bounded channel
//! would need a consumer-speed policy the tests do not exercise.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use futures::{StreamExt, stream};
use kube::Resource;
use kube::core::Status;
use kube::core::TypeMeta;
use kube::core::watch::{Bookmark, BookmarkMeta};
use tokio::sync::mpsc;

use crate::error::Result;
use crate::list_watch::{
    ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream,
};
use apimachinery::ObjectKey;

/// A request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A list call.
    List(ListOptions),
    /// A watch call.
    Watch(WatchOptions),
}

/// An in-memory [`ListerWatcher`] (a cheap-to-clone handle).
pub struct FakeSource<K> {
    shared: Arc<Mutex<State<K>>>,
}

impl<K> Clone for FakeSource<K> {
    fn clone(&self) -> Self {
        FakeSource {
            shared: self.shared.clone(),
        }
    }
}

struct State<K> {
    objects: BTreeMap<ObjectKey, K>,
    rv: u64,
    /// Events with their RVs, for watches that start in the past.
    log: Vec<(u64, WatchEvent<K>)>,
    /// Watches from an RV at or below this get 410.
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Result<WatchEvent<K>>>>,
    requests: Vec<Request>,
    /// Notified of every request, for tests that wait for the reflector's next call.
    request_tx: Option<mpsc::UnboundedSender<Request>>,
}

impl<K: Resource + Clone + Send + Sync + 'static> Default for FakeSource<K> {
    fn default() -> Self {
        Self::new()
    }
}

fn clone_event<K: Clone>(event: &WatchEvent<K>) -> WatchEvent<K> {
    match event {
        WatchEvent::Added(o) => WatchEvent::Added(o.clone()),
        WatchEvent::Modified(o) => WatchEvent::Modified(o.clone()),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(o.clone()),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b.clone()),
        WatchEvent::Error(s) => WatchEvent::Error(s.clone()),
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> FakeSource<K> {
    /// An empty source at resourceVersion 0.
    pub fn new() -> Self {
        FakeSource {
            shared: Arc::new(Mutex::new(State {
                objects: BTreeMap::new(),
                rv: 0,
                log: Vec::new(),
                compacted: 0,
                watchers: Vec::new(),
                requests: Vec::new(),
                request_tx: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// A receiver of every request from now on.
    pub fn subscribe_requests(&self) -> mpsc::UnboundedReceiver<Request> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().request_tx = Some(tx);
        rx
    }

    /// Stores `obj` with a new RV; `event` wraps the stored copy; `broadcast` tells watchers.
    fn change(
        &self,
        mut obj: K,
        delete: bool,
        event: fn(K) -> WatchEvent<K>,
        broadcast: bool,
    ) -> K {
        let mut state = self.lock();
        state.rv += 1;
        let rv = state.rv;
        obj.meta_mut().resource_version = Some(rv.to_string());
        let key = ObjectKey::of(&obj);
        if delete {
            state.objects.remove(&key);
        } else {
            state.objects.insert(key, obj.clone());
        }
        if broadcast {
            let ev = event(obj.clone());
            state
                .watchers
                .retain(|w| w.send(Ok(clone_event(&ev))).is_ok());
            state.log.push((rv, ev));
        }
        obj
    }

    /// Creates or replaces `obj` and sends ADDED; returns the stored copy (with its RV).
    pub fn add(&self, obj: K) -> K {
        self.change(obj, false, WatchEvent::Added, true)
    }
    /// Replaces `obj` and sends MODIFIED.
    pub fn modify(&self, obj: K) -> K {
        self.change(obj, false, WatchEvent::Modified, true)
    }
    /// Deletes `obj` and sends DELETED.
    pub fn delete(&self, obj: K) -> K {
        self.change(obj, true, WatchEvent::Deleted, true)
    }
    /// Creates or replaces `obj` without telling any watch (a change missed by the client).
    pub fn add_silently(&self, obj: K) -> K {
        self.change(obj, false, WatchEvent::Added, false)
    }
    /// Replaces `obj` without telling any watch.
    pub fn modify_silently(&self, obj: K) -> K {
        self.change(obj, false, WatchEvent::Modified, false)
    }
    /// Deletes `obj` without telling any watch.
    pub fn delete_silently(&self, obj: K) -> K {
        self.change(obj, true, WatchEvent::Deleted, false)
    }

    /// Sends a BOOKMARK at the current RV to every open watch.
    pub fn bookmark(&self) {
        let mut state = self.lock();
        let bookmark = Bookmark {
            types: TypeMeta::default(),
            metadata: BookmarkMeta {
                resource_version: state.rv.to_string(),
                annotations: BTreeMap::new(),
            },
        };
        state
            .watchers
            .retain(|w| w.send(Ok(WatchEvent::Bookmark(bookmark.clone()))).is_ok());
    }

    /// Compacts history at the current RV and ends every open watch with an in-stream
    /// `ERROR` 410 Expired, as the API server does when a watcher falls behind compaction.
    pub fn expire_watches(&self) {
        let mut state = self.lock();
        state.compacted = state.rv;
        state.log.clear();
        let status = expired(state.rv);
        for watcher in state.watchers.drain(..) {
            let _ = watcher.send(Ok(WatchEvent::Error(Box::new(status.clone()))));
        }
    }

    /// Ends every open watch normally, as a server-side watch timeout does.
    pub fn end_watches(&self) {
        self.lock().watchers.clear();
    }

    /// Number of open watches.
    pub fn watchers(&self) -> usize {
        let mut state = self.lock();
        state.watchers.retain(|w| !w.is_closed());
        state.watchers.len()
    }

    fn record(&self, state: &mut State<K>, request: Request) {
        if let Some(tx) = &state.request_tx {
            let _ = tx.send(request.clone());
        }
        state.requests.push(request);
    }
}

fn expired(rv: u64) -> Status {
    Status::failure(
        &format!("too old resource version (compacted at {rv})"),
        "Expired",
    )
    .with_code(410)
}

impl<K: Resource + Clone + Send + Sync + 'static> ListerWatcher<K> for FakeSource<K> {
    fn list(&self, opts: ListOptions) -> BoxFuture<'_, Result<ListPage<K>>> {
        let mut state = self.lock();
        self.record(&mut state, Request::List(opts));
        let page = ListPage {
            items: state.objects.values().cloned().collect(),
            resource_version: state.rv.to_string(),
            continue_token: None,
        };
        Box::pin(std::future::ready(Ok(page)))
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'_, Result<WatchStream<K>>> {
        let mut state = self.lock();
        self.record(&mut state, Request::Watch(opts.clone()));
        let from: u64 = opts.resource_version.parse().unwrap_or(0);
        let stream: WatchStream<K> = if from < state.compacted {
            let status = expired(state.compacted);
            stream::iter([Ok(WatchEvent::Error(Box::new(status)))]).boxed()
        } else {
            let (tx, rx) = mpsc::unbounded_channel();
            for (rv, event) in &state.log {
                if *rv > from {
                    let _ = tx.send(Ok(clone_event(event)));
                }
            }
            state.watchers.push(tx);
            tokio_stream_from(rx)
        };
        Box::pin(std::future::ready(Ok(stream)))
    }
}

fn tokio_stream_from<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> futures::stream::BoxStream<'static, T> {
    stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
    .boxed()
}
