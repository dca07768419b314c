//! `miniplane up`: the whole control plane from one command, driven by the real kubectl
//! through the kubeconfig it writes; graceful stop on SIGTERM; a restart keeps every object
//! and running pods stay on their nodes; a second `up` on a data dir in use, or on a port in
//! use, is refused with one clear line; `--separate` runs each component as a process that a
//! lab can kill; in one process each client component has a thread of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::process::ExitStatusExt;
use support::up::{Process, UpEnv, process_alive, signal};
use support::{DEADLINE, deployment_yaml, eventually};

/// The node names with `Ready` in kubectl's STATUS column.
fn ready_nodes(env: &UpEnv) -> Vec<String> {
    env.kubectl_ok(&["get", "nodes", "--no-headers"])
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn up_serves_kubectl_stops_on_sigterm_and_a_restart_keeps_objects_and_pods() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "2"]);
    let stderr = up.stderr();
    // HTTPS on the cluster's own CA, as kind and kubeadm set a cluster up.
    assert!(
        stderr.contains("✓ apiserver https://127.0.0.1:"),
        "{stderr}"
    );
    assert!(stderr.contains("✓ 2/2 nodes Ready"), "{stderr}");
    let kubeconfig = std::fs::read_to_string(env.kubeconfig()).unwrap();
    assert!(
        kubeconfig.contains(&format!("server: {}", up.url)),
        "{kubeconfig}"
    );
    assert!(
        up.stdout()
            .contains(&format!("export KUBECONFIG={}", env.kubeconfig().display())),
        "{}",
        up.stdout()
    );
    assert_eq!(
        env.kubectl_ok(&["config", "current-context"]).trim(),
        "miniplane"
    );
    // Ready as soon as `up` says so: no waiting here.
    assert_eq!(ready_nodes(&env), ["node-0", "node-1"]);
    // The kubeconfig carries the CA and an admin certificate in system:masters.
    assert!(
        kubeconfig.contains("certificate-authority-data:"),
        "{kubeconfig}"
    );
    let whoami = env.kubectl_ok(&["auth", "whoami"]);
    assert!(
        whoami.contains("kubernetes-admin")
            && whoami.contains("[system:masters system:authenticated]"),
        "{whoami}"
    );
    let ca = std::fs::read(env.data_dir().join("pki/ca.crt")).unwrap();

    env.apply(&deployment_yaml("web", 1, "nginx:1.27"));
    env.kubectl_ok(&["create", "configmap", "kept", "--from-literal=k=v"]);
    let before = env.running_pods("web", 1).remove(0);

    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
    assert!(up.stderr().contains("✓ stopped"), "{}", up.stderr());

    // Same data dir: every object is back, and the Running pod resumes on its node.
    let mut up = env.up(&["--port", "0", "--nodes", "2"]);
    // The CA is kept: certificates issued by the first start still verify.
    assert_eq!(
        std::fs::read(env.data_dir().join("pki/ca.crt")).unwrap(),
        ca
    );
    let cm = env.get_json(&["configmap", "kept"]);
    assert_eq!(cm["data"]["k"], "v");
    let after = env.running_pods("web", 1).remove(0);
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["spec"]["nodeName"], before["spec"]["nodeName"]);
    assert_eq!(after["status"]["podIP"], before["status"]["podIP"]);

    // `kubeconfig --merge` adds the context to ~/.kube/config and keeps the others.
    let home_config = env.dir().join("home/.kube/config");
    std::fs::create_dir_all(home_config.parent().unwrap()).unwrap();
    std::fs::write(
        &home_config,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {server: 'https://prod:6443'}\n\
         users:\n- name: admin\n  user: {token: t}\ncontexts:\n- name: prod\n  context: {cluster: prod, user: admin}\n\
         current-context: prod\n",
    )
    .unwrap();
    let data_dir = env.data_dir();
    let merged = env
        .miniplane(&[
            "kubeconfig",
            "--merge",
            "--data-dir",
            data_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(merged.status.success(), "{merged:?}");
    let contexts = support::kubectl::run_kubectl(
        support::kubectl::isolated_kubectl(
            env.dir(),
            &home_config,
            &["config", "get-contexts", "-o", "name"],
        ),
        &["config", "get-contexts"],
        None,
    );
    assert_eq!(
        contexts.stdout.lines().collect::<Vec<_>>(),
        ["miniplane", "prod"],
        "{contexts}"
    );
    let nodes = support::kubectl::run_kubectl(
        support::kubectl::isolated_kubectl(
            env.dir(),
            &home_config,
            &["get", "nodes", "-o", "name"],
        ),
        &["get", "nodes"],
        None,
    );
    assert!(nodes.ok() && nodes.stdout.lines().count() == 2, "{nodes}");

    // --fresh starts from an empty store.
    assert!(up.terminate().success());
    let _up = env.up(&["--port", "0", "--nodes", "1", "--fresh"]);
    let run = env.kubectl(&["get", "configmap", "kept"]);
    assert!(!run.ok() && run.stderr.contains("NotFound"), "{run}");
    assert_eq!(ready_nodes(&env), ["node-0"]);
}

#[test]
fn a_second_up_on_a_data_dir_or_port_in_use_is_refused() {
    let env = UpEnv::new();
    let up = env.up(&["--port", "0", "--nodes", "1"]);
    let second = env.up_to_end(&["--port", "0", "--nodes", "1"]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    let lock = env.data_dir().join("LOCK");
    assert_eq!(
        stderr.trim(),
        format!(
            "miniplane: data dir {} is in use by another miniplane (lock held on {})",
            env.data_dir().display(),
            lock.display()
        )
    );
    // The first one is untouched and still serves.
    env.kubectl_ok(&["get", "nodes"]);

    let other = UpEnv::new();
    let port = up.url.rsplit(':').next().unwrap();
    let taken = other.up_to_end(&["--port", port]);
    let stderr = String::from_utf8_lossy(&taken.stderr);
    assert!(!taken.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "miniplane: port {port} is already in use on 127.0.0.1 (another miniplane or API server?); choose another with --port"
        )
    );
}

#[test]
fn separate_a_killed_controller_manager_stops_replacing_pods_until_restarted() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--separate"]);
    let cm = up.pid_of("controller-manager");
    let others = ["apiserver", "scheduler", "kubelet"].map(|c| up.pid_of(c));
    assert!(process_alive(cm) && others.iter().all(|p| process_alive(*p)));

    env.apply(&deployment_yaml("web", 1, "nginx:1.27"));
    let first = env.running_pods("web", 1).remove(0);
    let first_name = first["metadata"]["name"].as_str().unwrap().to_owned();

    signal(cm, "KILL");
    eventually(
        "up to report the controller-manager's exit",
        DEADLINE,
        || {
            up.stderr()
                .contains(&format!("✗ controller-manager (pid {cm}) exited"))
                .then_some(())
        },
    );
    env.kubectl_ok(&["delete", "pod", &first_name, "--wait=true"]);
    // Nothing replaces it: no ReplicaSet controller runs. A negative needs a window to watch.
    let window = std::time::Instant::now();
    while window.elapsed() < std::time::Duration::from_secs(2) {
        let pods = env.get_json(&["pods", "-l", "app=web"]);
        assert_eq!(pods["items"].as_array().unwrap().len(), 0, "{pods}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // Started again by hand (as the usage text says), it replaces the pod.
    let kubeconfig = env.kubeconfig();
    let mut restarted = Process(
        env.miniplane(&[
            "controller-manager",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap(),
    );
    let replaced = env.running_pods("web", 1).remove(0);
    assert_ne!(replaced["metadata"]["name"], first["metadata"]["name"]);
    assert!(restarted.stop(), "the controller-manager stops on SIGTERM");

    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
    for pid in others {
        assert!(!process_alive(pid), "pid {pid} outlived `up`");
    }
}

#[test]
fn separate_components_stop_when_up_is_killed() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--separate"]);
    let children =
        ["apiserver", "controller-manager", "scheduler", "kubelet"].map(|c| up.pid_of(c));
    assert!(children.iter().all(|p| process_alive(*p)));
    signal(up.pid(), "KILL");
    let status = up.terminate();
    assert_eq!(status.signal(), Some(9), "{status}");
    for pid in children {
        eventually(&format!("pid {pid} to stop"), DEADLINE, || {
            (!process_alive(pid)).then_some(())
        });
    }
}

/// The names of `pid`'s threads (`comm`: at most 15 bytes).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn up_runs_each_client_component_on_a_thread_of_its_own() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--no-fsync"]);
    let names = thread_names(up.pid());
    // As their own processes run them: one thread each, apart from the API server's workers.
    for thread in ["controller-mana", "scheduler", "kubelet"] {
        assert_eq!(
            names.iter().filter(|n| *n == thread).count(),
            1,
            "{thread}: {names:?}"
        );
    }
    env.apply(&deployment_yaml("web", 2, "nginx:1.27"));
    assert_eq!(env.running_pods("web", 2).len(), 2);
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
}

#[test]
fn up_no_fsync_reaches_a_separate_api_server_and_only_when_asked() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--separate", "--no-fsync"]);
    let args = cmdline(up.pid_of("apiserver"));
    assert!(args.iter().any(|a| a == "--no-fsync"), "{args:?}");
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--separate"]);
    let args = cmdline(up.pid_of("apiserver"));
    assert!(!args.iter().any(|a| a == "--no-fsync"), "{args:?}");
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
}

#[test]
fn up_on_a_virtual_clock_passes_it_on_says_so_and_the_clock_verb_moves_it() {
    let env = UpEnv::new();
    let mut up = env.up(&[
        "--port",
        "0",
        "--nodes",
        "1",
        "--separate",
        "--clock",
        "virtual",
        "--clock-speed",
        "0",
        "--clock-start",
        "2031-03-01T12:00:00Z",
        "--seed",
        "7",
    ]);
    assert!(
        up.stdout()
            .contains("The cluster runs on a virtual clock (paused)"),
        "{}",
        up.stdout()
    );
    let apiserver = cmdline(up.pid_of("apiserver"));
    for flag in [
        "--clock=virtual",
        "--clock-speed=0",
        "--clock-start=2031-03-01T12:00:00Z",
        "--seed=7",
    ] {
        assert!(
            apiserver.iter().any(|a| a == flag),
            "{flag} not in {apiserver:?}"
        );
    }
    let scheduler = cmdline(up.pid_of("scheduler"));
    assert!(scheduler.iter().any(|a| a == "--seed=7"), "{scheduler:?}");
    let kubeconfig = env.kubeconfig();
    let clock = |args: &[&str]| {
        let mut all = vec!["clock"];
        all.extend_from_slice(args);
        all.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
        let out = env.miniplane(&all).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    };
    assert_eq!(
        clock(&[]),
        (
            true,
            "Virtual  2031-03-01T12:00:00Z  paused".into(),
            String::new()
        )
    );
    assert_eq!(
        clock(&["advance", "90s"]),
        (
            true,
            "Virtual  2031-03-01T12:01:30Z  paused".into(),
            String::new()
        )
    );
    let (ok, _, err) = clock(&["advance", "-5m"]);
    assert!(!ok, "a clock moved back is refused");
    assert!(
        err.contains("the cluster clock cannot move backwards (advance -5m)")
            && err.lines().count() == 1,
        "{err}"
    );
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
}

/// The arguments `pid` was started with.
fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The trace collector's counters, through kubectl.
fn trace_stats(env: &UpEnv) -> serde_json::Value {
    let body = env.kubectl_ok(&["get", "--raw", "/miniplane/v1/traces?limit=1"]);
    serde_json::from_str::<serde_json::Value>(&body).unwrap()["stats"].clone()
}

#[test]
fn up_passes_its_trace_settings_to_every_separate_component() {
    let env = UpEnv::new();
    // Sizes other than the defaults, but well above the ~50 spans of a one-pod apply: a
    // budget it reached would refuse the kubelet's spans, the last of the flow to arrive.
    let flags = [
        "--trace-max-spans",
        "900",
        "--trace-max-spans-per-trace",
        "600",
    ];
    let mut args = vec!["--port", "0", "--nodes", "1", "--separate"];
    args.extend(flags);
    let mut up = env.up(&args);
    let stats = trace_stats(&env);
    assert_eq!(stats["capacity"], 900, "{stats}");
    assert_eq!(stats["maxSpansPerTrace"], 600, "{stats}");
    let apiserver = cmdline(up.pid_of("apiserver"));
    for flag in [
        "--tracing=true",
        "--trace-max-spans=900",
        "--trace-max-spans-per-trace=600",
    ] {
        assert!(apiserver.iter().any(|a| a == flag), "{apiserver:?}");
    }
    for component in ["controller-manager", "scheduler", "kubelet"] {
        let args = cmdline(up.pid_of(component));
        assert!(args.iter().any(|a| a == "--tracing=true"), "{args:?}");
    }

    // The apply is traced: its pod carries the context, the components' spans arrive.
    env.apply(&deployment_yaml("web", 1, "nginx:1.27"));
    let pod = env.running_pods("web", 1).remove(0);
    assert!(
        pod["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION].is_string(),
        "{pod}"
    );
    eventually("spans from the components", DEADLINE, || {
        let body = env.kubectl_ok(&["get", "--raw", "/miniplane/v1/traces?spans=all"]);
        let body: serde_json::Value = serde_json::from_str(&body).ok()?;
        let components: Vec<String> = body["spans"]
            .as_array()?
            .iter()
            .filter_map(|s| s["component"].as_str().map(str::to_owned))
            .collect();
        ["kube-controller-manager", "kube-scheduler", "kubelet"]
            .iter()
            .all(|c| components.iter().any(|s| s == c))
            .then_some(())
    });
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
}

#[test]
fn up_with_tracing_off_records_and_stamps_nothing() {
    let env = UpEnv::new();
    let mut up = env.up(&["--port", "0", "--nodes", "1", "--tracing=false"]);
    env.apply(&deployment_yaml("web", 2, "nginx:1.27"));
    for pod in env.running_pods("web", 2) {
        let annotations = &pod["metadata"]["annotations"];
        assert!(
            annotations[trace::TRACEPARENT_ANNOTATION].is_null(),
            "{pod}"
        );
    }
    let stats = trace_stats(&env);
    assert_eq!(stats["received"], 0, "{stats}");
    assert_eq!(stats["stored"], 0, "{stats}");
    let status = up.terminate();
    assert!(status.success(), "{status}:\n{}", up.stderr());
}

/// `--node-cpu`, `--node-memory` and `--node-labels` (the kubelet's `key=value,...` form)
/// shape every node: kubectl sees them in capacity, allocatable and labels, in one process and
/// with `--separate`; a quantity or label the kubelet would refuse is refused up front.
#[test]
fn up_shapes_its_nodes_as_its_flags_say() {
    let flags = [
        "--port",
        "0",
        "--nodes",
        "2",
        "--node-cpu",
        "8",
        "--node-memory",
        "32Gi",
        "--node-labels",
        "disktype=ssd,example.com/rack=r1",
    ];
    for separate in [false, true] {
        let env = UpEnv::new();
        let mut args = flags.to_vec();
        if separate {
            args.push("--separate");
        }
        let _up = env.up(&args);
        let nodes = env.get_json(&["nodes"]);
        let items = nodes["items"].as_array().unwrap();
        assert_eq!(items.len(), 2, "{nodes}");
        for node in items {
            let name = node["metadata"]["name"].as_str().unwrap();
            for field in ["capacity", "allocatable"] {
                let resources = &node["status"][field];
                assert_eq!(
                    resources["cpu"], "8",
                    "{name} {field} (separate: {separate})"
                );
                assert_eq!(resources["memory"], "32Gi", "{name} {field}");
                assert_eq!(resources["pods"], "110", "{name} {field}");
            }
            let labels = &node["metadata"]["labels"];
            assert_eq!(labels["disktype"], "ssd", "{name}: {labels}");
            assert_eq!(labels["example.com/rack"], "r1", "{name}");
            assert_eq!(labels["kubernetes.io/hostname"], name, "{name}");
        }
        // What kubectl shows of them: the labels select the nodes.
        let selected = env.kubectl_ok(&["get", "nodes", "-l", "disktype=ssd", "-o", "name"]);
        assert_eq!(selected.lines().count(), 2, "{selected}");
    }

    let env = UpEnv::new();
    for (bad, says) in [
        (
            ["--node-cpu", "four"],
            "invalid value 'four' for '--node-cpu <QUANTITY>'",
        ),
        (
            ["--node-memory=-1Gi", "--nodes=1"],
            "must be greater than or equal to 0",
        ),
        (
            ["--node-labels", "disktype"],
            "malformed pair, expect string=string",
        ),
        (
            ["--node-labels", "a=b c"],
            "invalid node labels: 'b c' - a valid label must be",
        ),
    ] {
        let out = env.up_to_end(&bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains(says), "{bad:?}: {stderr}");
    }
}

/// `up` as typed runs the kubelets' realistic profile: `kubectl get pods -w`, started before
/// the apply as the README says, shows a new pod Pending, then ContainerCreating while its
/// image is pulled, then Running — not Running at once.
#[test]
fn up_by_default_shows_pods_pending_then_container_creating_then_running() {
    let env = UpEnv::new();
    let _up = env.up_as_typed(&["--port", "0", "--nodes", "1"]);
    let mut watch = support::kubectl::Background::spawn(
        support::kubectl::isolated_kubectl(
            env.dir(),
            &env.kubeconfig(),
            &["get", "pods", "-w", "-v=6"],
        ),
        "get pods -w".into(),
    );
    // Apply only once kubectl watches (its -v=6 log shows the watch request).
    watch.wait_line("the watch request", DEADLINE, |l| {
        l.contains("watch=true") && l.contains("pods")
    });
    env.apply(&deployment_yaml("web", 1, "nginx:1.27"));
    let status = |want: &'static str| {
        move |line: &str| {
            let columns: Vec<&str> = line.split_whitespace().collect();
            columns.first().is_some_and(|n| n.starts_with("web-")) && columns.get(2) == Some(&want)
        }
    };
    for want in ["Pending", "ContainerCreating", "Running"] {
        watch.wait_line(want, DEADLINE, status(want));
    }
}
