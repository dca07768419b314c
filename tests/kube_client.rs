//! End to end with kube-rs (the Rust client-go), against the real binary: typed
//! create/get/list/patch (merge, strategic, apply)/replace/delete of Deployments, the Pod
//! `/status` and Deployment `/scale` subresources, raw watches and the `kube::runtime::watcher`
//! stream (ADDED/MODIFIED/DELETED). Errors must arrive as `kube::Error::Api` with the
//! Kubernetes status code and reason.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config, ResourceExt};
use serde_json::json;
use std::time::Duration;
use support::Server;

/// A kube client built from the kubeconfig the harness wrote, as a user's program would.
async fn client(s: &Server) -> Client {
    let kubeconfig = Kubeconfig::read_from(s.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": image, "ports": [{"containerPort": 80}]}]}
            }
        }
    }))
    .unwrap()
}

/// The API status code and reason of a failed call.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn image(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test]
async fn typed_deployment_crud() {
    let s = Server::start();
    let api: Api<Deployment> = Api::namespaced(client(&s).await, "default");

    let created = api
        .create(&PostParams::default(), &deployment("web", 1, "nginx:1.24"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.spec.as_ref().unwrap().revision_history_limit,
        Some(10),
        "defaulted"
    );
    let (code, reason) = api_error(
        api.create(&PostParams::default(), &deployment("web", 1, "x"))
            .await,
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    let got = api.get("web").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    api.create(&PostParams::default(), &deployment("other", 1, "busybox"))
        .await
        .unwrap();
    let list = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(
        list.items.iter().map(|d| d.name_any()).collect::<Vec<_>>(),
        ["web"]
    );
    assert!(
        list.metadata
            .resource_version
            .is_some_and(|rv| !rv.is_empty())
    );
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 2);
    let paged = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(paged.items.len(), 1);
    assert!(paged.metadata.continue_.is_some_and(|c| !c.is_empty()));

    let merged = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(merged.metadata.generation, Some(2));

    let strategic = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}})),
        )
        .await
        .unwrap();
    assert_eq!(image(&strategic), "nginx:1.25");
    let ports = strategic
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .ports
        .clone();
    assert_eq!(
        ports.map(|p| p.len()),
        Some(1),
        "merged by container name, ports kept"
    );

    let applied = api
        .patch(
            "web",
            &PatchParams::apply("e2e-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}}}
            })),
        )
        .await
        .unwrap();
    assert_eq!(image(&applied), "nginx:1.26");
    assert!(
        applied
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some("e2e-test")
                && m.operation.as_deref() == Some("Apply")),
        "{:?}",
        applied.metadata.managed_fields
    );
    // Apply creates when absent (201 upstream).
    let fresh = api
        .patch(
            "fresh",
            &PatchParams::apply("e2e-test"),
            &Patch::Apply(deployment("fresh", 1, "nginx")),
        )
        .await
        .unwrap();
    assert!(fresh.metadata.uid.is_some());

    let mut current = api.get("web").await.unwrap();
    current.spec.as_mut().unwrap().replicas = Some(4);
    let replaced = api
        .replace("web", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(replaced.spec.as_ref().unwrap().replicas, Some(4));
    current.spec.as_mut().unwrap().replicas = Some(5);
    let (code, reason) = api_error(api.replace("web", &PostParams::default(), &current).await);
    assert_eq!(
        (code, reason.as_str()),
        (409, "Conflict"),
        "stale resourceVersion"
    );

    api.delete("web", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("web").await.unwrap().is_none());
    let (code, reason) = api_error(api.get("web").await);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    let (code, _) = api_error(api.delete("web", &DeleteParams::default()).await);
    assert_eq!(code, 404);
}

