//! Every component as its own child process (`miniplane up --separate`), so a lab can kill
//! one (`kill <pid>` of the controller-manager) and start it again by hand.
//!
//! ```text
//!   miniplane up --separate
//!    ├─ miniplane apiserver --data-dir D/store --listen 127.0.0.1:PORT   "listening on URL"
//!    ├─ miniplane controller-manager --kubeconfig D/kubeconfig ...        "started"
//!    ├─ miniplane scheduler --kubeconfig D/kubeconfig ...                 "started"
//!    ├─ miniplane metrics-server --kubeconfig D/kubeconfig ...            "started"
//!    └─ miniplane kubelet --nodes N --kubeconfig D/kubeconfig ...         "N nodes registered"
//!        stdout: the start line (read here)   stderr: D/logs/<component>.log
//! ```
//!
//! A secure cluster's children get kubeadm's kubelet API settings: the API server
//! `--kubelet-client-certificate`, `--kubelet-client-key` and
//! `--kubelet-certificate-authority`, the kubelet `--tls-cert-file`, `--tls-private-key-file`,
//! `--client-ca-file`, `--anonymous-auth=false`, `--authentication-token-webhook` and
//! `--authorization-mode Webhook`, the metrics-server `--kubelet-certificate-authority`; a
//! plain cluster's metrics-server gets `--deprecated-kubelet-completely-insecure`.
//!
//! `up`'s tracing flags go along: `--tracing=…`, `--trace-max-spans=…` and
//! `--trace-max-spans-per-trace=…` to the API server, `--tracing=…` to the others. The
//! controller-manager and the scheduler serve `/healthz` on their default ports (10257,
//! 10259) when the API server's port is fixed, on free ports (`--listen 127.0.0.1:0`) with
//! port 0; the API server process then does not know where they are, and `kubectl get
//! componentstatuses` shows them Unhealthy. Without [`Plan::leader_elect`] they get
//! `--leader-elect=false`.
//!
//! Each child is the same executable (`std::env::current_exe()` for `up`), in its own process
//! group so that a Ctrl-C in the terminal reaches `up` alone, which then stops the children
//! in order (SIGTERM, SIGKILL after a deadline). A child that exits while the cluster runs is
//! reported and not restarted. If `up` itself dies without stopping them (SIGKILL, a crash),
//! the kernel sends each child SIGTERM (Linux `PR_SET_PDEATHSIG`, what `tini -p` sets), so
//! no component is left behind holding the port or the data directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use super::plan::Plan;
use super::supervisor::Members;
use crate::error::{Error, Result};
use crate::progress::Component;

/// Makes the child get SIGTERM when this process dies (on Linux; elsewhere `kill_on_drop`
/// and the orderly stop are all there is). Linux sends it when the *thread* that spawned the
/// child ends: here the cluster's own thread or a worker of its runtime, which both live
/// until the cluster has stopped its children (never spawn from a blocking-pool thread,
/// which ends when idle).
#[allow(unsafe_code)]
fn stop_with_parent(command: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let Ok(parent) = libc::pid_t::try_from(std::process::id()) else {
            return;
        };
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: `prctl` and `getppid` are system calls that
        // touch no memory of ours, and nothing is allocated (the errors are plain errno
        // values).
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before the prctl: then no signal would come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
}

/// The line each subcommand prints on stdout once it is up.
fn start_line(component: Component) -> &'static str {
    match component {
        Component::ApiServer => "miniplane apiserver listening on ",
        Component::ControllerManager => "miniplane controller-manager started",
        Component::Scheduler => "miniplane scheduler started",
        Component::Kubelet => "miniplane kubelet: ",
        Component::CloudControllerManager => "miniplane cloud-controller-manager started",
        Component::MetricsServer => "miniplane metrics-server started",
        // The cloud runs in the launcher's process, never as a child.
        Component::Cloud => "",
    }
}

/// How child processes are started.
#[derive(Clone)]
pub(crate) struct Launcher {
    /// The `miniplane` executable.
    pub(crate) exe: PathBuf,
    /// Where each child's stderr goes (`<logs>/<component>.log`).
    pub(crate) logs: PathBuf,
}

/// A child that printed its start line.
struct Started {
    child: tokio::process::Child,
    line: String,
}

impl Launcher {
    /// Spawns `miniplane <component> <args>` and returns once it printed its start line.
    async fn spawn(&self, component: Component, args: &[&str]) -> Result<Started> {
        self.spawn_logged(component, &component.to_string(), args)
            .await
    }

