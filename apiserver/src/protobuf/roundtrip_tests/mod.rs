//! Round trips of every built-in kind the server reads: an object built with `k8s-pb`'s prost
//! types (the field numbers of Kubernetes' `generated.proto`), encoded with `prost` in the
//! `k8s\0` envelope as client-go sends it, decoded by [`super::decode`] and compared with the
//! object's JSON form. Each expected JSON is first read into the kind's `k8s-openapi` type and
//! written back unchanged, which proves every key in it is a field of the kind.
//!
//! Like Go's marshallers, the objects set some non-pointer fields to zero (`generation: 0`,
//! `stdin: false`): those must come out dropped, as `omitempty` drops them, while zeros of
//! pointer fields (`replicas: 0`, `runAsUser: 0`) must stay.

mod autoscaling;
mod certificates;
mod core_kinds;
mod fixtures;
mod rbac;
mod workloads;

use super::{MAGIC, decode};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(super) fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

pub(super) fn map(v: &[(&str, &str)]) -> BTreeMap<String, String> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn q(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

pub(super) fn int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: Some(String::new()),
    })
}

pub(super) fn named(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(v),
    })
}

/// 2024-05-06T07:08:09Z.
pub(super) const T: i64 = 1_714_979_289;

pub(super) fn time() -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(T),
        nanos: Some(0),
    })
}

pub(super) fn micro_time() -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(T),
        nanos: Some(123_456_789),
    })
}

/// The `k8s\0` envelope around an object, as client-go's protobuf serializer writes it.
fn envelope(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// Removes `apiVersion`/`kind` from objects embedded in others (a StatefulSet's
/// `volumeClaimTemplates`): `k8s-openapi` always writes them, Go's JSON omits them when empty.
fn drop_embedded_type_meta(v: &mut Value, top: bool) {
    match v {
        Value::Object(m) => {
            if !top && m.contains_key("metadata") {
                m.remove("apiVersion");
                m.remove("kind");
            }
            m.values_mut()
                .for_each(|c| drop_embedded_type_meta(c, false));
        }
        Value::Array(a) => a.iter_mut().for_each(|c| drop_embedded_type_meta(c, false)),
        _ => {}
    }
}

/// Checks that `expected` is a `K` and that the protobuf object decodes to it.
pub(super) fn round_trip<K>(object: &impl Message, mut expected: Value)
where
    K: k8s_openapi::Resource + serde::de::DeserializeOwned + serde::Serialize,
{
    expected["apiVersion"] = json!(K::API_VERSION);
    expected["kind"] = json!(K::KIND);
    let typed: K = serde_json::from_value(expected.clone()).expect("the expected JSON is a K");
    let mut rewritten = serde_json::to_value(&typed).expect("serializes");
    drop_embedded_type_meta(&mut rewritten, true);
    assert_eq!(
        rewritten,
        expected,
        "the expected {} has a key k8s-openapi does not know",
        K::KIND
    );
    let got = decode(&envelope(K::API_VERSION, K::KIND, object)).expect("decodes");
    assert_eq!(got, expected, "{}", K::KIND);
}
