//! Event correlation on a fake clock, and the recorder against a fake sink.

use super::*;
use crate::clock::FakeClock;
use std::sync::Mutex;

fn deployment_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("Deployment".into()),
        namespace: Some("default".into()),
        name: Some("nginx".into()),
        uid: Some("uid-1".into()),
        ..Default::default()
    }
}

fn event(clock: &FakeClock, message: &str) -> Event {
    let now = crate::clock::Clock::wall(clock);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("nginx.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: deployment_ref(),
        reason: Some("ScalingReplicaSet".into()),
        message: Some(message.into()),
        type_: Some("Normal".into()),
        source: Some(EventSource {
            component: Some("deployment-controller".into()),
            host: None,
        }),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        ..Default::default()
    }
}

#[test]
fn repeated_event_becomes_a_patch_of_count_and_last_timestamp() {
    let clock = FakeClock::new();
    let mut correlator = EventCorrelator::new(clock.shared());
    let first = correlator.correlate(event(&clock, "Scaled up to 3"));
    assert!(first.patch.is_none(), "first occurrence is created");
    let first_name = first.event.metadata.name.clone();
    clock.advance(Duration::from_secs(5));
    let second = correlator.correlate(event(&clock, "Scaled up to 3"));
    assert_eq!(
        second.event.metadata.name, first_name,
        "patches the same event"
    );
    assert_eq!(second.event.count, Some(2));
    assert_eq!(second.event.first_timestamp, first.event.first_timestamp);
    let patch = second.patch.expect("a patch");
    assert_eq!(patch["count"], 2);
    assert_eq!(
        patch["lastTimestamp"],
        json!(Time(crate::clock::Clock::wall(&clock)))
    );
    let third = correlator.correlate(event(&clock, "Scaled up to 3"));
    assert_eq!(third.event.count, Some(3));
    // A different message is a different event.
    assert!(
        correlator
            .correlate(event(&clock, "Scaled down to 1"))
            .patch
            .is_none()
    );
}

#[test]
fn ten_similar_events_are_combined() {
    let clock = FakeClock::new();
    let mut correlator = EventCorrelator::new(clock.shared());
    for i in 1..AGGREGATE_MAX_EVENTS {
        let c = correlator.correlate(event(&clock, &format!("Scaled up to {i}")));
        assert!(c.patch.is_none());
        assert_eq!(
            c.event.message.as_deref(),
            Some(format!("Scaled up to {i}").as_str()),
            "event {i} is not combined"
        );
    }
    let tenth = correlator.correlate(event(&clock, "Scaled up to 10"));
    assert_eq!(
        tenth.event.message.as_deref(),
        Some("(combined from similar events): Scaled up to 10")
    );
    assert!(tenth.patch.is_none(), "the combined event is created once");
    let eleventh = correlator.correlate(event(&clock, "Scaled up to 11"));
    assert_eq!(
        eleventh.event.message.as_deref(),
        Some("(combined from similar events): Scaled up to 11")
    );
    assert_eq!(eleventh.event.metadata.name, tenth.event.metadata.name);
    assert_eq!(eleventh.event.count, Some(2));
    assert!(eleventh.patch.is_some());

    // After ten quiet minutes the window starts over.
    clock.advance(AGGREGATE_INTERVAL + Duration::from_secs(1));
    let fresh = correlator.correlate(event(&clock, "Scaled up to 12"));
    assert_eq!(fresh.event.message.as_deref(), Some("Scaled up to 12"));
}

/// Records every write and reports it on a channel.
struct FakeSink {
    writes: Mutex<Vec<String>>,
    notify: mpsc::UnboundedSender<String>,
}

impl FakeSink {
    fn log(&self, line: String) {
        self.writes.lock().unwrap().push(line.clone());
        let _ = self.notify.send(line);
    }
}

impl EventSink for FakeSink {
    fn create(&self, event: &Event) -> BoxFuture<'_, Result<Event>> {
        let mut stored = event.clone();
        stored.metadata.resource_version = Some("1".into());
        self.log(format!(
            "create {} count={:?}",
            event.message.as_deref().unwrap_or(""),
            event.count
        ));
        Box::pin(std::future::ready(Ok(stored)))
    }
    fn patch(&self, event: &Event, patch: serde_json::Value) -> BoxFuture<'_, Result<Event>> {
        self.log(format!(
            "patch {} count={}",
            event.metadata.name.as_deref().unwrap_or(""),
            patch["count"]
        ));
        Box::pin(std::future::ready(Ok(event.clone())))
    }
}

#[tokio::test]
async fn recorder_writes_asynchronously_with_dedup() {
    let clock = FakeClock::new();
    let (notify, mut writes) = mpsc::unbounded_channel();
    let sink = Arc::new(FakeSink {
        writes: Mutex::new(Vec::new()),
        notify,
    });
    let (recorder, broadcaster) =
        new_recorder(sink.clone(), "deployment-controller", clock.shared());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(broadcaster.run(shutdown.clone()));
    for _ in 0..3 {
        recorder.event(
            &deployment_ref(),
            EventType::Normal,
            "ScalingReplicaSet",
            "Scaled up to 3",
        );
    }
    assert_eq!(
        writes.recv().await.unwrap(),
        "create Scaled up to 3 count=Some(1)"
    );
    let second = writes.recv().await.unwrap();
    assert!(
        second.starts_with("patch nginx.") && second.ends_with("count=2"),
        "{second}"
    );
    assert!(writes.recv().await.unwrap().ends_with("count=3"));
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn full_queue_drops_instead_of_blocking() {
    let clock = FakeClock::new();
    let (notify, _writes) = mpsc::unbounded_channel();
    let sink = Arc::new(FakeSink {
        writes: Mutex::new(Vec::new()),
        notify,
    });
    let (recorder, _broadcaster) = new_recorder_with_capacity(sink, "c", clock.shared(), 2);
    for i in 0..5 {
        recorder.event(
            &deployment_ref(),
            EventType::Warning,
            "Failed",
            &format!("attempt {i}"),
        );
    }
    assert_eq!(recorder.dropped_events(), 3);
}

#[test]
fn events_at_one_instant_get_names_of_their_own() {
    // A paused virtual clock: every Event about one object happens at the same time (a time
    // past any other test's in this process, which share the last stamp).
    let now: Timestamp = "2200-01-01T00:00:00Z".parse().unwrap();
    let first = event_name("web", now);
    let second = event_name("web", now);
    assert_ne!(
        first, second,
        "the second would be refused as AlreadyExists"
    );
    for name in [&first, &second] {
        let stamp = name
            .strip_prefix("web.")
            .expect("client-go's <object>.<hex> form");
        let nanos = u64::from_str_radix(stamp, 16).expect("hex nanoseconds");
        assert!(nanos >= u64::try_from(now.as_nanosecond()).unwrap());
    }
    // When the time moves on, the name is the time's again.
    let later = now + jiff::SignedDuration::from_secs(3600);
    assert_eq!(
        event_name("web", later),
        format!("web.{:x}", later.as_nanosecond())
    );
}
