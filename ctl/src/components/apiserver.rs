//! `miniplane apiserver`: flags, bind, announce the address, serve until Ctrl-C or SIGTERM.
//!
//! The line `miniplane apiserver listening on http://127.0.0.1:PORT` (`https://` with
//! `--tls-cert-file`) is printed on stdout once the port is bound (end-to-end tests start the
//! binary on port 0 and parse it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Flags of `miniplane apiserver`.
#[derive(Debug, clap::Args)]
pub struct ApiserverArgs {
    /// Directory for the store's data (and the cluster's files when the objects live in etcd).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    #[command(flatten)]
    storage: EtcdStorageArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Acknowledge writes before they reach the disk (tests and benchmarks only).
    #[arg(long)]
    no_fsync: bool,
    /// The most bytes of history (replaced and deleted versions) the store keeps; above it
    /// the oldest is compacted early, before --store-history-window ends. 0 for no bound.
    #[arg(long, value_name = "BYTES", default_value_t = apiserver::DEFAULT_STORE_HISTORY_BUDGET)]
    store_history_budget_bytes: u64,
    /// How long the store keeps replaced and deleted versions (watches from older
    /// resourceVersions, `miniplane history`) before compacting them, within the byte budget.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = apimachinery::duration::parse_duration)]
    store_history_window: Duration,
    /// Also keep at least this many of the last revisions, however old (0: no such rule).
    #[arg(long, value_name = "N", default_value_t = 0)]
    store_history_revisions: u64,
    #[command(flatten)]
    etcd: EtcdArgs,
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    clock: ClockArgs,
    #[command(flatten)]
    serving: ServingArgs,
    #[command(flatten)]
    auth: AuthArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
}

/// Where the objects live: the embedded store, or an etcd cluster (kube-apiserver's flags).
#[derive(Debug, clap::Args)]
pub struct EtcdStorageArgs {
    /// Keep every object in this etcd v3 cluster instead of the embedded store: the members'
    /// client URLs, comma-separated (`http://127.0.0.1:2379,http://127.0.0.1:22379`;
    /// `https://` with --etcd-cafile, --etcd-certfile, --etcd-keyfile), as kube-apiserver's
    /// flag. Several API servers may share one cluster.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// What the keys start with in etcd instead of `/registry` (kube-apiserver's flag).
    #[arg(long, value_name = "PREFIX", default_value = apiserver::DEFAULT_ETCD_PREFIX, requires = "etcd_servers")]
    etcd_prefix: String,
    /// How often the API server compacts etcd's history to what it was one interval ago
    /// (kube-apiserver's flag; 0 never compacts).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = apimachinery::duration::parse_duration)]
    etcd_compaction_interval: Duration,
    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    etcd_keyfile: Option<PathBuf>,
}

impl EtcdStorageArgs {
    /// The etcd cluster asked for, if any. The TLS flags without `--etcd-servers` are refused
    /// (kube-apiserver: `--etcd-servers must be specified`); the files are read when the API
    /// server connects (`store::etcd::EtcdTls`).
    pub fn storage(&self) -> anyhow::Result<Option<apiserver::EtcdStorage>> {
        let tls = apiserver::EtcdTlsFiles {
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
        };
        if self.etcd_servers.is_empty() {
            let given = [
                ("--etcd-cafile", &tls.ca_file),
                ("--etcd-certfile", &tls.cert_file),
                ("--etcd-keyfile", &tls.key_file),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, file)| file.is_some()) {
                anyhow::bail!(
                    "{flag} is given without --etcd-servers: --etcd-servers must be specified"
                );
            }
            return Ok(None);
        }
        for url in &self.etcd_servers {
            if !url.starts_with("http://") && !url.starts_with("https://") {
                anyhow::bail!(
                    "--etcd-servers {url}: only http:// and https:// client URLs are supported"
                );
            }
        }
        Ok(Some(apiserver::EtcdStorage {
            servers: self.etcd_servers.clone(),
            prefix: self.etcd_prefix.clone(),
            compaction_interval: self.etcd_compaction_interval,
            tls: Some(tls).filter(|t| *t != apiserver::EtcdTlsFiles::default()),
        }))
    }
}

