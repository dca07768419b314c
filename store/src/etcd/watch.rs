//! Watches on etcd (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/watcher.go`): one etcd
//! watch stream per [`crate::Backend::watch`], with `prev_kv` (the store's events carry the
//! previous version) and progress notifications, from the requested revision on.
//!
//! ```text
//!   etcd Watch stream ──events──▶ task ──bounded channel──▶ Watcher (store)
//!        ▲  broken stream / member gone: reopened from the next revision (clientv3 does the same)
//!        └─ canceled with compact_revision: Err(Compacted), the watch is over
//! ```
//!
//! The task ends when the [`crate::Watcher`] is dropped, when the backend is closed or dropped,
//! and after a compacted or canceled watch. Every response header (progress notifications
//! included) moves the backend's current revision forward.
//!
//! Simplified: a receiver that does not keep up is not cut off with
//! [`crate::Error::WatcherTooSlow`] as the store's watchers are; the task waits for room in the
//! channel and etcd holds the events back meanwhile (its "victim" watchers), so nothing is lost.
//! A watch whose start revision was compacted after the backend last learned the compaction
//! point is accepted and then ends with [`crate::Error::Compacted`] as its first item, as etcd
//! answers such a watch only after creating it.

use super::Inner;
use super::convert;
use super::keys::EtcdRange;
use crate::{DEFAULT_WATCH_BUFFER, Error, Result, Revision, WatchRequest, WatchResponse, Watcher};
use etcd_client as etcd;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest pause between attempts to reopen a broken watch stream.
const MAX_REOPEN_BACKOFF: Duration = Duration::from_secs(1);

/// What opening an etcd watch stream gave.
enum Opened {
    /// Created: the stream and the revision etcd was at when it created the watch.
    Stream(Box<etcd::WatchStream>, Revision),
    /// Refused because the start revision is compacted.
    Compacted(Revision),
}

/// Starts a watch: checks the start revision against the compaction point this backend knows,
/// opens the etcd stream, and hands the events to a task feeding the returned [`Watcher`].
pub(crate) async fn start(inner: &Arc<Inner>, req: WatchRequest) -> Result<Watcher> {
    if inner.shutdown.is_cancelled() {
        return Err(Error::Closed);
    }
    let start = req.start_revision.filter(|r| *r != Revision::ZERO);
    if let Some(r) = start {
        inner.check_compacted(r)?;
    }
    let range = inner
        .keys
        .range(&req.range, None)
        .map_err(|_| inner.outside(&req.range))?;
    // A range with no place in etcd (beside /registry/ under another prefix) watches a key
    // range etcd keeps empty: [\x01, \x01).
    let range = range.unwrap_or(EtcdRange {
        key: vec![1],
        end: Some(vec![1]),
    });
    let (stream, created) = match open(inner, &range, start).await? {
        Opened::Stream(stream, rev) => (*stream, rev),
        Opened::Compacted(compacted) => {
            return Err(Error::Compacted {
                requested: start.unwrap_or(Revision::ZERO),
                compacted,
            });
        }
    };
    let next = start.unwrap_or(created.next());
    let (tx, rx) = mpsc::channel(DEFAULT_WATCH_BUFFER);
    let task_inner = inner.clone();
    inner.tasks.spawn(run(task_inner, range, stream, next, tx));
    Ok(Watcher::from_receiver(rx))
}

