//! Property tests (proptest) of the request decoders, the three patch kinds, server-side
//! apply, the label and field selector parsers and the router: nothing panics, every answer is
//! a success or a Kubernetes `Status`, and parsers round-trip what they print.
//!
//! Each property runs `MINIPLANE_FUZZ_CASES` inputs (default 256, so CI stays quick); a long
//! run sets it higher, e.g. `MINIPLANE_FUZZ_CASES=1000000 cargo test -p apiserver --test
//! router fuzz::`.

use crate::common;

use apimachinery::Selector;
use apiserver::FieldSelector;
use apiserver::GroupVersionKind;
use apiserver::{
    PatchError, json_merge_patch, json_patch, server_side_apply, strategic_merge_patch,
};
use axum::body::Body;
use axum::http::Request;
use common::Harness;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Inputs per property (`MINIPLANE_FUZZ_CASES`, default 256).
fn cases() -> u32 {
    std::env::var("MINIPLANE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Small JSON values: scalars, and arrays and objects of them a few levels deep, with keys
/// that collide often and directive-like keys.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        let key = prop_oneof![
            "[a-c]{1,2}",
            Just("$patch".to_string()),
            Just("$retainKeys".to_string()),
            Just("$deleteFromPrimitiveList/a".to_string()),
            Just("$setElementOrder/a".to_string()),
            Just("name".to_string()),
            Just("metadata".to_string()),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A Deployment-shaped object with arbitrary parts, for patches to work on.
fn object() -> impl Strategy<Value = Value> {
    (json_value(), json_value()).prop_map(|(spec, labels)| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "labels": labels},
            "spec": spec})
    })
}

/// JSON-patch operations over paths that often exist.
fn json_patch_doc() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        Just("add"),
        Just("remove"),
        Just("replace"),
        Just("move"),
        Just("copy"),
        Just("test"),
        Just("bogus")
    ];
    let path = prop_oneof![
        Just("/spec".to_string()),
        Just("/metadata/labels".to_string()),
        Just("/metadata/name".to_string()),
        Just("".to_string()),
        Just("/spec/-".to_string()),
        "(/[a-c0-9~-]{0,2}){1,3}",
    ];
    let one = (op, path.clone(), path, json_value()).prop_map(
        |(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}),
    );
    prop_oneof![
        proptest::collection::vec(one, 0..4).prop_map(Value::Array),
        json_value(),
    ]
}

fn deployment() -> GroupVersionKind {
    GroupVersionKind::new("apps", "v1", "Deployment")
}

/// A patch either applies or fails with an error that says why (what becomes the Status).
fn is_patch_error(r: &Result<Value, PatchError>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => !e.to_string().is_empty(),
    }
}

#[test]
fn patches_never_panic() {
    runner()
        .run(&(object(), json_patch_doc()), |(original, doc)| {
            prop_assert!(is_patch_error(&json_patch(&original, &doc)));
            Ok(())
        })
        .expect("json patch");
    runner()
        .run(&(object(), json_value()), |(original, doc)| {
            // RFC 7386: a merge patch applied twice changes nothing more.
            let once = json_merge_patch(&original, &doc);
            prop_assert_eq!(json_merge_patch(&once, &doc), once);
            let smp = strategic_merge_patch(&original, &doc, &deployment());
            prop_assert!(is_patch_error(&smp));
            Ok(())
        })
        .expect("merge and strategic merge patch");
    runner()
        .run(
            &(proptest::option::of(object()), object(), any::<bool>()),
            |(live, applied, force)| {
                let now = jiff::Timestamp::UNIX_EPOCH;
                let r =
                    server_side_apply(live.as_ref(), &applied, &deployment(), "fuzz", force, now);
                prop_assert!(is_patch_error(&r));
                Ok(())
            },
        )
        .expect("server-side apply");
}

/// Selector-ish strings: the characters the grammars care about.
fn selector_text() -> impl Strategy<Value = String> {
    "[a-c/.=!,()<> \\\\0-9in-]{0,16}"
}

