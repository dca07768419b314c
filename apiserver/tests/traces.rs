//! Tracing through the router: the trace annotation on written objects, the request spans in
//! the collector, the collector's HTTP API, and tracing turned off.

use crate::common;

use apiserver::ServerOptions;
use apiserver::TracingOptions;
use axum::http::{Method, StatusCode};
use common::Harness;
use serde_json::{Value, json};
use trace::{SpanBatch, SpanContext, TRACEPARENT_ANNOTATION};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn annotation(obj: &Value) -> SpanContext {
    let value = obj["metadata"]["annotations"][TRACEPARENT_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("no trace annotation on {obj}"));
    SpanContext::parse(value).expect("a valid traceparent")
}

#[tokio::test]
async fn a_write_without_traceparent_starts_a_trace_recorded_on_the_object() {
    let h = Harness::new().await;
    let created = h.post(CMS, &cm("a", json!({"k": "1"}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let ctx = annotation(&created.body);
    let spans = h.state.collector().trace(ctx.trace_id);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    assert_eq!(
        span.span_id, ctx.span_id,
        "the annotation names the request's span"
    );
    assert_eq!(span.parent_span_id, None);
    assert_eq!(span.name, "create configmaps");
    assert_eq!(span.attribute("code").as_deref(), Some("201"));
    assert_eq!(
        span.attribute("revision").as_deref(),
        created.body["metadata"]["resourceVersion"].as_str()
    );
    assert!(
        span.summary.starts_with("default/a → 201 Created"),
        "{}",
        span.summary
    );
    // The stored object carries it too.
    let got = h.get(&format!("{CMS}/a")).await;
    assert_eq!(annotation(&got.body), ctx);
}

#[tokio::test]
async fn a_write_with_traceparent_continues_the_callers_trace() {
    let h = Harness::new().await;
    h.post(CMS, &cm("b", json!({"k": "1"}))).await;
    let caller = SpanContext::new_root();
    let body = serde_json::to_vec(&json!({"data": {"k": "2"}})).unwrap();
    let patched = h
        .raw(
            Method::PATCH,
            &format!("{CMS}/b"),
            &[
                ("content-type", "application/merge-patch+json"),
                ("traceparent", &caller.traceparent()),
            ],
            body,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK);
    let ctx = annotation(&patched.body);
    assert_eq!(ctx.trace_id, caller.trace_id);
    let spans = h.state.collector().trace(caller.trace_id);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].parent_span_id, Some(caller.span_id));
    assert_eq!(spans[0].name, "patch configmaps");
    // A traced read is recorded; an untraced one is not.
    h.raw(
        Method::GET,
        &format!("{CMS}/b"),
        &[("traceparent", &caller.traceparent())],
        vec![],
    )
    .await;
    h.get(&format!("{CMS}/b")).await;
    assert_eq!(h.state.collector().trace(caller.trace_id).len(), 2);
}

#[tokio::test]
async fn a_write_that_changes_nothing_but_the_trace_is_not_made() {
    let h = Harness::new().await;
    let created = h.post(CMS, &cm("c", json!({"k": "1"}))).await;
    let rv = created.body["metadata"]["resourceVersion"].clone();
    let again = h.put(&format!("{CMS}/c"), &created.body).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        again.body["metadata"]["resourceVersion"], rv,
        "no new revision"
    );
    assert_eq!(annotation(&again.body), annotation(&created.body));
}

#[tokio::test]
async fn the_collector_ingests_lists_and_serves_traces() {
    let h = Harness::new().await;
    let created = h.post(CMS, &cm("d", json!({}))).await;
    let ctx = annotation(&created.body);
    let mut child = trace::Span::start(
        ctx.child(),
        Some(ctx.span_id),
        "sync configmap",
        trace::SpanKind::Internal,
        "test-controller",
    );
    child.end();
    let batch = serde_json::to_value(SpanBatch { spans: vec![child] }).unwrap();
    let posted = h.post("/miniplane/v1/traces", &batch).await;
    assert_eq!(posted.status, StatusCode::ACCEPTED);
    assert_eq!(posted.body["accepted"], 1);

    let one = h
        .get(&format!("/miniplane/v1/traces/{}", ctx.trace_id))
        .await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.body["spans"].as_array().unwrap().len(), 2);

    let list = h.get("/miniplane/v1/traces?minSpans=2").await;
    let traces = list.body["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 1, "{}", list.body);
    assert_eq!(traces[0]["traceId"], ctx.trace_id.to_string());
    assert_eq!(traces[0]["root"], "create configmaps");
    assert_eq!(traces[0]["spans"], 2);
    assert!(list.body["stats"]["stored"].as_u64().unwrap() >= 2);

    let by_object = h
        .get("/miniplane/v1/traces?object=configmaps/default/d")
        .await;
    assert_eq!(by_object.body["traces"].as_array().unwrap().len(), 1);

    let missing = h
        .get(&format!(
            "/miniplane/v1/traces/{}",
            SpanContext::new_root().trace_id
        ))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        h.get("/miniplane/v1/traces/nothex").await.status,
        StatusCode::BAD_REQUEST
    );
    let bad = h
        .raw(
            Method::POST,
            "/miniplane/v1/traces",
            &[],
            b"{\"spans\": 3}".to_vec(),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let wrong = h
        .raw(Method::DELETE, "/miniplane/v1/traces", &[], vec![])
        .await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn tracing_off_stamps_and_keeps_nothing() {
    let h = Harness::with_options(ServerOptions {
        tracing: TracingOptions {
            enabled: false,
            ..TracingOptions::default()
        },
        ..ServerOptions::default()
    })
    .await;
    let created = h.post(CMS, &cm("e", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(created.body["metadata"].get("annotations").is_none());
    assert_eq!(h.state.collector().stats().stored, 0);
}
