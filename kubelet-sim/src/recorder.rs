//! The kubelet's event recorder: events about pods, with `source.component: kubelet` and
//! `source.host: <node>` as `kubectl describe pod` shows them ("kubelet  Started container
//! nginx"). Reasons and messages come from [`crate::stages`], as `pkg/kubelet/events/event.go`.
//!
//! One bounded queue for all simulated nodes, drained by up to [`WRITERS`] concurrent writes
//! (a thousand real kubelets would each write their own events, one at a time; one writer
//! for all of them falls behind a Deployment of thousands of pods). The queue holds
//! [`QUEUE_CAPACITY_PER_NODE`] events per simulated node (at least [`QUEUE_CAPACITY_MIN`]), as
//! many as the real kubelets' own queues would hold together (client-go's broadcaster keeps
//! 1,000 and drops what comes past them), so that a burst of pods spread over many nodes loses
//! no event, as it would not in a cluster. (With one queue of 4,096, a 10,000-pod apply on
//! 1,000 nodes dropped ~16,000 of its 40,000 events.)
//!
//! Before writing, events go through client-go's correlation ([`crate::events_cache`]): a
//! repeated event (a crash loop's `BackOff`, a probe's `Unhealthy`) is a PATCH of `count`,
//! `lastTimestamp` and `message` onto the Event first written, and many similar ones are
//! combined. (miniplane's `client::events` recorder is not used: it cannot set `source.host`
//! per event, which one process simulating many nodes needs.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use client::impersonation::{Identity, acting_as};
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Resource;
use kube::api::{Patch, PatchParams};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::events_cache::{EventCorrelator, Write};
use crate::stages::PodEvent;

/// How many events may wait to be written, per simulated node, before new ones are dropped:
/// client-go's `maxQueuedEvents` (`tools/record/event.go`), the queue of one real kubelet.
pub const QUEUE_CAPACITY_PER_NODE: usize = 1000;

/// The queue's size for a few nodes, whatever their number (what one queue held for all of them
/// before it grew with the nodes).
pub const QUEUE_CAPACITY_MIN: usize = 4096;

/// How many events may wait for `nodes` simulated nodes: [`QUEUE_CAPACITY_PER_NODE`] each, at
/// least [`QUEUE_CAPACITY_MIN`], at most what a tokio channel can count.
pub fn queue_capacity(nodes: usize) -> usize {
    QUEUE_CAPACITY_PER_NODE
        .saturating_mul(nodes)
        .clamp(QUEUE_CAPACITY_MIN, tokio::sync::Semaphore::MAX_PERMITS)
}

/// How many event writes may be in flight at once.
pub const WRITERS: usize = 32;

/// Queues kubelet events (cheap to clone).
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<(Event, Arc<Identity>)>,
    /// Makes names unique when several events share a timestamp (client-go uses
    /// `<name>.<unix nanos>` and relies on the clock moving between events).
    sequence: Arc<AtomicU64>,
    /// Events dropped because the queue was full.
    dropped: Arc<AtomicU64>,
}

/// Writes queued events to the API server.
pub struct RecorderWriter {
    rx: mpsc::Receiver<(Event, Arc<Identity>)>,
    client: kube::Client,
}

/// A recorder for `nodes` simulated nodes and the writer that drains it. (The queue's memory
/// is taken as events wait, not reserved up front.)
pub fn recorder(client: kube::Client, nodes: usize) -> (Recorder, RecorderWriter) {
    let (tx, rx) = mpsc::channel(queue_capacity(nodes));
    let sequence = Arc::new(AtomicU64::new(0));
    let recorder = Recorder {
        tx,
        sequence,
        dropped: Arc::new(AtomicU64::new(0)),
    };
    (recorder, RecorderWriter { rx, client })
}

/// The Event object for `event` about `pod`, reported by the kubelet of `node` at `now`.
pub fn event_object(
    pod: &Pod,
    event: &PodEvent,
    node: &str,
    now: Timestamp,
    sequence: u64,
) -> Event {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}{sequence:04x}", now.as_nanosecond())),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name),
            namespace: Some(namespace),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path: event.container.as_ref().map(|c| {
                if event.ephemeral {
                    format!("spec.ephemeralContainers{{{c}}}")
                } else if event.init {
                    format!("spec.initContainers{{{c}}}")
                } else {
                    format!("spec.containers{{{c}}}")
                }
            }),
        },
        reason: Some(event.reason.into()),
        message: Some(event.message.clone()),
        type_: Some(if event.warning { "Warning" } else { "Normal" }.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some(node.into()),
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node.into()),
        action: Some(event.reason.into()),
        ..Default::default()
    }
}

