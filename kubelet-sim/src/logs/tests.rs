//! Tests of the container logs: lines derived from a Pod, options, follow, previous run, errors.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("a test time")
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).expect("a test pod")
}

/// A running nginx `web` with port 8080, started at 10:00:00.
fn web_pod(annotations: serde_json::Value) -> Pod {
    pod(json!({
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                 "ports": [{"containerPort": 8080}]}]},
        "status": {"containerStatuses": [{"name": "web", "image": "nginx:1.27", "imageID": "",
            "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2024-01-01T10:00:00Z"}}}]}
    }))
}

fn texts(lines: &[LogLine]) -> Vec<&str> {
    lines.iter().map(|l| l.text.as_str()).collect()
}

fn opts(query: &str) -> LogOptions {
    LogOptions::parse(query, "p").expect("valid options")
}

#[test]
fn options_parse_every_field_and_reject_kubernetes_errors() {
    let o = opts(
        "container=web&follow=true&previous=1&timestamps=true&tailLines=5&limitBytes=100&sinceTime=2024-01-01T10%3A00%3A00Z&insecureSkipTLSVerifyBackend=true&stream=All",
    );
    assert_eq!(o.container, "web");
    assert!(o.follow && o.previous && o.timestamps && o.insecure_skip_tls_verify_backend);
    assert_eq!((o.tail_lines, o.limit_bytes), (Some(5), Some(100)));
    assert_eq!(o.since_time, Some(ts("2024-01-01T10:00:00Z")));

    let err = |q: &str| LogOptions::parse(q, "p").expect_err("invalid options");
    let both = err("sinceSeconds=5&sinceTime=2024-01-01T10:00:00Z");
    assert_eq!(both.code(), 422);
    assert_eq!(
        both.message,
        "PodLogOptions \"p\" is invalid: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
    );
    assert_eq!(
        err("tailLines=-1").message,
        "PodLogOptions \"p\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        err("sinceSeconds=0").message,
        "PodLogOptions \"p\" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0"
    );
    assert_eq!(
        err("limitBytes=0&tailLines=-2").message,
        "PodLogOptions \"p\" is invalid: [tailLines: Invalid value: -2: must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]"
    );
    assert!(
        err("stream=Stdout")
            .message
            .ends_with("stream: Forbidden: may not be specified")
    );
    let bad = err("tailLines=ten");
    assert_eq!((bad.code(), bad.reason), (400, StatusReason::BadRequest));
    assert_eq!(err("follow=maybe").code(), 400);
    assert_eq!(err("sinceTime=yesterday").code(), 400);
}

#[test]
fn image_text_names_declared_ports_and_annotated_lines_repeat_at_their_rate() {
    let p = web_pod(json!({
        "miniplane.dev/log-lines": "GET / 200\nGET /about 200",
        "miniplane.dev/log-rate": "2/s",
    }));
    let out = logs(&p, &LogOptions::default(), ts("2024-01-01T10:00:02Z")).expect("logs");
    assert_eq!(out.container, "web");
    let t = texts(&out.lines);
    assert!(t.iter().any(|l| l.contains("0.0.0.0:8080")), "{t:?}");
    let annotated: Vec<&str> = t.iter().copied().filter(|l| l.starts_with("GET")).collect();
    // Lines at 0, 0.5, 1, 1.5 and 2 s, in turn.
    assert_eq!(
        annotated,
        [
            "GET / 200",
            "GET /about 200",
            "GET / 200",
            "GET /about 200",
            "GET / 200"
        ]
    );
    assert!(
        out.lines
            .iter()
            .all(|l| l.time >= ts("2024-01-01T10:00:00Z"))
    );
    assert!(
        out.lines.windows(2).all(|w| w[0].time < w[1].time),
        "strictly ordered"
    );
}

#[test]
fn per_container_lines_overlay_the_pod_wide_ones() {
    let p = web_pod(json!({
        "miniplane.dev/log-lines": "pod-wide",
        "miniplane.dev/log-lines.web": "just web",
    }));
    let out = logs(&p, &LogOptions::default(), ts("2024-01-01T10:00:05Z")).expect("logs");
    let t = texts(&out.lines);
    assert!(t.contains(&"just web") && !t.contains(&"pod-wide"), "{t:?}");
}

