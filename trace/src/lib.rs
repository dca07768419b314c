//! # trace — one causal, timed trace of what a write sets in motion
//!
//! The data model every miniplane component shares for tracing, and the views and exports of
//! a finished trace. Sans-IO: no sockets, no clock reads outside [`Span::start`]/[`Span::end`].
//!
//! ```text
//!   kubectl apply ──▶ kube-apiserver ──annotation──▶ informer ──▶ workqueue ──▶ sync ──▶ write
//!                     (span: create)   traceparent    (watch event) (queue wait)  (sync) (client)
//!                          │                                                               │
//!                          └──────────── traceparent header: the same trace ◀──────────────┘
//!   every component ──POST spans──▶ collector (in the API server) ──GET──▶ miniplane trace
//! ```
//!
//! | module | what | counterpart |
//! | --- | --- | --- |
//! | [`context`] | trace/span ids, `traceparent` parse and format | W3C Trace Context |
//! | [`span`] | the span record components report | OpenTelemetry `Span` (a subset) |
//! | [`tree`] | spans arranged by cause, orphans flagged | a trace viewer's model |
//! | [`fold`] | the tree with runs of retries folded into one row | (none: viewers show every span) |
//! | [`render`] | the tree and waterfall views for a terminal | Jaeger's trace view |
//! | [`chrome`] | Chrome/Perfetto trace-event JSON | Trace Event Format |
//! | [`otlp`] | OTLP JSON | OpenTelemetry protocol |
//! | [`summary`] | one line per trace for `trace list` | Jaeger's search results |
//! | [`view`] | the tree's rows as data, for the web UI's waterfall | Jaeger UI's trace model |
//!
//! Why a crate of its own: the API server records spans and must not depend on the `client`
//! crate (client-go's place), and the client must not pull in the API server; both depend on
//! this small crate instead, as both kube-apiserver and client-go depend on
//! `go.opentelemetry.io/otel`.

pub mod chrome;
pub mod context;
pub mod fold;
pub mod otlp;
pub mod render;
pub mod span;
pub mod summary;
pub mod tree;
pub mod view;

pub use context::{ParseError, SpanContext, SpanId, TRACEPARENT_HEADER, TraceId};
pub use span::{AttributeValue, Attributes, Link, Span, SpanKind};
pub use summary::TraceSummary;
pub use tree::Tree;

/// The annotation on which the API server records the trace context of the write that last
/// changed an object, so whoever reacts to the object continues that trace.
///
/// Real Kubernetes has no such annotation: its API server traces each request on its own
/// (`--tracing-config-file`) and nothing carries a trace from one object to the work it
/// causes. miniplane adds it to make the whole chain one trace.
pub const TRACEPARENT_ANNOTATION: &str = "miniplane.dev/traceparent";

/// The collector's path on the API server (outside `/api` and `/apis`, so kubectl never
/// touches it). `POST` a [`SpanBatch`] to it; `GET` it for the recent traces,
/// `GET {path}/{traceId}` for one trace.
pub const COLLECTOR_PATH: &str = "/miniplane/v1/traces";

/// What components `POST` to the collector.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SpanBatch {
    /// Finished spans.
    pub spans: Vec<Span>,
}

/// The names of the attributes the views and queries rely on.
pub mod attr {
    /// The request verb (`create`, `update`, `patch`, `delete`, `get`, `list`).
    pub const VERB: &str = "verb";
    /// The plural resource (`deployments`).
    pub const RESOURCE: &str = "resource";
    /// The subresource (`status`, `binding`).
    pub const SUBRESOURCE: &str = "subresource";
    /// The object's namespace.
    pub const NAMESPACE: &str = "namespace";
    /// The object's name.
    pub const NAME: &str = "name";
    /// The HTTP status code.
    pub const CODE: &str = "code";
    /// The store revision a write produced (the object's new resourceVersion).
    pub const REVISION: &str = "revision";
    /// A work-queue key (`namespace/name`).
    pub const KEY: &str = "key";
    /// How many times the key was retried after failed syncs.
    pub const RETRIES: &str = "retries";
    /// An error message.
    pub const ERROR: &str = "error";
    /// Why a controller acted as it did (the garbage collector's reason for a delete).
    pub const REASON: &str = "reason";
}

