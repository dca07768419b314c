//! Reading a container's log: which container and which run (`pkg/registry/core/pod/strategy.go`
//! `validateContainer`, `pkg/kubelet/kubelet_pods.go` `validateContainerLogStatus`), and the
//! options applied as `pkg/kubelet/kuberuntime/logs/logs.go` `ReadLogs` applies them: the
//! since filter, then the last `tailLines`, then `limitBytes` (a cut at that byte count, even
//! mid-line), each line prefixed with its time in the fixed-width RFC3339Nano the kubelet
//! writes (`2024-01-01T00:00:00.123000000Z line`) when `timestamps` is set.
//!
//! `follow` is a poll: [`follow`] returns the lines printed after the last one sent, up to now,
//! and whether the run has ended (then the stream ends, as `kubectl logs -f` ends when the
//! container exits).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};

use super::error::LogError;
use super::lines::{LogLine, RunWindow, run_lines};
use super::options::LogOptions;

/// The answer to a log request before it is written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logs {
    /// The container read (chosen by the pod when the request named none).
    pub container: String,
    /// The run read; [`follow`] continues this one.
    pub run: RunWindow,
    /// The lines, the options applied except `limitBytes` and `timestamps` ([`render`]).
    pub lines: Vec<LogLine>,
}

/// One poll of a followed log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowStep {
    /// The lines printed after the last one sent, up to now.
    pub lines: Vec<LogLine>,
    /// The run has ended (or is gone): send these lines and end the stream.
    pub ended: bool,
}

/// The log of the container `options` names in `pod`, as of `now`.
pub fn logs(pod: &Pod, options: &LogOptions, now: Timestamp) -> Result<Logs, LogError> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let name = choose_container(pod, &options.container)?;
    let container = find_container(pod, &name).ok_or_else(|| {
        LogError::bad_request(format!("container {name} is not valid for pod {pod_name}"))
    })?;
    let run = choose_run(pod_name, &name, status_of(pod, &name), options.previous)?;
    let since = match (options.since_time, options.since_seconds) {
        (Some(t), _) => Some(t),
        (None, Some(s)) => now.checked_sub(SignedDuration::from_secs(s)).ok(),
        (None, None) => None,
    };
    let mut lines = run_lines(pod, &container, &run, now);
    if let Some(since) = since {
        lines.retain(|l| l.time >= since);
    }
    if let Some(n) = options.tail_lines {
        let keep = usize::try_from(n).unwrap_or(0);
        let drop = lines.len().saturating_sub(keep);
        lines.drain(..drop);
    }
    Ok(Logs {
        container: name,
        run,
        lines,
    })
}

/// The lines of the run `run` of container `container` printed after `last` and up to `now`,
/// and whether that run has ended. `run` is [`Logs::run`] of the first answer; `last` is the
/// time of the last line sent (or that answer's `now` when it had none). A run that is no longer the current or the previous one
/// (the container restarted twice since) has ended too.
pub fn follow(
    pod: &Pod,
    container: &str,
    run: &RunWindow,
    last: Timestamp,
    now: Timestamp,
) -> Result<FollowStep, LogError> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = find_container(pod, container).ok_or_else(|| {
        LogError::bad_request(format!(
            "container {container} is not valid for pod {pod_name}"
        ))
    })?;
    // The run as the status now tells it (it may have finished since the request began).
    let current = status_of(pod, container).and_then(|s| {
        [
            s.state.as_ref().and_then(window),
            s.last_state.as_ref().and_then(window),
        ]
        .into_iter()
        .flatten()
        .find(|w| w.started == run.started)
    });
    let Some(current) = current else {
        return Ok(FollowStep {
            lines: Vec::new(),
            ended: true,
        });
    };
    let mut lines = run_lines(pod, &spec, &current, now);
    lines.retain(|l| l.time > last);
    let ended = current.finished.is_some_and(|(at, _)| at <= now);
    Ok(FollowStep { lines, ended })
}

/// The bytes of `lines` as the kubelet writes them: each line with its newline, prefixed with
/// its time when `timestamps` is set, cut at `limitBytes`.
pub fn render(lines: &[LogLine], options: &LogOptions) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        if options.timestamps {
            out.extend_from_slice(format_timestamp(line.time).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(line.text.as_bytes());
        out.push(b'\n');
    }
    if let Some(limit) = options.limit_bytes {
        out.truncate(usize::try_from(limit).unwrap_or(0));
    }
    out
}

