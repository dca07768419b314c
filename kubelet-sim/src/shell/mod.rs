//! The small shell of a simulated container: what `kubectl exec`, `attach`, `cp` and `debug`
//! reach. There is no process: a [`Session`] answers a few builtins from the Pod and the
//! objects it mounts, and keeps files copied in for as long as the container runs.
//!
//! Mirrors what a real container shows through `pkg/kubelet/cri/streaming` (the exec/attach
//! streams) — its environment (`pkg/kubelet/kubelet_pods.go` `makeEnvironmentVariables`,
//! see [`env`]) and the files the kubelet writes into it (see [`files`]). Transport-free:
//! the caller carries bytes between the streams and [`Session::run`] / [`Session::feed`].
//!
//! | module | what |
//! | --- | --- |
//! | [`env`] | the environment: `env`, downward API, configMap/secret refs, `$(VAR)` |
//! | [`files`] | `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf`, volumes, ServiceAccount files |
//! | [`commands`] | the builtins and `sh -c` scripts (`;`, `&&`, `||`, quotes) |
//! | [`signals`] | `kill`: signals to the main process, PID 1, end the container |
//! | [`tar`](mod@tar) | `tar cf -` / `tar xmf -` for `kubectl cp` |
//!
//! The image decides how the shell looks ([`Flavor`]): an image whose name contains
//! `debian`, `ubuntu`, `bash`, `python`, `node`, `golang`, `nginx`, `httpd`, `postgres`,
//! `mysql`, `redis` or `openjdk` (without `alpine`) gets bash (`root@<hostname>:/# `,
//! `bash: x: command not found`); everything else (busybox, alpine, distroless, ...) gets
//! busybox's ash (`/ # `, `sh: x: not found`).

pub mod commands;
pub mod env;
pub mod files;
pub mod signals;
pub mod tar;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

/// Files copied into a container (`path → contents`), kept by the caller per container run.
pub type CopiedFiles = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// Everything the shell knows about its container, built by the caller.
#[derive(Debug, Clone, Default)]
pub struct ContainerContext {
    /// The pod.
    pub pod: Pod,
    /// The container the session runs in (a regular, init or ephemeral container).
    pub container_name: String,
    /// The node the pod runs on.
    pub node_name: String,
    /// ConfigMaps the pod references, by name: their `data`.
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// Secrets the pod references, by name: their decoded `data`.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// The ServiceAccount token, when one is mounted.
    pub service_account_token: Option<String>,
    /// The cluster CA (`ca.crt` of the ServiceAccount volume), PEM.
    pub ca_crt: String,
    /// The ClusterIP of the `default/kubernetes` Service (`KUBERNETES_SERVICE_HOST`).
    pub kubernetes_service_ip: Option<String>,
    /// Its port (`KUBERNETES_SERVICE_PORT`), 443 usually.
    pub kubernetes_service_port: u16,
    /// The cluster DNS server (`nameserver` of `/etc/resolv.conf`).
    pub dns_server: String,
    /// The cluster domain, `cluster.local` usually.
    pub cluster_domain: String,
    /// Files copied in; shared with the caller so they outlive one session.
    pub copied: CopiedFiles,
}

impl ContainerContext {
    /// A context with the usual defaults (port 443, `cluster.local`, DNS `10.96.0.10`).
    pub fn new(pod: Pod, container_name: impl Into<String>) -> Self {
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        ContainerContext {
            pod,
            container_name: container_name.into(),
            node_name,
            kubernetes_service_port: 443,
            dns_server: "10.96.0.10".into(),
            cluster_domain: "cluster.local".into(),
            ..Default::default()
        }
    }

    /// The pod's namespace (`default` when unset).
    pub fn namespace(&self) -> String {
        self.pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    }

    /// The container's spec, looked up among regular, init and ephemeral containers (an
    /// ephemeral one as the container it is, [`crate::plan::ephemeral_container`]).
    pub fn container(&self) -> Option<Cow<'_, Container>> {
        let spec = self.pod.spec.as_ref()?;
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == self.container_name)
            .map(Cow::Borrowed)
            .or_else(|| {
                spec.ephemeral_containers
                    .iter()
                    .flatten()
                    .find(|c| c.name == self.container_name)
                    .map(|e| Cow::Owned(crate::plan::ephemeral_container(e)))
            })
    }

    /// The container's image (ephemeral containers included).
    pub fn image(&self) -> String {
        self.container()
            .and_then(|c| c.image.clone())
            .unwrap_or_default()
    }
}

/// Which shell the image has: how it prompts and words errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// busybox's ash (busybox, alpine and the rest).
    Busybox,
    /// GNU bash (debian/ubuntu-based images).
    Bash,
}