impl Recorder {
    /// Queues `event`, to be written as `who` (the node's kubelet); never blocks (dropped
    /// when the queue is full, with a warning for the first drop and every thousandth after
    /// it).
    pub fn record(
        &self,
        pod: &Pod,
        event: &PodEvent,
        node: &str,
        who: &Arc<Identity>,
        now: Timestamp,
    ) {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) & 0xffff;
        let object = event_object(pod, event, node, now, sequence);
        if self.tx.try_send((object, who.clone())).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed);
            if dropped.is_multiple_of(1000) {
                tracing::warn!(
                    reason = event.reason,
                    dropped = dropped + 1,
                    "kubelet event queue full, dropping events"
                );
            }
        }
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped_events(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// POSTs `event` and reads the reply without decoding the Event it carries (nothing uses it;
/// `Api::create` would decode it). Errors are what `Api::create` returns.
async fn create_unread(client: &kube::Client, event: &Event) -> Result<(), kube::Error> {
    let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
    let body = serde_json::to_vec(event).map_err(kube::Error::SerdeError)?;
    let mut request = kube::core::Request::new(Event::url_path(&(), Some(namespace)))
        .create(&Default::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("create");
    client.request_text(request).await.map(drop)
}

/// PATCHes (JSON merge patch) a repeated event's `count`, `lastTimestamp` and `message` onto
/// the Event named in it, as client-go's `recordToSink` does.
async fn patch_unread(client: &kube::Client, event: &Event) -> Result<(), kube::Error> {
    #[derive(serde::Serialize)]
    struct Repeat<'a> {
        count: Option<i32>,
        #[serde(rename = "lastTimestamp")]
        last_timestamp: &'a Option<Time>,
        message: &'a Option<String>,
    }
    let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
    let name = event.metadata.name.as_deref().unwrap_or_default();
    let body = Repeat {
        count: event.count,
        last_timestamp: &event.last_timestamp,
        message: &event.message,
    };
    let mut request = kube::core::Request::new(Event::url_path(&(), Some(namespace)))
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch");
    client.request_text(request).await.map(drop)
}

/// Writes what the correlator decided: a create, or a patch that falls back to a create when
/// the Event is gone (expired, or its create has not landed yet), and back to a patch when that
/// create finds it there after all.
async fn write(client: &kube::Client, write: Write) -> Result<(), kube::Error> {
    let status = |e: &kube::Error| match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    };
    match write {
        Write::Create(event) => create_unread(client, &event).await,
        Write::Patch(event) => match patch_unread(client, &event).await {
            Err(e) if status(&e) == 404 => match create_unread(client, &event).await {
                Err(e) if status(&e) == 409 => patch_unread(client, &event).await,
                other => other,
            },
            other => other,
        },
    }
}

impl RecorderWriter {
    /// Correlates events (in the order recorded) and writes them, up to [`WRITERS`] at once,
    /// until `shutdown` fires (what is queued then is dropped).
    pub async fn run(self, shutdown: CancellationToken) {
        let RecorderWriter { mut rx, client } = self;
        let mut correlator = EventCorrelator::default();
        let events = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
            .map(move |(event, who)| (correlator.correlate(event), who));
        let writes = events.for_each_concurrent(WRITERS, |(decided, who)| {
            let client = client.clone();
            async move {
                if let Err(e) = acting_as(who, write(&client, decided)).await {
                    tracing::debug!(error = %e, "writing kubelet event failed");
                }
            }
        });
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = writes => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn pulled() -> PodEvent {
        PodEvent {
            warning: false,
            reason: "Pulled",
            message: "Container image \"nginx:1.27\" already present on machine".into(),
            container: Some("nginx".into()),
            init: false,
            ephemeral: false,
        }
    }

    #[test]
    fn the_queue_grows_with_the_nodes_from_a_floor_to_a_ceiling() {
        assert_eq!(queue_capacity(0), QUEUE_CAPACITY_MIN);
        assert_eq!(queue_capacity(4), QUEUE_CAPACITY_MIN);
        assert_eq!(queue_capacity(5), 5_000);
        assert_eq!(queue_capacity(1_000), 1_000_000);
        assert_eq!(
            queue_capacity(usize::MAX),
            tokio::sync::Semaphore::MAX_PERMITS
        );
    }

    #[tokio::test]
    async fn the_queue_holds_a_real_kubelets_worth_of_events_per_node_then_drops() {
        // Nothing drains the queue: no request is ever sent to this address.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (recorder, _writer) = recorder(client, 5);
        let pod = Pod::default();
        let now = Timestamp::now();
        let who = Arc::new(Identity::new("system:node:node-0", &["system:nodes"]).unwrap());
        for _ in 0..5 * QUEUE_CAPACITY_PER_NODE {
            recorder.record(&pod, &pulled(), "node-0", &who, now);
        }
        assert_eq!(recorder.dropped_events(), 0);
        recorder.record(&pod, &pulled(), "node-1", &who, now);
        assert_eq!(recorder.dropped_events(), 1);
    }
}
