//! End to end: every fault of the admin API (`docs/faults.md`) on an in-process cluster —
//! its effect, that it shows in `miniplane fault list` and the faults ConfigMap, and its undo
//! by one `clear`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admin::FaultSpec;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use miniplane::admin_client::AdminClient;
use miniplane::{Component, Progress};

use crate::support::{DEADLINE, until};

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        }
    }))
    .unwrap()
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
}

async fn replicasets(client: &kube::Client, app: &str) -> Vec<ReplicaSet> {
    Api::<ReplicaSet>::default_namespaced(client.clone())
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

async fn scale(client: &kube::Client, name: &str, replicas: i32) {
    Api::<Deployment>::default_namespaced(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_paused_controller_queues_merges_steps_and_resumes() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .scheduler(false)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let fault = admin.pause("deployment").await.unwrap();
    assert_eq!(fault.name, "pause-deployment");
    // The fault is an object: the ConfigMap every component watches.
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("miniplane-faults")
        .await
        .unwrap();
    assert!(cm.data.unwrap().contains_key("pause-deployment"));
    until("the controller-manager to report the pause", || async {
        let cs = admin.controllers().await.unwrap();
        cs.iter()
            .any(|c| c.name == "deployment" && c.paused)
            .then_some(())
    })
    .await;

    let deployments = Api::<Deployment>::default_namespaced(client.clone());
    deployments
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    scale(&client, "web", 2).await;
    scale(&client, "web", 3).await;
    // Three events, one key: the queue merged them, and nothing was synced.
    let status = until("default/web queued", || async {
        let cs = admin.controllers().await.unwrap();
        cs.into_iter()
            .find(|c| c.name == "deployment" && c.queued.contains(&"default/web".to_string()))
    })
    .await;
    assert_eq!(status.depth, 1, "{status:?}");
    assert!(replicasets(&client, "web").await.is_empty());

    // One step: one sync, the ReplicaSet for 3 replicas.
    admin.step("deployment", 1).await.unwrap();
    let rs = until("a ReplicaSet after one step", || async {
        replicasets(&client, "web").await.into_iter().next()
    })
    .await;
    assert_eq!(rs.spec.unwrap().replicas, Some(3));
    // Still paused: a change waits in the queue again.
    scale(&client, "web", 4).await;
    until("default/web queued again", || async {
        let cs = admin.controllers().await.unwrap();
        cs.iter()
            .any(|c| c.name == "deployment" && c.depth == 1 && c.paused)
            .then_some(())
    })
    .await;
    assert_eq!(
        replicasets(&client, "web").await[0]
            .spec
            .as_ref()
            .unwrap()
            .replicas,
        Some(3)
    );

    // Undo: resume, and the change goes through.
    let cleared = admin.resume("deployment").await.unwrap();
    assert_eq!(cleared.len(), 1);
    assert!(admin.faults().await.unwrap().is_empty());
    until("the ReplicaSet at 4", || async {
        let rs = replicasets(&client, "web").await;
        (rs.len() == 1 && rs[0].spec.as_ref().unwrap().replicas == Some(4)).then_some(())
    })
    .await;
    // Stepping a controller that is not paused is refused.
    let err = admin.step("deployment", 1).await.unwrap_err();
    assert!(err.0.contains("not paused"), "{err}");
}

#[tokio::test]
async fn failing_writes_answer_409_or_500_until_cleared() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .controller_manager(false)
        .scheduler(false)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let cms = Api::<ConfigMap>::default_namespaced(client.clone());
    admin
        .inject(FaultSpec::FailWrites {
            code: 409,
            fraction: 1.0,
            resource: Some("configmaps".into()),
            component: None,
        })
        .await
        .unwrap();
    let err = cms
        .create(&PostParams::default(), &configmap("a"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    // Other resources are not affected; the failure is in the trace, naming the fault.
    let request = http::Request::get("/miniplane/v1/traces?spans=all")
        .body(Vec::new())
        .unwrap();
    let spans: serde_json::Value =
        serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    let failed = spans["spans"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["attributes"]["fault"] == "fail-writes-409-configmaps");
    assert!(failed, "no span names the fault");
    admin.clear("fail-writes-409-configmaps").await.unwrap();
    cms.create(&PostParams::default(), &configmap("a"))
        .await
        .unwrap();

    admin
        .inject(FaultSpec::FailWrites {
            code: 500,
            fraction: 1.0,
            resource: None,
            component: None,
        })
        .await
        .unwrap();
    let err = cms
        .create(&PostParams::default(), &configmap("b"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500),
        "{err}"
    );
    // Clearing is itself a write, and never failed.
    admin.clear_all().await.unwrap();
    cms.create(&PostParams::default(), &configmap("b"))
        .await
        .unwrap();
}

#[tokio::test]
async fn watch_events_to_one_component_are_dropped_or_delayed() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .controller_manager(false)
        .scheduler(false)
        .start()
        .unwrap();
    let admin = AdminClient::new(cluster.client());
    let config = client::ClientConfig::new(client::ClusterSource::Url(cluster.url().into()))
        .user_agent("test-watcher");
    let watcher_client = client::build_client(&config).await.unwrap();
    let watched = Api::<ConfigMap>::default_namespaced(watcher_client);
    let cms = Api::<ConfigMap>::default_namespaced(cluster.client());
    admin
        .inject(FaultSpec::WatchEvents {
            component: "test-watcher".into(),
            resource: Some("configmaps".into()),
            delay_ms: 0,
            drop_fraction: 1.0,
        })
        .await
        .unwrap();
    let stream = watched.watch(&WatchParams::default(), "0").await.unwrap();
    let mut stream = Box::pin(stream);
    cms.create(&PostParams::default(), &configmap("dropped"))
        .await
        .unwrap();
    admin.clear("watch-test-watcher-configmaps").await.unwrap();
    admin
        .inject(FaultSpec::WatchEvents {
            component: "test-watcher".into(),
            resource: None,
            delay_ms: 300,
            drop_fraction: 0.0,
        })
        .await
        .unwrap();
    let created = Instant::now();
    cms.create(&PostParams::default(), &configmap("delayed"))
        .await
        .unwrap();
    // The first event this watcher gets is the second ConfigMap's: the first was dropped.
    let first = tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Added(cm) = first else {
        panic!("{first:?}")
    };
    assert_eq!(cm.metadata.name.as_deref(), Some("delayed"));
    assert!(created.elapsed() >= Duration::from_millis(300));
    // Undo: events flow at once again.
    admin.clear_all().await.unwrap();
    cms.create(&PostParams::default(), &configmap("prompt"))
        .await
        .unwrap();
    let next = tokio::time::timeout(DEADLINE, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(next, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("prompt")));
}

async fn ready(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get_opt(name).await.unwrap()?;
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
}

/// On a secure cluster: each kubelet writes as its node, and the simulator (not the kubelet,
/// which RBAC does not let delete its Node) deletes a removed machine's Node.
#[tokio::test]
async fn node_heartbeats_stop_and_a_node_is_removed_until_cleared() {
    let cluster = crate::support::cluster()
        .secure(true)
        .nodes(2)
        .scheduler(false)
        .fast_node_lifecycle(true)
        .start()
        .unwrap();
    let admin = AdminClient::new(cluster.client());
    let nodes = Api::<Node>::all(cluster.client());
    let stop = admin
        .inject(FaultSpec::StopHeartbeats {
            node: "node-1".into(),
        })
        .await
        .unwrap();
    until("node-1 Unknown", || async {
        (ready(&nodes, "node-1").await.as_deref() == Some("Unknown")).then_some(())
    })
    .await;
    admin.clear(&stop.name).await.unwrap();
    until("node-1 Ready again", || async {
        (ready(&nodes, "node-1").await.as_deref() == Some("True")).then_some(())
    })
    .await;

    let remove = admin
        .inject(FaultSpec::RemoveNode {
            node: "node-0".into(),
        })
        .await
        .unwrap();
    until("node-0 gone", || async {
        nodes
            .get_opt("node-0")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    admin.clear(&remove.name).await.unwrap();
    until("node-0 back and Ready", || async {
        (ready(&nodes, "node-0").await.as_deref() == Some("True")).then_some(())
    })
    .await;
}

/// `RemoveNode` with a scheduler: the pods bound to the removed node stay until the pod GC
/// (fast here: a 2 s quarantine) marks them Failed with `DisruptionTarget`
/// (`DeletionByPodGC`) and deletes them; the ReplicaSet replaces them on the other node.
#[tokio::test]
async fn the_pod_gc_deletes_the_pods_of_a_removed_node() {
    let cluster = crate::support::cluster()
        .nodes(2)
        .fast_node_lifecycle(true)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment("web", 4))
        .await
        .unwrap();
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::default_namespaced(client.clone());
    let on_node = |list: &[k8s_openapi::api::core::v1::Pod], node: &str| {
        list.iter()
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .count()
    };
    let held: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "held", "finalizers": ["example.com/keep"]},
        "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &held).await.unwrap();
    until("web's pods Running on both nodes", || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        (on_node(&list, "node-0") > 0 && on_node(&list, "node-1") > 0).then_some(())
    })
    .await;
    admin
        .inject(FaultSpec::RemoveNode {
            node: "node-0".into(),
        })
        .await
        .unwrap();
    // A pod held by a finalizer shows what the pod GC wrote before deleting it.
    until(
        "the held pod marked Failed by the pod GC and deleted",
        || async {
            let p = pods.get("held").await.unwrap();
            let status = p.status.clone().unwrap_or_default();
            let marked = status.conditions.iter().flatten().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("DeletionByPodGC")
                    && c.message.as_deref() == Some("PodGC: node no longer exists")
            });
            (marked
                && status.phase.as_deref() == Some("Failed")
                && p.metadata.deletion_timestamp.is_some())
            .then_some(())
        },
    )
    .await;
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    until(
        "4 pods of web Running on node-1, none on node-0",
        || async {
            let list = pods.list(&ListParams::default()).await.unwrap().items;
            let left = list
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-0"))
                .count();
            (left == 0 && on_node(&list, "node-1") == 4).then_some(())
        },
    )
    .await;
}

