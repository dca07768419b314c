//! `miniplane cloud ...` end to end: the real binary serves a simulated cloud from a temporary
//! directory (`miniplane cloud serve`), and the real binary's verbs launch, list, stop, start,
//! delete and fault it through the `cloud-config.json` the cloud wrote, as a user at a shell
//! would. Load balancers and routes have no verb of their own (the cloud-controller-manager
//! makes them); the test makes them through `cloud::sim::HttpCloud`, the provider, and reads
//! them with the CLI.
//!
//! Run with `cargo test -p ctl --test e2e cloud::`. A small harness of its own rather than
//! `support`: nothing here needs an API server or kubectl.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long `cloud serve` may take to print its start line, and a verb to finish.
const DEADLINE: Duration = Duration::from_secs(30);

/// A finished `miniplane` run.
struct Run {
    args: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "miniplane {} → {}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.args, self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `miniplane <args>` in `cwd` (killed after [`DEADLINE`]).
fn miniplane_in(cwd: &Path, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start miniplane");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!(
                "miniplane {} still running after {DEADLINE:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    Run {
        args: args.join(" "),
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `miniplane cloud <args> --cloud-config <config>`.
fn cloud(config: &Path, args: &[&str]) -> Run {
    let mut all = vec!["cloud"];
    all.extend(args);
    all.extend(["--cloud-config", config.to_str().unwrap()]);
    miniplane_in(&std::env::temp_dir(), &all)
}

/// Expects success and nothing on stderr; returns stdout.
fn ok(run: Run) -> String {
    assert!(run.status.success(), "expected success: {run}");
    assert_eq!(run.stderr, "", "expected nothing on stderr: {run}");
    run.stdout
}

/// Expects exit status 1 and one line on stderr; returns it without `miniplane: `.
fn one_line_error(run: Run) -> String {
    assert_eq!(run.status.code(), Some(1), "expected exit status 1: {run}");
    assert_eq!(run.stderr.lines().count(), 1, "expected one line: {run}");
    assert_eq!(run.stdout, "", "expected nothing on stdout: {run}");
    run.stderr
        .trim_end()
        .strip_prefix("miniplane: ")
        .unwrap_or_else(|| panic!("expected `miniplane: ...`: {run}"))
        .to_owned()
}

/// The cells of a table's rows (the header first).
fn table(stdout: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = stdout.lines().collect();
    // Every column starts at the same offset in every line, as kubectl aligns them.
    let starts = |line: &str| -> Vec<usize> {
        let mut starts = vec![0];
        let bytes = line.as_bytes();
        for i in 1..bytes.len() {
            if bytes[i] != b' ' && bytes[i - 1] == b' ' && i >= 3 && &line[i - 3..i] == "   " {
                starts.push(i);
            }
        }
        starts
    };
    let header = starts(lines[0]);
    for line in &lines[1..] {
        let mine = starts(line);
        assert!(
            mine.iter().all(|s| header.contains(s)),
            "misaligned table:\n{stdout}"
        );
    }
    lines
        .iter()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// `miniplane cloud serve` in the background; SIGTERM (then SIGKILL) on drop.
struct Serve {
    child: Child,
    log: PathBuf,
}

impl Serve {
    fn start(data_dir: &Path) -> Serve {
        let log = data_dir.with_extension("log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .args(["cloud", "serve", "--data-dir"])
            .arg(data_dir)
            .args(["--lb-provisioning-delay", "100ms"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start miniplane cloud serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut serve = Serve { child, log };
        match rx.recv_timeout(DEADLINE) {
            Ok(line) => {
                let expected = format!(
                    "(state in {}, cloud config {})",
                    data_dir.join("state.json").display(),
                    data_dir.join("cloud-config.json").display()
                );
                assert!(
                    line.starts_with("miniplane cloud listening on http://127.0.0.1:")
                        && line.ends_with(&expected),
                    "start line: {line}"
                );
            }
            Err(_) => {
                serve.stop();
                panic!(
                    "miniplane cloud serve printed no start line\n{}",
                    std::fs::read_to_string(&serve.log).unwrap_or_default()
                );
            }
        }
        serve
    }

    /// SIGTERM, then SIGKILL after 10 s; whether it exited by itself with status 0.
    fn stop(&mut self) -> bool {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.success();
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- miniplane cloud serve log ---\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        self.stop();
    }
}

#[test]
fn instances_and_faults_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cloud");
    let mut serve = Serve::start(&dir);
    let config = dir.join("cloud-config.json");

    assert_eq!(ok(cloud(&config, &["instances"])), "No instances.\n");
    let launched = ok(cloud(
        &config,
        &["launch", "node-1", "--internal-ip", "10.0.0.5"],
    ));
    assert!(
        launched.starts_with("instance/node-1 launched (i-"),
        "{launched}"
    );
    assert!(
        launched.ends_with(", local-1a, running, internal IP 10.0.0.5)\n"),
        "{launched}"
    );
    let second = ok(cloud(&config, &["launch", "node-2"]));
    assert!(
        second.ends_with(", local-1b, running, internal IP 172.31.0.1)\n"),
        "{second}"
    );
    let again = ok(cloud(&config, &["launch", "node-1"]));
    assert!(again.starts_with("instance/node-1 exists (i-"), "{again}");

    let rows = table(&ok(cloud(&config, &["instances"])));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "ID",
            "TYPE",
            "ZONE",
            "STATE",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "AGE"
        ]
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[1][..7],
        [
            "node-1",
            &rows[1][1],
            "sim.standard-2",
            "local-1a",
            "running",
            "10.0.0.5",
            "198.51.100.1"
        ]
    );
    assert!(
        rows[1][1].starts_with("i-") && rows[1][1].len() == 19,
        "{rows:?}"
    );
    assert_eq!(rows[2][0], "node-2");
    let node_1_id = rows[1][1].clone();

    let stopped = ok(cloud(&config, &["stop", "node-2"]));
    assert_eq!(
        stopped,
        format!("instance/node-2 stopped ({})\n", rows[2][1])
    );
    assert_eq!(table(&ok(cloud(&config, &["instances"])))[2][4], "stopped");
    ok(cloud(&config, &["start", "node-2"]));
    assert_eq!(table(&ok(cloud(&config, &["instances"])))[2][4], "running");
    let deleted = ok(cloud(&config, &["delete", "node-1"]));
    assert_eq!(
        deleted,
        format!("instance/node-1 terminated ({node_1_id})\n")
    );
    assert_eq!(
        table(&ok(cloud(&config, &["instances"])))[1][4],
        "terminated"
    );
    assert_eq!(
        one_line_error(cloud(&config, &["delete", "node-1"])),
        "instance \"node-1\" not found"
    );
    assert_eq!(
        one_line_error(cloud(&config, &["stop", "nope"])),
        "instance \"nope\" not found"
    );
    let bad = one_line_error(cloud(&config, &["launch", "Bad_Name"]));
    assert!(
        bad.starts_with("cloud API error 400: invalid instance name \"Bad_Name\""),
        "{bad}"
    );

    // Faults.
    assert_eq!(
        ok(cloud(&config, &["fault", "list"])),
        "No cloud faults in force.\n"
    );
    assert_eq!(
        ok(cloud(
            &config,
            &["fault", "set", "--api", "instances", "--fail-fraction", "1"]
        )),
        "cloud fault on instances: 100% of calls fail (undo: miniplane cloud fault clear --api instances)\n"
    );
    assert_eq!(
        one_line_error(cloud(&config, &["instances"])),
        "cloud API error 503: injected fault: 100% of instances calls fail (miniplane cloud fault clear)"
    );
    assert_eq!(ok(cloud(&config, &["routes"])), "No routes.\n");
    assert_eq!(
        ok(cloud(
            &config,
            &["fault", "set", "--api", "all", "--delay", "300ms"]
        )),
        "cloud fault on all: 300ms added to each call (undo: miniplane cloud fault clear --api all)\n"
    );
    assert_eq!(
        table(&ok(cloud(&config, &["fault", "list"]))),
        [
            ["API", "FAIL", "DELAY"],
            ["instances", "100%", "0s"],
            ["all", "0%", "300ms"]
        ]
    );
    assert_eq!(
        ok(cloud(&config, &["fault", "clear", "--api", "instances"])),
        "cloud fault on instances cleared\n"
    );
    let started = Instant::now();
    ok(cloud(&config, &["instances"]));
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not delayed"
    );
    assert_eq!(
        ok(cloud(&config, &["fault", "clear"])),
        "cloud faults cleared\n"
    );
    assert_eq!(
        ok(cloud(&config, &["fault", "list"])),
        "No cloud faults in force.\n"
    );
    assert_eq!(
        one_line_error(cloud(&config, &["fault", "set", "--api", "routes"])),
        "nothing to set: give --fail-fraction and/or --delay"
    );
    let out_of_range = cloud(
        &config,
        &["fault", "set", "--api", "routes", "--fail-fraction", "2"],
    );
    assert!(!out_of_range.status.success(), "{out_of_range}");
    assert!(
        out_of_range.stderr.contains("2 is not between 0 and 1"),
        "{out_of_range}"
    );

    // Stopped, the cloud does not answer; started again, it has kept its instances.
    assert!(serve.stop(), "cloud serve did not exit cleanly on SIGTERM");
    let down = one_line_error(cloud(&config, &["instances"]));
    assert!(
        down.starts_with(
            "the simulated cloud does not answer (is the cluster running? --cloud-config): "
        ),
        "{down}"
    );
    let _serve = Serve::start(&dir);
    let rows = table(&ok(cloud(&config, &["instances"])));
    assert_eq!(
        (rows[1][0].as_str(), rows[1][1].as_str()),
        ("node-1", node_1_id.as_str())
    );
}

#[test]
fn load_balancers_and_routes_through_the_cli() {
    use cloud::{Interface, LoadBalancerPort, NodeRef, Route, ServiceRef};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cloud");
    let _serve = Serve::start(&dir);
    let config = dir.join("cloud-config.json");
    assert_eq!(
        ok(cloud(&config, &["load-balancers"])),
        "No load balancers.\n"
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let provider = cloud::sim::HttpCloud::from_cloud_config(&config).unwrap();
        let node = |name: &str| NodeRef {
            name: name.into(),
            provider_id: None,
        };
        let service = ServiceRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: "3f2a9c1e-7d4b-4e8a-9b0c-1d2e3f4a5b6c".into(),
        };
        let ports = [
            LoadBalancerPort {
                name: Some("http".into()),
                protocol: "TCP".into(),
                port: 80,
                node_port: 30080,
            },
            LoadBalancerPort {
                name: Some("https".into()),
                protocol: "TCP".into(),
                port: 443,
                node_port: 30443,
            },
        ];
        provider
            .load_balancer()
            .unwrap()
            .ensure_load_balancer(
                "kubernetes",
                &service,
                &ports,
                &[node("node-2"), node("node-1")],
            )
            .await
            .unwrap();
        provider.launch_instance("node-1", None).await.unwrap();
        let routes = provider.routes().unwrap();
        for (hint, target, cidr) in [
            ("uid-1", "node-1", "10.244.0.0/24"),
            ("uid-2", "node-2", "10.244.1.0/24"),
        ] {
            let route = Route {
                name: String::new(),
                target_node: target.into(),
                destination_cidr: cidr.into(),
                blackhole: false,
            };
            routes
                .create_route("kubernetes", hint, &route)
                .await
                .unwrap();
        }
    });

