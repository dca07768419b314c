//! The order of members in what the server writes: objects, lists (and their items) and watch
//! events start `kind`, `apiVersion`, `metadata` and end with `status`, as kube-apiserver's
//! Go types write them, and each document ends with `json.Encoder`'s newline.

use crate::common;

use axum::body::Body;
use axum::http::{Method, Request};
use common::Harness;
use serde_json::json;
use tower::ServiceExt;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

async fn text(h: &Harness, method: Method, uri: &str, body: Option<&serde_json::Value>) -> String {
    let mut req = Request::builder().method(method).uri(uri);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let body = body.map_or_else(Vec::new, |b| serde_json::to_vec(b).expect("json"));
    let resp = h
        .app
        .clone()
        .oneshot(req.body(Body::from(body)).expect("request"))
        .await
        .expect("infallible");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn objects_lists_and_events_lead_with_kind_api_version_metadata() {
    let h = Harness::new().await;
    let mut watch = h.watch(&format!("{DEPLOYS}?watch=1"), None).await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let created = text(&h, Method::POST, DEPLOYS, Some(&deploy)).await;
    let object_start = "{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{";
    assert!(created.starts_with(object_start), "{created}");
    assert!(created.ends_with("}\n"), "{created}");
    let spec_at = created.find(",\"spec\":").expect("spec");
    let status_at = created.find(",\"status\":").expect("status");
    assert!(spec_at < status_at, "{created}");

    let got = text(&h, Method::GET, &format!("{DEPLOYS}/web"), None).await;
    assert!(got.starts_with(object_start), "{got}");
    assert!(got.ends_with("}\n"), "{got}");

    let list = text(&h, Method::GET, DEPLOYS, None).await;
    assert!(
        list.starts_with("{\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"resourceVersion\":"),
        "{list}"
    );
    assert!(
        list.contains(&format!(",\"items\":[{object_start}")),
        "{list}"
    );
    assert!(list.ends_with("]}\n"), "{list}");

    let patched = h
        .patch(
            &format!("{DEPLOYS}/web"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": 3}}),
        )
        .await;
    assert_eq!(patched.status.as_u16(), 200);
    assert!(watch.next_change().await.is_some(), "ADDED");
    // The raw line of the MODIFIED event.
    let line = watch.next_raw().await.expect("MODIFIED");
    assert!(
        line.starts_with(&format!(
            "{{\"type\":\"MODIFIED\",\"object\":{object_start}"
        )),
        "{line}"
    );
}
