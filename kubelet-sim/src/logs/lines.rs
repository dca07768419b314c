//! What one container run prints, derived (never stored) from the Pod and the run's window.
//! No Kubernetes counterpart: a node's container runtime writes what the process printed to a
//! CRI log file (`/var/log/pods/...`, read by `pkg/kubelet/kuberuntime/logs/logs.go`); here
//! the "process" prints, in time order:
//!
//! 1. a start-up text chosen by its image (nginx, httpd, redis, postgres, mysql, the
//!    busybox/alpine/ubuntu/debian shells, python, node, else a generic line), in our own
//!    words, naming the ports the container declares, a few milliseconds after `startedAt`;
//! 2. what its command prints ([`crate::command::output_of`]: `echo`'s text, after the
//!    `sleep`s before it);
//! 3. the annotated lines (`miniplane.dev/log-lines[.<c>]` at `miniplane.dev/log-rate[.<c>]`,
//!    see [`super`]), from the start while the run lasts; at most [`MAX_RATED_LINES`] of
//!    them, the latest (a node rotates its container logs too);
//! 4. for an HTTP liveness or startup probe that fails (`*-fails-after` annotations), the
//!    access-log line of each failing probe request, up to `failureThreshold` of them;
//! 5. when the run ended: a shutdown line at `finishedAt` (graceful for SIGTERM, exit 143, or
//!    a server that exited 0; an error line for a server that crashed; none for SIGKILL, 137).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, Pod, Probe};

use crate::annotations::{
    ContainerOverrides, LIVENESS_FAILS_AFTER, PodOverrides, STARTUP_FAILS_AFTER,
};
use crate::command::{self, Run};
use crate::probes::Timing;

/// `miniplane.dev/log-lines[.<container>]`: the lines, separated by `\n`.
pub const LOG_LINES: &str = "miniplane.dev/log-lines";
/// `miniplane.dev/log-rate[.<container>]`: `N/s`, `N/m` or `N/h`.
pub const LOG_RATE: &str = "miniplane.dev/log-rate";
/// The most annotated lines one run keeps (the latest).
pub const MAX_RATED_LINES: u64 = 10_000;

/// Which stream a line was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// One line a container printed (without its newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When it was printed.
    pub time: Timestamp,
    /// Where.
    pub stream: LogStream,
    /// What.
    pub text: String,
}

/// One run of a container: from `started` until `finished` (none: still running).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunWindow {
    /// `startedAt`.
    pub started: Timestamp,
    /// `finishedAt` and `exitCode` once it ended.
    pub finished: Option<(Timestamp, i32)>,
}

