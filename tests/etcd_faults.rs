//! End to end: the API server on a real etcd cluster (Debian's `etcd-server`) while things
//! fail under it, as kube-apiserver's etcd3 storage (`storage/etcd3/store.go`, `watcher.go`)
//! and the cacher in front of it must take it:
//!
//! - etcd members killed (SIGKILL) and restarted mid-rollout, then the leader killed (2 of 3
//!   keep quorum): the Deployment's rollout converges; every write the API server
//!   acknowledged is there afterwards with the acknowledged content; a watch open across the
//!   faults goes on, in order and without gaps (etcd's watch is reopened from the next
//!   revision, as clientv3's watcher does, so the API server's watch never ends).
//! - an API server killed (SIGKILL) while writes go through it: a second API server on the
//!   same etcd serves every write the first acknowledged, its watch goes on, and the first,
//!   restarted, serves the same objects and the same history.
//!
//! A write whose outcome the client does not know (a 500 for a request in flight on the
//! killed member's connection, the API server died) may or may not be there: the checks accept either (and the
//! clients retry as client-go's users would, here by writing on). A ConfigMap's acknowledged
//! content is the `seq` in its data; every write has its own `seq`.
//!
//! Simplified: the writers are kube-rs clients with no retries of their own, several
//! ConfigMaps each, one request at a time each; the API servers of the second test share a
//! one-member etcd (the etcd faults are the first test's). The first test's rollouts (one pod
//! at a time, `minReadySeconds: 1`) are meant to be under way when the follower comes back and
//! the leader dies; that timing is logged, not asserted.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent, WatchParams,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support;
use crate::support::etcd_cluster;

/// The label every ConfigMap of these tests carries; the watches and lists select it.
const SELECTOR: &str = "test=etcd-faults";

/// ConfigMaps each writer cycles through.
const KEYS: u64 = 5;

/// The most writes one writer makes (its loop is bounded in count as well as in time).
const MAX_WRITES: u64 = 3000;

/// One write a writer made and what came of it.
#[derive(Debug, Clone)]
struct Write {
    name: String,
    seq: u64,
    /// The acknowledged resourceVersion, or what the client got instead.
    outcome: Result<u64, String>,
}

/// The writes of all writers, each writer's in the order it made them.
type Log = Arc<Mutex<Vec<Write>>>;

fn configmap(name: &str, seq: u64) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"test": "etcd-faults"}},
        "data": {"seq": seq.to_string()},
    }))
    .unwrap()
}

fn rv_of(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("a numeric resourceVersion")
}

fn seq_of(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get("seq"))
        .and_then(|s| s.parse().ok())
        .expect("data.seq")
}

