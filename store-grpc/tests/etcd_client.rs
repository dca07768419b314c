//! The endpoint driven by the `etcd-client` crate (a real etcd v3 client) over a real store on
//! a free port: reads, refused and allowed writes, watches, compaction, leases, status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    WatchFilterType, WatchOptions,
};
use std::sync::Arc;
use store::{Backend, Store, StoreConfig};
use store_grpc::{CLUSTER_ID, EtcdOptions, EtcdServer, MEMBER_ID, WRITABLE_FLAG};
use tokio_util::sync::CancellationToken;

/// A store, an endpoint over it, and a client.
struct Fixture {
    store: Arc<Store>,
    client: Client,
    stop: CancellationToken,
    served: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    _dir: tempfile::TempDir,
}

async fn start(writable: bool) -> Fixture {
    start_with(EtcdOptions {
        writable,
        ..EtcdOptions::default()
    })
    .await
}

async fn start_with(options: EtcdOptions) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.fsync = false;
    let store = Arc::new(Store::open(config).await.unwrap());
    let backend: Arc<dyn Backend> = store.clone();
    let server = EtcdServer::bind("127.0.0.1:0".parse().unwrap(), backend, options)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = CancellationToken::new();
    let served = tokio::spawn(server.run(stop.clone()));
    let client = Client::connect([format!("http://{addr}")], None)
        .await
        .unwrap();
    Fixture {
        store,
        client,
        stop,
        served,
        _dir: dir,
    }
}

impl Fixture {
    async fn put(&self, key: &str, value: &str) -> i64 {
        let r = self
            .store
            .put(
                Bytes::copy_from_slice(key.as_bytes()),
                Bytes::copy_from_slice(value.as_bytes()),
            )
            .await
            .unwrap();
        r.revision.0 as i64
    }

    async fn stop(self) {
        self.stop.cancel();
        self.served.await.unwrap().unwrap();
        self.store.close().await.unwrap();
    }
}

/// The gRPC status of a client error.
fn status(e: etcd_client::Error) -> tonic::Status {
    match e {
        etcd_client::Error::GRpcStatus(s) => s,
        other => panic!("not a gRPC status: {other}"),
    }
}

