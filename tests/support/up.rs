//! `miniplane up` as a child process of a test: started on a data dir inside the test's
//! temporary folder (port 0 unless the test says otherwise), ready once it prints its
//! "miniplane is ready at URL" line, driven with the real kubectl through the kubeconfig it
//! wrote, stopped with SIGTERM.
//!
//! ```text
//!   <tmp>/                 (UpEnv: one per test)
//!   ├── home/ cache/ tmp/  kubectl's isolated environment
//!   └── mp/                the data dir: store/, kubeconfig, LOCK, logs/
//! ```

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kubectl::{Run, isolated_kubectl, run_kubectl};
use super::{DEADLINE, eventually};

/// The first stdout line of a ready `up` starts with this.
const READY: &str = "miniplane is ready at ";

/// How long a SIGTERM'd `up` may take to stop every component.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A test's folder: kubectl's environment and `up`'s data dir.
pub struct UpEnv {
    dir: tempfile::TempDir,
    /// `up`'s flags for the tests' etcd cluster, if they run on one: the same on every `up`
    /// of this folder, so a restarted `up` finds its objects; a new prefix for `--fresh`
    /// (which empties the data dir only, not an etcd cluster).
    store: std::cell::RefCell<Vec<String>>,
}

impl UpEnv {
    /// A fresh folder.
    pub fn new() -> UpEnv {
        let dir = tempfile::tempdir().expect("a temp dir");
        for sub in ["home", "cache", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        UpEnv {
            dir,
            store: std::cell::RefCell::new(super::store::apiserver_flags(&[])),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The data dir `up` uses (`<tmp>/mp`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("mp")
    }

    /// The kubeconfig `up` writes.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("kubeconfig")
    }

    /// `miniplane <args>` with HOME in the test's folder (for `kubeconfig --merge`).
    pub fn miniplane(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_miniplane"));
        cmd.args(args)
            .env("HOME", self.dir().join("home"))
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        cmd
    }

    /// `miniplane up --data-dir <mp> <args>`, with the simulated kubelets' `fast` profile
    /// (pods Running as soon as bound) unless `args` choose a `--kubelet-profile`: `up`'s
    /// default, `realistic`, would only make the tests slower.
    fn up_command(&self, args: &[&str]) -> Command {
        let mut cmd = self.miniplane(&["up", "--data-dir"]);
        cmd.arg(self.data_dir()).args(args);
        if !args.iter().any(|a| a.starts_with("--etcd-servers")) {
            cmd.args(self.store_flags(args));
        }
        if !args.iter().any(|a| a.starts_with("--kubelet-profile")) {
            cmd.args(["--kubelet-profile", "fast"]);
        }
        cmd
    }

    /// The store flags of an `up` with `args` (see [`UpEnv::store`]).
    fn store_flags(&self, args: &[&str]) -> Vec<String> {
        let mut store = self.store.borrow_mut();
        if args.contains(&"--fresh") && !store.is_empty() {
            *store = super::store::apiserver_flags(&[]);
        }
        store.clone()
    }

    /// Starts `miniplane up --data-dir <mp> <args>` exactly as a user types it (`up`'s own
    /// defaults, the `realistic` kubelet profile among them) and waits until it is ready.
    pub fn up_as_typed(&self, args: &[&str]) -> Up {
        let mut cmd = self.miniplane(&["up", "--data-dir"]);
        cmd.arg(self.data_dir())
            .args(args)
            .args(self.store_flags(args));
        self.start_up(cmd)
    }

    /// Runs `miniplane up --data-dir <mp> <args>` to its end (at most [`DEADLINE`]): for the
    /// runs that must be refused.
    pub fn up_to_end(&self, args: &[&str]) -> Output {
        let mut cmd = self.up_command(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn miniplane up");
        let start = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return child.wait_with_output().unwrap();
            }
            if start.elapsed() > DEADLINE {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "miniplane up {args:?} still running after {DEADLINE:?}; stderr:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `miniplane up --data-dir <mp> <args>` (see [`UpEnv::up_command`]) and waits until
    /// it is ready.
    pub fn up(&self, args: &[&str]) -> Up {
        self.start_up(self.up_command(args))
    }

    /// Starts `cmd` (a `miniplane up`) and waits until it is ready.
    fn start_up(&self, mut cmd: Command) -> Up {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn miniplane up");
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        let mut up = Up {
            child,
            stdout,
            stderr,
            url: String::new(),
        };
        up.url = eventually("miniplane up to print that it is ready", DEADLINE, || {
            if let Ok(Some(status)) = up.child.try_wait() {
                panic!("miniplane up exited with {status}:\n{}", up.stderr());
            }
            let out = up.stdout();
            let line = out.lines().find(|l| l.starts_with(READY))?;
            Some(line[READY.len()..].split(' ').next()?.to_owned())
        });
        up
    }

    /// kubectl with the kubeconfig `up` wrote.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        run_kubectl(
            isolated_kubectl(self.dir(), &self.kubeconfig(), args),
            args,
            None,
        )
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let run = self.kubectl(args);
        assert!(run.ok(), "expected success: {run}");
        run.stdout
    }

    /// `kubectl apply -f -` of `yaml`, which must succeed.
    pub fn apply(&self, yaml: &str) {
        let args = ["apply", "-f", "-"];
        let run = run_kubectl(
            isolated_kubectl(self.dir(), &self.kubeconfig(), &args),
            &args,
            Some(yaml),
        );
        assert!(run.ok(), "expected success: {run}");
    }

    /// `kubectl get <args> -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["get"];
        all.extend(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl_ok(&all)).unwrap()
    }

    /// Waits until `count` pods labelled `app=<app>` are Running; returns them.
    pub fn running_pods(&self, app: &str, count: usize) -> Vec<serde_json::Value> {
        let selector = format!("app={app}");
        eventually(
            &format!("{count} Running pods {selector}"),
            DEADLINE,
            || {
                let pods = self.get_json(&["pods", "-l", &selector]);
                let items = pods["items"].as_array()?.clone();
                let running = items
                    .iter()
                    .filter(|p| p["status"]["phase"] == "Running")
                    .count();
                (items.len() == count && running == count).then_some(items)
            },
        )
    }
}

/// A running `miniplane up`; stopped (SIGTERM, SIGKILL after a deadline) on drop.
pub struct Up {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    /// The API server's URL it printed.
    pub url: String,
}

impl Up {
    /// Everything it printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Everything it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The pid in its progress line for `component` (`✓ controller-manager pid 42 (9 ms)`,
    /// `✓ kubelet: 3 nodes registered, ..., pid 43 (9 ms)`).
    pub fn pid_of(&self, component: &str) -> u32 {
        let prefix = format!("✓ {component}");
        let stderr = self.stderr();
        let line = stderr
            .lines()
            .find(|l| {
                l.strip_prefix(&prefix)
                    .is_some_and(|rest| rest.starts_with([' ', ':']))
            })
            .unwrap_or_else(|| panic!("no progress line for {component}:\n{stderr}"));
        let after = line.split("pid ").nth(1).expect("a pid in the line");
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for the exit; its status (panics if it had to be killed after
    /// [`STOP_TIMEOUT`]).
    pub fn terminate(&mut self) -> ExitStatus {
        terminate(&mut self.child).unwrap_or_else(|| {
            panic!(
                "miniplane up did not stop within {STOP_TIMEOUT:?} of SIGTERM:\n{}",
                self.stderr()
            )
        })
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- miniplane up stderr ---\n{}", self.stderr());
        }
        terminate(&mut self.child);
    }
}

/// SIGTERM, then waits for the exit: its status, or `None` if it had to be killed after
/// [`STOP_TIMEOUT`].
fn terminate(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    signal(child.id(), "TERM");
    let start = Instant::now();
    while start.elapsed() < STOP_TIMEOUT {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A child process of the test, stopped (SIGTERM, SIGKILL after a deadline) on drop.
pub struct Process(pub Child);

impl Process {
    /// SIGTERM and waits; whether it exited with success.
    pub fn stop(&mut self) -> bool {
        terminate(&mut self.0).is_some_and(|s| s.success())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        terminate(&mut self.0);
    }
}

/// `kill -<signal> <pid>` (the command: a signal from Rust would need `unsafe` libc).
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Whether process `pid` still exists (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Appends everything `pipe` yields to a shared string, on a thread.
pub fn collect(pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}