/// The Kubernetes verb of a request (`RequestInfoFactory.NewRequestInfo` in
/// `apiserver/pkg/endpoints/request/requestinfo.go`): `named` when the path names an object,
/// `watch` for `?watch=1`.
pub fn request_verb(method: &str, named: bool, watch: bool) -> &'static str {
    match (method, named) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "request",
    }
}

/// The span `context` names among `spans`, with its parent when `spans` holds it. For a
/// write's trace context (an object's `miniplane.dev/traceparent`), that is the API server's
/// span of the request and the client's span that sent it (none for a client that sent no
/// trace context, as kubectl): who wrote it, as `miniplane history` and `miniplane record`
/// name the writer.
pub fn span_and_parent<'s>(
    spans: &'s [Span],
    context: &SpanContext,
) -> Option<(&'s Span, Option<&'s Span>)> {
    let span = spans.iter().find(|s| s.span_id == context.span_id)?;
    let parent = span
        .parent_span_id
        .and_then(|p| spans.iter().find(|s| s.span_id == p));
    Some((span, parent))
}

/// How a span's summary names the object a request is about: `ns/name`, `name` (cluster
/// scope), `in ns` (a collection), or nothing.
pub fn object_label(namespace: Option<&str>, name: Option<&str>) -> String {
    match (namespace, name) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_owned(),
        (Some(ns), None) => format!("in {ns}"),
        (None, None) => String::new(),
    }
}

/// One object as the trace queries name it: `deployments/default/web`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// Plural resource.
    pub resource: String,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// Parses `resource/namespace/name` or `resource/name`.
    pub fn parse(s: &str) -> Option<ObjectRef> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts.as_slice() {
            [resource, name] if !resource.is_empty() && !name.is_empty() => Some(ObjectRef {
                resource: (*resource).to_owned(),
                namespace: None,
                name: (*name).to_owned(),
            }),
            [resource, ns, name] if !resource.is_empty() && !name.is_empty() => Some(ObjectRef {
                resource: (*resource).to_owned(),
                namespace: Some((*ns).to_owned()).filter(|n| !n.is_empty()),
                name: (*name).to_owned(),
            }),
            _ => None,
        }
    }

    /// True if `span` is an API request on this object (any subresource).
    pub fn matches(&self, span: &Span) -> bool {
        let is = |key: &str, want: &str| matches!(span.attributes.get(key), Some(AttributeValue::Str(v)) if v == want);
        is(attr::RESOURCE, &self.resource)
            && is(attr::NAME, &self.name)
            && match &self.namespace {
                Some(ns) => is(attr::NAMESPACE, ns),
                None => !span.attributes.contains_key(attr::NAMESPACE),
            }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{ns}/{}", self.resource, self.name),
            None => write!(f, "{}/{}", self.resource, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_refs_parse_and_match_api_spans() {
        let r = ObjectRef::parse("deployments/default/web").unwrap();
        assert_eq!(r.to_string(), "deployments/default/web");
        let span = Span::start(SpanContext::new_root(), None, "x", SpanKind::Server, "api")
            .with(attr::RESOURCE, "deployments")
            .with(attr::NAMESPACE, "default")
            .with(attr::NAME, "web");
        assert!(r.matches(&span));
        assert!(
            !ObjectRef::parse("deployments/other/web")
                .unwrap()
                .matches(&span)
        );
        let node = ObjectRef::parse("nodes/node-1").unwrap();
        assert_eq!(node.namespace, None);
        assert!(ObjectRef::parse("nodes").is_none());
        assert!(ObjectRef::parse("a/b/c/d").is_none());
    }
}
