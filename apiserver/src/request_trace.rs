//! Tracing an API request: continue the caller's trace (W3C `traceparent` header) or start
//! one, record a span for the request, and stamp the trace context on the object it writes.
//!
//! kube-apiserver traces requests too (`staging/src/k8s.io/apiserver/pkg/endpoints/filters/
//! traces.go`, OpenTelemetry's `otelhttp` handler), but its trace stops at the response.
//! miniplane also writes the context on the object, in the annotation
//! [`trace::TRACEPARENT_ANNOTATION`] (real Kubernetes has no such annotation), so that whoever
//! reacts to the object continues the same trace:
//!
//! ```text
//!   POST /apis/apps/v1/namespaces/default/deployments      (no traceparent: kubectl)
//!     ├─ span "create deployments"  trace T (new), span S
//!     └─ stored object: metadata.annotations["miniplane.dev/traceparent"] = 00-T-S-01
//!   PUT .../replicasets/web-abc/status   traceparent: 00-T-C-01   (a controller's write)
//!     ├─ span "update replicasets/status"  trace T, span S2, parent C
//!     └─ stored object: annotation = 00-T-S2-01
//! ```
//!
//! What is traced: every write (a write without `traceparent` starts a trace), except the
//! heartbeats and records nothing reacts to — Lease renewals and Events written without
//! `traceparent`, which every node and controller sends every few seconds and which would
//! otherwise crowd the bounded collector with one-span traces; a read only when it carries
//! `traceparent` (a controller's live GET inside a sync), so background polling does not
//! flood the collector either; never a watch (it lasts minutes; each event it delivers is
//! traced by the receiving informer instead).
//!
//! The annotation changes only when the object does: a write that changes nothing else keeps
//! the object (and its revision) as it was, so tracing never causes extra watch events.
//!
//! A `/status` write is a report, not a new intent: it stamps its trace only on an object that
//! is in the same trace already (or has none). A late report from an earlier flow (a kubelet
//! re-posting the status of a pod the previous rollout made) never moves the object back to
//! that flow's trace, so what reacts to the object keeps continuing the trace of the write that
//! last changed what it should be (`kubectl set image` → the rollout's trace).

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use trace::{Span, SpanContext, SpanKind, TRACEPARENT_ANNOTATION, TRACEPARENT_HEADER, attr};

use crate::meta;
use crate::request::ResourcePath;

/// The component name API server spans carry.
pub const COMPONENT: &str = "kube-apiserver";

/// Tracing settings of the API server.
#[derive(Debug, Clone)]
pub struct TracingOptions {
    /// Record request spans and stamp the annotation (`--tracing`, on by default). Off, the
    /// server neither records nor stamps anything, and the collector stays empty.
    pub enabled: bool,
    /// Spans the collector keeps (`--trace-max-spans`).
    pub max_spans: usize,
    /// Spans one trace may have before its further writes go unsampled
    /// (`--trace-max-spans-per-trace`; 0: no limit). See `crate::collector`.
    pub max_spans_per_trace: usize,
}

impl Default for TracingOptions {
    fn default() -> Self {
        TracingOptions {
            enabled: true,
            max_spans: crate::collector::DEFAULT_MAX_SPANS,
            max_spans_per_trace: crate::collector::DEFAULT_MAX_SPANS_PER_TRACE,
        }
    }
}

/// What a write records on the object, and what it learns while writing (shared between the
/// request span and the storage layer).
#[derive(Debug)]
pub struct WriteTrace {
    traceparent: String,
    /// The request's trace.
    trace_id: trace::TraceId,
    /// A `/status` write: stamps only objects already in its trace (see the module docs).
    status_only: bool,
    written: Mutex<Option<Written>>,
    /// Decisions taken while serving the request (an admission plugin's), as span attributes.
    notes: Mutex<Vec<(String, String)>>,
}

/// The last object a request wrote.
#[derive(Debug, Clone)]
struct Written {
    revision: u64,
    name: String,
}

impl WriteTrace {
    /// The annotation value for objects this request writes.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// Stamps the annotation on `obj` (the object as it is about to be stored), unless this is
    /// a `/status` write and `obj` belongs to another trace.
    pub fn stamp(&self, obj: &mut Value) {
        if self.stamp_for(obj).is_some() {
            set_annotation(obj, Some(&self.traceparent));
        }
    }

    /// The context [`WriteTrace::stamp`] would put on `obj`, if it would (for a delete, whose
    /// DELETED event carries it instead: [`crate::handoff::Handoff::offer_delete`]).
    pub fn stamp_for(&self, obj: &Value) -> Option<&str> {
        if self.status_only
            && let Some(current) = annotation(obj).and_then(|v| SpanContext::parse(v).ok())
            && current.trace_id != self.trace_id
        {
            return None;
        }
        Some(&self.traceparent)
    }

