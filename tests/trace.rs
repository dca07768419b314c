//! Tracing end to end: real processes (API server, controller-manager, scheduler, kubelets),
//! the real kubectl, and `miniplane trace` reading the API server's collector.
//!
//! * the trace of `kubectl apply` of a 3-replica Deployment has every kind of span, each under
//!   the right parent, in causal order, without orphans; its spine (apply → ReplicaSet → pods →
//!   scheduling → binding → kubelet → status) matches `tests/golden/trace_apply.txt`
//!   (ids, timings, generated names and revisions masked; `UPDATE_GOLDEN=1` rewrites it);
//! * a `kubectl set image` starts a new trace whose syncs scale the new ReplicaSet up and the
//!   old one down step by step, each step saying why (surge room, unavailable budget);
//! * the Chrome and OTLP exports have the shape their formats require;
//! * a scheduler restarted mid-flow continues the trace from the pods' annotations;
//! * a trace past its span budget is cut: its later writes carry it unsampled, no component
//!   records them, and none starts a trace of its own;
//! * a delete's cascade and folded retries: [`cascade`].

use crate::support;

mod cascade;

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use serde_json::Value;
use support::component::Component;
use support::spine::{mask, spine};
use support::{DEADLINE, Server, deployment_yaml, eventually};
use trace::{Span, SpanId, SpanKind, Tree};

/// The API server with every component beside it (the scheduler optional).
struct Cluster {
    s: Server,
    _kubelet: Component,
    scheduler: Option<Component>,
    _cm: Component,
}

fn start_scheduler(s: &Server) -> Component {
    Component::start(
        s,
        &["scheduler", "--listen", "127.0.0.1:0"],
        "miniplane scheduler started",
    )
}

impl Cluster {
    fn start(with_scheduler: bool) -> Cluster {
        Cluster::start_on(Server::start(), with_scheduler)
    }

    fn start_on(s: Server, with_scheduler: bool) -> Cluster {
        let kubelet = Component::start(
            &s,
            &["kubelet", "--nodes", "3", "--listen", "127.0.0.1:0"],
            "miniplane kubelet:",
        );
        let scheduler = with_scheduler.then(|| start_scheduler(&s));
        let cm = Component::start(
            &s,
            &["controller-manager", "--listen", "127.0.0.1:0"],
            "miniplane controller-manager started",
        );
        eventually("3 Ready nodes", DEADLINE, || {
            let out = s.kubectl_ok(&["get", "nodes", "--no-headers"]);
            (out.lines()
                .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
                .count()
                == 3)
                .then_some(())
        });
        Cluster {
            s,
            _kubelet: kubelet,
            scheduler,
            _cm: cm,
        }
    }

    fn apply(&self, name: &str, replicas: u32, image: &str) {
        let applied = self.s.kubectl_run(
            &["apply", "-f", "-"],
            Some(&deployment_yaml(name, replicas, image)),
            &[],
        );
        assert!(applied.ok(), "apply failed: {applied}");
    }

    fn rollout_status(&self, name: &str) {
        let status = self.s.kubectl(&[
            "rollout",
            "status",
            &format!("deploy/{name}"),
            "--timeout=60s",
        ]);
        assert!(status.ok(), "rollout status failed: {status}");
    }
}

