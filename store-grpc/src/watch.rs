//! The Watch service: one bidirectional stream carries many watches (etcd's `v3rpc/watch.go`
//! `serverWatchStream.recvLoop`). A task reads the stream's requests: each create request
//! starts a store watch and hands its events to the response side (`watch_events.rs`); cancel
//! requests stop it. A start revision already compacted away is answered as etcd does: the
//! watch is created, then canceled with `compact_revision` set.

use crate::Shared;
use crate::keys;
use crate::observe::{Outcome, key_label, prefix_of};
use crate::proto::etcdserverpb::{
    self as pb, watch_create_request::FilterType, watch_request::RequestUnion,
};
use crate::watch_events::{Control, Options, Outgoing, WatchEvents};
use crate::wire;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use store::Revision;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::{Request, Response, Status, Streaming};

/// Answers and new watches queued per stream before the request side waits for the client.
const STREAM_BUFFER: usize = 128;
/// The watch id etcd answers with for a request that names no single watch.
const NO_WATCH_ID: i64 = -1;

/// The Watch service as tonic serves it (`etcdserverpb.Watch`), written out in place of the
/// generated `watch_server`: the same method path and codec, but its responses are
/// [`wire::WatchResponse`]s, which encode events from the store's shared bytes.
#[derive(Clone)]
pub(crate) struct WatchServer(pub(crate) Arc<Shared>);

impl tonic::server::NamedService for WatchServer {
    const NAME: &'static str = "etcdserverpb.Watch";
}

/// The one method, `Watch`, as tonic's streaming service.
struct WatchMethod(Arc<Shared>);

impl tonic::server::StreamingService<pb::WatchRequest> for WatchMethod {
    type Response = wire::WatchResponse;
    type ResponseStream = Outgoing;
    type Future = BoxFuture<Response<Outgoing>, Status>;

    fn call(&mut self, req: Request<Streaming<pb::WatchRequest>>) -> Self::Future {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(serve_stream(self.0.clone(), req.into_inner(), tx));
        Box::pin(async move { Ok(Response::new(Outgoing::new(rx))) })
    }
}

impl Service<http::Request<tonic::body::Body>> for WatchServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path() != "/etcdserverpb.Watch/Watch" {
            // As the generated services answer a method they do not have.
            let mut response = http::Response::new(tonic::body::Body::default());
            let headers = response.headers_mut();
            headers.insert(
                Status::GRPC_STATUS,
                (tonic::Code::Unimplemented as i32).into(),
            );
            headers.insert(
                http::header::CONTENT_TYPE,
                tonic::metadata::GRPC_CONTENT_TYPE,
            );
            return Box::pin(async move { Ok(response) });
        }
        let method = WatchMethod(self.0.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<wire::WatchResponse, pb::WatchRequest>::default();
            Ok(tonic::server::Grpc::new(codec).streaming(method, req).await)
        })
    }
}

/// The request side's end of a stream's control channel.
type Out = mpsc::Sender<Control>;

/// A watch of a stream: its stop signal, the revision it has delivered up to, and its keys
/// (as its reports name them).
struct Running {
    stop: CancellationToken,
    progress: Arc<AtomicI64>,
    key: String,
    prefix: Option<String>,
}

/// Queues an answer for the stream; `false` if the client is gone.
async fn respond(tx: &Out, resp: pb::WatchResponse) -> bool {
    tx.send(Control::Respond(resp.into())).await.is_ok()
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
                let began = shared.observe.began();
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
                    Some(resp) => respond(&tx, resp).await,
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
                respond(&tx, resp).await
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
    let began = shared.observe.began();
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
            return respond(tx, resp).await;
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
            return respond(tx, created).await && respond(tx, end).await;
        }
    };
    report(first, Outcome::Served(String::new()));
    if !respond(tx, created).await {
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
    let options = Options {
        id,
        scan,
        prev_kv: c.prev_kv,
        no_put: c.filters.contains(&(FilterType::Noput as i32)),
        no_delete: c.filters.contains(&(FilterType::Nodelete as i32)),
        progress_notify: c.progress_notify,
        fragment: c.fragment,
    };
    let events = WatchEvents::new(shared.clone(), options, watcher, stop, progress);
    tx.send(Control::Add(events.into_stream())).await.is_ok()
}

/// The response that ends a watch on a store error: compaction sets `compact_revision`.
pub(crate) fn ended(shared: &Shared, id: i64, e: store::Error) -> pb::WatchResponse {
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
