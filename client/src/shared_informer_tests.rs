//! Informer tests against the scripted [`FakeSource`]. Time is tokio's paused clock: when
//! every task is idle, tokio jumps to the next timer (reflector backoff, resync), so the
//! tests neither sleep nor depend on wall time.

use super::*;
use crate::fake_source::{FakeSource, Request};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use std::collections::BTreeMap;

fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_string(), value.to_string())])),
        ..Default::default()
    }
}

fn rv(obj: &ConfigMap) -> String {
    obj.resource_version().unwrap_or_default()
}

/// A handler that reports every call as one line, e.g. `update a 1->3`.
struct Recorder(mpsc::UnboundedSender<String>);

impl Recorder {
    fn new() -> (Self, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Recorder(tx), rx)
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) {
        let _ = self.0.send(format!(
            "add {} rv={} initial={initial}",
            obj.name_any(),
            rv(&obj)
        ));
    }
    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        let _ = self.0.send(format!(
            "update {} {}->{}",
            new.name_any(),
            rv(&old),
            rv(&new)
        ));
    }
    fn on_delete(&self, obj: DeltaObject<ConfigMap>) {
        let kind = if obj.is_tombstone() { "tombstone " } else { "" };
        let _ = self.0.send(format!(
            "delete {} {kind}rv={}",
            obj.key().name,
            rv(obj.object())
        ));
    }
}

async fn next(events: &mut mpsc::UnboundedReceiver<String>) -> String {
    match tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
        Ok(Some(event)) => event,
        other => panic!("no handler event: {other:?}"),
    }
}

/// A fake source holding `names` (all at value "1") and an informer over it.
fn informer_over(names: &[&str]) -> (FakeSource<ConfigMap>, SharedIndexInformer<ConfigMap>) {
    let source = FakeSource::new();
    for name in names {
        source.add(cm(name, "1"));
    }
    let informer = SharedIndexInformer::new(Arc::new(source.clone()), Duration::ZERO);
    (source, informer)
}

struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn start(informer: &SharedIndexInformer<ConfigMap>) -> Running {
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, shutdown) = (informer.clone(), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    assert!(wait_for_cache_sync(&[informer], &shutdown).await);
    Running { shutdown, task }
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("informer task panicked");
    }
}

#[tokio::test(start_paused = true)]
async fn handlers_see_add_update_delete_in_order() {
    let (source, informer) = informer_over(&["a"]);
    let (recorder, mut events) = Recorder::new();
    informer.add_event_handler(recorder);
    let running = start(&informer).await;
    assert_eq!(next(&mut events).await, "add a rv=1 initial=true");

    source.add(cm("b", "1"));
    source.modify(cm("a", "2"));
    source.delete(cm("b", "1"));
    // The FIFO queues keys, not events: b's delete joins b's pending add, so both are
    // delivered before a's update (each key's own deltas stay in order).
    assert_eq!(next(&mut events).await, "add b rv=2 initial=false");
    assert_eq!(next(&mut events).await, "delete b rv=4");
    assert_eq!(next(&mut events).await, "update a 1->3");
    assert!(
        informer
            .get(&ObjectKey::new(Some("default"), "b"))
            .is_none()
    );
    assert_eq!(
        informer
            .get(&ObjectKey::new(Some("default"), "a"))
            .map(|a| rv(&a)),
        Some("3".into())
    );
    running.stop().await;
}