/// The store's etcd v3 gRPC endpoint (`store-grpc`), so `etcdctl` can read what the API
/// server wrote.
#[derive(Debug, clap::Args)]
pub struct EtcdArgs {
    /// Also serve the store over etcd's v3 gRPC API on this address (127.0.0.1 only; port 0
    /// picks a free port), read-only unless --etcd-listen-writable:
    /// `ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:PORT get --prefix /registry/ --keys-only`.
    #[arg(long, value_name = "ADDR")]
    etcd_listen: Option<SocketAddr>,
    /// Let etcd clients of --etcd-listen write (put, delete, txn, compact, lease grant) into
    /// the store behind the API server's back; its watches see the writes.
    #[arg(long, requires = "etcd_listen")]
    etcd_listen_writable: bool,
}

impl EtcdArgs {
    /// Where the endpoint is asked to listen, and whether it is writable.
    pub fn listen(&self) -> Option<(SocketAddr, bool)> {
        self.etcd_listen.map(|at| (at, self.etcd_listen_writable))
    }

    /// Checks the address before anything starts (127.0.0.1 only).
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(addr) = self.etcd_listen {
            store_grpc::check_listen_address(addr)?;
        }
        Ok(())
    }

    /// Starts the endpoint over `backend` if asked, until `shutdown`, its requests recorded as
    /// spans into `spans` (the API server's collector); prints
    /// `miniplane apiserver etcd endpoint listening on 127.0.0.1:PORT (read-only|writable)`.
    pub async fn start(
        &self,
        backend: std::sync::Arc<dyn store_grpc::Backend>,
        spans: apiserver::SpanSink,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Option<tokio::task::JoinHandle<Result<(), store_grpc::TransportError>>>>
    {
        let Some(addr) = self.etcd_listen else {
            return Ok(None);
        };
        let options = store_grpc::EtcdOptions {
            writable: self.etcd_listen_writable,
            observer: Some(miniplane::etcd_spans::EtcdSpans::observer(spans)),
            ..store_grpc::EtcdOptions::default()
        };
        let (bound, task) = store_grpc::spawn(addr, backend, options, shutdown).await?;
        let mode = if self.etcd_listen_writable {
            "writable"
        } else {
            "read-only"
        };
        println!("miniplane apiserver etcd endpoint listening on {bound} ({mode})");
        Ok(Some(task))
    }
}

/// Which admission plugins run, with kube-apiserver's flag names.
#[derive(Debug, clap::Args)]
pub struct AdmissionArgs {
    /// Admission plugins to run besides the default ones (`ServiceAccount`,
    /// `NamespaceLifecycle`, ...); comma-separated.
    #[arg(long, value_name = "PLUGINS", value_delimiter = ',')]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins not to run even though they are on by default (a server without a
    /// controller-manager has no `default` ServiceAccounts: `ServiceAccount`); comma-separated.
    #[arg(long, value_name = "PLUGINS", value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
}

impl AdmissionArgs {
    /// The admission plugins these flags ask for.
    fn options(&self) -> anyhow::Result<apiserver::AdmissionOptions> {
        apiserver::AdmissionOptions::from_flags(
            &self.enable_admission_plugins,
            &self.disable_admission_plugins,
        )
        .map_err(anyhow::Error::msg)
    }
}

