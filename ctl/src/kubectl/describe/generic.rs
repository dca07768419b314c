//! The describer for any kind without a dedicated one (custom resources included): kubectl's
//! `genericDescriber` and `printUnstructuredContent`
//! (`staging/src/k8s.io/kubectl/pkg/describe/describe.go`).
//!
//! Every field is printed under a label made from its name (`creationTimestamp` →
//! `Creation Timestamp`, `apiVersion` → `API Version`), nested maps indented below, list
//! items one after another, keys sorted:
//!
//! ```text
//!   Name:         cfg
//!   Namespace:    default
//!   Labels:       <none>
//!   Annotations:  <none>
//!   API Version:  v1
//!   Data:
//!     Color:  blue
//!   Kind:         ConfigMap
//!   Metadata:
//!     Creation Timestamp:  2024-01-01T00:00:00Z
//!     ...
//! ```

use serde_json::Value;

use super::writer::{self, PrefixWriter};

/// Fields the header already showed, or that kubectl never shows.
const SKIP: [&str; 5] = [
    ".metadata.managedFields",
    ".metadata.name",
    ".metadata.namespace",
    ".metadata.labels",
    ".metadata.annotations",
];

/// Writes the generic description of `object` (without the events).
pub fn describe(w: &mut PrefixWriter, object: &Value) {
    let meta = &object["metadata"];
    w.field(0, "Name", meta["name"].as_str().unwrap_or_default());
    w.field(
        0,
        "Namespace",
        meta["namespace"].as_str().unwrap_or_default(),
    );
    let labels = serde_json::from_value(meta["labels"].clone()).ok();
    writer::labels(w, "Labels", labels.as_ref());
    let annotations = serde_json::from_value(meta["annotations"].clone()).ok();
    writer::annotations(w, "Annotations", annotations.as_ref());
    if let Some(map) = object.as_object() {
        content(w, 0, map, "");
    }
}

/// `printUnstructuredContent`: `map`'s fields at `level`; `prefix` is the JSON path so far
/// (`.metadata`), for the skip list.
fn content(w: &mut PrefixWriter, level: usize, map: &serde_json::Map<String, Value>, prefix: &str) {
    let mut fields: Vec<&String> = map.keys().collect();
    fields.sort();
    for field in fields {
        let path = format!("{prefix}.{field}");
        if SKIP.contains(&path.as_str()) {
            continue;
        }
        match &map[field] {
            Value::Object(child) => {
                w.write(level, &format!("{}:\n", smart_label(field)));
                content(w, level + 1, child, &path);
            }
            Value::Array(items) => {
                w.write(level, &format!("{}:\n", smart_label(field)));
                for item in items {
                    match item {
                        Value::Object(child) => content(w, level + 1, child, &path),
                        other => w.write(level + 1, &format!("{}\n", scalar(other))),
                    }
                }
            }
            other => w.write(
                level,
                &format!("{}:\t{}\n", smart_label(field), scalar(other)),
            ),
        }
    }
}

/// A scalar as Go's `%v` prints a decoded JSON value.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_owned(),
        other => other.to_string(),
    }
}

/// kubectl's `smartLabelFor`: camelCase split into capitalised words, common acronyms in
/// capitals; names with characters other than letters and `-` stay as they are.
pub fn smart_label(field: &str) -> String {
    if field.chars().any(|c| !c.is_alphabetic() && c != '-') {
        return field.to_owned();
    }
    const ACRONYMS: [&str; 5] = ["API", "URL", "UID", "OSB", "GUID"];
    camel_case_split(field)
        .into_iter()
        .filter(|part| part != "_")
        .map(|part| {
            let upper = part.to_uppercase();
            if ACRONYMS.contains(&upper.as_str()) {
                upper
            } else {
                let mut chars = part.chars();
                match chars.next() {
                    Some(first) => first.to_uppercase().chain(chars).collect(),
                    None => String::new(),
                }
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `github.com/fatih/camelcase.Split`: runs of lower case, upper case, digits and others;
/// an upper-case run followed by lower case gives its last letter to the next word
/// (`PDFLoader` → `PDF`, `Loader`).
fn camel_case_split(s: &str) -> Vec<String> {
    fn class(c: char) -> u8 {
        if c.is_lowercase() {
            1
        } else if c.is_uppercase() {
            2
        } else if c.is_numeric() {
            3
        } else {
            4
        }
    }
    let mut runs: Vec<Vec<char>> = Vec::new();
    let mut last_class = 0;
    for c in s.chars() {
        let k = class(c);
        match runs.last_mut() {
            Some(run) if k == last_class => run.push(c),
            _ => runs.push(vec![c]),
        }
        last_class = k;
    }
    for i in 0..runs.len().saturating_sub(1) {
        let upper_then_lower = runs[i].first().is_some_and(|c| c.is_uppercase())
            && runs[i + 1].first().is_some_and(|c| c.is_lowercase());
        if upper_then_lower && let Some(c) = runs[i].pop() {
            runs[i + 1].insert(0, c);
        }
    }
    runs.into_iter()
        .filter(|r| !r.is_empty())
        .map(|r| r.into_iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smart_labels() {
        assert_eq!(smart_label("creationTimestamp"), "Creation Timestamp");
        assert_eq!(smart_label("apiVersion"), "API Version");
        assert_eq!(smart_label("uid"), "UID");
        assert_eq!(smart_label("resourceVersion"), "Resource Version");
        assert_eq!(smart_label("PDFLoader"), "PDF Loader");
        assert_eq!(
            smart_label("app.kubernetes.io/name"),
            "app.kubernetes.io/name"
        );
        assert_eq!(smart_label("v1"), "v1");
    }

    #[test]
    fn nested_content() {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default", "uid": "u1",
                         "managedFields": [{}], "labels": {"a": "b"}},
            "data": {"color": "blue"},
            "items": ["x", {"name": "y"}]
        });
        let mut w = PrefixWriter::new();
        describe(&mut w, &cm);
        assert_eq!(
            w.finish(),
            "Name:         cfg\n\
             Namespace:    default\n\
             Labels:       a=b\n\
             Annotations:  <none>\n\
             API Version:  v1\n\
             Data:\n  \
             Color:  blue\n\
             Items:\n  \
             x\n  \
             Name:  y\n\
             Kind:    ConfigMap\n\
             Metadata:\n  \
             UID:  u1\n"
        );
    }
}
