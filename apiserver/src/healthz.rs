//! `/healthz`, `/livez`, `/readyz` and their per-check paths, as kube-apiserver serves them
//! (`staging/src/k8s.io/apiserver/pkg/server/healthz/healthz.go`: `handleRootHealth`,
//! `adaptCheckToHandler`).
//!
//! ```text
//!   GET /readyz                    ok                                        200
//!   GET /readyz?verbose            [+]ping ok
//!                                  [+]store-checkpoint ok
//!                                  readyz check passed                       200
//!   a check failing (verbose or not):
//!                                  [+]ping ok
//!                                  [-]store-checkpoint failed: reason withheld
//!                                  readyz check failed                       500
//!   GET /readyz/store-checkpoint   ok | internal server error: <reason>      200 | 500
//!   ?exclude=<check>               [+]<check> excluded: ok
//! ```
//!
//! The checks: `ping` (always ok) and, for a store that checkpoints, `store-checkpoint`, which
//! fails once [`store::CHECKPOINT_FAILURES_UNHEALTHY`] checkpoints failed in a row (the WAL is
//! then no longer truncated: kube-apiserver's `etcd` check likewise fails readiness when its
//! store is unhealthy). `store-checkpoint` is on `/healthz` and `/readyz`, not on `/livez`:
//! writes are still durable in the WAL, and a liveness failure would only restart the server
//! into a longer WAL replay.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use store::CheckpointHealth;

/// Which health endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (deprecated upstream, every check).
    Healthz,
    /// `/livez`
    Livez,
    /// `/readyz`
    Readyz,
}

