//! What the benchmarks that run `miniplane` components as child processes share: start one and
//! wait for its start-up line, stop it on drop, read its memory from `/proc`.
//!
//! Included by each bench with `#[path = "support/process.rs"] mod process;` (a bench is its
//! own crate); not every bench uses every item.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, stopped (SIGTERM, then SIGKILL after 10 s) on drop.
pub struct Proc(pub Child);

impl Proc {
    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The arguments every bench starts the API server with: its data in `data`, a free port on
/// 127.0.0.1, no fsync.
pub fn apiserver_args(data: &str) -> Vec<&str> {
    vec![
        "apiserver",
        "--data-dir",
        data,
        "--listen",
        "127.0.0.1:0",
        "--no-fsync",
    ]
}

/// Starts `miniplane apiserver` with [`apiserver_args`] over `data`; returns it and its URL.
pub fn start_apiserver(data: &std::path::Path) -> (Proc, String) {
    let (api, line) = spawn(&apiserver_args(data.to_str().unwrap()), "listening on");
    let url = line
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    (api, url)
}

/// The `miniplane` binary the benches run: this build's, or `MINIPLANE_BENCH_BIN=path` (a
/// saved build, for A/B runs of two versions on the same machine state).
pub fn miniplane_bin() -> std::ffi::OsString {
    std::env::var_os("MINIPLANE_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_miniplane").into())
}

/// Spawns `miniplane <args>` and returns it with the first stdout line containing `marker`
/// (the rest of stdout is drained so the child never blocks on a full pipe).
///
/// `MINIPLANE_BENCH_BIN=path` runs another `miniplane` binary (a saved build, for A/B runs of
/// two versions on the same machine state).
pub fn spawn(args: &[&str], marker: &str) -> (Proc, String) {
    let mut child = Command::new(miniplane_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn miniplane");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_owned();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(&marker) {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(300))
        .expect("start line");
    (Proc(child), line)
}

/// `miniplane up` with `nodes` nodes of the `fast` kubelet profile, on a free port, its data in
/// `data`: how the benches that start a whole cluster start it (they add their own flags).
pub fn up_args<'a>(nodes: &'a str, data: &'a str) -> Vec<&'a str> {
    vec![
        "up",
        "--kubelet-profile",
        "fast",
        "--port",
        "0",
        "--nodes",
        nodes,
        "--data-dir",
        data,
    ]
}

/// A client of the cluster `up` started on `data`, from the kubeconfig it wrote there (the
/// cluster's CA and the admin's certificate).
pub async fn client_of_data_dir(data: &str) -> kube::Client {
    let path = std::path::Path::new(data).join("kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A `/proc/PID/status` memory field (`VmRSS`, `VmHWM`) in MiB; 0 if unreadable.
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Resident set of a process now, in MiB (`VmRSS`).
pub fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS")
}

/// Peak resident set of a process, in MiB (`VmHWM`).
pub fn peak_rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmHWM")
}

/// The processes whose parent is `pid`, each with its first argument (a `miniplane`
/// subcommand such as `apiserver`), from `/proc`.
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        // Field 4, the parent's pid, comes after the command name's closing paren.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent == Some(pid) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let name = cmdline
                .split(|b| *b == 0)
                .nth(1)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default();
            found.push((child, name));
        }
    }
    found.sort();
    found
}

/// CPU time (user + system) a process has used so far, in seconds, from `/proc/PID/stat`
/// (`utime` + `stime`, in clock ticks of 1/100 s as on every Linux the benches run on);
/// 0 if unreadable.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the paren: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU time (user + system) each thread of a process has used so far, in seconds, with the
/// thread's name (`/proc/PID/task/TID/comm`, at most 15 bytes): how the one-process benches
/// tell the components apart (an in-process controller-manager, scheduler and kubelet each
/// run on a thread named after it).
pub fn thread_cpu_seconds(pid: u32) -> Vec<(String, f64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let path = task.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                |i: usize| -> Option<f64> { fields.get(i).and_then(|v| v.parse::<f64>().ok()) };
            Some((name.trim().to_owned(), (ticks(11)? + ticks(12)?) / 100.0))
        })
        .collect()
}

/// The number in the environment variable `name`, else `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `v` (the upper one of an even count; NaN if empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
