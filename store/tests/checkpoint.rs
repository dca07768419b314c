//! Checkpoints with values large enough that sled keeps them in blob files (`sled/blobs/`),
//! which it creates and deletes while the store writes: checkpoints must still succeed, drop
//! old WAL segments and report their health.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use std::path::Path;
use std::sync::Arc;
use store::{Backend, RangeRequest, Store, StoreConfig};

/// Above sled 0.34's blob threshold (a quarter of its 512 KiB segments): every version of the
/// `revs` tree's nodes holding one is a blob file of its own.
const VALUE_SIZE: usize = 20 * 1024;
const KEYS: usize = 100;
const WRITERS: usize = 4;
const ROUNDS: usize = 20;

fn config(dir: &Path) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    // Durable: the checkpoint syncs every file under sled's directory.
    config.fsync = true;
    // A checkpoint every few writes, while the others keep writing.
    config.checkpoint_bytes = 1 << 20;
    config
}

fn wal_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("wal")).unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_succeed_and_drop_the_wal_while_sled_creates_and_deletes_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(config(dir.path())).await.unwrap());
    // Writers keep writing while the checkpoints run in the background.
    let writers: Vec<tokio::task::JoinHandle<store::Result<usize>>> = (0..WRITERS)
        .map(|w| {
            let (store, dir) = (store.clone(), dir.path().to_owned());
            tokio::spawn(async move {
                let mut most_blobs = 0;
                for round in 0..ROUNDS {
                    for k in (w..KEYS).step_by(WRITERS) {
                        let value = Bytes::from(vec![(round + k) as u8; VALUE_SIZE]);
                        store.put(Bytes::from(format!("/big/{k}")), value).await?;
                    }
                    let blobs = std::fs::read_dir(dir.join("sled/blobs")).map_or(0, |d| d.count());
                    most_blobs = most_blobs.max(blobs);
                }
                Ok(most_blobs)
            })
        })
        .collect();
    let mut most_blobs = 0;
    for w in writers {
        most_blobs = most_blobs.max(w.await.unwrap().unwrap());
    }
    println!("at most {most_blobs} blob files");
    let saw_blobs = most_blobs > 0;
    assert!(saw_blobs, "the values never made sled use blob files");
    let health = store.checkpoint_health();
    assert_eq!(
        (health.failures_total, &health.last_error),
        (0, &None),
        "{health:?}"
    );
    assert!(health.successes_total >= 2, "{health:?}");
    assert!(health.healthy());
    // Old segments are dropped: the current one, and the one a running checkpoint covers.
    let segments = wal_segments(dir.path());
    assert!(
        segments <= 3,
        "{segments} WAL segments left after checkpoints"
    );
    let rev = store.current_revision();
    store.close().await.unwrap();
    // Closing checkpointed everything: one fresh segment is left.
    assert_eq!(wal_segments(dir.path()), 1);
    drop(store);
    let store = Store::open(config(dir.path())).await.unwrap();
    assert_eq!(store.current_revision(), rev);
    let all = store.range(RangeRequest::prefix("/big/")).await.unwrap();
    assert_eq!(all.count, KEYS);
    for kv in &all.kvs {
        let k: usize = std::str::from_utf8(&kv.key[5..]).unwrap().parse().unwrap();
        assert_eq!(
            kv.value,
            Bytes::from(vec![(ROUNDS - 1 + k) as u8; VALUE_SIZE])
        );
    }
    store.close().await.unwrap();
}