/// The watch ends with ERROR 410 after changes the client never saw: the reflector relists
/// from "" and the handlers see the difference, including a tombstone for the missed delete.
#[tokio::test(start_paused = true)]
async fn relist_after_410_delivers_missed_changes_and_tombstones() {
    let (source, informer) = informer_over(&["a", "b"]);
    let (recorder, mut events) = Recorder::new();
    informer.add_event_handler(recorder);
    let running = start(&informer).await;
    assert_eq!(next(&mut events).await, "add a rv=1 initial=true");
    assert_eq!(next(&mut events).await, "add b rv=2 initial=true");
    source.modify(cm("a", "2"));
    assert_eq!(next(&mut events).await, "update a 1->3");

    // While the watch is down: b deleted, c created, a changed. Then the watch expires.
    source.delete_silently(cm("b", "1"));
    source.add_silently(cm("c", "1"));
    source.modify_silently(cm("a", "3"));
    let mut requests = source.subscribe_requests();
    source.expire_watches();

    assert_eq!(next(&mut events).await, "update a 3->6");
    assert_eq!(next(&mut events).await, "add c rv=5 initial=false");
    assert_eq!(next(&mut events).await, "delete b tombstone rv=2");
    let relist = requests.recv().await.expect("a request after the 410");
    assert_eq!(
        relist,
        Request::List(crate::list_watch::ListOptions {
            resource_version: String::new(),
            limit: Some(500),
            continue_token: None
        }),
        "a 410 relists from \"\" (consistent read), paged"
    );
    let mut keys: Vec<String> = informer
        .indexer()
        .list_keys()
        .iter()
        .map(ToString::to_string)
        .collect();
    keys.sort();
    assert_eq!(keys, ["default/a", "default/c"]);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn bookmarks_advance_the_resource_version() {
    let (source, informer) = informer_over(&["a"]);
    let running = start(&informer).await;
    assert_eq!(informer.last_sync_resource_version(), "1");
    for _ in 0..10_000 {
        if source.watchers() > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let mut requests = source.subscribe_requests();
    source.modify_silently(cm("unrelated", "1")); // rv 2: no event for us
    source.bookmark(); // BOOKMARK rv 2
    source.end_watches(); // server-side timeout: the reflector watches again
    match requests.recv().await {
        Some(Request::Watch(opts)) => {
            assert_eq!(
                opts.resource_version, "2",
                "re-watch from the bookmark's RV"
            );
            assert!(opts.allow_watch_bookmarks);
            assert!(
                (300..=600).contains(&opts.timeout_seconds),
                "{}",
                opts.timeout_seconds
            );
        }
        other => panic!("expected a re-watch, got {other:?}"),
    }
    assert_eq!(informer.last_sync_resource_version(), "2");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resync_delivers_updates_only_to_handlers_whose_period_elapsed() {
    let (source, informer) = informer_over(&["a"]);
    let (resyncing, mut resync_events) = Recorder::new();
    let (quiet, mut quiet_events) = Recorder::new();
    informer.add_event_handler_with_resync_period(resyncing, Duration::from_secs(30));
    informer.add_event_handler(quiet);
    let running = start(&informer).await;
    assert_eq!(next(&mut resync_events).await, "add a rv=1 initial=true");
    assert_eq!(next(&mut quiet_events).await, "add a rv=1 initial=true");

    let before = tokio::time::Instant::now();
    assert_eq!(
        next(&mut resync_events).await,
        "update a 1->1",
        "a resync is an update with equal RVs"
    );
    assert!(before.elapsed() >= Duration::from_secs(30) - Duration::from_secs(1));

    source.modify(cm("a", "2"));
    // The quiet handler's next event is the real change: it never got the resync.
    assert_eq!(next(&mut quiet_events).await, "update a 1->2");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn each_handler_resyncs_on_its_own_period() {
    let (_source, informer) = informer_over(&["a"]);
    let (fast, mut fast_events) = Recorder::new();
    let (slow, mut slow_events) = Recorder::new();
    informer.add_event_handler_with_resync_period(fast, Duration::from_secs(30));
    informer.add_event_handler_with_resync_period(slow, Duration::from_secs(60));
    let t0 = tokio::time::Instant::now();
    let running = start(&informer).await;
    assert_eq!(next(&mut fast_events).await, "add a rv=1 initial=true");
    assert_eq!(next(&mut slow_events).await, "add a rv=1 initial=true");
    assert_eq!(next(&mut fast_events).await, "update a 1->1");
    let fast_at = t0.elapsed();
    assert_eq!(next(&mut slow_events).await, "update a 1->1");
    let slow_at = t0.elapsed();
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&fast_at),
        "{fast_at:?}"
    );
    assert!(
        (Duration::from_secs(60)..Duration::from_secs(61)).contains(&slow_at),
        "{slow_at:?}"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn handler_added_after_start_gets_synthetic_adds() {
    let (source, informer) = informer_over(&["a"]);
    let running = start(&informer).await;
    let (late, mut events) = Recorder::new();
    informer.add_event_handler(late);
    assert_eq!(next(&mut events).await, "add a rv=1 initial=true");
    source.add(cm("b", "1"));
    assert_eq!(next(&mut events).await, "add b rv=2 initial=false");
    running.stop().await;
}

/// A handler stuck in a callback does not hold up another handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handler_does_not_block_others() {
    let (source, informer) = informer_over(&["a"]);
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let (slow_tx, mut slow_events) = mpsc::unbounded_channel();
    informer.add_event_handler(ResourceEventHandlerFuncs::new().on_add(
        move |obj: Arc<ConfigMap>, _| {
            // Blocks its listener task until the test opens the gate.
            let _ = gate_rx.lock().map(|rx| rx.recv());
            let _ = slow_tx.send(obj.name_any());
        },
    ));
    let (fast, mut fast_events) = Recorder::new();
    informer.add_event_handler(fast);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, shutdown) = (informer.clone(), shutdown.clone());
        async move { informer.run(shutdown).await }
    });
    assert!(wait_for_cache_sync(&[&informer], &shutdown).await);
    source.add(cm("b", "1"));
    assert_eq!(next(&mut fast_events).await, "add a rv=1 initial=true");
    assert_eq!(next(&mut fast_events).await, "add b rv=2 initial=false");
    assert!(
        slow_events.try_recv().is_err(),
        "the slow handler is still stuck on a"
    );
    gate_tx.send(()).expect("gate");
    gate_tx.send(()).expect("gate");
    assert_eq!(next(&mut slow_events).await, "a");
    assert_eq!(next(&mut slow_events).await, "b");
    shutdown.cancel();
    task.await.expect("informer task");
}