    let rows = table(&ok(cloud(&config, &["load-balancers"])));
    assert_eq!(
        rows[0],
        ["NAME", "SERVICE", "STATE", "IP", "PORTS", "BACKENDS", "AGE"]
    );
    assert_eq!(
        rows[1][..6],
        [
            "a3f2a9c1e7d4b4e8a9b0c1d2e3f4a5b6",
            "default/web",
            "active",
            "203.0.113.1",
            "80:30080/TCP,443:30443/TCP",
            "node-1,node-2"
        ]
    );
    let rows = table(&ok(cloud(&config, &["routes"])));
    assert_eq!(
        rows[0],
        ["NAME", "CLUSTER", "TARGET", "DESTINATION", "STATE", "AGE"]
    );
    assert_eq!(
        rows[1][..5],
        [
            "kubernetes-uid-1",
            "kubernetes",
            "node-1",
            "10.244.0.0/24",
            "active"
        ]
    );
    // node-2 has no instance: its route leads nowhere.
    assert_eq!(
        rows[2][..5],
        [
            "kubernetes-uid-2",
            "kubernetes",
            "node-2",
            "10.244.1.0/24",
            "blackhole"
        ]
    );
}

#[test]
fn a_missing_or_bad_cloud_config_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    // The default: the cloud of `miniplane up` in the current directory.
    let missing = one_line_error(miniplane_in(tmp.path(), &["cloud", "instances"]));
    assert!(
        missing.starts_with(
            "the simulated cloud does not answer (is the cluster running? --cloud-config): \
             cloud config .miniplane/cloud/cloud-config.json: No such file or directory"
        ),
        "{missing}"
    );
    let garbage = tmp.path().join("garbage.json");
    std::fs::write(&garbage, "endpoint = 1").unwrap();
    let bad = one_line_error(cloud(&garbage, &["fault", "list"]));
    assert!(
        bad.contains("garbage.json: expected value at line 1 column 1"),
        "{bad}"
    );
    // A config that names a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let stale = tmp.path().join("stale.json");
    std::fs::write(
        &stale,
        format!("{{\"endpoint\": \"http://127.0.0.1:{port}\"}}"),
    )
    .unwrap();
    let down = one_line_error(cloud(&stale, &["routes"]));
    assert!(
        down.starts_with(&format!(
            "the simulated cloud does not answer (is the cluster running? --cloud-config): \
             http://127.0.0.1:{port}/v1/routes: "
        )) && down.ends_with("Connection refused (os error 111)"),
        "{down}"
    );
}

#[test]
fn serve_refuses_a_corrupt_state_file() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("state.json"), "{\"version\": 1,").unwrap();
    let run = miniplane_in(
        tmp.path(),
        &["cloud", "serve", "--data-dir", tmp.path().to_str().unwrap()],
    );
    let error = one_line_error(run);
    assert!(
        error.starts_with("the simulated cloud's state file ")
            && error.contains("state.json is corrupt: EOF while parsing a value")
            && error.ends_with("(move it away to start an empty cloud)"),
        "{error}"
    );
}
