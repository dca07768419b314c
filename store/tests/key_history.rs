//! `Backend::key_history`: every kept version of one key, deletes and re-creations included,
//! before and after a compaction, on every backend (the store, `MemoryBackend` here; etcd in
//! `etcd/mod.rs`), and the store's history after a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use bytes::Bytes;
use store::{Backend, EventKind, MemoryBackend, Revision, Store};

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

/// The key's changes as (kind, value, revision).
fn shape(changes: &[store::Event]) -> Vec<(EventKind, String, Revision)> {
    changes
        .iter()
        .map(|e| {
            (
                e.kind,
                String::from_utf8_lossy(&e.kv.value).into_owned(),
                e.kv.mod_revision,
            )
        })
        .collect()
}

/// Writes `/h/a` five times among other keys (put, put, delete, put again, delete) and checks
/// its history before and after a compaction between its second put and its first delete.
pub async fn keeps_every_version_of_a_key<B: Backend>(db: &B) {
    let key = b("/h/a");
    let r1 = db.put(key.clone(), b("1")).await.unwrap().revision;
    db.put(b("/h/other"), b("x")).await.unwrap();
    let r2 = db.put(key.clone(), b("2")).await.unwrap().revision;
    let cut = db.put(b("/h/other"), b("y")).await.unwrap().revision;
    let r3 = db.delete(key.clone()).await.unwrap().revision;
    db.put(b("/h/ab"), b("a neighbour, not the key"))
        .await
        .unwrap();
    let r4 = db.put(key.clone(), b("3")).await.unwrap().revision;
    let r5 = db.delete(key.clone()).await.unwrap().revision;
    let before = db.compacted_revision();

    let h = db.key_history(&key).await.unwrap();
    assert_eq!(h.compacted, before);
    assert!(h.current >= r5, "{h:?}");
    assert_eq!(h.at_compaction, None);
    assert_eq!(
        shape(&h.changes),
        vec![
            (EventKind::Put, "1".into(), r1),
            (EventKind::Put, "2".into(), r2),
            (EventKind::Delete, String::new(), r3),
            (EventKind::Put, "3".into(), r4),
            (EventKind::Delete, String::new(), r5),
        ]
    );
    // A re-created key starts again at version 1.
    assert_eq!(h.changes[1].kv.version, 2);
    assert_eq!(h.changes[3].kv.version, 1);
    assert_eq!(h.changes[3].kv.create_revision, r4);

    db.compact(cut).await.unwrap();
    let h = db.key_history(&key).await.unwrap();
    assert_eq!(h.compacted, cut);
    let kept = h
        .at_compaction
        .expect("the version live at the compaction point");
    assert_eq!((kept.value, kept.mod_revision), (b("2"), r2));
    assert_eq!(
        shape(&h.changes),
        vec![
            (EventKind::Delete, String::new(), r3),
            (EventKind::Put, "3".into(), r4),
            (EventKind::Delete, String::new(), r5),
        ]
    );

    let live = db.key_history(b"/h/other").await.unwrap();
    assert_eq!(
        live.at_compaction.as_ref().map(|kv| kv.value.clone()),
        Some(b("y"))
    );
    assert!(live.changes.is_empty(), "{live:?}");
    let never = db.key_history(b"/h/never").await.unwrap();
    assert!(never.is_empty(), "{never:?}");
}

#[tokio::test]
async fn the_store_keeps_every_version_of_a_key() {
    let (_dir, store) = common::temp_store().await;
    keeps_every_version_of_a_key(&store).await;
    store.close().await.unwrap();
}

#[tokio::test]
async fn the_memory_backend_keeps_every_version_of_a_key() {
    keeps_every_version_of_a_key(&MemoryBackend::new()).await;
}

/// The history is read from what the store keeps on disk: the same after a restart.
#[tokio::test]
async fn a_keys_history_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::fast_config(dir.path());
    let store = Store::open(config.clone()).await.unwrap();
    for v in ["1", "2", "3"] {
        store.put(b("/h/k"), b(v)).await.unwrap();
    }
    store.delete(b("/h/k")).await.unwrap();
    let before = store.key_history(b"/h/k").await.unwrap();
    store.close().await.unwrap();
    drop(store);
    let store = Store::open(config).await.unwrap();
    let after = store.key_history(b"/h/k").await.unwrap();
    assert_eq!(shape(&after.changes), shape(&before.changes));
    assert_eq!(after.changes.len(), 4);
    store.close().await.unwrap();
}
