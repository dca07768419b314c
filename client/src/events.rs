//! The event recorder: client-go's `tools/record/event.go` (`EventRecorder`,
//! `EventBroadcaster`) and `tools/record/events_cache.go` (`EventCorrelator`).
//!
//! Controllers report what they did as core/v1 Events (`kubectl describe` shows them). The
//! recorder never blocks a controller and never floods the API server:
//!
//! ```text
//!   recorder.event(ref, Normal, "ScalingReplicaSet", "Scaled up ... to 3")
//!      │ try_send (bounded 1000; full → dropped and logged, as client-go does)
//!      ▼
//!   broadcaster task ─▶ EventCorrelator ─▶ sink (API server)
//!                        1. aggregate: ≥ 10 events with the same (source, object, type,
//!                           reason) but different messages within 10 min → one event
//!                           "(combined from similar events): <latest message>"
//!                        2. dedup: an event seen before (same key) → PATCH the existing
//!                           event's count+1 and lastTimestamp instead of creating one
//!
//!                        3. spam filter ([`crate::spam_filter`]): at most 25 events per
//!                           (source, object), then one per 5 min; the rest are skipped
//! ```
//!
//! Event names are `<object name>.<hex nanoseconds>`, in the object's namespace (`default`
//! for cluster-scoped objects). Unlike client-go, a failed write is not retried.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apimachinery::EventType;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::error::Result;
use crate::spam_filter::SpamFilter;

/// client-go's `maxQueuedEvents`.
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// client-go's `defaultAggregateMaxEvents`.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// client-go's `maxLruCacheEntries`.
pub const MAX_CACHE_ENTRIES: usize = 4096;
/// Prefix of aggregated messages.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// The stamp (nanoseconds since the epoch) of the last Event name this process made.
static LAST_NAME_STAMP: AtomicU64 = AtomicU64::new(0);

/// client-go's Event name: `<object>.<the time in nanoseconds, hex>`. On a virtual clock that
/// stands still (`miniplane clock pause`) every Event about one object would get the same name
/// and all but the first be refused as AlreadyExists, so within a process a stamp is moved a
/// nanosecond past the last one made when the time has not moved on.
fn event_name(object: &str, now: Timestamp) -> String {
    let wanted = u64::try_from(now.as_nanosecond()).unwrap_or(0);
    let next = |last: u64| wanted.max(last.saturating_add(1));
    let stamp = match LAST_NAME_STAMP.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
        Some(next(last))
    }) {
        Ok(last) | Err(last) => next(last),
    };
    format!("{object}.{stamp:x}")
}

/// Writes events to the API server (client-go's `EventSink`).
pub trait EventSink: Send + Sync {
    /// Creates `event`; returns it as stored.
    fn create(&self, event: &Event) -> BoxFuture<'_, Result<Event>>;
    /// Applies a merge `patch` to the existing `event`; returns it as stored.
    fn patch(&self, event: &Event, patch: serde_json::Value) -> BoxFuture<'_, Result<Event>>;
}

/// An [`EventSink`] over the API server.
#[derive(Clone)]
pub struct ApiEventSink {
    client: Client,
}

impl ApiEventSink {
    /// Writes events through `client`.
    pub fn new(client: Client) -> Self {
        ApiEventSink { client }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        Api::namespaced(
            self.client.clone(),
            event.metadata.namespace.as_deref().unwrap_or("default"),
        )
    }
}

impl EventSink for ApiEventSink {
    fn create(&self, event: &Event) -> BoxFuture<'_, Result<Event>> {
        let (api, event) = (self.api(event), event.clone());
        Box::pin(async move { Ok(api.create(&PostParams::default(), &event).await?) })
    }
    fn patch(&self, event: &Event, patch: serde_json::Value) -> BoxFuture<'_, Result<Event>> {
        let (api, name) = (
            self.api(event),
            event.metadata.name.clone().unwrap_or_default(),
        );
        Box::pin(async move {
            Ok(api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?)
        })
    }
}

/// A small least-recently-written cache (client-go uses an LRU of 4096 entries), shared by
/// the correlator and the [`crate::spam_filter`].
pub(crate) struct BoundedCache<V> {
    entries: HashMap<String, (V, u64)>,
    tick: u64,
}

