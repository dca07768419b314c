//! Every teaching lab in `labs/`, run as CI runs it: a fresh in-process cluster with the lab's
//! settings and setup; then **every check of every step fails** (no check is met before the
//! student acts, so none is vacuous); then each step's solution is run and **all of that
//! step's checks pass**. The solutions run the real `miniplane` and `kubectl` commands.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Lab 10's operator is the example of `examples/website/`, included as `tests/operator.rs`
// includes it (each example has `website.rs` as its own module, as its own binary does).
#![allow(clippy::duplicate_mod)]

#[path = "../examples/website/operator.rs"]
#[allow(dead_code, unreachable_pub)]
mod website_operator;

use std::path::Path;
use std::sync::{Arc, Mutex};

use miniplane::Cluster;
use miniplane::lab::runner::OperatorStarter;
use miniplane::lab::{LabRunner, load, load_all};
use tokio_util::sync::CancellationToken;

use crate::support::DEADLINE;

fn labs_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../labs"))
}

/// One operator's stop signal and its thread.
type Running = (CancellationToken, std::thread::JoinHandle<()>);

/// Operators started by a lab, each on a thread with its own runtime (as its own process
/// would be); stopped by [`Operators::stop`] or when dropped.
#[derive(Default)]
struct Operators(Arc<Mutex<Vec<Running>>>);

impl Operators {
    /// Starts the Website operator against the cluster of `kubeconfig`.
    fn website(&self) -> OperatorStarter {
        let running = self.0.clone();
        Arc::new(move |kubeconfig: &Path| {
            let (token, stop) = (CancellationToken::new(), CancellationToken::new());
            let source = client::ClusterSource::Kubeconfig(kubeconfig.to_path_buf());
            let thread = {
                let token = token.clone();
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async move {
                        let config = client::ClientConfig::new(source).tracing(false);
                        let client = client::build_client(&config).await.unwrap();
                        website_operator::run(client, token).await;
                    });
                    drop(stop);
                })
            };
            running.lock().unwrap().push((token, thread));
            Ok(())
        })
    }
}

impl Operators {
    /// Stops every operator started so far and waits for its thread.
    fn stop(&self) {
        let running: Vec<Running> = self.0.lock().unwrap().drain(..).collect();
        for (token, thread) in running {
            token.cancel();
            let _ = thread.join();
        }
    }
}

impl Drop for Operators {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn run_lab(name: &str) {
    let lab = load(&labs_dir().join(name)).unwrap();
    let operators = Operators::default();
    let cluster = lab.cluster.configure(Cluster::builder()).start().unwrap();
    let runner = LabRunner::new(
        lab.clone(),
        cluster.client(),
        cluster.kubeconfig_path().to_path_buf(),
        env!("CARGO_BIN_EXE_miniplane").into(),
    )
    .with_operator("website-operator", operators.website())
    .with_etcd_endpoint(cluster.etcd_endpoint())
    .with_apiservers(cluster.apiserver_urls().to_vec());
    runner.setup().await.unwrap();
    for (i, step) in lab.steps.iter().enumerate() {
        let results = runner.check_step(i).await.unwrap();
        let vacuous: Vec<&str> = results
            .iter()
            .filter(|r| r.passed)
            .map(|r| r.name.as_str())
            .collect();
        assert!(
            vacuous.is_empty(),
            "{name} step {} ({}): checks pass before the student acted: {vacuous:?}",
            i + 1,
            step.title
        );
    }
    for (i, step) in lab.steps.iter().enumerate() {
        let results = runner.solve_step(i).await.unwrap();
        let failing: Vec<String> = results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| format!("{}: {}", r.name, r.message.as_deref().unwrap_or_default()))
            .collect();
        assert!(
            failing.is_empty(),
            "{name} step {} ({}): checks fail after its solution: {failing:?}",
            i + 1,
            step.title
        );
        let status = runner.status(i + 1, &[], "en");
        runner.publish(&status).await;
    }
    let published = runner.admin().lab().await.unwrap().unwrap();
    assert!(published.done, "{published:?}");
    // Operators stop before the cluster does.
    operators.stop();
}

