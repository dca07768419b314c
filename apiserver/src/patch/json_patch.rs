//! JSON patch, RFC 6902 (`application/json-patch+json`), applied with the `json-patch` crate.
//! Kubernetes applies it with `gopkg.in/evanphx/json-patch.v4` (see
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`, `jsonPatcher`); this module
//! is the thin layer that makes the crate answer as that library does:
//!
//! ```text
//! [{"op":"replace","path":"/spec/replicas","value":5},
//!  {"op":"add","path":"/metadata/labels/tier","value":"web"},
//!  {"op":"test","path":"/metadata/name","value":"nginx"}]
//! ```
//!
//! - Decoding: a body that is not a list of objects is a [`PatchError::BadRequest`] with Go's
//!   `json: cannot unmarshal ...` text. An operation's own members are read as evanphx reads
//!   them when it reaches the operation: an unknown `op` is `Unexpected kind: ...`, a missing
//!   `path`/`from`/`value` is `<op> operation failed to decode <member>` (HTTP 422), where the
//!   crate's serde derive would fail the whole body with its own words.
//! - Errors: operations apply one at a time to a copy of the document, so a failure names the
//!   operation, and the crate's error kind is given evanphx's words (`doc is missing path`,
//!   `testing value ... failed`); the first failure aborts the whole patch.
//! - `test` of a missing member against `null` passes, as in evanphx (RFC 6902 fails it).
//!   Values compare as the crate compares them (`serde_json::Value` equality), which, like
//!   evanphx's byte comparison of scalars, tells `1` from `1.0`.

use ::json_patch::{PatchErrorKind, PatchOperation};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::PatchError;

