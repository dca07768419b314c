//! `/exec/{ns}/{pod}[/{uid}]/{container}`: a command run in the container's shell.
//!
//! Mirrors `pkg/kubelet/server/server.go` `getExec` (options, `pod does not exist`), the
//! kubelet's `GetExec` (`container not found ("NAME")` for a container that does not run,
//! answered as the CRI streaming server's `WriteError`: a 500 with the message) and
//! `remotecommand/exec.go` `ServeExec` (the exit status). The command runs in a
//! [`crate::shell::Session`]:
//!
//! - a shell without a script (`sh`, `bash -i`, ...) given stdin reads it line by line, as it
//!   comes (with a tty: echo, prompt, line editing, resizes read and ignored), and exits at
//!   `exit N`, Ctrl-D, or the end of input with the last command's code;
//! - any other command runs once with all of stdin (read to its end when `input=1`), prints
//!   its output, waits as long as its `sleep`s would have (after printing: a simplification),
//!   and exits with its code (127 and `sh: x: not found` / `bash: x: command not found` for an
//!   unknown program).
//!
//! A signal to PID 1 (`kill 1`, `kill -9 1`: [`crate::shell::signals`]) ends the container's
//! main process: the pod workers are told ([`KubeletServer::process_exited`]) and the
//! container restarts as after any exit (`lastState.terminated` with exit code 143 or 137);
//! an interactive shell that sent it is killed with its container (exit code 137).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use client::SharedClock;
use k8s_openapi::api::core::v1::Pod;

use super::context::{RunningContainer, container_context, running_container};
use super::remotecommand::{self, Exit, Output, ProcessIo, StreamOptions};
use super::{KubeletServer, PodLookup, node_down, query_values, restful_error};
use crate::node::NodeState;
use crate::shell::{ContainerContext, Session};

/// The longest a command's simulated `sleep` keeps its session open (`sleep infinity` is
/// "until the client leaves").
pub const MAX_SLEEP: Duration = Duration::from_secs(365 * 24 * 3600);

/// What a session calls when a signal it sent ended the container's main process, with the
/// exit code the runtime reports (`128 + signal`).
pub type KillHook = Box<dyn Fn(i32) + Send + Sync>;

/// The exit code of a process killed with SIGKILL (what an exec'd shell gets when its
/// container's main process ends).
pub const KILLED: i32 = 137;

/// `GET|POST /exec/{ns}/{pod}/{container}`.
pub async fn exec3(
    State(server): State<KubeletServer>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    exec(server, namespace, pod, container, request).await
}

/// `GET|POST /exec/{ns}/{pod}/{uid}/{container}` (the UID is not checked, as the kubelet's
/// `findContainer` looks the pod up by name).
pub async fn exec4(
    State(server): State<KubeletServer>,
    Path((namespace, pod, _uid, container)): Path<(String, String, String, String)>,
    request: Request,
) -> Response {
    exec(server, namespace, pod, container, request).await
}

/// The answer for a pod that cannot be reached: `pod does not exist` (404) or a down node.
pub fn pod_error(lookup: PodLookup) -> Response {
    match lookup {
        PodLookup::NotFound => restful_error(StatusCode::NOT_FOUND, "pod does not exist"),
        PodLookup::NodeDown(node) => node_down(&node),
    }
}

/// `container not found ("NAME")`, as the streaming server writes the error (500).
pub fn container_not_found(name: &str) -> Response {
    restful_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("container not found ({name:?})"),
    )
}

/// What an exec or attach request streams to, as the streaming server finds it: the options
/// of its query, the pod, its node and the running container.
pub struct Target {
    /// The request's query string.
    pub query: String,
    /// The streams and tty it asks for.
    pub options: StreamOptions,
    /// The pod.
    pub pod: Arc<Pod>,
    /// The node that runs it.
    pub node: Arc<NodeState>,
    /// The container's current run.
    pub running: RunningContainer,
}

impl Target {
    /// The target of `request` for `namespace/pod_name`'s `container`, or the answer to give:
    /// bad options, `pod does not exist`, a down node, `container not found`.
    pub fn find(
        server: &KubeletServer,
        request: &Request,
        namespace: &str,
        pod_name: &str,
        container: &str,
    ) -> Result<Target, Box<Response>> {
        let query = request.uri().query().unwrap_or_default().to_owned();
        let options = StreamOptions::from_query(&query)?;
        let (pod, node) = server
            .find_pod(request.headers(), namespace, pod_name)
            .map_err(|lookup| Box::new(pod_error(lookup)))?;
        let running = running_container(&pod, container)
            .ok_or_else(|| Box::new(container_not_found(container)))?;
        Ok(Target {
            query,
            options,
            pod,
            node,
            running,
        })
    }
}

