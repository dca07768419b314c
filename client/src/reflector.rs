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
//!           transport error / 429         → backoff, watch again from last RV
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
                // Transport trouble or throttling: the RV is still good, so back off and
                // watch again without a relist (client-go's `isWatchErrorRetriable`).
                Err(err) if matches!(err, Error::Kube(_)) || err.is_too_many_requests() => {
                    let delay = self.backoff.next(self.clock.now());
                    tracing::warn!(reflector = %self.name, %err, ?delay, "watch failed, retrying");
                    self.clock.sleep(delay).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use crate::indexer::Indexer;
    use crate::list_watch::{ListPage, WatchStream};
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::collections::VecDeque;

    /// A lister-watcher that answers lists and watch starts from scripts; a watch that
    /// starts never ends.
    #[derive(Default)]
    struct Scripted {
        lists: Mutex<VecDeque<Result<ListPage<ConfigMap>>>>,
        seen: Mutex<Vec<ListOptions>>,
        watch_errors: Mutex<VecDeque<Error>>,
        watches: Mutex<Vec<WatchOptions>>,
    }

    impl ListerWatcher<ConfigMap> for Scripted {
        fn list(&self, opts: ListOptions) -> BoxFuture<'_, Result<ListPage<ConfigMap>>> {
            self.seen.lock().unwrap().push(opts);
            let answer = self
                .lists
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Err(Error::NoResourceVersion));
            Box::pin(std::future::ready(answer))
        }
        fn watch(&self, opts: WatchOptions) -> BoxFuture<'_, Result<WatchStream<ConfigMap>>> {
            self.watches.lock().unwrap().push(opts);
            let answer = match self.watch_errors.lock().unwrap().pop_front() {
                Some(err) => Err(err),
                None => Ok(futures::stream::pending().boxed()),
            };
            Box::pin(std::future::ready(answer))
        }
    }

    fn page(names: &[&str], rv: &str, continue_token: Option<&str>) -> Result<ListPage<ConfigMap>> {
        let items = names
            .iter()
            .map(|n| ConfigMap {
                metadata: ObjectMeta {
                    namespace: Some("ns".into()),
                    name: Some((*n).into()),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        Ok(ListPage {
            items,
            resource_version: rv.into(),
            continue_token: continue_token.map(Into::into),
        })
    }

    /// The reflector's default backoff without jitter: 800 ms, 1.6 s, ...
    fn no_jitter() -> BackoffManager {
        BackoffManager::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            false,
        )
    }

    fn server_error() -> Result<ListPage<ConfigMap>> {
        Err(Error::Api {
            code: 500,
            reason: "InternalError".into(),
            message: "boom".into(),
        })
    }

    fn expired() -> Result<ListPage<ConfigMap>> {
        Err(Error::Api {
            code: 410,
            reason: "Expired".into(),
            message: "continue token too old".into(),
        })
    }

    /// Lets the reflector task run until `condition` holds (bounded: a stuck reflector fails
    /// the test instead of hanging it).
    async fn until(mut condition: impl FnMut() -> bool) {
        for _ in 0..10_000 {
            if condition() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("condition not reached");
    }

    async fn parked(clock: &FakeClock) {
        until(|| clock.sleepers() > 0).await;
    }

    #[tokio::test]
    async fn failed_lists_back_off_exponentially_on_the_clock() {
        let clock = FakeClock::new();
        let lw = Arc::new(Scripted::default());
        lw.lists
            .lock()
            .unwrap()
            .extend([server_error(), server_error(), page(&["a"], "7", None)]);
        let fifo = DeltaFifo::new(Indexer::new());
        let reflector = Reflector::new("test", lw.clone(), fifo.clone(), clock.shared())
            .with_backoff(no_jitter());
        let rv = reflector.last_sync_resource_version();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reflector.run(shutdown.clone()));
        let lists = || lw.seen.lock().unwrap().len();

        parked(&clock).await;
        assert_eq!(lists(), 1);
        clock.advance(Duration::from_millis(799));
        tokio::task::yield_now().await;
        assert_eq!(lists(), 1, "still backing off");
        clock.advance(Duration::from_millis(1));
        parked(&clock).await;
        assert_eq!(lists(), 2, "retried after 800 ms");
        clock.advance(Duration::from_millis(1600));
        until(|| !rv.get().is_empty()).await;
        assert_eq!(lists(), 3, "retried after 1.6 s");
        assert_eq!(rv.get(), "7");
        assert_eq!(fifo.queued_keys().len(), 1);
        assert!(
            lw.seen
                .lock()
                .unwrap()
                .iter()
                .all(|o| o.resource_version == "0"),
            "first lists ask for RV 0"
        );
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn pages_through_continue_tokens_and_falls_back_to_a_full_list() {
        let clock = FakeClock::new();
        let lw = Arc::new(Scripted::default());
        lw.lists.lock().unwrap().extend([
            page(&["a", "b"], "9", Some("t1")),
            expired(), // the continue token expired mid-way
            page(&["a", "b", "c"], "12", None),
        ]);
        let fifo = DeltaFifo::new(Indexer::new());
        let reflector = Reflector::new("test", lw.clone(), fifo.clone(), clock.shared());
        let rv = reflector.last_sync_resource_version();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reflector.run(shutdown.clone()));
        until(|| !rv.get().is_empty()).await;
        let seen = lw.seen.lock().unwrap().clone();
        assert_eq!(
            seen[0],
            ListOptions {
                resource_version: "0".into(),
                limit: Some(500),
                continue_token: None
            }
        );
        assert_eq!(
            seen[1],
            ListOptions {
                resource_version: String::new(),
                limit: Some(500),
                continue_token: Some("t1".into())
            }
        );
        assert_eq!(
            seen[2],
            ListOptions {
                resource_version: "0".into(),
                limit: None,
                continue_token: None
            },
            "full list"
        );
        assert_eq!(rv.get(), "12");
        assert_eq!(fifo.queued_keys().len(), 3);
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn throttled_watch_backs_off_and_rewatches_without_relisting() {
        let clock = FakeClock::new();
        let lw = Arc::new(Scripted::default());
        lw.lists.lock().unwrap().push_back(page(&["a"], "5", None));
        lw.watch_errors.lock().unwrap().push_back(Error::Api {
            code: 429,
            reason: "TooManyRequests".into(),
            message: "slow down".into(),
        });
        let fifo = DeltaFifo::new(Indexer::new());
        let reflector =
            Reflector::new("test", lw.clone(), fifo, clock.shared()).with_backoff(no_jitter());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(reflector.run(shutdown.clone()));
        parked(&clock).await;
        assert_eq!(lw.watches.lock().unwrap().len(), 1);
        clock.advance(Duration::from_millis(800));
        until(|| lw.watches.lock().unwrap().len() == 2).await;
        assert_eq!(
            lw.seen.lock().unwrap().len(),
            1,
            "no relist for a throttled watch"
        );
        assert_eq!(lw.watches.lock().unwrap()[1].resource_version, "5");
        shutdown.cancel();
        task.await.unwrap();
    }
}