/// Applies the operations in `patch` to a copy of `doc`.
pub fn apply(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    // evanphx decodes the whole list before applying anything.
    let ops = ops
        .iter()
        .map(|op| match op {
            Value::Object(op) => Ok(op),
            _ => Err(PatchError::BadRequest(
                "json: cannot unmarshal non-object into Go value of type jsonpatch.Operation"
                    .into(),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut doc = doc.clone();
    for op in ops {
        let op = decode(op)?;
        if let PatchOperation::Test(test) = &op
            && test.value.is_null()
            && doc.pointer(test.path.as_str()).is_none()
        {
            // A missing member tests equal to null, as in evanphx/json-patch.
            continue;
        }
        ::json_patch::patch_unsafe(&mut doc, std::slice::from_ref(&op))
            .map_err(|e| failure(&op, e.kind))?;
    }
    Ok(doc)
}

/// One operation, with evanphx's messages for what is missing or unknown.
fn decode(op: &Map<String, Value>) -> Result<PatchOperation, PatchError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    let members: &[&str] = match kind {
        "add" | "replace" | "test" => &["path", "value"],
        "remove" => &["path"],
        "move" | "copy" => &["from", "path"],
        other => return Err(PatchError::Invalid(format!("Unexpected kind: {other}"))),
    };
    for member in members {
        let present = match op.get(*member) {
            Some(Value::String(_)) => true,
            Some(_) => *member == "value",
            None => false,
        };
        if !present {
            return Err(PatchError::Invalid(format!(
                "{kind} operation failed to decode {member}"
            )));
        }
    }
    PatchOperation::deserialize(&Value::Object(op.clone())).map_err(|_| {
        // The members are there, so what failed is a pointer that does not start with `/`:
        // evanphx finds nothing at such a path.
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        missing(&format!(
            "{kind} operation does not apply: doc is missing path: {path:?}"
        ))
    })
}

/// evanphx's words for the crate's failure of `op`.
fn failure(op: &PatchOperation, kind: PatchErrorKind) -> PatchError {
    let path = op.path();
    let missing_path = |name: &str| {
        missing(&format!(
            "{name} operation does not apply: doc is missing path: {:?}",
            path.as_str()
        ))
    };
    match (op, kind) {
        (PatchOperation::Test(_), _) => {
            PatchError::Invalid(format!("testing value {path} failed: test failed"))
        }
        (PatchOperation::Replace(_), _) => missing(&format!(
            "replace operation does not apply: doc is missing key: {path}"
        )),
        (PatchOperation::Move(m), PatchErrorKind::CannotMoveInsideItself) => {
            PatchError::Invalid(format!(
                "move operation does not apply: cannot move {} into its own child {path}",
                m.from
            ))
        }
        (PatchOperation::Move(m), PatchErrorKind::InvalidFromPointer) => missing(&format!(
            "move operation does not apply: doc is missing from path: {}",
            m.from
        )),
        (PatchOperation::Copy(c), PatchErrorKind::InvalidFromPointer) => missing(&format!(
            "copy operation does not apply: doc is missing from path: {}",
            c.from
        )),
        (PatchOperation::Add(_), _) => missing_path("add"),
        (PatchOperation::Remove(_), _) => missing_path("remove"),
        (PatchOperation::Move(_), _) => missing_path("move"),
        (PatchOperation::Copy(_), _) => missing_path("copy"),
    }
}

fn missing(context: &str) -> PatchError {
    PatchError::Invalid(format!("{context}: missing value"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(doc: Value, patch: Value) -> Value {
        apply(&doc, &patch).expect("patch applies")
    }

    /// The examples of RFC 6902 appendix A.
    #[test]
    fn rfc6902_appendix_a() {
        assert_eq!(
            ok(
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux"}])
            ),
            json!({"baz":"qux","foo":"bar"})
        );
        assert_eq!(
            ok(
                json!({"foo":["bar","baz"]}),
                json!([{"op":"add","path":"/foo/1","value":"qux"}])
            ),
            json!({"foo":["bar","qux","baz"]})
        );
        assert_eq!(
            ok(
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"remove","path":"/baz"}])
            ),
            json!({"foo":"bar"})
        );
        assert_eq!(
            ok(
                json!({"foo":["bar","qux","baz"]}),
                json!([{"op":"remove","path":"/foo/1"}])
            ),
            json!({"foo":["bar","baz"]})
        );
        assert_eq!(
            ok(
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"replace","path":"/baz","value":"boo"}])
            ),
            json!({"baz":"boo","foo":"bar"})
        );
        assert_eq!(
            ok(
                json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
                json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])
            ),
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})
        );
        assert_eq!(
            ok(
                json!({"foo":["all","grass","cows","eat"]}),
                json!([{"op":"move","from":"/foo/1","path":"/foo/3"}])
            ),
            json!({"foo":["all","cows","eat","grass"]})
        );
        assert_eq!(
            ok(
                json!({"baz":"qux","foo":["a",2,"c"]}),
                json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}])
            ),
            json!({"baz":"qux","foo":["a",2,"c"]})
        );
        assert_eq!(
            ok(
                json!({"foo":["bar"]}),
                json!([{"op":"add","path":"/foo/-","value":["abc","def"]}])
            ),
            json!({"foo":["bar",["abc","def"]]})
        );
        assert_eq!(
            ok(
                json!({"/":9,"~1":10}),
                json!([{"op":"test","path":"/~01","value":10}])
            ),
            json!({"/":9,"~1":10})
        );
        assert_eq!(
            ok(
                json!({"foo":"bar"}),
                json!([{"op":"copy","from":"/foo","path":"/baz"}])
            ),
            json!({"foo":"bar","baz":"bar"})
        );
    }

    #[test]
    fn failures_are_invalid_with_kubernetes_wording() {
        let err = apply(
            &json!({"baz":"qux"}),
            &json!([{"op":"test","path":"/baz","value":"bar"}]),
        );
        assert_eq!(
            err,
            Err(PatchError::Invalid(
                "testing value /baz failed: test failed".into()
            ))
        );
        let err = apply(
            &json!({"foo":"bar"}),
            &json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        );
        assert_eq!(
            err,
            Err(PatchError::Invalid(
                "add operation does not apply: doc is missing path: \"/baz/bat\": missing value"
                    .into()
            ))
        );
        let err = apply(&json!({}), &json!([{"op":"remove","path":"/a"}]));
        assert!(matches!(err, Err(PatchError::Invalid(m)) if m.contains("missing path")));
        let err = apply(&json!({}), &json!([{"op":"frobnicate","path":"/a"}]));
        assert_eq!(
            err,
            Err(PatchError::Invalid("Unexpected kind: frobnicate".into()))
        );
    }

    #[test]
    fn evanphx_semantics_where_rfc6902_differs() {
        // A missing member tests equal to null.
        assert_eq!(
            ok(
                json!({"a":1}),
                json!([{"op":"test","path":"/b","value":null}])
            ),
            json!({"a":1})
        );
        // Scalars compare as written: 1 is not 1.0.
        assert_eq!(
            apply(
                &json!({"a":1}),
                &json!([{"op":"test","path":"/a","value":1.0}])
            ),
            Err(PatchError::Invalid(
                "testing value /a failed: test failed".into()
            ))
        );
        // The whole list is decoded before any operation applies.
        assert!(matches!(
            apply(&json!({}), &json!([{"op":"test","path":"/a","value":1},2])),
            Err(PatchError::BadRequest(_))
        ));
    }

    #[test]
    fn each_failure_in_evanphx_words() {
        let cases = [
            (
                json!({"op":"replace","path":"/x","value":1}),
                "replace operation does not apply: doc is missing key: /x: missing value",
            ),
            (
                json!({"op":"remove","path":"/x"}),
                "remove operation does not apply: doc is missing path: \"/x\": missing value",
            ),
            (
                json!({"op":"move","from":"/a","path":"/a/b"}),
                "move operation does not apply: cannot move /a into its own child /a/b",
            ),
            (
                json!({"op":"move","from":"/x","path":"/y"}),
                "move operation does not apply: doc is missing from path: /x: missing value",
            ),
            (
                json!({"op":"copy","from":"/x","path":"/y"}),
                "copy operation does not apply: doc is missing from path: /x: missing value",
            ),
            (
                json!({"op":"copy","from":"/a","path":"/x/y"}),
                "copy operation does not apply: doc is missing path: \"/x/y\": missing value",
            ),
            (
                json!({"op":"add","path":"/l/5","value":1}),
                "add operation does not apply: doc is missing path: \"/l/5\": missing value",
            ),
            (
                json!({"op":"add","path":"a","value":1}),
                "add operation does not apply: doc is missing path: \"a\": missing value",
            ),
            (
                json!({"op":"add","path":"/a"}),
                "add operation failed to decode value",
            ),
            (
                json!({"op":"copy","path":"/a"}),
                "copy operation failed to decode from",
            ),
            (json!({"path":"/a"}), "Unexpected kind: unknown"),
        ];
        for (op, want) in cases {
            assert_eq!(
                apply(&json!({"a":{"b":1},"l":[]}), &json!([op])),
                Err(PatchError::Invalid(want.into())),
                "{op}"
            );
        }
    }

    #[test]
    fn malformed_documents_are_bad_requests() {
        assert!(matches!(
            apply(&json!({}), &json!({"op":"add"})),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            apply(&json!({}), &json!([1])),
            Err(PatchError::BadRequest(_))
        ));
    }

    #[test]
    fn rollout_undo_body_replaces_template() {
        let doc = json!({"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.16.1"}]}}}});
        let patch = json!([{"op":"replace","path":"/spec/template","value":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.14.2"}]}}}]);
        assert_eq!(
            ok(doc, patch)["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.14.2"
        );
    }
}
