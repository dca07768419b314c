//! End to end: random SIGKILLs under a mixed workload, then the checks etcd's robustness
//! tests and Jepsen make (etcd `tests/robustness`): no acknowledged write lost, revisions
//! monotonic, every watch ordered with no gap and no duplicate (or an explicit 410), and every
//! Deployment converged, never over replicas + maxSurge.
//!
//! ```text
//!   apiserver (fixed port) ◀── controller-manager, scheduler, kubelet (3 nodes): processes
//!        ▲
//!        ├── 2 writers: merge patches of 6 ConfigMaps each, value = a counter per key
//!        ├── 1 watcher of those ConfigMaps, resuming from its last resourceVersion
//!        ├── 1 watcher of the ReplicaSets (kube-rs' watcher, relisting after a 410)
//!        └── 2 Deployments (6 replicas, maxSurge 1, maxUnavailable 0), a new image every 2 s
//!   killer: every ~1.5 s SIGKILL one process at random and start it again at once
//! ```
//!
//! CI runs [`DEFAULT_KILLS`] kills; `MINIPLANE_CHAOS_KILLS=200` runs a longer one, and
//! `MINIPLANE_CHAOS_SEED` replays a run (the seed is printed). The figures of a run (kills,
//! writes checked, events checked) are printed at its end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;

/// Kills in a CI run.
const DEFAULT_KILLS: usize = 8;
/// ConfigMaps each writer owns.
const KEYS_PER_WRITER: usize = 6;
const WRITERS: usize = 2;
const DEPLOYMENTS: [&str; 2] = ["alpha", "beta"];
const REPLICAS: i32 = 6;
const MAX_SURGE: i32 = 1;

/// One `miniplane` process the killer may kill: how to start it and how to tell it is up.
struct Proc {
    name: &'static str,
    args: Vec<String>,
    ready: &'static str,
    log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    fn new(name: &'static str, args: Vec<String>, ready: &'static str, dir: &Path) -> Proc {
        Proc {
            name,
            args,
            ready,
            log: dir.join(format!("{name}.log")),
            child: None,
        }
    }

    /// Starts the process and waits (60 s at most) for its ready line.
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .args(&self.args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn miniplane");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let ready = self.ready;
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && line.starts_with(ready) {
                    let _ = tx.send(());
                    sent = true;
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "miniplane {} did not print {:?}:\n{}",
                self.name,
                self.ready,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        self.child = Some(child);
    }

    /// SIGKILL, and reap it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free port on 127.0.0.1 (the API server keeps it across restarts, so that every client
/// and component reconnects to the same address).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// xorshift64*: the killer's choices, replayable from the printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// What one writer knows of one key.
#[derive(Debug, Default, Clone)]
struct KeyState {
    /// The last acknowledged value and the resourceVersion the server answered with it.
    acked: Option<(u64, u64)>,
    /// Values written after it whose answer never came (applied or not: unknown).
    in_doubt: Vec<u64>,
}

/// Everything the workload records for the checks.
#[derive(Debug, Default)]
struct Record {
    keys: BTreeMap<String, KeyState>,
    /// Every acknowledged write: (key, resourceVersion), in the order each writer made them.
    acked_writes: Vec<(usize, String, u64)>,
    /// Failed writes (connection refused or cut while a process was down).
    failed_writes: usize,
    /// ConfigMap events the watcher saw: key → resourceVersions, in arrival order.
    seen: BTreeMap<String, Vec<u64>>,
    /// resourceVersions below which the watcher lost events with an explicit 410.
    expired_before: Vec<u64>,
    /// The watcher's first resourceVersion: writes at or before it are not its to see.
    watch_from: u64,
    watch_last: u64,
    /// The largest sum of one Deployment's ReplicaSets' desired replicas seen.
    worst_surge: BTreeMap<String, (i32, String)>,
    /// When a write raised the pods a Deployment's ReplicaSets want above replicas + maxSurge:
    /// (when, app, sum, state).
    over_surge: Vec<(Instant, String, i32, String)>,
    violations: Vec<String>,
}

type Shared = Arc<Mutex<Record>>;

fn lock(r: &Shared) -> std::sync::MutexGuard<'_, Record> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

fn rv_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn writer(id: usize, client: kube::Client, record: Shared, stop: Arc<Mutex<bool>>) {
    let api = Api::<ConfigMap>::default_namespaced(client);
    let mut counter = 0u64;
    let mut last_rv = 0u64;
    while !*stop.lock().unwrap() {
        counter += 1;
        let key = format!("w{id}-k{}", counter as usize % KEYS_PER_WRITER);
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": key, "labels": {"chaos": "kv"}},
            "data": {"v": counter.to_string()}
        }))
        .unwrap();
        let apply = PatchParams::apply("chaos-writer").force();
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            api.patch(&key, &apply, &Patch::Apply(&cm)),
        )
        .await;
        let failed = {
            let mut r = lock(&record);
            match result {
                Ok(Ok(written)) => {
                    let rv = rv_of(&written.metadata);
                    if rv <= last_rv {
                        r.violations.push(format!(
                            "writer {id}: resourceVersion {rv} after {last_rv} (not monotonic)"
                        ));
                    }
                    last_rv = rv;
                    let state = r.keys.entry(key.clone()).or_default();
                    state.acked = Some((counter, rv));
                    state.in_doubt.clear();
                    r.acked_writes.push((id, key, rv));
                    false
                }
                _ => {
                    r.failed_writes += 1;
                    r.keys.entry(key).or_default().in_doubt.push(counter);
                    true
                }
            }
        };
        if failed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Watches the ConfigMaps from a list's resourceVersion, resuming after every cut from the