/// Every line container `container` (regular, init or ephemeral) printed in `run` up to `now`,
/// in time order, no two at the same instant (ties are 1 ns apart, so "after the last line
/// sent" is exact for [`super::follow`]).
pub fn run_lines(
    pod: &Pod,
    container: &Container,
    run: &RunWindow,
    now: Timestamp,
) -> Vec<LogLine> {
    let end = match run.finished {
        Some((at, _)) => at.min(now),
        None => now,
    };
    let start = run.started;
    let mut out: Vec<LogLine> = Vec::new();
    let mut push = |at: Timestamp, stream: LogStream, text: String| {
        if at <= end {
            out.push(LogLine {
                time: at,
                stream,
                text,
            });
        }
    };
    let after = |d: Duration| start.checked_add(d).unwrap_or(start);
    let overrides = PodOverrides::of(pod);
    let own = overrides.container(&container.name);

    let image = ImageKind::of(container.image.as_deref().unwrap_or_default());
    let ports: Vec<i32> = container
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    for (i, text) in startup_text(image, &ports).into_iter().enumerate() {
        push(
            after(Duration::from_millis(3 * i as u64 + 1)),
            LogStream::Stdout,
            text,
        );
    }

    for (offset, text) in
        command::output_of(container.command.as_deref(), container.args.as_deref())
    {
        push(after(offset), LogStream::Stdout, text);
    }

    let annotated = annotation(pod, LOG_LINES, &container.name);
    if let Some(text) = annotated {
        let lines: Vec<&str> = text.lines().collect();
        if !lines.is_empty() {
            match annotation(pod, LOG_RATE, &container.name).and_then(parse_rate) {
                Some(every) => {
                    let span = u128::try_from(end.duration_since(start).as_nanos()).unwrap_or(0);
                    let count =
                        u64::try_from(span / every.as_nanos().max(1)).unwrap_or(u64::MAX - 1) + 1;
                    let first = count.saturating_sub(MAX_RATED_LINES);
                    for k in first..count {
                        let at = u64::try_from(every.as_nanos().saturating_mul(u128::from(k)))
                            .map_or(Duration::MAX, Duration::from_nanos);
                        let text = lines[(k % lines.len() as u64) as usize];
                        push(after(at), LogStream::Stdout, text.to_owned());
                    }
                }
                None => {
                    for text in &lines {
                        push(
                            after(Duration::from_millis(20)),
                            LogStream::Stdout,
                            (*text).to_owned(),
                        );
                    }
                }
            }
        }
    }

    for (probe, key) in [
        (&container.liveness_probe, LIVENESS_FAILS_AFTER),
        (&container.startup_probe, STARTUP_FAILS_AFTER),
    ] {
        let Some(probe) = probe else { continue };
        let Some(path) = http_path(probe) else {
            continue;
        };
        let Some(fails_after) = fails_after(&overrides.all, own, key) else {
            continue;
        };
        let timing = Timing::of(probe);
        let period = timing.period.max(Duration::from_secs(1));
        // The first attempt at or after `fails_after` (attempts every period after the delay).
        let mut at = timing.initial_delay;
        while at < fails_after {
            at += period;
        }
        for _ in 0..timing.failure_threshold.max(1) {
            push(
                after(at),
                LogStream::Stdout,
                format!("probe client \"GET {path} HTTP/1.1\" 503 (unhealthy)"),
            );
            at += period;
        }
    }

    if let Some((at, code)) = run.finished {
        let server = command::run_of(container.command.as_deref(), container.args.as_deref())
            == Run::Forever;
        match code {
            137 => {}
            143 => push(at, LogStream::Stdout, shutdown_text(image)),
            0 if server => push(at, LogStream::Stdout, shutdown_text(image)),
            c if server && c != 0 => push(
                at,
                LogStream::Stderr,
                format!("fatal error, process exiting with status {c}"),
            ),
            _ => {}
        }
    }

    out.sort_by_key(|l| l.time);
    for i in 1..out.len() {
        if out[i].time <= out[i - 1].time {
            out[i].time = out[i - 1]
                .time
                .checked_add(SignedDuration::from_nanos(1))
                .unwrap_or(out[i - 1].time);
        }
    }
    out
}

/// The value of `key.<container>`, else of `key`.
fn annotation<'a>(pod: &'a Pod, key: &str, container: &str) -> Option<&'a str> {
    let annotations = pod.metadata.annotations.as_ref()?;
    annotations
        .get(&format!("{key}.{container}"))
        .or_else(|| annotations.get(key))
        .map(String::as_str)
}

/// `2/s`, `10/m`, `1/h` → the time between two lines; none if malformed or zero.
pub fn parse_rate(value: &str) -> Option<Duration> {
    let (n, unit) = value.trim().split_once('/')?;
    let n: u32 = n.trim().parse().ok().filter(|n| *n > 0)?;
    let per = match unit.trim() {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        _ => return None,
    };
    Some(per / n)
}

fn fails_after(
    all: &ContainerOverrides,
    own: Option<&ContainerOverrides>,
    key: &str,
) -> Option<Duration> {
    let pick = |o: &ContainerOverrides| {
        if key == LIVENESS_FAILS_AFTER {
            o.liveness_fails_after
        } else {
            o.startup_fails_after
        }
    };
    own.and_then(pick).or_else(|| pick(all))
}

/// The path of an HTTP probe; none for exec, TCP and gRPC probes (the server sees no request
/// it would log).
fn http_path(probe: &Probe) -> Option<String> {
    let get = probe.http_get.as_ref()?;
    Some(get.path.clone().unwrap_or_else(|| "/".to_owned()))
}

/// The families of images whose start-up text differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageKind {
    Nginx,
    Httpd,
    Redis,
    Postgres,
    Mysql,
    Shell,
    Python,
    Node,
    Other,
}

