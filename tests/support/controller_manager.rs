//! The `miniplane controller-manager` child process for end-to-end tests: started against a
//! [`Server`] with `--listen 127.0.0.1:0` (and `--leader-elect=false` unless the test asks
//! for an election), its `/metrics` readable, killable with SIGKILL.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Server;

/// The line printed once the controller-manager is up.
const STARTED: &str = "miniplane controller-manager started (healthz and metrics on http://";

/// A running `miniplane controller-manager`.
pub struct ControllerManager {
    child: Child,
    /// Where `/healthz` and `/metrics` are served.
    pub addr: SocketAddr,
    log: std::path::PathBuf,
}

impl ControllerManager {
    /// Starts a controller-manager for `server` with extra flags; its log goes to
    /// `<server dir>/<name>.log`.
    pub fn start(server: &Server, name: &str, extra: &[&str]) -> ControllerManager {
        let log = server.dir().join(format!("{name}.log"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .arg("controller-manager")
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .args(
                (!extra.iter().any(|a| a.starts_with("--leader-elect")))
                    .then_some("--leader-elect=false"),
            )
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("controller-manager log file"))
            .spawn()
            .expect("spawn miniplane controller-manager");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(rest) = line.strip_prefix(STARTED) {
                    let _ = tx.send(rest.trim_end_matches(')').parse::<SocketAddr>());
                    sent = true;
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(addr)) => ControllerManager { child, addr, log },
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "controller-manager did not start ({other:?}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        }
    }

    /// `GET /metrics` (the Prometheus text); panics if it cannot be read.
    pub fn metrics(&self) -> String {
        let mut last = None;
        for _ in 0..3 {
            match super::http::request(self.addr, "GET", "/metrics", None, b"") {
                Ok(r) if r.status == 200 => return r.text(),
                other => last = Some(format!("{other:?}")),
            }
        }
        panic!("GET /metrics of the controller-manager failed: {last:?}");
    }

    /// The value of the metric line starting with `series` (e.g.
    /// `miniplane_controller_syncs_total{controller="deployment"}`), 0 if absent.
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series).map(str::trim))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no chance to release a lease or finish a sync.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The exit status, once it has exited on its own (within `timeout`).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then SIGKILL after 10 s; true if it exited on its own.
    pub fn stop(&mut self) -> bool {
        if let Ok(Some(_)) = self.child.try_wait() {
            return true;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        if self.wait_exit(Duration::from_secs(10)).is_some() {
            return true;
        }
        self.kill();
        false
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "--- controller-manager log (tail) ---\n{}",
                lines[lines.len().saturating_sub(60)..].join("\n")
            );
        }
        self.stop();
    }
}
