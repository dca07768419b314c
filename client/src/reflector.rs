//! The Reflector: client-go's `tools/cache/reflector.go` (`ListAndWatch`) and the pager of
//! `tools/pager/pager.go`.
//!
//! It keeps a [`DeltaFifo`] in step with the API server:
//!
//! ```text
//!   loop {                                               (until the shutdown token fires)
//!     LIST  rv = "0" first time, last RV after errors,   paged by 500 while rv is "" or "0"
//!           "" after 410 Expired                         → fifo.replace(items); last RV = list RV
//!     loop WATCH from last RV (bookmarks on, timeout 5–10 min, random)
//!           ADDED → fifo.add   MODIFIED → fifo.update   DELETED → fifo.delete
//!           BOOKMARK → (nothing but the RV)              last RV = event's RV, every event
//!           stream ends (server timeout)  → watch again from last RV
//!           ERROR 410 / Expired           → break: relist from ""
//!           other error                   → break
//!     sleep(backoff)   800 ms … 30 s, jitter, reset after 2 min quiet   (injected clock)
//!   }
//! ```
//!
//! Unlike client-go, which first relists at the last RV after a 410 and drops to `""` only if
//! that list is Expired too, a 410 in the watch goes straight to a `""` (consistent) relist,
//! as kube-rs does. The "very short watch" check and the streaming-list (`sendInitialEvents`)
//! mode are not implemented.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::{Resource, ResourceExt};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::backoff::BackoffManager;
use crate::clock::SharedClock;
use crate::delta_fifo::DeltaFifo;
use crate::error::{Error, Result};
use crate::list_watch::{ListOptions, ListerWatcher, WatchEvent, WatchOptions};

/// client-go's pager `defaultPageSize`.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// client-go's `minWatchTimeout`: watches time out after 5–10 minutes.
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The last resourceVersion a reflector has seen, readable while it runs
/// (client-go's `LastSyncResourceVersion`).
#[derive(Debug, Clone, Default)]
pub struct LastSyncResourceVersion(Arc<Mutex<String>>);

