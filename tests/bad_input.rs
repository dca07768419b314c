//! Bad input, through kubectl and raw HTTP: every rejection must be a Kubernetes `Status` with
//! the code, reason and message Kubernetes uses (`staging/src/k8s.io/apimachinery/pkg/api/errors/
//! errors.go`, validation messages from `apimachinery/pkg/util/validation`), kubectl must print
//! what it prints against a real cluster, and the server must stay up after all of it.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{Server, deployment_yaml};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn configmap(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[test]
fn invalid_name_is_422_with_the_dns_subdomain_message() {
    let s = Server::start();
    let run = s.apply_yaml(&deployment_yaml("Bad_Name", 1, "nginx"), &[]);
    assert!(!run.ok(), "{run}");
    assert!(run.stderr.contains("is invalid"), "{run}");
    assert!(
        run.stderr.contains(
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ),
        "{run}"
    );

    let mut body: serde_json::Value = serde_json::from_str(&s.apply_ok(
        &deployment_yaml("x", 1, "nginx"),
        &["--dry-run=client", "-o", "json"],
    ))
    .unwrap();
    body["metadata"]["name"] = "Bad_Name".into();
    let resp = s.send_json("POST", DEPLOYMENTS, &body);
    let msg = resp.expect_invalid("Deployment", "Bad_Name", "metadata.name");
    assert!(
        msg.starts_with(
            "Deployment.apps \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
        ),
        "{msg}"
    );
    assert_eq!(resp.json()["details"]["group"], "apps");
}

/// ConfigMap validation (`pkg/apis/core/validation/validation.go` `ValidateConfigMap`): the
/// name, and at most 1 MiB of data.
#[test]
fn configmap_validation() {
    let s = Server::start();
    let resp = s.send_json("POST", CONFIGMAPS, &configmap("Bad_Name"));
    let msg = resp.expect_invalid("ConfigMap", "Bad_Name", "metadata.name");
    assert!(
        msg.starts_with(
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
        ),
        "{msg}"
    );

    // Missing name (and no generateName): 422 Required... from kubectl it is a client error.
    let resp = s.send_json(
        "POST",
        CONFIGMAPS,
        &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
    );
    let msg = resp.expect_status(422, "Invalid");
    assert!(
        msg.contains("metadata.name: Required value: name or generateName is required"),
        "{msg}"
    );
    let mut cm = configmap("big");
    cm["data"]["k"] = "x".repeat(1024 * 1024 + 10).into();
    let resp = s.send_json("POST", CONFIGMAPS, &cm);
    let msg = resp.expect_status(422, "Invalid");
    assert!(
        // Kubernetes >= 1.30 wording of field.TooLong (the path is the whole object).
        msg.contains("Too long: may not be more than 1048576 bytes"),
        "{msg}"
    );
}