fn keys(r: &etcd_client::GetResponse) -> Vec<String> {
    r.kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn ranges_by_key_prefix_from_key_and_range_with_headers_and_errors() {
    let mut f = start(false).await;
    let first = f.put("/registry/apps/deployments/default/web", "{}").await;
    f.put("/registry/core/pods/default/a", "{\"a\":1}").await;
    f.put("/registry/core/pods/default/b", "{\"b\":1}").await;
    let last = f.put("/registry/core/pods/kube-system/c", "{}").await;

    let one = f
        .client
        .get("/registry/core/pods/default/a", None)
        .await
        .unwrap();
    assert_eq!(one.kvs()[0].value(), b"{\"a\":1}");
    assert_eq!(one.kvs()[0].version(), 1);
    let header = one.header().unwrap();
    assert_eq!(header.cluster_id(), CLUSTER_ID);
    assert_eq!(header.member_id(), MEMBER_ID);
    assert_eq!(header.revision(), last);

    let pods = f
        .client
        .get(
            "/registry/core/pods/",
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    assert_eq!(
        keys(&pods),
        [
            "/registry/core/pods/default/a",
            "/registry/core/pods/default/b",
            "/registry/core/pods/kube-system/c"
        ]
    );
    let between = f
        .client
        .get(
            "/registry/core/pods/default/b",
            Some(GetOptions::new().with_range("/registry/core/pods/kube-system/c")),
        )
        .await
        .unwrap();
    assert_eq!(keys(&between), ["/registry/core/pods/default/b"]);
    let from = f
        .client
        .get("/registry/core/", Some(GetOptions::new().with_from_key()))
        .await
        .unwrap();
    assert_eq!(from.count(), 3);
    let page = f
        .client
        .get(
            "/registry/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_limit(2)
                    .with_keys_only(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(page.kvs().len(), 2);
    assert!(page.more());
    assert_eq!(page.count(), 4);
    assert!(page.kvs()[0].value().is_empty());
    let counted = f
        .client
        .get(
            "/registry/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert!(counted.kvs().is_empty());
    assert_eq!(counted.count(), 4);
    let old = f
        .client
        .get(
            "/registry/",
            Some(GetOptions::new().with_prefix().with_revision(first)),
        )
        .await
        .unwrap();
    assert_eq!(keys(&old), ["/registry/apps/deployments/default/web"]);

    let future = status(
        f.client
            .get(
                "/registry/",
                Some(GetOptions::new().with_revision(last + 5)),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(future.code(), tonic::Code::OutOfRange);
    assert_eq!(
        future.message(),
        "etcdserver: mvcc: required revision is a future revision"
    );
    let empty = status(f.client.get("", None).await.unwrap_err());
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);
    assert_eq!(empty.message(), "etcdserver: key is not provided");
    f.stop().await;
}

#[tokio::test]
async fn read_only_endpoint_refuses_writes_but_serves_read_only_txns() {
    let mut f = start(false).await;
    f.put("/k", "v").await;
    let refusals = [
        f.client.put("/k", "w", None).await.map(|_| ()),
        f.client.delete("/k", None).await.map(|_| ()),
        f.client
            .txn(Txn::new().and_then([TxnOp::put("/k", "w", None)]))
            .await
            .map(|_| ()),
        f.client.compact(2, None).await.map(|_| ()),
        f.client.lease_grant(60, None).await.map(|_| ()),
    ];
    for refused in refusals {
        let s = status(refused.unwrap_err());
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
        assert!(s.message().contains(WRITABLE_FLAG), "{}", s.message());
    }
    let read = f
        .client
        .txn(
            Txn::new()
                .when([Compare::value("/k", CompareOp::Equal, "v")])
                .and_then([TxnOp::get("/k", None)]),
        )
        .await
        .unwrap();
    assert!(read.succeeded());
    let got = f.store.get(b"/k", None).await.unwrap().kv.unwrap();
    assert_eq!(got.value.as_ref(), b"v");
    f.stop().await;
}

#[tokio::test]
async fn writable_endpoint_puts_txns_and_deletes_into_the_same_store() {
    let mut f = start(true).await;
    // What the API server would watch: writes through the endpoint show up in the store.
    let mut store_watch = f
        .store
        .watch(store::WatchRequest {
            range: store::KeyRange::Prefix(Bytes::from_static(b"/registry/")),
            start_revision: None,
        })
        .await
        .unwrap();
    let put = f.client.put("/registry/x", "1", None).await.unwrap();
    let seen = store_watch.recv().await.unwrap().unwrap();
    assert_eq!(seen.events[0].kv.key.as_ref(), b"/registry/x");
    assert_eq!(
        seen.events[0].revision().0 as i64,
        put.header().unwrap().revision()
    );
    let again = f
        .client
        .put("/registry/x", "2", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!(again.prev_key().unwrap().value(), b"1");

    let create = || {
        Txn::new()
            .when([Compare::create_revision("/registry/y", CompareOp::Equal, 0)])
            .and_then([TxnOp::put("/registry/y", "new", None)])
            .or_else([TxnOp::get("/registry/y", None)])
    };
    let created = f.client.txn(create()).await.unwrap();
    assert!(created.succeeded());
    let conflict = f.client.txn(create()).await.unwrap();
    assert!(!conflict.succeeded());
    match &conflict.op_responses()[0] {
        TxnOpResponse::Get(g) => assert_eq!(g.kvs()[0].value(), b"new"),
        other => panic!("expected a get, got {other:?}"),
    }
    let updated = f
        .client
        .txn(
            Txn::new()
                .when([Compare::version("/registry/x", CompareOp::Greater, 1)])
                .and_then([TxnOp::delete("/registry/x", None)]),
        )
        .await
        .unwrap();
    assert!(updated.succeeded());

    let deleted = f
        .client
        .delete(
            "/registry/",
            Some(
                etcd_client::DeleteOptions::new()
                    .with_prefix()
                    .with_prev_key(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(deleted.deleted(), 1);
    assert_eq!(deleted.prev_kvs()[0].key(), b"/registry/y");
    assert!(
        f.store
            .get(b"/registry/y", None)
            .await
            .unwrap()
            .kv
            .is_none()
    );
    f.stop().await;
}

#[tokio::test]
async fn watch_from_a_revision_with_prev_kv_then_live_then_cancel() {
    let mut f = start(false).await;
    let first = f.put("/w/a", "1").await;
    f.put("/w/a", "2").await;
    f.put("/other", "x").await;
    f.store.delete(Bytes::from_static(b"/w/a")).await.unwrap();
    let mut stream = f
        .client
        .watch(
            "/w/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(first)
                    .with_prev_key(),
            ),
        )
        .await
        .unwrap();
    let created = stream.message().await.unwrap().unwrap();
    assert!(created.created());
    let id = created.watch_id();
    let mut events = Vec::new();
    while events.len() < 3 {
        let r = stream.message().await.unwrap().unwrap();
        assert_eq!(r.watch_id(), id);
        for e in r.events() {
            let kv = e.kv().unwrap();
            let prev = e.prev_kv().map(|p| p.value().to_vec());
            events.push((e.event_type(), kv.value().to_vec(), kv.mod_revision(), prev));
        }
    }
    assert_eq!(events[0].0, EventType::Put);
    assert_eq!(events[0].1, b"1");
    assert_eq!(events[0].2, first);
    assert_eq!(events[0].3, None);
    assert_eq!(events[1].3.as_deref(), Some(b"1".as_ref()));
    assert_eq!(events[2].0, EventType::Delete);
    assert_eq!(events[2].3.as_deref(), Some(b"2".as_ref()));

    let live = f.put("/w/b", "3").await;
    let r = stream.message().await.unwrap().unwrap();
    assert_eq!(r.events()[0].kv().unwrap().mod_revision(), live);
    stream.cancel(id).await.unwrap();
    let canceled = stream.message().await.unwrap().unwrap();
    assert!(canceled.canceled());
    assert_eq!(canceled.watch_id(), id);
    f.stop().await;
}

#[tokio::test]
async fn compaction_fails_old_reads_and_cancels_old_watches() {
    let mut f = start(true).await;
    let first = f.put("/c", "1").await;
    f.put("/c", "2").await;
    let third = f.put("/c", "3").await;
    f.client.compact(third, None).await.unwrap();
    let old = status(
        f.client
            .get("/c", Some(GetOptions::new().with_revision(first)))
            .await
            .unwrap_err(),
    );
    assert_eq!(old.code(), tonic::Code::OutOfRange);
    assert_eq!(
        old.message(),
        "etcdserver: mvcc: required revision has been compacted"
    );
    let again = status(f.client.compact(first, None).await.unwrap_err());
    assert_eq!(again.code(), tonic::Code::OutOfRange);

    let mut stream = f
        .client
        .watch("/c", Some(WatchOptions::new().with_start_revision(first)))
        .await
        .unwrap();
    let created = stream.message().await.unwrap().unwrap();
    assert!(created.created());
    let ended = stream.message().await.unwrap().unwrap();
    assert!(ended.canceled());
    assert_eq!(ended.compact_revision(), third);
    assert_eq!(ended.watch_id(), created.watch_id());
    f.stop().await;
}

#[tokio::test]
async fn leases_status_and_members() {
    let mut f = start(true).await;
    let lease = f.client.lease_grant(60, None).await.unwrap();
    f.client
        .put(
            "/leased",
            "v",
            Some(PutOptions::new().with_lease(lease.id())),
        )
        .await
        .unwrap();
    let got = f.client.get("/leased", None).await.unwrap();
    assert_eq!(got.kvs()[0].lease(), lease.id());
    let listed = f.client.leases().await.unwrap();
    assert_eq!(
        listed.leases().iter().map(|l| l.id()).collect::<Vec<_>>(),
        [lease.id()]
    );
    let ttl = f
        .client
        .lease_time_to_live(
            lease.id(),
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .unwrap();
    assert_eq!(ttl.granted_ttl(), 60);
    assert_eq!(ttl.keys(), [b"/leased".to_vec()]);
    f.client.lease_revoke(lease.id()).await.unwrap();
    assert!(f.store.get(b"/leased", None).await.unwrap().kv.is_none());
    let gone = status(f.client.lease_revoke(lease.id()).await.unwrap_err());
    assert_eq!(gone.code(), tonic::Code::NotFound);
    let missing = status(
        f.client
            .put("/x", "v", Some(PutOptions::new().with_lease(12345)))
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.message(), "etcdserver: requested lease not found");

    let st = f.client.status().await.unwrap();
    assert_eq!(st.leader(), MEMBER_ID);
    assert_eq!(st.raft_index() as i64, st.header().unwrap().revision());
    assert!(st.db_size() > 0);
    assert!(st.version().starts_with("3.5."));
    let members = f.client.member_list().await.unwrap();
    assert_eq!(members.members().len(), 1);
    assert_eq!(members.members()[0].id(), MEMBER_ID);
    f.stop().await;
}

#[tokio::test]
async fn a_range_watch_filters_events_and_reports_progress() {
    let mut f = start_with(EtcdOptions {
        writable: false,
        progress_notify_interval: std::time::Duration::from_millis(100),
        ..EtcdOptions::default()
    })
    .await;
    let first = f.put("/r/a", "1").await;
    let in_range = f.put("/r/b", "2").await;
    f.put("/r/d", "3").await;
    // [/r/b, /r/d): not a prefix, so the store watches /r/ and the endpoint cuts the range.
    let mut stream = f
        .client
        .watch(
            "/r/b",
            Some(
                WatchOptions::new()
                    .with_range("/r/d")
                    .with_start_revision(first)
                    .with_progress_notify()
                    .with_filters([WatchFilterType::NoDelete]),
            ),
        )
        .await
        .unwrap();
    assert!(stream.message().await.unwrap().unwrap().created());
    f.store.delete(Bytes::from_static(b"/r/b")).await.unwrap();
    let last = f.put("/r/z", "4").await;
    let mut seen = Vec::new();
    let progressed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let r = stream.message().await.unwrap().unwrap();
            assert!(!r.canceled());
            for e in r.events() {
                seen.push(e.kv().unwrap().mod_revision());
            }
            // A progress notification: no events, at the last revision the watch went past.
            if r.events().is_empty() && r.header().unwrap().revision() == last {
                return;
            }
        }
    })
    .await;
    assert!(progressed.is_ok(), "no progress notification at {last}");
    // Only the put of /r/b: /r/a, /r/d and /r/z are outside [/r/b, /r/d), the delete is
    // filtered out.
    assert_eq!(seen, [in_range]);
    f.stop().await;
}

/// A fake observer: every request it is told of.
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<store_grpc::EtcdRequest>>);

impl store_grpc::RequestObserver for Seen {
    fn observed(&self, request: &store_grpc::EtcdRequest) {
        self.0.lock().unwrap().push(request.clone());
    }
}

impl Seen {
    /// The summaries of the requests of `method` seen so far.
    fn of(&self, method: &str) -> Vec<store_grpc::EtcdRequest> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|r| r.method == method)
            .cloned()
            .collect()
    }
}

#[tokio::test]
async fn an_observer_is_told_of_each_request_once() {
    use store_grpc::Outcome;
    let seen = Arc::new(Seen::default());
    let observer: Arc<dyn store_grpc::RequestObserver> = seen.clone();
    let mut f = start_with(EtcdOptions {
        writable: true,
        observer: Some(observer),
        ..EtcdOptions::default()
    })
    .await;
    let first = f.put("/o/a", "1").await;
    f.client.get("/o/a", None).await.unwrap();
    f.client
        .get("/o/", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    let ranges = seen.of("Range");
    assert_eq!(ranges.len(), 2, "{ranges:?}");
    assert_eq!(ranges[0].key, "/o/a");
    assert_eq!(ranges[0].revision, first);
    assert_eq!(
        ranges[0].summary(),
        format!("Range /o/a → 1 kv at revision {first}")
    );
    assert_eq!(ranges[1].key, "/o/../o0");
    assert_eq!(ranges[1].prefix.as_deref(), Some("/o/"));

    let put = f.client.put("/o/b", "2", None).await.unwrap();
    let written = put.header().unwrap().revision();
    let puts = seen.of("Put");
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].summary(), format!("Put /o/b → revision {written}"));

    // A watch is reported when it is created and when it is canceled, not per event.
    let mut stream = f.client.watch("/o/a", None).await.unwrap();
    let created = stream.message().await.unwrap().unwrap();
    assert!(created.created());
    f.put("/o/a", "2").await;
    f.put("/o/a", "3").await;
    let mut events = 0;
    while events < 2 {
        events += stream.message().await.unwrap().unwrap().events().len();
    }
    stream.cancel(created.watch_id()).await.unwrap();
    let canceled = stream.message().await.unwrap().unwrap();
    assert!(canceled.canceled());
    let watches = seen.of("Watch");
    assert_eq!(watches.len(), 1, "{watches:?}");
    assert_eq!(
        watches[0].summary(),
        format!("Watch /o/a from revision {}", written + 1)
    );
    assert_eq!(seen.of("WatchCancel").len(), 1);

    // A compaction, then a read below it: refused, with etcd's error.
    let now = f.put("/o/c", "4").await;
    f.client.compact(now, None).await.unwrap();
    let compact = seen.of("Compact");
    assert_eq!(compact[0].summary(), format!("Compact to revision {now}"));
    let old = f
        .client
        .get("/o/a", Some(GetOptions::new().with_revision(first)))
        .await;
    assert!(old.is_err());
    let refused = seen.of("Range").pop().unwrap();
    assert_eq!(refused.revision, first);
    assert!(matches!(
        refused.outcome,
        Outcome::Refused {
            code: tonic::Code::OutOfRange,
            ..
        }
    ));
    assert!(
        refused
            .error()
            .is_some_and(|e| e.contains("required revision has been compacted")),
        "{refused:?}"
    );

    let lease = f.client.lease_grant(60, None).await.unwrap();
    f.client.lease_revoke(lease.id()).await.unwrap();
    f.client.status().await.unwrap();
    assert_eq!(seen.of("LeaseGrant").len(), 1);
    assert_eq!(seen.of("LeaseRevoke").len(), 1);
    assert_eq!(seen.of("Status").len(), 1);
    f.stop().await;
}

#[tokio::test]
async fn an_observer_sees_a_read_only_endpoints_refusals() {
    let seen = Arc::new(Seen::default());
    let observer: Arc<dyn store_grpc::RequestObserver> = seen.clone();
    let mut f = start_with(EtcdOptions {
        observer: Some(observer),
        ..EtcdOptions::default()
    })
    .await;
    assert!(f.client.put("/r", "x", None).await.is_err());
    let puts = seen.of("Put");
    assert_eq!(puts.len(), 1);
    assert_eq!(
        puts[0].summary(),
        "Put /r refused: the endpoint is read-only"
    );
    assert!(puts[0].error().is_some_and(|e| e.contains(WRITABLE_FLAG)));
    f.stop().await;
}