/// Creates (or, once created, merge-patches) ConfigMaps `{prefix}-0`..`{prefix}-{KEYS-1}`
/// round robin through `api`, one request at a time, each with the next `seq` from `first`,
/// until `stop`; logs every write.
async fn write_stream(
    api: Api<ConfigMap>,
    prefix: &'static str,
    first: u64,
    stop: CancellationToken,
    log: Log,
) {
    let mut created = HashSet::new();
    for i in 0..MAX_WRITES {
        if stop.is_cancelled() {
            return;
        }
        let (name, seq) = (format!("{prefix}-{}", i % KEYS), first + i);
        let outcome = if created.contains(&name) {
            let patch = Patch::Merge(json!({"data": {"seq": seq.to_string()}}));
            match api.patch(&name, &PatchParams::default(), &patch).await {
                Ok(cm) => Ok(rv_of(&cm)),
                Err(e) => Err(e.to_string()),
            }
        } else {
            match api
                .create(&PostParams::default(), &configmap(&name, seq))
                .await
            {
                Ok(cm) => {
                    created.insert(name.clone());
                    Ok(rv_of(&cm))
                }
                Err(e) => {
                    // AlreadyExists: an earlier create whose outcome was unknown was applied.
                    if matches!(&e, kube::Error::Api(s) if s.code == 409) {
                        created.insert(name.clone());
                    }
                    Err(e.to_string())
                }
            }
        };
        let failed = outcome.is_err();
        log.lock().unwrap().push(Write { name, seq, outcome });
        if failed {
            // As a client backs off before it retries.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Writers running on their own tasks, stopped together.
struct Writers {
    log: Log,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// One writer per prefix, all through `api`.
    fn start(api: &Api<ConfigMap>, prefixes: &[&'static str]) -> Writers {
        let (log, stop) = (Log::default(), CancellationToken::new());
        let tasks = prefixes
            .iter()
            .zip(0u64..)
            .map(|(prefix, i)| {
                let task = write_stream(
                    api.clone(),
                    prefix,
                    i * 1_000_000,
                    stop.clone(),
                    log.clone(),
                );
                tokio::spawn(task)
            })
            .collect();
        Writers { log, stop, tasks }
    }

    fn acked(&self) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.outcome.is_ok())
            .count()
    }

    /// Waits until `more` further writes were acknowledged.
    async fn until_acked(&self, more: usize, what: &str) {
        let target = self.acked() + more;
        support::until(
            &format!("{more} more acknowledged writes {what}"),
            || async { (self.acked() >= target).then_some(()) },
        )
        .await;
    }

    /// Stops the writers; returns their log.
    async fn stop(self) -> Vec<Write> {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        self.log.lock().unwrap().clone()
    }
}

/// The errors the clients saw, each with how often.
fn error_summary(log: &[Write]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for w in log {
        if let Err(e) = &w.outcome {
            *out.entry(e.clone()).or_insert(0) += 1;
        }
    }
    out
}

/// Checks `objects` (name → (resourceVersion, seq)) against the writes: each ConfigMap holds
/// its last acknowledged write, or a write after it whose outcome the client did not learn,
/// at a resourceVersion no older than the acknowledged one; a ConfigMap without an
/// acknowledged write holds one of its unacknowledged writes, or is absent.
fn check_acknowledged(log: &[Write], objects: &BTreeMap<String, (u64, u64)>) {
    let names: HashSet<&str> = log.iter().map(|w| w.name.as_str()).collect();
    for name in names {
        let writes: Vec<&Write> = log.iter().filter(|w| w.name == name).collect();
        let last_ack = writes.iter().rposition(|w| w.outcome.is_ok());
        let after = last_ack.map_or(0, |i| i + 1);
        let unknown: Vec<u64> = writes[after..].iter().map(|w| w.seq).collect();
        match (objects.get(name), last_ack) {
            (None, None) => {}
            (None, Some(i)) => panic!("{name}: acknowledged write {:?} lost", writes[i]),
            (Some((_, seq)), None) => assert!(
                unknown.contains(seq),
                "{name} holds seq {seq}, never written to it"
            ),
            (Some((rv, seq)), Some(i)) => {
                let acked = writes[i];
                assert!(
                    *seq == acked.seq || unknown.contains(seq),
                    "{name} holds seq {seq}: not its last acknowledged write {acked:?} nor an \
                     unacknowledged one after it {unknown:?}"
                );
                assert!(
                    Ok(*rv) >= acked.outcome,
                    "{name} at resourceVersion {rv}, older than its acknowledged {acked:?}"
                );
            }
        }
    }
}

/// One event a watch delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    kind: &'static str,
    name: String,
    rv: u64,
    seq: u64,
}

/// How a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WatchEnd {
    /// Still open when the test stopped reading it.
    Open,
    /// An in-stream `ERROR` event with a 410 Expired Status.
    Expired(String),
    /// Any other `ERROR` event.
    Error(String),
    /// The server closed the stream.
    Closed,
    /// The connection failed.
    Failed(String),
}

/// A watch of the test's ConfigMaps read on its own task.
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<WatchEnd>,
}

