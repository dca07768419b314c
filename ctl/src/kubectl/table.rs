//! Printing server-side tables (`meta.k8s.io/v1` `Table`) as `kubectl get` does:
//! `k8s.io/cli-runtime/pkg/printers/tableprinter.go` (`printTable`, `decorateTable`).
//!
//! The server decides the columns and renders the cells (that is how `kubectl get` shows
//! READY, STATUS or AGE for any kind); the client only chooses which columns to show and
//! decorates:
//!
//! ```text
//!   columns with priority 0 ─────────┐   -o wide: all columns
//!   -A: NAMESPACE first (from each row's object.metadata.namespace)
//!   several types: the name cell becomes `deployment.apps/web`
//!   headers upper-cased, cells → text (numbers as integers, null as empty), aligned
//! ```

use apimachinery::duration::since;
use serde::Deserialize;
use serde_json::Value;

/// A `meta.k8s.io/v1` `Table` (only what printing needs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    /// Column definitions, in cell order. Watch events after the first carry none (null):
    /// the columns of the first apply.
    #[serde(default, deserialize_with = "null_as_default")]
    pub column_definitions: Vec<Column>,
    /// One row per object.
    #[serde(default, deserialize_with = "null_as_default")]
    pub rows: Vec<Row>,
    /// `resourceVersion` (where a watch starts) and `continue` (the next page).
    #[serde(default)]
    pub metadata: ListMeta,
}

/// `metadata` of a list or table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The list's resource version.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// The continue token of the next page, if any.
    #[serde(default, rename = "continue")]
    pub continue_: Option<String>,
}

/// `null` (Go's nil slice) as the empty value.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A `TableColumnDefinition`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Column {
    /// Human name, e.g. `Up-to-date`.
    pub name: String,
    /// `name` marks the column holding the object's name.
    #[serde(default)]
    pub format: String,
    /// 0: always shown; more: only with `-o wide`.
    #[serde(default)]
    pub priority: i32,
}

/// A `TableRow`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Row {
    /// Cell values, one per column.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cells: Vec<Value>,
    /// The object (or its `PartialObjectMetadata`), if the server included it.
    #[serde(default)]
    pub object: Option<Value>,
}

impl Row {
    /// `object.metadata.namespace`, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.object
            .as_ref()
            .and_then(|o| o["metadata"]["namespace"].as_str())
            .unwrap_or_default()
    }
}

/// How to print (kubectl's `PrintOptions`).
#[derive(Debug, Clone, Default)]
pub struct PrintOptions {
    /// `-o wide`: show the priority>0 columns too.
    pub wide: bool,
    /// `-A`: a NAMESPACE column first.
    pub with_namespace: bool,
    /// Several types at once: prefix names with `deployment.apps/`.
    pub kind_prefix: Option<String>,
    /// `--no-headers`.
    pub no_headers: bool,
}

/// The header and rows of `table` as tab-separated lines, ready for [`super::tabwriter`].
/// `header` false leaves the header out (rows of a watch after the first print).
pub fn render(table: &Table, options: &PrintOptions, header: bool) -> String {
    let shown: Vec<usize> = table
        .column_definitions
        .iter()
        .enumerate()
        .filter(|(_, c)| options.wide || c.priority == 0)
        .map(|(i, _)| i)
        .collect();
    let name_column = table
        .column_definitions
        .iter()
        .position(|c| c.format == "name");
    let mut lines: Vec<Vec<String>> = Vec::new();
    if header && !options.no_headers {
        let mut cells = Vec::new();
        if options.with_namespace {
            cells.push("NAMESPACE".to_owned());
        }
        cells.extend(
            shown
                .iter()
                .map(|&i| table.column_definitions[i].name.to_uppercase()),
        );
        lines.push(cells);
    }
    for row in &table.rows {
        let mut cells = Vec::new();
        if options.with_namespace {
            cells.push(row.namespace().to_owned());
        }
        for &i in &shown {
            let mut text = row.cells.get(i).map(cell_text).unwrap_or_default();
            if let (Some(prefix), Some(n)) = (&options.kind_prefix, name_column)
                && n == i
            {
                text = format!("{prefix}/{text}");
            }
            cells.push(text);
        }
        lines.push(cells);
    }
    let mut out = String::new();
    for cells in lines {
        out.push_str(&cells.join("\t"));
        out.push('\n');
    }
    out
}

