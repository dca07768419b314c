//! The trace collector: a bounded, in-memory store of recent spans, fed by the API server's
//! own request spans and by every component's `POST /miniplane/v1/traces`, read by
//! `miniplane trace`.
//!
//! Kubernetes has no counterpart in the API server: kube-apiserver exports its spans over OTLP
//! to an external OpenTelemetry Collector, and Jaeger or Tempo keep them. miniplane keeps the
//! last spans itself, like Jaeger's in-memory storage (`plugin/storage/memory`), so one binary
//! can show a trace with nothing else installed.
//!
//! ```text
//!   record(span) ──▶ ring buffer [oldest … newest]  (capacity spans; the oldest is evicted)
//!   trace(id)        spans of one trace, oldest first
//!   recent(limit)    one TraceSummary per trace, most recently active first
//!   for_object(ref)  traces with an API request on that object, most recent first
//!   GET /miniplane/v1/traces?spans=all   every span kept, oldest first (the lab checks
//!                                        count writes and pods over time from them)
//! ```
//!
//! Memory is bounded by the capacity (`--trace-max-spans`, 100 000 by default; a span is a
//! few hundred bytes). Queries scan the buffer: milliseconds at that size, and they are rare.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use trace::{ObjectRef, Span, SpanBatch, TraceId, TraceSummary};

use crate::error::{ApiError, ErrorTarget, Result};
use crate::request::Query;
use crate::server::json_response;

/// Spans kept by default.
pub const DEFAULT_MAX_SPANS: usize = 100_000;

/// The recent spans of every component.
#[derive(Debug)]
pub struct Collector {
    capacity: usize,
    spans: Mutex<VecDeque<Span>>,
    /// Spans evicted to make room.
    evicted: AtomicU64,
    /// Spans received in total.
    received: AtomicU64,
}

/// Counters the collector reports with each list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectorStats {
    /// How many spans it keeps at most.
    pub capacity: usize,
    /// How many it holds now.
    pub stored: usize,
    /// How many it has received.
    pub received: u64,
    /// How many were evicted to make room for newer ones.
    pub evicted: u64,
}

impl Collector {
    /// A collector keeping at most `capacity` spans (zero keeps none).
    pub fn new(capacity: usize) -> Self {
        Collector {
            capacity,
            spans: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            evicted: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }
    }

    fn spans(&self) -> std::sync::MutexGuard<'_, VecDeque<Span>> {
        // Plain data: a panicking holder cannot leave it torn.
        self.spans.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `span`, evicting the oldest when full.
    pub fn record(&self, span: Span) {
        self.record_all(std::iter::once(span));
    }

    /// Keeps every span of `spans`, evicting the oldest when full.
    pub fn record_all(&self, spans: impl IntoIterator<Item = Span>) {
        if self.capacity == 0 {
            return;
        }
        let mut buffer = self.spans();
        let mut received = 0;
        let mut evicted = 0;
        for span in spans {
            received += 1;
            if buffer.len() == self.capacity {
                buffer.pop_front();
                evicted += 1;
            }
            buffer.push_back(span);
        }
        drop(buffer);
        self.received.fetch_add(received, Ordering::Relaxed);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
    }

    /// The counters.
    pub fn stats(&self) -> CollectorStats {
        CollectorStats {
            capacity: self.capacity,
            stored: self.spans().len(),
            received: self.received.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// The spans of one trace, in the order they arrived.
    pub fn trace(&self, id: TraceId) -> Vec<Span> {
        self.spans()
            .iter()
            .filter(|s| s.trace_id == id)
            .cloned()
            .collect()
    }

    /// Traces grouped, each with the position of its latest span (for recency).
    fn grouped(&self, keep: impl Fn(&TraceId, &[&Span]) -> bool) -> Vec<(usize, Vec<Span>)> {
        let buffer = self.spans();
        let mut groups: HashMap<TraceId, (usize, Vec<&Span>)> = HashMap::new();
        for (i, span) in buffer.iter().enumerate() {
            let entry = groups.entry(span.trace_id).or_default();
            entry.0 = i;
            entry.1.push(span);
        }
        let mut out: Vec<(usize, Vec<Span>)> = groups
            .into_iter()
            .filter(|(id, (_, spans))| keep(id, spans))
            .map(|(_, (last, spans))| (last, spans.into_iter().cloned().collect()))
            .collect();
        out.sort_by_key(|(last, _)| std::cmp::Reverse(*last));
        out
    }

    /// Up to `limit` traces of at least `min_spans` spans, most recently active first.
    pub fn recent(&self, limit: usize, min_spans: usize) -> Vec<TraceSummary> {
        self.grouped(|_, spans| spans.len() >= min_spans)
            .into_iter()
            .filter_map(|(_, spans)| trace::summary::summarize(&spans))
            .take(limit)
            .collect()
    }

    /// Up to `limit` traces with an API request on `object`, most recently active first.
    pub fn for_object(&self, object: &ObjectRef, limit: usize) -> Vec<TraceSummary> {
        self.grouped(|_, spans| spans.iter().any(|s| object.matches(s)))
            .into_iter()
            .filter_map(|(_, spans)| trace::summary::summarize(&spans))
            .take(limit)
            .collect()
    }
}

/// Traces listed when `?limit=` is not given.
const DEFAULT_LIST_LIMIT: usize = 20;

fn trace_not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        target: ErrorTarget {
            group: "miniplane.dev".into(),
            resource: "traces".into(),
            kind: "Trace".into(),
            name: id.to_owned(),
        },
    }
}

