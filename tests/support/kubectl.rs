//! Running the real `kubectl` against a [`Server`], in an environment that holds nothing of
//! the machine's: its own HOME, kubeconfig and discovery cache (kubectl caches discovery for
//! six hours, which would hide changes between test runs), and no proxy variables.

use super::Server;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest a single kubectl command may run before the test fails (and kubectl is killed).
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where Debian's `kubectl` package puts its dispatcher (it asks `/version`, then runs the
/// kubectl of the server's minor version, here 1.33).
fn kubectl_path() -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let path = PathBuf::from(dir).join("kubectl");
        if path.exists() {
            return path;
        }
    }
    panic!("kubectl not found: install it with `apt-get install -y kubectl`");
}

/// A finished kubectl run, with the command line kept for failure messages.
pub struct Run {
    /// The arguments given.
    pub args: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Whether kubectl exited with 0.
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kubectl {} → {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args, self.status, self.stdout, self.stderr
        )
    }
}

/// A `kubectl <args>` command that sees nothing of the machine: HOME, TMPDIR and the
/// discovery cache are `home`, `tmp` and `cache` under `dir` (which must exist), and
/// `kubeconfig` is its only kubeconfig.
pub fn isolated_kubectl(dir: &Path, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(kubectl_path());
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("KUBECONFIG", kubeconfig)
        // kubectl edit keeps copies of rejected edits in TMPDIR: keep them in the test's dir.
        .env("TMPDIR", dir.join("tmp"))
        .arg(format!("--cache-dir={}", dir.join("cache").display()))
        .args(args);
    cmd
}

/// Runs a kubectl command made by [`isolated_kubectl`] (`args` for messages), feeding `stdin`.
pub fn run_kubectl(cmd: Command, args: &[&str], stdin: Option<&str>) -> Run {
    let output = run_with_timeout(cmd, stdin, KUBECTL_TIMEOUT)
        .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")));
    Run {
        args: args.join(" "),
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

impl Server {
    /// A `kubectl` command with the isolated environment of this server.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        isolated_kubectl(self.dir(), &self.kubeconfig(), args)
    }

    /// Runs kubectl with `args` (and optional standard input, extra environment).
    pub fn kubectl_run(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
        let mut cmd = self.kubectl_command(args);
        cmd.envs(env.iter().copied());
        run_kubectl(cmd, args, stdin)
    }

    /// Runs kubectl with `args`.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_run(args, None, &[])
    }

    /// Runs kubectl, expects success and returns its standard output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let run = self.kubectl(args);
        assert!(run.ok(), "expected success: {run}");
        run.stdout
    }

    /// Runs kubectl, expects a failure and returns its standard error.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        let run = self.kubectl(args);
        assert!(!run.ok(), "expected a failure: {run}");
        run.stderr
    }

    /// Runs kubectl with `-o json` appended and parses the output.
    pub fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.kubectl_ok(&all);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kubectl {all:?}: bad JSON {e}: {out}"))
    }

    /// `kubectl apply -f - <extra>` with `yaml` on standard input.
    pub fn apply_yaml(&self, yaml: &str, extra: &[&str]) -> Run {
        let mut args = vec!["apply", "-f", "-"];
        args.extend(extra);
        self.kubectl_run(&args, Some(yaml), &[])
    }

    /// `kubectl apply -f -` that must succeed; returns its standard output.
    pub fn apply_ok(&self, yaml: &str, extra: &[&str]) -> String {
        let run = self.apply_yaml(yaml, extra);
        assert!(run.ok(), "expected success: {run}\ninput:\n{yaml}");
        run.stdout
    }

    /// `kubectl create -f -` with `yaml` on standard input (JSON on the wire, unlike the
    /// imperative `kubectl create <kind>` commands, which send protobuf).
    pub fn create_yaml(&self, yaml: &str) -> Run {
        self.kubectl_run(&["create", "-f", "-"], Some(yaml), &[])
    }

    /// Starts a long-running kubectl (`get -w`, `wait`, `rollout status`) in the background.
    pub fn kubectl_spawn(&self, args: &[&str]) -> Background {
        Background::spawn(self.kubectl_command(args), args.join(" "))
    }
}

impl Background {
    /// Starts `cmd` (a kubectl or miniplane command line, `args` for messages) with its
    /// stdout and stderr read line by line.
    pub fn spawn(mut cmd: Command, args: String) -> Background {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        let (tx, lines) = mpsc::channel();
        let tx_err = tx.clone();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Standard error lines go to the same stream (prefixed), so a test can wait for a
        // `-v=6` request log line, e.g. the moment a watch starts.
        let stderr = child.stderr.take().unwrap();
        let err_tx = tx_err;
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                all.push_str(&line);
                all.push('\n');
                let _ = err_tx.send(format!("{STDERR_PREFIX}{line}"));
            }
            all
        });
        Background {
            args,
            child,
            lines,
            seen: Vec::new(),
            cursor: 0,
            threads: Some((reader, stderr)),
        }
    }
}

/// Marks lines of standard error in [`Background::seen`].
pub const STDERR_PREFIX: &str = "stderr: ";

/// A kubectl running in the background; killed on drop.
pub struct Background {
    args: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line received so far (stderr lines prefixed with [`STDERR_PREFIX`]).
    pub seen: Vec<String>,
    /// Lines before this index were already matched or skipped by [`Background::wait_line`].
    cursor: usize,
    threads: Option<(std::thread::JoinHandle<()>, std::thread::JoinHandle<String>)>,
}

impl Background {
    /// Waits until a stdout line after the last matched one satisfies `pred`; returns it.
    /// Panics after `timeout`. Successive calls thus match lines in order.
    pub fn wait_line(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        if let Some(i) = self.seen[self.cursor..].iter().position(|l| pred(l)) {
            self.cursor += i + 1;
            return self.seen[self.cursor - 1].clone();
        }
        self.cursor = self.seen.len();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    self.cursor = self.seen.len();
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => {
                    let status = self.child.try_wait();
                    panic!(
                        "kubectl {}: no line matching {what} within {timeout:?} (status {status:?}); stdout so far:\n{}",
                        self.args,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits for the process to exit (at most `timeout`) and returns its status, the whole
    /// stdout and the stderr.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, String, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "kubectl {} did not exit within {timeout:?}; stdout so far:\n{}",
                    self.args,
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let (reader, stderr) = self.threads.take().unwrap();
        let _ = reader.join();
        let stderr = stderr.join().unwrap_or_default();
        self.seen.extend(self.lines.try_iter());
        let stdout: Vec<&str> = self
            .seen
            .iter()
            .filter(|l| !l.starts_with(STDERR_PREFIX))
            .map(String::as_str)
            .collect();
        (status, stdout.join("\n"), stderr)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to completion, feeding `stdin`, killing it after `timeout`.
pub fn run_with_timeout(
    mut cmd: Command,
    stdin: Option<&str>,
    timeout: Duration,
) -> Result<Output, String> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let input = input.to_owned();
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
            let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
            return Err(format!(
                "still running after {timeout:?}, killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}
