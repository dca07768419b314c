//! End to end with the real kubectl: CustomResourceDefinitions. A CRD is created and becomes
//! served (discovery, OpenAPI, every name form), custom resources are defaulted, pruned and
//! validated by the CRD's schema, use the status and scale subresources and printer columns,
//! come back after an API server restart, and go away with their CRD.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{DEADLINE, Server, eventually};

/// The example Website CRD (also used by the example operators).
pub const WEBSITE_CRD: &str = include_str!("../examples/website/crd.yaml");

/// Creates the Website CRD and waits until it is established.
pub fn install_website_crd(s: &Server) {
    s.apply_ok(WEBSITE_CRD, &[]);
    s.kubectl_ok(&[
        "wait",
        "--for=condition=established",
        "crd/websites.demo.miniplane.dev",
        "--timeout=30s",
    ]);
}

fn website(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: demo.miniplane.dev/v1\nkind: Website\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[test]
fn crd_is_served_under_every_name() {
    let s = Server::start();
    install_website_crd(&s);
    let crd = s.kubectl_json(&["get", "crd", "websites.demo.miniplane.dev"]);
    let conditions: Vec<(String, String, String)> = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        vec![
            ("NamesAccepted".into(), "True".into(), "NoConflicts".into()),
            (
                "Established".into(),
                "True".into(),
                "InitialNamesAccepted".into()
            ),
        ]
    );
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WebsiteList");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    assert_eq!(
        crd["metadata"]["finalizers"],
        serde_json::json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let crds = s.kubectl_ok(&["get", "crds"]);
    assert!(crds.starts_with("NAME"), "{crds}");
    assert!(crds.contains("CREATED AT"), "{crds}");

    s.apply_ok(&website("blog", "  image: nginx:1.27\n"), &[]);
    for name in [
        "websites",
        "website",
        "ws",
        "Website",
        "websites.demo.miniplane.dev",
        "websites.v1.demo.miniplane.dev",
    ] {
        let out = s.kubectl_ok(&["get", name]);
        assert!(
            out.lines().nth(1).unwrap_or("").starts_with("blog "),
            "get {name}: {out}"
        );
    }
    let resources = s.kubectl_ok(&["api-resources", "--api-group=demo.miniplane.dev"]);
    let row: Vec<&str> = resources
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        vec!["websites", "ws", "demo.miniplane.dev/v1", "true", "Website"],
        "{resources}"
    );
    let explain = s.kubectl_ok(&["explain", "website.spec"]);
    assert!(explain.contains("The site the owner wants."), "{explain}");
    assert!(explain.contains("image\t<string> -required-"), "{explain}");
    let explain = s.kubectl_ok(&["explain", "website"]);
    assert!(
        explain.contains("A static website served by nginx."),
        "{explain}"
    );
    assert!(
        explain.contains("APIVersion defines the versioned schema of this representation"),
        "{explain}"
    );
    let explain = s.kubectl_ok(&["explain", "ws.spec.replicas"]);
    assert!(
        explain.contains("How many copies serve the site."),
        "{explain}"
    );
    // Category `all`.
    let all = s.kubectl_ok(&["get", "all"]);
    assert!(all.contains("website.demo.miniplane.dev/blog"), "{all}");
}

