//! The same scenario twice on a paused virtual clock started at a fixed time with a fixed
//! seed (`miniplane up --clock virtual --clock-speed 0 --clock-start T --seed N`): a
//! Deployment created, scaled from 1 to 3 and rolled out to a new image gives, both times,
//! the same objects (Deployments, ReplicaSets, Pods, Nodes, Events; field by field, with
//! their names, UIDs, timestamps, pod IPs and nodes) and the same trace shapes (the apply's
//! spine, and for each later step the kinds of work its trace holds). Only what records the
//! order of concurrent writes is left out: resourceVersions (the objects' and the revision an
//! Event names its object at), trace ids, and Event object names (client-go names an Event by its time in nanoseconds; on a paused clock the
//! recorder moves the stamp on by one per Event, in the order they come). The nodes get their
//! pod CIDRs from their kubelets rather than from the node IPAM controller, which hands them
//! out in the order the nodes register: concurrently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use miniplane::Cluster;
use miniplane::admin_client::AdminClient;
use serde_json::{Value, json};
use trace::{Span, TRACEPARENT_ANNOTATION, Tree};

use crate::support::DEADLINE;
use crate::support::spine::{spine, work_kinds};

const START: &str = "2030-01-01T00:00:00Z";
const SEED: u64 = 20_301;

/// What a run leaves behind: the objects by kind and name, and each step's trace shape.
#[derive(Debug, PartialEq)]
struct Outcome {
    objects: BTreeMap<String, Value>,
    shapes: Vec<String>,
}

