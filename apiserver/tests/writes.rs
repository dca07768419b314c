//! Writes through the router: field validation, defaulting and validation errors, server-owned
//! metadata, optimistic concurrency and patch options.

use crate::common;

use axum::http::{Method, StatusCode};
use common::Harness;
use common::widgets::*;
use serde_json::json;

#[tokio::test]
async fn field_validation_strict_warn_ignore() {
    let h = with_widgets().await;
    let mut w = widget("fv", "red", json!({}));
    w["spec"]["foo"] = json!(1);
    let strict = h
        .post(&format!("{WIDGETS}?fieldValidation=Strict"), &w)
        .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.foo\""
    );
    let warn = h.post(&format!("{WIDGETS}?fieldValidation=Warn"), &w).await;
    assert_eq!(warn.status, StatusCode::CREATED);
    assert_eq!(
        warn.headers["warning"],
        "299 - \"unknown field \\\"spec.foo\\\"\""
    );
    assert!(warn.body["spec"].get("foo").is_none());
    w["metadata"]["name"] = json!("fv2");
    let ignore = h
        .post(&format!("{WIDGETS}?fieldValidation=Ignore"), &w)
        .await;
    assert_eq!(ignore.status, StatusCode::CREATED);
    assert!(ignore.headers.get("warning").is_none());
    // `ValidateCreateOptions`: a 422 on the CreateOptions.
    let bogus = h
        .post(&format!("{WIDGETS}?fieldValidation=Bogus"), &w)
        .await;
    assert_eq!(bogus.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        bogus.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
}