/// `StopComponent` in one process and with `--separate`: the controller-manager stops (a new
/// Deployment gets no ReplicaSet), and once cleared a new one catches up by list and watch.
async fn stop_and_restart_the_controller_manager(builder: miniplane::ClusterBuilder) {
    let progress: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let seen = progress.clone();
    let cluster = builder
        .nodes(0)
        .scheduler(false)
        .on_progress(move |p| seen.lock().unwrap().push(p.clone()))
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let count = |component: Component, stopped: bool| {
        progress
            .lock()
            .unwrap()
            .iter()
            .filter(|p| match p {
                Progress::Exited { component: c, .. } => stopped && *c == component,
                Progress::Started { component: c, .. } => !stopped && *c == component,
                _ => false,
            })
            .count()
    };
    admin
        .inject(FaultSpec::StopComponent {
            component: "controller-manager".into(),
        })
        .await
        .unwrap();
    until("the controller-manager to stop", || async {
        (count(Component::ControllerManager, true) == 1).then_some(())
    })
    .await;
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment("late", 2))
        .await
        .unwrap();
    assert!(replicasets(&client, "late").await.is_empty());
    admin.clear("stop-controller-manager").await.unwrap();
    until("the controller-manager to start again", || async {
        (count(Component::ControllerManager, false) == 2).then_some(())
    })
    .await;
    until("the ReplicaSet it catches up with", || async {
        replicasets(&client, "late").await.into_iter().next()
    })
    .await;
}