impl Endpoint {
    /// The endpoint named by a path's first segment.
    pub fn parse(segment: &str) -> Option<Endpoint> {
        match segment {
            "healthz" => Some(Endpoint::Healthz),
            "livez" => Some(Endpoint::Livez),
            "readyz" => Some(Endpoint::Readyz),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

/// The name of the store checkpoint check.
pub const STORE_CHECKPOINT: &str = "store-checkpoint";

/// One named check and its outcome (`Err`: why it fails).
struct Check {
    name: &'static str,
    result: Result<(), String>,
}

/// The checks of `endpoint`, evaluated now.
fn checks(endpoint: Endpoint, checkpoint: Option<&CheckpointHealth>) -> Vec<Check> {
    let mut checks = vec![Check {
        name: "ping",
        result: Ok(()),
    }];
    if let Some(health) = checkpoint
        && endpoint != Endpoint::Livez
    {
        let result = if health.healthy() {
            Ok(())
        } else {
            Err(format!(
                "{} store checkpoints failed in a row, the last with: {}",
                health.consecutive_failures,
                health.last_error.as_deref().unwrap_or("unknown error")
            ))
        };
        checks.push(Check {
            name: STORE_CHECKPOINT,
            result,
        });
    }
    checks
}

/// A plain-text answer, as Go's `fmt.Fprint` / `http.Error` write it.
fn text(code: StatusCode, body: String) -> Response {
    let mut resp = (code, body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Answers `GET /<endpoint>[/<check>]?<query>`; `None` for a check that does not exist there
/// (a 404, as kube-apiserver's mux gives).
pub fn respond(
    endpoint: Endpoint,
    check: Option<&str>,
    query: Option<&str>,
    checkpoint: Option<&CheckpointHealth>,
) -> Option<Response> {
    let checks = checks(endpoint, checkpoint);
    if let Some(name) = check {
        let check = checks.iter().find(|c| c.name == name)?;
        return Some(match &check.result {
            Ok(()) => text(StatusCode::OK, "ok".into()),
            Err(reason) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {reason}\n"),
            ),
        });
    }
    let params: Vec<(String, String)> = query
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let mut excluded: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    excluded.sort_unstable();
    excluded.dedup();
    let verbose = params.iter().any(|(k, _)| k == "verbose");
    let mut out = String::new();
    let mut failed = Vec::new();
    for c in &checks {
        if let Some(i) = excluded.iter().position(|e| *e == c.name) {
            excluded.remove(i);
            out.push_str(&format!("[+]{} excluded: ok\n", c.name));
            continue;
        }
        match &c.result {
            Ok(()) => out.push_str(&format!("[+]{} ok\n", c.name)),
            Err(reason) => {
                // Only the log gets the reason: the endpoint is public.
                out.push_str(&format!("[-]{} failed: reason withheld\n", c.name));
                failed.push(format!("[-]{} failed: {reason}", c.name));
            }
        }
    }
    if !excluded.is_empty() {
        let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        out.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    let name = endpoint.name();
    if !failed.is_empty() {
        tracing::info!(checks = %failed.join("; "), "{name} check failed");
        return Some(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{out}{name} check failed\n"),
        ));
    }
    if !verbose {
        return Some(text(StatusCode::OK, "ok".into()));
    }
    Some(text(StatusCode::OK, format!("{out}{name} check passed\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::CHECKPOINT_FAILURES_UNHEALTHY;

    async fn body(resp: Response) -> (StatusCode, String) {
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn failing() -> CheckpointHealth {
        CheckpointHealth {
            consecutive_failures: CHECKPOINT_FAILURES_UNHEALTHY,
            failures_total: CHECKPOINT_FAILURES_UNHEALTHY,
            last_error: Some("store I/O error: No such file or directory (os error 2)".into()),
            ..CheckpointHealth::default()
        }
    }

    async fn get(
        endpoint: Endpoint,
        check: Option<&str>,
        query: Option<&str>,
        health: Option<&CheckpointHealth>,
    ) -> (StatusCode, String) {
        match respond(endpoint, check, query, health) {
            Some(resp) => body(resp).await,
            None => (StatusCode::NOT_FOUND, String::new()),
        }
    }

    #[tokio::test]
    async fn healthy_checks_answer_ok_or_list_each_check_when_verbose() {
        let ok = CheckpointHealth::default();
        let h = Some(&ok);
        assert_eq!(
            get(Endpoint::Readyz, None, None, h).await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            get(Endpoint::Readyz, None, Some("verbose"), h).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]store-checkpoint ok\nreadyz check passed\n".into()
            )
        );
        assert_eq!(
            get(Endpoint::Livez, None, Some("verbose=1"), h).await,
            (StatusCode::OK, "[+]ping ok\nlivez check passed\n".into())
        );
        assert_eq!(
            get(Endpoint::Readyz, Some(STORE_CHECKPOINT), None, h).await,
            (StatusCode::OK, "ok".into())
        );
        // No store checkpoints (an in-memory backend): no such check.
        assert_eq!(
            get(Endpoint::Readyz, Some(STORE_CHECKPOINT), None, None)
                .await
                .0,
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn failing_checkpoints_fail_readyz_and_healthz_but_not_livez() {
        let bad = failing();
        let h = Some(&bad);
        let failed = |name: &str| {
            format!(
                "[+]ping ok\n[-]store-checkpoint failed: reason withheld\n{name} check failed\n"
            )
        };
        for query in [None, Some("verbose")] {
            assert_eq!(
                get(Endpoint::Readyz, None, query, h).await,
                (StatusCode::INTERNAL_SERVER_ERROR, failed("readyz"))
            );
        }
        assert_eq!(
            get(Endpoint::Healthz, None, None, h).await,
            (StatusCode::INTERNAL_SERVER_ERROR, failed("healthz"))
        );
        assert_eq!(
            get(Endpoint::Livez, None, None, h).await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            get(Endpoint::Readyz, Some(STORE_CHECKPOINT), None, h).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: 3 store checkpoints failed in a row, the last with: \
                 store I/O error: No such file or directory (os error 2)\n"
                    .into()
            )
        );
        // A failure or two in a row is not yet a health problem.
        let once = CheckpointHealth {
            consecutive_failures: CHECKPOINT_FAILURES_UNHEALTHY - 1,
            ..failing()
        };
        assert_eq!(
            get(Endpoint::Readyz, None, None, Some(&once)).await,
            (StatusCode::OK, "ok".into())
        );
    }

    #[tokio::test]
    async fn excluded_checks_pass_and_unknown_ones_are_warned_about() {
        let bad = failing();
        assert_eq!(
            get(
                Endpoint::Readyz,
                None,
                Some("verbose&exclude=store-checkpoint&exclude=dontexist"),
                Some(&bad)
            )
            .await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]store-checkpoint excluded: ok\nwarn: some health checks cannot \
                 be excluded: no matches for \"dontexist\"\nreadyz check passed\n"
                    .into()
            )
        );
    }
}