async fn exec(
    server: KubeletServer,
    namespace: String,
    pod_name: String,
    container: String,
    request: Request,
) -> Response {
    let Target {
        query,
        options,
        pod,
        node,
        running,
    } = match Target::find(&server, &request, &namespace, &pod_name, &container) {
        Ok(target) => target,
        Err(response) => return *response,
    };
    let command = query_values(&query, "command");
    let ctx = container_context(&server, &pod, &node, &running).await;
    let clock = server.clock().clone();
    let on_kill: KillHook = {
        let server = server.clone();
        Box::new(move |code| server.process_exited(&pod, &running, code))
    };
    let process: remotecommand::Process =
        Box::new(move |io| Box::pin(run_exec(ctx, command, clock, io, on_kill)));
    remotecommand::serve(&server, request, options, process).await
}

/// Whether `argv` is a shell reading its commands from stdin (no `-c`).
pub fn is_bare_shell(argv: &[String]) -> bool {
    let Some((first, rest)) = argv.split_first() else {
        return false;
    };
    let program = first.rsplit('/').next().unwrap_or(first);
    matches!(program, "sh" | "bash" | "ash" | "dash" | "zsh")
        && rest
            .iter()
            .all(|a| a.starts_with('-') && !a.trim_start_matches('-').contains('c'))
}

/// Runs `argv` in a shell of `ctx` over `io` (rules in the module docs); `on_kill` hears of a
/// signal that ended the container's main process.
pub async fn run_exec(
    ctx: ContainerContext,
    argv: Vec<String>,
    clock: SharedClock,
    mut io: ProcessIo,
    on_kill: KillHook,
) -> Exit {
    if argv.is_empty() {
        return Exit::Internal(
            "error executing command in container: no command was given".to_owned(),
        );
    }
    let mut shell = Session::new(ctx);
    let tty = io.options.tty;
    if is_bare_shell(&argv) && io.options.stdin {
        return interactive(&mut shell, argv, &clock, &mut io, &on_kill).await;
    }
    let mut stdin = Vec::new();
    if io.options.stdin {
        while let Some(chunk) = io.stdin.recv().await {
            stdin.extend(chunk);
        }
    }
    let outcome = shell.run(&argv, &stdin);
    if tty {
        let mut all = outcome.stdout;
        all.extend(outcome.stderr);
        emit(&io, Output::Stdout(crlf(&all))).await;
    } else {
        emit(&io, Output::Stdout(outcome.stdout)).await;
        emit(&io, Output::Stderr(outcome.stderr)).await;
    }
    if let Some(code) = outcome.kill_container {
        on_kill(code);
    }
    clock.sleep(outcome.slept.min(MAX_SLEEP)).await;
    Exit::Code {
        command: argv,
        code: outcome.exit_code,
    }
}

/// A shell fed its input as it comes.
async fn interactive(
    shell: &mut Session,
    argv: Vec<String>,
    clock: &SharedClock,
    io: &mut ProcessIo,
    on_kill: &KillHook,
) -> Exit {
    let tty = io.options.tty;
    if tty {
        emit(io, Output::Stdout(shell.prompt().into_bytes())).await;
    }
    let mut resizes = true;
    loop {
        tokio::select! {
            chunk = io.stdin.recv() => {
                let fed = match chunk {
                    Some(bytes) => shell.feed(&bytes, tty),
                    // End of input: run what is left of the line, then end as Ctrl-D does.
                    None => {
                        let mut fed = shell.feed(if tty { b"\x03" } else { b"\n" }, false);
                        if fed.exit.is_none() {
                            let last = shell.feed(b"\x04", false);
                            fed.exit = last.exit;
                        }
                        fed
                    }
                };
                emit(io, Output::Stdout(fed.output)).await;
                if let Some(code) = fed.kill_container {
                    on_kill(code);
                    return Exit::Code { command: argv, code: KILLED };
                }
                clock.sleep(fed.slept.min(MAX_SLEEP)).await;
                if let Some(code) = fed.exit {
                    return Exit::Code { command: argv, code };
                }
            }
            size = io.resize.recv(), if resizes => {
                match size {
                    Some(size) => tracing::trace!(width = size.width, height = size.height, "terminal resized"),
                    None => resizes = false,
                }
            }
        }
    }
}

/// Sends `out` to the client unless it is empty.
pub(crate) async fn emit(io: &ProcessIo, out: Output) {
    let empty = match &out {
        Output::Stdout(b) | Output::Stderr(b) => b.is_empty(),
    };
    if !empty {
        let _ = io.out.send(out).await;
    }
}

/// `\n` → `\r\n` (a terminal in raw mode).
pub fn crlf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn bare_shells() {
        assert!(is_bare_shell(&argv(&["sh"])));
        assert!(is_bare_shell(&argv(&["/bin/bash", "-i"])));
        assert!(!is_bare_shell(&argv(&["sh", "-c", "ls"])));
        assert!(!is_bare_shell(&argv(&["sh", "script.sh"])));
        assert!(!is_bare_shell(&argv(&["ls"])));
        assert_eq!(crlf(b"a\nb"), b"a\r\nb");
    }
}
