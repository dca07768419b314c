//! Tests of the kubelet API's plain HTTP endpoints (logs, pods, stats, metrics, errors) on a
//! bound listener with a raw HTTP/1.1 client, and the fixture the streaming tests share.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use client::ClusterSource;
use client::TokioClock;
use client::fake_source::FakeSource;
use client::shared_informer::SharedIndexInformer;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::KubeletServer;
use crate::config::{Capacity, Config};
use crate::node::NodeState;

/// A pod to put in the fixture's informer.
pub(super) struct PodBuilder {
    pod: Pod,
}

impl PodBuilder {
    /// Pod `default/<name>` on `node-0` with one running container `app` of `image`, started
    /// a minute ago.
    pub(super) fn new(name: &str, image: &str) -> Self {
        let mut pod = Pod {
            spec: Some(PodSpec {
                node_name: Some("node-0".into()),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(Time(started())),
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    image: image.into(),
                    ready: true,
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(Time(started())),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("default".into());
        pod.metadata.uid = Some(format!("uid-{name}"));
        PodBuilder { pod }
    }

    fn app(&mut self) -> &mut Container {
        let spec = self.pod.spec.get_or_insert_with(Default::default);
        &mut spec.containers[0]
    }

    /// The container's command.
    pub(super) fn command(mut self, argv: &[&str]) -> Self {
        self.app().command = Some(argv.iter().map(|a| (*a).to_owned()).collect());
        self
    }

    /// A declared port.
    pub(super) fn port(mut self, port: i32, name: Option<&str>) -> Self {
        self.app()
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                name: name.map(str::to_owned),
                ..Default::default()
            });
        self
    }

    /// `stdin: true` (and `tty`).
    pub(super) fn stdin(mut self, tty: bool) -> Self {
        self.app().stdin = Some(true);
        self.app().tty = Some(tty);
        self
    }

    /// An annotation.
    pub(super) fn annotation(mut self, key: &str, value: &str) -> Self {
        self.pod
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// A CPU and memory request of the container.
    pub(super) fn requests(mut self, cpu: &str, memory: &str) -> Self {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        self.app().resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), Quantity(cpu.into())),
                ("memory".to_owned(), Quantity(memory.into())),
            ])),
            ..Default::default()
        });
        self
    }

    /// The container's state replaced: waiting with `reason`.
    pub(super) fn waiting(mut self, reason: &str) -> Self {
        set_state(
            &mut self.pod,
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        self
    }

    /// The pod.
    pub(super) fn build(self) -> Pod {
        self.pod
    }
}

/// When the fixture's containers started.
pub(super) fn started() -> Timestamp {
    Timestamp::now()
        .checked_sub(SignedDuration::from_secs(60))
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .round(jiff::Unit::Second)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn set_state(pod: &mut Pod, state: ContainerState) {
    if let Some(s) = pod
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        s[0].state = Some(state);
    }
}

/// `pod` with its container terminated now (exit 0).
pub(super) fn terminated(mut pod: Pod) -> Pod {
    set_state(
        &mut pod,
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 0,
                reason: Some("Completed".into()),
                started_at: Some(Time(started())),
                finished_at: Some(Time(Timestamp::now())),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    pod
}

/// A kubelet API serving two nodes (`node-0`, `node-1`) on a bound listener.
pub(super) struct Fixture {
    pub(super) server: KubeletServer,
    pub(super) addr: SocketAddr,
    pub(super) pods: SharedIndexInformer<Pod>,
    pub(super) nodes: crate::pod_workers::NodeTable,
    pub(super) shutdown: CancellationToken,
    pub(super) serving: JoinHandle<()>,
}

impl Fixture {
    pub(super) async fn start(pods: Vec<Pod>) -> Fixture {
        let config = Config::new(ClusterSource::Url("http://127.0.0.1:1".into()), 2);
        let nodes: crate::pod_workers::NodeTable = Arc::new(RwLock::new(
            (0..2)
                .filter_map(|i| NodeState::new(&config, i).ok())
                .map(|n| (n.name().to_owned(), Arc::new(n)))
                .collect(),
        ));
        let informer: SharedIndexInformer<Pod> =
            SharedIndexInformer::new(Arc::new(FakeSource::<Pod>::new()), Duration::ZERO);
        // The server adds the node-name index the pod workers use if it is missing.
        let server = KubeletServer::new(
            nodes.clone(),
            informer.clone(),
            TokioClock::shared(),
            None,
            &Capacity::default(),
        );
        for pod in pods {
            informer.indexer().add(Arc::new(pod));
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.clone().serve(listener, shutdown.clone()));
        Fixture {
            server,
            addr,
            pods: informer,
            nodes,
            shutdown,
            serving,
        }
    }

    /// The `Host` header of node `name`.
    pub(super) fn host(&self, node: &str) -> String {
        format!("{node}:{}", self.addr.port())
    }

    /// Replaces a pod in the informer.
    pub(super) fn update(&self, pod: Pod) {
        self.pods.indexer().update(Arc::new(pod));
    }

    /// Waits until the open streams are `n` (fails after 5 s).
    pub(super) async fn wait_streams(&self, n: usize) {
        for _ in 0..250 {
            if self.server.open_streams() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "open streams stayed {} (wanted {n})",
            self.server.open_streams()
        );
    }

    /// Stops the server and waits for it (fails after 5 s).
    pub(super) async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.serving)
            .await
            .expect("the server stops")
            .expect("no panic");
    }
}

