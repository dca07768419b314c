//! WATCH (`endpoints/handlers/watch.go` `serveWatch`): HTTP 200 and a chunked stream of
//! newline-delimited `WatchEvent`s, one per line, flushed per event.
//!
//! ```text
//!   ?resourceVersion=""/"0"  → synthetic ADDED for every matching object, then changes
//!   ?resourceVersion=N       → changes after N (from the watch cache, or the store's history)
//!   too old                  → still 200, then {"type":"ERROR","object":<410 Expired Status>}
//!   N not reached yet        → waits up to 3 s for the store to reach N (the watch cache's
//!                              `waitUntilFreshAndBlock`), else 200, then
//!                              {"type":"ERROR","object":<504 Timeout ResourceVersionTooLarge>}
//!   ?allowWatchBookmarks     → {"type":"BOOKMARK","object":{kind,apiVersion,metadata:{resourceVersion}}}
//!   ?sendInitialEvents=true  → ADDEDs, then a BOOKMARK annotated k8s.io/initial-events-end
//!   ?timeoutSeconds=T        → the stream ends cleanly after T seconds
//! ```
//!
//! The timeout and shutdown always end the stream, even while the client is not reading: the
//! watch never waits on its client without them. A client that does not read is cut off by
//! the watch cache when its buffer fills, and once its stream has ended its connection is
//! closed if the last bytes do not leave within the watch-end grace
//! ([`crate::connections`]).
//!
//! Selectors are applied to the old and new object of each change, so an object that stops
//! matching is seen as DELETED and one that starts matching as ADDED, as Kubernetes'
//! `cacheWatcher` does. With a Table `Accept`, each event carries a one-row Table; only the
//! first one carries the column definitions.

use super::RequestContext;
use super::list::{Filter, parse_rv, wait_for_revision};
use crate::admin::WatchAction;
use crate::cacher::{CachedEvent, EventStream, EventType, StreamEnd};
use crate::error::{ApiError, Result};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::storage::prefix;
use crate::table::{self, IncludeObject};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::Revision;
use tokio::sync::mpsc;

/// Lines queued between a watch task and the HTTP body.
const BODY_BUFFER: usize = 16;

/// How often a watch blocked on a client that does not read checks whether the watch cache
/// has cut it off.
const CUT_OFF_CHECK: Duration = Duration::from_millis(500);

/// How one watch renders its events.
struct Renderer {
    info: Arc<ResourceInfo>,
    filter: Filter,
    table: Option<IncludeObject>,
    partial_metadata: bool,
    columns_sent: bool,
    namespace_prefix: Option<String>,
}

impl Renderer {
    fn line(&mut self, kind: &str, object: Value) -> Bytes {
        let object = match self.table {
            Some(include) if kind != "ERROR" && kind != "BOOKMARK" => {
                let rv = meta::resource_version(&object)
                    .unwrap_or_default()
                    .to_string();
                let t = table::table(
                    &self.info,
                    std::slice::from_ref(&object),
                    json!({"resourceVersion": rv}),
                    include,
                    !self.columns_sent,
                    jiff::Timestamp::now(),
                );
                self.columns_sent = true;
                t
            }
            _ if self.partial_metadata && kind != "ERROR" && kind != "BOOKMARK" => {
                meta::partial_object_metadata(&object)
            }
            _ => object,
        };
        plain_line(kind, &crate::wire::to_vec(&object))
    }

    fn typed(&self, obj: &Value) -> Value {
        let mut o = obj.clone();
        meta::set_type(&mut o, &self.info.api_version(), &self.info.kind);
        o
    }

    fn bookmark(&mut self, rv: Revision, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.0.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata});
        self.line("BOOKMARK", obj)
    }

    /// The event a client sees for a change, after selectors (None: not for this client).
    fn event(&mut self, ev: &CachedEvent) -> Option<Bytes> {
        let (kind, key, obj, prev) = (ev.kind, &ev.key[..], &*ev.object, ev.prev.as_deref());
        if let Some(p) = &self.namespace_prefix
            && !key.starts_with(p.as_bytes())
        {
            return None;
        }
        let now = self.filter.matches(&self.info, obj);
        let before = prev.is_some_and(|p| self.filter.matches(&self.info, p));
        let out = match kind {
            EventType::Deleted if before || now => "DELETED",
            EventType::Deleted => return None,
            _ => match (before, now) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                _ => return None,
            },
        };
        if self.table.is_none() && !self.partial_metadata {
            // The common case: the object as stored, encoded once for every such watcher.
            let object = ev.encoded_object(&self.info.api_version(), &self.info.kind);
            return Some(plain_line(out, &object));
        }
        if self.table.is_none() {
            // Metadata only (the garbage collector): shared by every such watcher too.
            return Some(plain_line(out, &ev.encoded_partial_metadata()));
        }
        let typed = self.typed(obj);
        Some(self.line(out, typed))
    }
}

