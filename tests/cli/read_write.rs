//! `miniplane apply`, `get` (tables, `-o`, `-A`, `-l`, `-w`), `describe` and `delete` against
//! an API server alone (statuses are written through `/status` as a controller would).

use super::{without_age, write_file};
use crate::support::{
    DEADLINE, Server, configmap_yaml, deployment_yaml, namespace_yaml, write_status,
};

/// `web` (2 replicas, 1 ready) and ConfigMap `cfg`, applied from one multi-document file.
fn seed(s: &Server) -> String {
    let file = write_file(
        s,
        "app.yaml",
        &format!(
            "{}---\n{}",
            deployment_yaml("web", 2, "nginx:1.25"),
            configmap_yaml("cfg", "color: blue")
        ),
    );
    assert_eq!(
        s.cli_ok(&["apply", "-f", &file]),
        "deployment.apps/web created\nconfigmap/cfg created\n"
    );
    write_status(
        s,
        "deployment",
        "web",
        serde_json::json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1,
                           "updatedReplicas": 2, "availableReplicas": 1}),
    );
    file
}

#[test]
fn apply_is_server_side_and_says_what_changed() {
    let s = Server::start();
    let file = seed(&s);
    assert_eq!(
        s.cli_ok(&["apply", "-f", &file]),
        "deployment.apps/web unchanged\nconfigmap/cfg unchanged\n"
    );
    // From standard input, with a change; the field manager is recorded.
    let run = s.cli_run(
        &["apply", "-f", "-"],
        Some(&deployment_yaml("web", 3, "nginx:1.25")),
    );
    assert!(run.ok(), "{run}");
    assert_eq!(run.stdout, "deployment.apps/web configured\n");
    let d = s.kubectl_json(&["get", "deploy", "web", "--show-managed-fields"]);
    assert_eq!(d["spec"]["replicas"], 3);
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"miniplane"), "{managers:?}");

    // A directory: its manifests in name order; a namespace from the file is kept.
    let dir = s.dir().join("manifests");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a-ns.yaml"), namespace_yaml("team")).unwrap();
    std::fs::write(
        dir.join("b-cm.json"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"team-cfg","namespace":"team"}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
    assert_eq!(
        s.cli_ok(&["apply", "-f", &dir.display().to_string()]),
        "namespace/team created\nconfigmap/team-cfg created\n"
    );
    assert_eq!(
        s.cli_ok(&["get", "cm", "team-cfg", "-n", "team", "-o", "name"]),
        "configmap/team-cfg\n"
    );

    // Another manager owns spec.replicas: a conflict unless --force-conflicts.
    s.kubectl_ok(&["scale", "deploy/web", "--replicas=4"]);
    let conflict = s.cli_run(
        &["apply", "-f", "-", "--field-manager", "other"],
        Some(&deployment_yaml("web", 5, "nginx:1.25")),
    );
    let line = crate::support::cli::one_line_error(&conflict);
    assert!(
        line.starts_with("Error from server (Conflict): Apply failed with"),
        "{line}"
    );
    assert!(
        line.ends_with("--force-conflicts to take over these fields)"),
        "{line}"
    );
    let forced = s.cli_run(
        &[
            "apply",
            "-f",
            "-",
            "--field-manager",
            "other",
            "--force-conflicts",
        ],
        Some(&deployment_yaml("web", 5, "nginx:1.25")),
    );
    assert_eq!(
        forced.stdout, "deployment.apps/web configured\n",
        "{forced}"
    );
}

