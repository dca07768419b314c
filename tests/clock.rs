//! The virtual cluster clock (`miniplane up --clock virtual`, `miniplane clock`): on a paused
//! clock nothing that waits on time happens (pods stay ContainerCreating through their stage
//! delays), the API server stamps objects with the cluster's time, an advance lets every
//! component's timers fire in order (a dead node goes Unknown after its grace period and its
//! pod is evicted after the 300 s toleration, while the live nodes stay Ready throughout),
//! a clock moved backwards, a bad speed and a real clock are refused, and with every
//! component in a process of its own each one stamps what it writes with the cluster's time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use admin::{ClockMode, ClockRequest, FaultSpec};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use miniplane::admin_client::AdminClient;
use miniplane::{Cluster, KubeletProfile};

use crate::support::DEADLINE;

fn advance(by: &str) -> ClockRequest {
    ClockRequest::Advance {
        by: by.into(),
        speed: None,
    }
}

/// Advances the clock by `by` and waits until it has arrived.
async fn advance_to_arrival(admin: &AdminClient, by: &str) -> Timestamp {
    let status = tokio::time::timeout(DEADLINE, admin.advance_clock(by, None))
        .await
        .expect("the clock never arrived")
        .unwrap();
    status.now.parse().unwrap()
}

async fn pods(client: &kube::Client) -> Vec<Pod> {
    Api::<Pod>::default_namespaced(client.clone())
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn ready(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

/// [`crate::support::until`] for a check that holds or not.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    crate::support::until(what, || {
        let holds = check();
        async move { holds.await.then_some(()) }
    })
    .await
}