#[test]
fn echo_text_and_a_graceful_shutdown_are_printed() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "init", "image": "busybox",
                    "command": ["sh", "-c", "echo preparing; sleep 2; echo done"]}],
                 "containers": [{"name": "web", "image": "nginx"}]},
        "status": {
            "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": "2024-01-01T10:00:00Z", "finishedAt": "2024-01-01T10:00:02Z"}}}],
            "containerStatuses": [{"name": "web", "image": "nginx", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": "2024-01-01T10:00:03Z", "finishedAt": "2024-01-01T10:01:00Z"}}}]}
    }));
    let now = ts("2024-01-01T11:00:00Z");
    let init = logs(&p, &opts("container=init&timestamps=true"), now).expect("init logs");
    assert_eq!(texts(&init.lines), ["preparing", "done"]);
    assert_eq!(init.lines[1].time, ts("2024-01-01T10:00:02Z"));
    assert_eq!(
        String::from_utf8_lossy(&render(&init.lines, &opts("timestamps=true"))),
        "2024-01-01T10:00:00.000000000Z preparing\n2024-01-01T10:00:02.000000000Z done\n"
    );
    let web = logs(&p, &opts("container=web"), now).expect("web logs");
    let last = web.lines.last().expect("a shutdown line");
    assert!(last.text.contains("SIGTERM"), "{last:?}");
    assert_eq!(last.time, ts("2024-01-01T10:01:00Z"));
}

#[test]
fn failing_http_liveness_probe_requests_are_logged() {
    let p = pod(json!({
        "metadata": {"name": "p", "annotations": {"miniplane.dev/liveness-fails-after": "30s"}},
        "spec": {"containers": [{"name": "web", "image": "nginx",
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 10}}]},
        "status": {"containerStatuses": [{"name": "web", "image": "nginx", "imageID": "",
            "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2024-01-01T10:00:00Z"}}}]}
    }));
    let out = logs(&p, &LogOptions::default(), ts("2024-01-01T10:01:00Z")).expect("logs");
    let failures: Vec<&LogLine> = out
        .lines
        .iter()
        .filter(|l| l.text.contains("/healthz"))
        .collect();
    assert_eq!(failures.len(), 3, "failureThreshold requests");
    assert_eq!(failures[0].time, ts("2024-01-01T10:00:30Z"));
}

#[test]
fn options_filter_tail_and_cut_as_the_kubelet_does() {
    let p = web_pod(json!({"miniplane.dev/log-lines": "tick", "miniplane.dev/log-rate": "1/s"}));
    let now = ts("2024-01-01T10:00:10Z");
    let tail = logs(&p, &opts("tailLines=3"), now).expect("logs");
    assert_eq!(texts(&tail.lines), ["tick", "tick", "tick"]);
    assert_eq!(tail.lines[0].time, ts("2024-01-01T10:00:08Z"));
    let since = logs(&p, &opts("sinceSeconds=2"), now).expect("logs");
    assert_eq!(since.lines.len(), 3, "ticks at 8, 9 and 10 s");
    let since_time = logs(&p, &opts("sinceTime=2024-01-01T10:00:09Z"), now).expect("logs");
    assert_eq!(since_time.lines.len(), 2);
    let cut = render(&tail.lines, &opts("limitBytes=7"));
    assert_eq!(cut, b"tick\nti");
    assert_eq!(logs(&p, &opts("tailLines=0"), now).expect("logs").lines, []);
}

#[test]
fn follow_returns_the_new_lines_and_ends_with_the_run() {
    let mut p =
        web_pod(json!({"miniplane.dev/log-lines": "tick", "miniplane.dev/log-rate": "1/s"}));
    let first = logs(&p, &opts("follow=true"), ts("2024-01-01T10:00:02Z")).expect("logs");
    let last = first.lines.last().expect("lines").time;
    assert_eq!(last, ts("2024-01-01T10:00:02Z"));
    let step = follow(&p, "web", &first.run, last, ts("2024-01-01T10:00:04.5Z")).expect("step");
    assert_eq!(step.lines.len(), 2, "ticks at 3 and 4 s");
    assert!(!step.ended);
    // The container is stopped at 10:00:05: the shutdown line and the end.
    let status = &mut p
        .status
        .as_mut()
        .expect("status")
        .container_statuses
        .as_mut()
        .expect("s")[0];
    status.state = serde_json::from_value(json!({"terminated": {"exitCode": 143,
        "startedAt": "2024-01-01T10:00:00Z", "finishedAt": "2024-01-01T10:00:05.5Z"}}))
    .expect("state");
    let last = step.lines.last().expect("lines").time;
    let step = follow(&p, "web", &first.run, last, ts("2024-01-01T10:00:07Z")).expect("step");
    assert!(step.ended);
    assert_eq!(
        texts(&step.lines).len(),
        2,
        "the tick at 5 s and the shutdown line"
    );
    assert!(step.lines[1].text.contains("SIGTERM"));
}

