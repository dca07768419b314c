//! Smoke tests of the in-memory model: basic MVCC and a watch across the history/live switch.

use bytes::Bytes;
use store::{Backend, EventKind, KeyRange, MemoryBackend, RangeRequest, Revision, WatchRequest};

#[tokio::test]
async fn put_get_range_delete_and_watch() {
    let db = MemoryBackend::new();
    assert_eq!(db.current_revision(), Revision(1));
    let r = db.put(Bytes::from("/a/1"), Bytes::from("x")).await.unwrap();
    assert_eq!(r.revision, Revision(2));
    db.put(Bytes::from("/a/2"), Bytes::from("y")).await.unwrap();
    db.put(Bytes::from("/a/1"), Bytes::from("z")).await.unwrap();
    let got = db.get(b"/a/1", None).await.unwrap().kv.unwrap();
    assert_eq!(
        (got.create_revision, got.mod_revision, got.version),
        (Revision(2), Revision(4), 2)
    );
    let old = db
        .get(b"/a/1", Some(Revision(3)))
        .await
        .unwrap()
        .kv
        .unwrap();
    assert_eq!(old.value, Bytes::from("x"));
    let page = db
        .range(RangeRequest {
            limit: Some(1),
            ..RangeRequest::prefix("/a/")
        })
        .await
        .unwrap();
    assert_eq!((page.kvs.len(), page.more, page.count), (1, true, 2));
    let mut w = db
        .watch(WatchRequest {
            range: KeyRange::Prefix(Bytes::from("/a/")),
            start_revision: Some(Revision(2)),
        })
        .await
        .unwrap();
    let del = db.delete(Bytes::from("/a/2")).await.unwrap();
    assert_eq!(del.revision, Revision(5));
    assert_eq!(
        db.delete(Bytes::from("/a/2")).await.unwrap().revision,
        Revision(5)
    );
    let mut seen = Vec::new();
    while seen.len() < 4 {
        for e in w.recv().await.unwrap().unwrap().events {
            seen.push((e.revision().0, e.kind));
        }
    }
    assert_eq!(
        seen,
        vec![
            (2, EventKind::Put),
            (3, EventKind::Put),
            (4, EventKind::Put),
            (5, EventKind::Delete)
        ]
    );
}
