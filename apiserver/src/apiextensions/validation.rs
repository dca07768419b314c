//! Validation of a custom resource against its version's structural `openAPIV3Schema`.
//!
//! Mirrors `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/validation/validation.go`
//! (`ValidateCustomResource`, `kubeOpenAPIResultToFieldErrors`) over the validators of
//! `k8s.io/kube-openapi/pkg/validation/validate` (messages from `pkg/validation/errors`). The
//! messages keep Kubernetes' words, so a client sees what a real cluster answers:
//!
//! ```text
//! schema: spec.replicas {type: integer, maximum: 10}    value: 11
//!   => spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10
//! schema: spec.color {enum: [red, blue]}                value: "pink"
//!   => spec.color: Unsupported value: "pink": supported values: "red", "blue"
//! schema: spec {required: [name]}                       value: {}
//!   => spec.name: Required value
//! ```
//!
//! Checked: `type` (and `nullable`, `x-kubernetes-int-or-string`), `required`, `enum`,
//! `minimum`/`maximum` (and their exclusive forms), `multipleOf`, `minLength`/`maxLength`,
//! `pattern`, `minItems`/`maxItems`, `uniqueItems`, `minProperties`/`maxProperties`,
//! `properties`, `additionalProperties`, `items`, and `allOf`/`anyOf`/`oneOf`/`not` as far as
//! structural schemas allow them. Unlike Kubernetes, `format` is not checked and CEL rules
//! (`x-kubernetes-validations`) are not evaluated. `apiVersion`, `kind` and `metadata` at the
//! root are left to the registry (metadata is validated like any object's).

use crate::strategy::field::{FieldPath, Rendered};
use crate::strategy::{FieldError, FieldErrorKind};
use apimachinery::fmt::go_quote;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;

/// The root fields the registry owns; the schema does not validate them.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The compiled `pattern`s of a schema, by source (compiled once per CRD version, not per
/// request).
#[derive(Debug, Clone, Default)]
pub struct Patterns(HashMap<String, Regex>);

impl Patterns {
    /// Compiles every `pattern` in `schema`; patterns that do not compile are left out (the
    /// CRD's validation refuses them).
    pub fn of(schema: &JSONSchemaProps) -> Self {
        let mut out = HashMap::new();
        visit(schema, &mut |s| {
            if let Some(p) = &s.pattern
                && let Ok(re) = Regex::new(p)
            {
                out.insert(p.clone(), re);
            }
        });
        Patterns(out)
    }
}

/// Calls `f` on `schema` and every schema inside it.
fn visit(schema: &JSONSchemaProps, f: &mut impl FnMut(&JSONSchemaProps)) {
    f(schema);
    for prop in schema.properties.iter().flat_map(|p| p.values()) {
        visit(prop, f);
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => visit(item, f),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter().for_each(|i| visit(i, f)),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = &schema.additional_properties {
        visit(extra, f);
    }
    for sub in [&schema.all_of, &schema.any_of, &schema.one_of]
        .into_iter()
        .flatten()
        .flatten()
    {
        visit(sub, f);
    }
}

#[cfg(test)]
/// Validates a whole custom resource against its schema and returns every problem.
pub fn validate(schema: &JSONSchemaProps, obj: &Value) -> Vec<FieldError> {
    validate_with(schema, &Patterns::of(schema), obj)
}

/// `validate` with the schema's patterns compiled beforehand.
pub fn validate_with(
    schema: &JSONSchemaProps,
    patterns: &Patterns,
    obj: &Value,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = obj.as_object() else {
        return errs;
    };
    for name in schema.required.iter().flatten() {
        if !ROOT_FIELDS.contains(&name.as_str()) && !map.contains_key(name) {
            errs.push(FieldError::required(&FieldPath::new(name), ""));
        }
    }
    for (key, value) in map {
        if ROOT_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if let Some(prop) = schema.properties.as_ref().and_then(|p| p.get(key)) {
            validate_value(prop, patterns, value, &FieldPath::new(key), &mut errs);
        }
    }
    errs
}

/// The name of a JSON value's type, as kube-openapi reports a mismatch.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    }
}

/// A value as `field.Error` prints it (Go `%v` for numbers and booleans, `%q` for strings).
/// Unlike Kubernetes, which prints objects and lists as Go maps/slices (`%#v`), those are
/// printed as JSON.
pub fn render(v: &Value) -> Rendered {
    Rendered(match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    })
}

