//! `miniplane rollout`: `status` following a rollout step by step (statuses written through
//! `/status`, so every message is deterministic), then the whole control plane
//! (controller-manager, scheduler, simulated kubelets) rolling out, back and again with
//! `status`, `history`, `undo`, `pause`, `resume` and `restart`.

use crate::support::cli::one_line_error;
use crate::support::component::Component;
use crate::support::{DEADLINE, Server, deployment_yaml, eventually, write_status};
use serde_json::json;

#[test]
fn status_prints_each_new_message_until_rolled_out() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 3, "nginx:1.25"), &[]);
    let mut status = s.cli_spawn(&["rollout", "status", "deploy/web"]);
    let mut expect = |line: &str| {
        status.wait_line(line, DEADLINE, |l| l == line);
    };
    expect("Waiting for deployment spec update to be observed...");
    write_status(
        &s,
        "deployment",
        "web",
        json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}),
    );
    expect(
        "Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...",
    );
    write_status(
        &s,
        "deployment",
        "web",
        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 1, "availableReplicas": 1}),
    );
    expect(
        "Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...",
    );
    // --watch=false prints kubectl's line once.
    let once = ["rollout", "status", "deploy/web", "--watch=false"];
    assert_eq!(s.cli_ok(&once), s.kubectl_ok(&once));
    write_status(
        &s,
        "deployment",
        "web",
        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}),
    );
    let (code, stdout, stderr) = status.finish(DEADLINE);
    assert!(code.success(), "{stdout}\n{stderr}");
    // Each message once (not once per event), in order.
    assert_eq!(
        stdout,
        "Waiting for deployment spec update to be observed...\n\
         Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n\
         Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...\n\
         deployment \"web\" successfully rolled out"
    );

    // A rollout that cannot finish: --timeout ends it.
    s.kubectl_ok(&["scale", "deploy/web", "--replicas=4"]);
    let run = s.cli(&["rollout", "status", "deploy/web", "--timeout=1s"]);
    assert_eq!(
        run.stdout,
        "Waiting for deployment spec update to be observed...\n"
    );
    assert_eq!(
        one_line_error(&run),
        "error: timed out waiting for the condition"
    );
}

/// The Deployment's `spec.template.spec.containers[0].image`.
fn image(s: &Server) -> String {
    s.kubectl_ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
}

