//! `GET /containerLogs/{ns}/{pod}/{container}`: a container's log, streamed while the run
//! lasts with `follow`.
//!
//! Mirrors `pkg/kubelet/server/server.go` `getContainerLogs`: the `tail` parameter of old
//! clients (`tail=all` is no limit), the query decoded into `PodLogOptions` (400
//! `{"message": "Unable to decode query."}`) and validated (422
//! `{"message": "Invalid request."}`), `pod "NAME" does not exist` and
//! `container "C" not found in pod "NAME"` (404), then `GetKubeletContainerLogs`, whose errors
//! (`validateContainerLogStatus`: a container waiting to start, no previous run) are 400s with
//! their message. The lines themselves come from [`crate::logs`]; with `follow` the body
//! grows as lines are printed ([`crate::logs::follow`], polled every [`POLL`]) and ends with
//! the run, when the pod goes away, when `limitBytes` is reached, or when the server shuts
//! down; a client that leaves ends it too.

use std::convert::Infallible;
use std::time::Duration;

use apimachinery::ObjectKey;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::{KubeletServer, PodLookup, StreamGuard, node_down, query_values, restful_error};
use crate::logs::{LogOptions, RunWindow, StatusReason, follow, logs, render};

/// How often a followed log looks for new lines.
pub const POLL: Duration = Duration::from_millis(200);

/// `GET /containerLogs/{ns}/{pod}/{container}`.
pub async fn get_container_logs(
    State(server): State<KubeletServer>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let query = with_tail(uri.query().unwrap_or_default());
    let mut options = match LogOptions::parse(&query, &pod_name) {
        Ok(o) => o,
        Err(e) => {
            return match e.reason {
                StatusReason::BadRequest => restful_error(
                    StatusCode::BAD_REQUEST,
                    r#"{"message": "Unable to decode query."}"#,
                ),
                StatusReason::Invalid => restful_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    r#"{"message": "Invalid request."}"#,
                ),
            };
        }
    };
    let pod = match server.find_pod(&headers, &namespace, &pod_name) {
        Ok((pod, _)) => pod,
        Err(PodLookup::NotFound) => {
            return restful_error(
                StatusCode::NOT_FOUND,
                &format!("pod {pod_name:?} does not exist"),
            );
        }
        Err(PodLookup::NodeDown(node)) => return node_down(&node),
    };
    if !has_container(&pod, &container) {
        return restful_error(
            StatusCode::NOT_FOUND,
            &format!("container {container:?} not found in pod {pod_name:?}"),
        );
    }
    options.container = container.clone();
    let now = server.clock().wall();
    let read = match logs(&pod, &options, now) {
        Ok(read) => read,
        Err(e) => return restful_error(StatusCode::BAD_REQUEST, &e.message),
    };
    let first = render(&read.lines, &options);
    let remaining = options.limit_bytes.map(|l| {
        usize::try_from(l)
            .unwrap_or(usize::MAX)
            .saturating_sub(first.len())
    });
    let body = if options.follow && remaining != Some(0) {
        let state = Follow {
            _open: server.streams().guard(),
            server,
            key: ObjectKey::of(pod.as_ref()),
            container,
            run: read.run,
            last: read.lines.last().map_or(now, |l| l.time),
            timestamps: options.timestamps,
            remaining,
            done: false,
        };
        let head = futures::stream::iter([Ok::<Bytes, Infallible>(Bytes::from(first))]);
        let tail = futures::stream::unfold(state, Follow::next);
        Body::from_stream(futures::StreamExt::chain(head, tail))
    } else {
        Body::from(first)
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The query with the old `tail` parameter turned into `tailLines` (`tail=all`: dropped).
fn with_tail(query: &str) -> String {
    let Some(tail) = query_values(query, "tail").into_iter().next() else {
        return query.to_owned();
    };
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            let key = p.split('=').next().unwrap_or_default();
            key != "tail" && key != "tailLines"
        })
        .collect();
    let lines = format!("tailLines={tail}");
    if tail != "all" && !tail.is_empty() {
        kept.push(&lines);
    }
    kept.join("&")
}

/// `kubecontainer.GetContainerSpec`: a regular, init or ephemeral container of that name.
fn has_container(pod: &Pod, name: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.containers.iter().any(|c| c.name == name)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
}

/// A followed log after its first answer.
struct Follow {
    server: KubeletServer,
    key: ObjectKey,
    container: String,
    run: RunWindow,
    /// The time of the last line sent.
    last: Timestamp,
    timestamps: bool,
    /// Bytes left under `limitBytes`.
    remaining: Option<usize>,
    done: bool,
    /// Counts the stream open while the body lives.
    _open: StreamGuard,
}

impl Follow {
    /// The next chunk: waits for new lines; `None` ends the body.
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Follow)> {
        let render_options = LogOptions {
            timestamps: self.timestamps,
            ..LogOptions::default()
        };
        loop {
            if self.done {
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = self.server.streams().shutdown().cancelled() => return None,
            }
            let pod = self.server.pod(&self.key)?;
            let now = self.server.clock().wall();
            let step = follow(&pod, &self.container, &self.run, self.last, now).ok()?;
            if let Some(line) = step.lines.last() {
                self.last = line.time;
            }
            let mut bytes = render(&step.lines, &render_options);
            if let Some(left) = self.remaining.as_mut() {
                bytes.truncate(*left);
                *left -= bytes.len();
                self.done |= *left == 0;
            }
            self.done |= step.ended;
            if !bytes.is_empty() {
                return Some((Ok(Bytes::from(bytes)), self));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_tail_parameter() {
        assert_eq!(with_tail("tail=5&follow=true"), "follow=true&tailLines=5");
        assert_eq!(with_tail("tail=all&tailLines=3"), "");
        assert_eq!(with_tail("timestamps=1"), "timestamps=1");
    }
}
