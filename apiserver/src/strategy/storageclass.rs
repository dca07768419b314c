//! storage.k8s.io/v1 StorageClass: `SetDefaults_StorageClass`
//! (`pkg/apis/storage/v1/defaults.go`), `ValidateStorageClass` / `ValidateStorageClassUpdate`
//! (`pkg/apis/storage/validation/validation.go`), `printStorageClass`
//! (`pkg/printers/internalversion/printers.go`) and `IsDefaultAnnotation`
//! (`pkg/apis/storage/util/helpers.go`).
//!
//! kubectl prints a default class as `standard (default)`: the printer writes the name cell
//! itself, so this kind lists its own `Name` column instead of the registry's.
//! Simplified: `allowedTopologies` is not checked.

use super::field::{FieldPath, Rendered, validate_immutable};
use super::table::{age_column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::validation::is_qualified_name;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use std::borrow::Cow;

/// The annotation that makes a class the default (`IsDefaultStorageClassAnnotation`).
pub const IS_DEFAULT_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// Its beta predecessor, still honoured (`BetaIsDefaultStorageClassAnnotation`).
pub const BETA_IS_DEFAULT_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// A class's reclaim policies.
const RECLAIM_POLICIES: [&str; 2] = ["Delete", "Retain"];
/// A class's binding modes.
const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];
/// `maxProvisionerParameterLen`.
const MAX_PARAMETERS: usize = 512;
/// `maxProvisionerParameterSize`: 256 kB.
const MAX_PARAMETERS_SIZE: usize = 256 * (1 << 10);

/// `IsDefaultAnnotation`: either annotation is `"true"`.
pub fn is_default(meta: &ObjectMeta) -> bool {
    meta.annotations.as_ref().is_some_and(|a| {
        a.get(IS_DEFAULT_ANNOTATION).map(String::as_str) == Some("true")
            || a.get(BETA_IS_DEFAULT_ANNOTATION).map(String::as_str) == Some("true")
    })
}

/// The StorageClass rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct StorageClassRules;

impl KindRules for StorageClassRules {
    type Object = StorageClass;
    const TABLE_HAS_NAME_COLUMN: bool = false;

    fn set_defaults(&self, obj: &mut StorageClass) {
        obj.reclaim_policy
            .get_or_insert_with(|| "Delete".to_owned());
        obj.volume_binding_mode
            .get_or_insert_with(|| "Immediate".to_owned());
    }

