//! The web UI's side of the API server through the router: the embedded files at `/ui`, and
//! the two reads the UI's trace view makes beyond plain lists and watches — a trace as the
//! rows of its tree (`?view=tree`, with the revisions its writes produced) and a list at one
//! of those revisions (`resourceVersionMatch=Exact`) for the replay.

use crate::common;

use axum::http::{Method, StatusCode, header};
use common::Harness;
use serde_json::{Value, json};
use trace::{SpanContext, TRACEPARENT_ANNOTATION};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn ui_files_are_served_and_nothing_else() {
    let h = Harness::new().await;
    for path in ["/ui", "/ui/"] {
        let index = h.get(path).await;
        assert_eq!(index.status, StatusCode::OK, "{path}");
        assert_eq!(
            index.headers[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let html = index.body.as_str().expect("HTML text");
        assert!(
            html.contains(r#"<script type="module" src="/ui/app.js">"#),
            "{html}"
        );
    }
    let js = h.get("/ui/app.js").await;
    assert_eq!(js.status, StatusCode::OK);
    assert_eq!(
        js.headers[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    let missing = h.get("/ui/missing.js").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["kind"], "Status");
    assert_eq!(h.get("/ui/a/b").await.status, StatusCode::NOT_FOUND);
    let post = h.raw(Method::POST, "/ui", &[], Vec::new()).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_traces_rows_lead_to_the_objects_as_they_were_at_each_write() {
    let h = Harness::new().await;
    let created = h
        .post(CMS, &json!({"metadata": {"name": "a"}, "data": {"k": "1"}}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let ctx = SpanContext::parse(
        created.body["metadata"]["annotations"][TRACEPARENT_ANNOTATION]
            .as_str()
            .expect("annotated"),
    )
    .expect("a traceparent");
    // A second write in the same trace (as a controller's would be).
    let body = serde_json::to_vec(&json!({"data": {"k": "2"}})).unwrap();
    let patched = h
        .raw(
            Method::PATCH,
            &format!("{CMS}/a"),
            &[
                ("content-type", "application/merge-patch+json"),
                ("traceparent", &ctx.traceparent()),
            ],
            body,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK);

    let view = h
        .get(&format!("/miniplane/v1/traces/{}?view=tree", ctx.trace_id))
        .await;
    assert_eq!(view.status, StatusCode::OK, "{}", view.body);
    let rows: Vec<(u64, &str)> = view.body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["depth"].as_u64().unwrap(),
                r["span"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [(0, "create configmaps"), (1, "patch configmaps")]);
    let revisions: Vec<String> = view.body["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["revision"].to_string())
        .collect();
    let rv = |r: &Value| {
        r["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(revisions, [rv(&created.body), rv(&patched.body)]);

    // The replay's list at the first write's revision shows the object as it was then.
    let then = h
        .get(&format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            revisions[0]
        ))
        .await;
    assert_eq!(then.status, StatusCode::OK, "{}", then.body);
    assert_eq!(then.body["items"][0]["data"]["k"], "1");
    assert_eq!(then.body["metadata"]["resourceVersion"], revisions[0]);
}
