//! `store::EtcdBackend` against a real etcd cluster (`cluster.rs` starts one per test): the
//! store's generic test functions, the model comparison with `MemoryBackend` (`model.rs`), and
//! what only a cluster has: a member killed mid-test, compactors racing (`cluster_tests.rs`);
//! and TLS to the members (`tls.rs`).
//! Run them with `cargo test -p store --test store etcd::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod cluster_tests;
mod model;
mod tls;

use crate::common;
use bytes::Bytes;
use cluster::EtcdCluster;
use std::sync::Arc;
use store::{
    Backend, Compare, CompareOp, CompareTarget, Error, EtcdBackend, EtcdConfig, KeyRange,
    MemoryBackend, Op, RangeRequest, Revision, Txn, WatchRequest,
};

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

#[tokio::test]
async fn bad_input() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    crate::bad_input::rejects_bad_input(&db).await;
    db.close().await;
}

#[tokio::test]
async fn watch_resumable_from_any_kept_revision() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    crate::watch::resumable_from_any_kept_revision(&db).await;
    db.close().await;
}

#[tokio::test]
async fn keeps_every_version_of_a_key() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    crate::key_history::keeps_every_version_of_a_key(&db).await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_watchers_and_writers() {
    let cluster = EtcdCluster::start(3).await;
    let db = Arc::new(cluster.backend().await);
    crate::watch::concurrent_watchers_and_writers(db.clone()).await;
    db.close().await;
}

/// Pages read at the first page's revision while writes go on give exactly the keys of that
/// revision, with `count`/`more` as the store answers them.
#[tokio::test]
async fn pagination_at_a_fixed_revision() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    let mem = MemoryBackend::new();
    for i in 0..25 {
        let (k, v) = (b(&format!("/p/{i:02}")), b(&i.to_string()));
        assert_eq!(
            db.put(k.clone(), v.clone()).await.unwrap(),
            mem.put(k, v).await.unwrap()
        );
    }
    let first = db
        .range(RangeRequest {
            limit: Some(10),
            ..RangeRequest::prefix("/p/")
        })
        .await
        .unwrap();
    assert_eq!((first.kvs.len(), first.more, first.count), (10, true, 25));
    assert_eq!(first.revision, db.current_revision());
    // Writes after the first page: later pages must not see them.
    for i in [3, 12, 20] {
        db.delete(b(&format!("/p/{i:02}"))).await.unwrap();
        mem.delete(b(&format!("/p/{i:02}"))).await.unwrap();
    }
    db.put(b("/p/99"), b("new")).await.unwrap();
    mem.put(b("/p/99"), b("new")).await.unwrap();
    let mut all = first.kvs.clone();
    let mut next = first.kvs.last().unwrap().key.to_vec();
    loop {
        next.push(0);
        let req = RangeRequest {
            start: Some(Bytes::from(next.clone())),
            limit: Some(10),
            revision: Some(first.revision),
            ..RangeRequest::prefix("/p/")
        };
        let page = db.range(req.clone()).await.unwrap();
        assert_eq!(page, mem.range(req).await.unwrap());
        assert_eq!(page.revision, first.revision);
        all.extend(page.kvs.iter().cloned());
        if !page.more {
            break;
        }
        next = page.kvs.last().unwrap().key.to_vec();
    }
    let snapshot = mem
        .range(RangeRequest {
            revision: Some(first.revision),
            ..RangeRequest::prefix("/p/")
        })
        .await
        .unwrap();
    assert_eq!(all, snapshot.kvs);
    assert_eq!(all.len(), 25);
    // The latest read sees the writes.
    let latest = db.range(RangeRequest::prefix("/p/")).await.unwrap();
    assert_eq!(
        latest,
        mem.range(RangeRequest::prefix("/p/")).await.unwrap()
    );
    db.close().await;
}