/// `2006-01-02T15:04:05.000000000Z07:00` (the kubelet's `RFC3339NanoFixed`), in UTC.
pub fn format_timestamp(t: Timestamp) -> String {
    format!(
        "{}.{:09}Z",
        t.strftime("%Y-%m-%dT%H:%M:%S"),
        t.subsec_nanosecond().max(0)
    )
}

/// The container the request is for: the one named, else the pod's only container
/// (`validateContainer`).
fn choose_container(pod: &Pod, requested: &str) -> Result<String, LogError> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    if !requested.is_empty() {
        if find_container(pod, requested).is_none() {
            return Err(LogError::bad_request(format!(
                "container {requested} is not valid for pod {pod_name}"
            )));
        }
        return Ok(requested.to_owned());
    }
    match containers {
        [one] => Ok(one.name.clone()),
        [] => Err(LogError::bad_request(format!(
            "a container name must be specified for pod {pod_name}"
        ))),
        _ => {
            // `podutil.VisitContainers` order: init, regular, ephemeral.
            let mut names: Vec<&str> = Vec::new();
            if let Some(spec) = spec {
                names.extend(
                    spec.init_containers
                        .iter()
                        .flatten()
                        .map(|c| c.name.as_str()),
                );
                names.extend(spec.containers.iter().map(|c| c.name.as_str()));
                names.extend(
                    spec.ephemeral_containers
                        .iter()
                        .flatten()
                        .map(|c| c.name.as_str()),
                );
            }
            Err(LogError::bad_request(format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                names.join(" ")
            )))
        }
    }
}

/// The container `name` of any kind; an ephemeral container is taken as a container with its
/// image, command, args and ports (it has no probes).
fn find_container(pod: &Pod, name: &str) -> Option<Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            let e = spec
                .ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == name)?;
            Some(Container {
                name: e.name.clone(),
                image: e.image.clone(),
                command: e.command.clone(),
                args: e.args.clone(),
                ports: e.ports.clone(),
                ..Container::default()
            })
        })
}

fn status_of<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .chain(status.ephemeral_container_statuses.iter().flatten())
        .find(|s| s.name == name)
}

/// The run a state describes, if it started.
fn window(state: &k8s_openapi::api::core::v1::ContainerState) -> Option<RunWindow> {
    if let Some(r) = &state.running {
        return Some(RunWindow {
            started: r.started_at.as_ref()?.0,
            finished: None,
        });
    }
    let t = state.terminated.as_ref()?;
    let started = t.started_at.as_ref()?.0;
    let finished = t.finished_at.as_ref().map_or(started, |f| f.0);
    Some(RunWindow {
        started,
        finished: Some((finished, t.exit_code)),
    })
}

/// `validateContainerLogStatus`: the run to read, or why there is none.
fn choose_run(
    pod: &str,
    name: &str,
    status: Option<&ContainerStatus>,
    previous: bool,
) -> Result<RunWindow, LogError> {
    let Some(status) = status else {
        return Err(LogError::bad_request(format!(
            "container {name:?} in pod {pod:?} is not available"
        )));
    };
    let state = status.state.as_ref();
    let last = status.last_state.as_ref().and_then(window);
    if previous {
        return last.ok_or_else(|| {
            LogError::bad_request(format!(
                "previous terminated container {name:?} in pod {pod:?} not found"
            ))
        });
    }
    let terminated = format!("container {name:?} in pod {pod:?} is terminated");
    if state.and_then(|s| s.running.as_ref()).is_some()
        || state.and_then(|s| s.terminated.as_ref()).is_some()
    {
        // A terminated state that never started is read through the previous run.
        return state
            .and_then(window)
            .or(last)
            .ok_or_else(|| LogError::bad_request(terminated));
    }
    if let Some(last) = last {
        return Ok(last);
    }
    match state.and_then(|s| s.waiting.as_ref()) {
        Some(w) => {
            let reason = w.reason.as_deref().unwrap_or_default();
            let why = match reason {
                "ErrImagePull" => "image can't be pulled".to_owned(),
                "ImagePullBackOff" => "trying and failing to pull image".to_owned(),
                other => other.to_owned(),
            };
            Err(LogError::bad_request(format!(
                "container {name:?} in pod {pod:?} is waiting to start: {why}"
            )))
        }
        None => Err(LogError::bad_request(format!(
            "container {name:?} in pod {pod:?} is waiting to start - no logs yet"
        ))),
    }
}