/// Authentication and authorization, with kube-apiserver's flag names.
#[derive(Debug, clap::Args)]
pub struct AuthArgs {
    /// How requests are authorized: `AlwaysAllow` (kube-apiserver's default) or `RBAC`.
    #[arg(long, value_name = "MODE", default_value = "AlwaysAllow", value_parser = apiserver::AuthorizationMode::parse)]
    authorization_mode: apiserver::AuthorizationMode,
    /// Serve requests without credentials as `system:anonymous` (group
    /// `system:unauthenticated`); `--anonymous-auth=false` answers them 401.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// A CSV file of bearer tokens: `token,user,uid,"group1,group2"` per line.
    #[arg(long, value_name = "FILE")]
    token_auth_file: Option<PathBuf>,
    /// The CA (PEM) client certificates are checked against; a valid certificate's CN is the
    /// user and its O entries the groups.
    #[arg(long, value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate (PEM; the chain after the leaf) instead of HTTP.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert-file`.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// The key (PEM, PKCS#8 EC P-256) ServiceAccount tokens are signed with; by default
    /// `service-account.key` in the data directory, made on first start.
    #[arg(long, value_name = "FILE")]
    service_account_signing_key_file: Option<PathBuf>,
    /// The `iss` of ServiceAccount tokens.
    #[arg(long, value_name = "URL", default_value = apiserver::DEFAULT_SERVICE_ACCOUNT_ISSUER)]
    service_account_issuer: String,
    /// The audiences the API server accepts in tokens (default: the issuer).
    #[arg(long, value_name = "AUDIENCE", value_delimiter = ',')]
    api_audiences: Vec<String>,
    /// The client certificate (PEM) presented to the kubelets: with it, logs, exec, attach,
    /// port-forward and node proxy reach them over HTTPS.
    #[arg(long, value_name = "FILE", requires_all = ["kubelet_client_key", "kubelet_certificate_authority"])]
    kubelet_client_certificate: Option<PathBuf>,
    /// The private key (PEM) of `--kubelet-client-certificate`.
    #[arg(long, value_name = "FILE", requires = "kubelet_client_certificate")]
    kubelet_client_key: Option<PathBuf>,
    /// The CA (PEM) the kubelets' serving certificates are verified with.
    #[arg(long, value_name = "FILE", requires = "kubelet_client_certificate")]
    kubelet_certificate_authority: Option<PathBuf>,
}

/// Reads a PEM file a flag names.
fn read_pem(flag: &str, path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}

