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
//!
//! **A span budget per trace** (`--trace-max-spans-per-trace`, 20 000 by default, 0 for none):
//! a `kubectl apply` of a 10 000-replica Deployment makes ~150 000 spans in one trace, more
//! than the collector keeps, so it would never be shown whole and would evict every other
//! trace. Once a trace has sent its budget, the collector refuses its further spans, and the
//! API server ([`crate::request_trace`]) clears the W3C `sampled` flag on the trace's
//! further writes: the components then carry the trace on without recording it (the
//! parent-based sampling of OpenTelemetry), which also spares them the work. The trace is
//! marked `cut` in the list and in its view. Grafana Tempo bounds a trace the same way
//! (`max_bytes_per_trace`, refusing spans past it); Jaeger and the OpenTelemetry Collector
//! sample instead. A simplification: the count is of spans received, and forgotten when the
//! last of a trace's spans is evicted.

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
use crate::response::json_response;

/// Spans kept by default.
pub const DEFAULT_MAX_SPANS: usize = 100_000;

/// Spans one trace may have by default (see the module docs).
pub const DEFAULT_MAX_SPANS_PER_TRACE: usize = 20_000;

/// The recent spans of every component.
#[derive(Debug)]
pub struct Collector {
    capacity: usize,
    /// Spans one trace may have (0: no limit).
    per_trace: usize,
    ring: Mutex<Ring>,
    /// Spans evicted to make room.
    evicted: AtomicU64,
    /// Spans received in total.
    received: AtomicU64,
    /// Spans refused because their trace had used its budget.
    refused: AtomicU64,
}

/// The kept spans, and a count for each trace that has some.
#[derive(Debug, Default)]
struct Ring {
    spans: VecDeque<Span>,
    traces: HashMap<TraceId, TraceCount>,
}

/// What the collector knows of one trace with spans kept.
#[derive(Debug, Default, Clone, Copy)]
struct TraceCount {
    /// Spans of it in the ring.
    stored: usize,
    /// Spans of it accepted (the budget counts these).
    accepted: usize,
    /// It reached its budget: spans were refused or writes left unsampled.
    cut: bool,
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
    /// Spans one trace may have (0: no limit).
    #[serde(default)]
    pub max_spans_per_trace: usize,
    /// How many were refused because their trace had used its budget.
    #[serde(default)]
    pub refused: u64,
}

