//! The object printers of `-o json|yaml|name`: `k8s.io/cli-runtime/pkg/printers/json.go`,
//! `yaml.go`, `name.go`.
//!
//! As kubectl: JSON is indented by four spaces with keys sorted (Go marshals maps sorted),
//! several objects print as one `v1` `List`, YAML documents of `-w` are separated by `---`,
//! and `metadata.managedFields` is left out (`--show-managed-fields=false`).

use serde_json::{Value, json};

/// `-o` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The table with the extra (priority > 0) columns.
    Wide,
    /// The objects as YAML.
    Yaml,
    /// The objects as JSON.
    Json,
    /// `kind.group/name` per object.
    Name,
}

/// kubectl's `List` wrapper for several objects.
pub fn list(items: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "items": items,
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    })
}

/// Drops `metadata.managedFields`, as kubectl does unless `--show-managed-fields`.
pub fn without_managed_fields(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// JSON as kubectl prints it: four-space indent, sorted keys, trailing newline.
pub fn to_json(value: &Value) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Serializing a `Value` into memory cannot fail.
    let _ = serde::Serialize::serialize(value, &mut serializer);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push('\n');
    text
}

/// YAML as kubectl prints it (go-yaml's styles, see [`super::yaml`]).
pub fn to_yaml(value: &Value) -> String {
    super::yaml::to_yaml(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_indented_by_four_and_sorted() {
        let v = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "managedFields": []}});
        assert_eq!(
            to_json(&without_managed_fields(v)),
            "{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"Pod\",\n    \"metadata\": {\n        \"name\": \"p\"\n    }\n}\n"
        );
    }

    #[test]
    fn yaml_lists_sit_under_their_key() {
        let v = list(vec![
            json!({"kind": "Pod", "spec": {"containers": [{"name": "c"}]}}),
        ]);
        assert_eq!(
            to_yaml(&v),
            "apiVersion: v1\nitems:\n- kind: Pod\n  spec:\n    containers:\n    - name: c\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"
        );
    }
}
