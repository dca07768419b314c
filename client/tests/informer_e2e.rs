//! End to end: the client crate against the real miniplane API server, in process.
//!
//! An informer from the factory sees a ConfigMap created, changed and deleted through the
//! typed API; its lister answers from the cache; two leader-election candidates race for a
//! real Lease, and two components' work runs only while each leads (`run_while_leading`);
//! the event recorder's repeated event becomes one Event with `count: 2`.
// Test glue: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::{EventType, Selector};
use client::events::{ApiEventSink, new_recorder};
use client::leader_election::{LeaderElectionConfig, LeaderElector, LeaseResourceLock};
use client::shared_informer::ResourceEventHandlerFuncs;
use client::{ClientConfig, ClusterSource, Lister, SharedInformerFactory, TokioClock};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

struct Server {
    client: Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn start_server() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let backend = Arc::new(store::MemoryBackend::new());
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { apiserver::serve(listener, backend, shutdown).await.unwrap() }
    });
    let config = ClientConfig::new(ClusterSource::Url(format!("http://{addr}")));
    let client = client::build_client(&config).await.unwrap();
    Server {
        client,
        shutdown,
        task,
    }
}

impl Server {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("no handler event within 10 s")
        .expect("handler channel open")
}

fn config_map(name: &str, app: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v1".to_string())])),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_follows_the_real_api_server() {
    let server = start_server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client.clone(), "default");
    api.create(&PostParams::default(), &config_map("before", "web"))
        .await
        .unwrap();

    let factory = SharedInformerFactory::new(server.client.clone(), Duration::ZERO);
    let informer = factory.informer::<ConfigMap>();
    let (tx, mut events) = mpsc::unbounded_channel();
    let (add, update, delete) = (tx.clone(), tx.clone(), tx);
    informer.add_event_handler(
        ResourceEventHandlerFuncs::new()
            .on_add(move |cm: Arc<ConfigMap>, initial| {
                let _ = add.send(format!("add {} initial={initial}", cm.name_any()));
            })
            .on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                if old.resource_version() != new.resource_version() {
                    let _ = update.send(format!("update {}", new.name_any()));
                }
            })
            .on_delete(move |obj| {
                let _ = delete.send(format!("delete {}", obj.key()));
            }),
    );
    let shutdown = CancellationToken::new();
    factory.start(&shutdown);
    assert!(factory.wait_for_cache_sync(&shutdown).await);
    // Other namespaces' ConfigMaps (bootstrap objects) may come first: skip to ours.
    loop {
        let event = next(&mut events).await;
        if event == "add before initial=true" {
            break;
        }
        assert!(event.ends_with("initial=true"), "{event}");
    }

    api.create(&PostParams::default(), &config_map("after", "db"))
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, "add after initial=false");
    let patch = json!({"data": {"k": "v2"}});
    api.patch("after", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, "update after");

    let lister = Lister::new(informer.indexer().clone());
    let db = lister.list(Some("default"), &Selector::parse("app=db").unwrap());
    assert_eq!(db.len(), 1);
    assert_eq!(
        db[0]
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("v2")
    );

    api.delete("after", &DeleteParams::default()).await.unwrap();
    assert_eq!(next(&mut events).await, "delete default/after");
    assert!(lister.get(Some("default"), "after").is_none());

    shutdown.cancel();
    factory.shutdown().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_over_a_real_lease() {
    let server = start_server().await;
    let leases: Api<Lease> = Api::namespaced(server.client.clone(), "default");
    let candidate = |id: &str| {
        let lock = LeaseResourceLock::new(leases.clone(), "controller-manager");
        LeaderElector::new(LeaderElectionConfig::new(id), lock, TokioClock::shared())
    };
    let mut a = candidate("a");
    let mut b = candidate("b");
    assert!(a.try_acquire_or_renew().await, "a creates the lease");
    assert!(!b.try_acquire_or_renew().await, "a's lease is fresh");
    assert!(
        a.try_acquire_or_renew().await,
        "a renews with the server's resourceVersion"
    );
    let lease = leases.get("controller-manager").await.unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    a.release().await.unwrap();
    assert!(
        b.try_acquire_or_renew().await,
        "released: b takes over at once"
    );
    let spec = leases
        .get("controller-manager")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_events_become_one_event_with_a_count() {
    let server = start_server().await;
    let sink = Arc::new(ApiEventSink::new(server.client.clone()));
    let (recorder, broadcaster) = new_recorder(sink, "deployment-controller", TokioClock::shared());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(broadcaster.run(shutdown.clone()));
    let object = ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("Deployment".into()),
        namespace: Some("default".into()),
        name: Some("nginx".into()),
        uid: Some("uid-1".into()),
        ..Default::default()
    };
    recorder.event(
        &object,
        EventType::Normal,
        "ScalingReplicaSet",
        "Scaled up replica set nginx-1 to 3",
    );
    recorder.event(
        &object,
        EventType::Normal,
        "ScalingReplicaSet",
        "Scaled up replica set nginx-1 to 3",
    );
    let events: Api<Event> = Api::namespaced(server.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = events.list(&ListParams::default()).await.unwrap();
        if list.items.len() == 1 && list.items[0].count == Some(2) {
            let event = &list.items[0];
            assert_eq!(event.reason.as_deref(), Some("ScalingReplicaSet"));
            assert!(
                event
                    .metadata
                    .name
                    .as_deref()
                    .unwrap()
                    .starts_with("nginx.")
            );
            assert_eq!(
                event.source.as_ref().and_then(|s| s.component.as_deref()),
                Some("deployment-controller")
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events: {:?}",
            list.items
        );
        // Poll (with the deadline above): the recorder writes asynchronously.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    task.await.unwrap();
    server.stop().await;
}

/// A factory set as kube-controller-manager's keeps objects without managedFields, listed or
/// watched, and nothing else is lost; the stored object keeps them, and an update written
/// back from the cache (without them) does not erase them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_without_managed_fields_keeps_everything_else() {
    let server = start_server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client.clone(), "default");
    let listed = api
        .create(&PostParams::default(), &config_map("listed", "web"))
        .await
        .unwrap();
    assert!(listed.metadata.managed_fields.is_some(), "stored with them");

    let factory = SharedInformerFactory::new(server.client.clone(), Duration::ZERO);
    factory.set_without_managed_fields();
    let informer = factory.informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown);
    assert!(factory.wait_for_cache_sync(&shutdown).await);
    let lister = Lister::new(informer.indexer().clone());

    // From the list: everything but managedFields.
    let cached = lister.get(Some("default"), "listed").unwrap();
    let mut want = listed.clone();
    want.metadata.managed_fields = None;
    assert_eq!(*cached, want);

    // From the watch.
    let watched = api
        .create(&PostParams::default(), &config_map("watched", "db"))
        .await
        .unwrap();
    let cached = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(cm) = lister.get(Some("default"), "watched") {
                return cm;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the watch delivers the new ConfigMap");
    let mut want = watched.clone();
    want.metadata.managed_fields = None;
    assert_eq!(*cached, want);

    // A write from the cache's copy keeps the stored managedFields.
    let mut changed = (*cached).clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "v2".to_string())]));
    let replaced = api
        .replace("watched", &PostParams::default(), &changed)
        .await
        .unwrap();
    let managers: Vec<_> = replaced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(!managers.is_empty(), "managedFields kept: {managers:?}");

    shutdown.cancel();
    factory.shutdown().await;
    server.stop().await;
}