/// An HTTP answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) head: String,
    pub(super) body: Vec<u8>,
}

impl Answer {
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `method path` with `Host: host`, the connection closed after the answer, read to its end.
pub(super) async fn http(addr: SocketAddr, method: &str, path: &str, host: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("answer read");
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let mut body = raw[end..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Answer { status, head, body }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&raw[..i]).trim(), 16)
            .expect("chunk size");
        if size == 0 {
            break;
        }
        out.extend_from_slice(&raw[i + 2..i + 2 + size]);
        raw = &raw[i + 2 + size + 2..];
    }
    out
}

fn shell_pod() -> Pod {
    PodBuilder::new("web", "busybox")
        .command(&["sh", "-c", "echo one; echo two; echo three; sleep 3600"])
        .build()
}

#[tokio::test]
async fn logs_with_options() {
    let f = Fixture::start(vec![shell_pod()]).await;
    let host = f.host("node-0");
    let get = |q: &str| {
        let (addr, host, q) = (f.addr, host.clone(), q.to_owned());
        async move {
            http(
                addr,
                "GET",
                &format!("/containerLogs/default/web/app{q}"),
                &host,
            )
            .await
        }
    };
    let all = get("").await;
    assert_eq!(all.status, 200, "{}", all.head);
    assert!(all.head.contains("text/plain; charset=utf-8"));
    assert_eq!(all.text(), "one\ntwo\nthree\n");
    assert_eq!(get("?tailLines=2").await.text(), "two\nthree\n");
    assert_eq!(
        get("?tail=1").await.text(),
        "three\n",
        "the old tail parameter"
    );
    assert_eq!(get("?limitBytes=5").await.text(), "one\nt");
    let stamped = get("?timestamps=true&tailLines=1").await.text();
    let ts = crate::logs::format_timestamp(started());
    assert!(
        stamped.starts_with(&ts[..19]) && stamped.ends_with(" three\n"),
        "{stamped}"
    );
    assert_eq!(
        get("?sinceSeconds=10").await.text(),
        "",
        "printed a minute ago"
    );
    f.stop().await;
}

