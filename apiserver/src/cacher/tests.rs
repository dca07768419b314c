//! Tests of the cacher: fan-out, the ring and its bounds, the handoff of writers' objects,
//! previous objects from the cached state, the store fallback and slow clients.

use super::*;
use store::MemoryBackend;

async fn put(b: &MemoryBackend, k: &str, v: &str) {
    b.put(Bytes::from(k.to_string()), Bytes::from(v.to_string()))
        .await
        .expect("put");
}

fn cache(b: Arc<MemoryBackend>, cap: usize, buf: usize) -> WatchCache {
    WatchCache::new(b, TaskTracker::new(), CancellationToken::new(), cap, buf)
}

/// The cacher of `prefix` (one exists once a watch of it started).
fn cacher(wc: &WatchCache, prefix: &str) -> Arc<Cacher> {
    wc.cachers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(prefix)
        .expect("cacher")
        .clone()
}

#[tokio::test]
async fn fans_out_and_replays_recent_events() {
    let b = Arc::new(MemoryBackend::new());
    let wc = cache(b.clone(), 16, 16);
    let start = b.current_revision();
    let mut a = wc.watch("/r/", start).await.expect("watch");
    put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"}}").await;
    let ev = a.next().await.expect("event").expect("ok");
    assert_eq!(ev.kind, EventType::Added);
    assert_eq!(
        ev.object["metadata"]["resourceVersion"],
        ev.revision.0.to_string()
    );
    // A second client from the same start gets the event from the ring.
    let mut c = wc.watch("/r/", start).await.expect("watch");
    let ev2 = c.next().await.expect("event").expect("ok");
    assert_eq!(ev2.revision, ev.revision);
}

#[tokio::test]
async fn a_put_takes_the_object_its_writer_offered() {
    let b = Arc::new(MemoryBackend::new());
    let handoff = Arc::new(Handoff::new());
    let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
    let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
    assert!(handoff.wants(b"/r/x"), "the cacher registered its prefix");
    assert!(!handoff.wants(b"/other/x"));
    // The offered object differs from the bytes (which no writer would do) to show which
    // of the two the event carries.
    let bytes = Bytes::from_static(b"{\"metadata\":{\"name\":\"x\"},\"v\":1}");
    let offered =
        serde_json::json!({"metadata": {"name": "x", "resourceVersion": "7"}, "v": "offered"});
    let stored = crate::stored_json::StoredJson {
        bytes: bytes.clone(),
        slot: None,
    };
    handoff.offer(b"/r/x", &stored, &offered);
    b.put(Bytes::from_static(b"/r/x"), bytes)
        .await
        .expect("put");
    let ev = w.next().await.expect("event").expect("ok");
    assert_eq!(ev.object["v"], "offered");
    assert_eq!(
        ev.object["metadata"]["resourceVersion"],
        ev.revision.0.to_string(),
        "the offer's stale resourceVersion is replaced by the write's"
    );
    assert_eq!(handoff.held(), 0, "the offer was taken");
    // Bytes nobody offered are decoded.
    put(&b, "/r/x", "{\"metadata\":{\"name\":\"x\"},\"v\":2}").await;
    let ev = w.next().await.expect("event").expect("ok");
    assert_eq!(ev.object["v"], 2);
    // Writers can start from the cacher's object of the revision they read, and only
    // that revision's.
    let current = handoff.current(b"/r/x", ev.revision).expect("cached");
    assert!(Arc::ptr_eq(&current, &ev.object));
    assert!(
        handoff
            .current(b"/r/x", Revision(ev.revision.0 - 1))
            .is_none()
    );
    assert!(handoff.current(b"/r/y", ev.revision).is_none());
}

#[tokio::test]
async fn a_deleted_event_carries_the_trace_context_its_delete_offered() {
    let b = Arc::new(MemoryBackend::new());
    let handoff = Arc::new(Handoff::new());
    let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
    let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
    let created = format!(
        "{{\"metadata\":{{\"name\":\"x\",\"annotations\":{{\"{}\":\"00-created\"}}}}}}",
        trace::TRACEPARENT_ANNOTATION
    );
    put(&b, "/r/x", &created).await;
    put(&b, "/r/y", &created).await;
    for _ in 0..2 {
        w.next().await.expect("event").expect("ok");
    }
    handoff.offer_delete(b"/r/x", "00-deleted");
    b.delete(Bytes::from_static(b"/r/x")).await.expect("delete");
    let ev = w.next().await.expect("event").expect("ok");
    assert_eq!(ev.kind, EventType::Deleted);
    assert_eq!(
        crate::request_trace::annotation(&ev.object),
        Some("00-deleted"),
        "the delete's context, not the create's"
    );
    assert_eq!(handoff.take_delete(b"/r/x"), None, "taken");
    // An untraced delete: the object as last stored.
    b.delete(Bytes::from_static(b"/r/y")).await.expect("delete");
    let ev = w.next().await.expect("event").expect("ok");
    assert_eq!(
        crate::request_trace::annotation(&ev.object),
        Some("00-created")
    );
}