/// Drops what records the order of concurrent writes rather than what was written.
fn normalize(mut object: Value) -> Value {
    let meta = &mut object["metadata"];
    if let Some(meta) = meta.as_object_mut() {
        meta.remove("resourceVersion");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove(TRACEPARENT_ANNOTATION);
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    object
}

async fn get(client: &kube::Client, path: &str) -> Value {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap()
}

/// The spans of the trace the write that returned `written` started, once the components
/// have reported them all (none waits for a parent).
async fn trace_of(client: &kube::Client, written: &Deployment, complete: usize) -> Vec<Span> {
    let traceparent = written
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TRACEPARENT_ANNOTATION))
        .expect("the write's trace context");
    let trace_id = traceparent.split('-').nth(1).unwrap();
    let start = std::time::Instant::now();
    let mut last = 0;
    let mut stable_since = std::time::Instant::now();
    loop {
        let body = get(client, &format!("/miniplane/v1/traces/{trace_id}")).await;
        let spans: Vec<Span> = serde_json::from_value(body["spans"].clone()).unwrap_or_default();
        if spans.len() != last {
            last = spans.len();
            stable_since = std::time::Instant::now();
        }
        // The exporters send in batches: done when no span is an orphan and no new one came
        // for a while.
        if spans.len() >= complete
            && Tree::build(&spans).orphans().is_empty()
            && stable_since.elapsed() > Duration::from_millis(1500)
        {
            return spans;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "trace {trace_id} incomplete: {} spans",
            spans.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the Deployment `web` has rolled out `replicas` of `image` and nothing else
/// runs: every pod of the current template Running, no other pod left. The rollout itself
/// needs no time (the fast kubelet starts a container at once); the old pods' grace period
/// does, so the clock is advanced a second at a time once the rollout is complete, until they
/// are gone: at the same points of every run.
async fn settled(client: &kube::Client, admin: &AdminClient, replicas: i32, image: &str) {
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(client.clone());
    let start = std::time::Instant::now();
    let mut advanced_at: Option<std::time::Instant> = None;
    loop {
        let d = deployments.get("web").await.unwrap();
        let status = d.status.clone().unwrap_or_default();
        let list = pods.list(&Default::default()).await.unwrap().items;
        let rolled_out = d.metadata.generation == status.observed_generation
            && status.updated_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && status.replicas == Some(replicas);
        let running = list.iter().all(|p| {
            p.spec.as_ref().map(|s| s.containers[0].image.as_deref()) == Some(Some(image))
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        if rolled_out && running && list.len() == replicas as usize {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "web never settled at {replicas} × {image}: {status:?}, {} pods",
            list.len()
        );
        let terminating = list.iter().any(|p| p.metadata.deletion_timestamp.is_some());
        if rolled_out
            && terminating
            && advanced_at.is_none_or(|t| t.elapsed() > Duration::from_secs(5))
        {
            admin.advance_clock("1s", None).await.unwrap();
            advanced_at = Some(std::time::Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The objects of the scenario's kinds, by `kind/namespace/name`.
async fn objects(client: &kube::Client) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (kind, path) in [
        ("Deployment", "/apis/apps/v1/namespaces/default/deployments"),
        ("ReplicaSet", "/apis/apps/v1/namespaces/default/replicasets"),
        ("Pod", "/api/v1/namespaces/default/pods"),
        ("Node", "/api/v1/nodes"),
        (
            "ServiceAccount",
            "/api/v1/namespaces/default/serviceaccounts",
        ),
    ] {
        for item in get(client, path).await["items"].as_array().unwrap() {
            let name = item["metadata"]["name"].as_str().unwrap().to_string();
            let mut item = normalize(item.clone());
            if kind == "Node" {
                // The kubelet's port is a free one of the machine's.
                item["status"]
                    .as_object_mut()
                    .unwrap()
                    .remove("daemonEndpoints");
            }
            out.insert(format!("{kind}/{name}"), item);
        }
    }
    // Events by what they say, not by their (order-stamped) names.
    for event in get(client, "/api/v1/namespaces/default/events").await["items"]
        .as_array()
        .unwrap()
    {
        let mut event = normalize(event.clone());
        event["metadata"].as_object_mut().unwrap().remove("name");
        event["metadata"].as_object_mut().unwrap().remove("uid");
        // The revision of the object when it was reported.
        event["involvedObject"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        let key = format!(
            "Event/{}/{}/{}/{}",
            event["involvedObject"]["kind"].as_str().unwrap_or(""),
            event["involvedObject"]["name"].as_str().unwrap_or(""),
            event["reason"].as_str().unwrap_or(""),
            event["message"].as_str().unwrap_or("")
        );
        out.insert(key, event);
    }
    out
}

async fn scenario() -> Outcome {
    let cluster = Cluster::builder()
        .nodes(3)
        // Each kubelet its own pod CIDR (`--pod-cidr`): the node IPAM controller would hand
        // CIDRs out in the order the three nodes register, which is a race.
        .allocate_node_cidrs(false)
        .virtual_clock(0.0)
        .clock_start(START.parse().unwrap())
        .seed(SEED)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let mut shapes = Vec::new();

    let web = crate::support::deployment("web", 1, "nginx:1.27");
    let created = deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    settled(&client, &admin, 1, "nginx:1.27").await;
    shapes.push(spine(&trace_of(&client, &created, 10).await));

    for (replicas, image) in [(2, "nginx:1.27"), (3, "nginx:1.27"), (3, "nginx:1.28")] {
        let patch = json!({"spec": {"replicas": replicas, "template": {"spec": {
            "containers": [{"name": "web", "image": image}]}}}});
        let written = deployments
            .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
        settled(&client, &admin, replicas, image).await;
        shapes.push(work_kinds(&trace_of(&client, &written, 2).await));
    }
    let objects = objects(&client).await;
    cluster.stop().unwrap();
    Outcome { objects, shapes }
}

#[tokio::test]
async fn a_seeded_paused_cluster_gives_the_same_objects_names_and_trace_shapes_every_run() {
    let first = scenario().await;
    let second = scenario().await;
    // The scenario did what it says, with names from the seed.
    let pods: Vec<&String> = first
        .objects
        .keys()
        .filter(|k| k.starts_with("Pod/"))
        .collect();
    assert_eq!(pods.len(), 3, "{pods:?}");
    assert!(
        first
            .objects
            .values()
            .filter_map(|o| o["metadata"]["creationTimestamp"].as_str())
            .all(|t| t.starts_with("2030-01-01T00:0")),
        "every object stamped with the virtual clock's time"
    );
    assert!(
        first.shapes[0].contains("create pods/binding"),
        "{}",
        first.shapes[0]
    );
    for (key, object) in &first.objects {
        assert_eq!(
            Some(object),
            second.objects.get(key),
            "{key} differs between two runs"
        );
    }
    assert_eq!(
        first.objects.keys().collect::<Vec<_>>(),
        second.objects.keys().collect::<Vec<_>>()
    );
    for (step, (a, b)) in first.shapes.iter().zip(&second.shapes).enumerate() {
        let (a_lines, b_lines): (BTreeSet<&str>, BTreeSet<&str>) =
            (a.lines().collect(), b.lines().collect());
        assert_eq!(
            a,
            b,
            "the trace of step {step} has another shape: only in the first run {:#?}, only in the second {:#?}",
            a_lines.difference(&b_lines).collect::<Vec<_>>(),
            b_lines.difference(&a_lines).collect::<Vec<_>>()
        );
    }
}
