//! Snapshots (`store::Snapshot`): read at one revision while writes go on, saved and read
//! back, restored into a new data directory with every key's revisions kept, the revision
//! bumped and compacted there; files cut short or changed, and non-empty targets, refused with
//! nothing written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use bytes::Bytes;
use std::sync::Arc;
use store::{
    Backend, Error, KeyRange, MemoryBackend, Op, RangeRequest, Revision, Snapshot, Store, Txn,
};

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

/// Every key under `/registry/` at `rev`, in one read.
async fn all_at(db: &dyn Backend, rev: Revision) -> Vec<store::KeyValue> {
    db.range(RangeRequest {
        range: KeyRange::Prefix(b("/registry/")),
        start: None,
        limit: None,
        revision: Some(rev),
    })
    .await
    .unwrap()
    .kvs
}

#[tokio::test]
async fn a_snapshot_is_every_key_at_one_revision_while_writes_go_on() {
    let (_dir, store) = common::temp_store().await;
    let store = Arc::new(store);
    for i in 0..2500 {
        store
            .put(b(&format!("/registry/pods/default/p{i:05}")), b("v0"))
            .await
            .unwrap();
    }
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for round in 1..=3 {
                for i in (0..2500).step_by(7) {
                    store
                        .put(
                            b(&format!("/registry/pods/default/p{i:05}")),
                            b(&format!("v{round}")),
                        )
                        .await
                        .unwrap();
                }
            }
        })
    };
    tokio::task::yield_now().await;
    let snapshot = Snapshot::read(store.as_ref(), b"/registry/").await.unwrap();
    writer.await.unwrap();
    assert_eq!(snapshot.kvs.len(), 2500);
    // Three pages of 1,000 keys, all as they were at the snapshot's revision.
    assert_eq!(
        snapshot.kvs,
        all_at(store.as_ref(), snapshot.revision).await
    );
    assert_eq!(Snapshot::decode(&snapshot.encode()).unwrap(), snapshot);
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_restored_store_keeps_each_keys_revisions_and_starts_past_the_snapshot() {
    let db = MemoryBackend::new();
    db.put(b("/registry/a"), b("1")).await.unwrap();
    db.put(b("/registry/a"), b("2")).await.unwrap();
    db.put(b("/registry/gone"), b("x")).await.unwrap();
    db.delete(b("/registry/gone")).await.unwrap();
    // Two keys written at one revision.
    db.txn(Txn {
        compares: vec![],
        success: vec![
            Op::Put {
                key: b("/registry/t1"),
                value: b("t"),
            },
            Op::Put {
                key: b("/registry/t2"),
                value: b("t"),
            },
        ],
        failure: vec![],
    })
    .await
    .unwrap();
    db.put(b("/elsewhere/k"), b("not under the prefix"))
        .await
        .unwrap();
    let snapshot = Snapshot::read(&db, b"/registry/").await.unwrap();
    assert_eq!(snapshot.kvs.len(), 3);

    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("restored");
    let current = snapshot.restore(&dir, 1000).unwrap();
    assert_eq!(current, Revision(snapshot.revision.0 + 1000));
    let store = Store::open(common::fast_config(&dir)).await.unwrap();
    assert_eq!(store.current_revision(), current);
    assert_eq!(store.compacted_revision(), current);
    assert_eq!(all_at(&store, current).await, snapshot.kvs);
    let a = store.get(b"/registry/a", None).await.unwrap().kv.unwrap();
    assert_eq!((a.value, a.version), (b("2"), 2));
    assert!(
        store
            .get(b"/registry/gone", None)
            .await
            .unwrap()
            .kv
            .is_none()
    );
    // History before the restore is gone: a read or watch there is refused.
    assert!(matches!(
        store.get(b"/registry/a", Some(snapshot.revision)).await,
        Err(Error::Compacted { .. })
    ));
    // New writes go on from the restored revision, and survive a restart.
    let w = store.put(b("/registry/a"), b("3")).await.unwrap();
    assert_eq!(w.revision, current.next());
    store.close().await.unwrap();
    drop(store);
    let store = Store::open(common::fast_config(&dir)).await.unwrap();
    let a = store.get(b"/registry/a", None).await.unwrap().kv.unwrap();
    assert_eq!(
        (a.value, a.version, a.mod_revision),
        (b("3"), 3, current.next())
    );
    store.close().await.unwrap();
    // Only the restored directory is left beside it.
    let names: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("restored")]);
}

#[tokio::test]
async fn bad_files_and_non_empty_targets_are_refused_with_nothing_written() {
    let db = MemoryBackend::new();
    db.put(b("/registry/a"), b("1")).await.unwrap();
    let data = Snapshot::read(&db, b"/registry/").await.unwrap().encode();
    let mut changed = data.clone();
    changed[20] ^= 1;
    for (what, bytes) in [
        ("cut short", &data[..data.len() - 1]),
        ("changed", &changed[..]),
        ("empty", &[][..]),
        ("not a snapshot", &b"apiVersion: v1\nkind: List\n"[..]),
    ] {
        match Snapshot::decode(bytes) {
            Err(Error::Corrupt(message)) => {
                assert!(
                    message.starts_with("not a whole miniplane snapshot"),
                    "{what}: {message}"
                )
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    let parent = tempfile::tempdir().unwrap();
    let taken = parent.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("something"), b"x").unwrap();
    let snapshot = Snapshot::decode(&data).unwrap();
    assert!(snapshot.restore(&taken, 10).is_err());
    let names: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("taken")]);
}