#[tokio::test]
async fn a_taken_offer_is_sent_as_its_stored_bytes_with_the_resource_version() {
    let b = Arc::new(MemoryBackend::new());
    let handoff = Arc::new(Handoff::new());
    let wc = cache(b.clone(), 16, 16).with_handoff(handoff.clone());
    let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "x", "namespace": "d", "resourceVersion": "3", "uid": "u"},
        "spec": {"nodeName": "n"}
    });
    let stored = crate::stored_json::encode(&object).expect("encode");
    handoff.offer(b"/r/x", &stored, &object);
    b.put(Bytes::from_static(b"/r/x"), stored.bytes.clone())
        .await
        .expect("put");
    let ev = w.next().await.expect("event").expect("ok");
    let sent = ev.encoded_object("v1", "Pod");
    assert_eq!(
        serde_json::from_slice::<Value>(&sent).expect("JSON"),
        *ev.object,
        "the bytes sent are the event's object"
    );
    assert_eq!(
        sent,
        stored.with_resource_version(ev.revision.0).expect("a slot"),
        "the stored bytes with the resourceVersion"
    );
    assert_eq!(sent, crate::wire::to_vec(&ev.object));
    // Asked as another type, the object is encoded with that type.
    let other: Value = serde_json::from_slice(&ev.encoded_object("v2", "Pod")).expect("JSON");
    assert_eq!(other["apiVersion"], "v2");
}

#[tokio::test]
async fn previous_objects_come_from_the_cached_state() {
    let b = Arc::new(MemoryBackend::new());
    // Written before the cacher starts: known from its initial list.
    put(&b, "/r/old", "{\"metadata\":{\"name\":\"old\"},\"v\":1}").await;
    let wc = cache(b.clone(), 16, 16);
    let mut w = wc.watch("/r/", b.current_revision()).await.expect("watch");
    put(&b, "/r/old", "{\"metadata\":{\"name\":\"old\"},\"v\":2}").await;
    put(&b, "/r/new", "{\"metadata\":{\"name\":\"new\"},\"v\":1}").await;
    put(&b, "/r/new", "{\"metadata\":{\"name\":\"new\"},\"v\":2}").await;
    b.delete(Bytes::from_static(b"/r/old"))
        .await
        .expect("delete");

    let modified = w.next().await.expect("event").expect("ok");
    assert_eq!(modified.kind, EventType::Modified);
    let prev = modified.prev.as_ref().expect("prev from the initial list");
    assert_eq!(
        (prev["v"].clone(), modified.object["v"].clone()),
        (1.into(), 2.into())
    );

    let added = w.next().await.expect("event").expect("ok");
    assert_eq!(added.kind, EventType::Added);
    assert!(added.prev.is_none());
    let updated = w.next().await.expect("event").expect("ok");
    assert_eq!(updated.kind, EventType::Modified);
    assert!(
        Arc::ptr_eq(updated.prev.as_ref().expect("prev"), &added.object),
        "the previous object is the cached one, not a fresh decode"
    );

    let deleted = w.next().await.expect("event").expect("ok");
    assert_eq!(deleted.kind, EventType::Deleted);
    assert_eq!(deleted.object["v"], 2, "a delete carries the last state");
    assert_eq!(
        deleted.object["metadata"]["resourceVersion"],
        deleted.revision.0.to_string(),
        "with the delete's resourceVersion"
    );
    // The same history read from the store (no cached state) gives the same events.
    // (From revision 0: older than the cacher's start, so served from the store's history,
    // beginning with the first put.)
    let mut h = Vec::new();
    let mut from_store = wc.watch("/r/", Revision(0)).await.expect("watch");
    while h.len() < 5 {
        let ev = from_store.next().await.expect("event").expect("ok");
        h.push((ev.kind, ev.object.clone(), ev.prev.clone()));
    }
    assert_eq!(h.remove(0).0, EventType::Added);
    let cached = [&modified, &added, &updated, &deleted];
    for ((kind, object, prev), c) in h.iter().zip(cached) {
        assert_eq!((kind, object, prev), (&c.kind, &c.object, &c.prev));
    }
}

