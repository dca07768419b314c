//! `miniplane history`: every kept version of an object with its writer, trace and diff, the
//! object at a revision (`--at`), one field through the versions (`--field`), the whole
//! history as JSON, a deleted object's history, and bad input.

use crate::support::{Server, deployment_yaml};
use serde_json::Value;

/// The object's resourceVersion now.
fn revision(s: &Server, args: &[&str]) -> u64 {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "jsonpath={.metadata.resourceVersion}"]);
    s.kubectl_ok(&all).trim().parse().unwrap()
}

#[test]
fn the_history_of_a_deployment_through_updates_and_its_deletion() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    let created = revision(&s, &["deploy", "web"]);
    s.cli_ok(&["scale", "deploy/web", "--replicas", "5"]);
    let scaled = revision(&s, &["deploy", "web"]);
    s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.27"]);
    let set = revision(&s, &["deploy", "web"]);
    s.kubectl_ok(&["delete", "deploy", "web"]);

    let out = s.cli_ok(&["history", "deploy/web"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("deployment.apps/web in default: 4 versions kept, store at revision "),
        "{out}"
    );
    assert!(
        lines[1].starts_with("REVISION") && lines[1].contains("WRITER"),
        "{out}"
    );
    let row = |rev: u64| {
        lines
            .iter()
            .position(|l| l.starts_with(&format!("{rev} ")))
            .unwrap_or_else(|| panic!("no row for revision {rev}:\n{out}"))
    };
    let (c, sc, st) = (row(created), row(scaled), row(set));
    assert!(
        lines[c].contains("created") && lines[c].contains("kubectl-client-side-apply"),
        "{out}"
    );
    assert!(
        lines[sc].contains("updated") && lines[sc].contains("(Update scale)"),
        "{out}"
    );
    assert!(
        lines[sc + 1..st]
            .iter()
            .any(|l| l.trim() == "spec.replicas: 2 → 5"),
        "{out}"
    );
    assert!(lines[st].contains("kubectl-set"), "{out}");
    assert!(
        lines[st + 1..].iter().any(|l| l.trim()
            == "spec.template.spec.containers[name=web].image: \"nginx:1.25\" → \"nginx:1.27\""),
        "{out}"
    );
    assert!(lines.last().unwrap().contains("deleted"), "{out}");

    // The object as it was after the scale, though it is deleted now.
    let at: Value = serde_json::from_str(&s.cli_ok(&[
        "history",
        "deploy/web",
        "--at",
        &scaled.to_string(),
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(at["spec"]["replicas"], 5);
    assert_eq!(
        at["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    assert_eq!(at["metadata"]["resourceVersion"], scaled.to_string());
    assert!(at["metadata"].get("managedFields").is_none());

    // One field: a row where it changed, and the deletion.
    let field = s.cli_ok(&["history", "deploy/web", "--field", "spec.replicas"]);
    let rows: Vec<Vec<&str>> = field
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![created.to_string().as_str(), "2"],
            vec![scaled.to_string().as_str(), "5"],
            vec![rows[2][0], "<deleted>"],
        ],
        "{field}"
    );

    // The whole history as JSON: each put carries the trace context the API server stamped.
    let all: Value =
        serde_json::from_str(&s.cli_ok(&["history", "deploy/web", "-o", "json"])).unwrap();
    let revisions = all["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 4);
    assert_eq!(all["resource"], "deployments.apps");
    for r in &revisions[..3] {
        let tp = r["traceparent"].as_str().unwrap();
        assert!(tp.starts_with("00-") && tp.len() == 55, "{r}");
    }
    assert_eq!(revisions[3]["type"], "Deleted");
    assert!(revisions[3].get("object").is_none());
}

#[test]
fn bad_history_requests_fail_with_one_line() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("api", 1, "nginx:1.25"), &[]);
    let created = revision(&s, &["deploy", "api"]);
    let err = s.cli_err(&["history", "deploy/nope"]);
    assert_eq!(
        err,
        "Error from server (NotFound): deployments.apps \"nope\" not found"
    );
    let err = s.cli_err(&["history", "deploy/api", "--at", &(created - 1).to_string()]);
    assert_eq!(
        err,
        format!(
            "error: deployment.apps/api did not exist at revision {}",
            created - 1
        )
    );
    let err = s.cli_err(&["history", "deploy/api", "--at", "999999999"]);
    assert!(
        err.starts_with("error: revision 999999999 is newer than the current revision "),
        "{err}"
    );
    let err = s.cli_err(&["history", "deploy/api", "--field", "spec..replicas"]);
    assert!(
        err.starts_with("error: invalid field path \"spec..replicas\""),
        "{err}"
    );
    let err = s.cli_err(&["history", "nosuchtype/x"]);
    assert_eq!(
        err,
        "error: the server doesn't have a resource type \"nosuchtype\""
    );
    let err = s.cli_err(&["history", "deploy"]);
    assert_eq!(
        err,
        "error: history needs exactly one resource: TYPE NAME or TYPE/NAME"
    );
}
