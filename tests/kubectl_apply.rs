//! End to end with the real kubectl: the write verbs. Client-side `apply` (create, unchanged,
//! configured — a three-way strategic merge patch), `apply --server-side` (fresh, over a
//! client-side apply, conflicts and `--force-conflicts`), `apply --dry-run=server`, `edit` with a
//! scripted editor, `scale`, `set image`, `patch`, `replace`, and the bad input of each.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{Server, deployment_yaml};

/// The field managers recorded in `metadata.managedFields`, as `(manager, operation)`.
fn managers(obj: &serde_json::Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .map(|f| {
                    (
                        f["manager"].as_str().unwrap_or_default().to_owned(),
                        f["operation"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn get_deploy(s: &Server, name: &str) -> serde_json::Value {
    s.kubectl_json(&["get", "deployment", name, "--show-managed-fields"])
}

#[test]
fn apply_creates_then_unchanged_then_configured() {
    let s = Server::start();
    let out = s.apply_ok(&deployment_yaml("web", 1, "nginx:1.24"), &[]);
    assert_eq!(out.trim(), "deployment.apps/web created");
    let first = get_deploy(&s, "web");
    let annotation =
        first["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_else(|| panic!("last-applied annotation stored: {first}"));
    assert!(annotation.contains("nginx:1.24"), "{annotation}");
    assert_eq!(first["metadata"]["generation"], 1);

    let out = s.apply_ok(&deployment_yaml("web", 1, "nginx:1.24"), &[]);
    assert_eq!(out.trim(), "deployment.apps/web unchanged");
    let same = get_deploy(&s, "web");
    assert_eq!(
        same["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "an unchanged apply writes nothing"
    );

    let out = s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    assert_eq!(out.trim(), "deployment.apps/web configured");
    let changed = get_deploy(&s, "web");
    let container = &changed["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.25", "{changed}");
    // The strategic merge patch merges the container by name: its ports survive.
    assert_eq!(container["ports"][0]["containerPort"], 80, "{changed}");
    assert_eq!(changed["metadata"]["generation"], 2, "{changed}");
    assert_eq!(changed["metadata"]["uid"], first["metadata"]["uid"]);
    assert_ne!(
        changed["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    let annotation =
        changed["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap();
    assert!(annotation.contains("nginx:1.25"), "{annotation}");
    assert!(
        managers(&changed).contains(&("kubectl-client-side-apply".into(), "Update".into())),
        "{:?}",
        managers(&changed)
    );

    // A field removed from the manifest is removed from the object (the three-way part).
    let without_ports = deployment_yaml("web", 1, "nginx:1.25")
        .replace("        ports:\n        - containerPort: 80\n", "");
    s.apply_ok(&without_ports, &[]);
    let pruned = get_deploy(&s, "web");
    assert!(
        pruned["spec"]["template"]["spec"]["containers"][0]["ports"].is_null(),
        "ports removed: {pruned}"
    );
}

#[test]
fn apply_server_side_fresh_and_over_client_side_apply() {
    let s = Server::start();
    let out = s.apply_ok(&deployment_yaml("ssa", 2, "nginx:1.25"), &["--server-side"]);
    assert_eq!(out.trim(), "deployment.apps/ssa serverside-applied");
    let d = get_deploy(&s, "ssa");
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert!(
        managers(&d).contains(&("kubectl".into(), "Apply".into())),
        "{:?}",
        managers(&d)
    );
    // Server-side apply stores no last-applied annotation.
    assert!(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_null(),
        "{d}"
    );

    // Re-applying the same configuration changes nothing.
    s.apply_ok(&deployment_yaml("ssa", 2, "nginx:1.25"), &["--server-side"]);
    let again = get_deploy(&s, "ssa");
    assert_eq!(
        again["metadata"]["resourceVersion"], d["metadata"]["resourceVersion"],
        "{again}"
    );

    // Over an object made by client-side apply.
    s.apply_ok(&deployment_yaml("csa", 1, "nginx:1.24"), &[]);
    let out = s.apply_ok(&deployment_yaml("csa", 1, "nginx:1.24"), &["--server-side"]);
    assert_eq!(out.trim(), "deployment.apps/csa serverside-applied");
    let out = s.apply_ok(&deployment_yaml("csa", 1, "nginx:1.26"), &["--server-side"]);
    assert_eq!(out.trim(), "deployment.apps/csa serverside-applied");
    let d = get_deploy(&s, "csa");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26",
        "{d}"
    );
    assert!(
        managers(&d)
            .iter()
            .any(|(m, op)| m == "kubectl" && op == "Apply"),
        "{:?}",
        managers(&d)
    );
}

#[test]
fn apply_server_side_conflict_and_force_conflicts() {
    let s = Server::start();
    s.apply_ok(
        &deployment_yaml("contended", 2, "nginx:1.25"),
        &["--server-side"],
    );

    // Another manager sets a field "kubectl" owns to a different value: 409 Conflict.
    let run = s.apply_yaml(
        &deployment_yaml("contended", 3, "nginx:1.25"),
        &["--server-side", "--field-manager=ops"],
    );
    assert!(!run.ok(), "expected a conflict: {run}");
    assert!(run.stderr.contains("Apply failed with 1 conflict"), "{run}");
    assert!(run.stderr.contains(".spec.replicas"), "{run}");
    assert_eq!(
        get_deploy(&s, "contended")["spec"]["replicas"],
        2,
        "nothing written"
    );

    let out = s.apply_ok(
        &deployment_yaml("contended", 3, "nginx:1.25"),
        &["--server-side", "--field-manager=ops", "--force-conflicts"],
    );
    assert_eq!(out.trim(), "deployment.apps/contended serverside-applied");
    let d = get_deploy(&s, "contended");
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    let ops = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["manager"] == "ops")
        .unwrap_or_else(|| panic!("ops manager recorded: {d}"));
    assert!(
        ops["fieldsV1"]["f:spec"]["f:replicas"].is_object(),
        "ops owns .spec.replicas: {ops}"
    );
    // ...and "kubectl" no longer does.
    let kubectl = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["manager"] == "kubectl")
        .unwrap_or_else(|| panic!("kubectl manager still recorded: {d}"));
    assert!(
        kubectl["fieldsV1"]["f:spec"]["f:replicas"].is_null(),
        "{kubectl}"
    );

    // The same value is not a conflict: both managers then co-own the field.
    let out = s.apply_ok(
        &deployment_yaml("contended", 3, "nginx:1.25"),
        &["--server-side", "--field-manager=third"],
    );
    assert!(out.contains("serverside-applied"), "{out}");
}

#[test]
fn apply_dry_run_server_persists_nothing() {
    let s = Server::start();
    let out = s.apply_ok(
        &deployment_yaml("dry", 1, "nginx:1.24"),
        &["--dry-run=server"],
    );
    assert_eq!(out.trim(), "deployment.apps/dry created (server dry run)");
    let err = s.kubectl_err(&["get", "deployment", "dry"]);
    assert!(err.contains("not found"), "{err}");

    s.apply_ok(&deployment_yaml("dry", 1, "nginx:1.24"), &[]);
    let before = get_deploy(&s, "dry");
    let out = s.apply_ok(
        &deployment_yaml("dry", 1, "nginx:1.25"),
        &["--dry-run=server"],
    );
    assert_eq!(
        out.trim(),
        "deployment.apps/dry configured (server dry run)"
    );
    // The dry-run response shows the would-be object...
    let preview = s.apply_ok(
        &deployment_yaml("dry", 1, "nginx:1.25"),
        &["--dry-run=server", "-o", "json"],
    );
    let preview: serde_json::Value = serde_json::from_str(&preview).unwrap();
    assert_eq!(
        preview["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    // ...but the stored one did not change.
    let after = get_deploy(&s, "dry");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.24"
    );

    // Server-side apply dry run, too.
    let out = s.apply_ok(
        &deployment_yaml("dry", 4, "nginx:1.24"),
        &["--server-side", "--dry-run=server"],
    );
    assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    assert_eq!(get_deploy(&s, "dry")["spec"]["replicas"], 1);

    // Invalid input is still rejected in a dry run (validation runs).
    let run = s.apply_yaml(
        &deployment_yaml("dry", 1, "nginx:1.24").replace("replicas: 1", "replicas: -3"),
        &["--dry-run=server"],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("spec.replicas: Invalid value: -3"),
        "{run}"
    );
}

/// Writes an editor script that runs `sed -i <expr>` on the file kubectl hands it.
fn editor(s: &Server, name: &str, sed: &str) -> String {
    let path = s.dir().join(name);
    std::fs::write(&path, format!("#!/bin/sh\nexec sed -i '{sed}' \"$1\"\n")).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path.display().to_string()
}

#[test]
fn edit_with_a_scripted_editor() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);

    let ed = editor(&s, "edit.sh", "s/replicas: 1$/replicas: 2/");
    let run = s.kubectl_run(&["edit", "deployment", "web"], None, &[("EDITOR", &ed)]);
    assert!(run.ok(), "{run}");
    assert_eq!(run.stdout.trim(), "deployment.apps/web edited", "{run}");
    let d = get_deploy(&s, "web");
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(d["metadata"]["generation"], 2, "{d}");
    assert!(
        managers(&d).contains(&("kubectl-edit".into(), "Update".into())),
        "{:?}",
        managers(&d)
    );

    // No change: nothing is sent.
    let run = s.kubectl_run(&["edit", "deployment", "web"], None, &[("EDITOR", "true")]);
    assert!(run.ok(), "{run}");
    assert!(
        run.stderr.contains("Edit cancelled, no changes made."),
        "{run}"
    );
    assert_eq!(
        get_deploy(&s, "web")["metadata"]["resourceVersion"],
        d["metadata"]["resourceVersion"]
    );

    // Bad input: an edit the server rejects leaves the object as it was and fails.
    let bad = editor(&s, "bad.sh", "s/replicas: 2$/replicas: -1/");
    let run = s.kubectl_run(&["edit", "deployment", "web"], None, &[("EDITOR", &bad)]);
    assert!(!run.ok(), "{run}");
    assert_eq!(get_deploy(&s, "web")["spec"]["replicas"], 2);
    // kubectl keeps the rejected edit, headed by the server's validation error, in TMPDIR.
    let kept: String = std::fs::read_dir(s.dir().join("tmp"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect();
    assert!(
        kept.contains("spec.replicas: Invalid value: -1"),
        "{run}\nkept edit:\n{kept}"
    );
}

#[test]
fn scale_writes_through_the_scale_subresource() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.25"), &[]);
    let out = s.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let d = get_deploy(&s, "web");
    assert_eq!(d["spec"]["replicas"], 5, "{d}");
    assert_eq!(d["metadata"]["generation"], 2, "{d}");

    // The Scale object itself (autoscaling/v1).
    let scale = s.get("/apis/apps/v1/namespaces/default/deployments/web/scale");
    assert_eq!(scale.status, 200, "{}", scale.text());
    let scale = scale.json();
    assert_eq!(scale["kind"], "Scale", "{scale}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1", "{scale}");
    assert_eq!(scale["spec"]["replicas"], 5, "{scale}");
    assert_eq!(scale["status"]["selector"], "app=web", "{scale}");
    assert_eq!(scale["metadata"]["uid"], d["metadata"]["uid"], "{scale}");

    // Preconditions: --current-replicas must match.
    let err = s.kubectl_err(&[
        "scale",
        "deployment/web",
        "--current-replicas=2",
        "--replicas=3",
    ]);
    assert!(err.contains("Expected replicas to be 2, was 5"), "{err}");
    // Missing object.
    let err = s.kubectl_err(&["scale", "deployment/nope", "--replicas=3"]);
    assert!(err.contains("deployments.apps \"nope\" not found"), "{err}");
    // Negative replicas through the raw API: 422.
    let resp = s.http(
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
        Some("application/merge-patch+json"),
        br#"{"spec":{"replicas":-1}}"#,
    );
    let msg = resp.expect_status(422, "Invalid");
    assert!(msg.contains("Invalid value: -1"), "{msg}");
    assert_eq!(get_deploy(&s, "web")["spec"]["replicas"], 5);
}

#[test]
fn set_image_patches_one_container() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.24"), &[]);
    let out = s.kubectl_ok(&["set", "image", "deployment/web", "web=nginx:1.26"]);
    assert_eq!(out.trim(), "deployment.apps/web image updated");
    let d = get_deploy(&s, "web");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.26", "{d}");
    assert_eq!(
        c["ports"][0]["containerPort"], 80,
        "a strategic merge keeps the ports: {d}"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{d}"
    );
    assert!(
        managers(&d).contains(&("kubectl-set".into(), "Update".into())),
        "{:?}",
        managers(&d)
    );

    let err = s.kubectl_err(&["set", "image", "deployment/web", "nope=busybox"]);
    assert!(
        err.contains("unable to find container named \"nope\""),
        "{err}"
    );
}

#[test]
fn patch_types_and_replace() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 1, "nginx:1.24"), &[]);
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"front"}}}"#,
    ]);
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ]);
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:1.36"}]}}}}"#,
    ]);
    let d = get_deploy(&s, "web");
    assert_eq!(d["metadata"]["labels"]["tier"], "front", "{d}");
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "strategic merge added a container by name: {d}"
    );
    assert!(
        names.contains(&"web") && names.contains(&"side"),
        "{names:?}"
    );

    // A failed JSON patch test op changes nothing.
    let run = s.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":9},{"op":"replace","path":"/spec/replicas","value":7}]"#,
    ]);
    assert!(!run.ok(), "{run}");
    assert_eq!(get_deploy(&s, "web")["spec"]["replicas"], 3);

    // replace (PUT) with the current object, then with a stale resourceVersion: 409.
    let mut current = get_deploy(&s, "web");
    current["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    current["spec"]["replicas"] = 4.into();
    let run = s.kubectl_run(&["replace", "-f", "-"], Some(&current.to_string()), &[]);
    assert!(run.ok(), "{run}");
    assert_eq!(run.stdout.trim(), "deployment.apps/web replaced");
    current["spec"]["replicas"] = 6.into();
    let run = s.kubectl_run(&["replace", "-f", "-"], Some(&current.to_string()), &[]);
    assert!(!run.ok(), "{run}");
    assert!(run.stderr.contains("Error from server (Conflict)"), "{run}");
    assert!(
        run.stderr.contains(
            "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        "{run}"
    );
    assert_eq!(get_deploy(&s, "web")["spec"]["replicas"], 4);
}

/// The conflict message names the other manager as Kubernetes prints it
/// (`apimachinery/pkg/util/managedfields/internal/conflict.go` `printManager`): an `Apply`
/// manager as `"kubectl"`, an `Update` manager as `"kubectl-client-side-apply" using apps/v1`.
#[test]
fn apply_server_side_conflict_message() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &["--server-side"]);
    let run = s.apply_yaml(
        &deployment_yaml("web", 3, "nginx:1.25"),
        &["--server-side", "--field-manager=ops"],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "error: Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"
        ),
        "{run}"
    );

    s.apply_ok(&deployment_yaml("csa", 2, "nginx:1.25"), &[]);
    let run = s.apply_yaml(
        &deployment_yaml("csa", 3, "nginx:1.25"),
        &["--server-side", "--field-manager=ops"],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1"
        ) && run.stderr.contains(": .spec.replicas"),
        "{run}"
    );
}

