//! The cluster as a library (`miniplane::Cluster`): a whole cluster in the test process, on a
//! free port with a temporary store, from a plain `#[test]` and from `#[tokio::test]`; two at
//! once are isolated; a data dir in use is refused; the store and temp dir go away on stop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use miniplane::{Cluster, Error};

use crate::support::{self, DEADLINE};

/// The example of the crate docs (`ctl/src/lib.rs`): a Deployment applied, its pods Running.
#[tokio::test]
async fn a_deployment_runs_in_a_cluster_of_its_own() {
    let cluster = Cluster::builder().nodes(3).start().unwrap();
    let client = cluster.client();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "nginx"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods = Api::<Pod>::default_namespaced(client);
    let start = Instant::now();
    loop {
        let list = pods
            .list(&ListParams::default().labels("app=nginx"))
            .await
            .unwrap();
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == 3 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "3 Running pods: {running}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Dropped here, inside the test's runtime: the cluster's own runtime stops on its thread.
}

#[test]
fn two_clusters_at_once_are_isolated_and_gone_after_stop() {
    let a = Cluster::builder().nodes(1).start().unwrap();
    let b = Cluster::builder()
        .nodes(2)
        .controller_manager(false)
        .scheduler(false)
        .start()
        .unwrap();
    assert_ne!(a.url(), b.url());
    assert!(a.kubeconfig().contains(&format!("server: {}", a.url())));
    assert_eq!(
        std::fs::read_to_string(a.kubeconfig_path()).unwrap(),
        a.kubeconfig()
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let in_a: Api<ConfigMap> = Api::default_namespaced(a.client());
        let cm: ConfigMap =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "only-in-a"}})).unwrap();
        in_a.create(&PostParams::default(), &cm).await.unwrap();
        let in_b: Api<ConfigMap> = Api::default_namespaced(b.client());
        assert!(in_b.get_opt("only-in-a").await.unwrap().is_none());
        for (cluster, nodes) in [(&a, 1), (&b, 2)] {
            let list = Api::<Node>::all(cluster.client())
                .list(&ListParams::default())
                .await
                .unwrap();
            assert_eq!(list.items.len(), nodes, "{}", cluster.url());
        }
    });

    // The real kubectl with the kubeconfig it wrote sees the same.
    let dir = tempfile::tempdir().unwrap();
    for sub in ["home", "cache", "tmp"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    let args = ["get", "configmap", "only-in-a", "-o", "name"];
    let cmd = support::kubectl::isolated_kubectl(dir.path(), a.kubeconfig_path(), &args);
    let run = support::kubectl::run_kubectl(cmd, &args, None);
    assert_eq!(run.stdout.trim(), "configmap/only-in-a", "{run}");

    let a_dir = a.data_dir().to_owned();
    let client = a.client();
    a.stop().unwrap();
    assert!(!a_dir.exists(), "the temporary store is removed on stop");
    let after =
        runtime.block_on(Api::<ConfigMap>::default_namespaced(client).list(&ListParams::default()));
    assert!(after.is_err(), "the client of a stopped cluster fails");
    // `b` still serves, then stops on drop.
    runtime.block_on(async {
        Api::<Node>::all(b.client())
            .list(&ListParams::default())
            .await
            .unwrap();
    });
}

#[test]
fn a_data_dir_in_use_is_refused_and_a_restart_keeps_objects() {
    let dir = tempfile::tempdir().unwrap();
    let first = Cluster::builder()
        .nodes(0)
        .data_dir(dir.path())
        .start()
        .unwrap();
    let second = Cluster::builder().nodes(0).data_dir(dir.path()).start();
    assert!(
        matches!(second, Err(Error::DataDirInUse { .. })),
        "{second:?}"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "kept"}})).unwrap();
    runtime.block_on(async {
        Api::<ConfigMap>::default_namespaced(first.client())
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    });
    first.stop().unwrap();
    let again = Cluster::builder()
        .nodes(0)
        .data_dir(dir.path())
        .start()
        .unwrap();
    runtime.block_on(async {
        let kept = Api::<ConfigMap>::default_namespaced(again.client())
            .get_opt("kept")
            .await
            .unwrap();
        assert!(kept.is_some(), "the ConfigMap survives a restart");
    });
}