    /// [`Launcher::spawn`] with its stderr in `<logs>/<log>.log`.
    async fn spawn_logged(
        &self,
        component: Component,
        log: &str,
        args: &[&str],
    ) -> Result<Started> {
        let log_path = self.logs.join(format!("{log}.log"));
        let log = std::fs::File::create(&log_path).map_err(Error::io(&log_path))?;
        let mut command = tokio::process::Command::new(&self.exe);
        stop_with_parent(&mut command);
        let mut child = command
            .arg(component.name())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0)
            // If this process dies without stopping it, do not leave the child behind.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                Error::component(component, format!("cannot run {}: {e}", self.exe.display()))
            })?;
        let stdout = child.stdout.take().ok_or_else(|| {
            Error::component(component, "no stdout pipe to read the start line from")
        })?;
        let (tx, rx) = oneshot::channel();
        let prefix = start_line(component);
        // Reads the start line, then keeps draining stdout so the child never blocks on it.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with(prefix)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(line);
                }
            }
        });
        match rx.await {
            Ok(line) => Ok(Started { child, line }),
            Err(_) => {
                let status = child.wait().await.map(|s| s.to_string());
                let tail = last_line(&log_path);
                Err(Error::component(
                    component,
                    format!(
                        "exited before it started ({}): {tail} (log: {})",
                        status.unwrap_or_else(|e| e.to_string()),
                        log_path.display()
                    ),
                ))
            }
        }
    }

    /// Starts `miniplane apiserver` number `replica` (0, 1, ...) on 127.0.0.1 at
    /// [`Plan::apiserver_port`] with its store in `store` (the first one with its etcd
    /// endpoint when the plan asks: on a free port chosen here when the plan says 0; its log
    /// `apiserver.log`, the others' `apiserver-<replica>.log`); returns the URL it printed,
    /// its pid and the endpoint's address.
    pub(crate) async fn start_apiserver(
        &self,
        members: &mut Members,
        store: &Path,
        plan: &Plan,
        pki: Option<&super::pki::ClusterPki>,
        replica: usize,
    ) -> Result<(String, Option<u32>, Option<std::net::SocketAddr>)> {
        let port = plan.apiserver_port(replica)?;
        std::fs::create_dir_all(&self.logs).map_err(Error::io(&self.logs))?;
        if port != 0 {
            // The child would fail with a line in its log; say it as `up` does in one process.
            std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse => Error::PortInUse { port },
                _ => Error::component(Component::ApiServer, e),
            })?;
        }
        let listen = format!("127.0.0.1:{port}");
        let store = store.to_string_lossy();
        let tracing = &plan.tracing;
        let tracing_flags = [
            format!("--tracing={}", tracing.enabled),
            format!("--trace-max-spans={}", tracing.max_spans),
            format!(
                "--trace-max-spans-per-trace={}",
                tracing.max_spans_per_trace
            ),
        ];
        let mut args = vec!["--data-dir", &store, "--listen", &listen];
        args.extend(tracing_flags.iter().map(String::as_str));
        let secure_flags = pki
            .map(|p| p.apiserver_flags(plan.authorization_mode))
            .unwrap_or_default();
        args.extend(secure_flags.iter().map(String::as_str));
        if !plan.fsync {
            args.push("--no-fsync");
        }
        let window = format!("--store-history-window={}s", plan.history.window.as_secs());
        let revisions = format!(
            "--store-history-revisions={}",
            plan.history.revisions.unwrap_or(0)
        );
        args.extend([window.as_str(), revisions.as_str()]);
        let clock_speed = plan.virtual_clock.map(|s| format!("--clock-speed={s}"));
        if let Some(speed) = &clock_speed {
            args.extend(["--clock=virtual", speed.as_str()]);
        }
        let clock_start = plan.clock_start.map(|t| format!("--clock-start={t}"));
        args.extend(clock_start.iter().map(String::as_str));
        let seed = plan.seed.map(|s| format!("--seed={s}"));
        args.extend(seed.iter().map(String::as_str));
        let etcd = match plan.etcd_listen.filter(|_| replica == 0) {
            Some((at, writable)) if at.port() == 0 => {
                let free = std::net::TcpListener::bind(at)
                    .and_then(|l| l.local_addr())
                    .map_err(|e| Error::component(Component::ApiServer, e))?;
                Some((free, writable))
            }
            other => other,
        };
        let storage_flags = plan
            .etcd
            .as_ref()
            .map(|e| {
                let mut flags = vec![
                    format!("--etcd-servers={}", e.servers.join(",")),
                    format!("--etcd-prefix={}", e.prefix),
                    format!(
                        "--etcd-compaction-interval={}ms",
                        e.compaction_interval.as_millis()
                    ),
                ];
                let tls = e.tls.clone().unwrap_or_default();
                for (flag, file) in [
                    ("--etcd-cafile", &tls.ca_file),
                    ("--etcd-certfile", &tls.cert_file),
                    ("--etcd-keyfile", &tls.key_file),
                ] {
                    if let Some(file) = file {
                        flags.push(format!("{flag}={}", file.display()));
                    }
                }
                flags
            })
            .unwrap_or_default();
        args.extend(storage_flags.iter().map(String::as_str));
        let etcd_flag = etcd.map(|(at, _)| at.to_string());
        if let Some(at) = &etcd_flag {
            args.extend(["--etcd-listen", at]);
        }
        if etcd.is_some_and(|(_, writable)| writable) {
            args.push("--etcd-listen-writable");
        }
        let log = match replica {
            0 => Component::ApiServer.to_string(),
            n => format!("{}-{n}", Component::ApiServer),
        };
        let started = self.spawn_logged(Component::ApiServer, &log, &args).await?;
        let url = started
            .line
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_owned();
        let pid = started.child.id();
        members.spawn_process(Component::ApiServer, started.child);
        Ok((url, pid, etcd.map(|(at, _)| at)))
    }

    /// Starts the controller-manager, scheduler and kubelet processes the plan asks for, each
    /// with its kubeconfig from `access`, and returns once each printed its start line (the
    /// kubelet's: every node registered), with the kubelets' control API URL.
    pub(crate) async fn start_clients(
        &self,
        plan: &Plan,
        access: &super::pki::Access,
        members: &mut Members,
    ) -> Result<Option<String>> {
        let kubeconfig_of = |c: Component| access.kubeconfig(c).to_string_lossy().into_owned();
        let kubeconfigs = [
            kubeconfig_of(Component::ControllerManager),
            kubeconfig_of(Component::Scheduler),
            kubeconfig_of(Component::CloudControllerManager),
            kubeconfig_of(Component::Kubelet),
        ];
        let nodes = plan.nodes.to_string();
        let any_port = "127.0.0.1:0";
        let mut wanted: Vec<(Component, Vec<&str>)> = Vec::new();
        let fast = plan.fast_node_lifecycle;
        // Whether each component reports spans follows the API server's setting.
        let tracing = format!("--tracing={}", plan.tracing.enabled);
        // Kubernetes' health ports (10257, 10259) when the API server has a fixed port, free
        // ones otherwise (test clusters side by side); the flags are the subcommands' own.
        let mut common = vec![&*tracing];
        if plan.port == 0 {
            common.extend(["--listen", any_port]);
        }
        if !plan.leader_elect {
            common.push("--leader-elect=false");
        }
        let ipam = plan.node_ipam.as_ref().map(|c| {
            [
                "--allocate-node-cidrs".to_owned(),
                "--cluster-cidr".to_owned(),
                c.cluster_cidr.to_string(),
                "--node-cidr-mask-size".to_owned(),
                c.node_cidr_mask_size.to_string(),
            ]
        });
        let signing = access.cluster_signing_files().map(|(cert, key)| {
            [
                "--cluster-signing-cert-file".to_owned(),
                cert.to_string_lossy().into_owned(),
                "--cluster-signing-key-file".to_owned(),
                key.to_string_lossy().into_owned(),
            ]
        });
        let root_ca = access.root_ca_file().map(|ca| {
            [
                "--root-ca-file".to_owned(),
                ca.to_string_lossy().into_owned(),
            ]
        });
        let hpa_sync_period = plan.hpa_sync_period.map(|p| format!("{}ms", p.as_millis()));
        if plan.controller_manager {
            let mut args = vec!["--kubeconfig", &kubeconfigs[0]];
            args.extend(common.iter().copied());
            if access.is_secure() {
                args.push("--use-service-account-credentials");
            }
            args.extend(root_ca.iter().flatten().map(String::as_str));
            args.extend(signing.iter().flatten().map(String::as_str));
            args.extend(ipam.iter().flatten().map(String::as_str));
            if fast {
                args.extend([
                    "--node-monitor-grace-period",
                    "2s",
                    "--node-monitor-period",
                    "200ms",
                ]);
            }
            if let Some(flag) = &hpa_sync_period {
                args.extend(["--horizontal-pod-autoscaler-sync-period", flag]);
            }
            wanted.push((Component::ControllerManager, args));
        }
        let scheduler_seed = plan.seed.map(|s| format!("--seed={s}"));
        if plan.scheduler {
            let mut args = vec!["--kubeconfig", &kubeconfigs[1]];
            args.extend(common.iter().copied());
            args.extend(scheduler_seed.iter().map(String::as_str));
            wanted.push((Component::Scheduler, args));
        }
        let cloud_config = plan
            .cloud
            .as_ref()
            .map(|c| c.cloud_config().to_string_lossy().into_owned());
        let node_syncs = super::plan::ccm_node_syncs(plan.nodes).to_string();
        if let Some(cloud_config) = &cloud_config {
            let mut args = vec!["--kubeconfig", &kubeconfigs[2]];
            args.extend(common.iter().copied());
            args.extend(["--cloud-config", cloud_config]);
            args.extend(["--concurrent-node-syncs", &node_syncs]);
            args.extend(ipam.iter().flatten().take(3).map(String::as_str));
            if fast {
                args.extend(["--node-monitor-period", "200ms"]);
            }
            wanted.push((Component::CloudControllerManager, args));
        }
        let metrics_flags = plan.metrics_server.map(|resolution| {
            let timeout = metrics_server::DEFAULT_KUBELET_REQUEST_TIMEOUT.min(resolution * 9 / 10);
            // HTTPS to a secure cluster's kubelets, verified with the cluster CA; plain HTTP
            // to a plain cluster's.
            let kubelet_flags = match access.root_ca_file() {
                Some(ca) => vec![
                    "--kubelet-certificate-authority".to_owned(),
                    ca.to_string_lossy().into_owned(),
                ],
                None => vec!["--deprecated-kubelet-completely-insecure".to_owned()],
            };
            let mut flags = vec![
                "--kubeconfig".to_owned(),
                access
                    .kubeconfig(Component::MetricsServer)
                    .to_string_lossy()
                    .into_owned(),
                "--listen".to_owned(),
                any_port.to_owned(),
                format!(
                    "--metric-resolution={}",
                    apimachinery::duration::go_duration(resolution)
                ),
                format!(
                    "--kubelet-request-timeout={}",
                    apimachinery::duration::go_duration(timeout)
                ),
            ];
            flags.extend(kubelet_flags);
            flags
        });
        if let Some(flags) = &metrics_flags {
            wanted.push((
                Component::MetricsServer,
                flags.iter().map(String::as_str).collect(),
            ));
        }
        let kubelet_args = plan.kubelet.args();
        // A secure cluster's kubelet API: HTTPS, callers checked as kubeadm's kubelets do.
        let serving_flags = if plan.nodes > 0 {
            access
                .kubelet_serving(&super::pki::node_names(plan.nodes))?
                .map(|s| s.flags())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        if plan.nodes > 0 {
            let mut args = vec![
                "--nodes",
                &nodes,
                "--kubeconfig",
                &kubeconfigs[3],
                "--listen",
                any_port,
                &tracing,
            ];
            args.extend(kubelet_args.iter().map(String::as_str));
            args.extend(serving_flags.iter().map(String::as_str));
            if ipam.is_some() {
                args.push("--pod-cidr-from-node");
            }

            if fast {
                args.extend([
                    "--lease-renew-interval",
                    "200ms",
                    "--node-status-update-frequency",
                    "200ms",
                ]);
            }
            wanted.push((Component::Kubelet, args));
        }
        let starts = wanted.iter().map(|(component, args)| async move {
            (*component, self.spawn(*component, args).await)
        });
        let mut control = None;
        let mut failure = None;
        // Each one as it comes up (the kubelet last: it waits for its nodes to register).
        let mut pending: futures::stream::FuturesUnordered<_> = starts.collect();
        while let Some((component, started)) = futures::StreamExt::next(&mut pending).await {
            match started {
                Ok(Started { child, line }) => {
                    let pid = child.id();
                    let url = url_in(&line);
                    members.spawn_process(component, child);
                    let nodes = (component == Component::Kubelet).then_some(plan.nodes);
                    if component == Component::Kubelet {
                        control = url.clone();
                    }
                    let url = url.filter(|_| {
                        matches!(component, Component::Kubelet | Component::MetricsServer)
                    });
                    members.reporter().started(component, url, pid, nodes);
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(control),
        }
    }
}

/// The `http://...` address in a start line, if any.
fn url_in(line: &str) -> Option<String> {
    let start = line.find("http://")?;
    let url = line[start..].split([' ', ')']).next()?;
    Some(url.trim_end_matches('/').to_owned())
}

/// The last line of a log, for an error message.
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::url_in;

    #[test]
    fn url_in_start_lines() {
        assert_eq!(
            url_in("miniplane kubelet: 3 nodes registered (control API on http://127.0.0.1:41/)"),
            Some("http://127.0.0.1:41".into())
        );
        assert_eq!(
            url_in(
                "miniplane controller-manager started (healthz and metrics on http://127.0.0.1:9)"
            ),
            Some("http://127.0.0.1:9".into())
        );
        assert_eq!(
            url_in("miniplane scheduler started (scheduler-name x)"),
            None
        );
    }
}
