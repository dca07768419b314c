//! End to end: rollouts that overlap. A 30-replica Deployment (maxSurge 2, maxUnavailable 0,
//! pods Ready 500 ms after they start) gets a new image three times, each while the previous
//! rollout is still under way, on an in-process cluster with every component. It must
//! converge to 30 available pods of the last image, and a watch on its ReplicaSets must never
//! see their desired replicas add up to more than replicas + maxSurge (32), the bound the
//! Deployment controller keeps (`NewRSNewReplicas`, `reconcileOldReplicaSets`).
//!
//! Such a rollout once made the ReplicaSet controller's scale-down sort panic on pods ready in
//! the same second (`controllers/src/replicaset/ranking.rs`) and wedge with 33 pods.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

const REPLICAS: i32 = 30;
const MAX_SURGE: i32 = 2;

fn deployment() -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": MAX_SURGE, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"},
                             "annotations": {"miniplane.dev/ready-after": "500ms"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.0"}]}
            }
        }
    }))
    .expect("a valid Deployment")
}

/// Polls `check` every 50 ms for up to `limit`; panics naming `what` and the last state seen.
async fn wait_for<T, F: std::future::Future<Output = Result<T, String>>>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(state) if start.elapsed() > limit => {
                panic!("timed out after {limit:?} waiting for {what}; last seen: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// (updated, available, replicas) of the Deployment's status.
async fn progress(deployments: &Api<Deployment>) -> (i32, i32, i32) {
    let d = deployments.get("web").await.expect("get web");
    let s = d.status.unwrap_or_default();
    (
        s.updated_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
        s.replicas.unwrap_or(0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_overlapping_rollouts_converge_within_max_surge() {
    let cluster = crate::support::cluster()
        .nodes(3)
        .start()
        .expect("cluster starts");
    let client = cluster.client();
    let deployments = Api::<Deployment>::default_namespaced(client.clone());
    let replica_sets = Api::<ReplicaSet>::default_namespaced(client.clone());
    let pods = Api::<Pod>::default_namespaced(client.clone());

    // Every change of every ReplicaSet, in order: the largest sum of their desired replicas.
    let watch = replica_sets
        .watch(&WatchParams::default().labels("app=web").timeout(290), "0")
        .await
        .expect("watch ReplicaSets");
    let watcher = tokio::spawn(async move {
        let mut desired: BTreeMap<String, i32> = BTreeMap::new();
        let mut worst = (0, String::new());
        let mut events = Box::pin(watch);
        while let Ok(Some(event)) = events.try_next().await {
            let (rs, gone) = match event {
                WatchEvent::Added(rs) | WatchEvent::Modified(rs) => (rs, false),
                WatchEvent::Deleted(rs) => (rs, true),
                _ => continue,
            };
            let name = rs.metadata.name.clone().unwrap_or_default();
            if gone {
                desired.remove(&name);
            } else {
                desired.insert(name, rs.spec.and_then(|s| s.replicas).unwrap_or(0));
            }
            let sum: i32 = desired.values().sum();
            if sum > worst.0 {
                worst = (sum, format!("{desired:?}"));
            }
        }
        worst
    });

    deployments
        .create(&PostParams::default(), &deployment())
        .await
        .expect("create web");
    wait_for(
        "30 available pods of web",
        Duration::from_secs(120),
        || async {
            let p = progress(&deployments).await;
            if p == (REPLICAS, REPLICAS, REPLICAS) {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;

    // Three new images, each once the previous rollout has replaced a few pods.
    for image in ["nginx:1.1", "nginx:1.2", "nginx:1.3"] {
        let patch = serde_json::json!({"spec": {"template": {"spec": {
            "containers": [{"name": "web", "image": image}]}}}});
        deployments
            .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .expect("set image");
        wait_for(
            &format!("a few pods of {image}"),
            Duration::from_secs(120),
            || async {
                let list = pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                let of_image = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.spec
                            .as_ref()
                            .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
                    })
                    .count();
                if of_image >= 4 {
                    Ok(())
                } else {
                    Err(format!("{of_image} pods of {image}"))
                }
            },
        )
        .await;
    }

    wait_for(
        "web rolled out: 30 updated, available pods of nginx:1.3 and nothing else",
        Duration::from_secs(180),
        || async {
            let p = progress(&deployments).await;
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| e.to_string())?;
            let live: Vec<&Pod> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let all_new = live.iter().all(|p| {
                p.spec
                    .as_ref()
                    .is_some_and(|s| s.containers[0].image.as_deref() == Some("nginx:1.3"))
            });
            if p == (REPLICAS, REPLICAS, REPLICAS) && live.len() == REPLICAS as usize && all_new {
                Ok(())
            } else {
                Err(format!(
                    "status (updated, available, replicas) {p:?}, {} live pods, all nginx:1.3: {all_new}",
                    live.len()
                ))
            }
        },
    )
    .await;

    cluster.stop().expect("cluster stops");
    let (worst, seen) = watcher.await.expect("the watcher ends with the server");
    assert!(
        worst <= REPLICAS + MAX_SURGE,
        "the ReplicaSets' desired replicas added up to {worst} (> {}): {seen}",
        REPLICAS + MAX_SURGE
    );
    assert!(worst >= REPLICAS, "the watch saw the rollout: {seen}");
}