/// Every compare operator on every target, on a present and an absent key, decides as the
/// store decides.
#[tokio::test]
async fn txn_compares_as_the_store() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    let mem = MemoryBackend::new();
    for (k, v) in [("/t/x", "m"), ("/t/x", "n"), ("/t/y", "a")] {
        assert_eq!(
            db.put(b(k), b(v)).await.unwrap(),
            mem.put(b(k), b(v)).await.unwrap()
        );
    }
    let ops = [
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Less,
        CompareOp::Greater,
    ];
    for key in ["/t/x", "/t/absent"] {
        let x = db.get(b"/t/x", None).await.unwrap().kv.unwrap();
        let targets = [
            CompareTarget::ModRevision(x.mod_revision),
            CompareTarget::ModRevision(Revision(0)),
            CompareTarget::CreateRevision(x.create_revision),
            CompareTarget::CreateRevision(Revision(0)),
            CompareTarget::Version(x.version),
            CompareTarget::Version(0),
            CompareTarget::Value(x.value.clone()),
            CompareTarget::Value(b("a")),
            CompareTarget::Value(b("z")),
        ];
        for target in targets {
            for op in ops {
                let txn = Txn {
                    compares: vec![Compare {
                        key: b(key),
                        op,
                        target: target.clone(),
                    }],
                    success: vec![
                        Op::Put {
                            key: b("/t/y"),
                            value: b("ok"),
                        },
                        Op::Get { key: b("/t/y") },
                    ],
                    failure: vec![Op::Get { key: b("/t/x") }, Op::Delete { key: b("/t/gone") }],
                };
                let want = mem.txn(txn.clone()).await.unwrap();
                let got = db.txn(txn).await.unwrap();
                assert_eq!(got, want, "{key} {op:?} {target:?}");
            }
        }
    }
    db.close().await;
}

/// After a compaction reads and watches below it fail with `Compacted`, through the backend
/// that compacted and through one that learns it from etcd's answers.
#[tokio::test]
async fn compaction_refuses_old_reads_and_watches() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    let other = cluster.backend().await;
    for i in 0..10 {
        db.put(b("/c/k"), b(&i.to_string())).await.unwrap();
    }
    let old = Revision(4);
    let point = Revision(8);
    db.compact(point).await.unwrap();
    assert_eq!(db.compacted_revision(), point);
    fn compacted<T: std::fmt::Debug>(r: Result<T, Error>) -> (Revision, Revision) {
        match r {
            Err(Error::Compacted {
                requested,
                compacted,
            }) => (requested, compacted),
            other => panic!("expected Compacted, got {other:?}"),
        }
    }
    assert_eq!(compacted(db.get(b"/c/k", Some(old)).await), (old, point));
    assert_eq!(
        compacted(
            db.watch(WatchRequest {
                range: KeyRange::Key(b("/c/k")),
                start_revision: Some(old),
            })
            .await
            .map(|_| ())
        ),
        (old, point)
    );
    assert_eq!(
        db.get(b"/c/k", Some(point))
            .await
            .unwrap()
            .kv
            .unwrap()
            .value,
        b("6")
    );
    assert!(matches!(
        db.compact(point).await,
        Err(Error::Compacted { compacted, .. }) if compacted == point
    ));
    // The other backend connected before the compaction: etcd tells it.
    assert_eq!(other.compacted_revision(), Revision::ZERO);
    assert_eq!(compacted(other.get(b"/c/k", Some(old)).await), (old, point));
    assert_eq!(other.compacted_revision(), point);
    let third = cluster.backend().await;
    assert_eq!(third.compacted_revision(), point, "learned on connect");
    let fourth = cluster.backend().await;
    db.compact(Revision(10)).await.unwrap();
    // A watch etcd refuses after creating it ends with Compacted as its first item (etcd is
    // compacted one revision below the backend's point: to 9 here).
    let mut w = fourth
        .watch(WatchRequest {
            range: KeyRange::Key(b("/c/k")),
            start_revision: Some(Revision(8)),
        })
        .await
        .unwrap();
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), w.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(compacted(first.map(|_| ())), (Revision(8), Revision(10)));
    assert!(w.recv().await.is_none());
    assert_eq!(fourth.compacted_revision(), Revision(10));
    for d in [db, other, third, fourth] {
        d.close().await;
    }
}

/// Future revisions, requests etcd finds too large, size on disk.
#[tokio::test]
async fn future_revisions_and_too_large_requests() {
    let cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    db.put(b("/f/a"), b("x")).await.unwrap();
    let cur = db.current_revision();
    assert!(matches!(
        db.get(b"/f/a", Some(Revision(cur.0 + 5))).await,
        Err(Error::FutureRevision { requested, current }) if requested.0 == cur.0 + 5 && current == cur
    ));
    assert!(matches!(
        db.compact(Revision(cur.0 + 5)).await,
        Err(Error::FutureRevision { .. })
    ));
    // Two values within the store's limit, together over etcd's --max-request-bytes.
    let big = Bytes::from(vec![7u8; 1200 * 1024]);
    let txn = Txn {
        success: vec![
            Op::Put {
                key: b("/f/1"),
                value: big.clone(),
            },
            Op::Put {
                key: b("/f/2"),
                value: big.clone(),
            },
        ],
        ..Txn::default()
    };
    assert!(matches!(
        db.txn(txn).await,
        Err(Error::ValueTooLarge { size, .. }) if size == big.len()
    ));
    assert_eq!(db.current_revision(), cur);
    assert!(db.size_on_disk().is_some_and(|s| s > 0));
    assert!(db.checkpoint_health().is_none() && db.history_bytes().is_none());
    db.close().await;
}