    /// A write trace stamping `traceparent` (tests of the storage layer).
    #[cfg(test)]
    pub(crate) fn for_tests(traceparent: &str) -> WriteTrace {
        WriteTrace {
            traceparent: traceparent.to_owned(),
            trace_id: SpanContext::parse(traceparent)
                .map(|c| c.trace_id)
                .unwrap_or_default(),
            status_only: false,
            written: Mutex::new(None),
            notes: Mutex::new(Vec::new()),
        }
    }

    /// Records a decision taken while serving the request (`key`: what decided, `value`: what
    /// and why), shown as an attribute of the request's span.
    pub fn note(&self, key: &str, value: impl Into<String>) {
        self.notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key.to_owned(), value.into()));
    }

    /// Notes that the request stored `name` at `revision`.
    pub fn written(&self, name: &str, revision: u64) {
        *self.written.lock().unwrap_or_else(|p| p.into_inner()) = Some(Written {
            revision,
            name: name.to_owned(),
        });
    }
}

/// The trace annotation of `obj`, if any.
pub fn annotation(obj: &Value) -> Option<&str> {
    obj.get("metadata")?
        .get("annotations")?
        .get(TRACEPARENT_ANNOTATION)?
        .as_str()
}

/// The trace annotation's value, to change in place (`None` when absent or not a string).
pub fn annotation_mut(obj: &mut Value) -> Option<&mut String> {
    match obj
        .get_mut("metadata")?
        .get_mut("annotations")?
        .get_mut(TRACEPARENT_ANNOTATION)?
    {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Sets (or with `None` removes) the trace annotation, dropping an emptied annotation map.
pub fn set_annotation(obj: &mut Value, value: Option<&str>) {
    let metadata = meta::metadata_mut(obj);
    match value {
        Some(v) => {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if !annotations.is_object() {
                *annotations = Value::Object(Default::default());
            }
            if let Some(map) = annotations.as_object_mut() {
                map.insert(TRACEPARENT_ANNOTATION.into(), Value::String(v.into()));
            }
        }
        None => {
            let emptied = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
                .map(|map| {
                    map.remove(TRACEPARENT_ANNOTATION);
                    map.is_empty()
                });
            if emptied == Some(true) {
                metadata.remove("annotations");
            }
        }
    }
}

/// The span of one API request, open until [`RequestTrace::finish`]; a request of a trace
/// that is not sampled has none, but still stamps its context on what it writes.
#[derive(Debug)]
pub struct RequestTrace {
    span: Option<Span>,
    write: Arc<WriteTrace>,
}

/// Starts the span of a resource request, or `None` for what is not traced (watches, and
/// reads without `traceparent`). An invalid `traceparent` is ignored, as the W3C
/// recommendation says: the request then starts a new trace.
///
/// Sampling: a new trace is sampled. A request that continues a trace is sampled if its
/// `traceparent` is and `samples(trace id)` (the collector's span budget) says yes; else it
/// records no span and stamps its context with the `sampled` flag cleared, so that the
/// components carry the trace on without recording it (see [`crate::collector`]).
pub fn begin(
    method: &Method,
    path: &ResourcePath,
    watch: bool,
    headers: &HeaderMap,
    samples: impl FnOnce(trace::TraceId) -> bool,
) -> Option<RequestTrace> {
    let parent = headers
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| SpanContext::parse(v).ok());
    let verb = trace::request_verb(method.as_str(), path.name.is_some(), watch);
    let heartbeat = matches!(path.resource.as_str(), "leases" | "events");
    // A connect request (logs, exec, port-forward, node proxy) reaches a node: always traced,
    // so the trace shows which kubelet answered.
    let connect = matches!(
        path.subresource.as_deref(),
        Some("log" | "exec" | "attach" | "portforward" | "proxy")
    );
    let traced = match verb {
        _ if connect => true,
        "watch" => false,
        "get" | "list" => parent.is_some(),
        _ => parent.is_some() || !heartbeat,
    };
    if !traced {
        return None;
    }
    let mut ctx = parent.map_or_else(SpanContext::new_root, |p| p.child());
    if parent.is_some() && ctx.sampled && !samples(ctx.trace_id) {
        ctx.sampled = false;
    }
    let write = Arc::new(WriteTrace {
        traceparent: ctx.traceparent(),
        trace_id: ctx.trace_id,
        status_only: path.subresource.as_deref() == Some("status"),
        written: Mutex::new(None),
        notes: Mutex::new(Vec::new()),
    });
    if !ctx.sampled {
        return Some(RequestTrace { span: None, write });
    }
    let resource = match &path.subresource {
        Some(sub) => format!("{}/{sub}", path.resource),
        None => path.resource.clone(),
    };
    let mut span = Span::start(
        ctx,
        parent.map(|p| p.span_id),
        format!("{verb} {resource}"),
        SpanKind::Server,
        COMPONENT,
    )
    .with(attr::VERB, verb)
    .with(attr::RESOURCE, path.resource.as_str());
    if let Some(sub) = &path.subresource {
        span.set(attr::SUBRESOURCE, sub.as_str());
    }
    if let Some(ns) = &path.namespace {
        span.set(attr::NAMESPACE, ns.as_str());
    }
    if let Some(name) = &path.name {
        span.set(attr::NAME, name.as_str());
    }
    if let Some(agent) = headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        span.set("userAgent", agent);
    }
    Some(RequestTrace {
        write,
        span: Some(span),
    })
}

