//! Other `miniplane` components as child processes next to the [`super::Server`]:
//! `miniplane kubelet` and `miniplane controller-manager`, started against the server's URL,
//! ready once they print their start line, stopped (SIGTERM, then SIGKILL) on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Server;

/// How long a component may take to print its start line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a SIGTERM'd component may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running component process.
pub struct Component {
    name: String,
    child: Child,
    /// The start line it printed.
    pub start_line: String,
    log: std::path::PathBuf,
}

impl Component {
    /// Runs `miniplane <args> --master <server url>` and waits for a stdout line starting
    /// with `ready_prefix`.
    pub fn start(s: &Server, args: &[&str], ready_prefix: &str) -> Component {
        Component::spawn(s, args, ready_prefix, &["--master".to_owned(), s.url()])
    }

    /// [`Component::start`] against a secure server ([`Server::start_secure`]), with a
    /// kubeconfig whose client certificate names `user` in `groups`.
    pub fn start_as(
        s: &Server,
        args: &[&str],
        ready_prefix: &str,
        user: &str,
        groups: &[&str],
    ) -> Component {
        let kubeconfig = s.dir().join(format!("{}.kubeconfig", args[0]));
        std::fs::write(&kubeconfig, s.kubeconfig_for(user, groups)).unwrap();
        let flag = ["--kubeconfig".to_owned(), kubeconfig.display().to_string()];
        Component::spawn(s, args, ready_prefix, &flag)
    }

    fn spawn(s: &Server, args: &[&str], ready_prefix: &str, cluster: &[String]) -> Component {
        let name = args[0].to_owned();
        let log = s.dir().join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
            .args(args)
            .args(single_instance_flags(args))
            .args(cluster)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .expect("spawn the miniplane binary");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let prefix = ready_prefix.to_owned();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && line.starts_with(&prefix) {
                    let _ = tx.send(line);
                    sent = true;
                }
            }
        });
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(start_line) => Component {
                name,
                child,
                start_line,
                log,
            },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "miniplane {name} did not print {ready_prefix:?}\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        }
    }

    /// What the component logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The `http://127.0.0.1:PORT` in the start line (a control or health API).
    pub fn url(&self) -> String {
        let start = self
            .start_line
            .find("http://")
            .expect("a URL in the start line");
        self.start_line[start..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches(')')
            .to_owned()
    }

    /// Stops it: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]. Whether it exited on its own
    /// with status 0.
    pub fn stop(&mut self) -> bool {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.success();
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
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

impl Drop for Component {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "--- miniplane {} log (tail) ---\n{}",
                self.name,
                lines[lines.len().saturating_sub(40)..].join("\n")
            );
        }
        self.stop();
    }
}

/// For a controller-manager or a scheduler: a free health port unless `args` choose one (tests
/// run side by side; the default ports are Kubernetes' fixed ones), and no leader election
/// unless `args` ask for it (a test that kills and restarts one would otherwise wait for the
/// killed one's Lease to expire).
pub fn single_instance_flags(args: &[&str]) -> Vec<&'static str> {
    let mut extra = Vec::new();
    if !matches!(args.first(), Some(&"controller-manager" | &"scheduler")) {
        return extra;
    }
    if !args
        .iter()
        .any(|a| a.starts_with("--listen") || a.starts_with("--secure-port"))
    {
        extra.extend(["--listen", "127.0.0.1:0"]);
    }
    if !args.iter().any(|a| a.starts_with("--leader-elect")) {
        extra.push("--leader-elect=false");
    }
    extra
}
