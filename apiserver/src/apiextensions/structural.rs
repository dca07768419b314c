//! Pruning and defaulting of a custom resource by its structural schema.
//!
//! Mirrors `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm.go`
//! (`PruneWithOptions`: drop every field the schema does not specify, unless
//! `x-kubernetes-preserve-unknown-fields: true`) and `schema/defaulting/algorithm.go`
//! (`Default`: fill in each absent property that has a `default`) with
//! `PruneNonNullableNullsWithoutDefaults` (a `null` where the schema does not allow one is
//! dropped, or replaced by the default):
//!
//! ```text
//! schema: spec {properties: {replicas: {type: integer, default: 1}}}
//! in:     {"spec": {"colour": "red"}}
//! out:    {"spec": {"replicas": 1}}          pruned: ["spec.colour"]
//! ```
//!
//! The root's `apiVersion`, `kind` and `metadata` are never pruned (nor those of an
//! `x-kubernetes-embedded-resource`). Unlike Kubernetes, defaults are applied on writes only,
//! not again when an object is read from storage.

use crate::strategy::field::FieldPath;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value};

/// The fields every object (and embedded resource) keeps whatever its schema says.
const OBJECT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes the fields `schema` does not know from `obj` and returns their paths
/// (`spec.foo`, `spec.items[0].bar`), as the `unknown field` warnings name them.
pub fn prune(schema: &JSONSchemaProps, obj: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_value(schema, obj, &FieldPath::new(""), true, &mut pruned);
    pruned
}

fn items_schema(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => list.first(),
        None => None,
    }
}

fn additional_schema(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s),
        _ => None,
    }
}

fn preserves(schema: &JSONSchemaProps) -> bool {
    schema.x_kubernetes_preserve_unknown_fields == Some(true)
}

fn prune_value(
    schema: &JSONSchemaProps,
    v: &mut Value,
    path: &FieldPath,
    keep_object_fields: bool,
    pruned: &mut Vec<String>,
) {
    let keep_object_fields =
        keep_object_fields || schema.x_kubernetes_embedded_resource == Some(true);
    match v {
        Value::Object(map) => {
            let props = schema.properties.as_ref();
            let extra = additional_schema(schema);
            let keep_unknown = preserves(schema)
                || matches!(
                    schema.additional_properties,
                    Some(JSONSchemaPropsOrBool::Bool(true))
                );
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child = path.child(&key);
                if keep_object_fields && OBJECT_FIELDS.contains(&key.as_str()) {
                    // metadata is the registry's; apiVersion and kind are checked by type.
                    if key != "metadata"
                        && let (Some(prop), Some(value)) =
                            (props.and_then(|p| p.get(&key)), map.get_mut(&key))
                    {
                        prune_value(prop, value, &child, false, pruned);
                    }
                    continue;
                }
                match props.and_then(|p| p.get(&key)).or(extra) {
                    Some(prop) => {
                        if let Some(value) = map.get_mut(&key) {
                            prune_value(prop, value, &child, false, pruned);
                        }
                    }
                    None if keep_unknown => {}
                    None => {
                        map.remove(&key);
                        pruned.push(child.as_str().to_owned());
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = items_schema(schema) {
                for (i, value) in items.iter_mut().enumerate() {
                    prune_value(item, value, &path.index(i), false, pruned);
                }
            }
        }
        _ => {}
    }
}

/// Fills in the `default` of every absent property (recursively, also inside list items and
/// map values) and drops `null`s the schema does not allow.
pub fn apply_defaults(schema: &JSONSchemaProps, v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = &schema.properties {
                for (key, prop) in props {
                    default_property(map, key, prop);
                }
                for (key, value) in map.iter_mut() {
                    if let Some(prop) = props.get(key) {
                        apply_defaults(prop, value);
                    } else if let Some(extra) = additional_schema(schema) {
                        apply_defaults(extra, value);
                    }
                }
            } else if let Some(extra) = additional_schema(schema) {
                for value in map.values_mut() {
                    apply_defaults(extra, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = items_schema(schema) {
                for value in items.iter_mut() {
                    apply_defaults(item, value);
                }
            }
        }
        _ => {}
    }
}

fn default_property(map: &mut Map<String, Value>, key: &str, prop: &JSONSchemaProps) {
    let nullable = prop.nullable == Some(true);
    let current = map.get(key);
    let missing = current.is_none() || (current == Some(&Value::Null) && !nullable);
    if !missing {
        return;
    }
    match &prop.default {
        Some(default) => {
            map.insert(key.to_owned(), default.0.clone());
        }
        None if current.is_some() => {
            map.remove(key);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> JSONSchemaProps {
        serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "image": {"type": "string", "default": "nginx"},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {
                            "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
                        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }))
        .expect("test schema decodes")
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported() {
        let mut obj = json!({"apiVersion": "demo/v1", "kind": "Website", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {"colour": "red", "ports": [{"port": 80, "name": "http"}],
                     "config": {"anything": {"goes": true}}, "labels": {"a": "b"}},
            "status": {"ready": true, "phase": "x"}});
        let pruned = prune(&schema(), &mut obj);
        assert_eq!(
            pruned,
            vec!["extra", "spec.colour", "spec.ports[0].name", "status.phase"]
        );
        assert_eq!(obj["metadata"]["name"], "a");
        assert_eq!(obj["spec"]["config"]["anything"]["goes"], true);
        assert_eq!(obj["spec"]["labels"]["a"], "b");
    }

    #[test]
    fn defaults_fill_absent_and_null_fields() {
        let mut obj = json!({"spec": {"image": null, "ports": [{"port": 80}]}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 1, "image": "nginx", "ports": [{"port": 80, "protocol": "TCP"}]}})
        );
        let mut kept = json!({"spec": {"replicas": 5}});
        apply_defaults(&schema(), &mut kept);
        assert_eq!(kept["spec"]["replicas"], 5);
    }
}