impl<V> BoundedCache<V> {
    pub(crate) fn new() -> Self {
        BoundedCache {
            entries: HashMap::new(),
            tick: 0,
        }
    }
    fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }
    /// Makes room for `key` by dropping the least recently written entry when full.
    fn evict_for(&mut self, key: &str) {
        if self.entries.len() >= MAX_CACHE_ENTRIES && !self.entries.contains_key(key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
    }
    fn insert(&mut self, key: String, value: V) {
        self.evict_for(&key);
        self.tick += 1;
        self.entries.insert(key, (value, self.tick));
    }
    /// The entry for `key`, created with `make` (evicting the oldest if full), marked as
    /// just used.
    pub(crate) fn get_or_insert_with(&mut self, key: String, make: impl FnOnce() -> V) -> &mut V {
        self.evict_for(&key);
        self.tick += 1;
        let tick = self.tick;
        let slot = self.entries.entry(key).or_insert_with(|| (make(), tick));
        slot.1 = tick;
        &mut slot.0
    }
}

/// Similar events seen for one aggregate key (client-go's `aggregateRecord`).
struct AggregateRecord {
    /// Distinct messages seen in the window.
    messages: std::collections::HashSet<String>,
    last: Timestamp,
}

/// What the server holds for one event key (client-go's `eventLog`).
#[derive(Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// The outcome of correlating one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Correlation {
    /// The event to write (possibly the aggregated one, with count and name filled in).
    pub event: Event,
    /// A merge patch for an existing event (`count`, `lastTimestamp`, `message`); `None`
    /// means create.
    pub patch: Option<serde_json::Value>,
    /// The cache key, for [`EventCorrelator::update_state`].
    pub key: String,
}

/// Aggregation and dedup of events before they are written (client-go's `EventCorrelator`).
pub struct EventCorrelator {
    clock: SharedClock,
    aggregates: BoundedCache<AggregateRecord>,
    logs: BoundedCache<EventLog>,
}

fn join_key(parts: &[&str]) -> String {
    parts.join("\u{0}")
}

impl EventCorrelator {
    /// An empty correlator on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        EventCorrelator {
            clock,
            aggregates: BoundedCache::new(),
            logs: BoundedCache::new(),
        }
    }

    fn aggregate_key(event: &Event) -> String {
        let (source, obj) = (
            event.source.clone().unwrap_or_default(),
            &event.involved_object,
        );
        join_key(&[
            source.component.as_deref().unwrap_or(""),
            source.host.as_deref().unwrap_or(""),
            obj.kind.as_deref().unwrap_or(""),
            obj.namespace.as_deref().unwrap_or(""),
            obj.name.as_deref().unwrap_or(""),
            obj.uid.as_deref().unwrap_or(""),
            obj.api_version.as_deref().unwrap_or(""),
            event.type_.as_deref().unwrap_or(""),
            event.reason.as_deref().unwrap_or(""),
        ])
    }

    fn event_key(event: &Event) -> String {
        let field_path = event.involved_object.field_path.as_deref().unwrap_or("");
        join_key(&[
            &Self::aggregate_key(event),
            field_path,
            event.message.as_deref().unwrap_or(""),
        ])
    }

    /// Aggregates, then dedups `event` (client-go's `EventCorrelate`).
    pub fn correlate(&mut self, event: Event) -> Correlation {
        let (event, key) = self.aggregate(event);
        self.observe(event, key)
    }

    /// client-go's `EventAggregator.EventAggregate`.
    fn aggregate(&mut self, event: Event) -> (Event, String) {
        let now = self.clock.wall();
        let aggregate_key = Self::aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let mut record = match self.aggregates.entries.remove(&aggregate_key) {
            Some((record, _))
                if now.duration_since(record.last).unsigned_abs() <= AGGREGATE_INTERVAL =>
            {
                record
            }
            _ => AggregateRecord {
                messages: Default::default(),
                last: now,
            },
        };
        record.messages.insert(message.clone());
        record.last = now;
        let similar = record.messages.len();
        self.aggregates.insert(aggregate_key.clone(), record);
        if similar < AGGREGATE_MAX_EVENTS {
            let key = Self::event_key(&event);
            return (event, key);
        }
        let name = event.involved_object.name.clone().unwrap_or_default();
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(event_name(&name, now)),
                namespace: event.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            message: Some(format!("{COMBINED_PREFIX}{message}")),
            ..event
        };
        (combined, aggregate_key)
    }

    /// client-go's `eventLogger.eventObserve`.
    fn observe(&mut self, mut event: Event, key: String) -> Correlation {
        let mut patch = None;
        if let Some(last) = self.logs.get(&key).cloned() {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first_timestamp;
            event.count = Some(last.count + 1);
            patch = Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }));
        }
        self.logs.insert(
            key.clone(),
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        Correlation { event, patch, key }
    }

    /// Records the server's copy (name, resourceVersion) after a successful write.
    pub fn update_state(&mut self, key: &str, stored: &Event) {
        let log = EventLog {
            count: stored.count.unwrap_or(1),
            first_timestamp: stored.first_timestamp.clone(),
            name: stored.metadata.name.clone(),
            resource_version: stored.metadata.resource_version.clone(),
        };
        self.logs.insert(key.to_owned(), log);
    }
}