#[test]
fn every_lab_loads_and_has_both_narratives() {
    let labs = load_all(labs_dir()).unwrap();
    assert!(labs.len() >= 10, "{} labs", labs.len());
    for lab in labs {
        for lang in ["en", "ko"] {
            let text = lab.readme(lang).unwrap();
            assert!(text.starts_with("# "), "{} {lang}: a title first", lab.name);
        }
        assert!(lab.title_ko.is_some(), "{}: no Korean title", lab.name);
        for step in &lab.steps {
            assert!(
                step.title_ko.is_some() && step.task_ko.is_some(),
                "{}: step {:?} has no Korean text",
                lab.name,
                step.title
            );
        }
    }
}

#[tokio::test]
async fn lab_01_declarative() {
    run_lab("01-declarative").await;
}

#[tokio::test]
async fn lab_02_watch_informer() {
    run_lab("02-watch-informer").await;
}

#[tokio::test]
async fn lab_03_workqueue() {
    run_lab("03-workqueue").await;
}

#[tokio::test]
async fn lab_04_rolling_update() {
    run_lab("04-rolling-update").await;
}

#[tokio::test]
async fn lab_05_rollout_history() {
    run_lab("05-rollout-history").await;
}

#[tokio::test]
async fn lab_06_ownership_gc() {
    run_lab("06-ownership-gc").await;
}

#[tokio::test]
async fn lab_07_scheduler() {
    run_lab("07-scheduler").await;
}

#[tokio::test]
async fn lab_08_node_failure() {
    run_lab("08-node-failure").await;
}

#[tokio::test]
async fn lab_09_controller_manager_down() {
    run_lab("09-controller-manager-down").await;
}

#[tokio::test]
async fn lab_10_crd_operator() {
    run_lab("10-crd-operator").await;
}

#[tokio::test]
async fn lab_11_service_endpoints() {
    run_lab("11-service-endpoints").await;
}

#[tokio::test]
async fn lab_12_cloud_node_init() {
    run_lab("12-cloud-node-init").await;
}

#[tokio::test]
async fn lab_13_load_balancer() {
    run_lab("13-load-balancer").await;
}

#[tokio::test]
async fn lab_14_rbac() {
    run_lab("14-rbac").await;
}

#[tokio::test]
async fn lab_15_serviceaccounts() {
    run_lab("15-serviceaccounts").await;
}

#[tokio::test]
async fn lab_16_jobs() {
    run_lab("16-jobs").await;
}

#[tokio::test]
async fn lab_17_pod_placement() {
    run_lab("17-pod-placement").await;
}

#[tokio::test]
async fn lab_18_statefulsets() {
    run_lab("18-statefulsets").await;
}

#[tokio::test]
async fn lab_19_priority_preemption() {
    run_lab("19-priority-preemption").await;
}

#[tokio::test]
async fn lab_20_disruption_budgets() {
    run_lab("20-disruption-budgets").await;
}

#[tokio::test]
async fn lab_21_inside_a_pod() {
    run_lab("21-inside-a-pod").await;
}

#[tokio::test]
async fn lab_22_autoscaling() {
    run_lab("22-autoscaling").await;
}

#[tokio::test]
async fn lab_23_where_the_state_lives() {
    run_lab("23-where-the-state-lives").await;
}

#[tokio::test]
async fn lab_24_record_replay() {
    run_lab("24-record-replay").await;
}