/// Service addresses (`pkg/registry/core/service/storage/alloc.go`): a node port or cluster
/// IP another Service holds, or one outside the ranges, is refused with kube-apiserver's words,
/// as kubectl prints them; deleting the holder frees it.
#[test]
fn taken_or_out_of_range_service_addresses_are_refused() {
    let s = Server::start();
    s.kubectl_ok(&[
        "create",
        "service",
        "nodeport",
        "first",
        "--tcp=80",
        "--node-port=30080",
    ]);
    let err = s.kubectl_err(&[
        "create",
        "service",
        "nodeport",
        "second",
        "--tcp=80",
        "--node-port=30080",
    ]);
    assert!(
        err.contains(
            "Service \"second\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        ),
        "{err}"
    );
    let ip = s.kubectl_ok(&[
        "get",
        "service",
        "first",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let err = s.kubectl_err(&[
        "create",
        "service",
        "clusterip",
        "third",
        "--tcp=80",
        &format!("--clusterip={ip}"),
    ]);
    assert!(
        err.contains(&format!(
            "spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
        )),
        "{err}"
    );
    let err = s.kubectl_err(&[
        "create",
        "service",
        "nodeport",
        "low",
        "--tcp=80",
        "--node-port=80",
    ]);
    assert!(
        err.contains("spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"),
        "{err}"
    );
    s.kubectl_ok(&["delete", "service", "first"]);
    // The allocations follow the store: the port is free once the delete is seen.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let run = s.kubectl(&[
            "create",
            "service",
            "nodeport",
            "second",
            "--tcp=80",
            "--node-port=30080",
        ]);
        if run.ok() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{run}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn generate_name_gets_a_random_suffix() {
    let s = Server::start();
    let resp = s.send_json(
        "POST",
        CONFIGMAPS,
        &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
    );
    assert_eq!(resp.status, 201, "{}", resp.text());
    let name = resp.json()["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(
        name.starts_with("gen-") && name.len() == "gen-".len() + 5,
        "{name}"
    );
    s.kubectl_ok(&["get", "configmap", &name]);
}

#[test]
fn selector_must_match_the_template() {
    let s = Server::start();
    let yaml = deployment_yaml("web", 1, "nginx").replace(
        "      labels:\n        app: web\n",
        "      labels:\n        app: other\n",
    );
    let run = s.apply_yaml(&yaml, &[]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"),
        "{run}"
    );
    let negative = deployment_yaml("web", 1, "nginx").replace("replicas: 1", "replicas: -1");
    let run = s.apply_yaml(&negative, &[]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        "{run}"
    );
    // A pod without containers.
    let run = s.apply_yaml(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: empty\nspec:\n  containers: []\n",
        &[],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("spec.containers: Required value"),
        "{run}"
    );
    let err = s.kubectl_err(&["get", "deployment", "web"]);
    assert!(err.contains("not found"), "nothing was created: {err}");
}

#[test]
fn unknown_fields_strict_warn_and_ignore() {
    let s = Server::start();
    let yaml = deployment_yaml("web", 1, "nginx")
        .replace("  replicas: 1\n", "  replicas: 1\n  foo: bar\n");
    let run = s.apply_yaml(&yaml, &["--validate=strict"]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("strict decoding error: unknown field \"spec.foo\""),
        "{run}"
    );
    assert!(
        s.kubectl_err(&["get", "deployment", "web"])
            .contains("not found")
    );

    let run = s.apply_yaml(&yaml, &["--validate=warn"]);
    assert!(run.ok(), "{run}");
    assert!(
        run.stderr.contains("unknown field \"spec.foo\""),
        "a warning: {run}"
    );
    s.kubectl_ok(&["delete", "deployment", "web"]);

    let run = s.apply_yaml(&yaml, &["--validate=false"]);
    assert!(run.ok(), "{run}");
    assert_eq!(run.stdout.trim(), "deployment.apps/web created");
    let d = s.kubectl_json(&["get", "deployment", "web"]);
    assert!(d["spec"]["foo"].is_null(), "dropped: {d}");
}

/// Unknown fields on every kind, not only those with a typed strategy: `Strict` rejects them
/// (400), the default (`Warn`) drops them with a `Warning` header, nothing stores them.
#[test]
fn unknown_fields_are_never_stored() {
    let s = Server::start();
    // Raw: fieldValidation=Strict on POST, and the Warning header for the default (Warn).
    let mut body = configmap("strict");
    body["bogus"] = 1.into();
    let resp = s.send_json(
        "POST",
        &format!("{CONFIGMAPS}?fieldValidation=Strict"),
        &body,
    );
    let msg = resp.expect_status(400, "BadRequest");
    assert!(
        msg.contains("strict decoding error: unknown field \"bogus\""),
        "{msg}"
    );
    let resp = s.send_json("POST", CONFIGMAPS, &body);
    assert_eq!(resp.status, 201, "{}", resp.text());
    let warning = resp.header("warning").unwrap_or_default();
    assert!(
        warning.contains("unknown field \\\"bogus\\\"") || warning.contains("unknown field"),
        "{:?}",
        resp.headers
    );
    let stored = s.get(&format!("{CONFIGMAPS}/strict")).json();
    assert!(stored["bogus"].is_null(), "{stored}");
}

#[test]
fn malformed_bodies_are_400() {
    let s = Server::start();
    for body in [&b"{not json"[..], b"", b"[1,2]", b"\"a string\""] {
        let resp = s.http("POST", CONFIGMAPS, Some("application/json"), body);
        resp.expect_status(400, "BadRequest");
    }
    // Valid JSON, wrong kind for the URL.
    let resp = s.send_json(
        "POST",
        CONFIGMAPS,
        &serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    // Namespace in the body differs from the URL.
    let mut cm = configmap("elsewhere");
    cm["metadata"]["namespace"] = "other".into();
    let msg = s
        .send_json("POST", CONFIGMAPS, &cm)
        .expect_status(400, "BadRequest");
    assert!(
        msg.contains(
            "the namespace of the provided object does not match the namespace sent on the request"
        ),
        "{msg}"
    );
    // Malformed patches.
    s.send_json("POST", CONFIGMAPS, &configmap("c"))
        .expect_created();
    let resp = s.http(
        "PATCH",
        &format!("{CONFIGMAPS}/c"),
        Some("application/merge-patch+json"),
        b"{oops",
    );
    resp.expect_status(400, "BadRequest");
    let resp = s.http(
        "PATCH",
        &format!("{CONFIGMAPS}/c"),
        Some("application/json-patch+json"),
        br#"{"op":"add"}"#,
    );
    assert!(
        resp.status == 400 || resp.status == 422,
        "{} {}",
        resp.status,
        resp.text()
    );
    // kubectl's own parser rejects malformed YAML before sending anything.
    let run = s.apply_yaml(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n",
        &[],
    );
    assert!(!run.ok(), "{run}");
}

#[test]
fn wrong_content_type_is_415() {
    let s = Server::start();
    let body = configmap("c").to_string();
    let resp = s.http("POST", CONFIGMAPS, Some("text/plain"), body.as_bytes());
    resp.expect_status(415, "UnsupportedMediaType");
    s.send_json("POST", CONFIGMAPS, &configmap("c"))
        .expect_created();
    let resp = s.http(
        "PATCH",
        &format!("{CONFIGMAPS}/c"),
        Some("application/json"),
        br#"{"data":{"k":"w"}}"#,
    );
    let msg = resp.expect_status(415, "UnsupportedMediaType");
    assert!(
        msg.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json"),
        "{msg}"
    );
    // No Content-Type on POST is JSON (the Python client sends none).
    let resp = s.http(
        "POST",
        CONFIGMAPS,
        None,
        configmap("plain").to_string().as_bytes(),
    );
    assert_eq!(resp.status, 201, "{}", resp.text());
}

#[test]
fn bodies_over_3_mib_are_413() {
    let s = Server::start();
    let mut cm = configmap("huge");
    cm["data"]["k"] = "x".repeat(3 * 1024 * 1024 + 1024).into();
    let resp = s.send_json("POST", CONFIGMAPS, &cm);
    resp.expect_status(413, "RequestEntityTooLarge");
    // The server still answers afterwards.
    s.kubectl_ok(&["get", "configmaps"]);
}

#[test]
fn unknown_resources_and_missing_objects_are_404() {
    let s = Server::start();
    let err = s.kubectl_err(&["get", "foos"]);
    assert!(
        err.contains("error: the server doesn't have a resource type \"foos\""),
        "{err}"
    );
    let err = s.kubectl_err(&["get", "deployment", "x"]);
    assert!(
        err.contains("Error from server (NotFound): deployments.apps \"x\" not found"),
        "{err}"
    );
    let err = s.kubectl_err(&["get", "pod", "x"]);
    assert!(
        err.contains("Error from server (NotFound): pods \"x\" not found"),
        "{err}"
    );

    let resp = s.get(&format!("{DEPLOYMENTS}/x"));
    let msg = resp.expect_status(404, "NotFound");
    assert_eq!(msg, "deployments.apps \"x\" not found");
    let status = resp.json();
    assert_eq!(status["details"]["name"], "x", "{status}");
    assert_eq!(status["details"]["group"], "apps", "{status}");
    assert_eq!(status["details"]["kind"], "deployments", "{status}");
    let msg = s
        .get("/apis/apps/v1/namespaces/default/foos")
        .expect_status(404, "NotFound");
    assert_eq!(msg, "the server could not find the requested resource");
    s.get("/apis/nosuch.group/v1/widgets")
        .expect_status(404, "NotFound");
    s.get("/nonsense").expect_status(404, "NotFound");
    // PUT/PATCH/DELETE of a missing object.
    s.send_json("PUT", &format!("{CONFIGMAPS}/ghost"), &configmap("ghost"))
        .expect_status(404, "NotFound");
    s.http(
        "PATCH",
        &format!("{CONFIGMAPS}/ghost"),
        Some("application/merge-patch+json"),
        b"{}",
    )
    .expect_status(404, "NotFound");
    s.http("DELETE", &format!("{CONFIGMAPS}/ghost"), None, b"")
        .expect_status(404, "NotFound");
}

#[test]
fn conflicts_are_409() {
    let s = Server::start();
    let created = s
        .send_json("POST", CONFIGMAPS, &configmap("c"))
        .expect_created();
    let msg = s
        .send_json("POST", CONFIGMAPS, &configmap("c"))
        .expect_status(409, "AlreadyExists");
    assert_eq!(msg, "configmaps \"c\" already exists");
    let run = s.create_yaml(&support::configmap_yaml("c", "k: v"));
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("Error from server (AlreadyExists)")
            && run.stderr.contains("configmaps \"c\" already exists"),
        "{run}"
    );

    let mut update = created.clone();
    update["data"]["k"] = "v2".into();
    let updated = s.send_json("PUT", &format!("{CONFIGMAPS}/c"), &update);
    assert_eq!(updated.status, 200, "{}", updated.text());
    // The same update again carries the old resourceVersion: stale.
    let resp = s.send_json("PUT", &format!("{CONFIGMAPS}/c"), &update);
    let msg = resp.expect_status(409, "Conflict");
    assert_eq!(
        msg,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // A patch with a stale resourceVersion, too.
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let patch = format!(r#"{{"metadata":{{"resourceVersion":"{rv}"}},"data":{{"k":"v3"}}}}"#);
    s.http(
        "PATCH",
        &format!("{CONFIGMAPS}/c"),
        Some("application/merge-patch+json"),
        patch.as_bytes(),
    )
    .expect_status(409, "Conflict");
    // Delete preconditions.
    let pre = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}});
    s.send_json("DELETE", &format!("{CONFIGMAPS}/c"), &pre)
        .expect_status(409, "Conflict");
    let pre = serde_json::json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    s.send_json("DELETE", &format!("{CONFIGMAPS}/c"), &pre)
        .expect_status(409, "Conflict");
    // Renaming through PUT is refused (the name in the body must match the URL).
    let mut renamed = updated.json();
    renamed["metadata"]["name"] = "d".into();
    let resp = s.send_json("PUT", &format!("{CONFIGMAPS}/c"), &renamed);
    assert!(
        resp.status == 400 || resp.status == 422,
        "{} {}",
        resp.status,
        resp.text()
    );
    assert_eq!(
        s.kubectl_json(&["get", "configmap", "c"])["data"]["k"],
        "v2"
    );
}

#[test]
fn bad_query_parameters_are_rejected() {
    let s = Server::start();
    s.get(&format!("{CONFIGMAPS}?labelSelector=a%20in%20(b"))
        .expect_status(400, "BadRequest");
    let msg = s
        .get(&format!("{CONFIGMAPS}?fieldSelector=foo%3Dbar"))
        .expect_status(400, "BadRequest");
    assert!(msg.contains("field label not supported: foo"), "{msg}");
    let resp = s.get(&format!("{CONFIGMAPS}?limit=abc"));
    assert_eq!(resp.status, 400, "{}", resp.text());
    let resp = s.http(
        "POST",
        &format!("{CONFIGMAPS}?dryRun=Sometimes"),
        Some("application/json"),
        configmap("x").to_string().as_bytes(),
    );
    assert!(
        resp.status == 400 || resp.status == 422,
        "{} {}",
        resp.status,
        resp.text()
    );
    // `ValidateCreateOptions` (apimachinery `pkg/apis/meta/v1/validation`): 422 on the options.
    let msg = s
        .http(
            "POST",
            &format!("{CONFIGMAPS}?fieldValidation=Maybe"),
            Some("application/json"),
            configmap("x").to_string().as_bytes(),
        )
        .expect_status(422, "Invalid");
    assert_eq!(
        msg,
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Maybe\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
    // Unknown query parameters are ignored, as kubectl's `timeout=32s`.
    assert_eq!(
        s.get(&format!("{CONFIGMAPS}?timeout=32s&pretty=true"))
            .status,
        200
    );
}

/// `resourceVersionMatch` without `resourceVersion` fails list-option validation
/// (`apimachinery/pkg/apis/meta/internalversion/validation` `ValidateListOptions`), which the
/// handler turns into 422 Invalid of kind `ListOptions` (`endpoints/handlers/get.go`).
#[test]
fn resource_version_match_without_resource_version_is_422() {
    let s = Server::start();
    let resp = s.get(&format!("{CONFIGMAPS}?resourceVersionMatch=Exact"));
    let msg = resp.expect_status(422, "Invalid");
    assert!(
        msg.contains("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"),
        "{msg}"
    );
}

#[test]
fn the_server_stays_up_after_abuse() {
    let mut s = Server::start();
    let long = "a".repeat(70_000);
    for (method, path, ct, body) in [
        (
            "POST",
            CONFIGMAPS.to_owned(),
            Some("application/json"),
            b"{".to_vec(),
        ),
        (
            "POST",
            CONFIGMAPS.to_owned(),
            Some("application/json"),
            vec![0xff, 0xfe, 0x00],
        ),
        ("GET", format!("{CONFIGMAPS}/{long}"), None, vec![]),
        (
            "DELETE",
            CONFIGMAPS.to_owned(),
            Some("application/json"),
            b"{\"propagationPolicy\":\"Sideways\"}".to_vec(),
        ),
        (
            "PUT",
            CONFIGMAPS.to_owned(),
            Some("application/json"),
            b"{}".to_vec(),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1&resourceVersion=notanumber"
                .to_owned(),
            None,
            vec![],
        ),
        (
            "PATCH",
            format!("{CONFIGMAPS}/x"),
            Some("application/apply-patch+yaml"),
            b"{: :".to_vec(),
        ),
        ("BREW", "/api".to_owned(), None, vec![]),
    ] {
        let resp = s.http(method, &path, ct, &body);
        assert!(
            resp.status >= 400 && resp.status < 500,
            "{method} {}: {} {}",
            &path[..path.len().min(80)],
            resp.status,
            resp.text()
        );
    }
    assert!(s.is_running());
    s.apply_ok(&support::configmap_yaml("after", "a: b"), &[]);
    assert_eq!(
        s.kubectl_json(&["get", "configmap", "after"])["data"]["a"],
        "b"
    );
}
