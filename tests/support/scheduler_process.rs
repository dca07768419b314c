//! A `miniplane scheduler` child process pointed at a test [`Server`]'s kubeconfig, stopped
//! (SIGTERM, then SIGKILL) on drop. Its log goes to `<server dir>/scheduler.log`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Server;

/// The line the scheduler prints once running.
const STARTED: &str = "miniplane scheduler started";

/// A running scheduler.
pub struct Scheduler {
    child: Child,
    log: std::path::PathBuf,
}

impl Scheduler {
    /// Starts `miniplane scheduler --kubeconfig <server's> --seed 1 --leader-elect=false` and
    /// waits for its line.
    pub fn start(server: &Server) -> Scheduler {
        let log_path = server.dir().join("scheduler.log");
        let log = std::fs::File::create(&log_path).expect("scheduler log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .arg("scheduler")
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--seed",
                "1",
                "--leader-elect=false",
            ])
            .env("RUST_LOG", "info,scheduler=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn miniplane scheduler");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with(STARTED) {
                    let _ = tx.send(());
                }
            }
        });
        let scheduler = Scheduler {
            child,
            log: log_path,
        };
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            panic!("scheduler did not start:\n{}", scheduler.log_tail());
        }
        scheduler
    }

    /// The scheduler's last log lines.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after 10 s; true if it exited on its own.
    pub fn stop(&mut self) -> bool {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return true;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
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

impl Drop for Scheduler {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- miniplane scheduler log (tail) ---\n{}",
                self.log_tail()
            );
        }
        self.stop();
    }
}