impl AuthArgs {
    /// The authentication and authorization settings these flags ask for.
    fn apply(
        &self,
        options: &mut apiserver::ServerOptions,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<()> {
        let (key, create) = match &self.service_account_signing_key_file {
            Some(path) => (path.clone(), false),
            None => (data_dir.join("service-account.key"), true),
        };
        let audiences = if self.api_audiences.is_empty() {
            vec![self.service_account_issuer.clone()]
        } else {
            self.api_audiences.clone()
        };
        let issuer = apiserver::TokenIssuer::from_key_file(
            &key,
            create,
            &self.service_account_issuer,
            audiences,
        )
        .map_err(|e| anyhow::anyhow!("--service-account-signing-key-file: {e}"))?;
        options.auth.service_accounts = Some(std::sync::Arc::new(issuer));
        options.auth.authorization_mode = self.authorization_mode;
        options.auth.anonymous = self.anonymous_auth;
        if let Some(path) = &self.token_auth_file {
            let tokens = apiserver::TokenFile::read(path)?;
            options.auth.tokens = Some(std::sync::Arc::new(tokens));
        }
        let client_ca = match &self.client_ca_file {
            Some(path) => {
                let pem = read_pem("--client-ca-file", path)?;
                let der = apimachinery::pki::first_certificate(&pem)
                    .map_err(|e| anyhow::anyhow!("--client-ca-file {}: {e}", path.display()))?;
                options.auth.client_ca = Some(std::sync::Arc::new(der));
                Some(pem)
            }
            None => None,
        };
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_private_key_file) {
            let cert = read_pem("--tls-cert-file", cert)?;
            let key = read_pem("--tls-private-key-file", key)?;
            let tls = apimachinery::pki::tls_server_config(&cert, &key, client_ca.as_deref())
                .map_err(|e| anyhow::anyhow!("--tls-cert-file/--tls-private-key-file: {e}"))?;
            options.connections.tls = Some(tls);
        }
        if let (Some(cert), Some(key), Some(ca)) = (
            &self.kubelet_client_certificate,
            &self.kubelet_client_key,
            &self.kubelet_certificate_authority,
        ) {
            let client = apiserver::KubeletClientTls::from_pem(
                &read_pem("--kubelet-client-certificate", cert)?,
                &read_pem("--kubelet-client-key", key)?,
                &read_pem("--kubelet-certificate-authority", ca)?,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            options.kubelet_client = Some(client);
        }
        Ok(())
    }
}

/// Who may call the server and how long slow clients may hold it (`docs/reliability.md`,
/// "Abuse").
#[derive(Debug, clap::Args)]
pub struct ServingArgs {
    /// A further name the server answers to (the `Host` of its requests) besides localhost,
    /// 127.0.0.1, [::1] and the listen address; repeatable or comma-separated.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    allowed_host: Vec<String>,
    /// Regular expressions of the origins whose web pages may call the API, with CORS
    /// headers (kube-apiserver's flag); by default only the server's own pages may.
    #[arg(long, value_name = "REGEX", value_delimiter = ',')]
    cors_allowed_origins: Vec<String>,
    /// Connections open at once (default: the file-descriptor limit less a reserve).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// How long a client may take to send a request's headers (and a keep-alive connection
    /// may stay idle).
    #[arg(long, value_name = "DURATION", value_parser = apimachinery::duration::parse_duration, default_value = "32s")]
    header_read_timeout: Duration,
    /// How long a client may take to send a request's body.
    #[arg(long, value_name = "DURATION", value_parser = apimachinery::duration::parse_duration, default_value = "60s")]
    body_read_timeout: Duration,
    /// How long a client that does not read may hold a write before its connection closes.
    #[arg(long, value_name = "DURATION", value_parser = apimachinery::duration::parse_duration, default_value = "30s")]
    write_stall_timeout: Duration,
    /// The address the `kubernetes` Service's endpoints name (default: the address of the
    /// default route's interface, as kube-apiserver picks it).
    #[arg(long, value_name = "IP")]
    advertise_address: Option<std::net::IpAddr>,
}

impl ServingArgs {
    /// The access and connection settings these flags ask for.
    fn apply(&self, options: &mut apiserver::ServerOptions) -> anyhow::Result<()> {
        options.access.allowed_hosts = self.allowed_host.clone();
        options.access.cors_allowed_origins = self
            .cors_allowed_origins
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| {
                regex::Regex::new(s)
                    .map_err(|e| anyhow::anyhow!("--cors-allowed-origins {s:?}: {e}"))
            })
            .collect::<anyhow::Result<_>>()?;
        let c = &mut options.connections;
        c.max_connections = self.max_connections;
        c.header_read_timeout = self.header_read_timeout;
        c.body_read_timeout = self.body_read_timeout;
        c.write_stall_timeout = self.write_stall_timeout;
        if let Some(ip) = self.advertise_address
            && (ip.is_loopback() || ip.is_unspecified())
        {
            anyhow::bail!(
                "--advertise-address {ip}: the kubernetes service's endpoints may not name a loopback or unspecified address"
            );
        }
        options.advertise_address = self.advertise_address;
        Ok(())
    }
}

