//! Tests of what ends a container's process through the kubelet API: a signal from `kill` in
//! an exec'd shell, and the main process, a shell, exiting through `attach`; and of the files
//! copied in going with the run, and with the pod.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::ObjectKey;
use apimachinery::httpstream::wsstream;
use client::TokioClock;
use client::fake_source::FakeSource;
use client::shared_informer::SharedIndexInformer;
use futures::SinkExt;
use k8s_openapi::api::core::v1::Pod;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::KubeletServer;
use super::tests::{Fixture, PodBuilder};
use super::tests_streams::{V5, channel, exec_v5, exit_code, read_until, text, v5, ws};
use crate::config::{Capacity, StageConfig};
use crate::containers::ProcessExit;
use crate::pod_workers::PodWorkers;

/// Pod workers over the fixture's pods and nodes, with a client that reaches nothing (they
/// are never run: the tests read what was reported to them).
fn workers(f: &Fixture) -> PodWorkers {
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    let (recorder, _writer) = crate::recorder::recorder(client.clone(), 2);
    PodWorkers::new(
        client,
        f.pods.clone(),
        f.nodes.clone(),
        recorder,
        TokioClock::shared(),
        StageConfig::fast(),
    )
}

fn web() -> ObjectKey {
    ObjectKey::new(Some("default"), "web")
}

fn codes(exits: &[ProcessExit]) -> Vec<(String, i32, i32)> {
    exits
        .iter()
        .map(|e| (e.container.clone(), e.restarts, e.exit_code))
        .collect()
}

#[tokio::test]
async fn kill_through_exec_ends_the_run_and_its_copied_files() {
    let f = Fixture::start(vec![PodBuilder::new("web", "busybox").build()]).await;
    let workers = workers(&f);
    f.server.set_workers(workers.clone());
    let copied = f.server.copied_files("uid-web", "app", 0);
    copied
        .lock()
        .expect("not poisoned")
        .insert("/tmp/note".into(), b"hi".to_vec());
    assert_eq!(f.server.copied_runs(), 1);

    // A signal another PID does not exist for changes nothing.
    let seen = exec_v5(&f, "command=kill&command=7&output=1&error=1", None).await;
    assert_eq!(exit_code(&seen), Some(1));
    assert!(workers.reported_exits(&web()).is_empty());
    assert_eq!(f.server.copied_runs(), 1);

    let seen = exec_v5(
        &f,
        "command=kill&command=-9&command=1&output=1&error=1",
        None,
    )
    .await;
    assert_eq!(exit_code(&seen), Some(0), "kill itself succeeded");
    assert_eq!(
        codes(&workers.reported_exits(&web())),
        [("app".to_owned(), 0, 137)],
        "SIGKILL ends run 0 with 128 + 9"
    );
    assert_eq!(f.server.copied_runs(), 0, "the copy went with the run");

    // An interactive shell that kills PID 1 dies with its container.
    let seen = exec_v5(
        &f,
        "command=sh&input=1&output=1&error=1",
        Some(b"kill 1\necho never\n"),
    )
    .await;
    assert_eq!(exit_code(&seen), Some(137));
    assert!(!text(&channel(&seen, wsstream::STDOUT)).contains("never"));
    assert_eq!(
        codes(&workers.reported_exits(&web())),
        [("app".to_owned(), 0, 137), ("app".to_owned(), 0, 143)]
    );
    f.stop().await;
}

#[tokio::test]
async fn a_shell_main_process_ends_its_container_through_attach() {
    let pod = PodBuilder::new("web", "busybox:1.36").stdin(false).build();
    let f = Fixture::start(vec![pod]).await;
    let workers = workers(&f);
    f.server.set_workers(workers.clone());
    let (mut socket, _) = ws(
        &f,
        "/attach/default/web/app?input=1&output=1&error=1",
        &[V5],
    )
    .await
    .expect("upgraded");
    let mut typed = vec![wsstream::STDIN];
    typed.extend_from_slice(b"echo hi $HOSTNAME\nexit 3\n");
    socket
        .send(Message::Binary(typed.into()))
        .await
        .expect("stdin");
    let mut seen = Vec::new();
    read_until(&mut socket, v5(), &mut seen, |_| false).await;
    assert_eq!(text(&channel(&seen, wsstream::STDOUT)), "hi web\n");
    assert_eq!(exit_code(&seen), Some(0), "attach ends with Success");
    assert_eq!(
        codes(&workers.reported_exits(&web())),
        [("app".to_owned(), 0, 3)],
        "the shell's exit code is the container's"
    );
    f.wait_streams(0).await;
    f.stop().await;
}

#[tokio::test]
async fn a_deleted_pod_frees_what_was_copied_into_it() {
    let source = FakeSource::<Pod>::new();
    let pods: SharedIndexInformer<Pod> =
        SharedIndexInformer::new(Arc::new(source.clone()), Duration::ZERO);
    let server = KubeletServer::new(
        Arc::default(),
        pods.clone(),
        TokioClock::shared(),
        None,
        &Capacity::default(),
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let pods = pods.clone();
        let stop = stop.clone();
        async move { pods.run(stop).await }
    });
    let pod = source.add(PodBuilder::new("web", "busybox").build());
    for _ in 0..250 {
        if pods.get(&web()).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(pods.get(&web()).is_some(), "the informer has the pod");
    let _ = server.copied_files("uid-web", "app", 0);
    let _ = server.copied_files("uid-other", "app", 0);
    assert_eq!(server.copied_runs(), 2);
    source.delete(pod);
    for _ in 0..250 {
        if server.copied_runs() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.copied_runs(), 1, "only the other pod's copy is left");
    stop.cancel();
    let _ = running.await;
}