impl Collector {
    /// A collector keeping at most `capacity` spans (zero keeps none), and at most
    /// `per_trace` of one trace (zero: no limit).
    pub fn new(capacity: usize, per_trace: usize) -> Self {
        Collector {
            capacity,
            per_trace,
            ring: Mutex::new(Ring {
                spans: VecDeque::with_capacity(capacity.min(4096)),
                traces: HashMap::new(),
            }),
            evicted: AtomicU64::new(0),
            received: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        // Plain data: a panicking holder cannot leave it torn.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether trace `id` may record more spans: false once it has sent its budget (it is
    /// then marked cut). The API server asks before each traced request, and clears the
    /// `sampled` flag of the request's context when the answer is no.
    pub fn samples(&self, id: TraceId) -> bool {
        if self.per_trace == 0 || self.capacity == 0 {
            return true;
        }
        let mut ring = self.ring();
        match ring.traces.get_mut(&id) {
            Some(count) if count.accepted >= self.per_trace => {
                count.cut = true;
                false
            }
            _ => true,
        }
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
        let mut ring = self.ring();
        let Ring {
            spans: buffer,
            traces,
        } = &mut *ring;
        let (mut received, mut evicted, mut refused) = (0, 0, 0);
        for span in spans {
            received += 1;
            // An entry has spans in the ring (it goes with its last one), so a new entry is
            // never over the budget.
            let count = traces.entry(span.trace_id).or_default();
            if self.per_trace > 0 && count.accepted >= self.per_trace {
                count.cut = true;
                refused += 1;
                continue;
            }
            count.accepted += 1;
            count.stored += 1;
            if buffer.len() == self.capacity
                && let Some(old) = buffer.pop_front()
            {
                evicted += 1;
                if let Some(count) = traces.get_mut(&old.trace_id) {
                    count.stored -= 1;
                    if count.stored == 0 {
                        traces.remove(&old.trace_id);
                    }
                }
            }
            buffer.push_back(span);
        }
        drop(ring);
        self.received.fetch_add(received, Ordering::Relaxed);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        self.refused.fetch_add(refused, Ordering::Relaxed);
    }

    /// Whether trace `id` reached its budget (and is not whole).
    pub fn is_cut(&self, id: TraceId) -> bool {
        self.ring().traces.get(&id).is_some_and(|c| c.cut)
    }

    /// The counters.
    pub fn stats(&self) -> CollectorStats {
        CollectorStats {
            capacity: self.capacity,
            stored: self.ring().spans.len(),
            received: self.received.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            max_spans_per_trace: self.per_trace,
            refused: self.refused.load(Ordering::Relaxed),
        }
    }

    /// The spans of one trace, in the order they arrived.
    pub fn trace(&self, id: TraceId) -> Vec<Span> {
        self.ring()
            .spans
            .iter()
            .filter(|s| s.trace_id == id)
            .cloned()
            .collect()
    }

    /// Traces grouped, each with the position of its latest span (for recency) and whether
    /// it was cut.
    fn grouped(&self, keep: impl Fn(&TraceId, &[&Span]) -> bool) -> Vec<(usize, bool, Vec<Span>)> {
        let ring = self.ring();
        let mut groups: HashMap<TraceId, (usize, Vec<&Span>)> = HashMap::new();
        for (i, span) in ring.spans.iter().enumerate() {
            let entry = groups.entry(span.trace_id).or_default();
            entry.0 = i;
            entry.1.push(span);
        }
        let mut out: Vec<(usize, bool, Vec<Span>)> = groups
            .into_iter()
            .filter(|(id, (_, spans))| keep(id, spans))
            .map(|(id, (last, spans))| {
                let cut = ring.traces.get(&id).is_some_and(|c| c.cut);
                (last, cut, spans.into_iter().cloned().collect())
            })
            .collect();
        out.sort_by_key(|(last, _, _)| std::cmp::Reverse(*last));
        out
    }

    fn summaries(groups: Vec<(usize, bool, Vec<Span>)>, limit: usize) -> Vec<TraceSummary> {
        groups
            .into_iter()
            .filter_map(|(_, cut, spans)| {
                trace::summary::summarize(&spans).map(|s| TraceSummary { cut, ..s })
            })
            .take(limit)
            .collect()
    }

    /// Up to `limit` traces of at least `min_spans` spans, most recently active first.
    pub fn recent(&self, limit: usize, min_spans: usize) -> Vec<TraceSummary> {
        Self::summaries(self.grouped(|_, spans| spans.len() >= min_spans), limit)
    }

    /// Up to `limit` traces with an API request on `object`, most recently active first.
    pub fn for_object(&self, object: &ObjectRef, limit: usize) -> Vec<TraceSummary> {
        Self::summaries(
            self.grouped(|_, spans| spans.iter().any(|s| object.matches(s))),
            limit,
        )
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
/// * `GET /{traceId}` → `{"traceId": ..., "spans": [...], "cut": bool}`, 404 if none is
///   kept; `?view=tree` → the rows of the causal tree as the web UI draws them
///   ([`trace::view::TraceView`]). `cut`: the trace reached its span budget, so later steps
///   are missing.
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
            let spans: Vec<Span> = collector.ring().spans.iter().cloned().collect();
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
            let cut = collector.is_cut(trace_id);
            match query.non_empty("view") {
                None => Ok(json_response(
                    StatusCode::OK,
                    &json!({ "traceId": trace_id, "spans": spans, "cut": cut }),
                )),
                Some("tree") => Ok(json_response(
                    StatusCode::OK,
                    &json!(trace::view::TraceView {
                        cut,
                        ..trace::view::view(trace_id, &spans)
                    }),
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

    /// `GET /miniplane/v1/traces/{id}?{query}`.
    fn get_trace(c: &Collector, id: TraceId, query: &str) -> Result<Response> {
        let id = id.to_string();
        handle(
            c,
            &Method::GET,
            Some(&id),
            &Query::parse(Some(query)),
            &Bytes::new(),
        )
    }

    /// A 200 response's JSON body.
    async fn body<T: serde::de::DeserializeOwned>(resp: Response) -> T {
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn keeps_the_newest_spans_up_to_its_capacity() {
        let c = Collector::new(3, 0);
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
        let none = Collector::new(0, 0);
        none.record(span(a, "x"));
        assert_eq!(none.stats().stored, 0);
    }

    #[test]
    fn finds_the_traces_that_touched_an_object() {
        let c = Collector::new(10, 0);
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
        let c = Collector::new(10, 0);
        let root = SpanContext::new_root();
        c.record(span(root, "create deployments"));
        c.record(Span::start(
            root.child(),
            Some(root.span_id),
            "watch event",
            SpanKind::Consumer,
            "kube-controller-manager",
        ));
        let get = |q: &str| get_trace(&c, root.trace_id, q);
        let view: trace::view::TraceView = body(get("view=tree").unwrap()).await;
        let rows: Vec<(usize, &str)> = view
            .rows
            .iter()
            .map(|r| (r.depth, r.span.name.as_str()))
            .collect();
        assert_eq!(rows, [(0, "create deployments"), (1, "watch event")]);
        assert!(matches!(get("view=gantt"), Err(ApiError::BadRequest(_))));
    }

    #[tokio::test]
    async fn a_trace_keeps_at_most_its_budget_and_is_then_cut() {
        let c = Collector::new(10, 3);
        let (a, b) = (SpanContext::new_root(), SpanContext::new_root());
        assert!(c.samples(a.trace_id), "an unknown trace is sampled");
        c.record_all((0..2).map(|i| span(a.child(), &format!("a{i}"))));
        assert!(c.samples(a.trace_id), "under its budget");
        assert!(!c.is_cut(a.trace_id));
        c.record_all((2..5).map(|i| span(a.child(), &format!("a{i}"))));
        c.record(span(b, "b0"));
        let names: Vec<String> = c.trace(a.trace_id).into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["a0", "a1", "a2"],
            "spans past the budget are refused"
        );
        assert!(c.is_cut(a.trace_id));
        assert!(!c.samples(a.trace_id), "its further writes go unsampled");
        assert!(c.samples(b.trace_id), "other traces are not affected");
        let stats = c.stats();
        assert_eq!(
            (
                stats.stored,
                stats.received,
                stats.refused,
                stats.max_spans_per_trace
            ),
            (4, 6, 2, 3)
        );
        let listed = c.recent(10, 1);
        let cut: Vec<(TraceId, bool)> = listed.iter().map(|t| (t.trace_id, t.cut)).collect();
        assert_eq!(cut, [(b.trace_id, false), (a.trace_id, true)]);

        let spans: serde_json::Value = body(get_trace(&c, a.trace_id, "").unwrap()).await;
        assert_eq!(spans["cut"], true);
        let view: trace::view::TraceView =
            body(get_trace(&c, a.trace_id, "view=tree").unwrap()).await;
        assert!(view.cut);

        // Once every span of a trace is evicted, the collector forgets it: its count starts
        // again (and the map of counts stays bounded by the ring).
        c.record_all((0..10).map(|i| span(SpanContext::new_root(), &format!("x{i}"))));
        assert!(c.trace(a.trace_id).is_empty());
        assert!(!c.is_cut(a.trace_id));
        assert!(c.samples(a.trace_id));
        assert_eq!(c.ring().traces.len(), 10);
        // No budget: nothing refused.
        let unbounded = Collector::new(10, 0);
        unbounded.record_all((0..8).map(|i| span(a.child(), &format!("a{i}"))));
        assert_eq!(unbounded.trace(a.trace_id).len(), 8);
        assert!(unbounded.samples(a.trace_id));
    }
}
