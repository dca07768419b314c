//! "Too old resource version": a watch that resumes from a compacted revision gets HTTP 200 and
//! an in-stream `ERROR` event with a 410 `Expired` Status, and kube-rs' `watcher` survives it by
//! re-listing (client-go's reflector does the same).
//!
//! The running binary offers no way to compact its store on demand, so these tests run the API
//! server in process (`apiserver::serve_with`) over a `store::MemoryBackend` they keep a handle
//! to, with a small watch cache so that a few writes push an old revision out of it. kube-rs
//! reaches the server through a TCP proxy the test can cut and resume: while the watcher is cut
//! off, the test writes and compacts, so the watcher's next watch starts from a revision that
//! no longer exists.
//!
//! ```text
//!   kube watcher ──▶ proxy (cut / resume) ──▶ apiserver (in process) ──▶ MemoryBackend
//!   test writes ─────────────────────────────▶      ▲                       ▲ compact()
//! ```
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config, ResourceExt};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Backend;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Events a resource's watch cache keeps in these tests (the default is 1024).
const SMALL_WATCH_CACHE: usize = 8;

/// The in-process API server and the backend under it.
struct InProcess {
    addr: SocketAddr,
    backend: Arc<store::MemoryBackend>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl InProcess {
    async fn start() -> InProcess {
        let backend = Arc::new(store::MemoryBackend::new());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let options = apiserver::ServerOptions {
            watch_cache_capacity: SMALL_WATCH_CACHE,
            ..Default::default()
        };
        let dyn_backend: Arc<dyn Backend> = backend.clone();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            apiserver::serve_with(listener, dyn_backend, options, token)
                .await
                .expect("the API server runs until shut down");
        });
        InProcess {
            addr,
            backend,
            shutdown,
            task,
        }
    }

    /// Compacts the store at its current revision: every older revision is gone.
    async fn compact_all(&self) -> u64 {
        let rev = self.backend.current_revision();
        self.backend.compact(rev).await.unwrap();
        rev.0
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("graceful shutdown within 20 s")
            .unwrap();
    }
}

/// A TCP proxy that can cut every open connection and hold new ones until resumed.
struct Proxy {
    addr: SocketAddr,
    open: tokio::sync::watch::Sender<bool>,
    /// Cancelled to cut the connections of the current "generation".
    cut: Arc<Mutex<CancellationToken>>,
    stop: CancellationToken,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (open, open_rx) = tokio::sync::watch::channel(true);
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let stop = CancellationToken::new();
        let (cut2, stop2) = (cut.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (mut client, _) = tokio::select! {
                    accepted = listener.accept() => accepted.unwrap(),
                    () = stop2.cancelled() => return,
                };
                let mut open_rx = open_rx.clone();
                let cut = cut2.clone();
                let stop = stop2.clone();
                tokio::spawn(async move {
                    // Held (accepted, unanswered) while the proxy is cut.
                    tokio::select! {
                        r = open_rx.wait_for(|open| *open) => { if r.is_err() { return; } }
                        () = stop.cancelled() => return,
                    }
                    let generation = cut.lock().unwrap().clone();
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = generation.cancelled() => {}
                        () = stop.cancelled() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            open,
            cut,
            stop,
        }
    }

    /// Drops every proxied connection and holds new ones.
    fn cut(&self) {
        self.open.send_replace(false);
        let mut current = self.cut.lock().unwrap();
        current.cancel();
        *current = CancellationToken::new();
    }

    /// Lets held and new connections through.
    fn resume(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn client_for(addr: SocketAddr) -> Client {
    let yaml = format!(
        "apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u, namespace: default}}}}]
current-context: x
"
    );
    let kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"n": "0"}})).unwrap()
}