#[tokio::test]
async fn a_paused_cluster_moves_only_with_its_clock_and_skips_a_node_failure() {
    let cluster = Cluster::builder()
        .nodes(3)
        .kubelet_profile(KubeletProfile::Realistic)
        .virtual_clock(0.0)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let status = admin.clock().await.unwrap();
    assert_eq!(status.mode, ClockMode::Virtual);
    assert_eq!(status.speed, 0.0);
    let t0: Timestamp = status.now.parse().unwrap();
    // Minutes ahead of the machine, so a stamp from the machine's clock would show.
    let t1 = advance_to_arrival(&admin, "3m").await;
    assert_eq!(t1, t0 + SignedDuration::from_mins(3));

    let deployment = crate::support::deployment("web", 3, "nginx:1.27");
    let created = Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let stamp = created.metadata.creation_timestamp.unwrap().0;
    assert_eq!(
        stamp.as_second(),
        t1.as_second(),
        "creationTimestamp from the cluster's clock"
    );
    // Scheduling needs no time; the kubelet's pull and start delays do.
    until("3 pods scheduled", || async {
        let p = pods(&client).await;
        p.len() == 3 && p.iter().all(|p| !node_of(p).is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = pods(&client).await;
    assert!(
        waiting.iter().all(|p| phase(p) == "Pending"),
        "a paused clock lets no stage delay pass: {:?}",
        waiting.iter().map(phase).collect::<Vec<_>>()
    );
    assert_eq!(
        admin
            .clock()
            .await
            .unwrap()
            .now
            .parse::<Timestamp>()
            .unwrap(),
        t1
    );
    advance_to_arrival(&admin, "10s").await;
    until("3 pods Running", || async {
        pods(&client)
            .await
            .iter()
            .filter(|p| phase(p) == "Running")
            .count()
            == 3
    })
    .await;

    // node-1 dies: Unknown after the 40 s grace period, its pod evicted after 300 s.
    let before = pods(&client).await;
    let victim = before[0].clone();
    let dead = node_of(&victim).to_string();
    admin
        .inject(FaultSpec::StopHeartbeats { node: dead.clone() })
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let t2 = advance_to_arrival(&admin, "1m").await;
    until("the dead node Unknown", || async {
        ready(&nodes.get(&dead).await.unwrap()) == "Unknown"
    })
    .await;
    let node = nodes.get(&dead).await.unwrap();
    let since = node
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time)
        .unwrap()
        .0;
    assert!(
        since > t1 && since <= t2,
        "NodeNotReady at cluster time ({since}, between {t1} and {t2})"
    );
    for other in nodes.list(&ListParams::default()).await.unwrap().items {
        if other.metadata.name.as_deref() != Some(dead.as_str()) {
            assert_eq!(
                ready(&other),
                "True",
                "a live node stays Ready through an advance: {:?}",
                other.metadata.name
            );
        }
    }
    let victim_name = victim.metadata.name.clone().unwrap();
    assert!(
        pods(&client)
            .await
            .iter()
            .any(|p| p.metadata.name.as_ref() == Some(&victim_name)),
        "tolerated for 300 s"
    );
    advance_to_arrival(&admin, "5m").await;
    until("the pod on the dead node replaced", || async {
        let p = pods(&client).await;
        !p.iter().any(|p| {
            p.metadata.name.as_ref() == Some(&victim_name)
                && p.metadata.deletion_timestamp.is_none()
        }) && p
            .iter()
            .filter(|p| node_of(p) != dead && p.metadata.deletion_timestamp.is_none())
            .count()
            == 3
    })
    .await;
    advance_to_arrival(&admin, "10s").await;
    until("3 pods Running on live nodes", || async {
        pods(&client)
            .await
            .iter()
            .filter(|p| phase(p) == "Running" && node_of(p) != dead)
            .count()
            == 3
    })
    .await;

    // Refusals.
    let err = admin.move_clock(&advance("-5m")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the cluster clock cannot move backwards (advance -5m)"
    );
    let err = admin
        .move_clock(&ClockRequest::Run { speed: 0.0 })
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("speed: Invalid value: 0:"),
        "{err}"
    );
    let err = admin.move_clock(&advance("soon")).await.unwrap_err();
    assert!(err.to_string().contains("invalid duration"), "{err}");
    cluster.stop().unwrap();
}

#[tokio::test]
async fn a_cluster_on_the_machines_clock_refuses_to_move_it() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .controller_manager(false)
        .scheduler(false)
        .start()
        .unwrap();
    let admin = AdminClient::new(cluster.client());
    let status = admin.clock().await.unwrap();
    assert_eq!(status.mode, ClockMode::Real);
    assert_eq!(status.speed, 1.0);
    let now: Timestamp = status.now.parse().unwrap();
    assert!((Timestamp::now() - now).get_seconds().abs() < 60);
    let err = admin.move_clock(&advance("5m")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the cluster runs on the machine's clock: start it with --clock virtual to move its time"
    );
    cluster.stop().unwrap();
}

