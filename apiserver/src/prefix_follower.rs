//! Keeping an in-memory picture of a key prefix up to date: list it, then watch it from the
//! listed revision, listing again when the watch is cut off (compacted past, store closed).
//!
//! The reflector pattern of client-go (`tools/cache/reflector.go`: `ListAndWatch`), inside
//! the API server, for the pictures it keeps itself: the Service address allocations
//! (`crate::service_alloc`) and the RBAC objects the authorizer reads
//! (`crate::auth::rbac::cache`).
//!
//! ```text
//!   relist() ─▶ revision R ─▶ watch(prefix, from R+1) ─▶ apply(events) ... ─┐
//!       ▲                                                  cut off ──────────┘
//!       └── watch failed: wait 1 s, relist
//! ```

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use store::{Backend, Event, KeyRange, Revision, WatchRequest};
use tokio_util::sync::CancellationToken;

/// What follows a prefix: how to list it afresh and how to take a batch of changes.
pub trait Follower: Send + Sync + 'static {
    /// Replaces the picture with a fresh list of the prefix; the revision it was read at.
    fn relist(&self) -> BoxFuture<'_, Result<Revision, String>>;
    /// Takes the changes of one watch response, in revision order.
    fn apply(&self, events: Vec<Event>);
}

/// Follows `prefix` from `revision` (the revision of the first list, done by the caller)
/// until `shutdown`; `what` names the picture in the log.
pub async fn follow(
    backend: Arc<dyn Backend>,
    prefix: &'static str,
    mut revision: Revision,
    shutdown: CancellationToken,
    what: &'static str,
    follower: impl Follower,
) {
    loop {
        let request = WatchRequest {
            range: KeyRange::Prefix(Bytes::from_static(prefix.as_bytes())),
            start_revision: Some(Revision(revision.0 + 1)),
        };
        let mut watcher = match backend.watch(request).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, what, "watch failed; listing again");
                if let Ok(r) = follower.relist().await {
                    revision = r;
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return,
                next = watcher.recv() => next,
            };
            match next {
                Some(Ok(resp)) => {
                    if let Some(last) = resp.events.last() {
                        revision = last.revision();
                    }
                    follower.apply(resp.events);
                }
                _ => {
                    // Cut off (compacted past, or the store closed): start over from a list.
                    match follower.relist().await {
                        Ok(r) => revision = r,
                        Err(e) => tracing::warn!(error = %e, what, "relist failed"),
                    }
                    break;
                }
            }
        }
    }
}
