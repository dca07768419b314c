//! End to end with the real kubectl: reading. `get` with server-side Tables (default, `-o wide`,
//! `--show-labels`, several kinds at once), `-o yaml|json|name`, label and field selectors,
//! `-A`, pagination (`--chunk-size`, raw `limit`/`continue`) and `get -w` (a watch of Tables).
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{
    DEADLINE, Server, configmap_yaml, deployment_yaml, namespace_yaml, pod_yaml, write_status,
};

fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// A deployment `web` (2 replicas, 1 ready, 2 updated, 1 available) and a pending pod `p1`.
fn seed(s: &Server) {
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    write_status(
        s,
        "deployment",
        "web",
        serde_json::json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}),
    );
    s.apply_ok(&pod_yaml("p1", "app: web", None), &[]);
}

#[test]
fn get_prints_server_side_tables() {
    let s = Server::start();
    seed(&s);
    let out = s.kubectl_ok(&["get", "deploy,pods"]);
    let blocks: Vec<&str> = out.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 2, "{out}");
    let deploy: Vec<&str> = blocks[0].lines().collect();
    assert_eq!(
        cells(deploy[0]),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{out}"
    );
    assert_eq!(
        cells(deploy[1])[..4],
        ["deployment.apps/web", "1/2", "2", "1"],
        "{out}"
    );
    let pods: Vec<&str> = blocks[1].lines().collect();
    assert_eq!(
        cells(pods[0]),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    assert_eq!(
        cells(pods[1])[..4],
        ["pod/p1", "0/1", "Pending", "0"],
        "{out}"
    );
    // AGE is a humanized duration such as "3s".
    let age = cells(deploy[1])[4];
    assert!(
        age.ends_with('s') || age.ends_with('m'),
        "age {age:?} in {out}"
    );

    let one = s.kubectl_ok(&["get", "deployment", "web"]);
    assert_eq!(
        cells(one.lines().nth(1).unwrap())[..4],
        ["web", "1/2", "2", "1"],
        "{one}"
    );

    let wide = s.kubectl_ok(&["get", "deployment", "web", "-o", "wide"]);
    let header = cells(wide.lines().next().unwrap());
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{wide}"
    );
    assert_eq!(
        cells(wide.lines().nth(1).unwrap())[5..],
        ["web", "nginx:1.25", "app=web"],
        "{wide}"
    );
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().contains("NOMINATED NODE"),
        "{wide}"
    );

    let labels = s.kubectl_ok(&["get", "pods", "--show-labels"]);
    assert!(
        labels.lines().next().unwrap().ends_with("LABELS"),
        "{labels}"
    );
    assert!(
        labels.lines().nth(1).unwrap().ends_with("app=web"),
        "{labels}"
    );
}

#[test]
fn get_output_formats() {
    let s = Server::start();
    seed(&s);
    let yaml = s.kubectl_ok(&["get", "deployment", "web", "-o", "yaml"]);
    assert!(yaml.starts_with("apiVersion: apps/v1\n"), "{yaml}");
    assert!(yaml.contains("\nkind: Deployment\n"), "{yaml}");
    assert!(yaml.contains("\n  name: web\n"), "{yaml}");
    assert!(yaml.contains("image: nginx:1.25"), "{yaml}");

    let json = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(json["kind"], "Deployment");
    assert_eq!(json["apiVersion"], "apps/v1");
    assert_eq!(
        json["status"]["readyReplicas"], 1,
        "status written through /status: {json}"
    );

    let list = s.kubectl_json(&["get", "pods"]);
    assert_eq!(list["kind"], "List", "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "p1", "{list}");
    assert_eq!(list["items"][0]["kind"], "Pod", "{list}");

    let names = s.kubectl_ok(&["get", "deploy,pods", "-o", "name"]);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        ["deployment.apps/web", "pod/p1"],
        "{names}"
    );

    let jsonpath = s.kubectl_ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(jsonpath, "nginx:1.25");
    let custom = s.kubectl_ok(&[
        "get",
        "pods",
        "-o",
        "custom-columns=N:.metadata.name,P:.status.phase",
    ]);
    assert_eq!(
        cells(custom.lines().nth(1).unwrap()),
        ["p1", "Pending"],
        "{custom}"
    );
}