/// A traced informer over the ConfigMaps `plain` (no annotation) and `a` (in trace `parent`),
/// whose handler queues each added name, and the exporter of its spans.
fn traced_informer(
    plain: &[&str],
    parent: trace::SpanContext,
) -> (
    SharedIndexInformer<ConfigMap>,
    crate::Queue<String>,
    crate::trace::Exporter,
) {
    use crate::trace::{TRACEPARENT_ANNOTATION, Tracer};
    let mut traced = cm("a", "1");
    traced.metadata.annotations = Some(BTreeMap::from([(
        TRACEPARENT_ANNOTATION.to_string(),
        parent.traceparent(),
    )]));
    let (source, informer) = informer_over(plain);
    source.add(traced);
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:1".parse().expect("a URL"),
    ))
    .expect("a client");
    let (tracer, exporter) = Tracer::new("test", client, 16);
    informer.set_tracer(tracer);
    let queue: crate::Queue<String> = crate::Queue::new("q");
    let q = queue.clone();
    informer.add_event_handler(
        ResourceEventHandlerFuncs::new()
            .on_add(move |obj: Arc<ConfigMap>, _| q.add(obj.name_any())),
    );
    (informer, queue, exporter)
}

/// A delivery is traced only when the object carries a trace and a handler queued work for
/// it: the queue gets the "watch event" span as the key's cause.
#[tokio::test(start_paused = true)]
async fn traced_deliveries_hand_the_objects_trace_to_the_queue() {
    let parent = trace::SpanContext::new_root();
    let (informer, queue, mut exporter) = traced_informer(&["plain"], parent);
    let (recorder, mut events) = Recorder::new();
    informer.add_event_handler(recorder);
    let running = start(&informer).await;
    next(&mut events).await;
    next(&mut events).await;
    let mut causes = BTreeMap::new();
    for _ in 0..2 {
        let key = queue.get().await.expect("queued");
        causes.insert(key.clone(), queue.take_causes(&key));
        queue.done(&key);
    }
    running.stop().await;
    assert!(causes["plain"].is_empty(), "no annotation, no trace");
    let spans = exporter.try_drain();
    assert_eq!(spans.len(), 1, "only the reacted-to delivery: {spans:?}");
    let span = &spans[0];
    assert_eq!(span.name, "watch event");
    assert_eq!(span.trace_id, parent.trace_id);
    assert_eq!(span.parent_span_id, Some(parent.span_id));
    assert_eq!(
        span.summary,
        "ADDED (initial list) ConfigMap default/a (rv 2) → q queue"
    );
    assert_eq!(causes["a"].len(), 1);
    assert_eq!(causes["a"][0].context, span.context());
}

/// An object whose trace is past its span budget (the W3C sampled flag off): the queue gets
/// the object's context as the cause, to carry on, and no span is recorded.
#[tokio::test(start_paused = true)]
async fn an_unsampled_trace_reaches_the_queue_without_a_span() {
    let parent = trace::SpanContext {
        sampled: false,
        ..trace::SpanContext::new_root()
    };
    let (informer, queue, mut exporter) = traced_informer(&[], parent);
    let running = start(&informer).await;
    let key = queue.get().await.expect("queued");
    let causes = queue.take_causes(&key);
    queue.done(&key);
    running.stop().await;
    assert_eq!(key, "a");
    assert_eq!(
        causes.iter().map(|c| c.context).collect::<Vec<_>>(),
        [parent]
    );
    assert_eq!(exporter.try_drain().len(), 0, "nothing recorded");
}
