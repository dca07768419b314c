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
use serde_json::{Value, json};

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
    let mut cells = Vec::new();
    if info.strategy.table_has_name_column() {
        cells.push(json!(meta::name(obj).unwrap_or_default()));
    }
    cells.extend(info.strategy.table_row(obj, now));
    let mut row = json!({ "cells": cells });
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => row["object"] = meta::partial_object_metadata(obj),
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

/// A Table of `objects`. `list_meta` is the list's `metadata` (resourceVersion, continue);
/// `with_columns` is false for watch events after the first, which carry rows only
/// (`columnDefinitions: null`, as Kubernetes' `NoHeaders` after the first watch event).
pub fn table(
    info: &ResourceInfo,
    objects: &[Value],
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
        "rows": objects.iter().map(|o| row(info, o, include, now)).collect::<Vec<_>>(),
    })
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
}
