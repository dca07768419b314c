//! Serving a CustomResourceDefinition: the registry rows of its served versions and the
//! [`CustomResourceStrategy`] the generic registry calls for its objects.
//!
//! Mirrors `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go`
//! (`getOrCreateServingInfoFor`: one storage per served version) and
//! `pkg/registry/customresource/strategy.go` (prune → default → validate against the
//! version's schema, status reset on create when the status subresource is on, table columns
//! from `additionalPrinterColumns`):
//!
//! ```text
//! CRD websites.demo.miniplane.dev  versions v1 (storage), v1beta1 (served)
//!   ─▶ rows  demo.miniplane.dev/v1 websites       Website  Namespaced  status, scale
//!            demo.miniplane.dev/v1beta1 websites  Website  Namespaced  status, scale
//!   every row stores under /registry/demo.miniplane.dev/websites/<ns>/<name>
//! ```
//!
//! Versions use conversion strategy `None`: an object reads the same in every version but for
//! its `apiVersion`, which the registry sets from the version asked for. Unlike Kubernetes,
//! which stores objects in the storage version, an object is stored with the `apiVersion` of
//! the request that wrote it; no reader can tell the difference under `None`.

use super::printer_columns::PrinterColumn;
use super::{structural, validation};
use crate::gvk::GroupVersionKind;
use crate::registry::{ResourceInfo, Subresource};
use crate::strategy::field::{FieldPath, Rendered};
use crate::strategy::meta::{validate_metadata_value, validate_object_meta_update};
use crate::strategy::{FieldError, Strategy, TableColumn};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use std::sync::Arc;

/// The strategy of one served version of a custom resource.
#[derive(Debug, Clone)]
pub struct CustomResourceStrategy {
    gvk: GroupVersionKind,
    namespaced: bool,
    /// The version's structural schema (`None` only for a schema-less legacy CRD).
    schema: Option<JSONSchemaProps>,
    /// `x-kubernetes-preserve-unknown-fields` for the whole object (legacy
    /// `spec.preserveUnknownFields`).
    preserve_unknown_fields: bool,
    status: bool,
    columns: Vec<PrinterColumn>,
    /// The schema's `pattern`s, compiled once.
    patterns: validation::Patterns,
}

impl CustomResourceStrategy {
    /// The strategy of `version` of `crd`.
    pub fn new(crd: &CustomResourceDefinition, version: &CustomResourceDefinitionVersion) -> Self {
        let spec = &crd.spec;
        let declared = version
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        let columns = if declared.is_empty() {
            vec![PrinterColumn::age()]
        } else {
            declared.into_iter().map(PrinterColumn::new).collect()
        };
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.clone());
        CustomResourceStrategy {
            gvk: GroupVersionKind::new(&spec.group, &version.name, &spec.names.kind),
            namespaced: spec.scope == "Namespaced",
            patterns: schema
                .as_ref()
                .map(validation::Patterns::of)
                .unwrap_or_default(),
            schema,
            preserve_unknown_fields: spec.preserve_unknown_fields == Some(true),
            status: version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some()),
            columns,
        }
    }

    fn pruning_schema(&self) -> Option<&JSONSchemaProps> {
        self.schema
            .as_ref()
            .filter(|_| !self.preserve_unknown_fields)
    }

    fn validate_schema(&self, obj: &Value) -> Vec<FieldError> {
        match &self.schema {
            Some(schema) => validation::validate_with(schema, &self.patterns, obj),
            None => Vec::new(),
        }
    }
}

fn object_meta(obj: &Value) -> Result<ObjectMeta, Vec<FieldError>> {
    serde_json::from_value(obj["metadata"].clone()).map_err(|e| {
        vec![FieldError::invalid(
            &FieldPath::new("metadata"),
            Rendered(String::new()),
            &e.to_string(),
        )]
    })
}

impl Strategy for CustomResourceStrategy {
    fn gvk(&self) -> GroupVersionKind {
        self.gvk.clone()
    }

    fn has_status_subresource(&self) -> bool {
        self.status
    }

    /// Prunes unknown fields, then applies the schema's defaults. A custom resource always
    /// decodes (it is unstructured), so this never fails.
    fn default(&self, obj: &mut Value) -> Result<(), String> {
        if let Some(schema) = self.pruning_schema() {
            structural::prune(schema, obj);
        }
        if let Some(schema) = &self.schema {
            structural::apply_defaults(schema, obj);
        }
        Ok(())
    }

    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        match self.pruning_schema() {
            Some(schema) => structural::prune(schema, &mut obj.clone()),
            None => Vec::new(),
        }
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_metadata_value(obj, self.namespaced);
        errs.extend(self.validate_schema(obj));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = match (object_meta(new), object_meta(old)) {
            (Ok(n), Ok(o)) => validate_object_meta_update(&n, &o),
            (Err(e), _) | (_, Err(e)) => e,
        };
        errs.extend(self.validate_schema(new));
        errs
    }

    /// Without a status subresource every change but `metadata` is a new generation
    /// (`customResourceStrategy.PrepareForUpdate`); with one, changes outside `status`.
    fn bumps_generation(&self, new: &Value, old: &Value) -> bool {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                if self.status {
                    m.remove("status");
                }
            }
            v
        };
        strip(new) != strip(old)
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        self.columns
            .iter()
            .map(PrinterColumn::table_column)
            .collect()
    }

    fn table_row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        self.columns.iter().map(|c| c.cell(obj, now)).collect()
    }
}