/// Opens an etcd watch stream and waits for etcd to create the watch.
async fn open(inner: &Inner, range: &EtcdRange, start: Option<Revision>) -> Result<Opened> {
    let mut options = etcd::WatchOptions::new()
        .with_prev_key()
        .with_progress_notify();
    if let Some(end) = &range.end {
        options = options.with_range(end.clone());
    }
    if let Some(r) = start {
        options = options.with_start_revision(convert::etcd_revision(r));
    }
    let opened = inner
        .call("watch", super::call::Retry::Read, || {
            let mut client = inner.watch.clone();
            let (key, options) = (range.key.clone(), options.clone());
            async move {
                let mut stream = client.watch(key, Some(options)).await?;
                // The first answer is the creation (or a refusal).
                let first = stream.message().await?;
                Ok((stream, first))
            }
        })
        .await;
    let (stream, first) = opened.map_err(|f| inner.plain_failure(f))?;
    let Some(first) = first else {
        return Err(inner.io_error(
            std::io::ErrorKind::ConnectionAborted,
            "watch: the stream ended before etcd created the watch".into(),
        ));
    };
    let created_at = first.header().map_or(Revision::ZERO, |h| {
        inner.observe_revision(h.revision());
        convert::revision(h.revision())
    });
    if first.compact_revision() > 0 {
        return Ok(Opened::Compacted(inner.observe_etcd_compaction(
            convert::revision(first.compact_revision()),
        )));
    }
    if first.canceled() {
        return Err(inner.io_error(
            std::io::ErrorKind::Other,
            format!("watch: canceled by etcd: {}", first.cancel_reason()),
        ));
    }
    Ok(Opened::Stream(Box::new(stream), created_at))
}

/// Feeds one watch until its receiver or the backend goes away.
async fn run(
    inner: Arc<Inner>,
    range: EtcdRange,
    mut stream: etcd::WatchStream,
    mut next: Revision,
    tx: mpsc::Sender<Result<WatchResponse>>,
) {
    loop {
        let message = tokio::select! {
            biased;
            _ = inner.shutdown.cancelled() => return,
            _ = tx.closed() => return,
            m = stream.message() => m,
        };
        let resp = match message {
            Ok(Some(resp)) => resp,
            Ok(None) | Err(_) => {
                // The stream broke (member gone, no leader, connection reset): reopen it from
                // the next revision, as clientv3's watcher does.
                if let Err(e) = &message {
                    tracing::debug!(endpoints = %inner.endpoints, "etcd watch broke: {e}; reopening");
                }
                match reopen(&inner, &range, next, &tx).await {
                    Some(Ok(s)) => {
                        stream = s;
                        continue;
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                    None => return,
                }
            }
        };
        if let Some(h) = resp.header() {
            inner.observe_revision(h.revision());
        }
        if resp.compact_revision() > 0 {
            let compacted =
                inner.observe_etcd_compaction(convert::revision(resp.compact_revision()));
            let _ = tx
                .send(Err(Error::Compacted {
                    requested: next,
                    compacted,
                }))
                .await;
            return;
        }
        if resp.canceled() {
            let e = inner.io_error(
                std::io::ErrorKind::Other,
                format!("watch: canceled by etcd: {}", resp.cancel_reason()),
            );
            let _ = tx.send(Err(e)).await;
            return;
        }
        let events: Vec<_> = resp
            .events()
            .iter()
            .filter_map(|e| convert::event(&inner.keys, e))
            // After a reopen etcd starts at `next`; never deliver a revision twice.
            .filter(|e| e.revision() >= next)
            .collect();
        let Some(last) = events.last() else {
            continue;
        };
        next = last.revision().next();
        inner.observe_revision(convert::etcd_revision(last.revision()));
        tokio::select! {
            biased;
            _ = inner.shutdown.cancelled() => return,
            sent = tx.send(Ok(WatchResponse { events })) => if sent.is_err() { return },
        }
    }
}

/// Reopens a broken watch from `next`, retrying until it works, the receiver is dropped or the
/// backend shuts down (`None`).
async fn reopen(
    inner: &Inner,
    range: &EtcdRange,
    next: Revision,
    tx: &mpsc::Sender<Result<WatchResponse>>,
) -> Option<Result<etcd::WatchStream>> {
    let mut backoff = Duration::from_millis(20);
    loop {
        if inner.shutdown.is_cancelled() || tx.is_closed() {
            return None;
        }
        match open(inner, range, Some(next)).await {
            Ok(Opened::Stream(stream, _)) => return Some(Ok(*stream)),
            Ok(Opened::Compacted(compacted)) => {
                return Some(Err(Error::Compacted {
                    requested: next,
                    compacted,
                }));
            }
            Err(e) => {
                tracing::warn!(endpoints = %inner.endpoints, "etcd watch from revision {next} cannot be reopened: {e}");
            }
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => return None,
            _ = tx.closed() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_REOPEN_BACKOFF);
    }
}
