//! Bad input: a clear error, nothing written, the revision unchanged (both backends).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bytes::Bytes;
use store::{
    Backend, Compare, Error, MAX_TXN_OPS, MAX_VALUE_SIZE, MemoryBackend, Op, RangeRequest, Txn,
};

fn put(key: &'static str) -> Op {
    Op::Put {
        key: Bytes::from_static(key.as_bytes()),
        value: Bytes::new(),
    }
}

pub(crate) async fn rejects_bad_input<B: Backend>(db: &B) {
    db.put(Bytes::from_static(b"/seed"), Bytes::new())
        .await
        .unwrap();
    let rev = db.current_revision();
    let big = Bytes::from(vec![0u8; MAX_VALUE_SIZE + 1]);
    assert!(matches!(
        db.put(Bytes::new(), Bytes::new()).await,
        Err(Error::EmptyKey)
    ));
    assert!(matches!(
        db.delete(Bytes::new()).await,
        Err(Error::EmptyKey)
    ));
    assert!(matches!(
        db.put(Bytes::from_static(b"/big"), big.clone()).await,
        Err(Error::ValueTooLarge { size, limit }) if size == MAX_VALUE_SIZE + 1 && limit == MAX_VALUE_SIZE
    ));
    // The largest allowed value is fine (checked after the failures, see below).
    let too_many = Txn {
        success: (0..=MAX_TXN_OPS)
            .map(|i| Op::Put {
                key: Bytes::from(format!("/m/{i}")),
                value: Bytes::new(),
            })
            .collect(),
        ..Txn::default()
    };
    assert!(
        matches!(db.txn(too_many).await, Err(Error::TooManyOps { ops, .. }) if ops == MAX_TXN_OPS + 1)
    );
    let dup = Txn {
        success: vec![
            put("/d"),
            Op::Delete {
                key: Bytes::from_static(b"/d"),
            },
        ],
        ..Txn::default()
    };
    assert!(matches!(db.txn(dup).await, Err(Error::DuplicateKey)));
    // A bad op in the branch that would not run still rejects the whole txn, as etcd.
    let bad_failure = Txn {
        compares: vec![Compare::absent(Bytes::from_static(b"/seed"))],
        success: vec![put("/ok")],
        failure: vec![put("/d"), put("/d")],
    };
    assert!(matches!(
        db.txn(bad_failure).await,
        Err(Error::DuplicateKey)
    ));
    let empty_in_txn = Txn {
        success: vec![put("/fine"), put("")],
        ..Txn::default()
    };
    assert!(matches!(db.txn(empty_in_txn).await, Err(Error::EmptyKey)));
    let empty_compare = Txn {
        compares: vec![Compare::exists(Bytes::new())],
        ..Txn::default()
    };
    assert!(matches!(db.txn(empty_compare).await, Err(Error::EmptyKey)));

    assert_eq!(
        db.current_revision(),
        rev,
        "a rejected write moved the revision"
    );
    let all = db.range(RangeRequest::prefix("")).await.unwrap();
    assert_eq!(
        all.count, 1,
        "a rejected write left data behind: {:?}",
        all.kvs
    );

    let max = Bytes::from(vec![1u8; MAX_VALUE_SIZE]);
    let ok = db
        .put(Bytes::from_static(b"/max"), max.clone())
        .await
        .unwrap();
    assert_eq!(ok.revision, rev.next());
    assert_eq!(db.get(b"/max", None).await.unwrap().kv.unwrap().value, max);
}

#[tokio::test]
async fn bad_input_store() {
    let (_dir, store) = common::temp_store().await;
    rejects_bad_input(&store).await;
    store.close().await.unwrap();
}

#[tokio::test]
async fn bad_input_memory() {
    rejects_bad_input(&MemoryBackend::new()).await;
}
