//! The Watch service: one bidirectional stream carries many watches (etcd's `v3rpc/watch.go`
//! `serverWatchStream`). Each create request starts a store watch and a task that forwards its
//! events; cancel requests stop it. A start revision already compacted away is answered as
//! etcd does: the watch is created, then canceled with `compact_revision` set.

use crate::Shared;
use crate::keys::{self, Scan};
use crate::observe::{Began, Outcome, key_label, prefix_of};
use crate::proto::etcdserverpb::{
    self as pb, watch_create_request::FilterType, watch_request::RequestUnion, watch_server::Watch,
};
use crate::proto::mvccpb;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use store::{EventKind, Revision};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// Responses buffered per stream before the forwarders wait for the client.
const STREAM_BUFFER: usize = 128;
/// The watch id etcd answers with for a request that names no single watch.
const NO_WATCH_ID: i64 = -1;

/// The Watch service.
pub(crate) struct WatchService(pub(crate) Arc<Shared>);

type Out = mpsc::Sender<Result<pb::WatchResponse, Status>>;

/// A watch of a stream: its stop signal, the revision it has delivered up to, and its keys
/// (as its reports name them).
struct Running {
    stop: CancellationToken,
    progress: Arc<AtomicI64>,
    key: String,
    prefix: Option<String>,
}

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = ReceiverStream<Result<pb::WatchResponse, Status>>;

    async fn watch(
        &self,
        req: Request<Streaming<pb::WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(serve_stream(self.0.clone(), req.into_inner(), tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Reads a stream's requests until the client or the server ends it.
async fn serve_stream(shared: Arc<Shared>, mut inbound: Streaming<pb::WatchRequest>, tx: Out) {
    let stream_stop = shared.shutdown.child_token();
    let mut watches: HashMap<i64, Running> = HashMap::new();
    let mut next_id = 0i64;
    loop {
        let msg = tokio::select! {
            m = inbound.message() => m,
            () = stream_stop.cancelled() => break,
            () = tx.closed() => break,
        };
        let req = match msg {
            Ok(Some(req)) => req,
            Ok(None) | Err(_) => break,
        };
        watches.retain(|_, w| !w.stop.is_cancelled());
        let sent = match req.request_union {
            Some(RequestUnion::CreateRequest(c)) => {
                create(&shared, &tx, &stream_stop, &mut watches, &mut next_id, c).await
            }
            Some(RequestUnion::CancelRequest(c)) => {
                let began = Began::now();
                let resp = watches.remove(&c.watch_id).map(|w| {
                    w.stop.cancel();
                    shared.observe.report_labelled(
                        &began,
                        "WatchCancel",
                        || (w.key.clone(), w.prefix.clone()),
                        || {
                            let current = shared.backend.current_revision().0 as i64;
                            (current, Outcome::Served(String::new()))
                        },
                    );
                    pb::WatchResponse {
                        header: shared.header(),
                        watch_id: c.watch_id,
                        canceled: true,
                        ..Default::default()
                    }
                });
                match resp {
                    Some(resp) => tx.send(Ok(resp)).await.is_ok(),
                    None => true,
                }
            }
            Some(RequestUnion::ProgressRequest(_)) => {
                // Every watch of the stream has delivered at least up to the lowest progress.
                let revision = watches
                    .values()
                    .map(|w| w.progress.load(Ordering::Acquire))
                    .min()
                    .unwrap_or(shared.backend.current_revision().0 as i64);
                let resp = pb::WatchResponse {
                    header: shared.header_at(revision),
                    watch_id: NO_WATCH_ID,
                    ..Default::default()
                };
                tx.send(Ok(resp)).await.is_ok()
            }
            None => true,
        };
        if !sent {
            break;
        }
    }
    stream_stop.cancel();
}

/// Starts one watch; `false` if the client is gone.
async fn create(
    shared: &Arc<Shared>,
    tx: &Out,
    stream_stop: &CancellationToken,
    watches: &mut HashMap<i64, Running>,
    next_id: &mut i64,
    c: pb::WatchCreateRequest,
) -> bool {
    let began = Began::now();
    let report = |revision: i64, outcome: Outcome| {
        shared
            .observe
            .report(&began, "Watch", &c.key, &c.range_end, || {
                (revision, outcome)
            });
    };
    let id = if c.watch_id != 0 {
        if watches.contains_key(&c.watch_id) {
            let resp = pb::WatchResponse {
                header: shared.header(),
                watch_id: NO_WATCH_ID,
                created: true,
                canceled: true,
                cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream".to_owned(),
                ..Default::default()
            };
            report(
                c.start_revision,
                Outcome::Refused {
                    code: tonic::Code::InvalidArgument,
                    message: resp.cancel_reason.clone(),
                },
            );
            return tx.send(Ok(resp)).await.is_ok();
        }
        c.watch_id
    } else {
        while watches.contains_key(next_id) {
            *next_id += 1;
        }
        let id = *next_id;
        *next_id += 1;
        id
    };
    let scan = keys::plan(&c.key, &c.range_end);
    let start = (c.start_revision > 0).then_some(Revision(c.start_revision as u64));
    let current = shared.backend.current_revision();
    let watcher = shared
        .backend
        .watch(store::WatchRequest {
            range: scan.watch_range(),
            start_revision: start,
        })
        .await;
    let created = pb::WatchResponse {
        header: shared.header_at(current.0 as i64),
        watch_id: id,
        created: true,
        ..Default::default()
    };
    // The first revision it reports: the one asked for, or the next write's.
    let first = start.map_or(current.0 + 1, |s| s.0) as i64;
    let watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            let end = ended(shared, id, e);
            let (code, message) = if end.compact_revision != 0 {
                (tonic::Code::OutOfRange, crate::errors::COMPACTED.to_owned())
            } else {
                (tonic::Code::Unknown, end.cancel_reason.clone())
            };
            report(first, Outcome::Refused { code, message });
            return tx.send(Ok(created)).await.is_ok() && tx.send(Ok(end)).await.is_ok();
        }
    };
    report(first, Outcome::Served(String::new()));
    if tx.send(Ok(created)).await.is_err() {
        return false;
    }
    // Delivered up to: the revision before the first one the watch reports.
    let delivered = start.map_or(current.0, |s| s.0.saturating_sub(1).min(current.0));
    let progress = Arc::new(AtomicI64::new(delivered as i64));
    let stop = stream_stop.child_token();
    watches.insert(
        id,
        Running {
            stop: stop.clone(),
            progress: progress.clone(),
            key: key_label(&c.key, &c.range_end),
            prefix: prefix_of(&c.key, &c.range_end),
        },
    );
    let forward = Forward {
        shared: shared.clone(),
        id,
        scan,
        prev_kv: c.prev_kv,
        no_put: c.filters.contains(&(FilterType::Noput as i32)),
        no_delete: c.filters.contains(&(FilterType::Nodelete as i32)),
        progress_notify: c.progress_notify,
        progress,
    };
    tokio::spawn(forward.run(watcher, tx.clone(), stop));
    true
}

/// The response that ends a watch on a store error: compaction sets `compact_revision`.
fn ended(shared: &Shared, id: i64, e: store::Error) -> pb::WatchResponse {
    let mut resp = pb::WatchResponse {
        header: shared.header(),
        watch_id: id,
        canceled: true,
        ..Default::default()
    };
    match e {
        store::Error::Compacted { compacted, .. } => {
            resp.compact_revision = compacted.0 as i64;
        }
        other => resp.cancel_reason = crate::errors::status(other).message().to_owned(),
    }
    resp
}

/// One watch's forwarder: store events to the stream, filtered and converted.
struct Forward {
    shared: Arc<Shared>,
    id: i64,
    scan: Scan,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
    progress: Arc<AtomicI64>,
}

impl Forward {
    async fn run(self, mut watcher: store::Watcher, tx: Out, stop: CancellationToken) {
        let interval = self.shared.options.progress_notify_interval;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        let mut sent_since_tick = false;
        loop {
            let batch = tokio::select! {
                b = watcher.recv() => b,
                () = stop.cancelled() => return,
                _ = ticker.tick(), if self.progress_notify => {
                    if !sent_since_tick {
                        let resp = pb::WatchResponse {
                            header: self.shared.header_at(self.progress.load(Ordering::Acquire)),
                            watch_id: self.id,
                            ..Default::default()
                        };
                        if tx.send(Ok(resp)).await.is_err() {
                            return;
                        }
                    }
                    sent_since_tick = false;
                    continue;
                }
            };
            let batch = match batch {
                Some(Ok(batch)) => batch,
                Some(Err(e)) => {
                    if !stop.is_cancelled() {
                        let _ = tx.send(Ok(ended(&self.shared, self.id, e))).await;
                    }
                    stop.cancel();
                    return;
                }
                None => {
                    stop.cancel();
                    return;
                }
            };
            let last = batch.events.last().map(|e| e.revision().0 as i64);
            let events: Vec<mvccpb::Event> = batch
                .events
                .into_iter()
                .filter(|e| self.scan.contains(&e.kv.key))
                .filter(|e| match e.kind {
                    EventKind::Put => !self.no_put,
                    EventKind::Delete => !self.no_delete,
                })
                .map(|e| self.event(e))
                .collect();
            if !events.is_empty() && !stop.is_cancelled() {
                let current = self.shared.backend.current_revision().0 as i64;
                let resp = pb::WatchResponse {
                    header: self.shared.header_at(current.max(last.unwrap_or(0))),
                    watch_id: self.id,
                    events,
                    ..Default::default()
                };
                if tx.send(Ok(resp)).await.is_err() {
                    stop.cancel();
                    return;
                }
                sent_since_tick = true;
            }
            if let Some(last) = last {
                self.progress.store(last, Ordering::Release);
            }
        }
    }

    fn event(&self, e: store::Event) -> mvccpb::Event {
        let kind = match e.kind {
            EventKind::Put => mvccpb::event::EventType::Put,
            EventKind::Delete => mvccpb::event::EventType::Delete,
        };
        let prev_kv = if self.prev_kv {
            e.prev_kv.map(|kv| self.shared.kv_pb(kv))
        } else {
            None
        };
        mvccpb::Event {
            r#type: kind as i32,
            kv: Some(self.shared.kv_pb(e.kv)),
            prev_kv,
        }
    }
}
