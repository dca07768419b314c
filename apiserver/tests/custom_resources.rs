//! CustomResourceDefinitions through the router: a CRD becomes served (discovery, OpenAPI),
//! its custom resources get Kubernetes' 422 Status with one cause per schema violation,
//! strategic merge patch is refused with 415, and deleting the CRD stops serving it.

use crate::common;

use axum::http::StatusCode;
use common::Harness;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/demo.example.com/v1/namespaces/default/widgets";

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.demo.example.com"},
        "spec": {
            "group": "demo.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    })
}

/// Polls `uri` until it answers `code`.
async fn wait_for(h: &Harness, uri: &str, code: StatusCode) {
    let start = Instant::now();
    loop {
        if h.get(uri).await.status == code {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{uri} never answered {code}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_crd_is_served_validated_and_removed() {
    let h = Harness::new().await;
    let created = h.post(CRDS, &crd()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    wait_for(&h, "/apis/demo.example.com/v1", StatusCode::OK).await;

    let disco = h
        .get_as(
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )
        .await;
    let group = disco.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "demo.example.com")
        .cloned()
        .unwrap();
    let res = &group["versions"][0]["resources"][0];
    assert_eq!(res["resource"], "widgets");
    assert_eq!(res["scope"], "Namespaced");
    assert_eq!(res["shortNames"], json!(["wd"]));
    assert_eq!(res["categories"], json!(["all"]));
    assert_eq!(res["subresources"][0]["subresource"], "status");
    let openapi = h.get("/openapi/v3/apis/demo.example.com/v1").await;
    let schema = &openapi.body["components"]["schemas"]["com.example.demo.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["required"], json!(["size"]));

    let bad = h
        .post(
            WIDGETS,
            &json!({"apiVersion": "demo.example.com/v1", "kind": "Widget",
                    "metadata": {"name": "bad"}, "spec": {"color": "pink", "extra": 1}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.body["reason"], "Invalid");
    assert_eq!(
        bad.body["message"],
        "Widget.demo.example.com \"bad\" is invalid: [spec.size: Required value, spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"]"
    );
    assert_eq!(
        bad.body["details"]["causes"],
        json!([
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"},
            {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"pink\": supported values: \"red\", \"blue\"", "field": "spec.color"}
        ])
    );
    let too_big = h
        .post(
            WIDGETS,
            &json!({"apiVersion": "demo.example.com/v1", "kind": "Widget",
                    "metadata": {"name": "big"}, "spec": {"size": 11}}),
        )
        .await;
    assert_eq!(
        too_big.body["details"]["causes"][0]["message"],
        "Invalid value: 11: spec.size in body should be less than or equal to 10"
    );

    let ok = h
        .post(
            WIDGETS,
            &json!({"apiVersion": "demo.example.com/v1", "kind": "Widget",
                    "metadata": {"name": "w"}, "spec": {"size": 3, "extra": 1},
                    "status": {"ignored": true}}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{:?}", ok.body);
    assert_eq!(ok.body["spec"], json!({"size": 3, "color": "red"}));
    assert!(ok.body.get("status").is_none(), "{:?}", ok.body);
    assert_eq!(
        ok.headers.get("warning").and_then(|v| v.to_str().ok()),
        Some("299 - \"unknown field \\\"spec.extra\\\"\"")
    );
    let smp = h
        .patch(
            &format!("{WIDGETS}/w"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"size": 4}}),
        )
        .await;
    assert_eq!(smp.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let deleted = h
        .delete(&format!("{CRDS}/widgets.demo.example.com"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{:?}", deleted.body);
    wait_for(
        &h,
        &format!("{CRDS}/widgets.demo.example.com"),
        StatusCode::NOT_FOUND,
    )
    .await;
    wait_for(&h, "/apis/demo.example.com/v1", StatusCode::NOT_FOUND).await;
    assert_eq!(h.get(WIDGETS).await.status, StatusCode::NOT_FOUND);
}
