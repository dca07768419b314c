//! Helpers shared by the store's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};
use store::{Backend, Event, KeyRange, Revision, Store, StoreConfig, WatchRequest, Watcher};

/// A store in a fresh temporary directory, without fsync (fast, for semantics tests).
pub async fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(fast_config(dir.path())).await.unwrap();
    (dir, store)
}

/// A config for tests: no fsync.
pub fn fast_config(dir: &std::path::Path) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.fsync = false;
    config
}

/// Watches `range` from `start`.
pub async fn watch<B: Backend>(db: &B, range: KeyRange, start: Option<Revision>) -> Watcher {
    db.watch(WatchRequest {
        range,
        start_revision: start,
    })
    .await
    .unwrap()
}

/// Receives events until one at `until` (inclusive) arrives, failing after 20 s.
pub async fn collect_until(w: &mut Watcher, until: Revision) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out: Vec<Event> = Vec::new();
    while out.last().is_none_or(|e| e.revision() < until) {
        let left = deadline.saturating_duration_since(Instant::now());
        let resp = tokio::time::timeout(left, w.recv())
            .await
            .expect("timed out waiting for watch events")
            .expect("watch ended early")
            .expect("watch failed");
        out.extend(resp.events);
    }
    out
}

/// Asserts events are in revision order with no revision repeated across (put) keys: within a
/// revision each key appears once.
pub fn assert_ordered(events: &[Event]) {
    for pair in events.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.revision() < b.revision() || (a.revision() == b.revision() && a.kv.key != b.kv.key),
            "out of order or duplicate: {a:?} then {b:?}"
        );
    }
}
