//! Typed access to the parts of an object the server owns or reads: `apiVersion`, `kind`,
//! `metadata` (`ObjectMeta`), and the top-level `spec`/`status` split.
//!
//! Mirrors apimachinery's `pkg/api/meta` accessors (`meta.Accessor(obj)`). Objects travel as
//! JSON values so custom resources share the code path; every JSON path the registry touches is
//! spelled once, here, so the rest of the crate reads `meta::name(&obj)` rather than
//! `obj["metadata"]["name"]`.

use serde_json::{Map, Value};

/// The finalizer a Foreground deletion adds (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
/// The finalizer an Orphan deletion adds (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";

/// Kubernetes' timestamp format (RFC 3339, second precision, UTC).
pub fn format_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
/// Parses a Kubernetes timestamp.
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

fn str_at<'a>(obj: &'a Value, top: &str, field: &str) -> Option<&'a str> {
    obj.get(top)?.get(field)?.as_str().filter(|s| !s.is_empty())
}

/// The object's `apiVersion`.
pub fn api_version(obj: &Value) -> Option<&str> {
    obj.get("apiVersion")?.as_str().filter(|s| !s.is_empty())
}

/// The object's `kind`.
pub fn kind(obj: &Value) -> Option<&str> {
    obj.get("kind")?.as_str().filter(|s| !s.is_empty())
}

/// Sets `apiVersion` and `kind`.
pub fn set_type(obj: &mut Value, api_version: &str, kind: &str) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.into()));
        m.insert("kind".into(), Value::String(kind.into()));
    }
}

/// `metadata`, created empty if missing (the object must be a JSON object).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj
        .as_object_mut()
        .expect("an object was just ensured above");
    let md = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !md.is_object() {
        *md = Value::Object(Map::new());
    }
    md.as_object_mut()
        .expect("metadata was just made an object")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "name")
}

/// `metadata.generateName`.
pub fn generate_name(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "generateName")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "namespace")
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "uid")
}

/// `metadata.resourceVersion`.
pub fn resource_version(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "resourceVersion")
}

/// `metadata.deletionTimestamp`.
pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    str_at(obj, "metadata", "deletionTimestamp")
}

/// `metadata.generation` (0 when absent).
pub fn generation(obj: &Value) -> i64 {
    obj.get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `metadata.deletionGracePeriodSeconds`.
pub fn deletion_grace_period_seconds(obj: &Value) -> Option<i64> {
    obj.get("metadata")?
        .get("deletionGracePeriodSeconds")?
        .as_i64()
}

/// `metadata.labels`, for matching a label selector (none when absent).
pub fn labels(obj: &Value) -> ObjectLabels<'_> {
    ObjectLabels(
        obj.get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object),
    )
}

/// An object's `metadata.labels` as a label selector reads them, straight from the JSON (no
/// copy per object: list, watch and deletecollection match every object they pass). A label
/// whose value is not a string counts as absent.
#[derive(Debug, Clone, Copy)]
pub struct ObjectLabels<'a>(Option<&'a serde_json::Map<String, Value>>);

impl apimachinery::labels::Labels for ObjectLabels<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }
}

/// The value of one label.
#[cfg(test)]
pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")?.get("labels")?.get(key)?.as_str()
}

/// `metadata.finalizers` (empty when absent).
pub fn finalizers(obj: &Value) -> Vec<String> {
    string_list(obj.get("metadata").and_then(|m| m.get("finalizers")))
}

/// Drops `metadata.finalizers` and `metadata.ownerReferences` when they are empty lists, as
/// Go's `omitempty` does when Kubernetes stores an object (the last finalizer removed by a
/// `$deleteFromPrimitiveList` patch leaves no `finalizers: []` behind).
pub fn drop_empty_meta_lists(obj: &mut Value) {
    let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["finalizers", "ownerReferences"] {
        if md
            .get(field)
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            md.remove(field);
        }
    }
}

/// Replaces `metadata.finalizers` (removes the field when empty).
pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    let md = metadata_mut(obj);
    if finalizers.is_empty() {
        md.remove("finalizers");
    } else {
        md.insert(
            "finalizers".into(),
            Value::Array(finalizers.into_iter().map(Value::String).collect()),
        );
    }
}

/// The strings of a JSON array (other items skipped; empty when it is not an array).
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets a string field of `metadata` (removes it when `None`).
pub fn set_meta_str(obj: &mut Value, field: MetaField, value: Option<&str>) {
    let md = metadata_mut(obj);
    match value {
        Some(v) => {
            md.insert(field.json_name().into(), Value::String(v.into()));
        }
        None => {
            md.remove(field.json_name());
        }
    }
}

/// Sets a number field of `metadata` (removes it when `None`).
pub fn set_meta_i64(obj: &mut Value, field: MetaField, value: Option<i64>) {
    let md = metadata_mut(obj);
    match value {
        Some(v) => {
            md.insert(field.json_name().into(), Value::from(v));
        }
        None => {
            md.remove(field.json_name());
        }
    }
}

