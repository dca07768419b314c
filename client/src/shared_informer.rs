//! The SharedIndexInformer: client-go's `tools/cache/shared_informer.go` and the
//! `processDeltas` of `controller.go`.
//!
//! One informer per resource type, shared by every controller that cares about it:
//!
//! ```text
//!   Reflector ──▶ DeltaFIFO ──pop──▶ handle_deltas ──▶ Indexer (cache)
//!                                        │
//!                                        ├──▶ listener 1 (buffer) ──▶ handler 1 (e.g. deployment controller)
//!                                        └──▶ listener 2 (buffer) ──▶ handler 2 (e.g. replicaset controller)
//! ```
//!
//! * Deltas are applied oldest first: `Added/Updated/Replaced/Sync` update the cache and call
//!   `on_update(old, new)` if the key was cached, else `on_add(obj, is_in_initial_list)`;
//!   `Deleted` removes it and calls `on_delete(obj or tombstone)`.
//! * Each handler has its own listener: an **unbounded** buffer drained by its own task, as
//!   client-go's `processorListener` (an unbounded ring buffer). Unbounded on purpose: the
//!   process loop runs under the DeltaFIFO lock and must never wait for a slow handler, and
//!   one slow handler must not delay the others. The buffer holds only `Arc`s of objects
//!   that the cache holds anyway.
//! * A handler added after start first receives a synthetic `on_add` for every cached
//!   object.
//! * Tracing: with a [`Tracer`] set, each notification about an object that carries a trace
//!   annotation is handed to the handler under that trace (`trace::caused_by`); if the
//!   handler queued work for it, a "watch event" span records the delivery
//!   ([`crate::trace`]). Resyncs are not traced: nothing happened to the object.
//! * Resync: every handler may ask for a resync period; when it elapses the FIFO re-queues
//!   every cached object as `Sync`, delivered as `on_update(obj, obj)` **only** to the
//!   handlers whose period elapsed. A `Replaced` delta with an unchanged resourceVersion
//!   counts as a sync too.

use std::any::type_name;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use kube::{Resource, ResourceExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{SharedClock, TokioClock};
use crate::delta_fifo::{Delta, DeltaFifo, DeltaObject, DeltaType};
use crate::indexer::{IndexFunc, Indexer};
use crate::list_watch::ListerWatcher;
use crate::reflector::{LastSyncResourceVersion, Reflector};
use crate::trace::{SpanKind, Tracer, attr, caused_by, object_context};
use apimachinery::ObjectKey;

/// client-go's `minimumResyncPeriod`.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Callbacks for cache changes (client-go's `ResourceEventHandler`). Called from the
/// handler's own task, in the order the changes happened; keep them short (enqueue a key).
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// A new object; `is_in_initial_list` is true while the first list is being delivered.
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }
    /// A changed object (or a resync: then `old` and `new` have the same resourceVersion).
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        let _ = (old, new);
    }
    /// A deleted object, or a tombstone if the delete was only noticed by a relist.
    fn on_delete(&self, obj: DeltaObject<K>) {
        let _ = obj;
    }
}

type AddFn<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(DeltaObject<K>) + Send + Sync>;