#[test]
fn get_with_label_and_field_selectors() {
    let s = Server::start();
    seed_pods(&s);
    let names = |args: &[&str]| pod_names(&s, args);
    assert_eq!(names(&["-l", "app=a"]), ["a1", "a2"]);
    assert_eq!(names(&["-l", "app==a,tier=fe"]), ["a1"]);
    assert_eq!(names(&["-l", "app in (a,b)"]), ["a1", "a2", "b1"]);
    assert_eq!(names(&["-l", "app notin (a)"]), ["b1", "n1"]);
    assert_eq!(names(&["-l", "app!=a"]), ["b1", "n1"]);
    assert_eq!(names(&["-l", "!app"]), ["n1"]);
    assert_eq!(names(&["-l", "app"]), ["a1", "a2", "b1"]);
    assert_eq!(names(&["--field-selector", "metadata.name=b1"]), ["b1"]);
    assert_eq!(
        names(&["--field-selector", "metadata.name!=b1"]),
        ["a1", "a2", "n1"]
    );
    assert_eq!(
        names(&["-l", "app=a", "--field-selector", "metadata.name!=a1"]),
        ["a2"]
    );
    let run = s.kubectl(&["get", "pods", "-l", "app=zzz"]);
    assert!(run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("No resources found in default namespace."),
        "{run}"
    );

    // Bad input: unsupported field, unparsable label selector.
    let err = s.kubectl_err(&["get", "pods", "--field-selector", "spec.foo=x"]);
    assert!(
        err.contains("(BadRequest)") && err.contains("field label not supported: spec.foo"),
        "{err}"
    );
    let err = s.kubectl_err(&["get", "pods", "-l", "app in (a"]);
    assert!(
        err.contains("unable to parse requirement") || err.contains("(BadRequest)"),
        "{err}"
    );
}

/// Pods a1 (app=a, tier=fe, on node-1), a2 (app=a), b1 (app=b, on node-2), n1 (no app).
fn seed_pods(s: &Server) {
    s.apply_ok(&pod_yaml("a1", "app: a, tier: fe", Some("node-1")), &[]);
    s.apply_ok(&pod_yaml("a2", "app: a", None), &[]);
    s.apply_ok(&pod_yaml("b1", "app: b", Some("node-2")), &[]);
    s.apply_ok(&pod_yaml("n1", "other: x", None), &[]);
}

/// `kubectl get pods -o name <args>`, sorted, without the `pod/` prefix.
fn pod_names(s: &Server, args: &[&str]) -> Vec<String> {
    let mut all = vec!["get", "pods", "-o", "name"];
    all.extend(args);
    let mut v: Vec<String> = s
        .kubectl_ok(&all)
        .lines()
        .map(|l| l.trim_start_matches("pod/").to_owned())
        .collect();
    v.sort();
    v
}

/// The per-kind field selectors of pods (`pkg/registry/core/pod/strategy.go`
/// `ToSelectableFields`), used by kubelets (`spec.nodeName`) and `kubectl get`.
#[test]
fn get_with_pod_field_selectors() {
    let s = Server::start();
    seed_pods(&s);
    let names = |args: &[&str]| pod_names(&s, args);
    assert_eq!(names(&["--field-selector", "spec.nodeName=node-1"]), ["a1"]);
    assert_eq!(names(&["--field-selector", "spec.nodeName="]), ["a2", "n1"]);
    assert_eq!(
        names(&["--field-selector", "status.phase=Pending,metadata.name!=a1"]),
        ["a2", "b1", "n1"]
    );
    assert_eq!(
        names(&["-l", "app=a", "--field-selector", "spec.nodeName!=node-1"]),
        ["a2"]
    );
    let run = s.kubectl(&["get", "pods", "--field-selector", "status.phase=Running"]);
    assert!(run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("No resources found in default namespace."),
        "{run}"
    );
}

