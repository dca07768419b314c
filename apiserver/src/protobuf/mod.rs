//! Decoding of the Kubernetes protobuf wire format (`application/vnd.kubernetes.protobuf`)
//! into the JSON form the server stores, for every built-in kind it serves.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`
//! (the envelope) and the gogo-generated `Unmarshal` of each API type
//! (`staging/src/k8s.io/api/<group>/<version>/generated.pb.go`):
//!
//! ```text
//!   "k8s\0" ++ runtime.Unknown { 1: TypeMeta { 1: apiVersion, 2: kind },
//!                                2: raw (the object, protobuf), 3: contentEncoding, 4: contentType }
//! ```
//!
//! Typed client-go clients (kubectl's generators, `kubectl debug`) POST and PUT their objects
//! in this form. The field tables in [`schema`] are generated from Kubernetes 1.33's Go API
//! types by `apiserver/tools/protobuf_schema.py` (the same source `go-to-protobuf` makes
//! `generated.proto` from); the walk in [`walk`] turns any message into JSON with them. A kind
//! the server starts to serve is added to the script's list and the tables regenerated.
//!
//! Why tables generated from the Go types rather than a crate of prost types (`k8s-pb`): the
//! JSON form needs what neither prost types nor `generated.proto` carry, namely which fields
//! are Go pointers (a zero `replicas` is kept, a zero `minReadySeconds` dropped as `omitempty`
//! drops it), which are inlined (`Volume.volumeSource`), and the JSON names' case (prost's
//! `host_ip` for `hostIP`); and `k8s-pb`'s ~1,250 prost messages would be compiled into every
//! build of the server. `k8s-pb` with `prost` is the encoder of the round-trip tests.
//!
//! Hand-written, because their protobuf or JSON forms are custom marshallers in Go rather than
//! generated code (so no generated type describes them): the `k8s\0` envelope,
//! `metav1.Time`/`MicroTime` (RFC 3339), `resource.Quantity` (a string), `intstr.IntOrString`
//! (a number or a string), raw JSON (`runtime.RawExtension`, `metav1.FieldsV1`,
//! `apiextensions.JSON`) and apiextensions' schema unions (`marshal.go`).

mod schema;
mod walk;

use serde_json::{Value, json};

/// The 4-byte prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";
/// The protobuf media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The envelope is not valid (no `k8s\0` prefix, a broken `runtime.Unknown`): Kubernetes
    /// knows no kind then (`the object provided is unrecognized ...`).
    #[error("{0}")]
    Malformed(String),
    /// The object of a known apiVersion/kind is not valid (`Pod in version "v1" cannot be
    /// handled as a Pod: ...`).
    #[error("{message}")]
    Object {
        /// The body's kind.
        kind: String,
        /// The version part of the body's apiVersion.
        version: String,
        /// What is wrong, worded as Go's generated code words it.
        message: String,
    },
    /// The apiVersion is not a built-in group/version (custom resources have no protobuf form).
    #[error("protobuf decoding of {0} is not supported; send application/json")]
    Unsupported(String),
}

type Result<T> = std::result::Result<T, ProtobufError>;

/// The scheme Kubernetes names in `no kind "X" is registered` errors.
const SCHEME: &str = "pkg/api/legacyscheme/scheme.go:30";