impl ImageKind {
    fn of(image: &str) -> Self {
        // `registry:5000/library/nginx:1.27@sha256:...` → `nginx`.
        let name = image.split('@').next().unwrap_or(image);
        let name = name.rsplit('/').next().unwrap_or(name);
        let name = name.split(':').next().unwrap_or(name);
        match name {
            "nginx" | "nginx-unprivileged" => ImageKind::Nginx,
            "httpd" | "apache" => ImageKind::Httpd,
            "redis" | "valkey" => ImageKind::Redis,
            "postgres" | "postgresql" => ImageKind::Postgres,
            "mysql" | "mariadb" => ImageKind::Mysql,
            "busybox" | "alpine" | "ubuntu" | "debian" | "bash" => ImageKind::Shell,
            "python" => ImageKind::Python,
            "node" => ImageKind::Node,
            _ => ImageKind::Other,
        }
    }
}

/// The ports as text (`80, 443`), or the default `default` when none are declared.
fn port_list(ports: &[i32], default: i32) -> Vec<i32> {
    if ports.is_empty() {
        vec![default]
    } else {
        ports.to_vec()
    }
}

fn startup_text(image: ImageKind, ports: &[i32]) -> Vec<String> {
    let each =
        |ports: Vec<i32>, f: &dyn Fn(i32) -> String| ports.into_iter().map(f).collect::<Vec<_>>();
    let mut out: Vec<String> = Vec::new();
    match image {
        ImageKind::Nginx => {
            out.push("entrypoint: configuration looks complete, starting nginx".to_owned());
            out.extend(each(port_list(ports, 80), &|p| {
                format!("nginx: listening for HTTP on 0.0.0.0:{p}")
            }));
            out.push("nginx: 2 worker processes started".to_owned());
        }
        ImageKind::Httpd => {
            out.push(
                "httpd: loaded configuration from /usr/local/apache2/conf/httpd.conf".to_owned(),
            );
            out.extend(each(port_list(ports, 80), &|p| {
                format!("httpd: serving on port {p}")
            }));
            out.push("httpd: ready to accept requests".to_owned());
        }
        ImageKind::Redis => {
            out.push("redis: starting in standalone mode, no config file given".to_owned());
            out.extend(each(port_list(ports, 6379), &|p| {
                format!("redis: accepting connections on port {p}")
            }));
            out.push("redis: ready, dataset is empty".to_owned());
        }
        ImageKind::Postgres => {
            out.push("postgres: data directory found, skipping initialisation".to_owned());
            out.extend(each(port_list(ports, 5432), &|p| {
                format!("postgres: listening on IPv4 address \"0.0.0.0\", port {p}")
            }));
            out.push("postgres: database system is ready to accept connections".to_owned());
        }
        ImageKind::Mysql => {
            out.push("mysqld: initialising InnoDB storage engine".to_owned());
            out.extend(each(port_list(ports, 3306), &|p| {
                format!("mysqld: ready for connections on port {p}")
            }));
        }
        // A shell prints nothing by itself: its command's output is the log.
        ImageKind::Shell => {}
        ImageKind::Python => {
            out.extend(each(port_list(ports, 8000), &|p| {
                format!("python: serving HTTP on 0.0.0.0 port {p}")
            }));
        }
        ImageKind::Node => {
            out.extend(each(port_list(ports, 3000), &|p| {
                format!("node: server listening on port {p}")
            }));
        }
        ImageKind::Other => {
            out.push("process started".to_owned());
            out.extend(ports.iter().map(|p| format!("listening on port {p}")));
        }
    }
    out
}

fn shutdown_text(image: ImageKind) -> String {
    match image {
        ImageKind::Nginx => "nginx: received SIGTERM, finishing open requests and exiting",
        ImageKind::Redis => "redis: received SIGTERM, saving the dataset and shutting down",
        ImageKind::Postgres => {
            "postgres: received fast shutdown request, database system is shut down"
        }
        ImageKind::Mysql => "mysqld: shutdown complete",
        _ => "received SIGTERM, shutting down gracefully",
    }
    .to_owned()
}