/// A handler from closures (client-go's `ResourceEventHandlerFuncs`); unset ones do nothing.
pub struct ResourceEventHandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for ResourceEventHandlerFuncs<K> {
    fn default() -> Self {
        ResourceEventHandlerFuncs {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> ResourceEventHandlerFuncs<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the add callback.
    pub fn on_add(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Sets the update callback.
    pub fn on_update(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Sets the delete callback.
    pub fn on_delete(mut self, f: impl Fn(DeltaObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for ResourceEventHandlerFuncs<K> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }
    fn on_delete(&self, obj: DeltaObject<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

enum Notification<K> {
    Add {
        obj: Arc<K>,
        is_in_initial_list: bool,
    },
    Update {
        old: Arc<K>,
        new: Arc<K>,
    },
    Delete(DeltaObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => Notification::Add {
                obj: obj.clone(),
                is_in_initial_list: *is_in_initial_list,
            },
            Notification::Update { old, new } => Notification::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Notification::Delete(obj) => Notification::Delete(obj.clone()),
        }
    }
}

type Handler<K> = Arc<dyn ResourceEventHandler<K>>;

/// One handler's buffer (client-go's `processorListener`).
struct ProcessorListener<K> {
    tx: mpsc::UnboundedSender<Notification<K>>,
    /// The receiving half and the handler, until the informer starts the listener's task.
    pending: Option<(mpsc::UnboundedReceiver<Notification<K>>, Handler<K>)>,
    /// Zero: never resync.
    resync_period: Duration,
    /// When this listener is next due a resync (a period after it was added, then after
    /// each resync).
    next_resync: Instant,
}

/// The fan-out to listeners (client-go's `sharedProcessor`).
struct SharedProcessor<K> {
    listeners: Vec<ProcessorListener<K>>,
    /// Listeners whose resync period elapsed at the last `should_resync`.
    syncing: Vec<usize>,
}

impl<K> SharedProcessor<K> {
    fn distribute(&self, notification: Notification<K>, is_sync: bool) {
        let send = |listener: &ProcessorListener<K>| {
            // A closed receiver means the informer is shutting down: nothing to deliver.
            let _ = listener.tx.send(notification.clone());
        };
        if is_sync {
            self.syncing
                .iter()
                .filter_map(|i| self.listeners.get(*i))
                .for_each(send);
        } else {
            self.listeners.iter().for_each(send);
        }
    }

    /// Marks the listeners whose resync period elapsed; true if there are any.
    fn should_resync(&mut self, now: Instant) -> bool {
        self.syncing.clear();
        for (i, listener) in self.listeners.iter_mut().enumerate() {
            if listener.resync_period.is_zero() {
                continue;
            }
            if now >= listener.next_resync {
                self.syncing.push(i);
                listener.next_resync = now + listener.resync_period;
            }
        }
        !self.syncing.is_empty()
    }

    /// The smallest resync period requested (the informer's check period).
    fn resync_check_period(&self) -> Option<Duration> {
        self.listeners
            .iter()
            .map(|l| l.resync_period)
            .filter(|p| !p.is_zero())
            .min()
    }
}

/// Something whose cache can be waited for (client-go's `InformerSynced`).
pub trait HasSynced: Send + Sync {
    /// True once the first list has been delivered.
    fn has_synced(&self) -> bool;
    /// A receiver that turns `true` when `has_synced` does.
    fn synced_receiver(&self) -> watch::Receiver<bool>;
}

/// Waits until every informer has synced; false if `shutdown` fired first
/// (client-go's `cache.WaitForCacheSync`).
pub async fn wait_for_cache_sync(
    informers: &[&dyn HasSynced],
    shutdown: &CancellationToken,
) -> bool {
    for informer in informers {
        let mut synced = informer.synced_receiver();
        tokio::select! {
            () = shutdown.cancelled() => return false,
            result = synced.wait_for(|synced| *synced) => {
                if result.is_err() {
                    return false;
                }
            }
        }
    }
    true
}

/// The running informer's task owner, for listeners added after start.
#[derive(Clone)]
struct Running {
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Traces deliveries (disabled unless set before `run`).
    tracer: Tracer,
}

/// A shared informer with an indexed cache (a cheap-to-clone handle).
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        SharedIndexInformer {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    /// For logs: the Rust type name of the resource.
    name: String,
    indexer: Indexer<K>,
    fifo: DeltaFifo<K>,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    clock: SharedClock,
    /// Resync period for handlers added without one.
    default_resync: Duration,
    processor: Mutex<SharedProcessor<K>>,
    last_sync_rv: LastSyncResourceVersion,
    started: AtomicBool,
    running: Mutex<Option<Running>>,
    /// Wakes the resync loop when a handler (and maybe a shorter period) is added.
    handlers_changed: Notify,
    /// Records "watch event" spans for the deliveries handlers react to.
    tracer: Mutex<Tracer>,
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
{
    /// An informer over `lister_watcher` on the real clock; `default_resync` of zero means
    /// no resync.
    pub fn new(lister_watcher: Arc<dyn ListerWatcher<K>>, default_resync: Duration) -> Self {
        Self::with_clock(lister_watcher, default_resync, TokioClock::shared())
    }

    /// An informer on the given clock.
    pub fn with_clock(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        default_resync: Duration,
        clock: SharedClock,
    ) -> Self {
        let indexer = Indexer::new();
        let name = type_name::<K>()
            .rsplit("::")
            .next()
            .unwrap_or("object")
            .to_owned();
        SharedIndexInformer {
            inner: Arc::new(Inner {
                name,
                fifo: DeltaFifo::new(indexer.clone()),
                indexer,
                lister_watcher,
                clock,
                default_resync,
                processor: Mutex::new(SharedProcessor {
                    listeners: Vec::new(),
                    syncing: Vec::new(),
                }),
                last_sync_rv: LastSyncResourceVersion::default(),
                started: AtomicBool::new(false),
                running: Mutex::new(None),
                handlers_changed: Notify::new(),
                tracer: Mutex::new(Tracer::disabled()),
            }),
        }
    }

    fn processor(&self) -> MutexGuard<'_, SharedProcessor<K>> {
        self.inner
            .processor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Traces the deliveries to handlers with `tracer` (call before `run`).
    pub fn set_tracer(&self, tracer: Tracer) {
        *self.inner.tracer.lock().unwrap_or_else(|p| p.into_inner()) = tracer;
    }

    /// The informer's cache.
    pub fn indexer(&self) -> &Indexer<K> {
        &self.inner.indexer
    }

    /// Adds an index to the cache.
    pub fn add_indexer(&self, name: &str, index_fn: IndexFunc<K>) {
        self.inner.indexer.add_indexer(name, index_fn);
    }

    /// The last resourceVersion the reflector saw (`""` before the first list).
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.last_sync_rv.get()
    }

    /// Adds a handler with the informer's default resync period.
    pub fn add_event_handler(&self, handler: impl ResourceEventHandler<K>) {
        self.add_event_handler_with_resync_period(handler, self.inner.default_resync);
    }

    /// Adds a handler that also wants a resync every `resync_period` (zero: never; at least
    /// one second otherwise). A handler added after start gets `on_add` for every cached
    /// object first.
    pub fn add_event_handler_with_resync_period(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync_period: Duration,
    ) {
        let resync_period = if resync_period.is_zero() {
            resync_period
        } else {
            resync_period.max(MINIMUM_RESYNC_PERIOD)
        };
        let handler: Handler<K> = Arc::new(handler);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut processor = self.processor();
        let running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let pending = match running {
            Some(running) => {
                // Holding the processor lock: no delta is being distributed meanwhile, so the
                // listener sees the cache as of now and every change after it exactly once.
                for obj in self.inner.indexer.list() {
                    let _ = tx.send(Notification::Add {
                        obj,
                        is_in_initial_list: true,
                    });
                }
                running.tracker.spawn(run_listener(
                    rx,
                    handler,
                    running.shutdown,
                    running.tracer,
                    self.inner.name.clone(),
                ));
                None
            }
            None => Some((rx, handler)),
        };
        processor.listeners.push(ProcessorListener {
            tx,
            pending,
            resync_period,
            next_resync: self.inner.clock.now() + resync_period,
        });
        drop(processor);
        self.inner.handlers_changed.notify_one();
    }

    /// True once the first list has been delivered to the cache and handlers' buffers.
    pub fn has_synced(&self) -> bool {
        self.inner.fifo.has_synced()
    }

    /// Runs the informer until `shutdown` fires: the reflector, the process loop, the resync
    /// loop and one task per handler, all owned by a task tracker and joined before this
    /// returns. Running an informer twice is a no-op.
    pub async fn run(&self, shutdown: CancellationToken) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            tracing::warn!(informer = %self.inner.name, "informer already started");
            return;
        }
        let token = shutdown.child_token();
        let tracker = TaskTracker::new();
        let tracer = self
            .inner
            .tracer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        *self.inner.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(Running {
            tracker: tracker.clone(),
            shutdown: token.clone(),
            tracer: tracer.clone(),
        });
        for listener in &mut self.processor().listeners {
            if let Some((rx, handler)) = listener.pending.take() {
                tracker.spawn(run_listener(
                    rx,
                    handler,
                    token.clone(),
                    tracer.clone(),
                    self.inner.name.clone(),
                ));
            }
        }
        let reflector = Reflector::new(
            self.inner.name.clone(),
            self.inner.lister_watcher.clone(),
            self.inner.fifo.clone(),
            self.inner.clock.clone(),
        )
        .with_last_sync_resource_version(self.inner.last_sync_rv.clone());
        tracker.spawn(reflector.run(token.clone()));
        tracker.spawn(self.clone().process_loop(token.clone()));
        tracker.spawn(self.clone().resync_loop(token.clone()));

        token.cancelled().await;
        self.inner.fifo.close();
        tracker.close();
        tracker.wait().await;
        tracing::debug!(informer = %self.inner.name, "informer stopped");
    }

    async fn process_loop(self, shutdown: CancellationToken) {
        loop {
            let popped = tokio::select! {
                () = shutdown.cancelled() => return,
                popped = self.inner.fifo.pop(|deltas, initial| self.handle_deltas(deltas, initial)) => popped,
            };
            if popped.is_none() {
                return;
            }
        }
    }

    /// client-go's `processDeltas`: runs under the FIFO lock, never blocks.
    fn handle_deltas(&self, deltas: Vec<Delta<K>>, is_in_initial_list: bool) {
        let processor = self.processor();
        let indexer = &self.inner.indexer;
        for delta in deltas {
            match delta.kind {
                DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated => {
                    let new = delta.object.object().clone();
                    match indexer.update(new.clone()) {
                        Some(old) => {
                            let is_sync = match delta.kind {
                                DeltaType::Sync => true,
                                DeltaType::Replaced => {
                                    old.resource_version() == new.resource_version()
                                }
                                _ => false,
                            };
                            processor.distribute(Notification::Update { old, new }, is_sync);
                        }
                        None => processor.distribute(
                            Notification::Add {
                                obj: new,
                                is_in_initial_list,
                            },
                            false,
                        ),
                    }
                }
                DeltaType::Deleted => {
                    indexer.delete(&delta.object.key());
                    processor.distribute(Notification::Delete(delta.object), false);
                }
            }
        }
    }

    async fn resync_loop(self, shutdown: CancellationToken) {
        loop {
            let changed = self.inner.handlers_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let period = self.processor().resync_check_period();
            match period {
                None => tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = changed => continue,
                },
                Some(period) => tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = self.inner.clock.sleep(period) => {}
                },
            }
            let now = self.inner.clock.now();
            if self.processor().should_resync(now) {
                self.inner.fifo.resync();
            }
        }
    }

    /// The cached object under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.inner.indexer.get_by_key(key)
    }

    /// This informer as a type-erased runnable (used by the factory).
    pub fn run_boxed(&self, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let this = self.clone();
        Box::pin(async move { this.run(shutdown).await })
    }
}

impl<K> HasSynced for SharedIndexInformer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
{
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn synced_receiver(&self) -> watch::Receiver<bool> {
        self.inner.fifo.synced()
    }
}

/// Delivers one listener's notifications to its handler, in order, until shutdown.
async fn run_listener<K: Resource + 'static>(
    mut rx: mpsc::UnboundedReceiver<Notification<K>>,
    handler: Handler<K>,
    shutdown: CancellationToken,
    tracer: Tracer,
    kind: String,
) {
    loop {
        let notification = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            n = rx.recv() => match n {
                Some(n) => n,
                None => return,
            },
        };
        if tracer.is_enabled() {
            deliver_traced(&tracer, &kind, handler.as_ref(), notification);
        } else {
            deliver(handler.as_ref(), notification);
        }
    }
}

