//! [`EtcdSpans`]: the store's etcd v3 endpoint (`store-grpc`) reporting its requests into the
//! API server's trace collector, one span of the component `etcd` per gRPC request, so
//! `miniplane trace` and the labs' `span` checks show what `etcdctl` asked and what it got.
//!
//! etcd traces its gRPC requests with OpenTelemetry's gRPC interceptors
//! (`--experimental-enable-distributed-tracing`); the attributes here follow OpenTelemetry's
//! RPC conventions (`rpc.system`, `rpc.method`, `rpc.grpc.status_code`), plus what a reader
//! of the trace needs:
//!
//! | attribute | value |
//! | --- | --- |
//! | `key` | the key, or `key..range_end`; a transaction's keys, `, `-separated |
//! | `prefix` | the prefix, when the range is every key under it (`etcdctl get --prefix`) |
//! | `request` | the method and the key: `Watch /registry/deployments/default/nginx` |
//! | `revision` | the answer's revision, the one read at or compacted to, a watch's first |
//! | `error` | a refusal's message (`etcdserver: mvcc: required revision has been compacted`) |
//!
//! The span's name is the method and its summary the rest of
//! [`store_grpc::EtcdRequest::summary`], so a trace view's `name: summary` reads
//! `Range: /registry/deployments/default/nginx → 1 kv at revision 42`.
//!
//! Simplified: each request is the root span of a trace of its own (etcd's clients send no
//! trace context that would join it to the API server's).

use apiserver::SpanSink;
use store_grpc::{EtcdRequest, Outcome, RequestObserver};
use trace::{Span, SpanContext, SpanKind, attr};

/// The component name the endpoint's spans carry, as etcd's own spans do.
pub const COMPONENT: &str = "etcd";

/// Records each request of the endpoint as a span (see the module docs).
#[derive(Debug, Clone)]
pub struct EtcdSpans {
    sink: SpanSink,
}

impl EtcdSpans {
    /// Spans into the collector of the API server `sink` belongs to
    /// (`apiserver::Server::spans`).
    pub fn new(sink: SpanSink) -> Self {
        EtcdSpans { sink }
    }

    /// The observer to hand to `store_grpc::EtcdOptions::observer`.
    pub fn observer(sink: SpanSink) -> std::sync::Arc<dyn RequestObserver> {
        std::sync::Arc::new(EtcdSpans::new(sink))
    }
}

/// The span of one request.
pub fn span(request: &EtcdRequest) -> Span {
    let mut span = Span::start(
        SpanContext::new_root(),
        None,
        request.method,
        SpanKind::Server,
        COMPONENT,
    )
    .started_at(request.started);
    span.end_at(request.started + request.duration);
    // The views print `name: summary`; the summary without the method reads as
    // `Range: /registry/deployments/default/nginx → 1 kv at revision 42`.
    let summary = request.summary();
    span.summary = summary
        .strip_prefix(request.method)
        .map_or(summary.as_str(), str::trim_start)
        .to_owned();
    span.set("rpc.system", "grpc");
    span.set("rpc.method", request.method);
    if !request.key.is_empty() {
        span.set(attr::KEY, request.key.as_str());
        span.set("request", format!("{} {}", request.method, request.key));
    } else {
        span.set("request", request.method);
    }
    if let Some(prefix) = &request.prefix {
        span.set("prefix", prefix.as_str());
    }
    span.set(attr::REVISION, request.revision);
    let code = match &request.outcome {
        Outcome::Served(_) => store_grpc::Code::Ok as i64,
        Outcome::Refused { code, message } => {
            span.set(attr::ERROR, message.as_str());
            *code as i64
        }
    };
    span.set("rpc.grpc.status_code", code);
    span
}

impl RequestObserver for EtcdSpans {
    fn observed(&self, request: &EtcdRequest) {
        self.sink.record(span(request));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_refused_read_is_a_span_naming_its_key_revision_and_error() {
        let request = EtcdRequest {
            method: "Range",
            key: "/registry/deployments/default/nginx".to_owned(),
            prefix: None,
            revision: 12,
            outcome: Outcome::Refused {
                code: store_grpc::Code::OutOfRange,
                message: "etcdserver: mvcc: required revision has been compacted".to_owned(),
            },
            started: SystemTime::now(),
            duration: Duration::from_millis(2),
        };
        let s = span(&request);
        assert_eq!(s.component, "etcd");
        assert_eq!(s.name, "Range");
        assert_eq!(s.parent_span_id, None);
        assert_eq!(
            s.attribute("key").as_deref(),
            Some("/registry/deployments/default/nginx")
        );
        assert_eq!(s.attribute("revision").as_deref(), Some("12"));
        assert_eq!(s.attribute("rpc.grpc.status_code").as_deref(), Some("11"));
        assert!(
            s.attribute("error")
                .is_some_and(|e| e.contains("required revision has been compacted"))
        );
        assert_eq!(
            s.summary,
            "/registry/deployments/default/nginx at revision 12 refused: mvcc: required revision has been compacted"
        );
        assert_eq!(s.duration(), Duration::from_millis(2));
    }
}
