//! What a watch stream sends: the answers to its requests (created, canceled, progress) and
//! the events of each of its watches, merged into the one gRPC response stream (etcd's
//! `serverWatchStream.sendLoop` in `server/etcdserver/api/v3rpc/watch.go`, over the per-watch
//! channels of `server/storage/mvcc/watchable_store.go`).
//!
//! ```text
//!   serve_stream (watch.rs) ──Control (one ordered channel)──▶ Outgoing ──▶ tonic ──▶ client
//!                                 Respond(created/canceled/…)     ▲ polls each watch's
//!                                 Add(a watch's events)           │ events when tonic
//!   store::Watcher ──▶ WatchEvents (one per watch) ───────────────┘ asks for more
//! ```
//!
//! No task and no channel stand between a store watcher and the response stream: tonic polls
//! [`Outgoing`] when the connection can take more, and a watch then takes every event already
//! waiting for it into one response (`batch.rs`). A watch's `created` answer goes through the
//! same channel as its events stream, ahead of it, so it always comes first; a canceled watch
//! sends nothing after its `canceled` answer.

use crate::Shared;
use crate::batch::Batch;
use crate::keys::Scan;
use crate::proto::etcdserverpb as pb;
use crate::wire;
use futures::stream::SelectAll;
use futures::{FutureExt, Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::{Context, Poll};
use store::EventKind;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// One watch's events as responses; ends when the watch does.
pub(crate) type EventStream = Pin<Box<dyn Stream<Item = wire::WatchResponse> + Send>>;

/// What the request side of a watch stream hands to its response side, in order.
pub(crate) enum Control {
    /// An answer to send (created, canceled, progress, a refused create).
    Respond(wire::WatchResponse),
    /// A new watch, whose events go out from now on.
    Add(EventStream),
}

/// The response stream of one Watch call: the answers and every watch's events.
pub(crate) struct Outgoing {
    control: mpsc::Receiver<Control>,
    watches: SelectAll<EventStream>,
}

impl Outgoing {
    /// The response side of the channel whose sender the request side holds.
    pub(crate) fn new(control: mpsc::Receiver<Control>) -> Outgoing {
        Outgoing {
            control,
            watches: SelectAll::new(),
        }
    }
}

impl Stream for Outgoing {
    type Item = Result<wire::WatchResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // Answers first: a `created` before the watch's events, a `canceled` before anything
        // later. The stream ends with the request side (client gone, or shutdown).
        loop {
            match this.control.poll_recv(cx) {
                Poll::Ready(Some(Control::Respond(r))) => return Poll::Ready(Some(Ok(r))),
                Poll::Ready(Some(Control::Add(w))) => this.watches.push(w),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        match this.watches.poll_next_unpin(cx) {
            Poll::Ready(Some(r)) => Poll::Ready(Some(Ok(r))),
            // No watch (yet): the control channel wakes us.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

/// How one watch reports (from its create request).
pub(crate) struct Options {
    pub(crate) id: i64,
    pub(crate) scan: Scan,
    pub(crate) prev_kv: bool,
    pub(crate) no_put: bool,
    pub(crate) no_delete: bool,
    pub(crate) progress_notify: bool,
    /// Cut a revision too large for one response into fragments (etcd's `fragment`).
    pub(crate) fragment: bool,
}

/// What woke a waiting watch.
enum Woke {
    /// A store batch, an error, or the store's end.
    Events(Option<store::Result<store::WatchResponse>>),
    /// The progress notification interval.
    Tick,
}

/// One watch: its store watcher, what it has gathered and not yet sent, and how it ends.
pub(crate) struct WatchEvents {
    shared: Arc<Shared>,
    options: Options,
    watcher: store::Watcher,
    /// Canceled by a cancel request, by the stream's end, or by this watch's own end.
    stop: CancellationToken,
    /// The revision this watch has delivered up to (for progress answers).
    progress: Arc<AtomicI64>,
    ticker: tokio::time::Interval,
    sent_since_tick: bool,
    /// Responses gathered, to hand out one by one.
    pending: VecDeque<wire::WatchResponse>,
    /// The revision delivered once `pending` is out.
    delivered: Option<i64>,
    /// After `pending`: end, with this last response if any (a store error).
    ending: Option<Option<wire::WatchResponse>>,
}

impl WatchEvents {
    /// A watch over `watcher` reporting as `options` say.
    pub(crate) fn new(
        shared: Arc<Shared>,
        options: Options,
        watcher: store::Watcher,
        stop: CancellationToken,
        progress: Arc<AtomicI64>,
    ) -> WatchEvents {
        let interval = shared.options.progress_notify_interval;
        let ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        WatchEvents {
            shared,
            options,
            watcher,
            stop,
            progress,
            ticker,
            sent_since_tick: false,
            pending: VecDeque::new(),
            delivered: None,
            ending: None,
        }
    }

    /// Its responses as a stream.
    pub(crate) fn into_stream(self) -> EventStream {
        Box::pin(futures::stream::unfold(self, WatchEvents::next))
    }

    /// The next response, `None` once the watch is over.
    async fn next(mut self) -> Option<(wire::WatchResponse, WatchEvents)> {
        loop {
            if self.stop.is_cancelled() {
                return None;
            }
            if let Some(resp) = self.pending.pop_front() {
                if self.pending.is_empty() {
                    self.mark_delivered();
                }
                self.sent_since_tick = true;
                return Some((resp, self));
            }
            self.mark_delivered();
            if let Some(last) = self.ending.take() {
                self.stop.cancel();
                return last.map(|resp| (resp, self));
            }
            let woke = tokio::select! {
                biased;
                () = self.stop.cancelled() => return None,
                b = self.watcher.recv() => Woke::Events(b),
                _ = self.ticker.tick(), if self.options.progress_notify => Woke::Tick,
            };
            let first = match woke {
                Woke::Events(first) => first,
                Woke::Tick => {
                    // A progress notification when nothing went out since the last tick.
                    let quiet = !self.sent_since_tick;
                    self.sent_since_tick = false;
                    if quiet {
                        let resp = pb::WatchResponse {
                            header: self.shared.header_at(self.progress.load(Ordering::Acquire)),
                            watch_id: self.options.id,
                            ..Default::default()
                        };
                        return Some((resp.into(), self));
                    }
                    continue;
                }
            };
            self.gather(first);
        }
    }

    /// Publishes the revision delivered so far, once every response up to it is handed out.
    fn mark_delivered(&mut self) {
        if let Some(rev) = self.delivered.take() {
            self.progress.store(rev, Ordering::Release);
        }
    }

    /// Takes `first` and every store batch already waiting behind it (up to the batch's
    /// bound) into `pending`, in order; notes how the watch ends if it does.
    fn gather(&mut self, first: Option<store::Result<store::WatchResponse>>) {
        let mut batch = Batch::default();
        let mut next = first;
        loop {
            match next {
                Some(Ok(b)) => {
                    if let Some(e) = b.events.last() {
                        self.delivered = Some(e.revision().0 as i64);
                    }
                    for e in b.events {
                        if self.keeps(&e) {
                            batch.push(self.event(e));
                        }
                    }
                }
                Some(Err(e)) => {
                    let end = crate::watch::ended(&self.shared, self.options.id, e);
                    self.ending = Some(Some(end.into()));
                    break;
                }
                None => {
                    self.ending = Some(None);
                    break;
                }
            }
            if batch.full() {
                break;
            }
            match self.watcher.recv().now_or_never() {
                Some(more) => next = more,
                None => break,
            }
        }
        if batch.is_empty() {
            return;
        }
        let current = self.shared.backend.current_revision().0 as i64;
        for part in batch.into_parts(self.options.fragment) {
            let top = part.events.last().map_or(0, wire::Event::revision);
            self.pending.push_back(wire::WatchResponse {
                header: self.shared.header_at(current.max(top)),
                watch_id: self.options.id,
                events: part.events,
                fragment: part.fragment,
                ..Default::default()
            });
        }
    }

    /// Whether the watch reports this event: its key in the watched range, its kind not
    /// filtered out.
    fn keeps(&self, e: &store::Event) -> bool {
        self.options.scan.contains(&e.kv.key)
            && match e.kind {
                EventKind::Put => !self.options.no_put,
                EventKind::Delete => !self.options.no_delete,
            }
    }

    /// A store event as the watch reports it, the keys' leases attached.
    fn event(&self, e: store::Event) -> wire::Event {
        let kind = match e.kind {
            EventKind::Put => crate::proto::mvccpb::event::EventType::Put,
            EventKind::Delete => crate::proto::mvccpb::event::EventType::Delete,
        };
        let leases = &self.shared.leases;
        let prev_kv = if self.options.prev_kv {
            e.prev_kv.map(|kv| {
                let lease = leases.lease_of(&kv.key);
                wire::KeyValue::new(kv, lease)
            })
        } else {
            None
        };
        let lease = leases.lease_of(&e.kv.key);
        wire::Event::new(kind as i32, wire::KeyValue::new(e.kv, lease), prev_kv)
    }
}

#[cfg(test)]
mod tests {
    //! Batching seen from a real etcd client: nothing lost, nothing reordered, a revision never
    //! split (unless fragments are asked for).
    use crate::batch::MAX_REVISIONS;
    use bytes::Bytes;
    use etcd_client::{Client, Txn, TxnOp, WatchOptions, WatchStream};
    use std::sync::Arc;
    use store::{Backend, Op, Store, StoreConfig};
    use tokio_util::sync::CancellationToken;

    /// A store and a writable endpoint over it, with a client.
    struct Served {
        store: Arc<Store>,
        client: Client,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
        _dir: tempfile::TempDir,
    }

    async fn serve() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.fsync = false;
        let store = Arc::new(Store::open(config).await.unwrap());
        let backend: Arc<dyn Backend> = store.clone();
        let options = crate::EtcdOptions {
            writable: true,
            ..crate::EtcdOptions::default()
        };
        let stop = CancellationToken::new();
        let at = "127.0.0.1:0".parse().unwrap();
        let (addr, task) = crate::spawn(at, backend, options, stop.clone())
            .await
            .unwrap();
        let client = Client::connect([format!("http://{addr}")], None)
            .await
            .unwrap();
        Served {
            store,
            client,
            stop,
            task,
            _dir: dir,
        }
    }

    impl Served {
        /// A created watch on `prefix`.
        async fn watch(&self, prefix: &str, options: WatchOptions) -> WatchStream {
            let mut stream = self
                .client
                .watch_client()
                .watch(prefix, Some(options.with_prefix()))
                .await
                .unwrap();
            assert!(stream.message().await.unwrap().unwrap().created());
            stream
        }

        /// Reads responses until `n` events came; (revision, key) of each event, response by
        /// response.
        async fn responses(stream: &mut WatchStream, n: usize) -> Vec<Vec<(i64, String)>> {
            let mut got = Vec::new();
            let mut count = 0;
            while count < n {
                let resp = stream.message().await.unwrap().unwrap();
                assert!(!resp.canceled(), "{resp:?}");
                let events: Vec<(i64, String)> = resp
                    .events()
                    .iter()
                    .map(|e| {
                        let kv = e.kv().unwrap();
                        (kv.mod_revision(), kv.key_str().unwrap().to_owned())
                    })
                    .collect();
                count += events.len();
                got.push(events);
            }
            assert_eq!(count, n);
            got
        }

        async fn stop(self) {
            drop(self.client);
            self.stop.cancel();
            self.task.await.unwrap().unwrap();
            self.store.close().await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_txn_of_several_keys_arrives_in_one_response() {
        let s = serve().await;
        let mut stream = s.watch("/t/", WatchOptions::new()).await;
        let ops: Vec<TxnOp> = (0..5)
            .map(|i| TxnOp::put(format!("/t/{i}"), "v", None))
            .collect();
        let resp = s
            .client
            .kv_client()
            .txn(Txn::new().and_then(ops))
            .await
            .unwrap();
        let rev = resp.header().unwrap().revision();
        let got = Served::responses(&mut stream, 5).await;
        let want: Vec<(i64, String)> = (0..5).map(|i| (rev, format!("/t/{i}"))).collect();
        assert_eq!(got, [want]);
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_arrive_complete_and_in_revision_order() {
        let s = serve().await;
        let mut stream = s.watch("/c/", WatchOptions::new()).await;
        let (writers, each) = (8, 200);
        let mut tasks = Vec::new();
        for w in 0..writers {
            let mut kv = s.client.kv_client();
            tasks.push(tokio::spawn(async move {
                let mut written = Vec::new();
                for i in 0..each {
                    let key = format!("/c/{w}/{i}");
                    let r = kv.put(key.clone(), "v", None).await.unwrap();
                    written.push((r.header().unwrap().revision(), key));
                }
                written
            }));
        }
        let got = Served::responses(&mut stream, writers * each).await;
        let mut written = Vec::new();
        for t in tasks {
            written.extend(t.await.unwrap());
        }
        written.sort();
        let got: Vec<(i64, String)> = got.into_iter().flatten().collect();
        // Every put once, in revision order.
        assert_eq!(got, written);
        s.stop().await;
    }

    #[tokio::test]
    async fn a_watch_catching_up_gets_whole_revisions_in_bounded_responses() {
        let s = serve().await;
        let total = 2_500;
        let mut written = Vec::new();
        for i in 0..total - 3 {
            let key = format!("/h/{i:04}");
            let r = s
                .store
                .put(Bytes::from(key.clone()), Bytes::from("v"))
                .await;
            written.push((r.unwrap().revision.0 as i64, key));
        }
        // One revision of three keys near the end.
        let keys: Vec<String> = (0..3).map(|i| format!("/h/txn/{i}")).collect();
        let txn = store::Txn {
            success: keys
                .iter()
                .map(|k| Op::Put {
                    key: Bytes::from(k.clone()),
                    value: Bytes::from("v"),
                })
                .collect(),
            ..store::Txn::default()
        };
        let rev = s.store.txn(txn).await.unwrap().revision.0 as i64;
        written.extend(keys.into_iter().map(|k| (rev, k)));
        let from = written[0].0;
        let mut stream = s
            .watch("/h/", WatchOptions::new().with_start_revision(from))
            .await;
        let got = Served::responses(&mut stream, total).await;
        for resp in &got {
            let mut revs: Vec<i64> = resp.iter().map(|(r, _)| *r).collect();
            revs.dedup();
            assert!(revs.len() <= MAX_REVISIONS, "{} revisions", revs.len());
        }
        // The store replays history in chunks of 512 revisions; each response takes whole
        // chunks, so 2,500 events come in 3 to 5 responses.
        assert!((3..=5).contains(&got.len()), "{} responses", got.len());
        let txn_in: Vec<usize> = got
            .iter()
            .map(|resp| resp.iter().filter(|(r, _)| *r == rev).count())
            .filter(|n| *n > 0)
            .collect();
        assert_eq!(txn_in, [3], "the txn's revision is in one response");
        assert_eq!(got.into_iter().flatten().collect::<Vec<_>>(), written);
        s.stop().await;
    }

    #[tokio::test]
    async fn a_revision_over_the_size_bound_is_fragmented_only_when_asked() {
        let s = serve().await;
        let mut whole = s.watch("/f/", WatchOptions::new()).await;
        let mut cut = s.watch("/f/", WatchOptions::new().with_fragment()).await;
        // Two values of 1 MiB in one revision: over the 1.5 MiB bound.
        let big = Bytes::from(vec![b'x'; 1 << 20]);
        let txn = store::Txn {
            success: ["/f/a", "/f/b"]
                .map(|k| Op::Put {
                    key: Bytes::from_static(k.as_bytes()),
                    value: big.clone(),
                })
                .to_vec(),
            ..store::Txn::default()
        };
        let rev = s.store.txn(txn).await.unwrap().revision.0 as i64;
        let (a, b) = ((rev, "/f/a".to_owned()), (rev, "/f/b".to_owned()));
        assert_eq!(
            Served::responses(&mut whole, 2).await,
            [vec![a.clone(), b.clone()]]
        );
        assert_eq!(Served::responses(&mut cut, 2).await, [vec![a], vec![b]]);
        s.stop().await;
    }
}
