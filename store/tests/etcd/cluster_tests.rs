//! What only a cluster shows: a member killed mid-test, and compact.go's compactors racing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::cluster::EtcdCluster;
use crate::common;
use bytes::Bytes;
use std::time::Duration;
use store::etcd::{COMPACT_REV_KEY, CompactOutcome, CompactState, Compactor};
use store::{Backend, Error, KeyRange, RangeRequest, Revision};
use tokio_util::sync::CancellationToken;

/// A follower is killed between writes: writes and reads still succeed, and watches (some of
/// which were streaming from the killed member) see every revision once, in order.
#[tokio::test]
async fn writes_survive_a_killed_member() {
    let mut cluster = EtcdCluster::start(3).await;
    let db = cluster.backend().await;
    let from = db.current_revision().next();
    // Several watches: the balanced channel spreads their streams over the members.
    let mut watches = Vec::new();
    for _ in 0..6 {
        watches.push(common::watch(&db, KeyRange::Prefix(Bytes::from_static(b"/k/")), None).await);
    }
    for i in 0..20 {
        db.put(
            Bytes::from(format!("/k/{i}")),
            Bytes::from_static(b"before"),
        )
        .await
        .unwrap();
    }
    let leader = cluster.leader().await.expect("a leader");
    let victim = (leader + 1) % 3;
    cluster.kill(victim);
    // Let the client see the connections to it close: a write sent into a connection the
    // member reset is not retried (it may have been applied), as clientv3 would not.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut last = Revision::ZERO;
    for i in 0..20 {
        let resp = db
            .put(Bytes::from(format!("/k/{i}")), Bytes::from_static(b"after"))
            .await
            .unwrap_or_else(|e| panic!("write {i} after killing member {victim}: {e}"));
        assert!(resp.revision > last);
        last = resp.revision;
        assert_eq!(resp.prev_kv.unwrap().value, Bytes::from_static(b"before"));
    }
    let all = db.range(RangeRequest::prefix("/k/")).await.unwrap();
    assert_eq!(all.count, 20);
    assert!(all.kvs.iter().all(|kv| kv.value.as_ref() == b"after"));
    for w in &mut watches {
        let events = common::collect_until(w, last).await;
        let revs: Vec<u64> = events.iter().map(|e| e.revision().0).collect();
        assert_eq!(revs, (from.0..=last.0).collect::<Vec<_>>());
    }
    // A new backend on the endpoints (one of them dead) connects and reads.
    let again = cluster.backend().await;
    assert_eq!(
        again
            .range(RangeRequest::prefix("/k/"))
            .await
            .unwrap()
            .count,
        20
    );
    again.close().await;
    db.close().await;
}

/// The version and value of `compact_rev_key`.
async fn lease(cluster: &EtcdCluster) -> (i64, u64) {
    let mut c = cluster.client().await;
    let r = c.get(COMPACT_REV_KEY, None).await.unwrap();
    let kv = r.kvs().first().expect("compact_rev_key exists");
    (kv.version(), kv.value_str().unwrap().parse().unwrap())
}

/// Two compactors (two API servers) run their rounds at the same moment: each round exactly
/// one of them wins the compare-and-swap, and only the winner compacts, to the revision of the
/// previous round.
#[tokio::test]
async fn racing_compactors_compact_once_per_round() {
    let cluster = EtcdCluster::start(3).await;
    let (a, b) = (cluster.backend().await, cluster.backend().await);
    for i in 0..5 {
        a.put(Bytes::from(format!("/r/{i}")), Bytes::from_static(b"start"))
            .await
            .unwrap();
    }
    let (mut sa, mut sb) = (CompactState::default(), CompactState::default());
    let (ra, rb) = tokio::join!(a.compact_round(&mut sa), b.compact_round(&mut sb));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let won = [ra, rb]
        .iter()
        .filter(|o| **o == CompactOutcome::Bootstrapped)
        .count();
    assert_eq!(won, 1, "bootstrap: {ra:?} {rb:?}");
    assert_eq!(lease(&cluster).await, (1, 0));
    let mut expected_version = 1;
    for round in 0..3 {
        for i in 0..5 {
            a.put(
                Bytes::from(format!("/r/{i}")),
                Bytes::from(round.to_string()),
            )
            .await
            .unwrap();
        }
        let before = (sa, sb);
        let (ra, rb) = tokio::join!(a.compact_round(&mut sa), b.compact_round(&mut sb));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let compacted: Vec<Revision> = [(ra, before.0), (rb, before.1)]
            .iter()
            .filter_map(|(o, s)| match o {
                CompactOutcome::Compacted(r) => {
                    assert_eq!(*r, s.revision, "compacts to the previous round's revision");
                    Some(*r)
                }
                CompactOutcome::Lost(_) => None,
                CompactOutcome::Bootstrapped => panic!("bootstrapped twice"),
            })
            .collect();
        assert_eq!(compacted.len(), 1, "round {round}: {ra:?} {rb:?}");
        expected_version += 1;
        let (version, value) = lease(&cluster).await;
        assert_eq!((version, value), (expected_version, compacted[0].0));
        // etcd itself was compacted there (one revision below: the backend's point is one
        // above etcd's), which the other backend learns from etcd's answer.
        let below = Revision(compacted[0].0 - 2);
        assert!(matches!(
            b.get(b"/r/0", Some(below)).await,
            Err(Error::Compacted { compacted: c, .. }) if c == compacted[0]
        ));
        // Both now expect the same lease version.
        assert_eq!(sa.compact_time, sb.compact_time);
    }
    a.close().await;
    b.close().await;
}

/// The running loop: two compactors on a short interval compact the cluster, and stop with
/// their shutdown token.
#[tokio::test]
async fn compactor_loop_compacts_and_stops() {
    let cluster = EtcdCluster::start(3).await;
    let (a, b) = (cluster.backend().await, cluster.backend().await);
    let shutdown = CancellationToken::new();
    let interval = Duration::from_millis(200);
    let ca = Compactor::start(&a, interval, shutdown.clone());
    let cb = Compactor::start(&b, interval, shutdown.clone());
    let writes = tokio::spawn({
        let a = cluster.backend().await;
        async move {
            for i in 0..400u32 {
                a.put(
                    Bytes::from(format!("/l/{}", i % 7)),
                    Bytes::from(i.to_string()),
                )
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                if i >= 40 && a.compacted_revision() > Revision::ZERO {
                    break;
                }
                // Learn compactions done by the other backends.
                let _ = a.get(b"/l/0", Some(Revision(2))).await;
            }
            a.close().await;
        }
    });
    common::wait_for("a compaction", || {
        ca.compact_revision().max(cb.compact_revision()) > Revision::ZERO
    })
    .await;
    writes.await.unwrap();
    shutdown.cancel();
    ca.stop().await;
    cb.stop().await;
    let (version, value) = lease(&cluster).await;
    assert!(version >= 2, "at least one round after the bootstrap");
    // etcd's compaction point is the lease's value (less the one revision etcd keeps more).
    assert!(matches!(
        a.get(b"/l/0", Some(Revision(value - 2))).await,
        Err(Error::Compacted { .. })
    ));
    a.close().await;
    b.close().await;
}
