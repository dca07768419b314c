//! Bad input to the CLI verbs: each fails with one clear line on stderr and exit status 1,
//! worded as kubectl words it (the same line as kubectl's where kubectl prints one line).

use std::process::Command;

use super::write_file;
use crate::support::Server;
use crate::support::cli::one_line_error;

#[test]
fn bad_files_types_and_names() {
    let s = Server::start();
    let missing = s.dir().join("missing.yaml").display().to_string();
    let ours = s.cli(&["apply", "-f", &missing]);
    let theirs = s.kubectl(&["apply", "-f", &missing]);
    assert_eq!(
        one_line_error(&ours),
        format!("error: the path \"{missing}\" does not exist")
    );
    assert_eq!(ours.stderr, theirs.stderr);

    let bad = write_file(&s, "bad.yaml", "apiVersion: v1\nkind: [unclosed\n");
    let line = s.cli_err(&["apply", "-f", &bad]);
    assert!(
        line.starts_with(&format!("error: error parsing {bad}: ")),
        "{line}"
    );

    let no_kind = write_file(&s, "nokind.yaml", "apiVersion: v1\nmetadata: {name: x}\n");
    assert_eq!(
        s.cli_err(&["apply", "-f", &no_kind]),
        format!("error: error parsing {no_kind}: document 1: kind not set")
    );

    let foo = write_file(
        &s,
        "foo.yaml",
        "apiVersion: example.com/v1\nkind: Foo\nmetadata: {name: x}\n",
    );
    assert_eq!(
        s.cli_err(&["apply", "-f", &foo]),
        format!(
            "error: resource mapping not found for name: \"x\" namespace: \"\" from \"{foo}\": no matches for kind \"Foo\" in version \"example.com/v1\""
        )
    );

    // Unknown types and names: kubectl's very line.
    for args in [
        &["get", "foos"][..],
        &["get", "deploy", "nope"],
        &["describe", "foos", "x"],
        &["delete", "deploy", "nope"],
    ] {
        let ours = s.cli(args);
        let theirs = s.kubectl(args);
        assert_eq!(one_line_error(&ours), theirs.stderr.trim_end(), "{args:?}");
    }
    // (kubectl 1.33 says "error: no objects passed to scale deployments.apps ...".)
    assert_eq!(
        s.cli_err(&["scale", "deploy/nope", "--replicas=2"]),
        "Error from server (NotFound): deployments.apps \"nope\" not found"
    );
    assert_eq!(
        s.cli_err(&["get"]),
        "error: you must specify the type of resource to get, e.g. `miniplane get pods`"
    );
    assert_eq!(
        s.cli_err(&["get", "deploy", "deploy/web"])
            .split(':')
            .next(),
        Some("error")
    );
    assert_eq!(
        s.cli_err(&["scale", "deploy/web", "--replicas=-1"]),
        "error: The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0"
    );
    assert_eq!(
        s.cli_err(&["rollout", "status", "cm/x"]),
        "error: miniplane rollout supports deployments only, not configmaps"
    );
    assert_eq!(
        s.cli_err(&["rollout", "history", "deploy/nope"]),
        "Error from server (NotFound): deployments.apps \"nope\" not found"
    );
    assert_eq!(
        s.cli_err(&["events", "--types", "Loud"]),
        "error: valid --types are Normal or Warning, not \"Loud\""
    );
}

#[test]
fn server_down_and_missing_kubeconfig() {
    let mut s = Server::start();
    let url = s.url();
    s.stop();
    let manifest = write_file(&s, "cm.yaml", &crate::support::configmap_yaml("c", "k: v"));
    for args in [
        &["get", "pods"][..],
        &["apply", "-f", &manifest],
        &["describe", "deploy", "web"],
        &["delete", "deploy", "web"],
        &["scale", "deploy/web", "--replicas=1"],
        &["rollout", "status", "deploy/web"],
        &["events"],
    ] {
        assert_eq!(
            s.cli_err(args),
            format!("error: couldn't connect to the server at {url}: connection refused"),
            "{args:?}"
        );
    }

    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .env_clear()
            .env("HOME", s.dir().join("home"))
            .args(args)
            .output()
            .unwrap();
        crate::support::kubectl::Run {
            args: args.join(" "),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let nowhere = s.dir().join("nowhere").display().to_string();
    assert_eq!(
        one_line_error(&run(&["get", "pods", "--kubeconfig", &nowhere])),
        format!("error: stat {nowhere}: no such file or directory")
    );
    assert_eq!(
        one_line_error(&run(&["get", "pods"])),
        "error: no configuration has been provided: set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config"
    );
    // $KUBECONFIG is read when --kubeconfig is not given, and --context must exist.
    let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .env_clear()
        .env("HOME", s.dir().join("home"))
        .env("KUBECONFIG", s.kubeconfig())
        .args(["get", "pods", "--context", "elsewhere"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with("error: invalid configuration:") && stderr.contains("elsewhere"),
        "{stderr}"
    );
}