/// kubectl's fallback for servers without server-side printing: NAME and AGE columns from
/// an object or a list's items (`printers.NewTablePrinter` over `metav1beta1` defaults).
pub fn from_objects(value: &Value, now: jiff::Timestamp) -> Table {
    let items: Vec<&Value> = match value["items"].as_array() {
        Some(items) => items.iter().collect(),
        None => vec![value],
    };
    let column = |name: &str, format: &str| Column {
        name: name.to_owned(),
        format: format.to_owned(),
        priority: 0,
    };
    Table {
        column_definitions: vec![column("Name", "name"), column("Age", "")],
        rows: items
            .into_iter()
            .map(|item| {
                let created = item["metadata"]["creationTimestamp"]
                    .as_str()
                    .and_then(|t| t.parse().ok());
                Row {
                    cells: vec![
                        item["metadata"]["name"].clone(),
                        Value::String(since(created, now)),
                    ],
                    object: Some(item.clone()),
                }
            })
            .collect(),
        metadata: ListMeta {
            resource_version: value["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_owned),
            continue_: value["metadata"]["continue"].as_str().map(str::to_owned),
        },
    }
}

/// A cell as kubectl prints it: strings cut at the first line break (then `...`), numbers
/// as Go prints them, null as nothing.
fn cell_text(cell: &Value) -> String {
    match cell {
        Value::Null => String::new(),
        Value::String(s) => match s.find(['\n', '\r', '\x0c']) {
            Some(i) => format!("{}...", &s[..i]),
            None => s.clone(),
        },
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tabwriter::TabWriter;
    use super::*;
    use serde_json::json;

    fn deployments() -> Table {
        serde_json::from_value(json!({
            "kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "42"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "priority": 0},
                {"name": "Ready", "type": "string", "format": "", "priority": 0},
                {"name": "Up-to-date", "type": "integer", "format": "", "priority": 0},
                {"name": "Age", "type": "string", "format": "", "priority": 0},
                {"name": "Images", "type": "string", "format": "", "priority": 1}],
            "rows": [
                {"cells": ["web", "1/2", 2, "5s", "nginx:1.25"],
                 "object": {"metadata": {"name": "web", "namespace": "default", "resourceVersion": "40"}}},
                {"cells": ["api", "0/1", 0, "2m", null],
                 "object": {"metadata": {"name": "api", "namespace": "prod"}}}]
        }))
        .unwrap()
    }

    fn print(options: &PrintOptions) -> String {
        TabWriter::table().format(&render(&deployments(), options, true))
    }

    #[test]
    fn default_columns() {
        assert_eq!(
            print(&PrintOptions::default()),
            "NAME   READY   UP-TO-DATE   AGE\n\
             web    1/2     2            5s\n\
             api    0/1     0            2m\n"
        );
        assert_eq!(
            deployments().metadata.resource_version.as_deref(),
            Some("42")
        );
    }

    #[test]
    fn wide_all_namespaces_and_kind_prefix() {
        let out = print(&PrintOptions {
            wide: true,
            with_namespace: true,
            kind_prefix: Some("deployment.apps".into()),
            no_headers: false,
        });
        assert_eq!(
            out,
            "NAMESPACE   NAME                  READY   UP-TO-DATE   AGE   IMAGES\n\
             default     deployment.apps/web   1/2     2            5s    nginx:1.25\n\
             prod        deployment.apps/api   0/1     0            2m    \n"
        );
    }

    #[test]
    fn no_headers_and_cells() {
        let out = print(&PrintOptions {
            no_headers: true,
            ..PrintOptions::default()
        });
        assert_eq!(out, "web   1/2   2     5s\napi   0/1   0     2m\n");
        assert_eq!(cell_text(&json!("a\nb")), "a...");
        assert_eq!(cell_text(&json!(1.5)), "1.5");
        assert_eq!(cell_text(&json!(true)), "true");
    }

    #[test]
    fn fallback_name_and_age() {
        let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        let list = json!({"kind": "FooList", "metadata": {"resourceVersion": "5"}, "items": [
            {"metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z"}}]});
        let table = from_objects(&list, now);
        assert_eq!(
            TabWriter::table().format(&render(&table, &PrintOptions::default(), true)),
            "NAME   AGE\na      10m\n"
        );
        assert_eq!(table.metadata.resource_version.as_deref(), Some("5"));
    }
}
