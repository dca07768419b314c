//! The `miniplane apiserver` child process: started on port 0 with its own temporary data
//! dir, home and kubeconfig, stopped on drop.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The line the server prints on stdout once it is bound (then `http://` or `https://`).
const LISTENING: &str = "miniplane apiserver listening on ";

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
    /// The cluster CA when the server serves HTTPS ([`Server::start_secure`]).
    ca: Option<apimachinery::pki::Ca>,
}

impl Server {
    /// Starts the binary Cargo built for these tests and waits for its "listening" line.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// [`Server::start`] with further `miniplane apiserver` flags (kept on restart). The
    /// `ServiceAccount` admission plugin is off unless they name admission plugins
    /// ([`admission_flags`]).
    pub fn start_with(extra: &[&str]) -> Server {
        let dir = server_dir();
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        Server::spawn_in(dir, extra, None)
    }

    /// A server as a kubeadm cluster has it: HTTPS with a serving certificate of a cluster CA
    /// (in `<dir>/pki`), client certificates checked against that CA, RBAC, and a kubeconfig
    /// with the CA and an admin client certificate (group `system:masters`).
    pub fn start_secure(extra: &[&str]) -> Server {
        let dir = server_dir();
        let pki = dir.path().join("pki");
        std::fs::create_dir(&pki).unwrap();
        let ca = apimachinery::pki::Ca::load_or_create(&pki).expect("a CA");
        let hosts = ["127.0.0.1".to_owned(), "localhost".to_owned()];
        let serving = ca
            .issue_serving(&hosts, apimachinery::pki::Validity::default_cert())
            .expect("a serving certificate");
        let (cert, key) =
            apimachinery::pki::write_cert_and_key(&pki, "apiserver", &serving).expect("written");
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        let mut args = vec![
            "--tls-cert-file".to_owned(),
            path(&cert),
            "--tls-private-key-file".to_owned(),
            path(&key),
            "--client-ca-file".to_owned(),
            path(&pki.join(apimachinery::pki::CA_CERT_FILE)),
            "--authorization-mode".to_owned(),
            "RBAC".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Server::spawn_in(dir, args, Some(ca))
    }

    fn spawn_in(
        dir: tempfile::TempDir,
        mut extra: Vec<String>,
        ca: Option<apimachinery::pki::Ca>,
    ) -> Server {
        // On the tests' etcd cluster when they run on one (kept on restart, prefix and all).
        let store = super::store::apiserver_flags(&extra);
        extra.extend(store);
        let (child, addr) = spawn(dir.path(), &extra);
        let server = Server {
            child,
            addr,
            dir,
            extra,
            ca,
        };
        server.write_kubeconfig();
        server
    }

    /// Writes the kubeconfig kubectl uses: the server's URL, and for a secure server its CA
    /// and an admin client certificate (group `system:masters`).
    fn write_kubeconfig(&self) {
        let yaml = if self.ca.is_some() {
            self.kubeconfig_for("kubernetes-admin", &["system:masters"])
        } else {
            self.kubeconfig_yaml()
        };
        std::fs::write(self.kubeconfig(), yaml).unwrap();
    }

    /// A kubeconfig (as YAML) with a client certificate of `user` in `groups` from the
    /// server's CA (a secure server only).
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> String {
        let ca = self
            .ca
            .as_ref()
            .expect("a server started with start_secure");
        let issued = ca
            .issue_client(user, groups, apimachinery::pki::Validity::default_cert())
            .expect("a client certificate");
        self.kubeconfig_with_cert(user, &issued.cert_pem, &issued.key_pem)
    }

    /// A kubeconfig (as YAML) for the user `name` authenticating with `cert_pem` and its
    /// `key_pem` (a secure server only).
    pub fn kubeconfig_with_cert(&self, name: &str, cert_pem: &str, key_pem: &str) -> String {
        use base64::Engine as _;
        let ca = self.ca_pem().expect("a server started with start_secure");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: miniplane
  cluster:
    server: {}
    certificate-authority-data: {}
users:
- name: {name}
  user:
    client-certificate-data: {}
    client-key-data: {}
contexts:
- name: miniplane
  context:
    cluster: miniplane
    user: {name}
    namespace: default
current-context: miniplane
",
            self.url(),
            b64(ca),
            b64(cert_pem),
            b64(key_pem),
        )
    }

    /// kubectl with a kubeconfig of its own (another user's) in the server's environment.
    pub fn kubectl_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> super::kubectl::Run {
        let cmd = super::kubectl::isolated_kubectl(self.dir(), kubeconfig, args);
        super::kubectl::run_kubectl(cmd, args, None)
    }

    /// The cluster CA's certificate (PEM), for clients that verify the server.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca.as_ref().map(|c| c.cert_pem())
    }

    /// Stops the server (SIGTERM) and starts it again on the same data dir (new port; the
    /// kubeconfig follows). Returns whether the first process exited gracefully.
    pub fn restart(&mut self) -> bool {
        let graceful = self.stop();
        let (child, addr) = spawn(self.dir.path(), &self.extra);
        self.child = child;
        self.addr = addr;
        self.write_kubeconfig();
        graceful
    }

    /// `http://127.0.0.1:PORT` (`https://` for a secure server).
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
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

/// A server's temporary folder: the store's `data/` and kubectl's `home/`, `cache/`, `tmp/`.
fn server_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir for the server");
    for sub in ["data", "home", "cache", "tmp"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    dir
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
        .args(admission_flags(extra))
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

/// The harness's admission flags: a bare server has no controller-manager to make each
/// namespace's `default` ServiceAccount, so the `ServiceAccount` plugin (on by default, as in
/// kube-apiserver) would refuse every pod; it is disabled unless the test's own flags choose
/// the plugins (`--enable-admission-plugins=ServiceAccount` gives Kubernetes' default).
fn admission_flags(extra: &[String]) -> Vec<&'static str> {
    if extra.iter().any(|a| a.contains("-admission-plugins")) {
        Vec::new()
    } else {
        vec!["--disable-admission-plugins=ServiceAccount"]
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
                let rest = rest
                    .trim_start_matches("http://")
                    .trim_start_matches("https://");
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