/// A manifest with two containers, an env var and an extra label, for the removal tests.
fn rich_deployment(with_extras: bool) -> String {
    let extras_label = if with_extras { "    tier: front\n" } else { "" };
    let extras_env = if with_extras {
        "        env:\n        - name: MODE\n          value: fast\n"
    } else {
        ""
    };
    let sidecar = if with_extras {
        "      - name: side\n        image: busybox:1.36\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: rich
  labels:
    app: rich
{extras_label}spec:
  replicas: 1
  selector:
    matchLabels:
      app: rich
  template:
    metadata:
      labels:
        app: rich
    spec:
      containers:
      - name: main
        image: nginx:1.25
{extras_env}{sidecar}"
    )
}

/// What a re-apply removes: a field dropped from the manifest is deleted from the object when
/// this applier owned it — by the three-way strategic merge patch (`$patch: delete`,
/// `$setElementOrder`) for client-side apply, by field ownership for server-side apply.
#[test]
fn reapply_removes_what_the_manifest_dropped() {
    for mode in [&[][..], &["--server-side"][..]] {
        let s = Server::start();
        s.apply_ok(&rich_deployment(true), mode);
        let d = get_deploy(&s, "rich");
        assert_eq!(d["metadata"]["labels"]["tier"], "front", "{d}");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(2),
            "{d}"
        );
        s.apply_ok(&rich_deployment(false), mode);
        let d = get_deploy(&s, "rich");
        assert!(d["metadata"]["labels"]["tier"].is_null(), "{mode:?}: {d}");
        let containers = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(containers.len(), 1, "{mode:?}: {d}");
        assert_eq!(containers[0]["name"], "main");
        // (Kubernetes prints no `env` at all: Go's `omitempty` drops an empty list; the server
        // here may keep `"env": []`, which clients read the same.)
        let env = &containers[0]["env"];
        assert!(
            env.is_null() || env.as_array().is_some_and(Vec::is_empty),
            "{mode:?}: {d}"
        );
        // Defaults the server filled in stay (they are not the applier's to remove).
        assert_eq!(containers[0]["imagePullPolicy"], "IfNotPresent", "{d}");
    }
}