/// `{"type":TYPE,"object":OBJECT}` and a newline, around an object already encoded.
fn plain_line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// Starts a watch: answers 200 at once and streams events from an owned task.
pub async fn watch(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    let filter = Filter::from_request(&ctx, &info)?;
    let rv = parse_rv(ctx.query.get("resourceVersion"))?;
    let bookmarks = ctx.query.flag("allowWatchBookmarks")?;
    let send_initial = ctx.query.flag("sendInitialEvents")?;
    let timeout = match ctx.query.int("timeoutSeconds")? {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        _ => ctx.state.options().default_watch_timeout,
    };
    let include = IncludeObject::parse(ctx.query.get("includeObject"))?;
    let pfx = prefix(&info, None);
    let mut renderer = Renderer {
        info: info.clone(),
        filter: filter.clone(),
        table: ctx.accept.table.then_some(include),
        partial_metadata: ctx.accept.partial_metadata,
        columns_sent: false,
        namespace_prefix: ctx
            .path
            .namespace
            .as_ref()
            .filter(|_| info.namespaced)
            .map(|ns| prefix(&info, Some(ns))),
    };
    let state = ctx.state.clone();
    let agent = ctx
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let faults = FaultTarget {
        table: state.faults().clone(),
        program: crate::admin::fault_table::program(agent).to_string(),
        resource: info.gvr.resource.clone(),
    };
    // A revision the store has not reached: wait for it (briefly), or end the watch with
    // kube-apiserver's 504 in the stream (after a parsed resourceVersion, a watch fails
    // with an ERROR event, not a failed request). Starting at once would skip the events
    // up to it without a word.
    if let Some(rv) = rv.filter(|rv| rv.0 != 0 && !send_initial)
        && let Err(too_large) = wait_for_revision(&ctx, rv).await
    {
        let (tx, rx) = mpsc::channel::<Bytes>(1);
        let _ = tx.try_send(renderer.line("ERROR", too_large.to_status()));
        return Ok(stream_response(rx));
    }
    // Initial state: synthetic ADDEDs when the client has no resourceVersion (or asks for them).
    let mut initial: Vec<Bytes> = Vec::new();
    let start = match rv {
        Some(rv) if rv.0 != 0 && !send_initial => rv,
        _ => {
            let keep = |o: &Value| filter.matches(&info, o);
            let ns_prefix = prefix(&info, ctx.path.namespace.as_deref());
            let page = state
                .storage()
                .list(&ns_prefix, None, None, 0, &keep)
                .await?;
            for obj in &page.items {
                let typed = renderer.typed(obj);
                initial.push(renderer.line("ADDED", typed));
            }
            if send_initial && bookmarks {
                initial.push(renderer.bookmark(page.revision, true));
            }
            page.revision
        }
    };
    let large_stack = info.deep_objects;
    let stream = match state.watch_cache().watch_on(&pfx, start, large_stack).await {
        Ok(s) => Ok(s),
        Err(store::Error::Compacted { compacted, .. }) => Err(StreamEnd::TooOld {
            requested: start,
            oldest: compacted,
        }),
        Err(e) => return Err(ApiError::from(e)),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(BODY_BUFFER);
    let shutdown = state.shutdown().clone();
    let unserved = state.registry().until_unserved(&info);
    let bookmark_every = bookmarks.then_some(state.options().bookmark_interval);
    let connection = crate::connections::ConnectionHandle::current();
    // Held until the connection knows the stream is over: the body ends when it is dropped.
    let body_end = tx.clone();
    let task_shutdown = shutdown.clone();
    let work = async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        match stream {
            Ok(stream) => {
                pump(
                    stream,
                    renderer,
                    tx,
                    timeout,
                    bookmark_every,
                    Ends { shutdown, unserved },
                    faults,
                )
                .await;
            }
            Err(end) => {
                let _ = tx.send(error_line(&end)).await;
            }
        }
    };
    // Events of objects too deep for a worker's stack are encoded (and dropped) on a large one.
    let task = async move {
        // The timeout and shutdown win over a send waiting on a client that does not read.
        tokio::select! {
            () = work => {}
            () = task_shutdown.cancelled() => {}
            () = tokio::time::sleep(timeout) => {}
        }
        if let Some(connection) = connection {
            connection.response_ended();
        }
        drop(body_end);
    };
    state
        .tasks()
        .spawn(crate::deep::LargeStack::new(task, large_stack));
    Ok(stream_response(rx))
}

