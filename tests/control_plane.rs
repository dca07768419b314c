//! The control plane as `miniplane up` runs it, seen with the real kubectl: the
//! controller-manager and the scheduler hold their Leases in kube-system; the API server
//! keeps the `default/kubernetes` Service and answers `kubectl get componentstatuses`; a
//! second controller-manager and scheduler started by hand beside `up --separate` wait as
//! standbys and take over, within the lease duration, when the leaders are killed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use support::up::{Process, UpEnv, signal};
use support::{DEADLINE, deployment_yaml, eventually};

/// The holder of the Lease `kube-system/<name>`, if any.
fn holder(env: &UpEnv, name: &str) -> Option<String> {
    let run = env.kubectl(&["get", "lease", "-n", "kube-system", name, "-o", "json"]);
    if !run.ok() {
        return None;
    }
    let lease: serde_json::Value = serde_json::from_str(&run.stdout).ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
}

#[test]
fn up_holds_both_leases_and_serves_the_kubernetes_service_and_componentstatuses() {
    let env = UpEnv::new();
    let _up = env.up(&["--port", "0", "--nodes", "1"]);

    for lease in ["kube-controller-manager", "kube-scheduler"] {
        let id = eventually(&format!("a holder of {lease}"), DEADLINE, || {
            holder(&env, lease)
        });
        let (host, uuid) = id.rsplit_once('_').expect("hostname_uuid");
        assert!(!host.is_empty() && uuid.len() == 36, "{id}");
    }
    // Each acquisition is an Event on its Lease, as client-go records it.
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        let holder = holder(&env, lease).unwrap();
        eventually(
            &format!("the LeaderElection event of {lease}"),
            DEADLINE,
            || {
                let events = env.get_json(&["events", "-n", "kube-system"]);
                events["items"]
                    .as_array()?
                    .iter()
                    .any(|e| {
                        e["reason"] == "LeaderElection"
                            && e["involvedObject"]["kind"] == "Lease"
                            && e["involvedObject"]["name"] == lease
                            && e["message"] == format!("{holder} became leader")
                    })
                    .then_some(())
            },
        );
    }
    let leases = env.kubectl_ok(&["get", "lease", "-n", "kube-system"]);
    assert!(
        leases.contains("kube-controller-manager") && leases.contains("kube-scheduler"),
        "{leases}"
    );

    let svc = eventually("the kubernetes service", DEADLINE, || {
        let run = env.kubectl(&["get", "svc", "kubernetes"]);
        run.ok().then_some(run.stdout)
    });
    let lines: Vec<&str> = svc.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );
    let labels = env.kubectl_ok(&[
        "get",
        "svc",
        "kubernetes",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        labels.contains("\"component\":\"apiserver\"")
            && labels.contains("\"provider\":\"kubernetes\""),
        "{labels}"
    );

    let cs = env.kubectl(&["get", "cs"]);
    assert!(cs.ok(), "{cs}");
    assert!(
        cs.stderr
            .contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "{cs}"
    );
    let rows: Vec<Vec<&str>> = cs
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "STATUS", "MESSAGE", "ERROR"]);
    let mut names: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    names.sort_unstable();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    for row in &rows[1..] {
        assert_eq!(&row[1..], ["Healthy", "ok"], "{}", cs.stdout);
    }
    let resources = env.kubectl_ok(&["api-resources"]);
    assert!(
        resources.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.starts_with(&["componentstatuses", "cs", "v1", "false", "ComponentStatus"])
        }),
        "{resources}"
    );
}

#[test]
fn standbys_started_by_hand_take_over_when_the_leaders_are_killed() {
    let env = UpEnv::new();
    let up = env.up(&["--port", "0", "--nodes", "1", "--separate"]);
    env.apply(&deployment_yaml("web", 1, "nginx:1.27"));
    let first = env.running_pods("web", 1).remove(0);
    let first_name = first["metadata"]["name"].as_str().unwrap().to_owned();
    let leaders: Vec<String> = ["kube-controller-manager", "kube-scheduler"]
        .iter()
        .map(|l| eventually("a holder", DEADLINE, || holder(&env, l)))
        .collect();

    // As the README says: the same commands, beside `up`, with the health port off.
    let kubeconfig = env.kubeconfig();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let logs = env.dir().join("standby");
    std::fs::create_dir_all(&logs).unwrap();
    let standby = |component: &str| {
        let log = std::fs::File::create(logs.join(format!("{component}.log"))).unwrap();
        Process(
            env.miniplane(&[component, "--kubeconfig", kubeconfig, "--secure-port", "0"])
                .env("RUST_LOG", "info")
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    };
    let mut cm = standby("controller-manager");
    let mut scheduler = standby("scheduler");
    let log = |c: &str| std::fs::read_to_string(logs.join(format!("{c}.log"))).unwrap_or_default();
    for c in ["controller-manager", "scheduler"] {
        eventually(&format!("the {c} standby to campaign"), DEADLINE, || {
            log(c)
                .contains("attempting to acquire leader lease")
                .then_some(())
        });
    }
    // A standby does nothing: the leaders keep their Leases.
    std::thread::sleep(Duration::from_secs(3));
    for (lease, leader) in ["kube-controller-manager", "kube-scheduler"]
        .iter()
        .zip(&leaders)
    {
        assert_eq!(holder(&env, lease).as_ref(), Some(leader), "{lease}");
    }
    assert!(!log("controller-manager").contains("successfully acquired lease"));

    for component in ["controller-manager", "scheduler"] {
        signal(up.pid_of(component), "KILL");
    }
    // Within the lease duration (15 s) plus a retry period or two.
    let takeover = Duration::from_secs(25);
    for (lease, leader) in ["kube-controller-manager", "kube-scheduler"]
        .iter()
        .zip(&leaders)
    {
        eventually(&format!("a new holder of {lease}"), takeover, || {
            holder(&env, lease).filter(|h| h != leader)
        });
    }
    for c in ["controller-manager", "scheduler"] {
        assert!(log(c).contains("successfully acquired lease"), "{}", log(c));
    }
    // The new leaders act: a deleted pod is replaced (controller-manager) and bound
    // (scheduler), and runs.
    env.kubectl_ok(&["delete", "pod", &first_name, "--wait=true"]);
    let replaced = env.running_pods("web", 1).remove(0);
    assert_ne!(replaced["metadata"]["name"], first["metadata"]["name"]);
    assert!(
        cm.stop() && scheduler.stop(),
        "the standbys stop on SIGTERM"
    );
}

#[test]
fn a_second_controller_manager_on_a_taken_port_fails_with_one_line() {
    let env = UpEnv::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for component in ["controller-manager", "scheduler"] {
        let out = env
            .miniplane(&[
                component,
                "--master",
                "http://127.0.0.1:1",
                "--secure-port",
                &port,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            format!(
                "miniplane: cannot serve /healthz on 127.0.0.1:{port}: the port is in use \
                 (another {component}?); choose another with --secure-port, or --secure-port 0 \
                 to serve none"
            ),
            "{stderr}"
        );
    }
}
