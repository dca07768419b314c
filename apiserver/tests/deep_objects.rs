//! Objects nested 10,000 levels deep, the most Go's `encoding/json` decodes: a custom resource
//! preserving unknown fields keeps such a field through create, get, list, watch, update,
//! patches and delete; a body one level deeper gets kube-apiserver's 400.
//!
//! The test runs on the test thread's own small stack (a current-thread runtime): the server
//! must not rely on its caller's stack. The test itself never decodes a deep answer into a
//! `Value` (the harness keeps an answer it cannot decode as a string); it counts levels.

use crate::common::{self, Harness};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const THINGS: &str = "/apis/deep.example.com/v1/namespaces/default/things";
const JSON: &str = "application/json";
/// The deepest nesting kube-apiserver decodes.
const MAX: usize = 10_000;
/// One level of the deep field.
const LEVEL: &str = "{\"a\":";

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.deep.example.com"},
        "spec": {
            "group": "deep.example.com", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    })
}

/// `levels` nested objects `{"a": ... "leaf" ...}`.
fn nested(levels: usize, leaf: &str) -> String {
    format!("{}\"{leaf}\"{}", LEVEL.repeat(levels), "}".repeat(levels))
}

/// A Thing whose whole document nests `depth` levels: the object, `spec`, then `{"a": ...}`.
fn thing(name: &str, depth: usize, extra_metadata: &str) -> String {
    format!(
        "{{\"apiVersion\":\"deep.example.com/v1\",\"kind\":\"Thing\",\"metadata\":{{\"name\":\"{name}\"{extra_metadata}}},\"spec\":{}}}",
        nested(depth - 1, "leaf")
    )
}

