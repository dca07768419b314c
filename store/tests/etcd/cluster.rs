//! A throwaway etcd cluster for the tests: `members` real etcd processes (Debian's `etcd-server`,
//! `/usr/bin/etcd`) on free loopback ports, with their data in a temporary directory, killed
//! and removed when dropped.
//!
//! etcd runs with its defaults but for `--max-request-bytes`: 2 MiB instead of 1.5 MiB, so that
//! a value of `store::MAX_VALUE_SIZE` (1.5 MiB, the store's limit on the value alone) fits in
//! etcd's limit on the whole request, as it does in the store (see `store::etcd`'s docs).
//!
//! [`EtcdCluster::start_tls`] serves the client URLs over TLS (`https://`, `--cert-file`,
//! `--key-file`) and requires client certificates of a CA (`--client-cert-auth`,
//! `--trusted-ca-file`), from PEM files the test makes ([`MemberTls`]); the peers stay on
//! plain http.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store::{EtcdBackend, EtcdConfig};

/// Where Debian's `etcd-server` package installs etcd.
const ETCD: &str = "/usr/bin/etcd";

/// How long a cluster may take to elect a leader and answer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// TLS on the members' client URLs (PEM files; see the module docs).
#[derive(Debug, Clone)]
pub struct MemberTls {
    /// `--cert-file`: the members' serving certificate (with 127.0.0.1 among its names).
    pub cert_file: PathBuf,
    /// `--key-file`: its key.
    pub key_file: PathBuf,
    /// `--trusted-ca-file`: the CA the client certificates must be signed by.
    pub trusted_ca_file: PathBuf,
    /// The CA the fixture's clients (and [`EtcdCluster::config`]) verify the members with.
    pub server_ca_file: PathBuf,
    /// The client certificate the fixture's clients (and [`EtcdCluster::config`]) present.
    pub client_cert_file: PathBuf,
    /// Its key.
    pub client_key_file: PathBuf,
}

impl MemberTls {
    /// The backend's TLS settings: `server_ca_file`, `client_cert_file`, `client_key_file`.
    pub fn client(&self) -> store::etcd::EtcdTls {
        store::etcd::EtcdTls::from_files(
            Some(self.server_ca_file.clone()),
            Some(self.client_cert_file.clone()),
            Some(self.client_key_file.clone()),
        )
    }

    /// The etcd client's options for the fixture's own requests.
    fn connect_options(&self) -> etcd_client::ConnectOptions {
        let read =
            |p: &PathBuf| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(
                &self.server_ca_file,
            )))
            .identity(etcd_client::Identity::from_pem(
                read(&self.client_cert_file),
                read(&self.client_key_file),
            ));
        etcd_client::ConnectOptions::new().with_tls(tls)
    }
}

/// The etcd binary, or why the tests cannot run.
pub fn etcd_binary(path: &Path) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "{} not found: the etcd backend's tests run a real etcd cluster; install Debian's \
             etcd-server package (apt-get install etcd-server)",
            path.display()
        ))
    }
}

struct Member {
    name: String,
    client_url: String,
    child: Option<Child>,
    /// How it was started: [`EtcdCluster::restart`] runs it again (same data dir, ports, flags).
    command: Command,
}

/// A running etcd cluster (see the module docs).
pub struct EtcdCluster {
    members: Vec<Member>,
    /// TLS on the client URLs ([`EtcdCluster::start_tls`]).
    tls: Option<MemberTls>,
    // Removed after the processes are gone (field order).
    dir: tempfile::TempDir,
}

/// Free ports on 127.0.0.1, all bound at once so they differ (released before etcd binds them).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("no free port on 127.0.0.1"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

impl EtcdCluster {
    /// Starts a cluster of `members` members and waits until every member answers and a
    /// leader is elected. Panics (failing the test) when etcd is not installed.
    pub async fn start(members: usize) -> EtcdCluster {
        Self::start_with(members, None).await
    }

    /// [`EtcdCluster::start`] with TLS on the client URLs (see the module docs).
    pub async fn start_tls(members: usize, tls: MemberTls) -> EtcdCluster {
        Self::start_with(members, Some(tls)).await
    }

    async fn start_with(members: usize, tls: Option<MemberTls>) -> EtcdCluster {
        let binary = etcd_binary(Path::new(ETCD)).unwrap_or_else(|e| panic!("{e}"));
        let mut last = String::new();
        // A port taken by someone else between `free_ports` and etcd's bind: try again.
        for _ in 0..3 {
            let mut cluster = Self::spawn(&binary, members, tls.as_ref());
            match cluster.wait_ready().await {
                Ok(()) => return cluster,
                Err(e) => last = e,
            }
        }
        panic!("etcd cluster did not start:\n{last}");
    }