#[test]
fn get_prints_tables_like_kubectl() {
    let s = Server::start();
    seed(&s);
    // The same columns and cells as kubectl (AGE aside, which may tick in between).
    for args in [
        &["get", "deploy"][..],
        &["get", "deployments.apps", "web"],
        &["get", "deploy,cm"],
        &["get", "deploy", "-o", "wide"],
        &["get", "deploy", "-A"],
        &["get", "cm", "-l", "!missing"],
        &["get", "all"],
        &["get", "namespaces"],
        &["get", "deploy/web", "cm/cfg"],
    ] {
        let ours = s.cli_ok(args);
        let theirs = s.kubectl_ok(args);
        assert_eq!(
            without_age(&ours),
            without_age(&theirs),
            "miniplane {args:?}:\n{ours}\nkubectl:\n{theirs}"
        );
        // Aligned alike: the header lines (which hold no ages) are the same text.
        let headers = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("NAME"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(headers(&ours), headers(&theirs), "{args:?}");
    }
    let both = s.cli_ok(&["get", "deploy,cm"]);
    let lines: Vec<&str> = both.lines().collect();
    assert_eq!(lines.len(), 5, "{both}");
    assert!(lines[0].starts_with("NAME                  READY   UP-TO-DATE   AVAILABLE   AGE"));
    assert!(lines[1].starts_with("deployment.apps/web   1/2     2            1           "));
    assert_eq!(lines[2], "");
    assert!(lines[3].starts_with("NAME            DATA   AGE"));
    assert!(lines[4].starts_with("configmap/cfg   1      "));
    assert_eq!(
        s.cli_ok(&["get", "deploy", "--no-headers"])
            .split_whitespace()
            .take(4)
            .collect::<Vec<_>>(),
        ["web", "1/2", "2", "1"]
    );

    // Nothing found: a message on stderr, exit status 0.
    let empty = s.cli(&["get", "pods"]);
    assert!(empty.ok(), "{empty}");
    assert_eq!(empty.stdout, "");
    assert_eq!(empty.stderr, "No resources found in default namespace.\n");
    let empty = s.cli(&["get", "deploy", "-l", "app=none", "-A"]);
    assert_eq!(empty.stderr, "No resources found\n", "{empty}");
}

#[test]
fn get_prints_objects_like_kubectl() {
    let s = Server::start();
    seed(&s);
    assert_eq!(
        s.cli_ok(&["get", "deploy", "web", "-o", "name"]),
        "deployment.apps/web\n"
    );
    assert_eq!(
        s.cli_ok(&["get", "deploy,cm", "-o", "name"]),
        "deployment.apps/web\nconfigmap/cfg\n"
    );
    // Strings go-yaml must quote, fold or write as blocks.
    let tricky = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tricky\n  annotations: {note: 'a: b'}\n\
        data:\n  n: '1'\n  flag: 'yes'\n  when: '2024-01-01T00:00:00Z'\n  script: \"echo hi\\nexit 0\\n\"\n\
        \x20 two: \"a\\nb\"\n  tab: \"a\\tb\"\n  star: '*x'\n  lead: ' x'\n  empty: ''\n  octal: '0755'\n\
        \x20 uni: 'h\u{e9}llo \u{2713}'\n  long: 'a: word word word word word word word word word word word word word word word word word word word word'\n";
    s.apply_ok(tricky, &[]);
    // JSON and YAML: the very text kubectl prints (managedFields left out), a List for
    // several.
    for args in [
        &["get", "deploy", "web"][..],
        &["get", "deploy,cm"],
        &["get", "cm", "tricky"],
    ] {
        let with = |format: &'static str| [args, &["-o", format]].concat();
        let ours = s.cli_ok(&with("json"));
        assert_eq!(ours, s.kubectl_ok(&with("json")), "{args:?} -o json");
        let parsed: serde_json::Value = serde_json::from_str(&ours).unwrap();
        assert!(parsed["metadata"].get("managedFields").is_none());
        assert_eq!(
            s.cli_ok(&with("yaml")),
            s.kubectl_ok(&with("yaml")),
            "{args:?} -o yaml"
        );
    }
    let one =
        serde_json::from_str::<serde_json::Value>(&s.cli_ok(&["get", "cm", "cfg", "-o", "json"]))
            .unwrap();
    assert_eq!(one["kind"], "ConfigMap");
    assert_eq!(one["data"]["color"], "blue");
}

#[test]
fn get_watch_prints_a_row_per_change() {
    let s = Server::start();
    let mut watch = s.cli_spawn(&["get", "configmaps", "-w"]);
    watch.wait_line("the empty-list message", DEADLINE, |l| {
        l.ends_with("No resources found in default namespace.")
    });
    s.apply_ok(&configmap_yaml("first", "a: b"), &[]);
    let header = watch.wait_line("a header", DEADLINE, |l| l.starts_with("NAME"));
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"]
    );
    let row = watch.wait_line("the new row", DEADLINE, |l| l.starts_with("first "));
    assert_eq!(
        row.split_whitespace().take(2).collect::<Vec<_>>(),
        ["first", "1"]
    );
    s.kubectl_ok(&["delete", "cm", "first"]);
    // The deletion prints the row again, aligned with the header.
    let again = watch.wait_line("the deleted row", DEADLINE, |l| l.starts_with("first "));
    assert_eq!(again.find('1'), header.find("DATA"), "{header}\n{again}");

    let mut names = s.cli_spawn(&["get", "cm", "-w", "-o", "name"]);
    s.apply_ok(&configmap_yaml("second", "a: b"), &[]);
    names.wait_line("a name", DEADLINE, |l| l == "configmap/second");
}

