//! Decoding request bodies into typed objects, as the API server's JSON serializer does
//! (`staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json/json.go` over
//! `sigs.k8s.io/json`).
//!
//! Decoding into the `k8s-openapi` type and encoding back is what drops unknown fields, as Go's
//! decoder does. Comparing the input with the round trip gives the unknown fields for
//! `fieldValidation=Strict|Warn`, with the paths Kubernetes prints:
//!
//! ```text
//! {"spec":{"template":{"spec":{"containers":[{"name":"a","imagePullPolicyy":"x"}]}}}}
//!   => unknown field "spec.template.spec.containers[0].imagePullPolicyy"
//! ```
//!
//! A value of the wrong JSON type is a 400 with Go's wording:
//! `json: cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32`.
//! Unlike Go, the struct named is the kind, not the innermost Go struct (serde does not know
//! Go's type names).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Decodes `obj` into `K`. `apiVersion`/`kind` are filled in when absent so a body without
/// them (the registry knows the kind from the URL) still decodes.
///
/// The object is read in place when it has both (as every object past
/// [`crate::rest::check_type`] does), and the path of a failure is tracked only when there is
/// one: the decoding is then done again through `serde_path_to_error`, which gives the same
/// result with the path Go's message names.
pub fn decode<K>(obj: &Value) -> Result<K, String>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    let Some(map) = obj.as_object() else {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type {}",
            json_type_name(obj),
            K::KIND
        ));
    };
    match with_type_filled::<K>(map) {
        None => decode_typed(obj),
        Some(filled) => decode_typed(&filled),
    }
}

/// A copy of the object `map` with `apiVersion` and `kind` filled in from `K` where absent or
/// null, or `None` when it has both (it can then be read in place).
fn with_type_filled<K: k8s_openapi::Resource>(map: &Map<String, Value>) -> Option<Value> {
    let missing = |key: &str| map.get(key).is_none_or(Value::is_null);
    if !missing("apiVersion") && !missing("kind") {
        return None;
    }
    let mut filled = map.clone();
    for (key, value) in [("apiVersion", K::API_VERSION), ("kind", K::KIND)] {
        if missing(key) {
            filled.insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }
    Some(Value::Object(filled))
}

/// [`decode`], also returning the members of `obj` that `K` has no field for (what Go's strict
/// decoder reports for `fieldValidation=Strict|Warn`), as [`dropped_fields`] names them: the
/// decoding notes each member it skips (`serde_ignored`), so unknown fields cost no encoding
/// of the result and no second walk. Explicit `null`s are ignored, as Go ignores them.
pub fn decode_noting_unknown<K>(obj: &Value) -> Result<(K, Vec<String>), String>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    let Some(map) = obj.as_object() else {
        // Not an object: `decode`'s error.
        return decode::<K>(obj).map(|typed| (typed, Vec::new()));
    };
    // Rare: bodies past `check_type` carry their type.
    if let Some(filled) = with_type_filled::<K>(map) {
        return decode_noting_unknown(&filled);
    }
    let mut unknown = Vec::new();
    let decoded = serde_ignored::deserialize(obj, |path| {
        let mut steps = Vec::new();
        steps_of(&path, &mut steps);
        if lookup(obj, &steps).is_some_and(|v| !v.is_null()) {
            unknown.push(render(&steps));
        }
    });
    match decoded {
        Ok(typed) => Ok((typed, unknown)),
        // The error with Go's wording and path.
        Err(_) => decode_typed::<K>(obj).map(|typed| (typed, Vec::new())),
    }
}

/// One step of a path into a JSON value.
enum Step {
    Member(String),
    Item(usize),
}

/// The steps of `path` from the root (wrappers such as `Option` are not steps).
fn steps_of(path: &serde_ignored::Path<'_>, out: &mut Vec<Step>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            steps_of(parent, out);
            out.push(Step::Item(*index));
        }
        Path::Map { parent, key } => {
            steps_of(parent, out);
            out.push(Step::Member(key.clone()));
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => steps_of(parent, out),
    }
}

