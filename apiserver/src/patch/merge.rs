//! JSON merge patch, RFC 7386 (`application/merge-patch+json`), as Kubernetes applies it with
//! `github.com/evanphx/json-patch`'s `MergePatch` (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`,
//! `jsonPatcher.applyJSPatch`).
//!
//! ```text
//! target {"a":"b","c":{"d":"e","f":"g"}}  +  patch {"a":"z","c":{"f":null}}
//!   ──►  {"a":"z","c":{"d":"e"}}
//! ```
//!
//! Objects merge recursively, `null` deletes a member, anything else (arrays included) replaces.

use serde_json::{Map, Value};

/// `target` merged with `patch` (what [`merge_patch`] makes of a copy of `target`), built
/// without copying what the patch replaces or removes. The member at the path `omit` (e.g.
/// `["metadata", "managedFields"]`) is left out of the result unless the patch sets it.
pub fn merged(target: &Value, patch: &Value, omit: &[&str]) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut out = Map::new();
    if let Value::Object(t) = target {
        for (key, value) in t {
            let rest = match omit.split_first() {
                Some((first, rest)) if first == key => Some(rest),
                _ => None,
            };
            match (p.get(key), rest) {
                (None, Some([])) => {}
                (None, Some(rest)) => {
                    out.insert(key.clone(), copy_omitting(value, rest));
                }
                (None, None) => {
                    out.insert(key.clone(), value.clone());
                }
                (Some(Value::Null), _) => {}
                (Some(change), rest) => {
                    out.insert(key.clone(), merged(value, change, rest.unwrap_or_default()));
                }
            }
        }
    }
    for (key, value) in p {
        if !value.is_null() && target.get(key).is_none() {
            out.insert(key.clone(), merged(&Value::Null, value, &[]));
        }
    }
    Value::Object(out)
}

/// A copy of `value` without the member at the path `omit`.
fn copy_omitting(value: &Value, omit: &[&str]) -> Value {
    let (Value::Object(m), Some((first, rest))) = (value, omit.split_first()) else {
        return value.clone();
    };
    Value::Object(
        m.iter()
            .filter(|(k, _)| !(rest.is_empty() && k.as_str() == *first))
            .map(|(k, v)| {
                let v = if k.as_str() == *first {
                    copy_omitting(v, rest)
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
/// Applies `patch` to `target` in place (RFC 7386 section 2, `MergePatch`).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 appendix A.
    #[test]
    fn rfc7386_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, want) in cases {
            let mut got = target.clone();
            merge_patch(&mut got, &patch);
            assert_eq!(got, want, "{target} + {patch}");
            assert_eq!(
                merged(&target, &patch, &[]),
                want,
                "merged: {target} + {patch}"
            );
        }
    }

    #[test]
    fn merged_leaves_out_the_omitted_member_unless_the_patch_sets_it() {
        let target = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "A"}]}});
        let omit = ["metadata", "managedFields"];
        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "B"}]}});
        assert_eq!(
            merged(&target, &status, &omit),
            json!({"metadata": {"name": "a"},
                "status": {"phase": "Running", "conditions": [{"type": "B"}]}})
        );
        let labels = json!({"metadata": {"labels": {"x": "y"}}});
        assert_eq!(
            merged(&target, &labels, &omit),
            json!({"metadata": {"name": "a", "labels": {"x": "y"}},
                "status": {"phase": "Pending", "conditions": [{"type": "A"}]}})
        );
        let sets = json!({"metadata": {"managedFields": []}});
        assert_eq!(
            merged(&target, &sets, &omit),
            json!({"metadata": {"name": "a", "managedFields": []},
                "status": {"phase": "Pending", "conditions": [{"type": "A"}]}})
        );
        assert_eq!(
            merged(&target, &json!({"metadata": null}), &omit)["metadata"],
            Value::Null
        );
    }

    #[test]
    fn kubectl_scale_body() {
        let mut scale = json!({"kind":"Scale","spec":{"replicas":3},"status":{"replicas":3}});
        merge_patch(&mut scale, &json!({"spec":{"replicas":5}}));
        assert_eq!(scale["spec"]["replicas"], 5);
        assert_eq!(scale["status"]["replicas"], 3);
    }
}