#[test]
fn selectors_parse_or_refuse_and_round_trip() {
    runner()
        .run(&selector_text(), |s| {
            if let Ok(sel) = Selector::parse(&s) {
                let printed = sel.to_string();
                let again = Selector::parse(&printed);
                prop_assert!(again.is_ok(), "{s:?} printed as {printed:?} does not parse");
                prop_assert_eq!(again.unwrap_or_default(), sel);
            }
            if let Ok(sel) = FieldSelector::parse(&s) {
                let printed: Vec<String> = sel
                    .requirements
                    .iter()
                    .map(|r| {
                        let v = r
                            .value
                            .replace('\\', "\\\\")
                            .replace(',', "\\,")
                            .replace('=', "\\=");
                        format!("{}{}{v}", r.field, if r.negate { "!=" } else { "==" })
                    })
                    .collect();
                let terms = |reqs: &[apiserver::FieldRequirement]| {
                    let mut t: Vec<(String, String, bool)> = reqs
                        .iter()
                        .map(|r| (r.field.clone(), r.value.clone(), r.negate))
                        .collect();
                    t.sort();
                    t
                };
                let again = FieldSelector::parse(&printed.join(","));
                prop_assert!(again.is_ok(), "{s:?} printed as {printed:?} does not parse");
                let again = again.map(|a| terms(&a.requirements)).unwrap_or_default();
                prop_assert_eq!(again, terms(&sel.requirements));
            }
            Ok(())
        })
        .expect("selectors");
}

fn has_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(a) => a.iter().any(has_float),
        Value::Object(m) => m.values().any(has_float),
        _ => false,
    }
}

#[test]
fn body_decoder_finds_duplicates_and_round_trips() {
    runner()
        .run(&json_value(), |v| {
            let bytes = serde_json::to_vec(&v).unwrap_or_default();
            let decoded = apiserver::from_json_strict(&bytes);
            prop_assert!(decoded.is_ok());
            let (back, dups) = decoded.unwrap_or((Value::Null, vec!["x".into()]));
            // What `serde_json` decodes (its float parsing may differ from the printed value
            // in the last bit, the same for both).
            let plain: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            prop_assert_eq!(&back, &plain);
            if !has_float(&v) {
                prop_assert_eq!(back, v);
            }
            prop_assert!(dups.is_empty());
            Ok(())
        })
        .expect("json round trip");
    runner()
        .run(&proptest::collection::vec(any::<u8>(), 0..64), |bytes| {
            let _ = apiserver::from_json_strict(&bytes);
            let _ = apiserver::decode_json(&bytes, "ConfigMap");
            let _ = apiserver::decode_yaml(&bytes, "ConfigMap");
            Ok(())
        })
        .expect("arbitrary bytes");
}

/// Requests the router gets: a method, a path under a few resources, a query, a content type
/// and a body, any of them malformed.
fn request() -> impl Strategy<Value = (String, String, String, Vec<u8>)> {
    let method = prop_oneof![
        Just("GET"),
        Just("POST"),
        Just("PUT"),
        Just("PATCH"),
        Just("DELETE")
    ];
    let path = prop_oneof![
        Just("/api/v1/namespaces/default/configmaps"),
        Just("/api/v1/namespaces/default/configmaps/cm"),
        Just("/apis/apps/v1/namespaces/default/deployments/web"),
        Just("/api/v1/namespaces/default/pods/p/status"),
    ];
    let query = prop_oneof![
        Just(String::new()),
        selector_text().prop_map(|s| format!(
            "?labelSelector={}",
            form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
        )),
        selector_text().prop_map(|s| format!(
            "?fieldSelector={}",
            form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
        )),
        Just("?fieldValidation=Strict".to_string()),
        Just("?fieldManager=fuzz&force=true".to_string()),
        Just("?dryRun=All".to_string()),
    ];
    let ct = prop_oneof![
        Just("application/json"),
        Just("application/merge-patch+json"),
        Just("application/json-patch+json"),
        Just("application/strategic-merge-patch+json"),
        Just("application/apply-patch+yaml"),
    ];
    let body = prop_oneof![
        json_value().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        json_patch_doc().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        object().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        proptest::collection::vec(any::<u8>(), 0..32),
    ];
    (method, path, query, ct, body)
        .prop_map(|(m, p, q, ct, b)| (m.to_string(), format!("{p}{q}"), ct.to_string(), b))
}

#[test]
fn the_router_answers_every_request_with_success_or_a_status() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let h = rt.block_on(async {
        let h = Harness::new().await;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}});
        h.post("/api/v1/namespaces/default/configmaps", &cm).await;
        h
    });
    runner()
        .run(&request(), |(method, uri, ct, body)| {
            let (code, bytes) = rt.block_on(async {
                let req = Request::builder()
                    .method(method.as_str())
                    .uri(&uri)
                    .header("content-type", &ct)
                    .body(Body::from(body))
                    .expect("request");
                let resp = h.app.clone().oneshot(req).await.expect("infallible");
                let code = resp.status().as_u16();
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap_or_default();
                (code, bytes)
            });
            prop_assert!(
                code != 500,
                "{method} {uri}: 500 {}",
                String::from_utf8_lossy(&bytes)
            );
            if code >= 400 {
                let status: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                prop_assert_eq!(&status["kind"], "Status", "{} {}", method, uri);
                prop_assert_eq!(&status["code"], code);
            }
            Ok(())
        })
        .expect("router");
}