/// last one it saw; checks each event's resourceVersion is above the previous one.
async fn kv_watcher(client: kube::Client, record: Shared, stop: Arc<Mutex<bool>>) {
    let api = Api::<ConfigMap>::default_namespaced(client);
    let mut last = loop {
        match api.list(&ListParams::default().labels("chaos=kv")).await {
            Ok(list) => {
                break list
                    .metadata
                    .resource_version
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    lock(&record).watch_from = last;
    lock(&record).watch_last = last;
    while !*stop.lock().unwrap() {
        let params = WatchParams::default().labels("chaos=kv").timeout(30);
        let Ok(stream) = api.watch(&params, &last.to_string()).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut stream = Box::pin(stream);
        loop {
            let next = tokio::time::timeout(Duration::from_millis(500), stream.try_next()).await;
            if *stop.lock().unwrap() {
                return;
            }
            let event = match next {
                Err(_) => continue,
                Ok(Ok(Some(e))) => e,
                Ok(_) => break,
            };
            let cm = match event {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) | WatchEvent::Deleted(cm) => cm,
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(status) if status.code == 410 => {
                    // Events are gone: say so, and start again from a fresh list.
                    let fresh = loop {
                        match api.list(&ListParams::default().labels("chaos=kv")).await {
                            Ok(list) => {
                                break list.metadata.resource_version.unwrap().parse().unwrap();
                            }
                            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                        }
                    };
                    let mut r = lock(&record);
                    r.expired_before.push(fresh);
                    r.watch_last = fresh;
                    last = fresh;
                    break;
                }
                WatchEvent::Error(status) => {
                    lock(&record)
                        .violations
                        .push(format!("watch ERROR event: {status:?}"));
                    break;
                }
            };
            let rv = rv_of(&cm.metadata);
            let mut r = lock(&record);
            if rv <= last {
                r.violations.push(format!(
                    "watch: resourceVersion {rv} after {last} (out of order or duplicate)"
                ));
            }
            last = rv;
            r.watch_last = rv;
            r.seen
                .entry(cm.metadata.name.clone().unwrap_or_default())
                .or_default()
                .push(rv);
        }
    }
}

/// Follows every ReplicaSet through kube-rs' watcher (which relists after a 410 or a cut) and
/// records, per Deployment, the largest sum of their desired replicas.
async fn rs_watcher(client: kube::Client, record: Shared, stop: Arc<Mutex<bool>>) {
    let api = Api::<ReplicaSet>::default_namespaced(client);
    let mut known: BTreeMap<String, (String, i32)> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, (String, i32)>> = None;
    let mut stream = Box::pin(watcher(api, watcher::Config::default()));
    let mut sums: BTreeMap<&str, i32> = BTreeMap::new();
    while !*stop.lock().unwrap() {
        let Ok(next) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await else {
            continue;
        };
        let entry = |rs: &ReplicaSet| {
            let app = rs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .cloned()
                .unwrap_or_default();
            let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            (rs.metadata.name.clone().unwrap_or_default(), (app, want))
        };
        match next {
            Some(Ok(watcher::Event::Init)) => listing = Some(BTreeMap::new()),
            Some(Ok(watcher::Event::InitApply(rs))) => {
                let (k, v) = entry(&rs);
                listing.get_or_insert_with(BTreeMap::new).insert(k, v);
            }
            Some(Ok(watcher::Event::InitDone)) => known = listing.take().unwrap_or_default(),
            Some(Ok(watcher::Event::Apply(rs))) => {
                let (k, v) = entry(&rs);
                known.insert(k, v);
            }
            Some(Ok(watcher::Event::Delete(rs))) => {
                known.remove(&entry(&rs).0);
            }
            Some(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            None => return,
        }
        if listing.is_some() {
            continue;
        }
        let mut r = lock(&record);
        for app in DEPLOYMENTS {
            let sum: i32 = known
                .values()
                .filter(|(a, _)| a == app)
                .map(|(_, n)| n)
                .sum();
            let worst = r.worst_surge.entry(app.to_string()).or_default();
            if sum > worst.0 {
                *worst = (sum, format!("{known:?}"));
            }
            let before = sums.insert(app, sum).unwrap_or(0);
            if sum > REPLICAS + MAX_SURGE && sum > before {
                let state = format!("{known:?}");
                r.over_surge
                    .push((Instant::now(), app.to_string(), sum, state));
            }
        }
    }
}

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": MAX_SURGE, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name},
                             "annotations": {"miniplane.dev/ready-after": "200ms"}},
                "spec": {"containers": [{"name": "app", "image": image}]}
            }
        }
    }))
    .unwrap()
}

