//! `miniplane record` and `miniplane replay`: a period of a running cluster recorded with who
//! wrote what, and its clients' writes replayed on a new cluster that must come out the same,
//! object by object; replayed twice with a seed, the same names, outcome and kinds of work in
//! the replay's trace; a smaller cluster must not come out the same, and a cut recording
//! starts nothing.

use std::process::Stdio;
use std::time::{Duration, Instant};

use miniplane::{Cluster, KubeletProfile};
use trace::{Span, TraceSummary, Tree};

use admin::ChangeType;
use admin::recording::Recording;

use crate::support::spine::work_kinds;
use crate::support::up::{UpEnv, collect, signal};
use crate::support::{DEADLINE, eventually, until};

#[test]
fn a_recording_names_its_writers_and_replays_to_the_same_objects() {
    let env = UpEnv::new();
    let _up = env.up(&["--nodes", "1", "--port", "0"]);
    let file = env.dir().join("period.jsonl");
    let kubeconfig = env.kubeconfig();
    let mut recorder = env
        .miniplane(&["record"])
        .arg(&file)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = collect(recorder.stderr.take().unwrap());
    eventually("the recorder to start", DEADLINE, || {
        stderr.lock().unwrap().contains("recording ").then_some(())
    });

    // What a user does: five kubectl commands and a delete.
    env.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ]);
    env.kubectl_ok(&["scale", "deployment/web", "--replicas=3"]);
    env.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=blue",
    ]);
    env.kubectl_ok(&["label", "deployment/web", "tier=front"]);
    env.kubectl_ok(&["create", "configmap", "scratch"]);
    env.kubectl_ok(&["delete", "configmap", "scratch"]);
    env.running_pods("web", 3);
    eventually("the Deployment to be Available with 3", DEADLINE, || {
        let d = env.get_json(&["deployment", "web"]);
        (d["status"]["availableReplicas"] == 3
            && d["status"]["observedGeneration"] == d["metadata"]["generation"])
            .then_some(())
    });
    signal(recorder.id(), "INT");
    let status = eventually("the recorder to stop", DEADLINE, || {
        recorder.try_wait().unwrap()
    });
    let said = stderr.lock().unwrap().clone();
    assert!(status.success(), "record failed: {said}");

    // The file: the user's six writes are the external ones, each with its writer, the user
    // and its trace; the control plane's are there but not external.
    let text = std::fs::read_to_string(&file).unwrap();
    let recording = Recording::parse(&text).unwrap();
    let writers: Vec<String> = recording
        .external_writes()
        .map(|w| {
            format!(
                "{} {}/{} {:?} by {}",
                w.revision,
                w.resource,
                w.name,
                w.change,
                w.writer.who()
            )
        })
        .collect();
    assert!(
        said.contains("(6 by clients outside the control plane)"),
        "{said}\n{writers:#?}"
    );
    assert_eq!(recording.header.nodes, 1);
    let external: Vec<(String, ChangeType, Option<String>, Option<String>)> = recording
        .external_writes()
        .map(|w| {
            (
                format!("{}/{}", w.resource, w.name),
                w.change,
                w.writer.manager.clone(),
                w.writer.subresource.clone(),
            )
        })
        .collect();
    assert_eq!(
        external,
        vec![
            (
                "deployments/web".into(),
                ChangeType::Created,
                Some("kubectl-create".into()),
                None
            ),
            (
                "deployments/web".into(),
                ChangeType::Updated,
                Some("kubectl".into()),
                Some("scale".into())
            ),
            (
                "configmaps/settings".into(),
                ChangeType::Created,
                Some("kubectl-create".into()),
                None
            ),
            (
                "deployments/web".into(),
                ChangeType::Updated,
                Some("kubectl-label".into()),
                None
            ),
            // A ConfigMap without data: kubectl-create owns no field, so it has no entry.
            ("configmaps/scratch".into(), ChangeType::Created, None, None),
            ("configmaps/scratch".into(), ChangeType::Deleted, None, None),
        ]
    );
    for w in recording.external_writes() {
        assert_eq!(
            w.writer.user.as_deref(),
            Some("kubernetes-admin"),
            "{}",
            w.name
        );
        assert!(w.writer.traceparent.is_some(), "{}", w.name);
    }
    let pods: Vec<_> = recording
        .writes
        .iter()
        .filter(|w| w.resource == "pods" && w.change == ChangeType::Created)
        .collect();
    assert_eq!(pods.len(), 3);
    assert!(
        pods.iter()
            .all(|w| !w.external && w.writer.manager.as_deref() == Some("kube-controller-manager"))
    );
    let start: jiff::Timestamp = recording.header.start_time.parse().unwrap();
    let end: jiff::Timestamp = recording.end.time.parse().unwrap();
    for w in &recording.writes {
        let at: jiff::Timestamp = w.time.parse().unwrap();
        assert!(start <= at && at <= end, "{} at {at}", w.name);
    }

    // Replayed on a new cluster of as many nodes at the recording's pace: the same objects.
    let replay = env
        .miniplane(&["replay", "--kubelet-profile", "fast"])
        .arg(&file)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&replay.stdout);
    let err = String::from_utf8_lossy(&replay.stderr);
    assert!(replay.status.success(), "replay: {out}\n{err}");
    assert!(
        out.starts_with("the replay ended as the recording did: ") && out.contains("all the same"),
        "{out}"
    );
    assert!(
        err.contains("create deployments.apps default/web  (kubernetes-admin (kubectl-create))"),
        "{err}"
    );
    assert!(err.contains("delete configmaps default/scratch"), "{err}");

    // Seeded, a replay makes the same names every run (the recorded cluster had no seed, so
    // they are not the recording's: the report maps them).
    let seeded = || {
        let replay = env
            .miniplane(&[
                "replay",
                "--kubelet-profile",
                "fast",
                "--seed",
                "7",
                "-o",
                "json",
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            replay.status.success(),
            "{}",
            String::from_utf8_lossy(&replay.stdout)
        );
        serde_json::from_slice::<admin::replay::Report>(&replay.stdout).unwrap()
    };
    let (first, second) = (seeded(), seeded());
    assert_eq!(first.renamed.len(), 3, "the 3 pods: {first:?}");
    assert_eq!(first, second);

    // The same replay into two fresh seeded clusters on a paused clock: the same outcome, the
    // same names and a trace of the same kinds of work under the replay's root.
    let into = || {
        let start: jiff::Timestamp = recording.header.start_time.parse().unwrap();
        // As `up` makes one (and the replay its own), so that the outcome is the recording's.
        let cluster = Cluster::builder()
            .nodes(1)
            .kubelet_profile(KubeletProfile::Fast)
            .leader_elect(true)
            .cloud(true)
            .secure(true)
            .metrics_server(Some(Duration::from_secs(15)))
            .virtual_clock(0.0)
            .clock_start(start)
            .seed(7)
            .start()
            .unwrap();
        let out = env
            .miniplane(&["replay", "--into", "-o", "json", "--kubeconfig"])
            .arg(cluster.kubeconfig_path())
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: admin::replay::Report = serde_json::from_slice(&out.stdout).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let kinds = runtime.block_on(replay_trace_kinds(&cluster.client()));
        drop(runtime);
        cluster.stop().unwrap();
        (report, kinds)
    };
    let (first, second) = (into(), into());
    assert!(
        first
            .1
            .contains("[miniplane-replay] replay create deployments"),
        "{}",
        first.1
    );
    assert!(first.1.contains("[kube-controller-manager]"), "{}", first.1);
    assert_eq!(first, second);

    // With no node, the pods stay Pending: the report names them and the node, exit 1.
    let replay = env
        .miniplane(&[
            "replay",
            "--speed",
            "5",
            "--kubelet-profile",
            "fast",
            "--nodes",
            "0",
            "--settle",
            "2s",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{out}");
    assert!(out.starts_with("the replay ended otherwise: "), "{out}");
    assert!(
        out.contains("missing  nodes node-0 (recorded, not in the replay)"),
        "{out}"
    );
    assert!(out.contains("differs  pods default/web-"), "{out}");
    assert!(
        out.contains("spec.nodeName: \"node-0\" (recorded) → (none) (replay)"),
        "{out}"
    );

    // A recording cut short starts nothing: one line, exit 2 (as diff's trouble).
    let cut = env.dir().join("cut.jsonl");
    let half: String = text
        .lines()
        .take(text.lines().count() / 2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&cut, half).unwrap();
    let replay = env.miniplane(&["replay"]).arg(&cut).output().unwrap();
    let err = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "miniplane: {}: truncated: it stops after line ",
            cut.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The kinds of work of the replay's trace (root component `miniplane-replay`), once the
/// components have reported it all.
async fn replay_trace_kinds(client: &kube::Client) -> String {
    let get = |path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path).body(Vec::new()).unwrap();
            serde_json::from_str::<serde_json::Value>(&client.request_text(request).await.unwrap())
                .unwrap()
        }
    };
    let id = until("the replay's trace", || async {
        let body = get("/miniplane/v1/traces?limit=200&minSpans=2".into()).await;
        let traces: Vec<TraceSummary> = serde_json::from_value(body["traces"].clone()).ok()?;
        traces
            .into_iter()
            .find(|t| t.root_component == "miniplane-replay")
            .map(|t| t.trace_id)
    })
    .await;
    let mut last = 0;
    let mut stable_since = Instant::now();
    let start = Instant::now();
    loop {
        let body = get(format!("/miniplane/v1/traces/{id}")).await;
        let spans: Vec<Span> = serde_json::from_value(body["spans"].clone()).unwrap_or_default();
        if spans.len() != last {
            last = spans.len();
            stable_since = Instant::now();
        }
        if Tree::build(&spans).orphans().is_empty()
            && stable_since.elapsed() > Duration::from_millis(1500)
        {
            return work_kinds(&spans);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "trace {id} incomplete: {} spans",
            spans.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