/// The cluster clock's flags of `miniplane apiserver`, also taken by `miniplane up`.
#[derive(Debug, clap::Args)]
pub struct ClockArgs {
    /// Whose time the cluster runs on: `real` (the machine's) or `virtual` (one clock that
    /// every component reads and `miniplane clock advance|run|pause` moves). A cluster
    /// started on a virtual clock keeps it when restarted on its data.
    #[arg(long, value_enum, default_value = "real")]
    clock: ClockKind,
    /// Cluster seconds per machine second a new virtual clock runs at (0: paused).
    #[arg(long, value_name = "SPEED", default_value_t = 1.0)]
    clock_speed: f64,
    /// The time a new virtual clock starts at (RFC 3339, `2026-01-01T00:00:00Z`; default:
    /// the machine's): with `--seed`, a scenario run twice stamps the same times.
    #[arg(long, value_name = "TIME")]
    clock_start: Option<jiff::Timestamp>,
    /// Draw the names generated for `generateName` and the UIDs of new objects from this seed
    /// (and break the scheduler's ties with it, on `up`), so that a scenario run twice on a
    /// fresh cluster names every object the same (default: random, as Kubernetes').
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
}

/// The values of `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockKind {
    /// The machine's clock.
    Real,
    /// A cluster clock moved by the user.
    Virtual,
}

impl ClockArgs {
    /// The speed a virtual clock starts at, `None` for the machine's clock; a bad speed is
    /// refused.
    pub fn virtual_speed(&self) -> anyhow::Result<Option<f64>> {
        if !(self.clock_speed.is_finite() && self.clock_speed >= 0.0) {
            anyhow::bail!(
                "invalid --clock-speed {}: must be a number of 0 or more",
                self.clock_speed
            );
        }
        Ok((self.clock == ClockKind::Virtual).then_some(self.clock_speed))
    }

    /// The time a new virtual clock starts at (`--clock-start`), `None`: the machine's.
    pub fn start(&self) -> Option<jiff::Timestamp> {
        self.clock_start
    }

    /// The seed of generated names and UIDs (`--seed`), `None`: random.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }
}

/// The tracing flags of `miniplane apiserver`, also taken by `miniplane up`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Record a span per write (and per traced read), stamp the trace context on written
    /// objects and keep the spans components report (`--tracing=false` turns it off; on `up`,
    /// in every component).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    tracing: bool,
    /// Spans the trace collector keeps in memory (the oldest are evicted).
    #[arg(long, value_name = "N", default_value_t = apiserver::DEFAULT_MAX_SPANS)]
    trace_max_spans: usize,
    /// Spans one trace may have: past them its further steps go unrecorded (W3C sampled
    /// flag off) and it is shown as cut; 0 for no limit.
    #[arg(long, value_name = "N", default_value_t = apiserver::DEFAULT_MAX_SPANS_PER_TRACE)]
    trace_max_spans_per_trace: usize,
}

impl TraceArgs {
    /// The API server's tracing settings these flags ask for.
    pub fn options(&self) -> apiserver::TracingOptions {
        apiserver::TracingOptions {
            enabled: self.tracing,
            max_spans: self.trace_max_spans,
            max_spans_per_trace: self.trace_max_spans_per_trace,
        }
    }
}

/// Runs the API server until a shutdown signal.
pub fn main(args: ApiserverArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut options = apiserver::ServerOptions {
            tracing: args.trace.options(),
            virtual_clock: args.clock.virtual_speed()?,
            clock_start: args.clock.start(),
            seed: args.clock.seed(),
            ..apiserver::ServerOptions::default()
        };
        args.serving.apply(&mut options)?;
        options.admission = args.admission.options()?;
        args.auth.apply(&mut options, &args.data_dir)?;
        args.etcd.check()?;
        let secure = options.connections.tls.is_some();
        let config = apiserver::Config {
            data_dir: args.data_dir,
            listen: args.listen,
            no_fsync: args.no_fsync,
            store_history_budget: Some(args.store_history_budget_bytes).filter(|b| *b > 0),
            store_history: apiserver::HistoryRetention {
                window: args.store_history_window,
                revisions: Some(args.store_history_revisions).filter(|n| *n > 0),
            },
            options,
            etcd: args.storage.storage()?,
        };
        let server = apiserver::Server::bind(config).await?;
        let addr = server.local_addr()?;
        let scheme = if secure { "https" } else { "http" };
        let shutdown = CancellationToken::new();
        let etcd = args
            .etcd
            .start(server.backend(), server.spans(), shutdown.clone())
            .await?;
        println!("miniplane apiserver listening on {scheme}://{addr}");
        let run = server.run(shutdown.clone());
        tokio::pin!(run);
        let result = tokio::select! {
            result = &mut run => result,
            _ = wait_for_signal() => {
                tracing::info!("shutting down");
                shutdown.cancel();
                run.await
            }
        };
        shutdown.cancel();
        if let Some(etcd) = etcd {
            etcd.await??;
        }
        Ok(result?)
    })
}