#[tokio::test]
async fn watcher_survives_a_410_by_relisting() {
    let server = InProcess::start().await;
    let proxy = Proxy::start(server.addr).await;
    let direct: Api<ConfigMap> = Api::namespaced(client_for(server.addr).await, "default");
    let proxied: Api<ConfigMap> = Api::namespaced(client_for(proxy.addr).await, "default");
    direct
        .create(&PostParams::default(), &configmap("a"))
        .await
        .unwrap();

    let mut events = watcher(proxied, watcher::Config::default()).boxed();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("a watcher item within 30 s")
            .expect("the watcher never ends")
    };
    assert!(matches!(next().await, Ok(watcher::Event::Init)));
    assert!(matches!(next().await, Ok(watcher::Event::InitApply(o)) if o.name_any() == "a"));
    assert!(matches!(next().await, Ok(watcher::Event::InitDone)));
    direct
        .create(&PostParams::default(), &configmap("b"))
        .await
        .unwrap();
    assert!(matches!(next().await, Ok(watcher::Event::Apply(o)) if o.name_any() == "b"));

    // Cut the watcher off; meanwhile delete a, write c many times, and compact everything.
    proxy.cut();
    direct.delete("a", &DeleteParams::default()).await.unwrap();
    direct
        .create(&PostParams::default(), &configmap("c"))
        .await
        .unwrap();
    for n in 1..=(2 * SMALL_WATCH_CACHE) {
        direct
            .patch(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"n": n.to_string()}})),
            )
            .await
            .unwrap();
    }
    server.compact_all().await;
    proxy.resume();

    // The watcher's re-watch from b's revision gets 410 Expired, then it re-lists.
    let mut errors = Vec::new();
    let mut saw_410 = false;
    loop {
        match next().await {
            Err(watcher::Error::WatchError(status)) if status.code == 410 => saw_410 = true,
            Err(e) => errors.push(e.to_string()),
            Ok(watcher::Event::Init) => break,
            Ok(other) => {
                panic!("expected a re-list after the 410, got {other:?} (errors: {errors:?})")
            }
        }
        assert!(
            errors.len() < 50,
            "the watcher keeps failing without a 410: {errors:?}"
        );
    }
    assert!(
        saw_410,
        "the re-list was not caused by an in-stream 410 (errors: {errors:?})"
    );
    let mut relisted = Vec::new();
    loop {
        match next().await.unwrap() {
            watcher::Event::InitApply(o) => {
                relisted.push((o.name_any(), o.data.unwrap()["n"].clone()))
            }
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?} during the re-list"),
        }
    }
    relisted.sort();
    let last = (2 * SMALL_WATCH_CACHE).to_string();
    assert_eq!(
        relisted,
        [("b".to_owned(), "0".to_owned()), ("c".to_owned(), last)]
    );

    // And it keeps watching.
    direct
        .create(&PostParams::default(), &configmap("d"))
        .await
        .unwrap();
    assert!(matches!(next().await, Ok(watcher::Event::Apply(o)) if o.name_any() == "d"));
    drop(proxy);
    server.stop().await;
}

#[tokio::test]
async fn raw_watch_from_a_compacted_revision_is_200_with_an_error_event() {
    let server = InProcess::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client_for(server.addr).await, "default");
    let first = api
        .create(&PostParams::default(), &configmap("x"))
        .await
        .unwrap();
    let old_rv = first.resource_version().unwrap();
    for n in 1..=(2 * SMALL_WATCH_CACHE) {
        api.patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": n.to_string()}})),
        )
        .await
        .unwrap();
    }
    api.create(&PostParams::default(), &configmap("y"))
        .await
        .unwrap();
    let addr = server.addr;
    let page =
        support::http::get_async(addr, "/api/v1/namespaces/default/configmaps?limit=1".into())
            .await
            .json();
    let token = page["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_owned();
    api.patch(
        "y",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n": "1"}})),
    )
    .await
    .unwrap();
    let compacted = server.compact_all().await;

    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={old_rv}");
    let (status, events) = tokio::task::spawn_blocking(move || {
        support::http::watch(addr, &path, 1, Duration::from_secs(20)).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        status, 200,
        "a too-old watch is still 200 (kube-rs relists only on an ERROR event): {events:?}"
    );
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["type"], "ERROR", "{event}");
    let obj = &event["object"];
    assert_eq!(obj["kind"], "Status", "{event}");
    assert_eq!(obj["apiVersion"], "v1", "{event}");
    assert_eq!(obj["code"], 410, "{event}");
    assert_eq!(obj["reason"], "Expired", "{event}");
    let message = obj["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("too old resource version: {old_rv} (")),
        "{message} (compacted at {compacted})"
    );

    // A list at exactly a compacted revision is 410 too, and so is an outdated continue token.
    let exact = format!(
        "/api/v1/namespaces/default/configmaps?resourceVersion={old_rv}&resourceVersionMatch=Exact"
    );
    support::http::get_async(addr, exact)
        .await
        .expect_status(410, "Expired");
    let page = format!("/api/v1/namespaces/default/configmaps?limit=1&continue={token}");
    support::http::get_async(addr, page)
        .await
        .expect_status(410, "Expired");
    server.stop().await;
}