#[test]
fn custom_resources_are_defaulted_pruned_and_validated() {
    let s = Server::start();
    install_website_crd(&s);
    // kubectl's default is strict field validation: unknown fields are refused.
    let strict = s.apply_yaml(&website("blog", "  image: nginx\n  colour: red\n"), &[]);
    assert!(!strict.ok(), "{strict}");
    assert!(
        strict.stderr.contains(
            "Website in version \"v1\" cannot be handled as a Website: strict decoding error: unknown field \"spec.colour\""
        ),
        "{strict}"
    );
    // With warnings only, the field is pruned and the schema's defaults are filled in.
    let warn = s.apply_yaml(
        &website("blog", "  image: nginx\n  colour: red\n"),
        &["--validate=warn"],
    );
    assert!(warn.ok(), "{warn}");
    assert!(
        warn.stderr.contains("unknown field \"spec.colour\""),
        "{warn}"
    );
    let blog = s.kubectl_json(&["get", "website", "blog"]);
    assert_eq!(
        blog["spec"],
        serde_json::json!({"image": "nginx", "replicas": 1, "port": 80, "theme": "light"})
    );
    let bad = s.apply_yaml(
        &website("bad", "  replicas: 11\n  theme: pink\n  port: \"http\"\n"),
        &[],
    );
    assert!(!bad.ok(), "{bad}");
    assert!(
        bad.stderr.contains("The Website \"bad\" is invalid: "),
        "{bad}"
    );
    for line in [
        "* spec.image: Required value",
        "* spec.port: Invalid value: \"string\": spec.port in body must be of type integer: \"string\"",
        "* spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        "* spec.theme: Unsupported value: \"pink\": supported values: \"light\", \"dark\"",
    ] {
        assert!(bad.stderr.contains(line), "missing {line:?}: {bad}");
    }
    // A raw create shows the message of a length rule.
    let raw = s.kubectl_run(
        &["create", "--raw", "/apis/demo.miniplane.dev/v1/namespaces/default/websites", "-f", "-"],
        Some(r#"{"apiVersion":"demo.miniplane.dev/v1","kind":"Website","metadata":{"name":"x"},"spec":{"image":""}}"#),
        &[],
    );
    assert!(!raw.ok(), "{raw}");
    assert!(
        raw.stderr
            .contains("spec.image in body should be at least 1 chars long"),
        "{raw}"
    );
}

#[test]
fn status_scale_columns_patches_and_watch() {
    let s = Server::start();
    install_website_crd(&s);
    let mut watch = s.kubectl_spawn(&["get", "websites", "--watch", "--output-watch-events"]);
    s.apply_ok(
        &website("blog", "  image: nginx:1.27\n  replicas: 2\n"),
        &[],
    );
    watch.wait_line("watch sees the new website", DEADLINE, |l| {
        l.starts_with("ADDED") && l.contains("blog")
    });
    // Status only through /status: a main-resource write keeps it, and generation counts spec
    // changes only.
    s.kubectl_ok(&[
        "patch", "website", "blog", "--subresource=status", "--type=merge", "-p",
        r#"{"status":{"availableReplicas":2,"observedGeneration":1,"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    s.kubectl_ok(&[
        "patch",
        "website",
        "blog",
        "--type=merge",
        "-p",
        r#"{"spec":{"image":"nginx:1.28"},"status":{"availableReplicas":0}}"#,
    ]);
    let blog = s.kubectl_json(&["get", "website", "blog"]);
    assert_eq!(blog["status"]["availableReplicas"], 2);
    assert_eq!(blog["metadata"]["generation"], 2);
    let table = s.kubectl_ok(&["get", "websites"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        vec!["NAME", "IMAGE", "REPLICAS", "AVAILABLE", "READY", "AGE"]
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        &["blog", "nginx:1.28", "2", "2", "True"],
        "{table}"
    );
    // The scale subresource follows the CRD's paths.
    s.kubectl_ok(&["scale", "website", "blog", "--replicas=4"]);
    let scale = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/demo.miniplane.dev/v1/namespaces/default/websites/blog/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["replicas"], 2);
    // JSON patch and server-side apply work; strategic merge is refused as Kubernetes does.
    s.kubectl_ok(&[
        "patch",
        "website",
        "blog",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/theme","value":"dark"}]"#,
    ]);
    s.apply_ok(
        &website(
            "blog",
            "  image: nginx:1.28\n  replicas: 4\n  theme: dark\n",
        ),
        &["--server-side", "--force-conflicts"],
    );
    let smp = s.kubectl_err(&[
        "patch",
        "website",
        "blog",
        "-p",
        r#"{"spec":{"replicas":1}}"#,
    ]);
    assert!(
        smp.contains("application/strategic-merge-patch+json is not supported by demo.miniplane.dev/v1, Kind=Website"),
        "{smp}"
    );
    watch.wait_line("watch sees the change", DEADLINE, |l| {
        l.starts_with("MODIFIED") && l.contains("blog")
    });
}

#[test]
fn served_versions_share_one_storage() {
    let s = Server::start();
    install_website_crd(&s);
    s.apply_ok(
        "apiVersion: demo.miniplane.dev/v1beta1\nkind: Website\nmetadata:\n  name: old\nspec:\n  image: httpd\n  legacy: true\n",
        &[],
    );
    let v1 = s.kubectl_json(&["get", "websites.v1.demo.miniplane.dev", "old"]);
    assert_eq!(v1["apiVersion"], "demo.miniplane.dev/v1");
    let v1beta1 = s.kubectl_json(&["get", "websites.v1beta1.demo.miniplane.dev", "old"]);
    assert_eq!(v1beta1["apiVersion"], "demo.miniplane.dev/v1beta1");
    assert_eq!(v1beta1["spec"]["legacy"], true);
    // Without a status subresource (v1beta1) every change but metadata is a new generation.
    s.kubectl_ok(&[
        "patch",
        "websites.v1beta1.demo.miniplane.dev",
        "old",
        "--type=merge",
        "-p",
        r#"{"status":{"note":"seen"}}"#,
    ]);
    let v1beta1 = s.kubectl_json(&["get", "websites.v1beta1.demo.miniplane.dev", "old"]);
    assert_eq!(v1beta1["metadata"]["generation"], 2);
    assert_eq!(v1beta1["status"]["note"], "seen");
    let group = s.kubectl_ok(&["get", "--raw", "/apis/demo.miniplane.dev"]);
    let group: serde_json::Value = serde_json::from_str(&group).unwrap();
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);
}

