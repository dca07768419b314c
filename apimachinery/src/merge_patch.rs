//! JSON merge patches (RFC 7386) made from two versions of an object: the patch that turns
//! `original` into `modified` when the API server applies it with `Content-Type:
//! application/merge-patch+json`. Kubernetes makes them with `jsonmergepatch.CreateMergePatch`
//! (`k8s.io/apimachinery/pkg/util/jsonmergepatch`, over `github.com/evanphx/json-patch`),
//! which `kubectl apply` and `kubectl edit` use for custom resources.
//!
//! ```text
//!   original {"spec": {"replicas": 1, "paused": true}, "a": [1]}
//!   modified {"spec": {"replicas": 3},                 "a": [1, 2]}
//!   patch    {"spec": {"replicas": 3, "paused": null}, "a": [1, 2]}
//! ```
//!
//! As RFC 7386 says, a list is replaced whole and a removed member becomes `null`; a `null` in
//! `modified` cannot be told apart from a removal.

use serde_json::{Map, Value};

/// The merge patch that turns `original` into `modified` (`{}` when they are equal).
pub fn create(original: &Value, modified: &Value) -> Value {
    match (original, modified) {
        (Value::Object(a), Value::Object(b)) => Value::Object(members(a, b)),
        _ => modified.clone(),
    }
}

fn members(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut patch = Map::new();
    for (k, old) in a {
        match b.get(k) {
            None => {
                patch.insert(k.clone(), Value::Null);
            }
            Some(new) if new == old => {}
            Some(Value::Object(new)) if old.is_object() => {
                let inner = old.as_object().map(|o| members(o, new)).unwrap_or_default();
                patch.insert(k.clone(), Value::Object(inner));
            }
            Some(new) => {
                patch.insert(k.clone(), new.clone());
            }
        }
    }
    for (k, new) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
        patch.insert(k.clone(), new.clone());
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386's merge, to check that each patch turns the original into the modified.
    fn apply(target: &mut Value, patch: &Value) {
        let Value::Object(members) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        if let Value::Object(t) = target {
            for (k, v) in members {
                if v.is_null() {
                    t.remove(k);
                } else {
                    apply(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
    }

    #[test]
    fn the_patch_names_what_changed_and_nulls_what_went() {
        let original = json!({"metadata": {"labels": {"app": "web", "tier": "x"}},
            "spec": {"replicas": 1, "paused": true, "template": {"spec": {"containers": [{"name": "web", "image": "a"}]}}}});
        let modified = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"n": "1"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "b"}]}}}});
        let patch = create(&original, &modified);
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"tier": null}, "annotations": {"n": "1"}},
                "spec": {"replicas": 3, "paused": null,
                    "template": {"spec": {"containers": [{"name": "web", "image": "b"}]}}}})
        );
        let mut patched = original.clone();
        apply(&mut patched, &patch);
        assert_eq!(patched, modified);
        assert_eq!(create(&modified, &modified), json!({}));
        // A member that changes type is replaced.
        assert_eq!(
            create(&json!({"a": {"b": 1}}), &json!({"a": 2})),
            json!({"a": 2})
        );
    }
}