#[test]
fn describe_matches_kubectl() {
    let s = Server::start();
    seed(&s);
    s.create_yaml(
        "apiVersion: v1\nkind: Event\nmetadata: {name: web.1}\n\
         involvedObject: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}\n\
         reason: ScalingReplicaSet\nmessage: Scaled up replica set web-1 to 2\ntype: Normal\n\
         source: {component: deployment-controller}\n",
    );
    let uid = s.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.uid}"]);
    s.kubectl_ok(&[
        "patch",
        "event",
        "web.1",
        "--type=merge",
        "-p",
        &format!(r#"{{"involvedObject":{{"uid":"{uid}"}}}}"#),
    ]);
    let lease = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: lock}\n\
                 spec: {holderIdentity: me, leaseDurationSeconds: 15}\n";
    assert_eq!(
        s.cli_run(&["apply", "-f", "-"], Some(lease)).stdout,
        "lease.coordination.k8s.io/lock created\n"
    );
    // A Deployment (kubectl's dedicated describer) and a Lease (the generic one): the same
    // text as kubectl, events included.
    for args in [
        &["describe", "deploy", "web"][..],
        &["describe", "lease", "lock"],
    ] {
        let ours = s.cli_ok(args);
        let theirs = s.kubectl_ok(args);
        assert_eq!(
            ours, theirs,
            "miniplane {args:?}:\n{ours}\nkubectl:\n{theirs}"
        );
    }
    let out = s.cli_ok(&["describe", "deploy/web"]);
    assert!(out.contains("Normal  ScalingReplicaSet  "), "{out}");

    let missing = s.cli(&["describe", "deploy", "nope"]);
    assert_eq!(
        crate::support::cli::one_line_error(&missing),
        "Error from server (NotFound): deployments.apps \"nope\" not found"
    );
}

#[test]
fn delete_by_name_file_and_selector() {
    let s = Server::start();
    let file = seed(&s);
    assert_eq!(
        s.cli_ok(&["delete", "deploy", "web"]),
        "deployment.apps \"web\" deleted\n"
    );
    let again = s.cli(&["delete", "deploy", "web"]);
    let theirs = s.kubectl(&["delete", "deploy", "web"]);
    assert_eq!(
        crate::support::cli::one_line_error(&again),
        "Error from server (NotFound): deployments.apps \"web\" not found"
    );
    assert_eq!(again.stderr, theirs.stderr);
    assert!(
        s.cli(&["delete", "deploy", "web", "--ignore-not-found"])
            .ok()
    );

    // -f deletes what the file names; the missing Deployment is reported, the rest done.
    let run = s.cli(&["delete", "-f", &file]);
    assert_eq!(run.stdout, "configmap \"cfg\" deleted\n", "{run}");
    assert_eq!(
        crate::support::cli::one_line_error(&run),
        "Error from server (NotFound): deployments.apps \"web\" not found"
    );

    s.apply_ok(&configmap_yaml("a", "k: v"), &[]);
    s.apply_ok(&configmap_yaml("b", "k: v"), &[]);
    s.kubectl_ok(&["label", "cm", "a", "tier=x"]);
    assert_eq!(
        s.cli_ok(&["delete", "cm", "-l", "tier=x"]),
        "configmap \"a\" deleted\n"
    );
    assert_eq!(
        s.cli_ok(&["get", "cm", "-o", "name"])
            .lines()
            .filter(|l| l.starts_with("configmap/b"))
            .count(),
        1
    );
    assert_eq!(
        s.cli_err(&["delete", "cm"]),
        "error: resource(s) were provided, but no name was specified"
    );
}