/// Sets a new image on each Deployment every 2 s (retrying while the server is down);
/// returns the last image each got.
async fn rollouts(client: kube::Client, stop: Arc<Mutex<bool>>) -> BTreeMap<String, String> {
    let api = Api::<Deployment>::default_namespaced(client);
    let mut images = BTreeMap::new();
    let mut version = 0;
    while !*stop.lock().unwrap() {
        version += 1;
        for name in DEPLOYMENTS {
            let image = format!("app:{version}");
            let patch = serde_json::json!({"spec": {"template": {"spec": {
                "containers": [{"name": "app", "image": image}]}}}});
            if api
                .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .is_ok()
            {
                images.insert(name.to_string(), image);
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    images
}

async fn retry<T, F: std::future::Future<Output = Result<T, kube::Error>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if start.elapsed() > Duration::from_secs(60) => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sigkills_lose_no_write_and_break_no_watch_or_rollout() {
    let kills: usize = std::env::var("MINIPLANE_CHAOS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KILLS);
    let seed: u64 = std::env::var("MINIPLANE_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    eprintln!(
        "chaos: seed {seed} (MINIPLANE_CHAOS_SEED={seed} replays the kill order), {kills} kills"
    );
    let mut rng = Rng(seed);

    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    let data = dir.path().join("data");
    let listen = url.trim_start_matches("http://").to_string();
    let mut procs = vec![Proc::new(
        "apiserver",
        vec![
            "apiserver".into(),
            "--data-dir".into(),
            data.display().to_string(),
            "--listen".into(),
            listen,
            "--no-fsync".into(),
        ],
        "miniplane apiserver listening on http://",
        dir.path(),
    )];
    let component = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--master".to_string(), url.clone()]);
        v
    };
    procs.push(Proc::new(
        "controller-manager",
        component(&[
            "controller-manager",
            "--listen",
            "127.0.0.1:0",
            "--leader-elect=false",
        ]),
        "miniplane controller-manager started",
        dir.path(),
    ));
    procs.push(Proc::new(
        "scheduler",
        component(&[
            "scheduler",
            "--listen",
            "127.0.0.1:0",
            "--leader-elect=false",
        ]),
        "miniplane scheduler started",
        dir.path(),
    ));
    procs.push(Proc::new(
        "kubelet",
        component(&["kubelet", "--nodes", "3", "--listen", "127.0.0.1:0"]),
        "miniplane kubelet:",
        dir.path(),
    ));
    for p in &mut procs {
        p.start();
    }

    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let deployments = Api::<Deployment>::default_namespaced(client.clone());
    for name in DEPLOYMENTS {
        deployments
            .create(&PostParams::default(), &deployment(name, "app:0"))
            .await
            .unwrap();
    }

    let record: Shared = Arc::default();
    let stop = Arc::new(Mutex::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for id in 0..WRITERS {
        tasks.spawn(writer(id, client.clone(), record.clone(), stop.clone()));
    }
    tasks.spawn(kv_watcher(client.clone(), record.clone(), stop.clone()));
    tasks.spawn(rs_watcher(client.clone(), record.clone(), stop.clone()));
    let rollout = tokio::spawn(rollouts(client.clone(), stop.clone()));

    let mut killed: BTreeMap<&str, usize> = BTreeMap::new();
    // From each kill of the API server or the controller-manager to 5 s after the restarted
    // process is ready (see the check of replicas + maxSurge).
    let mut catch_up: Vec<(Instant, Instant)> = Vec::new();
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_millis(1000 + rng.below(1000) as u64)).await;
        let victim = &mut procs[rng.below(4)];
        let killed_at = Instant::now();
        victim.kill();
        *killed.entry(victim.name).or_default() += 1;
        // Start it again off the async threads: it waits for the ready line.
        let mut p = std::mem::replace(victim, Proc::new(victim.name, Vec::new(), "", dir.path()));
        p = tokio::task::spawn_blocking(move || {
            p.start();
            p
        })
        .await
        .unwrap();
        if p.name == "controller-manager" || p.name == "apiserver" {
            catch_up.push((killed_at, Instant::now() + Duration::from_secs(5)));
        }
        *victim = p;
    }
    *stop.lock().unwrap() = true;
    let images = rollout.await.unwrap();
    while tasks.join_next().await.is_some() {}

    // Convergence: every Deployment rolled out to its last image, nothing else alive.
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let start = Instant::now();
    for name in DEPLOYMENTS {
        let image = images.get(name).cloned().unwrap_or_else(|| "app:0".into());
        let selector = ListParams::default().labels(&format!("app={name}"));
        loop {
            let d = retry("get deployment", || deployments.get(name)).await;
            let s = d.status.clone().unwrap_or_default();
            let list = retry("list pods", || pods.list(&selector)).await;
            let live: Vec<&Pod> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let on_image = live.iter().all(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.containers[0].image.as_deref())
                    == Some(image.as_str())
            });
            let done = s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(REPLICAS)
                && s.available_replicas == Some(REPLICAS)
                && s.replicas == Some(REPLICAS)
                && live.len() == REPLICAS as usize
                && on_image;
            if done {
                break;
            }
            let last_seen = format!(
                "{name}: status {s:?}, generation {:?}, {} live pods, all {image}: {on_image}",
                d.metadata.generation,
                live.len()
            );
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "not converged after the kills ({killed:?}, seed {seed}): {last_seen}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // No acknowledged write lost: each key holds its last acknowledged value, or a later one
    // whose answer was lost.
    let configmaps = Api::<ConfigMap>::default_namespaced(client.clone());
    let record = Arc::try_unwrap(record).unwrap().into_inner().unwrap();
    let mut violations = record.violations.clone();
    for (key, state) in &record.keys {
        let Some((acked, _)) = state.acked else {
            continue;
        };
        let cm = retry("get configmap", || configmaps.get(key)).await;
        let value: u64 = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if value != acked && !state.in_doubt.contains(&value) {
            violations.push(format!(
                "{key}: holds {value}, the last acknowledged write was {acked} (in doubt: {:?})",
                state.in_doubt
            ));
        }
    }
    // Every acknowledged write after the watch began reached the watcher, unless a 410 said
    // that events were gone.
    let mut checked_events = 0usize;
    for (_, key, rv) in &record.acked_writes {
        if *rv <= record.watch_from || *rv > record.watch_last {
            continue;
        }
        if record.expired_before.iter().any(|e| rv <= e) {
            continue;
        }
        checked_events += 1;
        if !record.seen.get(key).is_some_and(|s| s.contains(rv)) {
            violations.push(format!(
                "watch gap: {key} at resourceVersion {rv} never seen"
            ));
        }
    }
    // No write raises the pods a Deployment's ReplicaSets want above replicas + maxSurge,
    // except while the controller-manager catches up after a kill of it or of the API server:
    // the Deployment controller sizes ReplicaSets from the sum in its cache plus its own
    // acknowledged writes (`controllers/src/deployment/recent_writes.rs`), and a write whose
    // answer was lost (the API server died after committing it, or the controller-manager
    // died after sending it) counts in neither until the informer delivers it. Such writes
    // are counted and printed, not failed; the excess they leave lasts until the rollout
    // scales old ReplicaSets down.
    let mut while_catching_up = 0usize;
    for (at, app, sum, state) in &record.over_surge {
        if catch_up.iter().any(|(from, to)| from <= at && at <= to) {
            while_catching_up += 1;
        } else {
            violations.push(format!(
                "{app}: ReplicaSets wanted {sum} pods (> {}): {state}",
                REPLICAS + MAX_SURGE
            ));
        }
    }
    eprintln!(
        "chaos: {} kills {killed:?}; {} acknowledged writes ({} failed while down) over {} keys; \
         {checked_events} of them checked in the watch ({} explicit 410s); most pods wanted \
         {:?}; {while_catching_up} writes past replicas + maxSurge while the controller-manager \
         caught up after a kill; seed {seed}",
        kills,
        record.acked_writes.len(),
        record.failed_writes,
        record.keys.len(),
        record.expired_before.len(),
        record
            .worst_surge
            .iter()
            .map(|(app, (n, _))| (app.as_str(), *n))
            .collect::<BTreeMap<_, _>>(),
    );
    assert!(
        violations.is_empty(),
        "seed {seed}: {} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    assert!(
        record.acked_writes.len() > kills,
        "the workload ran: {} acknowledged writes",
        record.acked_writes.len()
    );
    assert!(checked_events > 0, "the watch saw the writes");
}
