//! End to end: what kubectl reaches on a node through the API server — `kubectl logs`,
//! `exec`, `cp`, `port-forward` and `get --raw .../nodes/NAME/proxy/...` — against the
//! simulated kubelets' API, with the errors Kubernetes gives, and no tunnel left open
//! afterwards (`apiserver_longrunning_requests` on the API server's `/metrics`).
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::time::Duration;

use crate::support;

use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

const SETTLE: Duration = Duration::from_secs(60);

const PODS: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
  annotations:
    miniplane.dev/log-lines: \"GET /healthz 200\"
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports:
    - containerPort: 80
      name: http
    env:
    - name: GREETING
      value: hello
---
apiVersion: v1
kind: Pod
metadata:
  name: nowhere
spec:
  nodeSelector:
    no-such-label: x
  containers:
  - name: app
    image: busybox
";

fn running(s: &Server, pod: &str) -> bool {
    s.kubectl_json(&["get", "pod", pod])["status"]["phase"] == "Running"
}

/// The open connect tunnels the API server counts (0 when none was ever opened).
fn open_tunnels(s: &Server) -> u64 {
    s.kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn logs_exec_cp_and_port_forward_reach_the_simulated_node() {
    let c = ProcessCluster::start(1);
    let s = &c.s;
    s.apply_ok(PODS, &[]);
    eventually("web Running", SETTLE, || running(s, "web").then_some(()));

    // Logs: the image's start-up text and the annotated line, options applied.
    let logs = s.kubectl_ok(&["logs", "web"]);
    assert!(logs.contains("GET /healthz 200"), "{logs}");
    let tail = s.kubectl_ok(&["logs", "web", "--tail=1", "--timestamps"]);
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(tail.starts_with("20"), "an RFC3339 timestamp first: {tail}");
    let prefixed = s.kubectl_ok(&["logs", "-l", "app=web", "--prefix", "-c", "nginx"]);
    assert!(prefixed.starts_with("[pod/web/nginx] "), "{prefixed}");

    // Exec: the pod's environment and name, exit codes, stdin.
    let env = s.kubectl_ok(&["exec", "web", "--", "env"]);
    assert!(env.contains("GREETING=hello"), "{env}");
    assert!(env.contains("HOSTNAME=web"), "{env}");
    assert_eq!(
        s.kubectl_ok(&["exec", "web", "--", "hostname"]).trim(),
        "web"
    );
    let failed = s.kubectl(&["exec", "web", "--", "sh", "-c", "exit 3"]);
    assert_eq!(failed.status.code(), Some(3), "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("command terminated with exit code 3"),
        "{}",
        failed.stderr
    );
    let missing = s.kubectl(&["exec", "web", "--", "no-such-tool"]);
    assert_eq!(missing.status.code(), Some(127), "{}", missing.stderr);
    let echoed = s.kubectl_run(
        &["exec", "-i", "web", "--", "cat"],
        Some("from stdin\n"),
        &[],
    );
    assert!(echoed.ok(), "{}", echoed.stderr);
    assert_eq!(echoed.stdout, "from stdin\n");

    // cp both ways (the copy lives in the container until it restarts).
    let local = s.dir().join("note.txt");
    std::fs::write(&local, "copied in\n").unwrap();
    let local_arg = local.to_string_lossy().into_owned();
    s.kubectl_ok(&["cp", &local_arg, "web:/tmp/note.txt"]);
    assert_eq!(
        s.kubectl_ok(&["exec", "web", "--", "cat", "/tmp/note.txt"]),
        "copied in\n"
    );
    let back = s.dir().join("hostname.txt");
    s.kubectl_ok(&["cp", "web:/etc/hostname", &back.to_string_lossy()]);
    assert_eq!(std::fs::read_to_string(&back).unwrap().trim(), "web");

    // Port-forward: the declared HTTP port serves a page naming the pod.
    let mut forward = s.kubectl_spawn(&["port-forward", "pod/web", ":80"]);
    let line = forward.wait_line("Forwarding from", SETTLE, |l| {
        l.starts_with("Forwarding from 127.0.0.1:")
    });
    let port: u16 = line
        .trim_start_matches("Forwarding from 127.0.0.1:")
        .split(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    let _ = tcp.read_to_string(&mut page);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("web"), "{page}");
    drop(tcp);
    drop(forward);

    // The node's own API through the API server.
    let node = s.kubectl_json(&["get", "pod", "web"])["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_owned();
    let summary: serde_json::Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/stats/summary"),
    ]))
    .unwrap();
    assert_eq!(summary["node"]["nodeName"], node.as_str());

    // Refusals, as Kubernetes words them.
    let wrong = s.kubectl_err(&["exec", "web", "-c", "nope", "--", "ls"]);
    assert!(
        wrong.contains("container nope is not valid for pod web"),
        "{wrong}"
    );
    let unscheduled = s.kubectl_err(&["exec", "nowhere", "--", "ls"]);
    assert!(
        unscheduled.contains("pod nowhere does not have a host assigned"),
        "{unscheduled}"
    );
    assert_eq!(s.kubectl_ok(&["logs", "nowhere"]), "");

    eventually("every tunnel closed", SETTLE, || {
        (open_tunnels(s) == 0).then_some(())
    });
}
