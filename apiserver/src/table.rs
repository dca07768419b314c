//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/registry/rest/table.go` and the printers of
//! `pkg/printers/internalversion/printers.go`. The registry adds the `Name` column (format
//! `name`) and asks the kind's strategy for the rest:
//!
//! ```text
//! {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"12"},
//!  "columnDefinitions":[{"name":"Name","type":"string","format":"name",...}, ...strategy's],
//!  "rows":[{"cells":["nginx", ...strategy's],"object":{"kind":"PartialObjectMetadata",...}}]}
//! ```

use crate::error::{ApiError, Result};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::strategy::TableColumn;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};
use std::borrow::Borrow;

/// What each row's `object` carries (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses `?includeObject=`.
    pub fn parse(v: Option<&str>) -> Result<IncludeObject> {
        match v {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(ApiError::BadRequest(format!(
                "invalid includeObject value {other:?}: must be one of None, Metadata, Object"
            ))),
        }
    }
}

fn column_json(c: &TableColumn) -> Value {
    json!({
        "name": c.name,
        "type": c.type_,
        "format": c.format,
        "description": c.description,
        "priority": c.priority,
    })
}

/// The column definitions of a kind: `Name`, then the strategy's.
pub fn columns(info: &ResourceInfo) -> Vec<Value> {
    let name = TableColumn {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.".into(),
        priority: 0,
    };
    let first = info
        .strategy
        .table_has_name_column()
        .then(|| column_json(&name));
    first
        .into_iter()
        .chain(info.strategy.table_columns().iter().map(column_json))
        .collect()
}

/// One row for an object.
pub fn row(
    info: &ResourceInfo,
    obj: &Value,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    serde_json::to_value(Row {
        info,
        obj,
        include,
        now,
    })
    .unwrap_or(Value::Null)
}

/// A Table of `objects`. `list_meta` is the list's `metadata` (resourceVersion, continue);
/// `with_columns` is false for watch events after the first, which carry rows only
/// (`columnDefinitions: null`, as Kubernetes' `NoHeaders` after the first watch event).
pub fn table<T: Borrow<Value>>(
    info: &ResourceInfo,
    objects: &[T],
    list_meta: Value,
    include: IncludeObject,
    with_columns: bool,
    now: jiff::Timestamp,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": if with_columns { Value::Array(columns(info)) } else { Value::Null },
        "rows": objects.iter().map(|o| row(info, o.borrow(), include, now)).collect::<Vec<_>>(),
    })
}

/// [`table`] written as JSON (and a newline), as kube-apiserver writes it: the rows' objects
/// are written from the objects themselves, not copied into a tree first (a list of 500
/// Nodes' metadata is ~1 MB of JSON).
pub fn write_table<T: Borrow<Value>>(
    info: &ResourceInfo,
    objects: &[T],
    list_meta: &Value,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Vec<u8> {
    let doc = TableDocument {
        info,
        objects,
        list_meta,
        include,
        now,
    };
    let mut out = Vec::with_capacity(4096);
    if serde_json::to_writer(&mut out, &doc).is_err() {
        out.clear();
    }
    out.push(b'\n');
    out
}

struct TableDocument<'a, T> {
    info: &'a ResourceInfo,
    objects: &'a [T],
    list_meta: &'a Value,
    include: IncludeObject,
    now: jiff::Timestamp,
}

impl<T: Borrow<Value>> Serialize for TableDocument<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("kind", "Table")?;
        map.serialize_entry("apiVersion", "meta.k8s.io/v1")?;
        map.serialize_entry("metadata", self.list_meta)?;
        map.serialize_entry("columnDefinitions", &columns(self.info))?;
        map.serialize_entry("rows", &Rows(self))?;
        map.end()
    }
}

/// The rows of a table, each written as it is made.
struct Rows<'a, T>(&'a TableDocument<'a, T>);

impl<T: Borrow<Value>> Serialize for Rows<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let doc = self.0;
        serializer.collect_seq(doc.objects.iter().map(|o| Row {
            info: doc.info,
            obj: o.borrow(),
            include: doc.include,
            now: doc.now,
        }))
    }
}

/// One row: the name and the strategy's cells, then the object per `includeObject`
/// (`PartialObjectMetadata` written from the object's own metadata).
struct Row<'a> {
    info: &'a ResourceInfo,
    obj: &'a Value,
    include: IncludeObject,
    now: jiff::Timestamp,
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut cells = Vec::new();
        if self.info.strategy.table_has_name_column() {
            cells.push(json!(meta::name(self.obj).unwrap_or_default()));
        }
        cells.extend(self.info.strategy.table_row(self.obj, self.now));
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("cells", &cells)?;
        match self.include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                map.serialize_entry("object", &PartialMetadata(self.obj))?;
            }
            IncludeObject::Object => {
                map.serialize_entry("object", &crate::wire::Ordered(self.obj))?;
            }
        }
        map.end()
    }
}

/// An object's `PartialObjectMetadata` (`meta.AsPartialObjectMetadata`), written from it.
struct PartialMetadata<'a>(&'a Value);

impl Serialize for PartialMetadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("kind", "PartialObjectMetadata")?;
        map.serialize_entry("apiVersion", "meta.k8s.io/v1")?;
        match self.0.get("metadata") {
            Some(m) => map.serialize_entry("metadata", m)?,
            None => map.serialize_entry("metadata", &serde_json::Map::new())?,
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_column_comes_first_and_rows_carry_metadata() {
        let info = ResourceInfo::new("apps", "v1", "Deployment", "deployments", true);
        let obj = json!({"metadata": {"name": "nginx", "namespace": "default"}, "spec": {}});
        let t = table(
            &info,
            &[obj],
            json!({"resourceVersion": "5"}),
            IncludeObject::Metadata,
            true,
            jiff::Timestamp::now(),
        );
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["rows"][0]["cells"][0], "nginx");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "default");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn a_written_table_is_the_table_in_kube_apiservers_member_order() {
        let info = ResourceInfo::new("apps", "v1", "Deployment", "deployments", true);
        let objs = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "a", "namespace": "default"}, "spec": {"replicas": 2}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"}}),
        ];
        let now = jiff::Timestamp::now();
        let meta = json!({"resourceVersion": "5", "continue": "x"});
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            let bytes = write_table(&info, &objs, &meta, include, now);
            assert_eq!(bytes.last(), Some(&b'\n'));
            let written: Value = serde_json::from_slice(&bytes).expect("JSON");
            assert_eq!(
                written,
                table(&info, &objs, meta.clone(), include, true, now)
            );
        }
        let text = String::from_utf8(write_table(
            &info,
            &objs,
            &meta,
            IncludeObject::Metadata,
            now,
        ))
        .expect("UTF-8");
        assert!(text.starts_with(r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#));
        assert!(text.contains(
            r#""object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"default"}}"#
        ));
        let text = String::from_utf8(write_table(&info, &objs, &meta, IncludeObject::Object, now))
            .expect("UTF-8");
        assert!(
            text.contains(r#""object":{"kind":"Deployment","apiVersion":"apps/v1","metadata""#)
        );
    }
}
