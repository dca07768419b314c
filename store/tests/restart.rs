//! Restart: close and reopen recovers data, the revision counter and the compaction point;
//! checkpoints drop old WAL segments; the directory lock refuses a second open; auto-compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::{AutoCompaction, Backend, Error, RangeRequest, Revision, Store};

#[tokio::test]
async fn close_and_reopen_recovers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(common::fast_config(dir.path())).await.unwrap();
    for i in 0..50 {
        store
            .put(
                Bytes::from(format!("/k/{}", i % 10)),
                Bytes::from(format!("{i}")),
            )
            .await
            .unwrap();
    }
    store.delete(Bytes::from_static(b"/k/3")).await.unwrap();
    store.compact(Revision(30)).await.unwrap();
    let rev = store.current_revision();
    let before = store.range(RangeRequest::prefix("/k/")).await.unwrap();
    let old = store
        .range(RangeRequest {
            revision: Some(Revision(35)),
            ..RangeRequest::prefix("/k/")
        })
        .await
        .unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.put(Bytes::from_static(b"/x"), Bytes::new()).await,
        Err(Error::Closed)
    ));
    drop(store);

    let store = Store::open(common::fast_config(dir.path())).await.unwrap();
    assert_eq!(store.current_revision(), rev);
    assert_eq!(store.compacted_revision(), Revision(30));
    assert_eq!(
        store.range(RangeRequest::prefix("/k/")).await.unwrap(),
        before
    );
    let old_again = store
        .range(RangeRequest {
            revision: Some(Revision(35)),
            ..RangeRequest::prefix("/k/")
        })
        .await
        .unwrap();
    assert_eq!(old_again, old);
    assert!(matches!(
        store.get(b"/k/1", Some(Revision(29))).await,
        Err(Error::Compacted { .. })
    ));
    let next = store
        .put(Bytes::from_static(b"/k/new"), Bytes::new())
        .await
        .unwrap();
    assert_eq!(next.revision, rev.next());
    store.close().await.unwrap();
}

#[tokio::test]
async fn lock_prevents_a_second_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(common::fast_config(dir.path())).await.unwrap();
    let second = Store::open(common::fast_config(dir.path())).await;
    assert!(
        matches!(second, Err(Error::Locked { .. })),
        "{:?}",
        second.err()
    );
    store.close().await.unwrap();
    drop(store);
    let again = Store::open(common::fast_config(dir.path())).await.unwrap();
    again.close().await.unwrap();
}

#[tokio::test]
async fn checkpoints_drop_old_wal_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::fast_config(dir.path());
    config.checkpoint_bytes = 16 * 1024;
    let store = Store::open(config.clone()).await.unwrap();
    let value = Bytes::from(vec![7u8; 512]);
    for i in 0..400 {
        store
            .put(Bytes::from(format!("/c/{i}")), value.clone())
            .await
            .unwrap();
    }
    let segments = std::fs::read_dir(dir.path().join("wal")).unwrap().count();
    assert!(
        segments <= 3,
        "{segments} WAL segments left after checkpoints"
    );
    let rev = store.current_revision();
    store.close().await.unwrap();
    drop(store);
    let store = Store::open(config).await.unwrap();
    assert_eq!(store.current_revision(), rev);
    let all = store.range(RangeRequest::prefix("/c/")).await.unwrap();
    assert_eq!(all.count, 400);
    assert!(all.kvs.iter().all(|kv| kv.value == value));
    store.close().await.unwrap();
}

#[tokio::test]
async fn auto_compaction_keeps_the_last_n_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::fast_config(dir.path());
    config.auto_compaction = AutoCompaction {
        retain_revisions: Some(10),
        retain_duration: None,
        interval: Duration::from_millis(5),
    };
    let store = Store::open(config).await.unwrap();
    for i in 0..50 {
        store
            .put(Bytes::from(format!("/a/{i}")), Bytes::new())
            .await
            .unwrap();
    }
    let want = Revision(store.current_revision().0 - 10);
    common::wait_for("auto-compaction", || store.compacted_revision() >= want).await;
    assert_eq!(store.compacted_revision(), want);
    // History below is gone, every key's latest value is kept.
    let all = store.range(RangeRequest::prefix("/a/")).await.unwrap();
    assert_eq!(all.count, 50);
    store.close().await.unwrap();
}

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock {
    start: Instant,
    offset: Mutex<Duration>,
}

impl store::Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.offset.lock().unwrap()
    }
}

#[tokio::test]
async fn auto_compaction_by_age_follows_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock {
        start: Instant::now(),
        offset: Mutex::new(Duration::ZERO),
    });
    let mut config = common::fast_config(dir.path());
    config.clock = clock.clone();
    config.auto_compaction = AutoCompaction {
        retain_revisions: None,
        retain_duration: Some(Duration::from_secs(3600)),
        interval: Duration::from_millis(5),
    };
    let store = Store::open(config).await.unwrap();
    for i in 0..40 {
        store
            .put(Bytes::from(format!("/t/{i}")), Bytes::new())
            .await
            .unwrap();
    }
    // Let the compactor sample revisions at fake time zero (writes to an idle store are
    // committed on this task, so it may not have run between them): nothing is an hour old.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.compacted_revision(), Revision::ZERO);
    let before = store.current_revision();
    *clock.offset.lock().unwrap() = Duration::from_secs(3601);
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.compacted_revision() == Revision::ZERO {
        assert!(
            Instant::now() < deadline,
            "auto-compaction by age did not run"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Only revisions sampled an hour (of the fake clock) ago can be compacted: later writes,
    // sampled at the new time, are kept.
    for i in 40..60 {
        store
            .put(Bytes::from(format!("/t/{i}")), Bytes::new())
            .await
            .unwrap();
    }
    assert!(store.compacted_revision() <= before);
    assert_eq!(
        store
            .range(RangeRequest::prefix("/t/"))
            .await
            .unwrap()
            .count,
        60
    );
    store.close().await.unwrap();
}