/// Go's `%v` of a float64 bound (10 → `10`, 1.5 → `1.5`).
fn number(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

fn invalid(path: &FieldPath, v: &Value, detail: String, errs: &mut Vec<FieldError>) {
    errs.push(FieldError::invalid(path, render(v), &detail));
}

/// Validates one value (and everything below it) against `schema`.
pub fn validate_value(
    schema: &JSONSchemaProps,
    patterns: &Patterns,
    v: &Value,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let name = path.as_str();
    if v.is_null() && schema.nullable == Some(true) {
        return;
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            errs.push(type_error(path, "integer,string", v));
            return;
        }
    } else if let Some(t) = schema.type_.as_deref()
        && !type_matches(t, v)
    {
        errs.push(type_error(path, t, v));
        return;
    }
    if let Some(allowed) = &schema.enum_
        && !allowed.iter().any(|a| a.0 == *v)
    {
        let values: Vec<String> = allowed
            .iter()
            .map(|a| match &a.0 {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path, render(v), &refs));
    }
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or_default();
            if let Some(max) = schema.maximum {
                if schema.exclusive_maximum == Some(true) && f >= max {
                    let msg = format!("{name} in body should be less than {}", number(max));
                    invalid(path, v, msg, errs);
                } else if f > max {
                    let msg = format!(
                        "{name} in body should be less than or equal to {}",
                        number(max)
                    );
                    invalid(path, v, msg, errs);
                }
            }
            if let Some(min) = schema.minimum {
                if schema.exclusive_minimum == Some(true) && f <= min {
                    let msg = format!("{name} in body should be greater than {}", number(min));
                    invalid(path, v, msg, errs);
                } else if f < min {
                    let msg = format!(
                        "{name} in body should be greater than or equal to {}",
                        number(min)
                    );
                    invalid(path, v, msg, errs);
                }
            }
            if let Some(m) = schema.multiple_of.filter(|m| *m > 0.0)
                && (f / m).fract() != 0.0
            {
                let msg = format!("{name} in body should be a multiple of {}", number(m));
                invalid(path, v, msg, errs);
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as i64;
            if let Some(max) = schema.max_length
                && len > max
            {
                errs.push(FieldError::too_long(path, max.max(0) as usize));
            }
            if let Some(min) = schema.min_length
                && len < min
            {
                let msg = format!("{name} in body should be at least {min} chars long");
                invalid(path, v, msg, errs);
            }
            if let Some(pattern) = &schema.pattern {
                match patterns.0.get(pattern) {
                    Some(re) if !re.is_match(s) => {
                        let msg = format!("{name} in body should match '{pattern}'");
                        invalid(path, v, msg, errs);
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            let len = items.len() as i64;
            if let Some(max) = schema.max_items
                && len > max
            {
                errs.push(FieldError::too_many(path, items.len(), max.max(0) as usize));
            }
            if let Some(min) = schema.min_items
                && len < min
            {
                let msg = format!("{name} in body should have at least {min} items");
                errs.push(FieldError::invalid(path, len, &msg));
            }
            // Compared by their JSON text (keys sorted by serde_json's map), in one pass.
            let mut seen = std::collections::HashSet::new();
            if schema.unique_items == Some(true)
                && !items.iter().all(|a| seen.insert(a.to_string()))
            {
                let msg = format!("{name} in body shouldn't contain duplicates");
                invalid(path, v, msg, errs);
            }
            match &schema.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => {
                    for (i, item_value) in items.iter().enumerate() {
                        validate_value(item, patterns, item_value, &path.index(i), errs);
                    }
                }
                Some(JSONSchemaPropsOrArray::Schemas(list)) => {
                    for (i, (item, item_value)) in list.iter().zip(items).enumerate() {
                        validate_value(item, patterns, item_value, &path.index(i), errs);
                    }
                }
                None => {}
            }
        }
        Value::Object(map) => {
            let len = map.len() as i64;
            if let Some(max) = schema.max_properties
                && len > max
            {
                errs.push(FieldError {
                    kind: FieldErrorKind::TooMany,
                    field: name.to_owned(),
                    value: Some(len.to_string()),
                    detail: format!("must have at most {max} items"),
                });
            }
            if let Some(min) = schema.min_properties
                && len < min
            {
                let msg = format!("{name} in body should have at least {min} properties");
                errs.push(FieldError::invalid(path, len, &msg));
            }
            for req in schema.required.iter().flatten() {
                if !map.contains_key(req) {
                    errs.push(FieldError::required(&path.child(req), ""));
                }
            }
            let props = schema.properties.as_ref();
            for (key, value) in map {
                match props.and_then(|p| p.get(key)) {
                    Some(prop) => validate_value(prop, patterns, value, &path.child(key), errs),
                    None => {
                        if let Some(JSONSchemaPropsOrBool::Schema(extra)) =
                            &schema.additional_properties
                        {
                            validate_value(extra, patterns, value, &path.child(key), errs);
                        }
                    }
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    validate_combinators(schema, patterns, v, path, errs);
}

/// `allOf`, `anyOf`, `oneOf` and `not` (value validations only, as in structural schemas).
fn validate_combinators(
    schema: &JSONSchemaProps,
    patterns: &Patterns,
    v: &Value,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let name = path.as_str();
    for sub in schema.all_of.iter().flatten() {
        validate_value(sub, patterns, v, path, errs);
    }
    let passes = |sub: &JSONSchemaProps| {
        let mut e = Vec::new();
        validate_value(sub, patterns, v, path, &mut e);
        e.is_empty()
    };
    if let Some(any) = &schema.any_of
        && !any.iter().any(passes)
    {
        invalid(path, v, format!("{name} in body must be of anyOf"), errs);
    }
    if let Some(one) = &schema.one_of
        && one.iter().filter(|s| passes(s)).count() != 1
    {
        invalid(path, v, format!("{name} in body must be of oneOf"), errs);
    }
    if let Some(not) = &schema.not
        && passes(not)
    {
        invalid(
            path,
            v,
            format!("{name} in body should not validate the schema"),
            errs,
        );
    }
}

fn type_error(path: &FieldPath, expected: &str, v: &Value) -> FieldError {
    let actual = type_name(v);
    FieldError {
        kind: FieldErrorKind::TypeInvalid,
        field: path.as_str().to_owned(),
        value: Some(go_quote(actual)),
        detail: format!(
            "{} in body must be of type {expected}: {}",
            path.as_str(),
            go_quote(actual)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::messages;
    use serde_json::json;

    fn schema(v: Value) -> JSONSchemaProps {
        serde_json::from_value(v).expect("test schema decodes")
    }

    fn website_schema() -> JSONSchemaProps {
        schema(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z]+$"},
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1.5},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "nested": {"type": "object", "properties": {"deep": {"type": "boolean"}}}
                    }
                }
            }
        }))
    }

    #[test]
    fn a_valid_object_has_no_errors() {
        let obj = json!({"apiVersion": "demo/v1", "kind": "Website", "metadata": {"name": "x"},
            "spec": {"name": "blog", "replicas": 3, "color": "red", "ratio": 1.2, "port": "http",
                     "tags": ["a"], "labels": {"a": "b"}, "nested": {"deep": true}}});
        assert_eq!(
            messages(&validate(&website_schema(), &obj)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn errors_are_worded_as_kubernetes_words_them() {
        let obj = json!({"spec": {"replicas": 11, "color": "pink", "ratio": 1.5, "port": true,
            "tags": ["a", "b", "c"], "labels": {"a": 1}, "nested": {"deep": "yes"}}});
        assert_eq!(
            messages(&validate(&website_schema(), &obj)),
            vec![
                "spec.name: Required value",
                "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"",
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                "spec.nested.deep: Invalid value: \"string\": spec.nested.deep in body must be of type boolean: \"string\"",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.tags: Too many: 3: must have at most 2 items",
            ]
        );
        let short = json!({"spec": {"name": "AB", "replicas": 0}});
        assert_eq!(
            messages(&validate(&website_schema(), &short)),
            vec![
                "spec.name: Invalid value: \"AB\": spec.name in body should be at least 3 chars long",
                "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'",
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ]
        );
        let long = json!({"spec": {"name": "abcdefghij", "replicas": "3"}});
        assert_eq!(
            messages(&validate(&website_schema(), &long)),
            vec![
                "spec.name: Too long: may not be more than 8 bytes",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ]
        );
    }

    #[test]
    fn type_errors_carry_the_kubernetes_reason() {
        let errs = validate(&website_schema(), &json!({"spec": "x"}));
        assert_eq!(errs[0].kind.reason(), "FieldValueTypeInvalid");
        let errs = validate(&website_schema(), &json!({"spec": {}}));
        assert_eq!(errs[0].kind.reason(), "FieldValueRequired");
    }

    #[test]
    fn unique_items_are_checked_in_one_pass() {
        let s = schema(json!({"type": "object", "properties": {
            "tags": {"type": "array", "uniqueItems": true, "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}));
        assert!(validate(&s, &json!({"tags": [{"a": 1}, {"a": 2}]})).is_empty());
        assert_eq!(
            messages(&validate(&s, &json!({"tags": [{"a": 1}, {"a": 1}]}))),
            vec![
                "tags: Invalid value: [{\"a\":1},{\"a\":1}]: tags in body shouldn't contain duplicates"
            ]
        );
    }

    #[test]
    fn nullable_fields_accept_null() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string", "nullable": true}}}}}));
        assert!(validate(&s, &json!({"spec": {"a": null}})).is_empty());
    }
}