/// Kubernetes' version priority (`version.CompareKubeAwareVersionStrings`): GA before beta
/// before alpha, higher numbers first, other names last in alphabetical order.
pub fn version_priority(v: &str) -> (u8, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>, String) {
    use std::cmp::Reverse;
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, major, 0));
        }
        for (rank, word) in [(1u8, "beta"), (2, "alpha")] {
            if let Some(n) = tail.strip_prefix(word) {
                return n.parse::<u64>().ok().map(|minor| (rank, major, minor));
            }
        }
        None
    });
    match parsed {
        Some((rank, major, minor)) => (rank, Reverse(major), Reverse(minor), String::new()),
        None => (3, Reverse(0), Reverse(0), v.to_owned()),
    }
}

/// The registry rows of an established CRD: one per served version, in priority order (so
/// discovery prefers the highest).
pub fn rows_for(crd: &CustomResourceDefinition) -> Vec<ResourceInfo> {
    let spec = &crd.spec;
    let names = crd
        .status
        .as_ref()
        .and_then(|s| s.accepted_names.clone())
        .unwrap_or_else(|| spec.names.clone());
    let crd_name = crd.metadata.name.clone().unwrap_or_default();
    let schema_json = |v: &CustomResourceDefinitionVersion| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .map(Arc::new)
    };
    let mut versions: Vec<&CustomResourceDefinitionVersion> =
        spec.versions.iter().filter(|v| v.served).collect();
    versions.sort_by_key(|v| version_priority(&v.name));
    versions
        .into_iter()
        .map(|version| {
            let mut subs = Vec::new();
            if let Some(s) = &version.subresources {
                if s.status.is_some() {
                    subs.push(Subresource::Status);
                }
                if s.scale.is_some() {
                    subs.push(Subresource::Scale);
                }
            }
            let mut row = ResourceInfo::new(
                &spec.group,
                &version.name,
                &names.kind,
                &names.plural,
                spec.scope == "Namespaced",
            )
            .with(&subs)
            .short(
                &names
                    .short_names
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            );
            row.singular = names
                .singular
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| names.kind.to_lowercase());
            row.categories = names.categories.clone().unwrap_or_default();
            row.strategy = Arc::new(CustomResourceStrategy::new(crd, version));
            row.openapi_schema = schema_json(version);
            row.deep_objects = spec.preserve_unknown_fields == Some(true)
                || row
                    .openapi_schema
                    .as_deref()
                    .is_some_and(preserves_unknown_fields);
            row.scale = version
                .subresources
                .as_ref()
                .and_then(|s| s.scale.as_ref())
                .map(|s| crate::registry::ScalePaths {
                    spec_replicas: s.spec_replicas_path.clone(),
                    status_replicas: s.status_replicas_path.clone(),
                    label_selector: s.label_selector_path.clone(),
                });
            row.crd = Some(crd_name.clone());
            row
        })
        .collect()
}

/// Whether a schema has `x-kubernetes-preserve-unknown-fields: true` anywhere: its objects may
/// then hold any JSON, nested as deep as a body may be.
fn preserves_unknown_fields(schema: &Value) -> bool {
    let mut pending = vec![schema];
    while let Some(v) = pending.pop() {
        match v {
            Value::Object(map) => {
                if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                    return true;
                }
                pending.extend(map.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut vs = vec!["v1alpha1", "foo", "v2", "v1beta2", "v1", "v1beta1", "v10"];
        vs.sort_by_key(|v| version_priority(v));
        assert_eq!(
            vs,
            vec!["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn rows_of_a_crd_follow_its_versions_and_names() {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "websites.demo.miniplane.dev"},
            "spec": {
                "group": "demo.miniplane.dev", "scope": "Namespaced",
                "names": {"plural": "websites", "kind": "Website", "shortNames": ["ws"], "categories": ["all"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}}}}},
                     "subresources": {"status": {}}},
                    {"name": "v0", "served": false, "storage": false}
                ]
            }
        }))
        .expect("test CRD decodes");
        let rows = rows_for(&crd);
        let versions: Vec<&str> = rows.iter().map(|r| r.gvr.version.as_str()).collect();
        assert_eq!(versions, vec!["v1", "v1beta1"]);
        assert_eq!(rows[0].singular, "website");
        assert_eq!(rows[0].short_names, vec!["ws"]);
        assert!(rows[0].has_status() && !rows[1].has_status());
        assert_eq!(rows[0].crd.as_deref(), Some("websites.demo.miniplane.dev"));
        let mut obj = json!({"apiVersion": "demo.miniplane.dev/v1", "kind": "Website",
            "metadata": {"name": "a", "namespace": "default"}, "spec": {"extra": true}});
        assert_eq!(rows[0].strategy.unknown_fields(&obj), vec!["spec.extra"]);
        rows[0]
            .strategy
            .default(&mut obj)
            .expect("custom resources always default");
        assert_eq!(obj["spec"], json!({"replicas": 1}));
        let cols = rows[0].strategy.table_columns();
        assert_eq!(cols[0].name, "Age");
    }
}