/// Two components campaign for one Lease through `run_while_leading`: only the leader's work
/// runs; when it shuts down it releases the Lease, the standby's work starts at once, and
/// each acquisition is an Event on the Lease.
#[tokio::test]
async fn run_while_leading_runs_only_the_leaders_work_and_hands_over_on_shutdown() {
    let server = start_server().await;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let candidate = |identity: &str, shutdown: CancellationToken| {
        let election = client::LeaderElection {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_millis(100),
            identity: identity.to_owned(),
            ..client::LeaderElection::new("demo")
        };
        let (client, tx, identity) = (server.client.clone(), tx.clone(), identity.to_owned());
        tokio::spawn(async move {
            client::run_while_leading(
                &client,
                &election,
                &TokioClock::shared(),
                &shutdown,
                |token| async move {
                    tx.send(format!("{identity} leads")).unwrap();
                    token.cancelled().await;
                    identity
                },
            )
            .await
        })
    };
    let (a_stop, b_stop) = (CancellationToken::new(), CancellationToken::new());
    let a = candidate("a", a_stop.clone());
    assert_eq!(next(&mut rx).await, "a leads");
    let b = candidate("b", b_stop.clone());
    // The standby runs nothing while `a` holds the Lease.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.try_recv().is_err(), "the standby's work started");

    a_stop.cancel();
    let a = a.await.unwrap();
    assert_eq!(a.output.as_deref(), Some("a"));
    assert!(!a.lost, "a shutdown is not a loss");
    // Released, not expired: `b` takes over within a few retry periods, not 15 s.
    let took_over = tokio::time::timeout(Duration::from_secs(3), rx.recv()).await;
    assert_eq!(took_over.unwrap().as_deref(), Some("b leads"));
    let lease = Api::<Lease>::namespaced(server.client.clone(), "kube-system")
        .get("demo")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));

    b_stop.cancel();
    assert_eq!(b.await.unwrap().output.as_deref(), Some("b"));
    let events = Api::<Event>::namespaced(server.client.clone(), "kube-system")
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut messages: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("LeaderElection"))
        .filter(|e| e.involved_object.name.as_deref() == Some("demo"))
        .filter_map(|e| e.message.clone())
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            "a became leader",
            "a stopped leading",
            "b became leader",
            "b stopped leading"
        ]
    );
    server.stop().await;
}