#[test]
fn invalid_crds_are_refused_with_kubernetes_errors() {
    let s = Server::start();
    let v1beta1 = WEBSITE_CRD.replace(
        "apiVersion: apiextensions.k8s.io/v1\n",
        "apiVersion: apiextensions.k8s.io/v1beta1\n",
    );
    let run = s.apply_yaml(&v1beta1, &[]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("no matches for kind \"CustomResourceDefinition\" in version \"apiextensions.k8s.io/v1beta1\""),
        "{run}"
    );
    let wrong_name = WEBSITE_CRD.replace(
        "name: websites.demo.miniplane.dev",
        "name: sites.demo.miniplane.dev",
    );
    let run = s.apply_yaml(&wrong_name, &[]);
    assert!(
        run.stderr.contains(
            "The CustomResourceDefinition \"sites.demo.miniplane.dev\" is invalid: metadata.name: Invalid value: \"sites.demo.miniplane.dev\": must be spec.names.plural+\".\"+spec.group"
        ),
        "{run}"
    );
    let no_schema = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.demo.miniplane.dev
spec:
  group: demo.miniplane.dev
  scope: Namespaced
  names: {plural: foos, kind: Foo}
  versions:
  - {name: v1, served: true, storage: true}
";
    let run = s.apply_yaml(no_schema, &[]);
    assert!(
        run.stderr.contains(
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
        ),
        "{run}"
    );
    let err = s.kubectl_err(&["get", "websites"]);
    assert!(
        err.contains("the server doesn't have a resource type \"websites\""),
        "{err}"
    );
}

