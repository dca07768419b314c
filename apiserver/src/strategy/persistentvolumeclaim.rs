//! core/v1 PersistentVolumeClaim: `SetDefaults_PersistentVolumeClaim(Spec)`
//! (`pkg/apis/core/v1/defaults.go`), `ValidatePersistentVolumeClaim` /
//! `ValidatePersistentVolumeClaimUpdate` (`pkg/apis/core/validation/validation.go`),
//! `PrepareForCreate` (`pkg/registry/core/persistentvolumeclaim/strategy.go`) and
//! `printPersistentVolumeClaim` (`pkg/printers/internalversion/printers.go`).
//!
//! ```text
//!   update of a claim: volumeName may be set once (the binder does), storageClassName may go
//!   from unset to a class while unbound (a default class arriving late); once Bound,
//!   resources.requests and volumeAttributesClassName may change; anything else in spec is
//!   "spec is immutable after creation except resources.requests and
//!   volumeAttributesClassName for bound claims"
//! ```
//!
//! Simplified: the immutability message omits the `cmp.Diff` Kubernetes appends; `dataSource`,
//! `dataSourceRef` and resource limits are not checked; the status starts as
//! `{"phase": "Pending"}` (Kubernetes empties it and its decoding defaults the phase).

use super::field::{FieldPath, validate_immutable};
use super::selector::validate_label_selector;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::volume::{
    BETA_STORAGE_CLASS_ANNOTATION, access_modes_string, canonical_resources, storage_class,
    storage_of, validate_access_modes, validate_class_name, validate_storage_quantity,
    validate_volume_mode,
};
use super::{FieldError, TableColumn};
use apimachinery::resource::quantity::Quantity;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use serde_json::Value;

/// The message of a forbidden change of a claim's spec.
pub const SPEC_IMMUTABLE: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

/// The PersistentVolumeClaim rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct PersistentVolumeClaimRules;

fn requested_storage(pvc: &PersistentVolumeClaim) -> Option<Quantity> {
    let spec = pvc.spec.as_ref()?;
    storage_of(spec.resources.as_ref()?.requests.as_ref()).and_then(|q| Quantity::parse(&q).ok())
}