/// The value at `steps` in `obj`.
fn lookup<'a>(obj: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    steps.iter().try_fold(obj, |v, step| match step {
        Step::Member(key) => v.get(key.as_str()),
        Step::Item(index) => v.get(*index),
    })
}

/// `spec.containers[1].name`, as [`dropped_fields`] writes paths.
fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Member(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Item(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// [`decode`] of an object with its type filled in.
fn decode_typed<K>(obj: &Value) -> Result<K, String>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    K::deserialize(obj).or_else(|_| {
        serde_path_to_error::deserialize::<_, K>(obj)
            .map_err(|e| go_error::<K>(&e.path().to_string(), &e.inner().to_string()))
    })
}

/// Encodes a typed object back to JSON.
pub fn encode<K: Serialize>(obj: &K) -> Result<Value, String> {
    serde_json::to_value(obj).map_err(|e| format!("encoding: {e}"))
}

/// Encodes a typed object into `target`, which is left as it is when it already is that
/// encoding ([`super::unchanged_encoding::serializes_to`]): the typed round trip of an update usually
/// changes nothing, and the comparison allocates nothing where encoding builds a new tree.
pub fn encode_over<K: Serialize>(obj: &K, target: &mut Value) -> Result<(), String> {
    if !super::unchanged_encoding::serializes_to(obj, target) {
        *target = encode(obj)?;
    }
    Ok(())
}

#[cfg(test)]
/// The fields of `input` that the typed round trip `output` dropped, as dotted paths with list
/// indexes (`spec.foo`, `spec.containers[0].bar`). Explicit `null`s are ignored, as Go ignores
/// them.
pub fn dropped_fields(input: &Value, output: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(input, output, "", &mut out);
    out
}

#[cfg(test)]
fn walk(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => walk_object(i, o, path, out),
        (Value::Array(i), Value::Array(o)) => {
            for (n, (iv, ov)) in i.iter().zip(o).enumerate() {
                walk(iv, ov, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
fn walk_object(
    input: &Map<String, Value>,
    output: &Map<String, Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    for (k, v) in input {
        if v.is_null() {
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        match output.get(k) {
            Some(o) => walk(v, o, &child, out),
            None => out.push(child),
        }
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Rewrites serde's `invalid type: string "3", expected i32` into Go's
/// `json: cannot unmarshal string into Go struct field Kind.path of type int32`.
fn go_error<K: k8s_openapi::Resource>(path: &str, serde_msg: &str) -> String {
    let Some(rest) = serde_msg.strip_prefix("invalid type: ") else {
        return format!("json: {serde_msg} (at {path})");
    };
    let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
    let found = match found.split_whitespace().next().unwrap_or("") {
        "string" => "string",
        "integer" | "floating" => "number",
        "boolean" => "bool",
        "map" => "object",
        "sequence" => "array",
        "null" | "unit" => "null",
        other => other,
    };
    let go_type = go_type_name(expected);
    // Go names the field by its JSON path without list indexes.
    let mut field = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => field.push(c),
            _ => {}
        }
    }
    format!(
        "json: cannot unmarshal {found} into Go struct field {}.{field} of type {go_type}",
        K::KIND
    )
}

fn go_type_name(expected: &str) -> String {
    let expected = expected.trim();
    let mapped = match expected {
        "i32" => "int32",
        "i64" => "int64",
        "u32" => "uint32",
        "u64" => "uint64",
        "f64" => "float64",
        "a boolean" | "bool" => "bool",
        "a string" | "string" | "a borrowed string" => "string",
        "a sequence" => "[]interface {}",
        "a map" => "map[string]string",
        _ => "",
    };
    if !mapped.is_empty() {
        return mapped.to_owned();
    }
    // k8s-openapi names its structs (`Container`); Go prints them with their package.
    let name = expected.strip_prefix("struct ").unwrap_or(expected);
    match name {
        "IntOrString" => "intstr.IntOrString".to_owned(),
        "Quantity" => "resource.Quantity".to_owned(),
        n if n.starts_with(|c: char| c.is_ascii_uppercase()) && !n.contains(' ') => {
            format!("v1.{n}")
        }
        n => n.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    #[test]
    fn wrong_type_is_reported_as_go_does() {
        let err = decode::<Deployment>(&json!({"spec": {"replicas": "3"}}))
            .err()
            .unwrap_or_default();
        assert_eq!(
            err,
            "json: cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32"
        );
        let err =
            decode::<Deployment>(&json!({"spec": {"template": {"spec": {"containers": {}}}}}))
                .err()
                .unwrap_or_default();
        assert!(
            err.starts_with("json: cannot unmarshal object into Go struct field Deployment.spec.template.spec.containers of type"),
            "{err}"
        );
        let err = decode::<Deployment>(&json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": true}}}]}}}}))
            .err()
            .unwrap_or_default();
        assert_eq!(
            err,
            "json: cannot unmarshal bool into Go struct field Deployment.spec.template.spec.containers.resources.limits.cpu of type resource.Quantity"
        );
        let err = decode::<Deployment>(&json!({"spec": {"template": "x"}}))
            .err()
            .unwrap_or_default();
        assert_eq!(
            err,
            "json: cannot unmarshal string into Go struct field Deployment.spec.template of type v1.PodTemplateSpec"
        );
        assert!(decode::<Deployment>(&json!([])).is_err());
        assert!(decode::<Deployment>(&json!({"kind": "Pod"})).is_err());
    }

    #[test]
    fn unknown_fields_have_kubernetes_paths() {
        let input = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "creationTimestamp": null, "foo": 1},
            "spec": {"bar": true, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx"},
                {"name": "d", "imagePullPolicyy": "Always", "ports": [{"containerPort": 80, "x": 1}]}
            ]}}}
        });
        let typed: Deployment = decode(&input).unwrap();
        let output = encode(&typed).unwrap();
        assert_eq!(
            dropped_fields(&input, &output),
            vec![
                "metadata.foo",
                "spec.bar",
                "spec.template.spec.containers[1].imagePullPolicyy",
                "spec.template.spec.containers[1].ports[0].x",
            ]
        );
    }

    /// `decode_noting_unknown` against what it replaces: a decode, an encode of the result and
    /// the fields the round trip dropped.
    fn agrees_with_the_round_trip<K>(input: Value)
    where
        K: k8s_openapi::Resource + DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
    {
        let typed: K = decode(&input).expect("decodes");
        let expected = dropped_fields(&input, &encode(&typed).expect("encodes"));
        let (noted, unknown) = decode_noting_unknown::<K>(&input).expect("decodes");
        assert_eq!(noted, typed, "the same object for {input}");
        assert_eq!(unknown, expected, "the same unknown fields for {input}");
    }

    #[test]
    fn unknown_fields_noted_while_decoding_are_the_fields_the_round_trip_drops() {
        use k8s_openapi::api::core::v1::{Event, Pod};
        agrees_with_the_round_trip::<Deployment>(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "creationTimestamp": null, "foo": 1, "nulled": null},
            "spec": {"bar": true, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx"},
                {"name": "d", "imagePullPolicyy": "Always", "ports": [{"containerPort": 80, "x": 1}]}
            ]}}}
        }));
        agrees_with_the_round_trip::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"unknown": "a label is no field"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}, "limitz": {}}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [], "extra": [1, {"deep": 2}]}]}}}},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i",
                "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}, "bogus": 1}}],
                "whatever": null}
        }));
        agrees_with_the_round_trip::<Pod>(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}),
        );
        agrees_with_the_round_trip::<Event>(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "d"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldX": "y"},
            "reason": "Started", "count": 1, "unknownTop": {"a": [1]}
        }));
    }

    #[test]
    fn an_object_without_its_type_is_decoded_with_it_and_a_bad_one_fails_as_decode_does() {
        let input = json!({"metadata": {"name": "a"}, "spec": {"bar": 1}});
        let (_, unknown) = decode_noting_unknown::<Deployment>(&input).expect("decodes");
        assert_eq!(unknown, vec!["spec.bar"]);
        let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "3"}});
        assert_eq!(
            decode_noting_unknown::<Deployment>(&bad).err(),
            decode::<Deployment>(&bad).err()
        );
    }
}