#[tokio::test]
async fn a_watch_from_history_joins_the_cache_once_caught_up() {
    let b = Arc::new(MemoryBackend::new());
    put(&b, "/r/a", "{\"v\":1}").await;
    put(&b, "/r/a", "{\"v\":2}").await;
    let wc = cache(b.clone(), 16, 16);
    // Starts the cacher at the current revision; then a client from before it.
    let mut live = wc.watch("/r/", b.current_revision()).await.expect("watch");
    let base = b.current_revision().0 - 2;
    let mut old = wc.watch("/r/", Revision(base)).await.expect("watch");
    put(&b, "/r/b", "{\"v\":1}").await;
    let mut kinds = Vec::new();
    for _ in 0..3 {
        let ev = old.next().await.expect("event").expect("ok");
        kinds.push((ev.kind, ev.revision));
    }
    let r = |n| Revision(base + n);
    assert_eq!(
        kinds,
        [
            (EventType::Added, r(1)),
            (EventType::Modified, r(2)),
            (EventType::Added, r(3))
        ],
        "the history first, without a gap"
    );
    put(&b, "/r/c", "{\"v\":1}").await;
    let _ = live.next().await.expect("event").expect("ok");
    let shared = live.next().await.expect("event").expect("ok");
    let from_old = old.next().await.expect("event").expect("ok");
    assert_eq!(from_old.revision, r(4));
    assert!(
        Arc::ptr_eq(&shared, &from_old),
        "once caught up, the client is served the cacher's shared event"
    );
}

#[tokio::test]
async fn the_ring_keeps_the_newest_events_and_older_starts_read_the_history() {
    let b = Arc::new(MemoryBackend::new());
    let wc = cache(b.clone(), 2, 16);
    let start = b.current_revision();
    let mut live = wc.watch("/r/", start).await.expect("watch");
    for i in 0..5 {
        put(&b, &format!("/r/{i}"), "{}").await;
    }
    let mut revisions = Vec::new();
    for _ in 0..5 {
        revisions.push(live.next().await.expect("event").expect("ok").revision);
    }
    // The ring holds the last two events: a watch after the third is served from it.
    let mut recent = wc.watch("/r/", revisions[2]).await.expect("watch");
    let ev = recent.next().await.expect("event").expect("ok");
    assert_eq!(ev.revision, revisions[3]);
    // One from before them reads the store's history, without a gap.
    let mut old = wc.watch("/r/", start).await.expect("watch");
    for want in &revisions {
        let ev = old.next().await.expect("event").expect("ok");
        assert_eq!(ev.revision, *want);
    }
    let s = cacher(&wc, "/r/");
    let state = s.lock();
    assert_eq!(state.ring.len(), 2);
    assert_eq!(state.complete_after, revisions[2]);
}

#[tokio::test]
async fn the_ring_keeps_at_most_its_bytes_and_older_starts_read_the_history() {
    let b = Arc::new(MemoryBackend::new());
    // Room for 64 events by count, but only ~3 of these by bytes.
    let wc = cache(b.clone(), 64, 64).with_ring_bytes(1000);
    let start = b.current_revision();
    let mut live = wc.watch("/r/", start).await.expect("watch");
    let value = format!("{{\"data\":\"{}\"}}", "x".repeat(300));
    let mut revisions = Vec::new();
    for i in 0..10 {
        put(&b, &format!("/r/{i}"), &value).await;
        revisions.push(live.next().await.expect("event").expect("ok").revision);
    }
    let s = cacher(&wc, "/r/");
    {
        let state = s.lock();
        assert_eq!(state.ring.len(), 3);
        assert!(state.ring_bytes <= 1000, "{} bytes kept", state.ring_bytes);
        assert_eq!(state.complete_after, revisions[6]);
    }
    // A watch from before the ring reads the store's history, without a gap.
    let mut old = wc.watch("/r/", start).await.expect("watch");
    for want in &revisions {
        let ev = old.next().await.expect("event").expect("ok");
        assert_eq!(ev.revision, *want);
    }
}

#[tokio::test]
async fn slow_clients_are_cut_off() {
    let b = Arc::new(MemoryBackend::new());
    let wc = cache(b.clone(), 64, 2);
    let mut slow = wc.watch("/r/", b.current_revision()).await.expect("watch");
    for i in 0..10 {
        put(&b, &format!("/r/{i}"), "{}").await;
    }
    // Let the cacher process the events, then drain: the stream ends early.
    let mut seen = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while let Ok(Some(Ok(_))) = tokio::time::timeout_at(deadline, slow.next()).await {
        seen += 1;
    }
    assert!(seen < 10, "a slow client was not cut off ({seen} events)");
}

#[tokio::test]
async fn compacted_history_is_reported_as_too_old() {
    let b = Arc::new(MemoryBackend::new());
    put(&b, "/r/a", "{}").await;
    put(&b, "/r/a", "{}").await;
    let wc = cache(b.clone(), 16, 16);
    b.compact(b.current_revision()).await.expect("compact");
    match wc.watch("/r/", Revision(1)).await {
        Err(store::Error::Compacted { .. }) => {}
        Ok(mut s) => assert!(matches!(
            s.next().await,
            Some(Err(StreamEnd::TooOld { .. }))
        )),
        Err(e) => panic!("unexpected error {e}"),
    }
}
