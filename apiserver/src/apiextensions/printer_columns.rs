//! `additionalPrinterColumns`: the `kubectl get` columns a CRD declares.
//!
//! Mirrors `staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor/tableconvertor.go`:
//! each column is a JSONPath into the object; `date` cells become ages, `integer`, `number`
//! and `boolean` cells keep their JSON type, a path that finds nothing gives an empty (`null`)
//! cell. A CRD without columns gets `Age` (`.metadata.creationTimestamp`), as
//! `SetDefaults_CustomResourceDefinitionVersion` gives it.
//!
//! ```text
//! {name: Replicas, type: integer, jsonPath: .spec.replicas}
//! {name: Ready,    type: string,  jsonPath: .status.conditions[?(@.type=="Ready")].status}
//! ```
//!
//! Unlike Kubernetes (client-go's full `jsonpath` package), the paths understood are the simple
//! ones CRDs use: `.a.b`, `.a[0]`, `.a['key.with.dots']` and filters `[?(@.field=="value")]`.

use crate::strategy::TableColumn;
use apimachinery::duration::since;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
use serde_json::Value;

/// One step of a column's path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.name` or `['name']`.
    Field(String),
    /// `[3]`.
    Index(usize),
    /// `[?(@.field=="value")]`: the first list item whose `field` equals `value`.
    Filter(Vec<String>, Value),
}

/// A parsed column.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    /// The definition, for the table header.
    pub definition: CustomResourceColumnDefinition,
    steps: Vec<Step>,
}

/// Parses a CRD column path; `Err` explains what is not understood.
fn parse(path: &str) -> Result<Vec<Step>, String> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(format!("empty field name in {path:?}"));
            }
            steps.push(Step::Field(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("unterminated [ in {path:?}"))?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, value) = filter
                    .split_once("==")
                    .ok_or_else(|| format!("unsupported filter in {path:?}"))?;
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                let fields = field.trim().split('.').map(str::to_owned).collect();
                steps.push(Step::Filter(fields, Value::String(value.to_owned())));
            } else if let Ok(i) = inner.parse::<usize>() {
                steps.push(Step::Index(i));
            } else {
                let key = inner.trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Field(key.to_owned()));
            }
        } else {
            return Err(format!("unexpected {rest:?} in {path:?}"));
        }
    }
    Ok(steps)
}

/// Whether a column path is one miniplane can evaluate (`ValidateCustomResourceColumnDefinition`
/// checks the JSONPath syntax).
pub fn check_path(path: &str) -> Result<(), String> {
    parse(path).map(|_| ())
}

fn find<'a>(steps: &[Step], mut v: &'a Value) -> Option<&'a Value> {
    for step in steps {
        v = match step {
            Step::Field(name) => v.get(name)?,
            Step::Index(i) => v.get(*i)?,
            Step::Filter(fields, want) => v.as_array()?.iter().find(|item| {
                fields
                    .iter()
                    .try_fold(*item, |cur, f| cur.get(f))
                    .is_some_and(|found| found == want)
            })?,
        };
    }
    Some(v)
}

impl PrinterColumn {
    /// A column from its definition; a path that does not parse yields empty cells.
    pub fn new(definition: CustomResourceColumnDefinition) -> Self {
        let steps = parse(&definition.json_path).unwrap_or_default();
        PrinterColumn { definition, steps }
    }

    /// The default `Age` column.
    pub fn age() -> Self {
        Self::new(CustomResourceColumnDefinition {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            ..Default::default()
        })
    }

    /// The table header.
    pub fn table_column(&self) -> TableColumn {
        let d = &self.definition;
        TableColumn {
            name: d.name.clone().into(),
            type_: d.type_.clone().into(),
            format: d.format.clone().unwrap_or_default().into(),
            description: d.description.clone().unwrap_or_default().into(),
            priority: d.priority.unwrap_or(0).max(0) as u32,
        }
    }

    /// This column's cell for `obj` (`cellForJSONValue`).
    pub fn cell(&self, obj: &Value, now: jiff::Timestamp) -> Value {
        if self.steps.is_empty() {
            return Value::Null;
        }
        let Some(found) = find(&self.steps, obj) else {
            return Value::Null;
        };
        match (self.definition.type_.as_str(), found) {
            ("date", Value::String(s)) => match s.parse::<jiff::Timestamp>() {
                Ok(t) => Value::String(since(Some(t), now)),
                Err(_) => Value::Null,
            },
            ("integer", v) if v.is_i64() || v.is_u64() => v.clone(),
            ("number", v) if v.is_number() => v.clone(),
            ("boolean", v) if v.is_boolean() => v.clone(),
            ("string", Value::String(s)) => Value::String(s.clone()),
            ("string", Value::Null) => Value::Null,
            // kubectl's JSONPath printer: scalars bare, objects and lists as JSON.
            ("string", other) => Value::String(other.to_string()),
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn column(name: &str, type_: &str, path: &str) -> PrinterColumn {
        PrinterColumn::new(CustomResourceColumnDefinition {
            name: name.into(),
            type_: type_.into(),
            json_path: path.into(),
            ..Default::default()
        })
    }

    #[test]
    fn cells_follow_paths_and_types() {
        let now: jiff::Timestamp = "2024-01-01T00:02:00Z".parse().expect("valid time");
        let obj = json!({
            "metadata": {"creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"a.b/c": "x"}},
            "spec": {"replicas": 3, "hosts": ["a.example", "b.example"]},
            "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}
        });
        assert_eq!(
            column("R", "integer", ".spec.replicas").cell(&obj, now),
            json!(3)
        );
        assert_eq!(
            column("H", "string", ".spec.hosts[1]").cell(&obj, now),
            json!("b.example")
        );
        assert_eq!(
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status"
            )
            .cell(&obj, now),
            json!("True")
        );
        assert_eq!(
            column("L", "string", ".metadata.labels['a.b/c']").cell(&obj, now),
            json!("x")
        );
        assert_eq!(PrinterColumn::age().cell(&obj, now), json!("2m"));
        assert_eq!(
            column("M", "string", ".spec.missing").cell(&obj, now),
            Value::Null
        );
        assert!(check_path(".spec[").is_err());
        assert!(check_path("spec").is_err());
    }
}