#[test]
fn get_across_all_namespaces() {
    let s = Server::start();
    s.apply_ok(&namespace_yaml("other"), &[]);
    s.apply_ok(&pod_yaml("here", "app: x", None), &[]);
    s.apply_ok(&pod_yaml("there", "app: x", None), &["-n", "other"]);
    let out = s.kubectl_ok(&["get", "pods", "-A"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        cells(lines[0]),
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| cells(l).starts_with(&["default", "here"])),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| cells(l).starts_with(&["other", "there"])),
        "{out}"
    );
    let list = s.get("/api/v1/pods").json();
    assert_eq!(list["kind"], "PodList", "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    let other = s.kubectl_ok(&["get", "pods", "-n", "other", "-o", "name"]);
    assert_eq!(other.trim(), "pod/there");
}

#[test]
fn get_in_chunks_follows_continue_tokens() {
    let s = Server::start();
    let names = ["c1", "c2", "c3", "c4", "c5"];
    for n in names {
        s.apply_ok(&configmap_yaml(n, "k: v"), &[]);
    }
    let out = s.kubectl_ok(&["get", "configmaps", "--chunk-size=2", "-o", "name"]);
    let got: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("configmap/c"))
        .collect();
    assert_eq!(got, names.map(|n| format!("configmap/{n}")), "{out}");
    let table = s.kubectl_ok(&["get", "configmaps", "--chunk-size=2"]);
    assert_eq!(
        table.lines().filter(|l| l.starts_with("NAME")).count(),
        1,
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.starts_with('c')).count(),
        5,
        "{table}"
    );

    // The raw protocol: pages of `limit`, an opaque `continue` until the last page.
    let mut path = "/api/v1/namespaces/default/configmaps?limit=2".to_owned();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.get(&path).json();
        pages += 1;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2, "{page}");
        seen.extend(
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()),
        );
        match page["metadata"]["continue"].as_str() {
            Some(token) if !token.is_empty() => {
                path = format!("/api/v1/namespaces/default/configmaps?limit=2&continue={token}");
            }
            _ => break,
        }
        assert!(pages < 10, "no end to pagination");
    }
    assert_eq!(seen, names, "every item once, in key order");
    assert_eq!(pages, 3);
    // A garbage continue token is a client error, not a crash.
    let bad = s.get("/api/v1/namespaces/default/configmaps?limit=2&continue=garbage");
    assert!(
        bad.status == 400 || bad.status == 410,
        "{} {}",
        bad.status,
        bad.text()
    );
}

#[test]
fn get_watch_prints_rows_as_events_arrive() {
    let s = Server::start();
    s.apply_ok(&pod_yaml("old", "app: w", None), &[]);
    let mut w = s.kubectl_spawn(&["get", "pods", "-w", "--output-watch-events"]);
    let header = w.wait_line("the header", DEADLINE, |l| l.starts_with("EVENT"));
    assert_eq!(
        cells(&header),
        ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    w.wait_line("ADDED old", DEADLINE, |l| {
        cells(l).starts_with(&["ADDED", "old"])
    });

    s.apply_ok(&pod_yaml("new", "app: w", None), &[]);
    w.wait_line("ADDED new", DEADLINE, |l| {
        cells(l).starts_with(&["ADDED", "new"])
    });
    s.kubectl_ok(&["label", "pod", "new", "seen=yes"]);
    w.wait_line("MODIFIED new", DEADLINE, |l| {
        cells(l).starts_with(&["MODIFIED", "new"])
    });
    s.kubectl_ok(&["delete", "pod", "new"]);
    w.wait_line("DELETED new", DEADLINE, |l| {
        cells(l).starts_with(&["DELETED", "new"])
    });
    // `old` was listed once, not replayed by the watch (the watch starts at the list's RV).
    assert_eq!(
        w.seen.iter().filter(|l| l.contains("old")).count(),
        1,
        "{:?}",
        w.seen
    );
    drop(w);

    // A plain `-w` on one object prints a row per change.
    let mut w = s.kubectl_spawn(&["get", "pod", "old", "-w"]);
    w.wait_line("the first row", DEADLINE, |l| l.starts_with("old"));
    s.kubectl_ok(&["label", "pod", "old", "again=yes"]);
    w.wait_line("a second row", DEADLINE, |l| l.starts_with("old"));
}