impl LastSyncResourceVersion {
    /// The current value (`""` before the first list).
    pub fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set(&self, rv: &str) {
        rv.clone_into(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Lists and watches one resource into a [`DeltaFifo`].
pub struct Reflector<K> {
    /// For logs: usually the resource's kind.
    name: String,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    store: DeltaFifo<K>,
    clock: SharedClock,
    backoff: BackoffManager,
    last_sync_rv: LastSyncResourceVersion,
    /// Set after a 410: the next list must not name a resourceVersion.
    last_sync_rv_unavailable: bool,
    page_size: u32,
}

impl<K> Reflector<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
{
    /// A reflector filling `store` from `lister_watcher`, sleeping on `clock`.
    pub fn new(
        name: impl Into<String>,
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        store: DeltaFifo<K>,
        clock: SharedClock,
    ) -> Self {
        Reflector {
            name: name.into(),
            lister_watcher,
            store,
            clock,
            backoff: BackoffManager::reflector_default(),
            last_sync_rv: LastSyncResourceVersion::default(),
            last_sync_rv_unavailable: false,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Replaces the backoff between list-and-watch attempts.
    pub fn with_backoff(mut self, backoff: BackoffManager) -> Self {
        self.backoff = backoff;
        self
    }

    /// Shares the last-seen resourceVersion with the caller.
    pub fn with_last_sync_resource_version(mut self, rv: LastSyncResourceVersion) -> Self {
        self.last_sync_rv = rv;
        self
    }

    /// A handle on the last-seen resourceVersion.
    pub fn last_sync_resource_version(&self) -> LastSyncResourceVersion {
        self.last_sync_rv.clone()
    }

    /// Runs list-and-watch until `shutdown` fires, backing off between attempts.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let result = tokio::select! {
                () = shutdown.cancelled() => return,
                result = self.list_and_watch() => result,
            };
            match result {
                Ok(()) => tracing::debug!(reflector = %self.name, "relisting"),
                Err(err) => tracing::warn!(reflector = %self.name, %err, "list and watch failed"),
            }
            let delay = self.backoff.next(self.clock.now());
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.clock.sleep(delay) => {}
            }
        }
    }

    /// client-go's `relistResourceVersion`.
    fn relist_resource_version(&self) -> String {
        if self.last_sync_rv_unavailable {
            return String::new();
        }
        match self.last_sync_rv.get() {
            rv if rv.is_empty() => "0".to_owned(),
            rv => rv,
        }
    }

    /// One list, then watches until one fails. `Ok` means "relist" (410 in the watch).
    async fn list_and_watch(&mut self) -> Result<()> {
        self.list().await?;
        loop {
            let timeout = MIN_WATCH_TIMEOUT.mul_f64(1.0 + rand::rng().random::<f64>());
            let opts = WatchOptions {
                resource_version: self.last_sync_rv.get(),
                timeout_seconds: u32::try_from(timeout.as_secs()).unwrap_or(600),
                allow_watch_bookmarks: true,
            };
            let result = match self.lister_watcher.watch(opts).await {
                Ok(stream) => self.handle_watch(stream).await,
                Err(err) => Err(err),
            };
            match result {
                // The server closed the watch (timeout): watch again from the last RV.
                Ok(()) => continue,
                Err(err) if err.is_expired() => {
                    tracing::info!(reflector = %self.name, %err, "watch expired, relisting");
                    self.last_sync_rv_unavailable = true;
                    return Ok(());
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Lists every page and replaces the store's content.
    async fn list(&mut self) -> Result<()> {
        let rv = self.relist_resource_version();
        // client-go pages only when any resourceVersion is acceptable ("" or "0").
        let paged = rv.is_empty() || rv == "0";
        let result = self.list_pages(&rv, paged).await;
        let (items, list_rv) = match result {
            Err(err) if err.is_expired() && !rv.is_empty() => {
                // Our RV is too old to list at: fall back to a consistent list.
                self.last_sync_rv_unavailable = true;
                self.list_pages("", true).await?
            }
            other => other?,
        };
        if list_rv.is_empty() {
            return Err(Error::NoResourceVersion);
        }
        tracing::debug!(reflector = %self.name, items = items.len(), rv = %list_rv, "listed");
        self.store
            .replace(items.into_iter().map(Arc::new).collect());
        self.last_sync_rv.set(&list_rv);
        self.last_sync_rv_unavailable = false;
        Ok(())
    }

    /// client-go's pager: follows continue tokens; if a token expires mid-way, lists
    /// everything in one request instead (`FullListIfExpired`).
    async fn list_pages(&self, rv: &str, paged: bool) -> Result<(Vec<K>, String)> {
        let mut items = Vec::new();
        let mut opts = ListOptions {
            resource_version: rv.to_owned(),
            limit: paged.then_some(self.page_size),
            continue_token: None,
        };
        loop {
            let page = match self.lister_watcher.list(opts.clone()).await {
                Err(err) if err.is_expired() && opts.continue_token.is_some() => {
                    let full = ListOptions {
                        resource_version: rv.to_owned(),
                        ..ListOptions::default()
                    };
                    let page = self.lister_watcher.list(full).await?;
                    return Ok((page.items, page.resource_version));
                }
                other => other?,
            };
            items.extend(page.items);
            match page.continue_token {
                Some(token) => {
                    opts.continue_token = Some(token);
                    opts.resource_version = String::new();
                }
                None => return Ok((items, page.resource_version)),
            }
        }
    }

    /// Feeds one watch stream into the store until it ends or fails.
    async fn handle_watch(&mut self, mut stream: crate::list_watch::WatchStream<K>) -> Result<()> {
        while let Some(event) = stream.next().await {
            let rv = match event? {
                WatchEvent::Added(obj) => {
                    let rv = obj.resource_version();
                    self.store.add(Arc::new(obj));
                    rv
                }
                WatchEvent::Modified(obj) => {
                    let rv = obj.resource_version();
                    self.store.update(Arc::new(obj));
                    rv
                }
                WatchEvent::Deleted(obj) => {
                    let rv = obj.resource_version();
                    self.store.delete(Arc::new(obj));
                    rv
                }
                WatchEvent::Bookmark(bookmark) => Some(bookmark.metadata.resource_version),
                WatchEvent::Error(status) => return Err(Error::from_status(&status)),
            };
            if let Some(rv) = rv.filter(|rv| !rv.is_empty()) {
                self.last_sync_rv.set(&rv);
            }
        }
        Ok(())
    }
}
