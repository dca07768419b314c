//! `/attach/{ns}/{pod}[/{uid}]/{container}`: joining the container's main process.
//!
//! Mirrors `pkg/kubelet/server/server.go` `getAttach`, the kubelet's `GetAttach`
//! (`container not found ("NAME")` unless it runs) and `remotecommand/attach.go`
//! `ServeAttach` (a `Success` status when the process's streams end). The simulated main
//! process prints its log lines as they are printed ([`crate::logs::follow`], from the moment
//! of the attach on, as a runtime's attach does not replay what was printed before), stderr
//! lines on stderr without a tty; with `stdin: true` in the container's spec it echoes what it
//! reads (a terminal's echo with a tty, `cat` without one). The session ends when the client
//! leaves, the run ends (`Success`), or the pod goes away.
//!
//! A main process that is a shell reading its input ([`main_shell`]: `stdin: true` and `sh`
//! without a script, or no command in a shell image such as busybox, as `kubectl debug -it`
//! and `kubectl run -it --image=busybox` start) is a [`crate::shell::Session`] instead: what
//! an attach with stdin types runs there, and when the shell ends (`exit N`, Ctrl-D, or the end
//! of input with `stdinOnce`) or a signal ends it, the container's process has ended with that
//! code ([`KubeletServer::process_exited`]): the container restarts, or (an ephemeral
//! container, a pod with `restartPolicy: Never`) stays terminated. Without `stdinOnce` the end
//! of one client's input leaves the shell running, as a runtime keeps the container's stdin
//! open. Simplifications: each attach starts a fresh shell (no state is kept between two
//! attaches), what the shell prints is not in the container's log, and the container's
//! annotated log lines are not shown in the session.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::ObjectKey;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::KubeletServer;
use super::context::{RunningContainer, container_context, running_container};
use super::exec::{MAX_SLEEP, Target, crlf, emit, is_bare_shell};
use super::remotecommand::{self, Exit, Output, ProcessIo};
use crate::logs::{LogStream, RunWindow, follow};
use crate::plan::ephemeral_container;
use crate::shell::{ContainerContext, Session};

/// How often an attached session looks for new lines.
pub const POLL: Duration = Duration::from_millis(200);

/// `GET|POST /attach/{ns}/{pod}/{container}`.
pub async fn attach3(
    State(server): State<KubeletServer>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    attach(server, namespace, pod, container, request).await
}

/// `GET|POST /attach/{ns}/{pod}/{uid}/{container}`.
pub async fn attach4(
    State(server): State<KubeletServer>,
    Path((namespace, pod, _uid, container)): Path<(String, String, String, String)>,
    request: Request,
) -> Response {
    attach(server, namespace, pod, container, request).await
}

async fn attach(
    server: KubeletServer,
    namespace: String,
    pod_name: String,
    container: String,
    request: Request,
) -> Response {
    let Target {
        options,
        pod,
        node,
        running,
        ..
    } = match Target::find(&server, &request, &namespace, &pod_name, &container) {
        Ok(target) => target,
        Err(response) => return *response,
    };
    let key = ObjectKey::of(pod.as_ref());
    let main = server.clone();
    let process: remotecommand::Process = match main_shell(&pod, &container) {
        Some(stdin_once) if options.stdin => {
            let ctx = container_context(&server, &pod, &node, &running).await;
            let shell = MainShell {
                server: main,
                pod,
                running,
                stdin_once,
            };
            Box::new(move |io| Box::pin(shell.run(ctx, io)))
        }
        _ => Box::new(move |io| Box::pin(main_process(main, key, running, io))),
    };
    remotecommand::serve(&server, request, options, process).await
}

/// The container's main process as an attached client sees it.
pub async fn main_process(
    server: KubeletServer,
    key: ObjectKey,
    container: RunningContainer,
    mut io: ProcessIo,
) -> Exit {
    let tty = io.options.tty;
    let run = RunWindow {
        started: container.started,
        finished: None,
    };
    let mut last: Timestamp = server.clock().wall();
    let mut reading = io.options.stdin;
    let mut resizes = tty;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let Some(pod) = server.pod(&key) else {
                    return Exit::Success;
                };
                let now = server.clock().wall();
                let Ok(step) = follow(&pod, &container.name, &run, last, now) else {
                    return Exit::Success;
                };
                for line in step.lines {
                    last = line.time;
                    let mut text = line.text.into_bytes();
                    text.push(b'\n');
                    let out = match (line.stream, tty) {
                        (_, true) => Output::Stdout(crlf(&text)),
                        (LogStream::Stderr, false) => Output::Stderr(text),
                        (LogStream::Stdout, false) => Output::Stdout(text),
                    };
                    if io.out.send(out).await.is_err() {
                        return Exit::Success;
                    }
                }
                if step.ended {
                    return Exit::Success;
                }
            }
            chunk = io.stdin.recv(), if reading => match chunk {
                Some(bytes) if container.stdin => {
                    let echo = if tty { echo_tty(&bytes) } else { bytes };
                    if io.out.send(Output::Stdout(echo)).await.is_err() {
                        return Exit::Success;
                    }
                }
                Some(_) => {}
                None => reading = false,
            },
            size = io.resize.recv(), if resizes => {
                if size.is_none() {
                    resizes = false;
                }
            }
        }
    }
}