impl Recorder {
    /// Watches through `api` from resourceVersion `from`.
    async fn start(api: &Api<ConfigMap>, from: &str) -> Recorder {
        let params = WatchParams::default().labels(SELECTOR).timeout(290);
        let mut events = api.watch(&params, from).await.unwrap().boxed();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = CancellationToken::new();
        let (into, until) = (seen.clone(), stop.clone());
        let task = tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = until.cancelled() => return WatchEnd::Open,
                    e = events.try_next() => e,
                };
                let (kind, cm) = match event {
                    Ok(Some(WatchEvent::Added(cm))) => ("ADDED", cm),
                    Ok(Some(WatchEvent::Modified(cm))) => ("MODIFIED", cm),
                    Ok(Some(WatchEvent::Deleted(cm))) => ("DELETED", cm),
                    Ok(Some(WatchEvent::Bookmark(_))) => continue,
                    Ok(Some(WatchEvent::Error(s))) if s.code == 410 => {
                        return WatchEnd::Expired(s.message);
                    }
                    Ok(Some(WatchEvent::Error(s))) => return WatchEnd::Error(format!("{s:?}")),
                    Ok(None) => return WatchEnd::Closed,
                    Err(e) => return WatchEnd::Failed(e.to_string()),
                };
                let name = cm.metadata.name.clone().unwrap_or_default();
                let (rv, seq) = (rv_of(&cm), seq_of(&cm));
                into.lock().unwrap().push(Seen {
                    kind,
                    name,
                    rv,
                    seq,
                });
            }
        });
        Recorder { seen, stop, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until the watch delivered resourceVersion `rv` (or one after it).
    async fn until_seen(&self, rv: u64, what: &str) {
        support::until(
            &format!("the watch {what} delivering resourceVersion {rv}"),
            || async {
                self.seen
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|s| s.rv >= rv)
                    .then_some(())
            },
        )
        .await;
    }

    /// Stops reading; how the watch ended, and everything it delivered.
    async fn stop(self) -> (WatchEnd, Vec<Seen>) {
        self.stop.cancel();
        let end = self.task.await.unwrap();
        let seen = self.seen.lock().unwrap().clone();
        (end, seen)
    }
}

/// Checks what a watch delivered against the writes: every event in order (resourceVersions
/// rising), every acknowledged write among them with its content (no gap), nothing that was
/// never written.
fn check_watch(seen: &[Seen], log: &[Write]) {
    for pair in seen.windows(2) {
        assert!(pair[0].rv < pair[1].rv, "out of order: {pair:?}");
    }
    let delivered: HashSet<(&str, u64, u64)> = seen
        .iter()
        .map(|s| (s.name.as_str(), s.rv, s.seq))
        .collect();
    for w in log {
        if let Ok(rv) = w.outcome {
            assert!(
                delivered.contains(&(w.name.as_str(), rv, w.seq)),
                "the watch missed acknowledged write {w:?}"
            );
        }
    }
    let written: HashSet<(&str, u64)> = log.iter().map(|w| (w.name.as_str(), w.seq)).collect();
    for s in seen {
        assert!(
            written.contains(&(s.name.as_str(), s.seq)),
            "never written: {s:?}"
        );
    }
}

/// The state a watch's events add up to, up to resourceVersion `upto`.
fn fold(seen: &[Seen], upto: u64) -> BTreeMap<String, (u64, u64)> {
    let mut state = BTreeMap::new();
    for s in seen.iter().filter(|s| s.rv <= upto) {
        if s.kind == "DELETED" {
            state.remove(&s.name);
        } else {
            state.insert(s.name.clone(), (s.rv, s.seq));
        }
    }
    state
}

/// The test's ConfigMaps (name → (resourceVersion, seq)) and the list's resourceVersion; at
/// exactly `at` when given.
async fn list(api: &Api<ConfigMap>, at: Option<u64>) -> (BTreeMap<String, (u64, u64)>, u64) {
    let mut params = ListParams::default().labels(SELECTOR);
    if let Some(rv) = at {
        params = params.at(&rv.to_string()).matching(VersionMatch::Exact);
    }
    let listed = api.list(&params).await.unwrap();
    let objects = listed
        .items
        .iter()
        .map(|cm| (cm.metadata.name.clone().unwrap(), (rv_of(cm), seq_of(cm))))
        .collect();
    let rv = listed.metadata.resource_version.unwrap().parse().unwrap();
    (objects, rv)
}

