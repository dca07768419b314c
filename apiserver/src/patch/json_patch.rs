//! JSON patch, RFC 6902 (`application/json-patch+json`), with JSON pointers (RFC 6901).
//! Kubernetes applies it with `gopkg.in/evanphx/json-patch.v4` (see
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`, `jsonPatcher`); the error
//! texts below follow that library's so clients see the same messages.
//!
//! ```text
//! [{"op":"replace","path":"/spec/replicas","value":5},
//!  {"op":"add","path":"/metadata/labels/tier","value":"web"},
//!  {"op":"test","path":"/metadata/name","value":"nginx"}]
//! ```
//!
//! Operations apply in order to a copy of the document; the first failure aborts the whole
//! patch. A body that is not a list of operation objects is a [`PatchError::BadRequest`]; an
//! operation that cannot apply (a failed `test`, a missing path) is a [`PatchError::Invalid`]
//! (HTTP 422 in Kubernetes).

use super::PatchError;
use serde_json::{Map, Value};

/// Applies the operations in `patch` to a copy of `doc`.
pub fn apply(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    let mut doc = doc.clone();
    for op in ops {
        let Value::Object(op) = op else {
            return Err(PatchError::BadRequest(
                "json: cannot unmarshal non-object into Go value of type jsonpatch.Operation"
                    .into(),
            ));
        };
        apply_op(&mut doc, op)?;
    }
    Ok(doc)
}

fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), PatchError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    let path = string_member(op, "path", kind)?;
    match kind {
        "add" => add(doc, &path, value_member(op, kind)?.clone(), kind),
        "remove" => remove(doc, &path).map(drop).ok_or_else(|| {
            missing(&format!(
                "remove operation does not apply: doc is missing path: {path:?}"
            ))
        }),
        "replace" => {
            let slot = get_mut(doc, &path).ok_or_else(|| {
                missing(&format!(
                    "replace operation does not apply: doc is missing key: {path}"
                ))
            })?;
            *slot = value_member(op, kind)?.clone();
            Ok(())
        }
        "move" => {
            let from = string_member(op, "from", kind)?;
            if path.starts_with(&format!("{from}/")) {
                return Err(PatchError::Invalid(format!(
                    "move operation does not apply: cannot move {from} into its own child {path}"
                )));
            }
            let value = remove(doc, &from).ok_or_else(|| {
                missing(&format!(
                    "move operation does not apply: doc is missing from path: {from}"
                ))
            })?;
            add(doc, &path, value, kind)
        }
        "copy" => {
            let from = string_member(op, "from", kind)?;
            let value = get(doc, &from).cloned().ok_or_else(|| {
                missing(&format!(
                    "copy operation does not apply: doc is missing from path: {from}"
                ))
            })?;
            add(doc, &path, value, kind)
        }
        "test" => {
            let want = value_member(op, kind)?;
            match get(doc, &path) {
                Some(have) if json_equal(have, want) => Ok(()),
                // A missing member tests equal to null, as in evanphx/json-patch.
                None if want.is_null() => Ok(()),
                _ => Err(PatchError::Invalid(format!(
                    "testing value {path} failed: test failed"
                ))),
            }
        }
        other => Err(PatchError::Invalid(format!("Unexpected kind: {other}"))),
    }
}

fn missing(context: &str) -> PatchError {
    PatchError::Invalid(format!("{context}: missing value"))
}

fn string_member(op: &Map<String, Value>, name: &str, kind: &str) -> Result<String, PatchError> {
    op.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| PatchError::Invalid(format!("{kind} operation failed to decode {name}")))
}

fn value_member<'a>(op: &'a Map<String, Value>, kind: &str) -> Result<&'a Value, PatchError> {
    op.get("value")
        .ok_or_else(|| PatchError::Invalid(format!("{kind} operation failed to decode value")))
}

/// Splits a JSON pointer into unescaped reference tokens (`~1` is `/`, `~0` is `~`).
/// `""` is the whole document; anything else must start with `/`.
pub fn parse_pointer(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    parse_pointer(pointer)?
        .iter()
        .try_fold(doc, |node, token| match node {
            Value::Object(map) => map.get(token),
            Value::Array(list) => list.get(array_index(token)?),
            _ => None,
        })
}

fn get_mut<'a>(doc: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    parse_pointer(pointer)?
        .iter()
        .try_fold(doc, |node, token| match node {
            Value::Object(map) => map.get_mut(token),
            Value::Array(list) => list.get_mut(array_index(token)?),
            _ => None,
        })
}

/// An array index token: digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    if valid { token.parse().ok() } else { None }
}

/// Splits a pointer into its parent pointer and last token; None for the root.
fn split_last(pointer: &str) -> Option<(String, String)> {
    let mut tokens = parse_pointer(pointer)?;
    let last = tokens.pop()?;
    let parent = tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect();
    Some((parent, last))
}

fn add(doc: &mut Value, pointer: &str, value: Value, kind: &str) -> Result<(), PatchError> {
    let not_found = || {
        missing(&format!(
            "{kind} operation does not apply: doc is missing path: {pointer:?}"
        ))
    };
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split_last(pointer).ok_or_else(not_found)?;
    match get_mut(doc, &parent).ok_or_else(not_found)? {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(list) => {
            let index = if last == "-" {
                list.len()
            } else {
                array_index(&last)
                    .filter(|i| *i <= list.len())
                    .ok_or_else(not_found)?
            };
            list.insert(index, value);
            Ok(())
        }
        _ => Err(not_found()),
    }
}

fn remove(doc: &mut Value, pointer: &str) -> Option<Value> {
    let (parent, last) = split_last(pointer)?;
    match get_mut(doc, &parent)? {
        Value::Object(map) => map.remove(&last),
        Value::Array(list) => {
            let index = array_index(&last).filter(|i| *i < list.len())?;
            Some(list.remove(index))
        }
        _ => None,
    }
}

/// Equality as RFC 6902 `test` defines it: numbers compare by value (`1` equals `1.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
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
