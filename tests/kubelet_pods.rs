//! End to end: `miniplane kubelet` against a real API server, observed with the real kubectl.
//! Nodes register and stay Ready; pods bound to a node (spec.nodeName set directly, as if
//! scheduled) go through the simulated lifecycle: Running with an IP and events, crash loops,
//! image pull failures, completion, graceful deletion.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::component::Component;
use support::{DEADLINE, Server, eventually};

/// A server and three simulated nodes with fast stages and 1 s … 2 s back-off.
fn cluster() -> (Server, Component) {
    let s = Server::start();
    let kubelet = Component::start(
        &s,
        &[
            "kubelet",
            "--nodes",
            "3",
            "--listen",
            "127.0.0.1:0",
            "--lease-renew-interval",
            "200ms",
            "--node-status-update-frequency",
            "200ms",
            "--profile",
            "fast",
            "--backoff-max",
            "2s",
        ],
        "miniplane kubelet: 3 nodes registered",
    );
    (s, kubelet)
}

fn pod(name: &str, node: &str, image: &str, annotations: &str, restart: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  nodeName: {node}
  restartPolicy: {restart}
  containers:
  - name: app
    image: {image}
"
    )
}

/// `kubectl get pods` columns of `name`: READY, STATUS, RESTARTS (first word).
fn pod_row(s: &Server, name: &str) -> Option<(String, String, u32)> {
    let out = s.kubectl(&["get", "pod", name, "--no-headers"]);
    let cols: Vec<&str> = out.stdout.split_whitespace().collect();
    (cols.len() >= 4).then(|| {
        (
            cols[1].to_owned(),
            cols[2].to_owned(),
            cols[3].parse().unwrap_or(0),
        )
    })
}

#[test]
fn nodes_register_ready_with_leases() {
    let (s, _kubelet) = cluster();
    let out = s.kubectl_ok(&["get", "nodes", "--no-headers"]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("node-{i}"));
        assert_eq!(row[1], "Ready", "{out}");
        assert!(row[4].starts_with("v1.33."), "VERSION column: {out}");
    }
    let node = s.kubectl_json(&["get", "node", "node-1", "-o", "json"]);
    assert_eq!(node["spec"]["podCIDR"], "10.244.1.0/24");
    assert_eq!(node["status"]["capacity"]["cpu"], "4");
    assert_eq!(node["status"]["allocatable"]["pods"], "110");
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "node-1"
    );
    assert_eq!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"],
        "miniplane://sim"
    );
    let leases = s.kubectl_ok(&["get", "leases", "-n", "kube-node-lease", "--no-headers"]);
    assert_eq!(leases.lines().count(), 3, "{leases}");
    // The lease keeps being renewed.
    let renew = |s: &Server| {
        s.kubectl_json(&[
            "get",
            "lease",
            "node-0",
            "-n",
            "kube-node-lease",
            "-o",
            "json",
        ])["spec"]["renewTime"]
            .clone()
    };
    let first = renew(&s);
    eventually("lease renewed", DEADLINE, || {
        (renew(&s) != first).then_some(())
    });
}

#[test]
fn pod_runs_with_ip_events_and_is_deleted_gracefully() {
    let (s, _kubelet) = cluster();
    s.apply_ok(&pod("web", "node-1", "nginx", "", "Always"), &[]);
    eventually("web Running 1/1", DEADLINE, || {
        (pod_row(&s, "web")? == ("1/1".into(), "Running".into(), 0)).then_some(())
    });
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide", "--no-headers"]);
    let cols: Vec<&str> = wide.split_whitespace().collect();
    assert!(cols[5].starts_with("10.244.1."), "IP column: {wide}");
    assert_eq!(cols[6], "node-1", "NODE column: {wide}");
    let pod = s.kubectl_json(&["get", "pod", "web", "-o", "json"]);
    let cs = &pod["status"]["containerStatuses"][0];
    assert!(
        cs["containerID"]
            .as_str()
            .unwrap()
            .starts_with("miniplane://")
    );
    assert!(cs["state"]["running"]["startedAt"].is_string());
    assert_eq!(pod["status"]["hostIP"], "172.16.0.3");
    let describe = eventually("kubelet events in describe", DEADLINE, || {
        let d = s.kubectl_ok(&["describe", "pod", "web"]);
        d.contains("Started container app").then_some(d)
    });
    for line in [
        "Pulling image \"nginx\"",
        "Successfully pulled image \"nginx\"",
        "Created container: app",
    ] {
        assert!(describe.contains(line), "{line:?} in:\n{describe}");
    }
    assert!(describe.contains("kubelet"), "{describe}");

    // Graceful deletion: kubectl waits until the kubelet deleted it with grace 0.
    s.kubectl_ok(&["delete", "pod", "web", "--timeout=30s"]);
    assert!(!s.kubectl(&["get", "pod", "web"]).ok());
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
    ]);
    assert!(events.contains("Stopping container app"), "{events}");
}