/// Writes a last ConfigMap through `api`, retrying until it is acknowledged (the writers are
/// stopped: nothing written after it); logs it and returns its resourceVersion.
async fn marker(api: &Api<ConfigMap>, log: &mut Vec<Write>) -> u64 {
    let seq = 999_999_999;
    let cm = configmap("marker", seq);
    let rv = support::until("the marker written", || async {
        api.create(&PostParams::default(), &cm)
            .await
            .ok()
            .map(|c| rv_of(&c))
    })
    .await;
    log.push(Write {
        name: "marker".into(),
        seq,
        outcome: Ok(rv),
    });
    rv
}

fn web(replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            // One pod at a time, each available a second after it is ready: the rollouts
            // last through the faults.
            "minReadySeconds": 1,
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]},
            },
        },
    }))
    .unwrap()
}

/// Waits until the Deployment's latest spec (`replicas` of `image`) is rolled out.
async fn rolled_out(deployments: &Api<Deployment>, replicas: i32, image: &str) {
    support::until(
        &format!("web rolled out: {replicas} of {image}"),
        || async {
            let d = deployments.get("web").await.ok()?;
            let spec_image = d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
                .image
                .clone();
            let status = d.status.clone().unwrap_or_default();
            (spec_image.as_deref() == Some(image)
                && d.metadata.generation == status.observed_generation
                && status.updated_replicas == Some(replicas)
                && status.available_replicas == Some(replicas)
                && status.replicas == Some(replicas))
            .then_some(())
        },
    )
    .await;
}

/// The Deployment's status as (observedGeneration, updated, available) replicas, for the log.
async fn status(deployments: &Api<Deployment>) -> Option<(i64, i32, i32)> {
    let s = deployments.get("web").await.ok()?.status?;
    Some((
        s.observed_generation?,
        s.updated_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    ))
}

/// Waits until the Deployment controller has taken its latest spec and created a pod of it.
async fn rolling(deployments: &Api<Deployment>) {
    support::until("web's new template rolling out", || async {
        let d = deployments.get("web").await.ok()?;
        let status = d.status?;
        (d.metadata.generation == status.observed_generation
            && status.updated_replicas.unwrap_or(0) >= 1)
            .then_some(())
    })
    .await;
}

/// Merge-patches the Deployment, again until the API server acknowledges it (a merge patch
/// may be sent again whatever became of the last try).
async fn patch_web(deployments: &Api<Deployment>, patch: serde_json::Value) {
    support::until("the Deployment patched", || async {
        let patch = Patch::Merge(patch.clone());
        deployments
            .patch("web", &PatchParams::default(), &patch)
            .await
            .ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_killed_and_restarted_mid_rollout_lose_no_acknowledged_write() {
    let mut etcd = etcd_cluster::EtcdCluster::start(3).await;
    let cluster = miniplane::Cluster::builder()
        .nodes(2)
        .etcd(apiserver::EtcdStorage::new(etcd.endpoints()))
        .start()
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    deployments
        .create(&PostParams::default(), &web(2, "nginx:1.27"))
        .await
        .unwrap();
    rolled_out(&deployments, 2, "nginx:1.27").await;

    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let (_, from) = list(&configmaps, None).await;
    let watch = Recorder::start(&configmaps, &from.to_string()).await;
    let writers = Writers::start(&configmaps, &["a", "b"]);
    writers.until_acked(20, "before the faults").await;

    // A follower down: the Deployment scaled, then a new template rolling out.
    let follower = (etcd.leader().await.expect("a leader") + 1) % 3;
    etcd.kill(follower);
    patch_web(&deployments, json!({"spec": {"replicas": 3}})).await;
    writers.until_acked(20, "with a follower down").await;
    let template = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}});
    patch_web(&deployments, template).await;
    rolling(&deployments).await;
    writers.until_acked(20, "with a follower down").await;
    // Back with the data it had, catching up; then the leader killed: the other two elect a
    // new one and go on.
    etcd.restart(follower).await;
    writers
        .until_acked(20, "after the follower's restart")
        .await;
    let leader = etcd.leader().await.expect("a leader");
    etcd.kill(leader);
    eprintln!(
        "rollout when the leader was killed: {:?}",
        status(&deployments).await
    );
    writers.until_acked(20, "after the leader was killed").await;
    let update = json!({"spec": {"replicas": 4, "template": {"spec": {
        "containers": [{"name": "nginx", "image": "nginx:1.29"}]}}}});
    patch_web(&deployments, update).await;
    rolled_out(&deployments, 4, "nginx:1.29").await;
    writers.until_acked(20, "on two members").await;

    let mut log = writers.stop().await;
    eprintln!("{} writes; errors: {:#?}", log.len(), error_summary(&log));
    // Everything acknowledged is there with its content.
    let last = marker(&configmaps, &mut log).await;
    let (objects, _) = list(&configmaps, None).await;
    check_acknowledged(&log, &objects);
    // The watch went on across the faults, in order and without gaps.
    watch.until_seen(last, "across the faults").await;
    let (end, seen) = watch.stop().await;
    assert_eq!(end, WatchEnd::Open, "the watch ended");
    check_watch(&seen, &log);
    let (at_last, _) = list(&configmaps, Some(last)).await;
    assert_eq!(fold(&seen, last), at_last, "the watch adds up to the list");

    cluster.stop().unwrap();
    drop(etcd);
}