#[test]
fn rollout_history_undo_pause_resume_restart_on_a_cluster() {
    let s = Server::start();
    let _kubelet = Component::start(
        &s,
        &["kubelet", "--nodes", "2", "--listen", "127.0.0.1:0"],
        "miniplane kubelet:",
    );
    let _scheduler = Component::start(&s, &["scheduler"], "miniplane scheduler started");
    let _cm = Component::start(
        &s,
        &["controller-manager"],
        "miniplane controller-manager started",
    );
    let rolled_out = |s: &Server| {
        let run = s.cli(&["rollout", "status", "deploy/web", "--timeout=60s"]);
        assert!(run.ok(), "{run}");
        assert!(
            run.stdout
                .ends_with("deployment \"web\" successfully rolled out\n"),
            "{run}"
        );
    };
    let apply = |image: &str| {
        let run = s.cli_run(
            &["apply", "-f", "-"],
            Some(&deployment_yaml("web", 2, image)),
        );
        assert!(run.ok(), "{run}");
    };
    apply("nginx:1.25");
    rolled_out(&s);
    apply("nginx:1.27");
    rolled_out(&s);

    // History from the ReplicaSets: the same text as kubectl's. For one revision the same
    // words too (kubectl prints that template with raw tabs; miniplane aligns it).
    let list = ["rollout", "history", "deploy/web"];
    assert_eq!(s.cli_ok(&list), s.kubectl_ok(&list));
    let one = ["rollout", "history", "deployment", "web", "--revision=1"];
    let ours = s.cli_ok(&one);
    let theirs = s.kubectl_ok(&one);
    let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&ours), words(&theirs), "{ours}\n{theirs}");
    assert!(ours.contains("\n    Image:         nginx:1.25\n"), "{ours}");
    assert_eq!(
        s.cli_ok(&["rollout", "history", "deploy/web"]),
        "deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n\n"
    );

    // Undo: back to revision 1's template, which becomes revision 3.
    assert_eq!(
        s.cli_ok(&["rollout", "undo", "deploy/web"]),
        "deployment.apps/web rolled back\n"
    );
    assert_eq!(image(&s), "nginx:1.25");
    rolled_out(&s);
    assert_eq!(
        s.cli_ok(&["rollout", "undo", "deploy/web", "--to-revision=3"]),
        "deployment.apps/web skipped rollback (current template already matches revision 3)\n"
    );
    assert_eq!(
        s.cli_err(&["rollout", "undo", "deploy/web", "--to-revision=9"]),
        "error: unable to find specified revision 9 in history"
    );

    // Pause and resume: kubectl's messages, and the same errors when repeated.
    assert_eq!(
        s.cli_ok(&["rollout", "pause", "deploy/web"]),
        "deployment.apps/web paused\n"
    );
    let again = s.cli(&["rollout", "pause", "deploy/web"]);
    assert_eq!(
        one_line_error(&again),
        "error: deployments.apps \"web\" is already paused"
    );
    assert_eq!(
        again.stderr,
        s.kubectl(&["rollout", "pause", "deploy/web"]).stderr
    );
    assert!(
        s.cli_err(&["rollout", "undo", "deploy/web"])
            .starts_with("error: you cannot rollback a paused deployment")
    );
    assert!(
        s.cli_err(&["rollout", "restart", "deploy/web"])
            .contains("can't restart paused deployment")
    );
    assert_eq!(
        s.cli_ok(&["rollout", "resume", "deploy/web"]),
        "deployment.apps/web resumed\n"
    );
    let again = s.cli(&["rollout", "resume", "deploy/web"]);
    assert_eq!(
        one_line_error(&again),
        "error: deployments.apps \"web\" is not paused"
    );
    assert_eq!(
        again.stderr,
        s.kubectl(&["rollout", "resume", "deploy/web"]).stderr
    );

    // Restart: a template annotation, hence a new ReplicaSet and new pods.
    assert_eq!(
        s.cli_ok(&["rollout", "restart", "deploy/web"]),
        "deployment.apps/web restarted\n"
    );
    let restarted = s.kubectl_ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}",
    ]);
    assert!(restarted.ends_with('Z'), "{restarted}");
    rolled_out(&s);
    let history = s.cli_ok(&["rollout", "history", "deploy/web"]);
    assert!(history.contains("\n4         <none>\n"), "{history}");

    // Describe a running pod: kubectl's text, events from the scheduler and kubelet. Not one
    // of the previous revision's, which may still be terminating (and gone by the describe).
    let pod = eventually("a Running pod that is not terminating", DEADLINE, || {
        let list = s
            .get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")
            .json();
        list["items"]
            .as_array()?
            .iter()
            .find(|p| {
                p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
            })
            .and_then(|p| p["metadata"]["name"].as_str())
            .map(str::to_owned)
    });
    let ours = s.cli_ok(&["describe", "pod", &pod]);
    // (The column is as wide as the block's longest label, which depends on the fields set.)
    assert!(
        ours.lines()
            .any(|l| l.starts_with("Status:") && l.ends_with(" Running")),
        "{ours}"
    );
    assert!(ours.contains("  Normal  Scheduled  "), "{ours}");
    // Identical to kubectl's, but for event ages, which may tick between the two.
    let theirs = s.kubectl_ok(&["describe", "pod", &pod]);
    let (ours_head, ours_events) = ours.split_once("\nEvents:").unwrap();
    let (theirs_head, theirs_events) = theirs.split_once("\nEvents:").unwrap();
    assert_eq!(ours_head, theirs_head);
    let ageless = |t: &str| {
        t.split_whitespace()
            .filter(|w| !(w.ends_with('s') && w[..w.len() - 1].chars().all(|c| c.is_ascii_digit())))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ageless(ours_events),
        ageless(theirs_events),
        "{ours}\n{theirs}"
    );

    // Foreground deletion waits for the dependents to go first.
    assert_eq!(
        s.cli_ok(&["delete", "deploy", "web", "--cascade=foreground"]),
        "deployment.apps \"web\" deleted\n"
    );
    assert!(!s.kubectl(&["get", "deploy", "web"]).ok());
    assert_eq!(
        s.kubectl_ok(&["get", "rs", "-l", "app=web", "-o", "name"]),
        ""
    );
}