/// `miniplane trace <args> --master URL`, which must succeed.
fn miniplane_trace(s: &Server, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .arg("trace")
        .args(args)
        .args(["--master", &s.url()])
        .output()
        .expect("run miniplane trace");
    assert!(
        out.status.success(),
        "miniplane trace {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The spans of `object`'s trace, once `complete` holds and no span misses its parent (the
/// components' exporters send in batches, so a child may arrive before its parent).
fn trace_of(s: &Server, object: &str, what: &str, complete: impl Fn(&[Span]) -> bool) -> Vec<Span> {
    let start = std::time::Instant::now();
    loop {
        let json = miniplane_trace(s, &[object, "--output", "json"]);
        let spans: Vec<Span> = serde_json::from_str(&json).unwrap_or_default();
        let tree = Tree::build(&spans);
        if !spans.is_empty() && tree.orphans().is_empty() && complete(&spans) {
            return spans;
        }
        if start.elapsed() > DEADLINE {
            let root = tree
                .roots()
                .first()
                .map(|r| format!("{}: {}", r.name, r.summary));
            panic!(
                "timed out after {DEADLINE:?} waiting for {what}: the trace on {object} has {} spans, \
                 {} orphans, root {root:?}\nrecent traces:\n{}",
                spans.len(),
                tree.orphans().len(),
                miniplane_trace(s, &["list"])
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    let mut out: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    out.sort_by_key(|s| s.start_unix_nanos);
    out
}

/// The chain of spans from `span` up to the root.
fn ancestors<'a>(spans: &'a [Span], span: &'a Span) -> Vec<&'a Span> {
    let by_id: HashMap<SpanId, &Span> = spans.iter().map(|s| (s.span_id, s)).collect();
    let mut chain = vec![span];
    let mut current = span;
    while let Some(parent) = current.parent_span_id.and_then(|p| by_id.get(&p)) {
        chain.push(parent);
        current = parent;
    }
    chain
}

/// Every span after its parent, one root, no orphans, one trace.
fn assert_causal(spans: &[Span]) {
    let tree = Tree::build(spans);
    assert!(tree.orphans().is_empty(), "orphans: {:?}", tree.orphans());
    assert_eq!(tree.roots().len(), 1, "one root");
    let trace_id = spans[0].trace_id;
    let by_id: HashMap<SpanId, &Span> = spans.iter().map(|s| (s.span_id, s)).collect();
    for span in spans {
        assert_eq!(span.trace_id, trace_id, "{span:?}");
        if let Some(parent) = span.parent_span_id.and_then(|p| by_id.get(&p)) {
            assert!(
                span.start_unix_nanos >= parent.start_unix_nanos,
                "{} ({}) starts {}ns before its parent {} ({})",
                span.name,
                span.summary,
                parent.start_unix_nanos - span.start_unix_nanos,
                parent.name,
                parent.summary
            );
        }
    }
}

fn compare_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "the trace's spine differs from {} (UPDATE_GOLDEN=1 rewrites it):\n{actual}",
        path.display()
    );
}

/// How many `kubelet sync pod` spans say `what`.
fn kubelet_syncs_saying(spans: &[Span], what: &str) -> usize {
    named(spans, "kubelet sync pod")
        .iter()
        .filter(|s| s.summary.contains(what))
        .count()
}

fn kubelet_running(spans: &[Span]) -> usize {
    kubelet_syncs_saying(spans, "New → Running")
}

#[test]
fn the_trace_of_a_three_replica_apply_has_every_step_under_its_cause() {
    let c = Cluster::start(true);
    c.apply("web", 3, "nginx");
    c.rollout_status("web");
    let spans = trace_of(
        &c.s,
        "deploy/web",
        "the apply's trace up to Available",
        |spans| {
            !named(spans, "deployment available").is_empty()
                && named(spans, "patch pods/status")
                    .iter()
                    .filter(|s| s.attribute("revision").is_some())
                    .count()
                    >= 3
                && kubelet_running(spans) == 3
        },
    );
    assert_causal(&spans);
    compare_golden("trace_apply.txt", &spine(&spans));

    // Every kind of span the issue asks for, with what a learner needs.
    let root = Tree::build(&spans).roots()[0].clone();
    assert_eq!(root.name, "create deployments");
    assert_eq!(root.kind, SpanKind::Server);
    for key in ["verb", "resource", "namespace", "name", "code", "revision"] {
        assert!(
            root.attributes.contains_key(key),
            "root lacks {key}: {root:?}"
        );
    }
    let deliveries = named(&spans, "watch event");
    assert!(deliveries.iter().all(|s| s.kind == SpanKind::Consumer));
    let waits = named(&spans, "queue wait");
    assert!(waits.iter().all(|s| s.attributes.contains_key("retries")));
    let rs_sync = named(&spans, "sync replicaset")[0];
    assert_eq!(
        rs_sync.summary,
        "desired 3, have 0 → create 3 in batches 1, 2"
    );
    assert!(spans.iter().any(|s| s.kind == SpanKind::Client));
    let decisions = named(&spans, "schedule pod");
    assert_eq!(decisions.len(), 3);
    for d in &decisions {
        assert!(d.attributes.contains_key("node"), "{d:?}");
        assert!(
            d.attributes.keys().any(|k| k.starts_with("score.")),
            "{d:?}"
        );
    }
    assert_eq!(named(&spans, "create pods/binding").len(), 3);
    // The Deployment becomes available after every pod ran, under a Deployment sync.
    let available = named(&spans, "deployment available")[0];
    let last_running = named(&spans, "kubelet sync pod")
        .iter()
        .filter(|s| s.summary.contains("New → Running"))
        .map(|s| s.end_unix_nanos)
        .max()
        .unwrap();
    assert!(available.start_unix_nanos >= last_running);
    let chain: Vec<&str> = ancestors(&spans, available)
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(chain[1], "sync deployment", "{chain:?}");
    assert_eq!(chain.last(), Some(&"create deployments"));

    // The tree and the waterfall views print, one line per span plus the headers (with
    // --no-fold: retries are folded by default).
    let tree = miniplane_trace(&c.s, &["deploy/web", "--no-fold"]);
    assert!(tree.lines().count() >= spans.len() + 2, "{tree}");
    assert!(tree.contains("sync replicaset: desired 3, have 0 → create 3 in batches 1, 2"));
    let waterfall = miniplane_trace(
        &c.s,
        &["--id", &root.trace_id.to_string(), "-o", "waterfall"],
    );
    assert!(waterfall.contains('█'), "{waterfall}");
    let list = miniplane_trace(&c.s, &["list"]);
    assert!(list.contains(&root.trace_id.to_string()), "{list}");
}

#[test]
fn a_rollout_trace_scales_new_up_and_old_down_each_step_with_its_reason() {
    let c = Cluster::start(true);
    c.apply("web", 3, "nginx");
    c.rollout_status("web");
    let first = trace_of(&c.s, "deploy/web", "the apply's trace", |spans| {
        !named(spans, "deployment available").is_empty()
    });
    c.s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.27"]);
    c.rollout_status("web");
    let spans = trace_of(&c.s, "deploy/web", "the rollout's trace", |spans| {
        !named(spans, "rollout complete").is_empty() && spans[0].trace_id != first[0].trace_id
    });
    assert_causal(&spans);
    let root = Tree::build(&spans).roots()[0].clone();
    assert_eq!(
        root.name, "patch deployments",
        "set image is a new trace: {root:?}"
    );

    // The Deployment's decisions, in the order they were made.
    let syncs: Vec<&str> = named(&spans, "sync deployment")
        .iter()
        .map(|s| s.summary.as_str())
        .collect();
    let created = syncs
        .iter()
        .filter(|s| s.contains("create new replica set"))
        .count();
    assert_eq!(created, 1, "{syncs:#?}");
    // Each scaling step once, in the order first decided (a sync that failed afterwards, on a
    // stale cache, decides the same step again), with the reason next to it.
    let mut steps: Vec<String> = Vec::new();
    for summary in &syncs {
        for note in summary.split("; ") {
            let Some(at) = note
                .find("scale up web-")
                .or_else(|| note.find("scale down web-"))
            else {
                continue;
            };
            let step = mask(&note[at..]);
            let reason = if step.starts_with("scale up") {
                "surge room"
            } else {
                "unavailable budget"
            };
            assert!(
                summary.contains(reason),
                "{step} without its reason: {summary}"
            );
            if !steps.contains(&step) {
                steps.push(step);
            }
        }
    }
    // New 1→2→3 and old 3→2→1→0, alternating: never above replicas + surge, never below
    // replicas - unavailable.
    assert_eq!(
        steps,
        [
            "scale down web-<hash> 3→2",
            "scale up web-<hash> 1→2",
            "scale down web-<hash> 2→1",
            "scale up web-<hash> 2→3",
            "scale down web-<hash> 1→0",
        ],
        "{syncs:#?}"
    );
    // The ReplicaSet controller carried out each step: pods created for the new one,
    // deleted from the old one.
    let rs_syncs: Vec<&str> = named(&spans, "sync replicaset")
        .iter()
        .map(|s| s.summary.as_str())
        .collect();
    assert!(
        rs_syncs.iter().filter(|s| s.contains("→ create 1")).count() >= 3,
        "{rs_syncs:#?}"
    );
    assert!(
        rs_syncs.iter().filter(|s| s.contains("→ delete 1")).count() >= 3,
        "{rs_syncs:#?}"
    );
}

/// Checks the Chrome Trace Event Format (complete events with µs times, named processes,
/// flow events with ids); returns the number of complete events.
fn assert_chrome(doc: &Value) -> usize {
    let events = doc["traceEvents"].as_array().expect("traceEvents array");
    let mut complete = 0;
    let mut processes = BTreeMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["name"].is_string(), "{e}");
        match ph {
            "X" => {
                complete += 1;
                assert!(e["ts"].as_f64().is_some_and(|t| t > 0.0), "{e}");
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
                assert!(e["args"].is_object(), "{e}");
                assert!(e["cat"].is_string(), "{e}");
            }
            "M" => {
                assert_eq!(e["name"], "process_name");
                processes.insert(e["pid"].as_u64(), e["args"]["name"].clone());
            }
            "s" | "f" => {
                assert!(e["id"].is_u64() && e["ts"].is_f64(), "{e}");
                if ph == "f" {
                    assert_eq!(e["bp"], "e");
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert!(
            processes.contains_key(&e["pid"].as_u64()),
            "unnamed process: {e}"
        );
    }
    complete
}

fn is_hex(v: &Value, len: usize) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Checks OTLP/JSON (resourceSpans → scopeSpans → spans, hex ids, times as decimal strings,
/// `AnyValue` attributes); returns the number of spans.
fn assert_otlp(doc: &Value) -> usize {
    let mut count = 0;
    for rs in doc["resourceSpans"].as_array().expect("resourceSpans") {
        let attrs = rs["resource"]["attributes"]
            .as_array()
            .expect("resource attributes");
        assert!(
            attrs
                .iter()
                .any(|a| a["key"] == "service.name" && a["value"]["stringValue"].is_string()),
            "{rs}"
        );
        for ss in rs["scopeSpans"].as_array().expect("scopeSpans") {
            assert!(ss["scope"]["name"].is_string());
            for span in ss["spans"].as_array().expect("spans") {
                count += 1;
                assert!(
                    is_hex(&span["traceId"], 32) && is_hex(&span["spanId"], 16),
                    "{span}"
                );
                if let Some(parent) = span.get("parentSpanId") {
                    assert!(is_hex(parent, 16), "{span}");
                }
                assert!(span["name"].is_string());
                assert!(span["kind"].as_u64().is_some_and(|k| (1..=5).contains(&k)));
                let time = |k: &str| -> u64 {
                    span[k]
                        .as_str()
                        .and_then(|t| t.parse().ok())
                        .expect("a decimal string")
                };
                assert!(
                    time("startTimeUnixNano") <= time("endTimeUnixNano"),
                    "{span}"
                );
                for a in span["attributes"].as_array().expect("attributes") {
                    assert!(a["key"].is_string());
                    let v = a["value"].as_object().expect("an AnyValue");
                    assert_eq!(v.len(), 1, "{a}");
                    match v.keys().next().map(String::as_str) {
                        Some("stringValue") => assert!(v["stringValue"].is_string()),
                        Some("boolValue") => assert!(v["boolValue"].is_boolean()),
                        Some("intValue") => assert!(
                            v["intValue"]
                                .as_str()
                                .is_some_and(|i| i.parse::<i64>().is_ok()),
                            "{a}"
                        ),
                        other => panic!("unexpected value type {other:?}: {a}"),
                    }
                }
                for l in span["links"].as_array().expect("links") {
                    assert!(is_hex(&l["traceId"], 32) && is_hex(&l["spanId"], 16));
                }
                assert!(span["status"]["code"].is_u64());
            }
        }
    }
    count
}

#[test]
fn chrome_and_otlp_exports_follow_their_formats_and_follow_waits_for_the_trace() {
    // API server and controller-manager only: the pods stay Pending, the trace spans two
    // components.
    let s = Server::start();
    let _cm = Component::start(
        &s,
        &["controller-manager", "--listen", "127.0.0.1:0"],
        "miniplane controller-manager started",
    );
    // `--follow` started before the apply waits for the Deployment's first trace, then reads
    // it until it stops growing.
    let follow = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args([
            "trace",
            "deploy/web",
            "--follow",
            "--quiet",
            "1s",
            "-o",
            "json",
        ])
        .args(["--master", &s.url()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run miniplane trace --follow");
    let applied = s.kubectl_run(
        &["apply", "-f", "-"],
        Some(&deployment_yaml("web", 3, "nginx")),
        &[],
    );
    assert!(applied.ok(), "{applied}");
    let spans = trace_of(&s, "deploy/web", "three pods created", |spans| {
        named(spans, "create pods").len() == 3
    });
    let pid = follow.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(follow.wait_with_output()));
    let Ok(followed) = rx.recv_timeout(DEADLINE) else {
        let _ = Command::new("kill").arg(&pid).status();
        panic!("miniplane trace --follow did not end within {DEADLINE:?}");
    };
    let followed = followed.expect("--follow ends once the trace is quiet");
    assert!(
        followed.status.success(),
        "{}",
        String::from_utf8_lossy(&followed.stderr)
    );
    let followed: Vec<Span> = serde_json::from_slice(&followed.stdout).expect("spans");
    assert_eq!(followed[0].trace_id, spans[0].trace_id);
    assert!(followed.iter().any(|s| s.name == "create pods"));
    let id = spans[0].trace_id.to_string();
    let chrome: Value =
        serde_json::from_str(&miniplane_trace(&s, &["--id", &id, "--output", "chrome"])).unwrap();
    let otlp: Value =
        serde_json::from_str(&miniplane_trace(&s, &["--id", &id, "--output", "otlp"])).unwrap();
    // The trace may have grown since it was read: at least the spans read then.
    assert!(assert_chrome(&chrome) >= spans.len());
    assert!(assert_otlp(&otlp) >= spans.len());
    let services: Vec<&Value> = otlp["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rs| &rs["resource"]["attributes"][0]["value"]["stringValue"])
        .collect();
    assert_eq!(services, ["kube-apiserver", "kube-controller-manager"]);
}

#[test]
fn a_trace_survives_a_scheduler_restart_mid_flow() {
    let mut c = Cluster::start(true);
    // The scheduler stops; the apply runs as far as it can: Deployment, ReplicaSet, pods.
    assert!(c.scheduler.as_mut().expect("started").stop());
    c.apply("web", 3, "nginx");
    eventually("3 pending pods", DEADLINE, || {
        let out =
            c.s.kubectl_ok(&["get", "pods", "-l", "app=web", "--no-headers"]);
        (out.lines().filter(|l| l.contains("Pending")).count() == 3).then_some(())
    });
    // A new scheduler lists the pending pods and continues the trace each pod carries.
    c.scheduler = Some(start_scheduler(&c.s));
    c.rollout_status("web");
    let spans = trace_of(
        &c.s,
        "deploy/web",
        "the apply's trace up to Available",
        |spans| !named(spans, "deployment available").is_empty() && kubelet_running(spans) == 3,
    );
    assert_causal(&spans);
    let decisions = named(&spans, "schedule pod");
    assert_eq!(decisions.len(), 3);
    for decision in decisions {
        let chain: Vec<String> = ancestors(&spans, decision)
            .iter()
            .map(|s| format!("{} {}", s.name, s.summary))
            .collect();
        assert!(
            chain[1].starts_with("watch event ADDED (initial list) Pod"),
            "{chain:#?}"
        );
        assert!(chain[2].starts_with("create pods "), "{chain:#?}");
        assert!(
            chain
                .last()
                .is_some_and(|r| r.starts_with("create deployments"))
        );
    }
}

#[test]
fn a_trace_past_its_span_budget_is_cut_and_carried_on_unrecorded() {
    const BUDGET: usize = 40;
    let c = Cluster::start_on(
        Server::start_with(&["--trace-max-spans-per-trace", &BUDGET.to_string()]),
        true,
    );
    c.apply("big", 12, "nginx:1.27");
    c.rollout_status("big");
    let s = &c.s;
    let context_of = |object: &str| {
        let json = s.kubectl_ok(&["get", object, "-o", "json"]);
        let obj: Value = serde_json::from_str(&json).expect("an object");
        let value = obj["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION]
            .as_str()
            .unwrap_or_else(|| panic!("{object} has no trace annotation: {obj}"))
            .to_owned();
        trace::SpanContext::parse(&value).expect("a traceparent")
    };
    let deployment = context_of("deploy/big");
    let id = deployment.trace_id;

    // Every pod went through the whole flow in the same trace; the late ones unrecorded.
    let pods = s.kubectl_ok(&["get", "pods", "-o", "name"]);
    let pods: Vec<&str> = pods.lines().collect();
    assert_eq!(pods.len(), 12, "{pods:?}");
    let mut unsampled = 0;
    for pod in &pods {
        let ctx = context_of(pod);
        assert_eq!(ctx.trace_id, id, "{pod} is in the apply's trace");
        unsampled += usize::from(!ctx.sampled);
        // No write of an unsampled step started a trace of its own.
        let name = pod.trim_start_matches("pod/");
        let body = s
            .get(&format!(
                "/miniplane/v1/traces?object=pods/default/{name}&limit=10"
            ))
            .json();
        for t in body["traces"].as_array().expect("traces") {
            assert_eq!(t["traceId"], id.to_string(), "{pod}: {t}");
        }
    }
    assert!(unsampled > 0, "12 pods need more than {BUDGET} spans");

    // The collector kept the budget's worth and says the trace was cut.
    let body = s.get(&format!("/miniplane/v1/traces/{id}")).json();
    let kept = body["spans"].as_array().expect("spans").len();
    assert!(kept <= BUDGET && kept > BUDGET / 2, "{kept} spans kept");
    assert_eq!(body["cut"], true);
    let list = s.get("/miniplane/v1/traces?limit=50").json();
    assert!(list["stats"]["refused"].as_u64().is_some(), "{list}");
    let listed = list["traces"]
        .as_array()
        .expect("traces")
        .iter()
        .find(|t| t["traceId"] == id.to_string())
        .expect("the trace is listed");
    assert_eq!(listed["cut"], true);

    // `miniplane trace` says so.
    let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(["trace", "deploy/big", "--master", &s.url()])
        .output()
        .expect("run miniplane trace");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("was cut"), "{stderr}");
    let list = miniplane_trace(s, &["list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with(&id.to_string()))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains(&format!(" {kept}+ ")), "{line}");
}