/// Sends SIGKILL to an API server process.
fn kill(server: &mut support::Server) {
    let pid = server.pid().to_string();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    support::eventually("the killed API server gone", support::DEADLINE, || {
        (!server.is_running()).then_some(())
    });
}

fn client_of(server: &support::Server) -> Api<ConfigMap> {
    let config = kube::Config::new(server.url().parse().unwrap());
    Api::namespaced(kube::Client::try_from(config).unwrap(), "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_killed_mid_stream_loses_no_acknowledged_write() {
    let etcd = etcd_cluster::EtcdCluster::start(1).await;
    let flag = format!("--etcd-servers={}", etcd.endpoints().join(","));
    let mut first = support::Server::start_with(&[&flag]);
    let second = support::Server::start_with(&[&flag]);
    let (through_first, through_second) = (client_of(&first), client_of(&second));

    let (_, from) = list(&through_second, None).await;
    let watch = Recorder::start(&through_second, &from.to_string()).await;
    let writers = Writers::start(&through_first, &["a", "b", "c"]);
    writers
        .until_acked(60, "through the first API server")
        .await;
    kill(&mut first);
    // Each writer learns that its server is gone.
    support::until("every writer failing", || async {
        let log = writers.log.lock().unwrap();
        ["a-", "b-", "c-"]
            .iter()
            .all(|p| {
                log.iter()
                    .rev()
                    .take_while(|w| w.outcome.is_err())
                    .any(|w| w.name.starts_with(p))
            })
            .then_some(())
    })
    .await;
    let mut log = writers.stop().await;
    eprintln!("{} writes: {:#?}", log.len(), error_summary(&log));

    // Everything the killed server acknowledged, through the other one.
    let (objects, _) = list(&through_second, None).await;
    check_acknowledged(&log, &objects);
    // The other's watch goes on: it saw every acknowledged write, and sees new ones.
    let last = marker(&through_second, &mut log).await;
    watch.until_seen(last, "of the second API server").await;
    check_watch(&watch.seen(), &log);
    let (at_last, _) = list(&through_second, Some(last)).await;
    assert_eq!(fold(&watch.seen(), last), at_last);

    // Restarted, the first serves the same objects and the same history.
    first.restart();
    let through_first = client_of(&first);
    let (again, _) = list(&through_first, Some(last)).await;
    assert_eq!(again, at_last);
    let replay = Recorder::start(&through_first, &from.to_string()).await;
    replay.until_seen(last, "of the restarted API server").await;
    let (end, replayed) = replay.stop().await;
    assert_eq!(end, WatchEnd::Open);
    let (end, seen) = watch.stop().await;
    assert_eq!(end, WatchEnd::Open, "the second API server's watch ended");
    assert_eq!(replayed, seen);
    drop((first, second));
    drop(etcd);
}