fn phase(pvc: &PersistentVolumeClaim) -> &str {
    pvc.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

impl KindRules for PersistentVolumeClaimRules {
    type Object = PersistentVolumeClaim;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut PersistentVolumeClaim) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
        if let Some(r) = &mut spec.resources {
            canonical_resources(r.requests.as_mut());
            canonical_resources(r.limits.as_mut());
        }
        let status = obj.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().unwrap_or("").is_empty() {
            status.phase = Some("Pending".to_owned());
        }
    }

    fn prepare_for_create(&self, obj: &mut PersistentVolumeClaim) {
        obj.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".to_owned()),
            ..Default::default()
        });
    }

    fn validate(&self, obj: &PersistentVolumeClaim) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let modes = spec.access_modes.clone().unwrap_or_default();
        let mut errs = validate_access_modes(
            &modes,
            &path.child("accessModes"),
            "at least 1 access mode is required",
        );
        if let Some(sel) = &spec.selector {
            errs.extend(validate_label_selector(sel, &path.child("selector")));
        }
        let storage_path = path.child("resources").key("storage");
        match spec
            .resources
            .as_ref()
            .and_then(|r| storage_of(r.requests.as_ref()))
        {
            None => errs.push(FieldError::required(&storage_path, "")),
            Some(q) => {
                validate_storage_quantity(&q, &storage_path, &mut errs);
            }
        }
        errs.extend(validate_class_name(
            spec.storage_class_name.as_deref(),
            &path.child("storageClassName"),
        ));
        errs.extend(validate_volume_mode(
            spec.volume_mode.as_deref(),
            &path.child("volumeMode"),
        ));
        errs
    }

    fn validate_update(
        &self,
        new: &PersistentVolumeClaim,
        old: &PersistentVolumeClaim,
    ) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let mut new_spec = new.spec.clone().unwrap_or_default();
        let mut old_spec = old.spec.clone().unwrap_or_default();
        // The binder sets `volumeName` once.
        if old_spec.volume_name.as_deref().unwrap_or("").is_empty() {
            old_spec.volume_name = new_spec.volume_name.clone();
        }
        // A claim created without a class may get one later while unbound (the retroactive
        // default class), unless the beta annotation named one.
        let old_annotated = old
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BETA_STORAGE_CLASS_ANNOTATION));
        if !old_annotated
            && old_spec.storage_class_name.is_none()
            && new_spec
                .storage_class_name
                .as_deref()
                .is_some_and(|c| !c.is_empty())
        {
            new_spec.storage_class_name = None;
        }
        if phase(new) == "Bound" {
            let old_storage = old_spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .cloned();
            if let Some(requests) = new_spec
                .resources
                .as_mut()
                .and_then(|r| r.requests.as_mut())
            {
                match old_storage {
                    Some(q) => requests.insert("storage".to_owned(), q),
                    None => requests.remove("storage"),
                };
            }
            new_spec.volume_attributes_class_name = old_spec.volume_attributes_class_name.clone();
        }
        if new_spec != old_spec {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec"),
                SPEC_IMMUTABLE,
            ));
        }
        if let (Some(new_size), Some(old_size)) = (requested_storage(new), requested_storage(old))
            && new_size.nanos() < old_size.nanos()
        {
            let status_size = old
                .status
                .as_ref()
                .and_then(|s| storage_of(s.capacity.as_ref()))
                .and_then(|q| Quantity::parse(&q).ok());
            if status_size.is_none_or(|s| new_size.nanos() <= s.nanos()) {
                errs.push(FieldError::forbidden(
                    &FieldPath::new("spec")
                        .child("resources")
                        .child("requests")
                        .child("storage"),
                    "field can not be less than status.capacity",
                ));
            }
        }
        let mode = |c: &PersistentVolumeClaim| c.spec.as_ref().and_then(|s| s.volume_mode.clone());
        let (new_mode, old_mode) = (mode(new), mode(old));
        errs.extend(validate_immutable(
            &new_mode,
            &old_mode,
            || {
                new_mode
                    .clone()
                    .map_or("null".to_owned(), |m| format!("{m:?}"))
            },
            &FieldPath::new("volumeMode"),
        ));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Status",
                "string",
                "phase represents the current phase of PersistentVolumeClaim.",
                0,
            ),
            column(
                "Volume",
                "string",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
                0,
            ),
            column(
                "Capacity",
                "string",
                "capacity represents the actual resources of the underlying volume.",
                0,
            ),
            column(
                "Access Modes",
                "string",
                "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
                0,
            ),
            column("StorageClass", "string", "StorageClass of the pvc", 0),
            column(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pvc",
                0,
            ),
            age_column(),
            column(
                "VolumeMode",
                "string",
                "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
                1,
            ),
        ]
    }

    fn table_row(&self, obj: &PersistentVolumeClaim, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let phase = if obj.metadata.deletion_timestamp.is_some() {
            "Terminating".to_owned()
        } else {
            status.phase.clone().unwrap_or_default()
        };
        let volume = spec.volume_name.clone().unwrap_or_default();
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (
                storage_of(status.capacity.as_ref()).unwrap_or_default(),
                access_modes_string(&status.access_modes.clone().unwrap_or_default()),
            )
        };
        vec![
            text(phase),
            text(volume),
            text(capacity),
            text(modes),
            text(storage_class(
                &obj.metadata,
                spec.storage_class_name.as_deref(),
            )),
            text(
                spec.volume_attributes_class_name
                    .unwrap_or_else(|| "<unset>".to_owned()),
            ),
            text(age(&obj.metadata, now)),
            text(spec.volume_mode.unwrap_or_else(|| "<unset>".to_owned())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::typed::Typed;
    use crate::strategy::{Strategy, messages};
    use serde_json::json;

    fn pvc() -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "data", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}}})
    }

    #[test]
    fn defaults_and_create() {
        let s = Typed(PersistentVolumeClaimRules);
        let mut obj = pvc();
        assert!(s.admit_create(&mut obj).unwrap().is_empty());
        assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
        assert_eq!(obj["spec"]["resources"]["requests"]["storage"], "1Gi");
        assert_eq!(obj["status"], json!({"phase": "Pending"}));
    }

    #[test]
    fn validation_messages() {
        let s = Typed(PersistentVolumeClaimRules);
        let mut obj = pvc();
        obj["spec"] = json!({"accessModes": [], "storageClassName": "Fast_SSD"});
        s.default(&mut obj).unwrap();
        assert_eq!(
            messages(&s.validate_create(&obj)),
            vec![
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
                "spec.storageClassName: Invalid value: \"Fast_SSD\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ]
        );
        let mut zero = pvc();
        zero["spec"]["resources"]["requests"]["storage"] = json!("0");
        zero["spec"]["accessModes"] = json!(["ReadWriteSometimes"]);
        assert_eq!(
            messages(&s.validate_create(&zero)),
            vec![
                "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
            ]
        );
    }

    #[test]
    fn spec_is_immutable_but_the_binder_and_a_late_default_class_may_write() {
        let s = Typed(PersistentVolumeClaimRules);
        let mut old = pvc();
        s.admit_create(&mut old).unwrap();
        let mut bound = old.clone();
        bound["spec"]["volumeName"] = json!("pvc-1234");
        bound["spec"]["storageClassName"] = json!("standard");
        assert!(messages(&s.validate_update(&bound, &old)).is_empty());
        let mut changed = old.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(
            messages(&s.validate_update(&changed, &old)),
            vec![format!("spec: Forbidden: {SPEC_IMMUTABLE}")]
        );
        let mut bigger = old.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            messages(&s.validate_update(&bigger, &old)),
            vec![format!("spec: Forbidden: {SPEC_IMMUTABLE}")],
            "a claim that is not bound may not be resized"
        );
        let mut old_bound = old.clone();
        old_bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        bigger["status"] = old_bound["status"].clone();
        assert!(messages(&s.validate_update(&bigger, &old_bound)).is_empty());
        let mut smaller = old_bound.clone();
        smaller["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
        assert_eq!(
            messages(&s.validate_update(&smaller, &old_bound)),
            vec![
                "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
            ]
        );
    }

    #[test]
    fn table_row() {
        let s = Typed(PersistentVolumeClaimRules);
        let mut obj = pvc();
        s.default(&mut obj).unwrap();
        let now: jiff::Timestamp = "2024-01-01T00:00:30Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!("<unset>"),
                json!("30s"),
                json!("Filesystem"),
            ]
        );
        obj["spec"]["volumeName"] = json!("pvc-1");
        obj["spec"]["storageClassName"] = json!("standard");
        obj["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
        let row = s.table_row(&obj, now);
        assert_eq!(
            row[..5],
            [
                json!("Bound"),
                json!("pvc-1"),
                json!("1Gi"),
                json!("RWO"),
                json!("standard")
            ]
        );
        assert_eq!(s.table_columns().len(), 8);
    }
}