#[test]
fn previous_reads_the_run_before_a_restart() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", "echo run; sleep 5; exit 3"]}]},
        "status": {"containerStatuses": [{"name": "c", "image": "busybox", "imageID": "",
            "ready": false, "restartCount": 1,
            "state": {"running": {"startedAt": "2024-01-01T10:00:20Z"}},
            "lastState": {"terminated": {"exitCode": 3, "reason": "Error",
                "startedAt": "2024-01-01T10:00:00Z", "finishedAt": "2024-01-01T10:00:05Z"}}}]}
    }));
    let now = ts("2024-01-01T10:00:21Z");
    let previous = logs(&p, &opts("previous=true"), now).expect("previous");
    assert_eq!(texts(&previous.lines), ["run"]);
    assert_eq!(previous.lines[0].time, ts("2024-01-01T10:00:00Z"));
    let current = logs(&p, &LogOptions::default(), now).expect("current");
    assert_eq!(current.lines[0].time, ts("2024-01-01T10:00:20Z"));
}

#[test]
fn errors_use_kubernetes_texts() {
    let two = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    }));
    let now = ts("2024-01-01T10:00:00Z");
    let err = |p: &Pod, q: &str| logs(p, &opts(q), now).expect_err("an error");
    let e = err(&two, "");
    assert_eq!(e.code(), 400);
    assert_eq!(
        e.message,
        "a container name must be specified for pod p, choose one of: [i a b]"
    );
    assert_eq!(
        err(&two, "container=x").message,
        "container x is not valid for pod p"
    );
    assert_eq!(
        err(&two, "container=a").message,
        "container \"a\" in pod \"p\" is waiting to start: ContainerCreating"
    );
    assert_eq!(
        err(&two, "container=a&previous=true").message,
        "previous terminated container \"a\" in pod \"p\" not found"
    );
    assert_eq!(
        err(&two, "container=b").message,
        "container \"b\" in pod \"p\" is not available"
    );
    let none = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
    assert_eq!(
        err(&none, "").message,
        "a container name must be specified for pod p"
    );
    let pulling = pod(json!({
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
    }));
    assert_eq!(
        err(&pulling, "").message,
        "container \"a\" in pod \"p\" is waiting to start: trying and failing to pull image"
    );
}

#[test]
fn ephemeral_containers_have_logs_and_a_run_that_never_started_is_terminated() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}],
                 "ephemeralContainers": [{"name": "debug", "image": "busybox",
                     "command": ["echo", "hello"]}]},
        "status": {
            "containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": 128,
                    "reason": "StartError"}}}],
            "ephemeralContainerStatuses": [{"name": "debug", "image": "busybox", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                    "startedAt": "2024-01-01T10:00:00Z", "finishedAt": "2024-01-01T10:00:00Z"}}}]}
    }));
    let now = ts("2024-01-01T10:00:01Z");
    let debug = logs(&p, &opts("container=debug"), now).expect("debug logs");
    assert_eq!(texts(&debug.lines), ["hello"]);
    let e = logs(&p, &opts("container=a"), now).expect_err("no run");
    assert_eq!(e.message, "container \"a\" in pod \"p\" is terminated");
}

#[test]
fn a_long_run_keeps_only_the_latest_annotated_lines() {
    let p =
        web_pod(json!({"miniplane.dev/log-lines": "a\nb\nc", "miniplane.dev/log-rate": "10/s"}));
    let out = logs(&p, &opts("tailLines=1"), ts("2024-01-31T10:00:00Z")).expect("logs");
    assert_eq!(out.lines[0].time, ts("2024-01-31T10:00:00Z"));
    let all = logs(&p, &LogOptions::default(), ts("2024-01-31T10:00:00Z")).expect("logs");
    let rated = all.lines.iter().filter(|l| l.text.len() == 1).count();
    assert_eq!(rated as u64, lines::MAX_RATED_LINES);
}