impl RequestTrace {
    /// What the storage layer stamps on written objects.
    pub fn write(&self) -> Arc<WriteTrace> {
        self.write.clone()
    }

    /// Sets an attribute on the request's span (e.g. `fault` for an injected failure).
    pub fn set_attribute(&mut self, key: &str, value: &str) {
        if let Some(span) = &mut self.span {
            span.set(key, value);
        }
    }

    /// Ends the span with the response's code (and the error, if the request failed); `None`
    /// when the request is not sampled.
    pub fn finish(self, code: StatusCode, error: Option<String>) -> Option<Span> {
        let mut span = self.span?;
        let written = self
            .write
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let notes =
            std::mem::take(&mut *self.write.notes.lock().unwrap_or_else(|p| p.into_inner()));
        for (key, value) in notes {
            span.set(&key, value);
        }
        if let Some(w) = &written {
            span.set(attr::REVISION, w.revision);
            if !span.attributes.contains_key(attr::NAME) {
                span.set(attr::NAME, w.name.as_str());
            }
        }
        span.set(attr::CODE, code.as_u16());
        let object = trace::object_label(
            span.attribute(attr::NAMESPACE).as_deref(),
            span.attribute(attr::NAME).as_deref(),
        );
        let mut summary = format!(
            "{object} → {} {}",
            code.as_u16(),
            code.canonical_reason().unwrap_or("")
        );
        if let Some(w) = &written {
            summary.push_str(&format!(", stored at revision {}", w.revision));
        }
        if let Some(e) = error {
            summary.push_str(&format!(" ({e})"));
            span.set(attr::ERROR, e);
        }
        span.summary = summary.trim().to_owned();
        span.end();
        Some(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvk::GroupVersion;
    use serde_json::json;

    /// [`begin`] with a collector whose budget is never reached.
    fn sampled(
        method: &Method,
        path: &ResourcePath,
        watch: bool,
        headers: &HeaderMap,
    ) -> Option<RequestTrace> {
        begin(method, path, watch, headers, |_| true)
    }

    fn path(name: Option<&str>, sub: Option<&str>) -> ResourcePath {
        ResourcePath {
            gv: GroupVersion::new("apps", "v1"),
            namespace: Some("default".into()),
            resource: "deployments".into(),
            name: name.map(str::to_owned),
            subresource: sub.map(str::to_owned),
        }
    }

    #[test]
    fn writes_start_or_continue_a_trace_reads_only_continue_watches_never() {
        let none = HeaderMap::new();
        let started = sampled(&Method::POST, &path(None, None), false, &none).unwrap();
        assert_eq!(started.span.as_ref().unwrap().parent_span_id, None);
        assert_eq!(started.span.as_ref().unwrap().name, "create deployments");

        let parent = SpanContext::new_root();
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT_HEADER, parent.traceparent().parse().unwrap());
        let cont = sampled(
            &Method::PUT,
            &path(Some("web"), Some("status")),
            false,
            &headers,
        )
        .unwrap();
        assert_eq!(cont.span.as_ref().unwrap().trace_id, parent.trace_id);
        assert_eq!(
            cont.span.as_ref().unwrap().parent_span_id,
            Some(parent.span_id)
        );
        assert_eq!(
            cont.span.as_ref().unwrap().name,
            "update deployments/status"
        );
        assert!(
            cont.write()
                .traceparent()
                .contains(&cont.span.as_ref().unwrap().span_id.to_string())
        );

        assert!(sampled(&Method::GET, &path(Some("web"), None), false, &none).is_none());
        assert!(sampled(&Method::GET, &path(Some("web"), None), false, &headers).is_some());
        assert!(sampled(&Method::GET, &path(None, None), true, &headers).is_none());

        let lease = ResourcePath {
            gv: GroupVersion::new("coordination.k8s.io", "v1"),
            namespace: Some("kube-node-lease".into()),
            resource: "leases".into(),
            name: Some("node-1".into()),
            subresource: None,
        };
        assert!(
            sampled(&Method::PUT, &lease, false, &none).is_none(),
            "a heartbeat"
        );
        assert!(sampled(&Method::PUT, &lease, false, &headers).is_some());

        let mut bad = HeaderMap::new();
        bad.insert(TRACEPARENT_HEADER, "00-zz".parse().unwrap());
        let fresh = sampled(&Method::DELETE, &path(Some("web"), None), false, &bad).unwrap();
        assert_eq!(
            fresh.span.as_ref().unwrap().parent_span_id,
            None,
            "invalid traceparent: new trace"
        );
    }

    #[test]
    fn a_trace_past_its_budget_or_unsampled_is_carried_on_without_a_span() {
        let parent = SpanContext::new_root();
        let with = |ctx: SpanContext| {
            let mut headers = HeaderMap::new();
            headers.insert(TRACEPARENT_HEADER, ctx.traceparent().parse().unwrap());
            headers
        };
        let pods = path(Some("web"), None);
        let over = begin(&Method::PUT, &pods, false, &with(parent), |id| {
            assert_eq!(id, parent.trace_id);
            false
        })
        .unwrap();
        assert!(over.span.is_none(), "no span past the budget");
        let stamped = SpanContext::parse(over.write().traceparent()).unwrap();
        assert_eq!(stamped.trace_id, parent.trace_id, "the same trace");
        assert!(!stamped.sampled, "flagged not sampled");
        assert!(over.finish(StatusCode::OK, None).is_none());

        let unsampled = SpanContext {
            sampled: false,
            ..parent
        };
        let carried = begin(&Method::PUT, &pods, false, &with(unsampled), |_| {
            panic!("an unsampled context is not counted against the budget")
        })
        .unwrap();
        assert!(carried.span.is_none());
        let stamped = SpanContext::parse(carried.write().traceparent()).unwrap();
        assert_eq!(
            (stamped.trace_id, stamped.sampled),
            (parent.trace_id, false)
        );

        let fresh = begin(
            &Method::POST,
            &path(None, None),
            false,
            &HeaderMap::new(),
            |_| panic!("a new trace is always sampled"),
        )
        .unwrap();
        assert!(fresh.span.is_some());
    }

    #[test]
    fn finishing_names_the_object_code_and_revision() {
        let t = sampled(&Method::POST, &path(None, None), false, &HeaderMap::new()).unwrap();
        t.write().written("web", 42);
        let span = t.finish(StatusCode::CREATED, None).unwrap();
        assert_eq!(
            span.summary,
            "default/web → 201 Created, stored at revision 42"
        );
        assert_eq!(span.attribute(attr::REVISION).as_deref(), Some("42"));
        assert_eq!(span.attribute(attr::NAME).as_deref(), Some("web"));
    }

    #[test]
    fn a_status_write_stamps_only_objects_of_its_own_trace() {
        let theirs = SpanContext::new_root();
        let mut obj = json!({"metadata": {"name": "web"}});
        set_annotation(&mut obj, Some(&theirs.traceparent()));
        let mut other = HeaderMap::new();
        other.insert(
            TRACEPARENT_HEADER,
            SpanContext::new_root().traceparent().parse().unwrap(),
        );
        let status = path(Some("web"), Some("status"));
        let report = sampled(&Method::PUT, &status, false, &other).unwrap();
        report.write().stamp(&mut obj);
        assert_eq!(
            annotation(&obj),
            Some(theirs.traceparent().as_str()),
            "kept"
        );
        let mut same = HeaderMap::new();
        same.insert(
            TRACEPARENT_HEADER,
            theirs.child().traceparent().parse().unwrap(),
        );
        let report = sampled(&Method::PUT, &status, false, &same).unwrap();
        report.write().stamp(&mut obj);
        assert_eq!(
            annotation(&obj),
            Some(report.write().traceparent()),
            "same trace: moves on"
        );
        let spec = sampled(&Method::PUT, &path(Some("web"), None), false, &other).unwrap();
        spec.write().stamp(&mut obj);
        assert_eq!(
            annotation(&obj),
            Some(spec.write().traceparent()),
            "a new intent wins"
        );
    }

    #[test]
    fn the_annotation_is_set_and_removed_cleanly() {
        let mut obj = json!({"metadata": {"name": "x"}});
        set_annotation(&mut obj, Some("00-a-b-01"));
        assert_eq!(annotation(&obj), Some("00-a-b-01"));
        set_annotation(&mut obj, None);
        assert_eq!(obj, json!({"metadata": {"name": "x"}}));
        let mut other = json!({"metadata": {"annotations": {"keep": "me"}}});
        set_annotation(&mut other, Some("v"));
        set_annotation(&mut other, None);
        assert_eq!(other, json!({"metadata": {"annotations": {"keep": "me"}}}));
    }
}
