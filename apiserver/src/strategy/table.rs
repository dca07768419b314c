//! Building blocks of `kubectl get` tables (`pkg/printers/internalversion/printers.go`):
//! column definitions with the descriptions Kubernetes serves, and cells shared by several
//! kinds (ages, creation times, container names and images, `<none>` placeholders).

use super::TableColumn;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use std::borrow::Cow;

/// A column definition. `priority` 1 marks `-o wide` columns.
pub const fn column(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: u32,
) -> TableColumn {
    TableColumn {
        name: Cow::Borrowed(name),
        type_: Cow::Borrowed(type_),
        format: Cow::Borrowed(""),
        description: Cow::Borrowed(description),
        priority,
    }
}

/// The `Age` column every kind ends (or nearly ends) with.
pub const fn age_column() -> TableColumn {
    column(
        "Age",
        "string",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
        0,
    )
}

/// The `Created At` column of the default table convertor (`rest.NewDefaultTableConvertor`),
/// which kinds without a printer of their own get (roles, cluster roles, CRDs).
pub const fn created_at_column() -> TableColumn {
    column(
        "Created At",
        "date",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
        0,
    )
}

/// The `Created At` cell: `metadata.creationTimestamp` in RFC 3339, UTC (Go's zero time
/// when unset, as the default table convertor prints it).
pub fn created_at(meta: &ObjectMeta) -> String {
    meta.creation_timestamp.as_ref().map_or_else(
        || "0001-01-01T00:00:00Z".to_owned(),
        |t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

/// A string cell.
pub fn text(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

/// An integer cell.
pub fn int(n: impl Into<i64>) -> Value {
    Value::from(n.into())
}

/// The `Containers` and `Images` cells of workloads (`layoutContainerCells`): names and images
/// joined by commas.
pub fn containers_and_images(spec: Option<&PodSpec>) -> [Value; 2] {
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""))
        .collect();
    [text(names.join(",")), text(images.join(","))]
}

/// The `Containers`, `Images` and `Selector` `-o wide` columns of workloads and jobs; each kind
/// describes its selector in its own words.
pub fn container_columns(selector_description: &'static str) -> Vec<TableColumn> {
    vec![
        column(
            "Containers",
            "string",
            "Names of each container in the template.",
            1,
        ),
        column(
            "Images",
            "string",
            "Images referenced by each container in the template.",
            1,
        ),
        column("Selector", "string", selector_description, 1),
    ]
}
