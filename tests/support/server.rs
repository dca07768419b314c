//! The `miniplane apiserver` child process: started on port 0 with its own temporary data
//! dir, home and kubeconfig, stopped on drop.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The line the server prints on stdout once it is bound.
const LISTENING: &str = "miniplane apiserver listening on http://";

/// How long the server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a SIGTERM'd server may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `miniplane apiserver` and the isolated client environment that talks to it.
pub struct Server {
    child: Child,
    /// Where the server listens (`127.0.0.1:PORT`).
    pub addr: SocketAddr,
    /// Holds data dir, HOME, kubectl cache and kubeconfig; removed on drop.
    dir: tempfile::TempDir,
    /// Flags given to `miniplane apiserver` beyond the harness's own.
    extra: Vec<String>,
}

impl Server {
    /// Starts the binary Cargo built for these tests and waits for its "listening" line.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// [`Server::start`] with further `miniplane apiserver` flags (kept on restart).
    pub fn start_with(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("a temp dir for the server");
        for sub in ["data", "home", "cache", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        let (child, addr) = spawn(dir.path(), &extra);
        let server = Server {
            child,
            addr,
            dir,
            extra,
        };
        std::fs::write(server.kubeconfig(), server.kubeconfig_yaml()).unwrap();
        server
    }

    /// Stops the server (SIGTERM) and starts it again on the same data dir (new port; the
    /// kubeconfig follows). Returns whether the first process exited gracefully.
    pub fn restart(&mut self) -> bool {
        let graceful = self.stop();
        let (child, addr) = spawn(self.dir.path(), &self.extra);
        self.child = child;
        self.addr = addr;
        std::fs::write(self.kubeconfig(), self.kubeconfig_yaml()).unwrap();
        graceful
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The temporary folder private to this server (for manifests, editor scripts...).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig file kubectl uses.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: miniplane
  cluster:
    server: {}
users:
- name: miniplane
  user: {{}}
contexts:
- name: miniplane
  context:
    cluster: miniplane
    user: miniplane
    namespace: default
current-context: miniplane
",
            self.url()
        )
    }

    /// The last lines the server logged (shown when a test fails).
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The server's process id (to read its memory and open files from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running (the "server stays up" checks).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the server: SIGTERM, then SIGKILL if it has not exited within [`STOP_TIMEOUT`].
    /// Returns whether it exited on its own after SIGTERM.
    pub fn stop(&mut self) -> bool {
        if !self.is_running() {
            return true;
        }
        // `kill` the command: sending a signal from Rust would need `unsafe` libc.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- miniplane apiserver log (tail) ---\n{}",
                self.log_tail()
            );
        }
        self.stop();
    }
}

/// Starts `miniplane apiserver` on `<dir>/data`, logging to `<dir>/server.log` (appended).
fn spawn(dir: &Path, extra: &[String]) -> (Child, SocketAddr) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .arg("apiserver")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--listen", "127.0.0.1:0", "--no-fsync"])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn the miniplane binary");
    match read_address(child.stdout.take().unwrap()) {
        Ok(addr) => (child, addr),
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            panic!("miniplane apiserver did not start: {why}\n--- server log ---\n{log}");
        }
    }
}

/// Reads the server's stdout until the "listening" line; a thread keeps draining it after that
/// so the server never blocks on a full pipe.
fn read_address(stdout: impl Read + Send + 'static) -> Result<SocketAddr, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent && let Some(rest) = line.trim().strip_prefix(LISTENING) {
                let _ = tx.send(rest.trim_end_matches('/').parse::<SocketAddr>());
                sent = true;
            }
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(addr)) => Ok(addr),
        Ok(Err(e)) => Err(format!("unparsable address: {e}")),
        Err(_) => Err(format!(
            "no `{LISTENING}PORT` line within {START_TIMEOUT:?}"
        )),
    }
}