#[test]
fn deleting_a_crd_deletes_its_resources_after_their_finalizers() {
    let mut s = Server::start();
    install_website_crd(&s);
    s.apply_ok(&website("blog", "  image: nginx\n"), &[]);
    s.apply_ok(
        "apiVersion: demo.miniplane.dev/v1\nkind: Website\nmetadata:\n  name: shop\n  finalizers: [demo.miniplane.dev/cleanup]\nspec:\n  image: nginx\n",
        &[],
    );
    // Stored CRDs are served again right after a restart.
    s.restart();
    let names = s.kubectl_ok(&["get", "ws", "-o", "name"]);
    assert_eq!(
        names,
        "website.demo.miniplane.dev/blog\nwebsite.demo.miniplane.dev/shop\n"
    );

    s.kubectl_ok(&[
        "delete",
        "crd",
        "websites.demo.miniplane.dev",
        "--wait=false",
    ]);
    // `blog` goes at once; `shop` waits for its finalizer and the CRD says why.
    eventually("blog deleted, shop terminating", DEADLINE, || {
        let names = s.kubectl_ok(&["get", "ws", "-o", "name"]);
        let crd = s.kubectl_json(&["get", "crd", "websites.demo.miniplane.dev"]);
        let terminating = crd["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Terminating" && c["status"] == "True");
        (names == "website.demo.miniplane.dev/shop\n" && terminating).then_some(())
    });
    let shop = s.kubectl_json(&["get", "ws", "shop"]);
    assert!(shop["metadata"]["deletionTimestamp"].is_string(), "{shop}");
    let refused = s.apply_yaml(&website("late", "  image: nginx\n"), &[]);
    assert!(
        refused
            .stderr
            .contains("create not allowed while custom resource definition is terminating"),
        "{refused}"
    );
    s.kubectl_ok(&[
        "patch",
        "ws",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually("the CRD is gone", DEADLINE, || {
        let run = s.kubectl(&["get", "crd", "websites.demo.miniplane.dev"]);
        (!run.ok() && run.stderr.contains("NotFound")).then_some(())
    });
    let resources = s.kubectl_ok(&["api-resources"]);
    assert!(!resources.contains("websites"), "{resources}");
    // A new CRD of the same name starts empty.
    install_website_crd(&s);
    let empty = s.kubectl(&["get", "ws"]);
    assert!(empty.stderr.contains("No resources found"), "{empty}");
}

#[test]
fn deleting_a_crd_ends_the_watches_of_its_resources() {
    let s = Server::start();
    install_website_crd(&s);
    s.apply_ok(&website("blog", "  image: nginx\n"), &[]);
    // Once the watch has sent its initial ADDED, `blog` is deleted with its CRD.
    let mut deleted_at = None;
    let (status, events) = support::http::watch_with(
        s.addr,
        "/apis/demo.miniplane.dev/v1/namespaces/default/websites?watch=1",
        usize::MAX,
        DEADLINE,
        |event| {
            if event["type"] == "ADDED" && deleted_at.is_none() {
                s.kubectl_ok(&["delete", "crd", "websites.demo.miniplane.dev"]);
                deleted_at = Some(std::time::Instant::now());
            }
        },
    )
    .expect("a watch");
    assert_eq!(status, 200);
    let took = deleted_at.expect("the initial ADDED arrived").elapsed();
    assert!(
        took < DEADLINE - std::time::Duration::from_secs(5),
        "the watch outlived its CRD: it ended {took:?} after the delete (events: {events:?})"
    );
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["ADDED", "DELETED"], "{events:?}");
}

/// A CRD whose `spec` keeps any field (`x-kubernetes-preserve-unknown-fields`).
const DEEP_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.deep.example.com
spec:
  group: deep.example.com
  scope: Namespaced
  names: {plural: things, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[test]
fn kubectl_creates_and_reads_a_custom_resource_nested_a_thousand_levels() {
    let s = Server::start();
    s.apply_ok(DEEP_CRD, &[]);
    s.kubectl_ok(&[
        "wait",
        "--for=condition=established",
        "crd/things.deep.example.com",
        "--timeout=30s",
    ]);
    // The document nests 1,000 levels: the object, `spec`, then 998 `{"a": ...}`.
    let levels = 999;
    let thing = format!(
        "{{\"apiVersion\":\"deep.example.com/v1\",\"kind\":\"Thing\",\"metadata\":{{\"name\":\"deep\"}},\"spec\":{}\"leaf\"{}}}",
        "{\"a\":".repeat(levels),
        "}".repeat(levels)
    );
    let created = s.kubectl_run(&["create", "-f", "-"], Some(&thing), &[]);
    assert!(created.ok(), "{created}");
    assert_eq!(created.stdout.trim(), "thing.deep.example.com/deep created");
    // kubectl's JSON is indented, one member a line; `serde_json` would stop at 128 levels,
    // so the levels are counted in the text.
    let out = s.kubectl_ok(&["get", "thing", "deep", "-o", "json"]);
    assert_eq!(out.matches("\"a\": {").count(), levels - 1, "{out:.500}");
    assert!(out.contains("\"a\": \"leaf\""), "{out:.500}");
    s.kubectl_ok(&["delete", "thing", "deep"]);
}