#[tokio::test]
async fn a_stopped_component_restarts_when_cleared() {
    stop_and_restart_the_controller_manager(crate::support::cluster()).await;
}

#[tokio::test]
async fn a_stopped_component_process_restarts_when_cleared() {
    stop_and_restart_the_controller_manager(
        crate::support::cluster().separate(env!("CARGO_BIN_EXE_miniplane")),
    )
    .await;
}

#[test]
fn the_fault_cli_injects_lists_and_clears() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .scheduler(false)
        .start()
        .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .arg("fault")
            .args(args)
            .args(["--kubeconfig", cluster.kubeconfig_path().to_str().unwrap()])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(&["pause", "replicaset"]);
    assert!(ok, "{err}");
    assert!(out.contains("fault/pause-replicaset injected"), "{out}");
    let (ok, out, _) = run(&["fail-writes", "--code", "500", "--fraction", "0.5"]);
    assert!(ok && out.contains("fault/fail-writes-500"), "{out}");
    let (_, list, _) = run(&["list"]);
    assert!(
        list.contains("pause-replicaset") && list.contains("PauseController"),
        "{list}"
    );
    assert!(list.contains("50% of writes answered 500"), "{list}");
    let (ok, _, err) = run(&["fail-writes", "--code", "404"]);
    assert!(!ok && err.contains("code: Unsupported value: 404"), "{err}");
    let (ok, _, err) = run(&["clear", "nope"]);
    assert!(!ok && err.contains("faults \"nope\" not found"), "{err}");
    let (ok, out, _) = run(&["clear", "--all"]);
    assert!(
        ok && out.contains("fault/pause-replicaset cleared"),
        "{out}"
    );
    let (_, list, _) = run(&["list"]);
    assert!(list.contains("No faults in force."), "{list}");
}