/// `current_revision` never goes back while writers, readers and a watch run, and is at least
/// every revision a write returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_revision_never_goes_back() {
    let cluster = EtcdCluster::start(3).await;
    let db = Arc::new(cluster.backend().await);
    let mut w = common::watch(&*db, KeyRange::Prefix(b("/m/")), None).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (db, stop) = (db.clone(), stop.clone());
        tokio::spawn(async move {
            let mut last = db.current_revision();
            let mut samples = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let now = db.current_revision();
                assert!(now >= last, "current revision went back: {last} then {now}");
                last = now;
                samples += 1;
                tokio::task::yield_now().await;
            }
            samples
        })
    };
    let mut writers = Vec::new();
    for t in 0..3 {
        let db = db.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..30 {
                let rev = db
                    .put(b(&format!("/m/{t}/{i}")), b("v"))
                    .await
                    .unwrap()
                    .revision;
                assert!(db.current_revision() >= rev);
                db.range(RangeRequest::prefix("/m/")).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let last = db.current_revision();
    assert_eq!(common::collect_until(&mut w, last).await.len(), 90);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(sampler.await.unwrap() > 0);
    db.close().await;
}

/// With the default prefix the etcd keys are the API server's keys; another prefix replaces
/// `/registry/`, and ranges and watches give the API server's keys back.
#[tokio::test]
async fn prefix_replaces_registry() {
    let cluster = EtcdCluster::start(3).await;
    let plain = cluster.backend().await;
    let mut config = cluster.config();
    config.prefix = "/team-a".into();
    let team = EtcdBackend::connect(config).await.unwrap();
    let key = b("/registry/core/pods/default/web");
    let mut w = common::watch(&team, KeyRange::Prefix(b("/registry/core/")), None).await;
    plain.put(key.clone(), b("plain")).await.unwrap();
    let rev = team.put(key.clone(), b("team")).await.unwrap().revision;
    let mut raw = cluster.client().await;
    let at = |k: &str| {
        let k = k.to_string();
        let mut raw = raw.clone();
        async move {
            let r = raw.get(k, None).await.unwrap();
            r.kvs().first().map(|kv| kv.value().to_vec())
        }
    };
    assert_eq!(
        at("/registry/core/pods/default/web").await,
        Some(b"plain".to_vec())
    );
    assert_eq!(
        at("/team-a/core/pods/default/web").await,
        Some(b"team".to_vec())
    );
    let got = team
        .range(RangeRequest::prefix("/registry/"))
        .await
        .unwrap();
    assert_eq!(got.kvs.len(), 1);
    assert_eq!(
        (got.kvs[0].key.clone(), got.kvs[0].value.clone()),
        (key.clone(), b("team"))
    );
    // "" is read as /registry/ under another prefix.
    assert_eq!(
        team.range(RangeRequest::prefix("")).await.unwrap().kvs,
        got.kvs
    );
    let events = common::collect_until(&mut w, rev).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kv.key, key);
    assert!(matches!(
        team.put(b("/elsewhere"), b("x")).await,
        Err(Error::Io(_))
    ));
    // A key with no place under the prefix is not there (etcdctl's `health`).
    raw.put("health", "raw", None).await.unwrap();
    assert_eq!(team.get(b"health", None).await.unwrap().kv, None);
    assert_eq!(
        plain
            .get(b"health", None)
            .await
            .unwrap()
            .kv
            .map(|kv| kv.value),
        Some(b("raw"))
    );
    raw.delete("health", None).await.unwrap();
    raw.delete(
        "/team-a/",
        Some(etcd_client::DeleteOptions::new().with_prefix()),
    )
    .await
    .unwrap();
    team.close().await;
    plain.close().await;
}

/// Unreachable endpoints: the error names them.
#[tokio::test]
async fn connect_errors_name_the_endpoints() {
    let mut config = EtcdConfig::from_servers("http://127.0.0.1:1, http://127.0.0.1:2");
    assert_eq!(
        config.endpoints,
        ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    );
    config.dial_timeout = std::time::Duration::from_millis(300);
    let err = EtcdBackend::connect(config).await.unwrap_err().to_string();
    assert!(
        err.contains("http://127.0.0.1:1,http://127.0.0.1:2"),
        "{err}"
    );
    let err = EtcdBackend::connect(EtcdConfig::from_servers(""))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("--etcd-servers"), "{err}");
}