/// Records events for one component (cheap to clone; clones share the queue).
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Event>,
    source: EventSource,
    clock: SharedClock,
    dropped: Arc<AtomicU64>,
}

/// Writes recorded events to the sink; run it on a task owned by the component.
pub struct EventBroadcaster {
    rx: mpsc::Receiver<Event>,
    sink: Arc<dyn EventSink>,
    correlator: EventCorrelator,
    spam: SpamFilter,
}

/// A recorder for events from `component` and the broadcaster that writes them to `sink`.
pub fn new_recorder(
    sink: Arc<dyn EventSink>,
    component: &str,
    clock: SharedClock,
) -> (EventRecorder, EventBroadcaster) {
    new_recorder_with_capacity(sink, component, clock, MAX_QUEUED_EVENTS)
}

/// [`new_recorder`] with a queue of `capacity` events.
pub fn new_recorder_with_capacity(
    sink: Arc<dyn EventSink>,
    component: &str,
    clock: SharedClock,
    capacity: usize,
) -> (EventRecorder, EventBroadcaster) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let source = EventSource {
        component: Some(component.to_owned()),
        host: None,
    };
    let recorder = EventRecorder {
        tx,
        source,
        clock: clock.clone(),
        dropped: Arc::new(AtomicU64::new(0)),
    };
    (
        recorder,
        EventBroadcaster {
            rx,
            sink,
            correlator: EventCorrelator::new(clock.clone()),
            spam: SpamFilter::new(clock),
        },
    )
}

impl EventRecorder {
    /// Records an event about `object`. Never blocks: if the queue is full the event is
    /// dropped and logged.
    pub fn event(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        let now = self.clock.wall();
        let name = object.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name(&name, now)),
                namespace: Some(
                    object
                        .namespace
                        .clone()
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or_else(|| "default".into()),
                ),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(event_type.as_str().to_owned()),
            source: Some(self.source.clone()),
            reporting_component: self.source.component.clone(),
            reporting_instance: Some(self.source.host.clone().unwrap_or_default()),
            ..Default::default()
        };
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(object = %name, reason, "event queue full, dropping event");
        }
    }

    /// Events dropped because the queue was full.
    pub fn dropped_events(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl EventBroadcaster {
    /// Writes events until `shutdown` fires or every recorder is dropped.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = self.rx.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            self.record(event).await;
        }
    }

    /// Correlates and writes one event (client-go's `recordToSink`): PATCH when it repeats
    /// an earlier one, CREATE otherwise or when the earlier one is gone.
    async fn record(&mut self, event: Event) {
        let Correlation { event, patch, key } = self.correlator.correlate(event);
        if self.spam.skip(&event) {
            tracing::debug!(reason = ?event.reason, object = ?event.involved_object.name, "event skipped by the spam filter");
            return;
        }
        let mut result = match patch {
            Some(patch) => self.sink.patch(&event, patch).await,
            None => self.create(&event).await,
        };
        if let Err(err) = &result
            && err.is_not_found()
        {
            result = self.create(&event).await;
        }
        match result {
            Ok(stored) => self.correlator.update_state(&key, &stored),
            Err(err) => tracing::warn!(%err, reason = ?event.reason, "could not write event"),
        }
    }

    async fn create(&self, event: &Event) -> Result<Event> {
        let mut event = event.clone();
        event.metadata.resource_version = None;
        self.sink.create(&event).await
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
