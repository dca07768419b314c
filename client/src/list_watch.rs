//! List and watch: client-go's `tools/cache/listwatch.go` (`ListerWatcher`, `ListWatch`).
//!
//! The reflector needs two calls from the API server, and nothing else:
//!
//! ```text
//!   list(resourceVersion, limit, continue)  → items + the list's resourceVersion (+ continue)
//!   watch(resourceVersion, timeoutSeconds,  → ADDED | MODIFIED | DELETED | BOOKMARK | ERROR(Status) ...
//!         allowWatchBookmarks)
//! ```
//!
//! [`ApiListerWatcher`] implements them over kube's typed [`Api`] (`Api::list` with
//! `ListParams`, `Api::watch` with `WatchParams`), optionally decoding the objects without
//! their managedFields (the transform of kube-controller-manager's and kube-scheduler's
//! informers, see [`crate::without_managed_fields`]); tests implement [`ListerWatcher`] with a
//! scripted fake. An in-stream `ERROR` event is passed through as
//! [`WatchEvent::Error`]; the reflector turns a 410 into a relist.

use std::fmt::Debug;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::Api;
use kube::api::{ListParams, ObjectList, WatchParams};
use serde::de::DeserializeOwned;

pub use kube::core::WatchEvent;

use crate::error::{Error, Result};
use crate::without_managed_fields::WithoutManagedFields;

/// Options of one list request (one page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `""`: most recent (quorum read); `"0"`: any (cache allowed); else: not older than.
    pub resource_version: String,
    /// Page size (client-go's pager uses 500).
    pub limit: Option<u32>,
    /// Continue token from the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list answer.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The objects of this page.
    pub items: Vec<K>,
    /// The list's resourceVersion: watch from here to see every later change.
    pub resource_version: String,
    /// Present if more pages follow.
    pub continue_token: Option<String>,
}

/// Options of one watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Watch changes after this resourceVersion.
    pub resource_version: String,
    /// Server-side timeout; the server closes the stream after it.
    pub timeout_seconds: u32,
    /// Ask for BOOKMARK events (progress notifications carrying only a resourceVersion).
    pub allow_watch_bookmarks: bool,
}

/// A stream of watch events; an `Err` item is a transport or decoding failure.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;

/// Lists and watches one resource (client-go's `ListerWatcher`).
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, opts: ListOptions) -> BoxFuture<'_, Result<ListPage<K>>>;
    /// Starts a watch.
    fn watch(&self, opts: WatchOptions) -> BoxFuture<'_, Result<WatchStream<K>>>;
}

/// A [`ListerWatcher`] over kube's typed API, optionally filtered by selectors and
/// decoding objects without their managedFields.
#[derive(Clone)]
pub struct ApiListerWatcher<K> {
    api: Api<K>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    without_managed_fields: bool,
}

impl<K> ApiListerWatcher<K> {
    /// Lists and watches everything `api` covers (all namespaces for `Api::all`).
    pub fn new(api: Api<K>) -> Self {
        ApiListerWatcher {
            api,
            label_selector: None,
            field_selector: None,
            without_managed_fields: false,
        }
    }

    /// Decodes listed and watched objects without `metadata.managedFields`, as the informers
    /// of kube-controller-manager and kube-scheduler keep them (see
    /// [`crate::without_managed_fields`]).
    pub fn without_managed_fields(mut self) -> Self {
        self.without_managed_fields = true;
        self
    }

    /// Only objects matching this label selector (e.g. `app=web`).
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching this field selector (e.g. `spec.nodeName=n1`).
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, opts: ListOptions) -> BoxFuture<'_, Result<ListPage<K>>> {
        Box::pin(async move {
            let params = ListParams {
                label_selector: self.label_selector.clone(),
                field_selector: self.field_selector.clone(),
                limit: opts.limit,
                continue_token: opts.continue_token,
                resource_version: Some(opts.resource_version).filter(|rv| !rv.is_empty()),
                ..ListParams::default()
            };
            let list = if self.without_managed_fields {
                let mut request = kube::core::Request::new(self.api.resource_url())
                    .list(&params)
                    .map_err(kube::Error::BuildRequest)?;
                request.extensions_mut().insert("list");
                let list: ObjectList<WithoutManagedFields<K>> =
                    self.api.clone().into_client().request(request).await?;
                ObjectList {
                    types: list.types,
                    metadata: list.metadata,
                    items: list.items.into_iter().map(|item| item.0).collect(),
                }
            } else {
                self.api.list(&params).await?
            };
            Ok(ListPage {
                items: list.items,
                resource_version: list.metadata.resource_version.unwrap_or_default(),
                continue_token: list.metadata.continue_.filter(|token| !token.is_empty()),
            })
        })
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'_, Result<WatchStream<K>>> {
        Box::pin(async move {
            let params = WatchParams {
                timeout: Some(opts.timeout_seconds),
                bookmarks: opts.allow_watch_bookmarks,
                label_selector: self.label_selector.clone(),
                field_selector: self.field_selector.clone(),
                ..WatchParams::default()
            };
            if !self.without_managed_fields {
                let stream = self.api.watch(&params, &opts.resource_version).await?;
                return Ok(stream.map_err(Error::from).boxed());
            }
            let mut request = kube::core::Request::new(self.api.resource_url())
                .watch(&params, &opts.resource_version)
                .map_err(kube::Error::BuildRequest)?;
            request.extensions_mut().insert("watch");
            let stream = self
                .api
                .clone()
                .into_client()
                .request_events::<WithoutManagedFields<K>>(request)
                .await?;
            Ok(stream
                .map(|event| event.map(unwrap_event).map_err(Error::from))
                .boxed())
        })
    }
}

/// The event with its object taken out of the [`WithoutManagedFields`] wrapper.
fn unwrap_event<K>(event: WatchEvent<WithoutManagedFields<K>>) -> WatchEvent<K> {
    match event {
        WatchEvent::Added(o) => WatchEvent::Added(o.0),
        WatchEvent::Modified(o) => WatchEvent::Modified(o.0),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(o.0),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
        WatchEvent::Error(e) => WatchEvent::Error(e),
    }
}