/// Decodes a `k8s\0`-prefixed protobuf body into the object's JSON form.
pub fn decode(body: &[u8]) -> Result<Value> {
    if body.is_empty() {
        return Err(ProtobufError::Malformed("empty data".into()));
    }
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        ProtobufError::Malformed(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
                .into(),
        )
    })?;
    if rest.is_empty() {
        return Err(ProtobufError::Malformed("empty body".into()));
    }
    let (api_version, kind, raw) = walk::envelope(rest).map_err(ProtobufError::Malformed)?;
    if kind.is_empty() {
        return Err(ProtobufError::Malformed(format!(
            "Object 'Kind' is missing in 'runtime.TypeMeta{{APIVersion:{api_version:?}, Kind:\"\"}}'"
        )));
    }
    let version = api_version
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let object_error = |message: String| ProtobufError::Object {
        kind: kind.clone(),
        version: version.clone(),
        message,
    };
    let served = schema::KINDS.iter().any(|(av, _, _)| *av == api_version);
    let msg = schema::KINDS
        .iter()
        .find(|(av, k, _)| *k == kind && (*av == api_version || (*av == "*" && served)))
        .map(|(_, _, m)| *m);
    let Some(msg) = msg else {
        if served {
            return Err(object_error(format!(
                "no kind {kind:?} is registered for version {api_version:?} in scheme {SCHEME:?}"
            )));
        }
        return Err(ProtobufError::Unsupported(format!(
            "{kind} in version {api_version:?}"
        )));
    };
    let mut obj = walk::message(msg, raw).map_err(object_error)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    // Go writes a new object's (empty) status; it is dropped, as it carries nothing.
    if obj
        .get("status")
        .is_some_and(|s| s.as_object().is_some_and(serde_json::Map::is_empty))
    {
        obj.remove("status");
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod roundtrip_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(num: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(num << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn int(num: u64, v: u64, out: &mut Vec<u8>) {
        varint(num << 3, out);
        varint(v, out);
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        let mut e = Vec::new();
        bytes(1, k.as_bytes(), &mut e);
        bytes(2, v.as_bytes(), &mut e);
        e
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes(1, api_version.as_bytes(), &mut tm);
        bytes(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        bytes(1, &tm, &mut out);
        bytes(2, raw, &mut out);
        bytes(3, b"", &mut out);
        bytes(4, b"", &mut out);
        out
    }

    #[test]
    fn decodes_a_configmap_as_kubectl_sends_it() {
        let mut meta = Vec::new();
        bytes(1, b"cm1", &mut meta);
        bytes(2, b"", &mut meta);
        int(7, 0, &mut meta);
        bytes(8, b"", &mut meta);
        let mut raw = Vec::new();
        bytes(1, &meta, &mut raw);
        bytes(2, &entry("a", "b"), &mut raw);
        bytes(2, &entry("c", "d"), &mut raw);
        let obj = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b", "c": "d"}})
        );
    }

    #[test]
    fn pointer_zeroes_are_kept_and_plain_zeroes_dropped() {
        let mut spec = Vec::new();
        int(1, 0, &mut spec); // replicas: a pointer, set to 0
        int(5, 0, &mut spec); // minReadySeconds: plain
        let mut raw = Vec::new();
        bytes(2, &spec, &mut raw);
        bytes(3, b"", &mut raw);
        let obj = decode(&envelope("apps/v1", "Deployment", &raw)).expect("decodes");
        assert_eq!(obj["spec"], json!({"replicas": 0}));
        assert!(obj.get("status").is_none());
    }

    #[test]
    fn secrets_data_becomes_base64_and_unknown_fields_are_skipped() {
        let mut raw = Vec::new();
        bytes(2, &entry("k", "v"), &mut raw);
        // A field newer than the tables: skipped, as Go's `skipGenerated` skips it.
        bytes(99, b"x", &mut raw);
        let obj = decode(&envelope("v1", "Secret", &raw)).expect("decodes");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}})
        );
    }

    #[test]
    fn malformed_bodies_are_worded_as_kubernetes_words_them() {
        let err = |body: &[u8]| decode(body).expect_err("refused").to_string();
        assert_eq!(err(b""), "empty data");
        assert_eq!(
            err(b"nope"),
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        );
        assert_eq!(err(MAGIC), "empty body");
        assert_eq!(err(&[b'k', b'8', b's', 0, 0x0a, 0xff]), "unexpected EOF");
        // metadata.name (field 1, a string) sent as a varint.
        let mut meta = Vec::new();
        int(1, 5, &mut meta);
        let mut raw = Vec::new();
        bytes(1, &meta, &mut raw);
        assert_eq!(
            decode(&envelope("v1", "Pod", &raw)),
            Err(ProtobufError::Object {
                kind: "Pod".into(),
                version: "v1".into(),
                message: "proto: wrong wireType = 0 for field Name".into(),
            })
        );
        assert_eq!(
            decode(&envelope("apps/v1", "Widget", &[])),
            Err(ProtobufError::Object {
                kind: "Widget".into(),
                version: "v1".into(),
                message: "no kind \"Widget\" is registered for version \"apps/v1\" in scheme \"pkg/api/legacyscheme/scheme.go:30\"".into(),
            })
        );
        // Custom resources have no protobuf form.
        assert!(matches!(
            decode(&envelope("example.com/v1", "Widget", &[])),
            Err(ProtobufError::Unsupported(_))
        ));
    }

    #[test]
    fn deeply_nested_schemas_are_refused_not_recursed_into() {
        // JSONSchemaProps { 24: items { 1: schema { 24: items { ... } } } }, 500 deep.
        let mut props = Vec::new();
        for _ in 0..500 {
            let mut or_array = Vec::new();
            bytes(1, &props, &mut or_array);
            let mut outer = Vec::new();
            bytes(24, &or_array, &mut outer);
            props = outer;
        }
        let mut validation = Vec::new();
        bytes(1, &props, &mut validation);
        let mut version = Vec::new();
        bytes(4, &validation, &mut version);
        let mut spec = Vec::new();
        bytes(7, &version, &mut spec);
        let mut raw = Vec::new();
        bytes(2, &spec, &mut raw);
        let body = envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", &raw);
        match decode(&body) {
            Err(ProtobufError::Object { message, .. }) => {
                assert!(message.contains("nested more than"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_kinds_decode_in_every_served_version() {
        let mut raw = Vec::new();
        int(1, 0, &mut raw); // gracePeriodSeconds: a pointer, 0 kept
        bytes(4, b"Background", &mut raw);
        for api_version in ["v1", "apps/v1", "batch/v1"] {
            let obj = decode(&envelope(api_version, "DeleteOptions", &raw)).expect("decodes");
            assert_eq!(obj["gracePeriodSeconds"], 0, "{obj}");
            assert_eq!(obj["propagationPolicy"], "Background", "{obj}");
        }
    }
}
