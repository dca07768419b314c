//! End to end: the API server on a real etcd cluster (`--etcd-servers`; Debian's `etcd-server`,
//! three members on loopback). The whole control plane works on it; the keys are
//! kube-apiserver's and a resourceVersion is etcd's revision, as etcd's own client sees them; a
//! second API server on the same cluster serves the same objects and the same watches; and a
//! rollout converges while a member is down.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use tokio_util::sync::CancellationToken;

use crate::support;
use crate::support::etcd_cluster;

fn web(replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap()
}

/// Whether the Deployment's latest spec is rolled out: every replica updated and available.
fn rolled_out(d: &Deployment, replicas: i32) -> bool {
    let status = d.status.clone().unwrap_or_default();
    d.metadata.generation == status.observed_generation
        && status.updated_replicas == Some(replicas)
        && status.available_replicas == Some(replicas)
        && status.replicas == Some(replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_runs_on_an_etcd_cluster_two_apiservers_share() {
    let mut etcd = etcd_cluster::EtcdCluster::start(3).await;
    let storage = apiserver::EtcdStorage {
        servers: etcd.endpoints(),
        prefix: apiserver::DEFAULT_ETCD_PREFIX.into(),
        compaction_interval: Duration::from_secs(300),
        tls: None,
    };
    let cluster = miniplane::Cluster::builder()
        .nodes(2)
        .etcd(storage.clone())
        .start()
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deployments
        .create(&PostParams::default(), &web(3))
        .await
        .unwrap();
    // Controllers, scheduler and kubelets all go through the API server on etcd.
    let ready = support::until("web's 3 replicas available", || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get("web").await.ok()?;
            rolled_out(&d, 3).then_some(d)
        }
    })
    .await;

    // etcd's own view: kube-apiserver's key, the resourceVersion as its mod_revision.
    let mut client = etcd.client().await;
    let got = client
        .get("/registry/deployments/default/web", None)
        .await
        .unwrap();
    let kv = &got.kvs()[0];
    let stored: serde_json::Value = serde_json::from_slice(kv.value()).unwrap();
    assert_eq!(stored["metadata"]["name"], "web");
    let now = deployments.get("web").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        Some(kv.mod_revision().to_string())
    );
    assert!(ready.metadata.resource_version.is_some());
    let nodes = client
        .get(
            "/registry/minions/",
            Some(
                etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_keys_only(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        nodes.kvs().len(),
        2,
        "the two Nodes, under /registry/minions/"
    );

    // A second API server on the same etcd: the same objects, and a watch that sees writes
    // made through the first.
    let data = tempfile::tempdir().unwrap();
    let second = apiserver::Server::bind(apiserver::Config {
        data_dir: data.path().to_path_buf(),
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        no_fsync: true,
        store_history_budget: None,
        store_history: apiserver::HistoryRetention::default(),
        options: apiserver::ServerOptions::default(),
        etcd: Some(storage),
    })
    .await
    .unwrap();
    let url = format!("http://{}", second.local_addr().unwrap());
    let stop = CancellationToken::new();
    let serving = tokio::spawn(second.run(stop.clone()));
    let other = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let through_second: Api<Deployment> = Api::namespaced(other, "default");
    let seen = support::until("the second API server serving web", || {
        let api = through_second.clone();
        async move { api.get("web").await.ok() }
    })
    .await;
    assert_eq!(seen.spec.and_then(|s| s.replicas), Some(3));
    let from = seen.metadata.resource_version.unwrap();
    let mut events = through_second
        .watch(&WatchParams::default().fields("metadata.name=web"), &from)
        .await
        .unwrap()
        .boxed();
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let scaled = tokio::time::timeout(support::DEADLINE, async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let WatchEvent::Modified(d) = event
                && d.spec.as_ref().and_then(|s| s.replicas) == Some(4)
            {
                return d;
            }
        }
        panic!("the watch on the second API server ended");
    })
    .await
    .expect("the second API server's watch saw the scale made through the first");
    assert_eq!(scaled.metadata.name.as_deref(), Some("web"));

    // A member down (not the leader) mid-rollout: the rollout converges.
    let leader = etcd.leader().await.expect("a leader");
    etcd.kill((leader + 1) % 3);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"template": {"spec": {
                "containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    support::until("the rollout to nginx:1.28 on two members", || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get("web").await.ok()?;
            rolled_out(&d, 4).then_some(())
        }
    })
    .await;

    stop.cancel();
    serving.await.unwrap().unwrap();
    cluster.stop().unwrap();
    drop(etcd);
    // The etcd processes are gone with the fixture.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_pass_the_etcd_flags_to_their_apiserver() {
    let etcd = etcd_cluster::EtcdCluster::start(1).await;
    let cluster = miniplane::Cluster::builder()
        .nodes(1)
        .separate(env!("CARGO_BIN_EXE_miniplane"))
        .etcd(apiserver::EtcdStorage {
            servers: etcd.endpoints(),
            prefix: "/team-a".into(),
            compaction_interval: Duration::from_secs(60),
            tls: None,
        })
        .start()
        .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(cluster.client(), "default");
    let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "in-etcd"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut client = etcd.client().await;
    let got = client
        .get("/team-a/configmaps/default/in-etcd", None)
        .await
        .unwrap();
    assert_eq!(
        got.kvs().len(),
        1,
        "under the --etcd-prefix the child was given"
    );
    let outside = client
        .get(
            "/registry/",
            Some(
                etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_keys_only(),
            ),
        )
        .await
        .unwrap();
    assert!(outside.kvs().is_empty(), "nothing under /registry/");
    cluster.stop().unwrap();
}