#[tokio::test]
async fn log_errors_are_the_kubelets() {
    let waiting = PodBuilder::new("slow", "nginx")
        .waiting("ContainerCreating")
        .build();
    let f = Fixture::start(vec![shell_pod(), waiting]).await;
    let host = f.host("node-0");
    let missing = http(f.addr, "GET", "/containerLogs/default/nope/app", &host).await;
    assert_eq!(
        (missing.status, missing.text()),
        (404, "pod \"nope\" does not exist".into())
    );
    let container = http(f.addr, "GET", "/containerLogs/default/web/db", &host).await;
    assert_eq!(
        (container.status, container.text()),
        (404, "container \"db\" not found in pod \"web\"".into())
    );
    let invalid = http(
        f.addr,
        "GET",
        "/containerLogs/default/web/app?tailLines=-1",
        &host,
    )
    .await;
    assert_eq!(
        (invalid.status, invalid.text()),
        (422, r#"{"message": "Invalid request."}"#.into())
    );
    let undecodable = http(
        f.addr,
        "GET",
        "/containerLogs/default/web/app?follow=maybe",
        &host,
    )
    .await;
    assert_eq!(undecodable.status, 400);
    let slow = http(f.addr, "GET", "/containerLogs/default/slow/app", &host).await;
    assert_eq!(
        (slow.status, slow.text()),
        (
            400,
            "container \"app\" in pod \"slow\" is waiting to start: ContainerCreating".into()
        )
    );
    let other_node = http(
        f.addr,
        "GET",
        "/containerLogs/default/web/app",
        &f.host("node-1"),
    )
    .await;
    assert_eq!(other_node.status, 404, "node-1's kubelet does not run web");
    let post = http(f.addr, "POST", "/containerLogs/default/web/app", &host).await;
    assert_eq!(
        (post.status, post.text()),
        (405, "Method Not Allowed".into())
    );
    assert!(post.head.contains("allow: GET") || post.head.contains("Allow: GET"));
    f.stop().await;
}

#[tokio::test]
async fn followed_logs_end_with_the_run() {
    let pod = PodBuilder::new("ticker", "busybox")
        .command(&["sh", "-c", "sleep 3600"])
        .annotation("miniplane.dev/log-lines", "tick")
        .annotation("miniplane.dev/log-rate", "20/s")
        .build();
    let f = Fixture::start(vec![pod.clone()]).await;
    let (addr, host) = (f.addr, f.host("node-0"));
    let reading = tokio::spawn(async move {
        http(
            addr,
            "GET",
            "/containerLogs/default/ticker/app?follow=true&tailLines=0",
            &host,
        )
        .await
    });
    f.wait_streams(1).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !reading.is_finished(),
        "a followed log streams while the container runs"
    );
    f.update(terminated(pod));
    let answer = tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .expect("the stream ends with the run")
        .expect("no panic");
    assert_eq!(answer.status, 200);
    let text = answer.text();
    assert!(text.lines().count() >= 3, "new lines streamed: {text:?}");
    assert!(text.lines().all(|l| l == "tick"), "{text:?}");
    f.wait_streams(0).await;
    f.stop().await;
}

#[tokio::test]
async fn pods_healthz_and_unknown_paths() {
    let mut elsewhere = shell_pod();
    elsewhere.metadata.name = Some("other".into());
    if let Some(spec) = elsewhere.spec.as_mut() {
        spec.node_name = Some("node-1".into());
    }
    let f = Fixture::start(vec![shell_pod(), elsewhere]).await;
    let health = http(f.addr, "GET", "/healthz", "127.0.0.1").await;
    assert_eq!((health.status, health.text()), (200, "ok".into()));
    let pods = http(f.addr, "GET", "/pods", &f.host("node-1")).await;
    assert_eq!(pods.status, 200);
    let list: serde_json::Value = serde_json::from_slice(&pods.body).expect("JSON");
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["apiVersion"], "v1");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "other");
    let no_node = http(
        f.addr,
        "GET",
        "/pods",
        &format!("127.0.0.1:{}", f.addr.port()),
    )
    .await;
    assert_eq!(no_node.status, 404, "two nodes: the Host must name one");
    let unknown = http(f.addr, "GET", "/nope", "node-0").await;
    assert_eq!(
        (unknown.status, unknown.text()),
        (404, "404 page not found\n".into())
    );
    let restful = http(f.addr, "GET", "/exec/default/web", "node-0").await;
    assert_eq!(
        (restful.status, restful.text()),
        (404, "404: Page Not Found".into())
    );
    let plain = http(
        f.addr,
        "GET",
        "/exec/default/web/app?output=1&command=ls",
        "node-0",
    )
    .await;
    assert_eq!(
        (plain.status, plain.text()),
        (500, "Upgrade request required\n".into())
    );
    let no_streams = http(f.addr, "GET", "/exec/default/web/app?command=ls", "node-0").await;
    assert_eq!(
        (no_streams.status, no_streams.text()),
        (
            400,
            "you must specify at least 1 of stdin, stdout, stderr".into()
        )
    );
    let no_pod = http(f.addr, "GET", "/exec/default/nope/app?output=1", "node-0").await;
    assert_eq!(
        (no_pod.status, no_pod.text()),
        (404, "pod does not exist".into())
    );
    let no_container = http(f.addr, "GET", "/attach/default/web/db?output=1", "node-0").await;
    assert_eq!(
        (no_container.status, no_container.text()),
        (500, "container not found (\"db\")".into())
    );
    // A node whose kubelet is stopped does not answer for its pods.
    if let Some(n) = crate::pod_workers::lookup(&f.nodes, "node-0") {
        n.set_heartbeat(false);
    }
    let down = http(f.addr, "GET", "/containerLogs/default/web/app", "node-0").await;
    assert_eq!(down.status, 503);
    f.stop().await;
}

