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
        }
    }

    #[test]
    fn kubectl_scale_body() {
        let mut scale = json!({"kind":"Scale","spec":{"replicas":3},"status":{"replicas":3}});
        merge_patch(&mut scale, &json!({"spec":{"replicas":5}}));
        assert_eq!(scale["spec"]["replicas"], 5);
        assert_eq!(scale["status"]["replicas"], 3);
    }
}