fn deliver<K: 'static>(handler: &dyn ResourceEventHandler<K>, notification: Notification<K>) {
    match notification {
        Notification::Add {
            obj,
            is_in_initial_list,
        } => handler.on_add(obj, is_in_initial_list),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete(obj) => handler.on_delete(obj),
    }
}

/// [`deliver`] under the trace of the object's last write; a "watch event" span records the
/// delivery if the handler queued work for it.
fn deliver_traced<K: Resource + 'static>(
    tracer: &Tracer,
    kind: &str,
    handler: &dyn ResourceEventHandler<K>,
    notification: Notification<K>,
) {
    let (event, meta) = match &notification {
        Notification::Add {
            obj,
            is_in_initial_list,
        } => (
            if *is_in_initial_list {
                "ADDED (initial list)"
            } else {
                "ADDED"
            },
            obj.meta(),
        ),
        Notification::Update { old, new }
            if old.meta().resource_version != new.meta().resource_version =>
        {
            ("MODIFIED", new.meta())
        }
        Notification::Update { .. } => return deliver(handler, notification),
        Notification::Delete(obj) => ("DELETED", obj.object().meta()),
    };
    let Some(parent) = object_context(meta) else {
        return deliver(handler, notification);
    };
    if !parent.sampled {
        // A trace past its span budget: carry it on, record nothing.
        caused_by(parent, || deliver(handler, notification));
        return;
    }
    let object = trace::object_label(meta.namespace.as_deref(), meta.name.as_deref());
    let rv = meta.resource_version.clone().unwrap_or_default();
    let started = SystemTime::now();
    let context = parent.child();
    let ((), queues) = caused_by(context, || deliver(handler, notification));
    if queues.is_empty() {
        return; // nobody reacted: nothing to show
    }
    let Some(span) = tracer.span(context, &parent, "watch event", SpanKind::Consumer) else {
        return;
    };
    let mut span = span.started_at(started);
    span.set("event", event)
        .set("kind", kind)
        .set(attr::KEY, object.as_str())
        .set("resourceVersion", rv.as_str())
        .set("queues", queues.join(","));
    span.summary = format!(
        "{event} {kind} {object} (rv {rv}) → {} queue",
        queues.join(", ")
    );
    span.end();
    tracer.record(span);
}

#[cfg(test)]
#[path = "shared_informer_tests.rs"]
mod tests;