    fn validate(&self, obj: &StorageClass) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let path = FieldPath::new("provisioner");
        if obj.provisioner.is_empty() {
            errs.push(FieldError::required(&path, ""));
        } else {
            let lower = obj.provisioner.to_lowercase();
            for msg in is_qualified_name(&lower) {
                errs.push(FieldError::invalid(&path, lower.as_str(), &msg));
            }
        }
        let params = obj.parameters.clone().unwrap_or_default();
        let path = FieldPath::new("parameters");
        if params.len() > MAX_PARAMETERS {
            errs.push(FieldError::too_long(&path, MAX_PARAMETERS));
        }
        let mut size = 0;
        for (k, v) in &params {
            if k.is_empty() {
                errs.push(FieldError::invalid(&path, k, "field can not be empty."));
            }
            size += k.len() + v.len();
        }
        if size > MAX_PARAMETERS_SIZE {
            errs.push(FieldError::too_long(&path, MAX_PARAMETERS_SIZE));
        }
        if let Some(p) = obj.reclaim_policy.as_deref().filter(|p| !p.is_empty())
            && !RECLAIM_POLICIES.contains(&p)
        {
            errs.push(FieldError::not_supported(
                &FieldPath::new("reclaimPolicy"),
                p,
                &RECLAIM_POLICIES,
            ));
        }
        let path = FieldPath::new("volumeBindingMode");
        match obj.volume_binding_mode.as_deref() {
            None => errs.push(FieldError::required(&path, "")),
            Some(m) if !BINDING_MODES.contains(&m) => {
                errs.push(FieldError::not_supported(&path, m, &BINDING_MODES));
            }
            Some(_) => {}
        }
        errs
    }

    fn validate_update(&self, new: &StorageClass, old: &StorageClass) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.parameters.clone().unwrap_or_default() != old.parameters.clone().unwrap_or_default()
        {
            errs.push(FieldError::forbidden(
                &FieldPath::new("parameters"),
                "updates to parameters are forbidden.",
            ));
        }
        if new.provisioner != old.provisioner {
            errs.push(FieldError::forbidden(
                &FieldPath::new("provisioner"),
                "updates to provisioner are forbidden.",
            ));
        }
        if new.reclaim_policy != old.reclaim_policy {
            errs.push(FieldError::forbidden(
                &FieldPath::new("reclaimPolicy"),
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        errs.extend(validate_immutable(
            &new.volume_binding_mode,
            &old.volume_binding_mode,
            || {
                new.volume_binding_mode
                    .as_ref()
                    .map_or("null".to_owned(), |m| Rendered(format!("{m:?}")).0)
            },
            &FieldPath::new("volumeBindingMode"),
        ));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            TableColumn {
                name: Cow::Borrowed("Name"),
                type_: Cow::Borrowed("string"),
                format: Cow::Borrowed("name"),
                description: Cow::Borrowed(
                    "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
                ),
                priority: 0,
            },
            super::table::column(
                "Provisioner",
                "string",
                "provisioner indicates the type of the provisioner.",
                0,
            ),
            super::table::column(
                "ReclaimPolicy",
                "string",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
                0,
            ),
            super::table::column(
                "VolumeBindingMode",
                "string",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
                0,
            ),
            super::table::column(
                "AllowVolumeExpansion",
                "string",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &StorageClass, now: jiff::Timestamp) -> Vec<Value> {
        let mut name = obj.metadata.name.clone().unwrap_or_default();
        if is_default(&obj.metadata) {
            name.push_str(" (default)");
        }
        vec![
            text(name),
            text(obj.provisioner.clone()),
            text(
                obj.reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".to_owned()),
            ),
            text(
                obj.volume_binding_mode
                    .clone()
                    .unwrap_or_else(|| "Immediate".to_owned()),
            ),
            Value::Bool(obj.allow_volume_expansion.unwrap_or(false)),
            text(age(&obj.metadata, now)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::typed::Typed;
    use crate::strategy::{Strategy, messages};
    use serde_json::json;

    fn standard() -> Value {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "standard", "creationTimestamp": "2024-01-01T00:00:00Z",
                            "annotations": {IS_DEFAULT_ANNOTATION: "true"}},
               "provisioner": "miniplane.io/simulated", "volumeBindingMode": "WaitForFirstConsumer"})
    }

    #[test]
    fn defaults_validation_and_immutability() {
        let s = Typed(StorageClassRules);
        let mut obj = standard();
        assert!(s.admit_create(&mut obj).unwrap().is_empty());
        assert_eq!(obj["reclaimPolicy"], "Delete");
        assert_eq!(obj["volumeBindingMode"], "WaitForFirstConsumer");
        let mut bad = json!({"metadata": {"name": "x"}, "provisioner": "", "reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        s.default(&mut bad).unwrap();
        assert_eq!(
            messages(&s.validate_create(&bad)),
            vec![
                "provisioner: Required value",
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
                "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
            ]
        );
        let mut changed = obj.clone();
        changed["provisioner"] = json!("example.com/other");
        changed["parameters"] = json!({"type": "ssd"});
        changed["reclaimPolicy"] = json!("Retain");
        changed["volumeBindingMode"] = json!("Immediate");
        assert_eq!(
            messages(&s.validate_update(&changed, &obj)),
            vec![
                "parameters: Forbidden: updates to parameters are forbidden.",
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
                "volumeBindingMode: Invalid value: \"Immediate\": field is immutable",
            ]
        );
    }

    #[test]
    fn the_default_class_is_marked_in_its_row() {
        let s = Typed(StorageClassRules);
        let mut obj = standard();
        s.default(&mut obj).unwrap();
        let now: jiff::Timestamp = "2024-01-02T00:00:00Z".parse().unwrap();
        assert!(!s.table_has_name_column());
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!("standard (default)"),
                json!("miniplane.io/simulated"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("24h")
            ]
        );
        assert_eq!(s.table_columns().len(), 6);
    }
}