#[tokio::test]
async fn defaulting_and_validation_errors_are_statuses() {
    let h = with_widgets().await;
    let mut bad_type = widget("t", "red", json!({}));
    bad_type["spec"]["size"] = json!("big");
    let r = h.post(WIDGETS, &bad_type).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["message"].as_str().is_some_and(|m| m.starts_with(
        "Widget in version \"v1\" cannot be handled as a Widget: json: cannot unmarshal"
    )));
    let mut neg = widget("n", "red", json!({}));
    neg["spec"]["size"] = json!(-1);
    let inv = h.post(WIDGETS, &neg).await;
    assert_eq!(inv.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        inv.body["message"],
        "Widget.example.com \"n\" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        inv.body["details"],
        json!({"name": "n", "group": "example.com", "kind": "Widget",
        "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.size"}]})
    );
    let other_ns = h
        .post(
            WIDGETS,
            &json!({"metadata": {"name": "x", "namespace": "kube-system"}, "spec": {}}),
        )
        .await;
    assert_eq!(other_ns.status, StatusCode::BAD_REQUEST);
    let wrong_name = h
        .put(&format!("{WIDGETS}/a"), &widget("b", "red", json!({})))
        .await;
    assert_eq!(wrong_name.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn generate_name_and_server_owned_metadata() {
    let h = Harness::new().await;
    let r = h.post(PODS, &json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let name = r.body["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    // uid and creationTimestamp cannot be changed by an update.
    let mut o = r.body.clone();
    o["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    o["metadata"].as_object_mut().map(|m| m.remove("uid"));
    let u = h.put(&format!("{PODS}/{name}"), &o).await;
    assert_eq!(u.status, StatusCode::OK);
    assert_eq!(
        u.body["metadata"]["creationTimestamp"],
        r.body["metadata"]["creationTimestamp"]
    );
    assert_eq!(u.body["metadata"]["uid"], r.body["metadata"]["uid"]);
    o["metadata"]["uid"] = json!("other");
    o["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    assert_eq!(
        h.put(&format!("{PODS}/{name}"), &o).await.status,
        StatusCode::CONFLICT
    );
    // Missing Content-Type means JSON (Python client); unknown query parameters are ignored.
    let body = serde_json::to_vec(&pod("nocontent", json!({}))).expect("json");
    let r = h
        .raw(
            Method::POST,
            &format!("{PODS}?pretty=true&timeout=32s"),
            &[],
            body,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Protobuf Accept gets JSON.
    let proto = h
        .get_as(
            &format!("{PODS}/nocontent"),
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .await;
    assert_eq!(proto.body["metadata"]["name"], "nocontent");
}

#[tokio::test]
async fn concurrent_updates_from_one_version_let_exactly_one_win() {
    let h = with_widgets().await;
    let created = h.post(WIDGETS, &widget("c", "red", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let app = h.app.clone();
        let mut body = created.body.clone();
        body["spec"]["size"] = json!(i + 10);
        tasks.spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::builder()
                .method(Method::PUT)
                .uri(format!("{WIDGETS}/c"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(
                    serde_json::to_vec(&body).expect("json"),
                ))
                .expect("request");
            app.oneshot(req).await.expect("infallible").status()
        });
    }
    let mut ok = 0;
    let mut conflicts = 0;
    while let Some(status) = tasks.join_next().await {
        match status.expect("task") {
            StatusCode::OK => ok += 1,
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, conflicts), (1, 7));
    assert_eq!(
        h.get(&format!("{WIDGETS}/c")).await.body["metadata"]["generation"],
        2
    );
}

#[tokio::test]
async fn patch_options_are_checked_before_patching() {
    let h = with_widgets().await;
    assert_eq!(
        h.post(WIDGETS, &widget("p", "red", json!({}))).await.status,
        StatusCode::CREATED
    );
    let force = h
        .patch(
            &format!("{WIDGETS}/p?force=true"),
            "application/merge-patch+json",
            &json!({}),
        )
        .await;
    assert_eq!(force.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(force.body["details"]["causes"][0]["field"], "force");
    let no_manager = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p"),
            &[("content-type", "application/apply-patch+yaml")],
            b"metadata: {name: p}".to_vec(),
        )
        .await;
    assert_eq!(no_manager.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        no_manager.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let bad_json = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p"),
            &[("content-type", "application/merge-patch+json")],
            b"{".to_vec(),
        )
        .await;
    assert_eq!(bad_json.status, StatusCode::BAD_REQUEST);
    let bad_yaml = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p?fieldManager=m"),
            &[("content-type", "application/apply-patch+yaml")],
            b"a: [".to_vec(),
        )
        .await;
    assert_eq!(bad_yaml.status, StatusCode::BAD_REQUEST);
    let missing_ns = h
        .raw(
            Method::PATCH,
            "/apis/example.com/v1/namespaces/nope/widgets/p?fieldManager=m",
            &[("content-type", "application/apply-patch+yaml")],
            b"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: p}\n".to_vec(),
        )
        .await;
    assert_eq!(missing_ns.status, StatusCode::NOT_FOUND);
    assert_eq!(missing_ns.body["message"], "namespaces \"nope\" not found");
}

/// The `Warning` headers of a response, in order.
fn warnings(r: &common::Resp) -> Vec<String> {
    r.headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn patches_warn_of_every_unknown_field_they_were_sent_with() {
    let h = Harness::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    assert_eq!(h.post(pods, &pod).await.status, StatusCode::CREATED);
    let merge = "application/merge-patch+json";
    let status = format!("{pods}/p/status");
    let unknown = |f: &str| format!("299 - \"unknown field \\\"{f}\\\"\"");
    // A status write whose other parts are the stored ones: the unknown fields are noted
    // while the patched object is decoded for the update.
    let r = h
        .patch(
            &status,
            merge,
            &json!({"status": {"phase": "Running", "bogus": 1}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(warnings(&r), [unknown("status.bogus")]);
    assert_eq!(r.body["status"]["phase"], "Running");
    // A status write that also sends other parts (which it drops): their unknown fields
    // are reported too, as Kubernetes decodes the whole patched object.
    let r = h
        .patch(
            &status,
            merge,
            &json!({"metadata": {"labels": {"a": "b"}, "extra": true},
                    "spec": {"nope": 1}, "status": {"more": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        warnings(&r),
        [
            unknown("metadata.extra"),
            unknown("spec.nope"),
            unknown("status.more")
        ]
    );
    assert!(r.body["metadata"].get("labels").is_none(), "{}", r.body);
    // A main write that sends a status (which it drops) with unknown fields, and one that
    // does not.
    let main = format!("{pods}/p");
    let r = h
        .patch(
            &main,
            merge,
            &json!({"metadata": {"labels": {"a": "b"}}, "status": {"x": 1}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(warnings(&r), [unknown("status.x")]);
    assert_eq!(r.body["metadata"]["labels"]["a"], "b");
    let r = h
        .patch(
            &main,
            merge,
            &json!({"metadata": {"annotations": {"k": "v"}, "y": 1}}),
        )
        .await;
    assert_eq!(warnings(&r), [unknown("metadata.y")]);
    // Without unknown fields, no warning; under Strict, the same patch fails unwritten.
    let r = h
        .patch(&status, merge, &json!({"status": {"phase": "Running"}}))
        .await;
    assert!(warnings(&r).is_empty(), "{:?}", warnings(&r));
    let strict = h
        .patch(
            &format!("{status}?fieldValidation=Strict"),
            merge,
            &json!({"status": {"phase": "Failed", "bogus": 1}}),
        )
        .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"status.bogus\""
    );
    assert_eq!(h.get(&main).await.body["status"]["phase"], "Running");
    let ignored = h
        .patch(
            &format!("{status}?fieldValidation=Ignore"),
            merge,
            &json!({"status": {"bogus": 1}}),
        )
        .await;
    assert_eq!(ignored.status, StatusCode::OK);
    assert!(warnings(&ignored).is_empty());
}

#[tokio::test]
async fn a_patch_keeps_the_stored_managed_fields_and_refuses_malformed_ones() {
    let h = Harness::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"metadata": {"name": "m"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let created = h.post(&format!("{pods}?fieldManager=creator"), &pod).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let merge = "application/merge-patch+json";
    let status = h
        .patch(
            &format!("{pods}/m/status?fieldManager=node"),
            merge,
            &json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(status.status, StatusCode::OK, "{:?}", status.body);
    let entries = status.body["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .clone();
    let managers: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["creator", "node"]);
    assert_eq!(
        entries[0], created.body["metadata"]["managedFields"][0],
        "the creator's entry is kept as stored"
    );
    assert_eq!(entries[1]["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
    let malformed = h
        .patch(
            &format!("{pods}/m"),
            merge,
            &json!({"metadata": {"managedFields": "x"}}),
        )
        .await;
    // A patched object that does not decode is the patch's fault: 422 on `patch`
    // (`jsonPatcher.applyPatchToCurrentObject`).
    assert_eq!(
        malformed.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        malformed.body
    );
    assert_eq!(malformed.body["details"]["causes"][0]["field"], "patch");
    let after = h.get(&format!("{pods}/m")).await;
    assert_eq!(after.body["metadata"]["managedFields"], json!(entries));
}

/// A protobuf body (`k8s\0` + `runtime.Unknown`) as client-go's typed clients send it.
fn protobuf_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: None,
        content_type: None,
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(prost::Message::encode_to_vec(&unknown));
    out
}

#[tokio::test]
async fn protobuf_bodies_create_delete_and_are_refused_as_kubernetes_words_it() {
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
    let h = Harness::new().await;
    let pod = core::Pod {
        metadata: Some(meta::ObjectMeta {
            name: Some("pb".into()),
            ..Default::default()
        }),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("c".into()),
                image: Some("nginx".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let ct = [("content-type", PROTOBUF)];
    let r = h
        .raw(
            Method::POST,
            PODS,
            &ct,
            protobuf_body("v1", "Pod", pod.encode_to_vec()),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["spec"]["containers"][0]["image"], "nginx");

    // DeleteOptions in protobuf: a dry run leaves the pod.
    let opts = meta::DeleteOptions {
        dry_run: vec!["All".into()],
        ..Default::default()
    };
    let body = protobuf_body("v1", "DeleteOptions", opts.encode_to_vec());
    let r = h
        .raw(Method::DELETE, &format!("{PODS}/pb"), &ct, body)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(h.get(&format!("{PODS}/pb")).await.status, StatusCode::OK);

    // metadata.name (field 1, a string) sent as a varint: 400 from the decoder.
    let body = protobuf_body("v1", "Pod", vec![0x0a, 0x02, 0x08, 0x05]);
    let r = h.raw(Method::POST, PODS, &ct, body).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["reason"], "BadRequest");
    assert_eq!(
        r.body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: proto: wrong wireType = 0 for field Name"
    );
}
