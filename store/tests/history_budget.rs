//! The byte budget of kept history (`StoreConfig::history_budget`): updates of large values
//! far beyond it keep the history under it by compacting the oldest revisions early, with the
//! usual consequences of a compaction for reads and watches from before it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bytes::Bytes;
use store::{Backend, Error, KeyRange, RangeRequest, Revision, Store, WatchRequest};

const VALUE_SIZE: usize = 20 * 1024;
const KEYS: usize = 10;
const WRITES: usize = 400;
/// About 50 replaced versions; the writes make ~390 (7.8 MB).
const BUDGET: u64 = 1 << 20;

#[tokio::test]
async fn kept_history_stays_within_its_byte_budget_as_the_oldest_is_compacted_early() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::fast_config(dir.path());
    config.history_budget = Some(BUDGET);
    let store = Store::open(config.clone()).await.unwrap();
    // One write makes at most one value (and its key) history.
    let one_write = (VALUE_SIZE + "/cm/0".len()) as u64;
    let mut most = 0;
    for i in 0..WRITES {
        let value = Bytes::from(vec![i as u8; VALUE_SIZE]);
        store
            .put(Bytes::from(format!("/cm/{}", i % KEYS)), value)
            .await
            .unwrap();
        let kept = store.history_bytes();
        most = most.max(kept);
        assert!(
            kept <= BUDGET + one_write,
            "{kept} bytes of history kept after write {i}, budget {BUDGET}"
        );
    }
    println!("at most {most} bytes of history kept, budget {BUDGET}");
    // History was kept up to the budget, not dropped wholesale.
    assert!(most > BUDGET / 2, "only {most} bytes of history were kept");
    let compacted = store.compacted_revision();
    assert!(compacted > Revision(2), "never compacted");
    // Below the compaction point: gone, as after any compaction (410 Gone in the API server).
    let old = store.get(b"/cm/0", Some(Revision(2))).await;
    assert!(matches!(old, Err(Error::Compacted { .. })), "{old:?}");
    let watch = store
        .watch(WatchRequest {
            range: KeyRange::Prefix(Bytes::from_static(b"/cm/")),
            start_revision: Some(Revision(2)),
        })
        .await;
    assert!(matches!(watch, Err(Error::Compacted { .. })));
    // Above it: every kept version still reads.
    let at = store.get(b"/cm/0", Some(compacted)).await.unwrap();
    assert!(at.kv.is_some());
    let all = store.range(RangeRequest::prefix("/cm/")).await.unwrap();
    assert_eq!(all.count, KEYS);
    for kv in &all.kvs {
        let k: usize = std::str::from_utf8(&kv.key[4..]).unwrap().parse().unwrap();
        let last = (WRITES - KEYS..WRITES).find(|i| i % KEYS == k).unwrap();
        assert_eq!(kv.value, Bytes::from(vec![last as u8; VALUE_SIZE]));
    }
    let kept = store.history_bytes();
    store.close().await.unwrap();
    drop(store);
    // Reopened: the same history, counted again from sled.
    let store = Store::open(config).await.unwrap();
    assert_eq!(
        (store.history_bytes(), store.compacted_revision()),
        (kept, compacted)
    );
    store.close().await.unwrap();
}