/// Serves `/miniplane/v1/traces[/{id}]`:
///
/// * `POST` a [`SpanBatch`] (`{"spans": [...]}`) → `202 {"accepted": n}`;
/// * `GET` → `{"traces": [TraceSummary...], "stats": ...}`, most recently active first;
///   `?limit=N` (20), `?minSpans=N` (1; 2 hides one-request traces such as lease renewals),
///   `?object=deployments/default/web` (traces with a request on that object);
/// * `GET /{traceId}` → `{"traceId": ..., "spans": [...]}`, 404 if none is kept;
///   `?view=tree` → the rows of the causal tree as the web UI draws them
///   ([`trace::view::TraceView`]).
pub fn handle(
    collector: &Collector,
    method: &Method,
    id: Option<&str>,
    query: &Query,
    body: &Bytes,
) -> Result<Response> {
    match (method, id) {
        (&Method::POST, None) => {
            let batch: SpanBatch = serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("invalid span batch: {e}")))?;
            let accepted = batch.spans.len();
            collector.record_all(batch.spans);
            Ok(json_response(
                StatusCode::ACCEPTED,
                &json!({ "accepted": accepted }),
            ))
        }
        (&Method::GET, None) if query.get("spans") == Some("all") => {
            let spans: Vec<Span> = collector.spans().iter().cloned().collect();
            Ok(json_response(StatusCode::OK, &json!({ "spans": spans })))
        }
        (&Method::GET, None) => {
            let limit = query
                .int("limit")?
                .map_or(DEFAULT_LIST_LIMIT, |n| usize::try_from(n).unwrap_or(0));
            let min_spans = query
                .int("minSpans")?
                .map_or(1, |n| usize::try_from(n).unwrap_or(1));
            let traces = match query.non_empty("object") {
                Some(o) => {
                    let object = ObjectRef::parse(o).ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "object must be resource/namespace/name or resource/name, not {o:?}"
                        ))
                    })?;
                    collector.for_object(&object, limit)
                }
                None => collector.recent(limit, min_spans),
            };
            Ok(json_response(
                StatusCode::OK,
                &json!({ "traces": traces, "stats": collector.stats() }),
            ))
        }
        (&Method::GET, Some(id)) => {
            let trace_id: TraceId = id
                .parse()
                .map_err(|e| ApiError::BadRequest(format!("invalid trace id: {e}")))?;
            let spans = collector.trace(trace_id);
            if spans.is_empty() {
                return Err(trace_not_found(id));
            }
            match query.non_empty("view") {
                None => Ok(json_response(
                    StatusCode::OK,
                    &json!({ "traceId": trace_id, "spans": spans }),
                )),
                Some("tree") => Ok(json_response(
                    StatusCode::OK,
                    &json!(trace::view::view(trace_id, &spans)),
                )),
                Some(other) => Err(ApiError::BadRequest(format!(
                    "view: Unsupported value: {other:?}: supported values: \"tree\""
                ))),
            }
        }
        (m, _) => Err(ApiError::MethodNotAllowed(format!(
            "{m} is not supported on traces"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::{SpanContext, SpanKind, attr};

    fn span(ctx: SpanContext, name: &str) -> Span {
        Span::start(ctx, None, name, SpanKind::Server, "kube-apiserver")
    }

    #[test]
    fn keeps_the_newest_spans_up_to_its_capacity() {
        let c = Collector::new(3);
        let a = SpanContext::new_root();
        let b = SpanContext::new_root();
        c.record(span(a, "a1"));
        c.record_all([span(a.child(), "a2"), span(b, "b1"), span(b.child(), "b2")]);
        let stats = c.stats();
        assert_eq!((stats.stored, stats.received, stats.evicted), (3, 4, 1));
        let names: Vec<String> = c.trace(a.trace_id).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["a2"]);
        let recent = c.recent(10, 1);
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].trace_id, b.trace_id, "most recently active first");
        assert_eq!(
            c.recent(10, 2).len(),
            1,
            "single-span traces can be left out"
        );
        let none = Collector::new(0);
        none.record(span(a, "x"));
        assert_eq!(none.stats().stored, 0);
    }

    #[test]
    fn finds_the_traces_that_touched_an_object() {
        let c = Collector::new(10);
        let a = SpanContext::new_root();
        c.record(
            span(a, "create deployments")
                .with(attr::RESOURCE, "deployments")
                .with(attr::NAMESPACE, "default")
                .with(attr::NAME, "web"),
        );
        c.record(span(SpanContext::new_root(), "other"));
        let web = ObjectRef::parse("deployments/default/web").unwrap();
        let found = c.for_object(&web, 5);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].trace_id, a.trace_id);
    }

    #[tokio::test]
    async fn one_trace_as_the_rows_of_its_tree() {
        let c = Collector::new(10);
        let root = SpanContext::new_root();
        c.record(span(root, "create deployments"));
        c.record(Span::start(
            root.child(),
            Some(root.span_id),
            "watch event",
            SpanKind::Consumer,
            "kube-controller-manager",
        ));
        let id = root.trace_id.to_string();
        let get = |q: &str| {
            handle(
                &c,
                &Method::GET,
                Some(&id),
                &Query::parse(Some(q)),
                &Bytes::new(),
            )
        };
        let resp = get("view=tree").unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let view: trace::view::TraceView = serde_json::from_slice(&body).unwrap();
        let rows: Vec<(usize, &str)> = view
            .rows
            .iter()
            .map(|r| (r.depth, r.span.name.as_str()))
            .collect();
        assert_eq!(rows, [(0, "create deployments"), (1, "watch event")]);
        assert!(matches!(get("view=gantt"), Err(ApiError::BadRequest(_))));
    }
}