    fn spawn(binary: &Path, members: usize, tls: Option<&MemberTls>) -> EtcdCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports = free_ports(2 * members);
        let peer = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i + 1]);
        let initial: Vec<String> = (0..members).map(|i| format!("m{i}={}", peer(i))).collect();
        let token = dir
            .path()
            .file_name()
            .map_or("miniplane".into(), |n| n.to_string_lossy().into_owned());
        let mut out = Vec::new();
        for i in 0..members {
            let name = format!("m{i}");
            let scheme = if tls.is_some() { "https" } else { "http" };
            let client_url = format!("{scheme}://127.0.0.1:{}", ports[2 * i]);
            let log = std::fs::File::create(dir.path().join(format!("{name}.log"))).expect("log");
            let mut command = Command::new(binary);
            command
                .arg(format!("--name={name}"))
                .arg(format!("--data-dir={}", dir.path().join(&name).display()))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={}", peer(i)))
                .arg(format!("--initial-advertise-peer-urls={}", peer(i)))
                .arg(format!("--initial-cluster={}", initial.join(",")))
                .arg("--initial-cluster-state=new")
                .arg(format!("--initial-cluster-token={token}"))
                .arg("--max-request-bytes=2097152")
                .arg("--logger=zap")
                .arg("--log-level=warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log);
            if let Some(tls) = tls {
                command
                    .arg(format!("--cert-file={}", tls.cert_file.display()))
                    .arg(format!("--key-file={}", tls.key_file.display()))
                    .arg(format!(
                        "--trusted-ca-file={}",
                        tls.trusted_ca_file.display()
                    ))
                    .arg("--client-cert-auth");
            }
            let child = command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            out.push(Member {
                name,
                client_url,
                child: Some(child),
                command,
            });
        }
        EtcdCluster {
            members: out,
            tls: tls.cloned(),
            dir,
        }
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            for i in 0..self.members.len() {
                let m = &mut self.members[i];
                if let Some(child) = &mut m.child
                    && let Ok(Some(status)) = child.try_wait()
                {
                    m.child = None;
                    let name = m.name.clone();
                    return Err(format!("{name} exited ({status}):\n{}", self.logs()));
                }
            }
            if self.leader().await.is_some() && self.answers().await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not ready in {READY_TIMEOUT:?}:\n{}", self.logs()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether every running member answers a linearizable read.
    async fn answers(&self) -> bool {
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            let options = self.tls.as_ref().map(MemberTls::connect_options);
            let Ok(mut c) = etcd_client::Client::connect([&m.client_url], options).await else {
                return false;
            };
            if c.get("health", None).await.is_err() {
                return false;
            }
        }
        true
    }

    /// The index of the leader, if every running member knows the same one.
    pub async fn leader(&self) -> Option<usize> {
        let mut leader = None;
        let mut ids = Vec::new();
        for m in &self.members {
            if m.child.is_none() {
                ids.push(None);
                continue;
            }
            let options = self.tls.as_ref().map(MemberTls::connect_options);
            let mut c = etcd_client::Client::connect([&m.client_url], options)
                .await
                .ok()?;
            let status = c.status().await.ok()?;
            if status.leader() == 0 || leader.is_some_and(|l| l != status.leader()) {
                return None;
            }
            leader = Some(status.leader());
            ids.push(status.header().map(|h| h.member_id()));
        }
        ids.iter().position(|id| *id == leader)
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let log = std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name)))
                    .unwrap_or_default();
                format!("--- {} ---\n{log}", m.name)
            })
            .collect()
    }

    /// The client URLs of all members (`--etcd-servers`).
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// A configuration for all members with short timeouts for tests.
    pub fn config(&self) -> EtcdConfig {
        let mut config = EtcdConfig::new(self.endpoints());
        config.dial_timeout = Duration::from_secs(10);
        config.request_timeout = Duration::from_secs(10);
        config.tls = self.tls.as_ref().map(MemberTls::client);
        config
    }

    /// A backend on all members.
    pub async fn backend(&self) -> EtcdBackend {
        EtcdBackend::connect(self.config())
            .await
            .expect("connect to the etcd cluster")
    }

    /// A plain etcd client on all members (to look at etcd's own keys).
    pub async fn client(&self) -> etcd_client::Client {
        let options = self.tls.as_ref().map(MemberTls::connect_options);
        etcd_client::Client::connect(self.endpoints(), options)
            .await
            .expect("etcd client")
    }

    /// The running members' process ids (for their CPU time: ctl's apply bench includes this
    /// fixture).
    #[allow(dead_code)]
    pub fn pids(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter_map(|m| m.child.as_ref().map(Child::id))
            .collect()
    }

    /// Kills member `i` (SIGKILL, as a crash).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again after [`EtcdCluster::kill`]: the same command line (data dir,
    /// ports, flags; its log appended to), so it rejoins with the data it had and catches up
    /// from the leader. Waits until every running member answers and all agree on a leader.
    #[allow(dead_code)]
    pub async fn restart(&mut self, i: usize) {
        let m = &mut self.members[i];
        if m.child.is_none() {
            let child = m
                .command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot restart {}: {e}", m.name));
            m.child = Some(child);
        }
        if let Err(e) = self.wait_ready().await {
            panic!("member {i} did not rejoin:\n{e}");
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

#[test]
fn a_missing_etcd_names_the_debian_package() {
    let err = etcd_binary(Path::new("/nonexistent/etcd")).unwrap_err();
    assert!(err.contains("etcd-server"), "{err}");
}
