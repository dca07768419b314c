//! core/v1 Namespace (`pkg/registry/core/namespace/strategy.go`, `pkg/apis/core/v1/defaults.go`
//! `SetDefaults_Namespace`/`SetDefaults_NamespaceStatus`, `ValidateNamespace` in
//! `pkg/apis/core/validation/validation.go`, and `printNamespace`).
//!
//! A namespace is created `Active`, labelled `kubernetes.io/metadata.name=<name>`, with the
//! `kubernetes` finalizer in `spec.finalizers`: the namespace controller empties the namespace
//! and removes that finalizer (through `/finalize`) before the namespace can go away.

use super::field::FieldPath;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::validation::{NameRule, is_qualified_name};
use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus};
use serde_json::Value;

/// The label every namespace carries with its own name.
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";
/// The finalizer the namespace controller owns.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The Namespace rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct NamespaceRules;

impl KindRules for NamespaceRules {
    type Object = Namespace;
    const NAME_RULE: NameRule = NameRule::Dns1123Label;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut Namespace) {
        if let Some(name) = obj.metadata.name.clone().filter(|n| !n.is_empty()) {
            obj.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(LABEL_METADATA_NAME.to_owned(), name);
        }
        let status = obj.status.get_or_insert_with(NamespaceStatus::default);
        if status.phase.as_deref().unwrap_or("").is_empty() {
            status.phase = Some("Active".to_owned());
        }
    }

    fn prepare_for_create(&self, obj: &mut Namespace) {
        obj.status = Some(NamespaceStatus {
            phase: Some("Active".to_owned()),
            ..Default::default()
        });
        let finalizers = obj
            .spec
            .get_or_insert_with(NamespaceSpec::default)
            .finalizers
            .get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
            finalizers.push(FINALIZER_KUBERNETES.to_owned());
        }
    }

    fn prepare_for_update(&self, new: &mut Namespace, old: &Namespace) {
        // `spec.finalizers` changes only through the `/finalize` subresource.
        new.spec.clone_from(&old.spec);
    }

    fn validate(&self, obj: &Namespace) -> Vec<FieldError> {
        let path = FieldPath::new("spec").child("finalizers");
        let mut errs = Vec::new();
        for f in obj.spec.iter().flat_map(|s| s.finalizers.iter().flatten()) {
            for msg in is_qualified_name(f) {
                errs.push(FieldError::invalid(&path, f, &msg));
            }
            let standard = ["kubernetes", "orphan", "foregroundDeletion"];
            if !f.contains('/') && !standard.contains(&f.as_str()) {
                errs.push(FieldError::invalid(
                    &path,
                    f,
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
        errs
    }

    fn selectable_fields(&self, obj: &Namespace) -> Vec<(&'static str, String)> {
        let phase = obj
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        vec![("status.phase", phase)]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column("Status", "string", "The status of the namespace", 0),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &Namespace, now: jiff::Timestamp) -> Vec<Value> {
        let phase = obj
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        vec![text(phase), text(age(&obj.metadata, now))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    #[test]
    fn created_active_with_label_and_finalizer() {
        let s = Typed(NamespaceRules);
        let mut obj = json!({"metadata": {"name": "team-a"}});
        s.default(&mut obj).unwrap();
        s.prepare_for_create(&mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        assert!(s.validate_create(&obj).is_empty());
        assert_eq!(
            s.selectable_fields(&obj),
            vec![("status.phase", "Active".to_owned())]
        );
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![json!("Active"), json!("<unknown>")]
        );
    }

    #[test]
    fn name_is_a_dns_label() {
        let s = Typed(NamespaceRules);
        let errs: Vec<String> =
            crate::strategy::messages(&s.validate_create(&json!({"metadata": {"name": "a.b"}})));
        assert_eq!(
            errs,
            vec!["metadata.name: Invalid value: \"a.b\": must not contain dots"]
        );
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(
            &json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["custom"]}}),
        ));
        assert_eq!(
            errs,
            vec![
                "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
    }

    #[test]
    fn finalizers_survive_updates() {
        let s = Typed(NamespaceRules);
        let old = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}});
        let mut new = json!({"metadata": {"name": "a"}});
        s.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"], json!({"finalizers": ["kubernetes"]}));
    }
}
