//! Export to OTLP JSON, the OpenTelemetry protocol's JSON encoding, which Jaeger, Tempo and
//! the OpenTelemetry Collector read (`POST /v1/traces`, or a file for Jaeger's upload).
//!
//! Follows `opentelemetry-proto/opentelemetry/proto/trace/v1/trace.proto` with the OTLP/JSON
//! rules of the OTLP specification: ids as lowercase hex (not base64), enums as integers,
//! 64-bit integers as decimal strings, attribute values as `AnyValue` objects.
//!
//! ```json
//! {"resourceSpans":[{
//!   "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"kube-apiserver"}}]},
//!   "scopeSpans":[{"scope":{"name":"miniplane","version":"0.1.0"},"spans":[{
//!     "traceId":"4bf9…4736","spanId":"00f0…02b7","parentSpanId":"…","name":"create deployments",
//!     "kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000002100000",
//!     "attributes":[{"key":"http.response.status_code","value":{"intValue":"201"}}],
//!     "links":[],"status":{"code":1}}]}]}]}
//! ```

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::span::{AttributeValue, Span, SpanKind};

/// The instrumentation scope named in the export.
pub const SCOPE_NAME: &str = "miniplane";

/// OTLP's `SpanKind` numbers.
fn kind(kind: SpanKind) -> u8 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Consumer => 5,
    }
}

fn any_value(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::Str(s) => json!({"stringValue": s}),
        AttributeValue::Int(i) => json!({"intValue": i.to_string()}),
        AttributeValue::Bool(b) => json!({"boolValue": b}),
    }
}

fn key_value(key: &str, value: &AttributeValue) -> Value {
    json!({"key": key, "value": any_value(value)})
}

fn otlp_span(span: &Span) -> Value {
    let mut attributes: Vec<Value> = span
        .attributes
        .iter()
        .map(|(k, v)| key_value(k, v))
        .collect();
    if !span.summary.is_empty() {
        attributes.push(key_value(
            "miniplane.summary",
            &AttributeValue::Str(span.summary.clone()),
        ));
    }
    let status = match span.attributes.get("error") {
        Some(message) => json!({"code": 2, "message": message.to_string()}),
        None => json!({"code": 1}),
    };
    let mut out = json!({
        "traceId": span.trace_id.to_string(),
        "spanId": span.span_id.to_string(),
        "name": span.name,
        "kind": kind(span.kind),
        "startTimeUnixNano": span.start_unix_nanos.to_string(),
        "endTimeUnixNano": span.end_unix_nanos.to_string(),
        "attributes": attributes,
        "links": span.links.iter().map(|l| json!({
            "traceId": l.trace_id.to_string(),
            "spanId": l.span_id.to_string(),
        })).collect::<Vec<_>>(),
        "status": status,
    });
    if let Some(parent) = span.parent_span_id {
        out["parentSpanId"] = json!(parent.to_string());
    }
    out
}

/// The spans as an OTLP `ExportTraceServiceRequest` in JSON, one `ResourceSpans` per
/// component.
pub fn to_otlp(spans: &[Span]) -> Value {
    let mut by_component: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for span in spans {
        by_component
            .entry(&span.component)
            .or_default()
            .push(otlp_span(span));
    }
    let resource_spans: Vec<Value> = by_component
        .into_iter()
        .map(|(component, spans)| {
            json!({
                "resource": {"attributes": [
                    key_value("service.name", &AttributeValue::Str(component.to_owned())),
                ]},
                "scopeSpans": [{
                    "scope": {"name": SCOPE_NAME, "version": env!("CARGO_PKG_VERSION")},
                    "spans": spans,
                }],
            })
        })
        .collect();
    json!({ "resourceSpans": resource_spans })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanContext;

    #[test]
    fn encodes_ids_as_hex_times_as_strings_and_attributes_as_any_values() {
        let root = SpanContext::new_root();
        let mut a = Span::start(root, None, "create deployments", SpanKind::Server, "api")
            .with("code", 201i64)
            .with("resource", "deployments")
            .with("dryRun", false);
        a.start_unix_nanos = 5;
        a.end_unix_nanos = 7;
        let mut b = Span::start(
            root.child(),
            Some(root.span_id),
            "sync",
            SpanKind::Internal,
            "kcm",
        )
        .with("error", "boom");
        b.links.push(root.into());
        let doc = to_otlp(&[a, b]);
        let rs = doc["resourceSpans"].as_array().unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(
            rs[0]["resource"]["attributes"][0],
            json!({"key": "service.name", "value": {"stringValue": "api"}})
        );
        let span = &rs[0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], root.trace_id.to_string());
        assert_eq!(span["kind"], 2);
        assert_eq!(span["startTimeUnixNano"], "5");
        assert!(span.get("parentSpanId").is_none());
        let attrs = span["attributes"].as_array().unwrap();
        assert!(attrs.contains(&json!({"key": "code", "value": {"intValue": "201"}})));
        assert!(attrs.contains(&json!({"key": "dryRun", "value": {"boolValue": false}})));
        let child = &rs[1]["scopeSpans"][0]["spans"][0];
        assert_eq!(child["parentSpanId"], root.span_id.to_string());
        assert_eq!(child["status"]["code"], 2);
        assert_eq!(child["links"][0]["spanId"], root.span_id.to_string());
    }
}