/// `up --separate --clock virtual`: the API server, the controller-manager, the scheduler,
/// the cloud-controller-manager and the kubelets each run as a process of their own and each
/// stamps what it writes with the
/// cluster's time, not its machine's: a clock years ahead of the machine's, running at a
/// hundredth of its pace (a paused one would hold back any retry a process makes under load
/// until the clock moves), so every stamp of the test's few seconds is the start's second.
#[tokio::test]
async fn every_process_of_a_separate_cluster_reads_the_cluster_clock() {
    let start: Timestamp = "2031-03-01T12:00:00Z".parse().unwrap();
    let cluster = Cluster::builder()
        .separate(env!("CARGO_BIN_EXE_miniplane"))
        .nodes(2)
        .cloud(true)
        .virtual_clock(0.01)
        .clock_start(start)
        .start()
        .unwrap();
    let client = cluster.client();
    let deployment = crate::support::deployment("web", 2, "nginx:1.27");
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    until("2 pods Running", || async {
        pods(&client)
            .await
            .iter()
            .filter(|p| phase(p) == "Running")
            .count()
            == 2
    })
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client.clone());
    let components = [
        "deployment-controller",
        "replicaset-controller",
        "default-scheduler",
        "kubelet",
    ];
    let began = std::time::Instant::now();
    let stamps = loop {
        let listed = events.list(&ListParams::default()).await.unwrap().items;
        let stamps: Vec<(String, Timestamp)> = listed
            .into_iter()
            .filter_map(|e| {
                let component = e.source.and_then(|s| s.component)?;
                Some((component, e.first_timestamp?.0))
            })
            .collect();
        if components
            .iter()
            .all(|c| stamps.iter().any(|(s, _)| s == c))
        {
            break stamps;
        }
        assert!(
            began.elapsed() < DEADLINE,
            "no Event from each of {components:?}: {stamps:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (component, stamp) in &stamps {
        assert_eq!(
            *stamp, start,
            "{component} stamps its Events with the cluster's time, not its machine's"
        );
    }
    let node = Api::<Node>::all(client.clone())
        .get("node-0")
        .await
        .unwrap();
    assert_eq!(node.metadata.creation_timestamp.unwrap().0, start);
    // The cloud-controller-manager's route controller reconciles every 10 s of cluster time
    // (its first pass came before the nodes had pod CIDRs): the node's network condition.
    AdminClient::new(client.clone())
        .advance_clock("15s", None)
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let began = std::time::Instant::now();
    let routed = loop {
        let node = nodes.get("node-0").await.unwrap();
        let condition = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "NetworkUnavailable"));
        if let Some(c) = condition.filter(|c| c.reason.as_deref() == Some("RouteCreated")) {
            break c;
        }
        assert!(began.elapsed() < DEADLINE, "node-0 never routed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let routed_at = routed.last_transition_time.unwrap().0;
    assert!(
        routed_at > start && routed_at <= start + SignedDuration::from_secs(16),
        "routed at the cluster's time, within the advance: {routed_at}"
    );
    cluster.stop().unwrap();
}

/// The metrics-server scrapes every resolution of the cluster's time: on a paused clock it
/// has scraped once (no rate yet, so no PodMetrics); after a minute's advance, which takes
/// 0.6 s of the machine's, it has scraped four times more and serves the pod's CPU at a
/// time of that minute.
#[tokio::test]
async fn the_metrics_server_scrapes_on_the_cluster_clock() {
    let cluster = Cluster::builder()
        .nodes(1)
        .metrics_server(Some(Duration::from_secs(15)))
        .virtual_clock(0.0)
        .start()
        .unwrap();
    let client = cluster.client();
    let admin = AdminClient::new(client.clone());
    let deployment = crate::support::deployment("web", 1, "nginx:1.27");
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    until("the pod Running", || async {
        pods(&client).await.iter().any(|p| phase(p) == "Running")
    })
    .await;
    let metrics = || async {
        let request = http::Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
            .body(Vec::new())
            .unwrap();
        match client.request_text(request).await {
            Ok(text) => serde_json::from_str::<serde_json::Value>(&text).unwrap()["items"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        metrics().await.is_empty(),
        "a paused clock: one scrape at most, no rate"
    );
    let t0: Timestamp = admin.clock().await.unwrap().now.parse().unwrap();
    let t1 = advance_to_arrival(&admin, "1m").await;
    let began = std::time::Instant::now();
    let items = loop {
        let items = metrics().await;
        if !items.is_empty() {
            break items;
        }
        assert!(
            began.elapsed() < DEADLINE,
            "no PodMetrics after the advance"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stamp: Timestamp = items[0]["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(
        stamp > t0 && stamp <= t1,
        "sampled at the cluster's time ({stamp}, within {t0}..{t1})"
    );
    // Between two samples of the kubelet: 15 s of cluster time and the scrape's own latency
    // (a hundred times the machine's, during the advance).
    let window = items[0]["window"].as_str().unwrap();
    let seconds: f64 = window.trim_end_matches('s').parse().unwrap();
    assert!((15.0..17.0).contains(&seconds), "window {window}");
    cluster.stop().unwrap();
}