/// A `metadata` field the server writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaField {
    /// `name`
    Name,
    /// `namespace`
    Namespace,
    /// `uid`
    Uid,
    /// `resourceVersion`
    ResourceVersion,
    /// `creationTimestamp`
    CreationTimestamp,
    /// `deletionTimestamp`
    DeletionTimestamp,
    /// `deletionGracePeriodSeconds`
    DeletionGracePeriodSeconds,
    /// `generation`
    Generation,
    /// `managedFields`
    ManagedFields,
}

impl MetaField {
    /// Fields the server owns and a client write may not change (copied from the stored object
    /// on update; `BeforeUpdate` in `pkg/registry/rest/update.go`).
    pub const SERVER_OWNED: [MetaField; 5] = [
        MetaField::Uid,
        MetaField::CreationTimestamp,
        MetaField::DeletionTimestamp,
        MetaField::DeletionGracePeriodSeconds,
        MetaField::Generation,
    ];

    /// The JSON name.
    pub fn json_name(self) -> &'static str {
        match self {
            MetaField::Name => "name",
            MetaField::Namespace => "namespace",
            MetaField::Uid => "uid",
            MetaField::ResourceVersion => "resourceVersion",
            MetaField::CreationTimestamp => "creationTimestamp",
            MetaField::DeletionTimestamp => "deletionTimestamp",
            MetaField::DeletionGracePeriodSeconds => "deletionGracePeriodSeconds",
            MetaField::Generation => "generation",
            MetaField::ManagedFields => "managedFields",
        }
    }
}

/// Copies one `metadata` field from `from` to `to` (removing it from `to` if `from` lacks it).
pub fn copy_meta(from: &Value, to: &mut Value, field: MetaField) {
    let v = from
        .get("metadata")
        .and_then(|m| m.get(field.json_name()))
        .cloned();
    let md = metadata_mut(to);
    match v {
        Some(v) => {
            md.insert(field.json_name().into(), v);
        }
        None => {
            md.remove(field.json_name());
        }
    }
}

/// The top-level `status`.
pub fn status(obj: &Value) -> Option<&Value> {
    obj.get("status")
}

/// Replaces the top-level `status` (removes it when `None`).
pub fn set_status(obj: &mut Value, status: Option<Value>) {
    if let Some(m) = obj.as_object_mut() {
        match status {
            Some(s) => {
                m.insert("status".into(), s);
            }
            None => {
                m.remove("status");
            }
        }
    }
}

/// `spec.<field>` as a string.
pub fn spec_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    str_at(obj, "spec", field)
}

/// `spec.<field>` as an integer.
pub fn spec_i64(obj: &Value, field: &str) -> Option<i64> {
    obj.get("spec")?.get(field)?.as_i64()
}

/// `status.<field>` as a string.
pub fn status_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    str_at(obj, "status", field)
}

/// `spec`, created empty if missing.
pub fn spec_mut(obj: &mut Value) -> &mut Map<String, Value> {
    top_object_mut(obj, "spec")
}

/// `status`, created empty if missing.
pub fn status_mut(obj: &mut Value) -> &mut Map<String, Value> {
    top_object_mut(obj, "status")
}

fn top_object_mut<'a>(obj: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj
        .as_object_mut()
        .expect("an object was just ensured above");
    let v = m.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
        .expect("the field was just made an object")
}

/// A namespace's `spec.finalizers`.
pub fn spec_finalizers(obj: &Value) -> Vec<String> {
    string_list(obj.get("spec").and_then(|s| s.get("finalizers")))
}

/// The object as `PartialObjectMetadata` (`meta.k8s.io/v1`), as Tables embed it.
pub fn partial_object_metadata(obj: &Value) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accessors_read_and_write_metadata() {
        let mut o = json!({"metadata": {"name": "a", "labels": {"app": "x"}}});
        assert_eq!(name(&o), Some("a"));
        assert_eq!(label(&o, "app"), Some("x"));
        set_meta_str(&mut o, MetaField::Uid, Some("u"));
        assert_eq!(uid(&o), Some("u"));
        set_finalizers(&mut o, vec!["f".into()]);
        assert_eq!(finalizers(&o), vec!["f".to_string()]);
        set_finalizers(&mut o, vec![]);
        assert!(o["metadata"].get("finalizers").is_none());
        let mut sent = serde_json::json!({"metadata": {"name": "p", "finalizers": [], "ownerReferences": [], "labels": {}}});
        drop_empty_meta_lists(&mut sent);
        assert_eq!(
            sent,
            serde_json::json!({"metadata": {"name": "p", "labels": {}}})
        );
    }

    #[test]
    fn time_round_trips_in_kubernetes_format() {
        let t: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().expect("valid");
        assert_eq!(format_time(t), "2024-01-02T03:04:05Z");
        assert_eq!(parse_time("2024-01-02T03:04:05Z"), Some(t));
    }
}