/// The 200 answer of a watch, its body the lines sent on `rx` until it closes.
fn stream_response(rx: mpsc::Receiver<Bytes>) -> Response {
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }));
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// The in-stream `ERROR` event ending a watch, its Status in kube-apiserver's bytes.
fn error_line(end: &StreamEnd) -> Bytes {
    let StreamEnd::TooOld { requested, oldest } = end;
    let status = ApiError::Expired(format!(
        "too old resource version: {} ({})",
        requested.0, oldest.0
    ));
    plain_line("ERROR", &status.status_json())
}

/// Who a watch delivers to, for the `WatchEvents` faults (`crate::admin`).
struct FaultTarget {
    table: crate::admin::FaultTable,
    /// The User-Agent's program (`kube-scheduler`).
    program: String,
    /// The watched resource (plural).
    resource: String,
}

/// Besides its timeout, what ends a watch.
struct Ends {
    /// The server shutting down.
    shutdown: tokio_util::sync::CancellationToken,
    /// The resource no longer served (a custom resource whose CRD went); `None` for a
    /// built-in resource.
    unserved: Option<tokio_util::sync::CancellationToken>,
}

/// Moves events from the cache to the client until the timeout, shutdown, the client leaving,
/// the resource no longer being served (the stream then ends as kube-apiserver ends it when
/// it removes a CRD's storage: cleanly, and the client's next list gets 404), or the stream
/// ending (a slow client cut off by the cache). A `WatchEvents` fault in force
/// for this client delays or drops change events (never BOOKMARKs or errors); unlike a real
/// network fault, the initial ADDEDs of a watch without resourceVersion are not affected.
async fn pump(
    mut stream: EventStream,
    mut renderer: Renderer,
    tx: mpsc::Sender<Bytes>,
    timeout: Duration,
    bookmark_every: Option<Duration>,
    ends: Ends,
    faults: FaultTarget,
) {
    let Ends { shutdown, unserved } = ends;
    let unserved = async {
        match unserved {
            Some(token) => token.cancelled_owned().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(unserved);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let period = bookmark_every.unwrap_or(Duration::from_secs(3600));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        let line = tokio::select! {
            _ = shutdown.cancelled() => return,
            () = &mut unserved => return,
            _ = &mut deadline => return,
            _ = tx.closed() => return,
            _ = ticker.tick(), if bookmark_every.is_some() => renderer.bookmark(stream.progress(), false),
            ev = stream.next() => match ev {
                Some(Ok(ev)) => match renderer.event(&ev) {
                    Some(line) => match faults.table.watch_action(&faults.program, &faults.resource) {
                        WatchAction::Send => line,
                        WatchAction::Drop => {
                            tracing::info!(client = %faults.program, resource = %faults.resource, "fault: dropping a watch event");
                            continue;
                        }
                        WatchAction::Delay(d) => {
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                _ = tx.closed() => return,
                                () = tokio::time::sleep(d) => line,
                            }
                        }
                    },
                    None => continue,
                },
                Some(Err(end)) => {
                    let _ = tx.send(error_line(&end)).await;
                    return;
                }
                None => return,
            },
        };
        // A client that does not read blocks this send: stop when the cache cuts it off
        // (the caller's timeout and shutdown stop it too).
        let cut_off = async {
            loop {
                tokio::time::sleep(CUT_OFF_CHECK).await;
                if stream.is_cut_off() {
                    return;
                }
            }
        };
        tokio::select! {
            // The send first: a client that keeps up never starts the check's timer.
            biased;
            sent = tx.send(line) => if sent.is_err() {
                return;
            },
            () = cut_off => {
                tracing::debug!(resource = %faults.resource, "watch cut off: the client does not read");
                return;
            }
        }
    }
}