/// The text of an answer the harness could not decode (too deep for `serde_json`'s default
/// recursion limit), or of one it could.
fn text(body: &Value) -> String {
    match body {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How many levels of the deep field a text holds, and whether it ends in `leaf`.
fn levels(text: &str, leaf: &str) -> (usize, bool) {
    let n = text.matches(LEVEL).count();
    (
        n,
        text.contains(&format!("\"{leaf}\"{}", "}".repeat(n.min(50)))),
    )
}

async fn send(h: &Harness, method: Method, uri: &str, ct: &str, body: String) -> common::Resp {
    h.raw(method, uri, &[("content-type", ct)], body.into_bytes())
        .await
}

async fn served(h: &Harness) {
    let created = h.post(CRDS, &crd()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let start = Instant::now();
    while h.get(THINGS).await.status != StatusCode::OK {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "things never served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The 400 of a body nested one level too deep, as kube-apiserver words it
/// (`transformDecodeError` of the `SimpleMetaFactory.Interpret` error).
fn too_deep(kind: &str, opening: char, summary: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: invalid character '{opening}' exceeded max depth ({summary})"),
        "reason": "BadRequest", "code": 400
    })
}

#[tokio::test]
async fn a_custom_resource_nested_ten_thousand_levels_is_served_like_any_other() {
    let h = Harness::new().await;
    served(&h).await;
    let one = format!("{THINGS}/one");

    // Watching from the start: the events carry the deep object too.
    let mut watch = h.watch(&format!("{THINGS}?watch=1"), None).await;

    let created = send(&h, Method::POST, THINGS, JSON, thing("one", MAX, "")).await;
    assert_eq!(
        created.status,
        StatusCode::CREATED,
        "{:.300}",
        text(&created.body)
    );
    assert_eq!(levels(&text(&created.body), "leaf"), (MAX - 1, true));

    let got = h.get(&one).await;
    assert_eq!(got.status, StatusCode::OK);
    let got = text(&got.body);
    assert_eq!(levels(&got, "leaf"), (MAX - 1, true));
    let listed = h.get(THINGS).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(levels(&text(&listed.body), "leaf"), (MAX - 1, true));
    let table = h.get_as(THINGS, common::TABLE).await;
    assert_eq!(table.status, StatusCode::OK, "{:.300}", text(&table.body));

    let added = watch.next_raw().await.expect("ADDED");
    assert!(added.starts_with("{\"type\":\"ADDED\""), "{added:.100}");
    assert_eq!(levels(&added, "leaf"), (MAX - 1, true));

    // A merge patch adding a second deep field, then a JSON patch and a shallow merge patch
    // on the deep object.
    let merge = format!("{{\"spec\":{{\"b\":{}}}}}", nested(MAX - 2, "other"));
    let patched = send(
        &h,
        Method::PATCH,
        &one,
        "application/merge-patch+json",
        merge,
    )
    .await;
    assert_eq!(
        patched.status,
        StatusCode::OK,
        "{:.300}",
        text(&patched.body)
    );
    let patched = text(&patched.body);
    assert_eq!(levels(&patched, "leaf").0, 2 * MAX - 3);
    assert!(patched.contains("\"other\""));
    // The replacement differs from the value it replaces at its top: comparing two chains
    // that differ only at their far end takes time growing with the square of their depth
    // (`docs/apiserver.md`).
    let json_patch = format!(
        "[{{\"op\":\"replace\",\"path\":\"/spec/b\",\"value\":{{\"c\":{}}}}}]",
        nested(MAX - 3, "third")
    );
    let patched = send(
        &h,
        Method::PATCH,
        &one,
        "application/json-patch+json",
        json_patch,
    )
    .await;
    assert_eq!(
        patched.status,
        StatusCode::OK,
        "{:.300}",
        text(&patched.body)
    );
    assert!(text(&patched.body).contains("\"third\""));
    let labelled = send(
        &h,
        Method::PATCH,
        &one,
        "application/merge-patch+json",
        "{\"metadata\":{\"labels\":{\"deep\":\"yes\"}}}".into(),
    )
    .await;
    assert_eq!(
        labelled.status,
        StatusCode::OK,
        "{:.300}",
        text(&labelled.body)
    );
    assert_eq!(levels(&text(&labelled.body), "leaf").0, 2 * MAX - 4);

    // An update replacing the object with another as deep.
    let updated = send(
        &h,
        Method::PUT,
        &one,
        JSON,
        thing("one", MAX, ",\"labels\":{\"deep\":\"again\"}"),
    )
    .await;
    assert_eq!(
        updated.status,
        StatusCode::OK,
        "{:.300}",
        text(&updated.body)
    );
    let updated = text(&updated.body);
    assert_eq!(levels(&updated, "leaf"), (MAX - 1, true));
    assert!(updated.contains("\"again\""));

    for change in ["MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED"] {
        let ev = watch.next_raw().await.expect("event");
        assert!(
            ev.starts_with(&format!("{{\"type\":\"{change}\"")),
            "{ev:.100}"
        );
    }

    // One level deeper is refused, whichever way it comes.
    let summary = "{\"apiVersion\":\"deep.example.co ...";
    let refused = send(&h, Method::POST, THINGS, JSON, thing("two", MAX + 1, "")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.body, too_deep("Thing", '{', summary));
    let refused = send(&h, Method::PUT, &one, JSON, thing("one", MAX + 1, "")).await;
    assert_eq!(refused.body, too_deep("Thing", '{', summary));
    assert_eq!(h.get(THINGS).await.status, StatusCode::OK);

    let deleted = h.delete(&one, None).await;
    assert_eq!(
        deleted.status,
        StatusCode::OK,
        "{:.300}",
        text(&deleted.body)
    );
    let ev = watch.next_raw().await.expect("DELETED");
    assert!(ev.starts_with("{\"type\":\"DELETED\""), "{ev:.100}");
    assert_eq!(levels(&ev, "leaf"), (MAX - 1, true));
    assert_eq!(h.get(&one).await.status, StatusCode::NOT_FOUND);

    // Deleting the CRD deletes its custom resources, deep ones included.
    let two = send(&h, Method::POST, THINGS, JSON, thing("two", MAX, "")).await;
    assert_eq!(two.status, StatusCode::CREATED, "{:.300}", text(&two.body));
    let crd = format!("{CRDS}/things.deep.example.com");
    assert_eq!(h.delete(&crd, None).await.status, StatusCode::OK);
    let start = Instant::now();
    while h.get(&crd).await.status != StatusCode::NOT_FOUND {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the CRD was never removed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_built_in_kind_decodes_ten_thousand_levels_and_drops_the_unknown_field() {
    let h = Harness::new().await;
    let body = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"deep\"}},\"data\":{{\"k\":\"v\"}},\"extra\":{}}}",
        nested(MAX - 1, "leaf")
    );
    let created = send(
        &h,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        JSON,
        body,
    )
    .await;
    assert_eq!(
        created.status,
        StatusCode::CREATED,
        "{:.300}",
        text(&created.body)
    );
    assert_eq!(created.body["data"], json!({"k": "v"}));
    assert!(created.body.get("extra").is_none());
    assert_eq!(
        created.headers.get("warning").and_then(|v| v.to_str().ok()),
        Some("299 - \"unknown field \\\"extra\\\"\"")
    );
    let refused = send(
        &h,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        JSON,
        format!("{}{}", "[".repeat(MAX + 1), "]".repeat(MAX + 1)),
    )
    .await;
    assert_eq!(
        refused.body,
        too_deep("ConfigMap", '[', &format!("{} ...", "5b".repeat(30)))
    );
}