impl Flavor {
    /// The flavor of an image reference (rule in the module docs).
    pub fn for_image(image: &str) -> Flavor {
        let i = image.to_ascii_lowercase();
        const BASH: [&str; 12] = [
            "debian", "ubuntu", "bash", "python", "node", "golang", "nginx", "httpd", "postgres",
            "mysql", "redis", "openjdk",
        ];
        if !i.contains("alpine") && BASH.iter().any(|b| i.contains(b)) {
            Flavor::Bash
        } else {
            Flavor::Busybox
        }
    }
}

/// What one command line did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes written to stdout.
    pub stdout: Vec<u8>,
    /// Bytes written to stderr.
    pub stderr: Vec<u8>,
    /// The exit code.
    pub exit_code: i32,
    /// Total time the commands slept: the caller waits that long before answering.
    pub slept: Duration,
    /// A signal ended the container's main process (`kill 1`, `kill -9 1`): the exit code the
    /// runtime reports for it (`128 + signal`); the caller ends the container with it.
    pub kill_container: Option<i32>,
    /// `exit` ran: the shell ends.
    pub exited: bool,
}

/// What feeding interactive input produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fed {
    /// Bytes for the terminal (echo, command output, the next prompt).
    pub output: Vec<u8>,
    /// Set when the shell ended (`exit N`, Ctrl-D): its exit code.
    pub exit: Option<i32>,
    /// Total time slept by the commands run.
    pub slept: Duration,
    /// A signal ended the container's main process: its exit code (see
    /// [`Outcome::kill_container`]).
    pub kill_container: Option<i32>,
}

/// One shell in one container.
#[derive(Debug)]
pub struct Session {
    ctx: ContainerContext,
    flavor: Flavor,
    cwd: String,
    line: Vec<u8>,
    last_code: i32,
}

impl Session {
    /// A shell for the container described by `ctx`.
    pub fn new(ctx: ContainerContext) -> Session {
        let flavor = Flavor::for_image(&ctx.image());
        Session {
            ctx,
            flavor,
            cwd: "/".into(),
            line: Vec::new(),
            last_code: 0,
        }
    }

    /// The shell's flavor.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The context.
    pub fn context(&self) -> &ContainerContext {
        &self.ctx
    }

    /// Runs an exec argv (`["sh","-c","echo $HOSTNAME"]`, `["env"]`) with `stdin`.
    pub fn run(&mut self, argv: &[String], stdin: &[u8]) -> Outcome {
        let mut out = Outcome::default();
        commands::run_argv(self, argv, stdin, &mut out);
        out
    }

    /// The interactive prompt (`/ # ` or `root@<hostname>:/# `).
    pub fn prompt(&self) -> String {
        match self.flavor {
            Flavor::Busybox => format!("{} # ", self.cwd),
            Flavor::Bash => {
                format!("root@{}:{}# ", files::hostname(&self.ctx.pod), self.cwd)
            }
        }
    }

    /// Feeds typed bytes. With `tty` the characters are echoed, backspace (`0x7f`, `0x08`)
    /// erases, Enter runs the line and shows the next prompt, Ctrl-D on an empty line ends
    /// the shell (Ctrl-C drops the line). Without `tty` lines are run silently.
    pub fn feed(&mut self, bytes: &[u8], tty: bool) -> Fed {
        let mut fed = Fed::default();
        for &b in bytes {
            match b {
                b'\r' | b'\n' => {
                    if tty {
                        fed.output.extend_from_slice(b"\r\n");
                    }
                    let line =
                        String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
                    let mut out = Outcome::default();
                    if !line.trim().is_empty() {
                        commands::run_script(self, &line, &[], &mut out);
                    }
                    fed.slept += out.slept;
                    fed.kill_container = fed.kill_container.or(out.kill_container);
                    let mut text = out.stdout;
                    text.extend(out.stderr);
                    if tty {
                        text = crlf(&text);
                    }
                    fed.output.extend(text);
                    if out.exited {
                        fed.exit = Some(out.exit_code);
                        return fed;
                    }
                    if out.kill_container.is_some() {
                        // The container's main process ended: nothing more runs here.
                        return fed;
                    }
                    if tty {
                        fed.output.extend(self.prompt().into_bytes());
                    }
                }
                0x7f | 0x08 => {
                    if self.line.pop().is_some() && tty {
                        fed.output.extend_from_slice(b"\x08 \x08");
                    }
                }
                0x04 => {
                    if self.line.is_empty() {
                        if tty {
                            fed.output.extend_from_slice(b"exit\r\n");
                        }
                        fed.exit = Some(self.last_code);
                        return fed;
                    }
                }
                0x03 => {
                    self.line.clear();
                    if tty {
                        fed.output.extend_from_slice(b"^C\r\n");
                        fed.output.extend(self.prompt().into_bytes());
                    }
                }
                b => {
                    self.line.push(b);
                    if tty {
                        fed.output.push(b);
                    }
                }
            }
        }
        fed
    }
}

/// `\n` → `\r\n`, as a terminal in raw mode needs.
fn crlf(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    for &c in b {
        if c == b'\n' {
            out.push(b'\r');
        }
        out.push(c);
    }
    out
}