#[tokio::test]
async fn summary_and_resource_metrics() {
    let pod = PodBuilder::new("web", "nginx")
        .requests("500m", "100Mi")
        .annotation("miniplane.dev/cpu-usage", "250m")
        .annotation("miniplane.dev/memory-usage.app", "64Mi")
        .build();
    let idle = PodBuilder::new("idle", "busybox")
        .requests("1", "1Gi")
        .build();
    let f = Fixture::start(vec![pod, idle]).await;
    let host = f.host("node-0");
    let answer = http(f.addr, "GET", "/stats/summary", &host).await;
    assert_eq!(answer.status, 200);
    assert!(answer.head.contains("application/json"));
    let s: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    assert_eq!(s["node"]["nodeName"], "node-0");
    let pods = s["pods"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), 2);
    let web = pods
        .iter()
        .find(|p| p["podRef"]["name"] == "web")
        .cloned()
        .unwrap_or_default();
    assert_eq!(web["podRef"]["namespace"], "default");
    assert_eq!(web["podRef"]["uid"], "uid-web");
    let app = &web["containers"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(app["cpu"]["usageNanoCores"], 250_000_000);
    assert_eq!(app["memory"]["workingSetBytes"], 64 * 1024 * 1024);
    let used = app["cpu"]["usageCoreNanoSeconds"]
        .as_u64()
        .unwrap_or_default();
    assert!(
        (14_000_000_000..=16_500_000_000).contains(&used),
        "250m for about a minute: {used}"
    );
    assert_eq!(web["cpu"]["usageNanoCores"], 250_000_000);
    let node_cpu = s["node"]["cpu"]["usageNanoCores"]
        .as_u64()
        .unwrap_or_default();
    let idle_cpu = pods
        .iter()
        .find(|p| p["podRef"]["name"] == "idle")
        .and_then(|p| p["cpu"]["usageNanoCores"].as_u64())
        .unwrap_or_default();
    assert!(
        (270_000_000..=330_000_000).contains(&idle_cpu),
        "30% of 1 CPU within 10%: {idle_cpu}"
    );
    assert_eq!(
        node_cpu,
        250_000_000 + idle_cpu + crate::usage::SYSTEM_CPU_NANOCORES
    );

    let metrics = http(f.addr, "GET", "/metrics/resource", &host).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.head.contains("text/plain; version=0.0.4"));
    let text = metrics.text();
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(
        families,
        [
            "container_cpu_usage_seconds_total",
            "container_memory_working_set_bytes",
            "container_start_time_seconds",
            "node_cpu_usage_seconds_total",
            "node_memory_working_set_bytes",
            "pod_cpu_usage_seconds_total",
            "pod_memory_working_set_bytes",
            "resource_scrape_error",
        ]
    );
    assert!(text.contains(
        "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds\n# TYPE container_cpu_usage_seconds_total counter\ncontainer_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"idle\"} "
    ));
    let line = text
        .lines()
        .find(|l| l.starts_with("container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} "))
        .expect("web's memory");
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(fields[1], "6.7108864e+07");
    assert!(
        fields[2]
            .parse::<i64>()
            .is_ok_and(|ms| ms > 1_600_000_000_000),
        "a timestamp in ms"
    );
    assert!(text.contains("\npod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} "));
    assert!(text.ends_with("# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n"));
    f.stop().await;
}