/// Waits for Ctrl-C or SIGTERM.
pub(crate) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory as _, Parser};

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        storage: EtcdStorageArgs,
    }

    fn storage(flags: &[&str]) -> anyhow::Result<Option<apiserver::EtcdStorage>> {
        let cli = Cli::try_parse_from(std::iter::once(&"apiserver").chain(flags))
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        cli.storage.storage()
    }

    #[test]
    fn etcd_tls_flags_without_etcd_servers_are_refused_in_one_line() {
        for (flag, file) in [
            ("--etcd-cafile", "ca.crt"),
            ("--etcd-certfile", "client.crt"),
            ("--etcd-keyfile", "client.key"),
        ] {
            let err = storage(&[flag, file]).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("{flag} is given without --etcd-servers: --etcd-servers must be specified")
            );
            assert!(!err.contains('\n'));
        }
        assert!(storage(&[]).unwrap().is_none());
    }

    #[test]
    fn etcd_tls_flags_reach_the_api_servers_storage() {
        let s = storage(&[
            "--etcd-servers",
            "https://127.0.0.1:2379,https://127.0.0.1:22379",
            "--etcd-cafile",
            "/pki/etcd/ca.crt",
            "--etcd-certfile=/pki/apiserver-etcd-client.crt",
            "--etcd-keyfile",
            "/pki/apiserver-etcd-client.key",
        ])
        .unwrap()
        .expect("etcd storage");
        assert_eq!(
            s.servers,
            ["https://127.0.0.1:2379", "https://127.0.0.1:22379"]
        );
        assert_eq!(
            s.tls,
            Some(apiserver::EtcdTlsFiles {
                ca_file: Some("/pki/etcd/ca.crt".into()),
                cert_file: Some("/pki/apiserver-etcd-client.crt".into()),
                key_file: Some("/pki/apiserver-etcd-client.key".into()),
            })
        );
        let plain = storage(&["--etcd-servers", "http://127.0.0.1:2379"])
            .unwrap()
            .expect("etcd storage");
        assert_eq!(plain.tls, None);
        // Only the CA: the members verified, no client certificate (the files are checked
        // when the server connects).
        let ca_only = storage(&[
            "--etcd-servers",
            "https://127.0.0.1:2379",
            "--etcd-cafile",
            "ca.crt",
        ])
        .unwrap()
        .expect("etcd storage");
        assert_eq!(
            ca_only.tls,
            Some(apiserver::EtcdTlsFiles {
                ca_file: Some("ca.crt".into()),
                ..Default::default()
            })
        );
    }

    #[test]
    fn etcd_servers_must_be_http_or_https() {
        let err = storage(&["--etcd-servers", "unix:///run/etcd.sock"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--etcd-servers unix:///run/etcd.sock: only http:// and https:// client URLs are supported"
        );
    }

    #[test]
    fn etcd_tls_flags_have_kube_apiservers_help() {
        let command = Cli::command();
        let help = |id: &str| {
            command
                .get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_else(|| panic!("no help for {id}"))
        };
        assert_eq!(
            help("etcd_cafile"),
            "SSL Certificate Authority file used to secure etcd communication"
        );
        assert_eq!(
            help("etcd_certfile"),
            "SSL certification file used to secure etcd communication"
        );
        assert_eq!(
            help("etcd_keyfile"),
            "SSL key file used to secure etcd communication"
        );
    }
}
