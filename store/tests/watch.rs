//! Watch guarantees, on both backends: ordered, no gaps, no duplicates, resumable from any kept
//! revision, `Compacted` below it, many concurrent watchers and writers, slow watchers cut off
//! without blocking writers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use store::{Backend, Error, EventKind, KeyRange, MemoryBackend, Revision, Store, WatchRequest};

fn prefix(p: &'static str) -> KeyRange {
    KeyRange::Prefix(Bytes::from_static(p.as_bytes()))
}

async fn store_with_buffer(buffer: usize) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::fast_config(dir.path());
    config.watch_buffer = buffer;
    let store = Store::open(config).await.unwrap();
    (dir, store)
}

/// 8 writers, 50 watchers (half live from the start, half joining mid-way from a past
/// revision, so their history replay races the live writes): every watcher sees every revision
/// from its start on exactly once, in order.
pub(crate) async fn concurrent_watchers_and_writers<B: Backend>(db: Arc<B>) {
    const WRITERS: usize = 8;
    const PUTS: usize = 250;
    let first = db.current_revision().next();
    let last = Revision(first.0 + (WRITERS * PUTS) as u64 - 1);
    let mut readers = Vec::new();
    let spawn_reader = |start: Revision, mut w: store::Watcher| {
        tokio::spawn(async move {
            let events = common::collect_until(&mut w, last).await;
            let revs: Vec<u64> = events.iter().map(|e| e.revision().0).collect();
            let want: Vec<u64> = (start.0..=last.0).collect();
            assert_eq!(
                revs, want,
                "watcher from {start} saw a gap, a duplicate or disorder"
            );
        })
    };
    for _ in 0..25 {
        let w = common::watch(&*db, prefix("/w/"), None).await;
        readers.push(spawn_reader(first, w));
    }
    let mut writers = Vec::new();
    for id in 0..WRITERS {
        let db = db.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..PUTS {
                let key = Bytes::from(format!("/w/{id}/{i}"));
                db.put(key, Bytes::from_static(b"v")).await.unwrap();
            }
        }));
    }
    // Late joiners: start from some revision already written while writes go on.
    for n in 0..25u64 {
        let start = Revision(first.0 + n * 40);
        while db.current_revision() < start {
            tokio::task::yield_now().await;
        }
        let w = common::watch(&*db, prefix("/w/"), Some(start)).await;
        readers.push(spawn_reader(start, w));
    }
    for w in writers {
        w.await.unwrap();
    }
    for r in readers {
        r.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_watchers_and_writers_store() {
    let (_dir, store) = common::temp_store().await;
    let store = Arc::new(store);
    concurrent_watchers_and_writers(store.clone()).await;
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_watchers_and_writers_memory() {
    concurrent_watchers_and_writers(Arc::new(MemoryBackend::new())).await;
}

/// Resume from every kept revision; below the compaction point the watch is refused.
pub(crate) async fn resumable_from_any_kept_revision<B: Backend>(db: &B) {
    for i in 0..60 {
        let key = Bytes::from(format!("/r/{}", i % 7));
        if i % 5 == 4 {
            db.delete(key).await.unwrap();
        } else {
            db.put(key, Bytes::from(format!("{i}"))).await.unwrap();
        }
    }
    let cur = db.current_revision();
    db.compact(Revision(20)).await.unwrap();
    for start in 20..=cur.0 {
        let mut w = common::watch(db, prefix("/r/"), Some(Revision(start))).await;
        let events = common::collect_until(&mut w, cur).await;
        let revs: Vec<u64> = events.iter().map(|e| e.revision().0).collect();
        assert_eq!(revs, (start..=cur.0).collect::<Vec<_>>());
        // prev_kv is what the key held just before.
        for e in &events {
            if let Some(prev) = &e.prev_kv {
                assert!(prev.mod_revision < e.revision());
            }
            if e.kind == EventKind::Delete {
                assert!(e.prev_kv.is_some());
            }
        }
    }
    let err = db
        .watch(WatchRequest {
            range: prefix("/r/"),
            start_revision: Some(Revision(19)),
        })
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::Compacted {
            requested: Revision(19),
            compacted: Revision(20)
        }
    ));
    // A key watch sees only that key; a future-only watch sees only later writes.
    let mut one = common::watch(
        db,
        KeyRange::Key(Bytes::from_static(b"/r/3")),
        Some(Revision(20)),
    )
    .await;
    let mut future = common::watch(db, prefix("/r/"), None).await;
    let next = db
        .put(Bytes::from_static(b"/r/3"), Bytes::new())
        .await
        .unwrap()
        .revision;
    let events = common::collect_until(&mut one, next).await;
    assert!(events.iter().all(|e| e.kv.key.as_ref() == b"/r/3"));
    let events = common::collect_until(&mut future, next).await;
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn resumable_from_any_kept_revision_store() {
    let (_dir, store) = common::temp_store().await;
    resumable_from_any_kept_revision(&store).await;
    store.close().await.unwrap();
}

#[tokio::test]
async fn resumable_from_any_kept_revision_memory() {
    resumable_from_any_kept_revision(&MemoryBackend::new()).await;
}

/// A watcher that never reads is ended with `WatcherTooSlow`; writers never wait for it.
async fn slow_watcher_is_cut_off<B: Backend>(db: Arc<B>, buffer: usize) {
    let mut slow = common::watch(&*db, prefix("/s/"), None).await;
    let puts = buffer as u64 * 20;
    let writer = {
        let db = db.clone();
        tokio::spawn(async move {
            for i in 0..puts {
                db.put(Bytes::from(format!("/s/{i}")), Bytes::new())
                    .await
                    .unwrap();
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .expect("writers were blocked by a slow watcher")
        .unwrap();
    let mut ok = 0;
    let mut ended_with = None;
    while let Some(item) = slow.recv().await {
        match item {
            Ok(_) => ok += 1,
            Err(e) => {
                ended_with = Some(e);
                break;
            }
        }
    }
    assert!(
        ok <= buffer,
        "slow watcher got {ok} responses with a buffer of {buffer}"
    );
    assert!(
        matches!(ended_with, Some(Error::WatcherTooSlow)),
        "{ended_with:?}"
    );
    assert!(
        slow.recv().await.is_none(),
        "the watch must be over after the error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_watcher_is_cut_off_store() {
    let (_dir, store) = store_with_buffer(4).await;
    let store = Arc::new(store);
    slow_watcher_is_cut_off(store.clone(), 4).await;
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_watcher_is_cut_off_memory() {
    slow_watcher_is_cut_off(Arc::new(MemoryBackend::with_watch_buffer(4)), 4).await;
}

/// A watcher replaying a long history through a small buffer is not cut off: replay waits for
/// the reader (it does not hold up writers), and only live delivery can be "too slow".
#[tokio::test]
async fn history_replay_larger_than_buffer() {
    let (_dir, store) = store_with_buffer(2).await;
    for i in 0..1500 {
        store
            .put(Bytes::from(format!("/h/{i}")), Bytes::new())
            .await
            .unwrap();
    }
    let cur = store.current_revision();
    let mut w = common::watch(&store, prefix("/h/"), Some(Revision(2))).await;
    let events = common::collect_until(&mut w, cur).await;
    assert_eq!(events.len(), 1500);
    common::assert_ordered(&events);
    store.close().await.unwrap();
    // After close the stream ends and new watches are refused.
    assert!(w.recv().await.is_none());
    assert!(matches!(
        store
            .watch(WatchRequest {
                range: prefix("/h/"),
                start_revision: None
            })
            .await,
        Err(Error::Closed)
    ));
}