/// Whether container `name`'s main process is a shell reading its standard input: the spec's
/// `stdin: true` and either a bare shell (`sh`, `bash -i`) or no command at all in an image
/// whose entrypoint is a shell (busybox, alpine, ubuntu, debian, ...). `Some(stdinOnce)` when it
/// is.
pub fn main_shell(pod: &Pod, name: &str) -> Option<bool> {
    let spec = pod.spec.as_ref()?;
    let c: Container = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            spec.ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == name)
                .map(ephemeral_container)
        })?;
    if c.stdin != Some(true) {
        return None;
    }
    let argv: Vec<String> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect();
    let shell = if argv.is_empty() {
        shell_image(c.image.as_deref().unwrap_or_default())
    } else {
        is_bare_shell(&argv)
    };
    shell.then_some(c.stdin_once == Some(true))
}

/// Whether an image's entrypoint is a shell (its name without registry, tag or digest).
fn shell_image(image: &str) -> bool {
    let name = image.split('@').next().unwrap_or(image);
    let name = name.rsplit('/').next().unwrap_or(name);
    let name = name.split(':').next().unwrap_or(name);
    matches!(
        name,
        "busybox" | "alpine" | "ubuntu" | "debian" | "bash" | "fedora" | "centos" | "netshoot"
    )
}

/// A container's main process that is a shell, joined by an attach with stdin.
struct MainShell {
    server: KubeletServer,
    pod: Arc<Pod>,
    running: RunningContainer,
    /// The spec's `stdinOnce`: the end of this client's input ends the shell.
    stdin_once: bool,
}

impl MainShell {
    /// Feeds the client's input to the shell until the shell or the session ends.
    async fn run(self, ctx: ContainerContext, mut io: ProcessIo) -> Exit {
        let mut shell = Session::new(ctx);
        let tty = io.options.tty;
        let clock = self.server.clock().clone();
        let key = ObjectKey::of(self.pod.as_ref());
        if tty {
            emit(&io, Output::Stdout(shell.prompt().into_bytes())).await;
        }
        let mut reading = true;
        let mut resizes = tty;
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                chunk = io.stdin.recv(), if reading => {
                    let fed = match chunk {
                        Some(bytes) => shell.feed(&bytes, tty),
                        None if self.stdin_once => {
                            // End of input: what is left of the line runs, then the shell
                            // ends as at Ctrl-D.
                            let mut fed = shell.feed(if tty { b"\x03" } else { b"\n" }, false);
                            if fed.exit.is_none() {
                                fed.exit = shell.feed(b"\x04", false).exit;
                            }
                            fed
                        }
                        None => {
                            reading = false;
                            continue;
                        }
                    };
                    emit(&io, Output::Stdout(fed.output)).await;
                    if let Some(code) = fed.kill_container.or(fed.exit) {
                        self.server.process_exited(&self.pod, &self.running, code);
                        return Exit::Success;
                    }
                    clock.sleep(fed.slept.min(MAX_SLEEP)).await;
                }
                size = io.resize.recv(), if resizes => {
                    if size.is_none() {
                        resizes = false;
                    }
                }
                _ = tick.tick() => {
                    // The run ended some other way (a restart, the pod deleted): so does the
                    // session.
                    let current = self
                        .server
                        .pod(&key)
                        .and_then(|p| running_container(&p, &self.running.name));
                    if current.is_none_or(|c| c.restarts != self.running.restarts) {
                        return Exit::Success;
                    }
                }
            }
        }
    }
}

/// What a terminal shows of typed bytes: Enter as a new line.
fn echo_tty(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\r' | b'\n' => out.extend_from_slice(b"\r\n"),
            0x7f | 0x08 => out.extend_from_slice(b"\x08 \x08"),
            b => out.push(b),
        }
    }
    out
}