#[test]
fn failures_crash_loop_bad_image_and_completion() {
    let (s, _kubelet) = cluster();
    s.apply_ok(
        &pod(
            "crash",
            "node-0",
            "busybox",
            "miniplane.dev/fail: crash, miniplane.dev/run-for: 200ms",
            "Always",
        ),
        &[],
    );
    s.apply_ok(
        &pod("badimage", "node-1", "nginx:doesnotexist", "", "Always"),
        &[],
    );
    s.apply_ok(
        &pod(
            "job",
            "node-2",
            "busybox",
            "miniplane.dev/fail: exit-0, miniplane.dev/run-for: 200ms",
            "Never",
        ),
        &[],
    );
    s.apply_ok(
        &pod(
            "fails",
            "node-2",
            "busybox",
            "miniplane.dev/fail: exit-1, miniplane.dev/run-for: 200ms",
            "Never",
        ),
        &[],
    );
    eventually(
        "crash shows CrashLoopBackOff after restarts",
        DEADLINE,
        || {
            let (_, status, restarts) = pod_row(&s, "crash")?;
            (status == "CrashLoopBackOff" && restarts >= 1).then_some(())
        },
    );
    eventually(
        "bad image shows ErrImagePull / ImagePullBackOff",
        DEADLINE,
        || {
            let (ready, status, _) = pod_row(&s, "badimage")?;
            (ready == "0/1" && (status == "ImagePullBackOff" || status == "ErrImagePull"))
                .then_some(())
        },
    );
    eventually("job Completed", DEADLINE, || {
        (pod_row(&s, "job")?.1 == "Completed").then_some(())
    });
    eventually("failing job Error", DEADLINE, || {
        (pod_row(&s, "fails")?.1 == "Error").then_some(())
    });
    let job = s.kubectl_json(&["get", "pod", "job", "-o", "json"]);
    assert_eq!(job["status"]["phase"], "Succeeded");
    assert_eq!(
        job["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        0
    );
    let crash = s.kubectl_json(&["get", "pod", "crash", "-o", "json"]);
    assert_eq!(
        crash["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"],
        "Error"
    );
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=badimage",
    ]);
    assert!(
        events.contains("Failed to pull image \"nginx:doesnotexist\""),
        "{events}"
    );
    assert!(events.contains("Back-off pulling image"), "{events}");
}

/// The first and last address of an IPv4 CIDR.
fn cidr_range(cidr: &str) -> (u32, u32) {
    let (ip, prefix) = cidr.split_once('/').unwrap();
    let ip = u32::from(ip.parse::<std::net::Ipv4Addr>().unwrap());
    let size = 1u32 << (32 - prefix.parse::<u32>().unwrap());
    (ip, ip + size - 1)
}

/// With `--pod-cidr-from-node` a node registers without a pod CIDR and its pods wait for one;
/// the controller-manager's node IPAM controller (`--allocate-node-cidrs`) gives each Node a
/// block of `--cluster-cidr`, the kubelet takes its pods' IPs from it, and the block can't be
/// changed afterwards.
#[test]
fn node_ipam_hands_out_pod_cidrs_that_the_kubelet_uses() {
    let s = Server::start();
    let _kubelet = Component::start(
        &s,
        &[
            "kubelet",
            "--nodes",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--profile",
            "fast",
            "--pod-cidr-from-node",
        ],
        "miniplane kubelet: 2 nodes registered",
    );
    let pod_cidr =
        |node: &str| s.kubectl_ok(&["get", "node", node, "-o", "jsonpath={.spec.podCIDR}"]);
    assert_eq!(pod_cidr("node-1"), "", "no pod CIDR before the controller");
    s.apply_ok(&pod("early", "node-1", "nginx", "", "Always"), &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let ip = || s.kubectl_ok(&["get", "pod", "early", "-o", "jsonpath={.status.podIP}"]);
    assert_eq!(ip(), "", "no sandbox network without a pod CIDR");

    let _cm = Component::start(
        &s,
        &[
            "controller-manager",
            "--listen",
            "127.0.0.1:0",
            "--leader-elect=false",
            "--controllers",
            "nodeipam",
            "--allocate-node-cidrs",
            "--cluster-cidr",
            "10.200.0.0/16",
            "--node-cidr-mask-size",
            "26",
        ],
        "miniplane controller-manager started",
    );
    let cidrs: Vec<String> = ["node-0", "node-1"]
        .iter()
        .map(|n| {
            eventually(&format!("{n} gets a pod CIDR"), DEADLINE, || {
                Some(pod_cidr(n)).filter(|c| !c.is_empty())
            })
        })
        .collect();
    assert_ne!(cidrs[0], cidrs[1]);
    for c in &cidrs {
        assert!(
            c.starts_with("10.200.0.") && c.ends_with("/26"),
            "{cidrs:?}"
        );
    }
    let node = s.kubectl_json(&["get", "node", "node-1", "-o", "json"]);
    assert_eq!(node["spec"]["podCIDRs"], serde_json::json!([cidrs[1]]));
    let got = eventually("the waiting pod gets an IP", DEADLINE, || {
        Some(ip()).filter(|i| !i.is_empty())
    });
    let (first, last) = cidr_range(&cidrs[1]);
    let got_ip = u32::from(got.parse::<std::net::Ipv4Addr>().unwrap());
    assert!(
        first + 2 <= got_ip && got_ip < last,
        "{got} in {}",
        cidrs[1]
    );

    let err = s.kubectl_err(&[
        "patch",
        "node",
        "node-1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"podCIDR":"10.9.9.0/24","podCIDRs":["10.9.9.0/24"]}}"#,
    ]);
    assert!(
        err.contains(r#"spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid"#),
        "{err}"
    );
}
