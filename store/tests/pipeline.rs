//! The pipelined commit (`committer.rs` + `syncer.rs`) under concurrency: writes that depend
//! on writes still in the pipeline (compare-and-swap), ordering seen by a watch, and
//! background checkpoints while writers run.

use crate::common;
use bytes::Bytes;
use std::sync::Arc;
use store::{Backend, Compare, KeyRange, Op, RangeRequest, Revision, Store, Txn};

const KEYS: usize = 4;
const TASKS: usize = 48;
const INCREMENTS: usize = 40;

fn counter(k: usize) -> Bytes {
    Bytes::from(format!("/cas/{k}"))
}

/// Adds one to counter `k` with compare-and-swap on its mod_revision, retrying on conflict.
async fn increment(store: &Store, k: usize) {
    loop {
        let got = store.get(&counter(k), None).await.unwrap();
        let kv = got.kv.expect("counter exists");
        let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
        let txn = Txn {
            compares: vec![Compare::mod_revision_eq(counter(k), kv.mod_revision)],
            success: vec![Op::Put {
                key: counter(k),
                value: Bytes::from((n + 1).to_string()),
            }],
            failure: vec![],
        };
        if store.txn(txn).await.unwrap().succeeded {
            return;
        }
    }
}

async fn run_counters(store: Arc<Store>) {
    for k in 0..KEYS {
        store.put(counter(k), Bytes::from("0")).await.unwrap();
    }
    let start = store.current_revision();
    let mut watch = common::watch(
        &*store,
        KeyRange::Prefix(Bytes::from_static(b"/cas/")),
        Some(start.next()),
    )
    .await;
    // Every successful swap is one revision; failed compares write nothing.
    let end = Revision(start.0 + (TASKS * INCREMENTS) as u64);
    let watched = tokio::spawn(async move { common::collect_until(&mut watch, end).await });
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..INCREMENTS {
                increment(&store, (t + i) % KEYS).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let events = watched.await.unwrap();
    check_counters(&store, start, &events, TASKS * INCREMENTS).await;
}

/// Checks that `swaps` increments happened after revision `start`: exact counter values and
/// versions, and `events` (the watch from `start`) with each swap once, in revision order.
async fn check_counters(store: &Store, start: Revision, events: &[store::Event], swaps: usize) {
    assert_eq!(store.current_revision(), Revision(start.0 + swaps as u64));
    let all = store.range(RangeRequest::prefix("/cas/")).await.unwrap();
    let total: u64 = all
        .kvs
        .iter()
        .map(|kv| {
            let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
            // Created at "0" (version 1), then one version per increment.
            assert_eq!(kv.version, n + 1, "{kv:?}");
            n
        })
        .sum();
    assert_eq!(total, swaps as u64);
    // The watch sees every swap once, in revision order, each counter going up by one.
    assert_eq!(events.len(), swaps);
    let mut last = [0u64; KEYS];
    let mut rev = start;
    for e in events {
        assert_eq!(e.revision(), rev.next(), "gap or duplicate in the watch");
        rev = e.revision();
        let k: usize = std::str::from_utf8(&e.kv.key[5..])
            .unwrap()
            .parse()
            .unwrap();
        let n: u64 = std::str::from_utf8(&e.kv.value).unwrap().parse().unwrap();
        assert_eq!(n, last[k] + 1, "counter {k} skipped or repeated a value");
        last[k] = n;
    }
}

/// A lone writer's writes are committed on its own task, concurrent writers' by the committer
/// thread in groups: phases of one and of many writers alternate, durable and with frequent
/// checkpoints, and no write is lost, doubled or reordered across the switches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_and_concurrent_writers_alternate_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store::StoreConfig::new(dir.path());
    config.checkpoint_bytes = 8 * 1024;
    let store = Arc::new(Store::open(config.clone()).await.unwrap());
    for k in 0..KEYS {
        store.put(counter(k), Bytes::from("0")).await.unwrap();
    }
    let start = store.current_revision();
    let (lone, burst_tasks, burst_each) = (20, 16, 5);
    let swaps = 3 * lone + 3 * burst_tasks * burst_each;
    let end = Revision(start.0 + swaps as u64);
    let mut watch = common::watch(
        &*store,
        KeyRange::Prefix(Bytes::from_static(b"/cas/")),
        Some(start.next()),
    )
    .await;
    let watched = tokio::spawn(async move { common::collect_until(&mut watch, end).await });
    for phase in 0..6 {
        if phase % 2 == 0 {
            for i in 0..lone {
                increment(&store, i % KEYS).await;
            }
        } else {
            let mut tasks = Vec::new();
            for t in 0..burst_tasks {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0..burst_each {
                        increment(&store, (t + i) % KEYS).await;
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    }
    let events = watched.await.unwrap();
    check_counters(&store, start, &events, swaps).await;
    let before = store.range(RangeRequest::prefix("/cas/")).await.unwrap();
    store.close().await.unwrap();
    drop(store);
    let store = Store::open(config).await.unwrap();
    assert_eq!(store.current_revision(), end);
    assert_eq!(
        store
            .range(RangeRequest::prefix("/cas/"))
            .await
            .unwrap()
            .kvs,
        before.kvs
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compare_and_swap_sees_writes_still_in_the_pipeline() {
    let (_dir, store) = common::temp_store().await;
    let store = Arc::new(store);
    run_counters(store.clone()).await;
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn durable_pipeline_with_background_checkpoints_recovers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store::StoreConfig::new(dir.path());
    // Durable, and a checkpoint every few KiB: many run in the background during the test.
    config.checkpoint_bytes = 8 * 1024;
    let store = Arc::new(Store::open(config.clone()).await.unwrap());
    run_counters(store.clone()).await;
    let rev = store.current_revision();
    let before = store.range(RangeRequest::prefix("/cas/")).await.unwrap();
    store.close().await.unwrap();
    drop(store);
    let store = Store::open(config).await.unwrap();
    assert_eq!(store.current_revision(), rev);
    let after = store.range(RangeRequest::prefix("/cas/")).await.unwrap();
    assert_eq!(after.kvs, before.kvs);
    // History survives too: the counters' first values are still readable at their revision.
    let first = store
        .range(RangeRequest {
            revision: Some(Revision(before.kvs[0].create_revision.0)),
            ..RangeRequest::prefix("/cas/0")
        })
        .await
        .unwrap();
    assert_eq!(first.kvs[0].value, Bytes::from("0"));
    store.close().await.unwrap();
}