/// `miniplane lab start` in the foreground (as a student runs it), and from another process
/// `status`, `check`, `hint`, `solve --all`, `check` again: the verbs a student types.
#[test]
fn the_lab_verbs_drive_a_lab_from_start_to_done() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let exe = env!("CARGO_BIN_EXE_miniplane");
    let dir = tempfile::tempdir().unwrap();
    let labs = labs_dir().to_str().unwrap().to_owned();
    /// The `lab start` process, stopped with Ctrl-C (SIGINT) even if the test fails.
    struct Started(std::process::Child);
    impl Drop for Started {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                interrupt(&self.0);
                let deadline = std::time::Instant::now() + DEADLINE;
                while let Ok(None) = self.0.try_wait() {
                    if std::time::Instant::now() > deadline {
                        let _ = self.0.kill();
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let _ = self.0.wait();
            }
        }
    }
    fn interrupt(child: &std::process::Child) {
        #[allow(unsafe_code)]
        // SAFETY: `kill` with a pid of our own child that has not been waited for.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
    }
    let mut start = Started(
        Command::new(exe)
            .args(["lab", "start", "1", "--labs", &labs])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // `start` prints the narrative and the first task, then the line saying where to go on.
    let mut lines = BufReader::new(start.0.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("In another terminal") {
            break;
        }
    }
    assert!(
        printed.contains("# Lab 1: Declarative vs imperative"),
        "{printed}"
    );
    assert!(
        printed.contains("Step 1/4: Create a Deployment imperatively"),
        "{printed}"
    );
    let lab = |args: &[&str]| {
        let out = Command::new(exe)
            .arg("lab")
            .args(args)
            .args(["--labs", &labs])
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = lab(&["status", "--lang", "ko"]);
    assert!(ok, "{err}");
    assert!(out.contains("명령으로 Deployment 만들기"), "{out}");
    let (ok, out, err) = lab(&["check"]);
    assert!(
        !ok && err.contains("step 1: 3 of 3 checks not met"),
        "{err}"
    );
    assert!(
        out.contains("✗ you created deployment web with kubectl"),
        "{out}"
    );
    assert!(
        out.contains(
            "missing: create deployments web* by kubectl (from the trace): 0, want at least 1"
        ),
        "{out}"
    );
    let (_, out, _) = lab(&["hint"]);
    assert!(out.starts_with("Hint 1/1:"), "{out}");
    let (_, out, _) = lab(&["hint"]);
    assert!(out.contains("No more hints"), "{out}");
    let (ok, out, err) = lab(&["solve", "--all"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("$ kubectl create deployment web --image=nginx:1.25 --replicas=3"),
        "{out}"
    );
    assert!(out.contains("is done"), "{out}");
    let (ok, out, _) = lab(&["check"]);
    assert!(ok && out.contains("is done"), "{out}");
    // Reset: workloads deleted, back to step 1, whose checks fail again.
    let (ok, out, err) = lab(&["reset"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("Step 1/4"), "{out}");
    let (ok, out, _) = lab(&["check"]);
    assert!(
        !ok && out.contains("✗ deployment web wants 3 replicas"),
        "{out}"
    );
    let (ok, _, err) = lab(&["start", "99"]);
    assert!(!ok && err.contains("no lab \"99\""), "{err}");
    // Ctrl-C stops the lab's cluster.
    interrupt(&start.0);
    let deadline = std::time::Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = start.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lab start ignored Ctrl-C"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// A lab of one step whose check passes only seconds after the student's command: a pod whose
/// image pull takes 2 s (`miniplane.dev/pull-delay`) must be Running.
const SLOW_LAB: &str = r#"title: A slow pod
titleKo: 느린 파드
cluster: {nodes: 1}
steps:
  - title: Run a pod whose image takes 2 s to pull
    titleKo: 이미지를 2초 동안 받는 파드 실행하기
    task: "`kubectl run slow --image=nginx:1.27 --annotations=miniplane.dev/pull-delay=2s`"
    taskKo: "`kubectl run slow --image=nginx:1.27 --annotations=miniplane.dev/pull-delay=2s`"
    checks:
      - name: running
        description: pod slow is Running
        object: {kind: Pod, name: slow, fields: {status.phase: Running}}
    solution:
      - run: kubectl run slow --image=nginx:1.27 --annotations=miniplane.dev/pull-delay=2s
"#;

/// `miniplane lab start 01-slow` ([`SLOW_LAB`]) in the foreground, in a folder of its own,
/// and the verbs a student types in another terminal; stopped with Ctrl-C on drop.
struct SlowLab {
    dir: tempfile::TempDir,
    start: std::process::Child,
}

impl SlowLab {
    fn start() -> SlowLab {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().unwrap();
        let lab = dir.path().join("labs/01-slow");
        std::fs::create_dir_all(&lab).unwrap();
        std::fs::write(lab.join("lab.yaml"), SLOW_LAB).unwrap();
        std::fs::write(lab.join("README.md"), "# A slow pod\n").unwrap();
        std::fs::write(lab.join("README.ko.md"), "# 느린 파드\n").unwrap();
        for sub in ["home", "cache", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let mut start = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .args(["lab", "start", "01-slow", "--labs", "labs"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = start.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.starts_with("In another terminal"));
        assert!(ready, "lab start ended before it was ready");
        // Keep reading, so that `lab start` never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        SlowLab { dir, start }
    }

    /// `miniplane lab <args>` from the lab's folder, stdout going to `stdout`.
    fn verb(&self, args: &[&str], stdout: std::process::Stdio) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .arg("lab")
            .args(args)
            .args(["--labs", "labs"])
            .current_dir(self.dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap()
    }

    /// `kubectl <args>` against the lab's cluster, which must succeed.
    fn kubectl(&self, args: &[&str]) {
        let kubeconfig = self.dir.path().join(".miniplane/labs/01-slow/kubeconfig");
        let cmd = crate::support::kubectl::isolated_kubectl(self.dir.path(), &kubeconfig, args);
        let run = crate::support::kubectl::run_kubectl(cmd, args, None);
        assert!(run.ok(), "{run}");
    }
}

impl Drop for SlowLab {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `kill` with the pid of our own child, not yet waited for.
        unsafe {
            libc::kill(self.start.id() as libc::pid_t, libc::SIGINT);
        }
        let deadline = std::time::Instant::now() + DEADLINE;
        while let Ok(None) = self.start.try_wait() {
            if std::time::Instant::now() > deadline {
                let _ = self.start.kill();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.start.wait();
    }
}

/// A script can tell from `lab check`'s exit status whether the step is done: 1 while a check
/// fails (the verdict also on stderr), 0 once every one passes.
#[test]
fn lab_check_exits_with_status_1_while_a_check_fails() {
    let lab = SlowLab::start();
    let out = lab.verb(&["check"], std::process::Stdio::piped());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("✗ pod slow is Running"), "{stdout}");
    assert_eq!(
        stderr.trim(),
        "miniplane: step 1: 1 of 1 checks not met",
        "{stdout}"
    );
    lab.kubectl(&[
        "run",
        "slow",
        "--image=nginx:1.27",
        "--annotations=miniplane.dev/pull-delay=0s",
    ]);
    let out = lab.verb(&["check"], std::process::Stdio::piped());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("✓ pod slow is Running"), "{stdout}");
}

/// `lab check` right after the student's command does not report a false ✗ for what the
/// cluster is still doing: the pod is Running 2 s after `kubectl run`, and the check, typed at
/// once, waits for it (within a few seconds) and passes.
#[test]
fn lab_check_gives_a_step_in_progress_time_to_converge() {
    let lab = SlowLab::start();
    lab.kubectl(&[
        "run",
        "slow",
        "--image=nginx:1.27",
        "--annotations=miniplane.dev/pull-delay=2s",
    ]);
    let out = lab.verb(&["check"], std::process::Stdio::piped());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("✓ pod slow is Running"), "{stdout}");
    assert!(stdout.contains("Lab 01-slow is done"), "{stdout}");
}

/// `miniplane lab check | head -2`, `miniplane lab list | head -2`: a reader that is gone
/// ends the process quietly, as a closed pipe ends a C tool — no panic, no status 101.
#[test]
fn lab_verbs_end_quietly_on_a_closed_pipe() {
    use std::os::unix::process::ExitStatusExt;
    let lab = SlowLab::start();
    for verb in [&["check"][..], &["status"], &["list"]] {
        // The pipe's only reader is closed before the verb starts: its first line fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = lab.verb(verb, writer.into());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "lab {verb:?}: {stderr}");
        assert_eq!(stderr, "", "lab {verb:?}");
        assert_ne!(out.status.code(), Some(101), "lab {verb:?}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "lab {verb:?}: {}",
            out.status
        );
    }
}