#[tokio::test]
async fn status_and_scale_subresources() {
    let s = Server::start();
    let client = client(&s).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );

    let running = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.0.0.7",
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    let status = running.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(
        running.spec, created.spec,
        "a /status write leaves the spec alone"
    );

    // A /status write cannot change the spec; a main-resource write cannot change the status.
    let after = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"sneaky": "yes"}}, "spec": {"activeDeadlineSeconds": 5}})),
        )
        .await
        .unwrap();
    assert!(
        after.labels().get("sneaky").is_none(),
        "{:?}",
        after.labels()
    );
    assert_eq!(after.spec.as_ref().unwrap().active_deadline_seconds, None);
    let after = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().phase.as_deref(), Some("Running"));
    let got = pods.get_status("p").await.unwrap();
    assert_eq!(got.status.unwrap().phase.as_deref(), Some("Running"));

    // Stale replace_status: 409.
    let mut stale = created.clone();
    stale.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let (code, _) = api_error(
        pods.replace_status("p", &PostParams::default(), &stale)
            .await,
    );
    assert_eq!(code, 409);

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    deployments
        .create(&PostParams::default(), &deployment("web", 2, "nginx"))
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=web")
    );
    let scaled = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(7));
    assert_eq!(
        deployments.get("web").await.unwrap().spec.unwrap().replicas,
        Some(7)
    );
}

#[tokio::test]
async fn raw_watch_event_types() {
    let s = Server::start();
    let api: Api<ConfigMap> = Api::namespaced(client(&s).await, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "w"}, "data": {"k": "1"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();

    // From the list's resourceVersion: only what happens next, no replay.
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let mut types = Vec::new();
    while types.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
            .await
            .expect("a watch event within 20 s")
            .unwrap()
            .expect("the stream stays open");
        match event {
            WatchEvent::Modified(o) => {
                assert_eq!(o.data.unwrap()["k"], "2");
                types.push("MODIFIED");
            }
            WatchEvent::Deleted(o) => {
                assert!(o.metadata.resource_version.is_some());
                types.push("DELETED");
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(types, ["MODIFIED", "DELETED"]);

    // From "0": the current state first, as synthetic ADDED events.
    api.create(&PostParams::default(), &cm).await.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .expect("an event")
        .unwrap()
        .unwrap();
    assert!(
        matches!(&first, WatchEvent::Added(o) if o.name_any() == "w"),
        "{first:?}"
    );
}

#[tokio::test]
async fn watcher_stream_sees_apply_and_delete() {
    watcher_sees_init_apply_and_delete(watcher::Config::default()).await;
}

/// Runs a `watcher` with `config`: the initial state (Init, InitApply, InitDone), then a
/// create, an update and a delete as Apply, Apply, Delete.
async fn watcher_sees_init_apply_and_delete(config: watcher::Config) {
    let s = Server::start();
    let api: Api<ConfigMap> = Api::namespaced(client(&s).await, "default");
    let pre: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "pre"}})).unwrap();
    api.create(&PostParams::default(), &pre).await.unwrap();

    let mut events = watcher(api.clone(), config).boxed();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), events.try_next())
            .await
            .expect("a watcher event within 20 s")
            .expect("no watcher error")
            .expect("the watcher never ends")
    };
    assert!(matches!(next().await, watcher::Event::Init));
    assert!(matches!(next().await, watcher::Event::InitApply(o) if o.name_any() == "pre"));
    assert!(matches!(next().await, watcher::Event::InitDone));

    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "live"}, "data": {"k": "1"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    assert!(matches!(next().await, watcher::Event::Apply(o) if o.name_any() == "live"));
    api.patch(
        "live",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    match next().await {
        watcher::Event::Apply(o) => assert_eq!(o.data.unwrap()["k"], "2"),
        other => panic!("expected the modification, got {other:?}"),
    }
    api.delete("live", &DeleteParams::default()).await.unwrap();
    assert!(matches!(next().await, watcher::Event::Delete(o) if o.name_any() == "live"));
}

/// kube-rs' streaming-list mode (`sendInitialEvents=true`): the initial state arrives as ADDED
/// events closed by a BOOKMARK annotated `k8s.io/initial-events-end`.
#[tokio::test]
async fn watcher_with_streaming_lists() {
    watcher_sees_init_apply_and_delete(watcher::Config::default().streaming_lists()).await;
}
