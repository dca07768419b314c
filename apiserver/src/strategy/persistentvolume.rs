//! core/v1 PersistentVolume: `SetDefaults_PersistentVolume` (`pkg/apis/core/v1/defaults.go`),
//! `ValidatePersistentVolume` / `ValidatePersistentVolumeUpdate`
//! (`pkg/apis/core/validation/validation.go`), `PrepareForCreate`
//! (`pkg/registry/core/persistentvolume/strategy.go`) and `printPersistentVolume`
//! (`pkg/printers/internalversion/printers.go`).
//!
//! Simplified: of the volume sources only `hostPath`, `local`, `nfs` and `csi` have their own
//! fields checked (every source counts for "one volume type"); node affinity is checked for
//! having terms, not term by term; the immutability message of the volume source omits the
//! `cmp.Diff` Kubernetes appends; `status.lastPhaseTransitionTime` is stamped on create, and on a
//! phase change by the writer (the PV controller) rather than by the status strategy.

use super::field::{FieldPath, Rendered, validate_immutable};
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::volume::{
    access_modes_string, canonical_resources, storage_class, validate_access_modes,
    validate_class_name, validate_storage_quantity, validate_volume_mode,
};
use super::{FieldError, TableColumn};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec, PersistentVolumeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

/// The reclaim policies of a volume, sorted.
pub const SUPPORTED_RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];
/// hostPath `type`s (`HostPathType`), sorted as `sets.List` prints them.
const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];
/// The fields of a PersistentVolumeSpec that are not its volume source.
const NON_SOURCE_FIELDS: [&str; 9] = [
    "accessModes",
    "capacity",
    "claimRef",
    "mountOptions",
    "nodeAffinity",
    "persistentVolumeReclaimPolicy",
    "storageClassName",
    "volumeMode",
    "volumeAttributesClassName",
];

/// The PersistentVolume rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct PersistentVolumeRules;

/// The volume sources set in `spec`, in the order `ValidatePersistentVolumeSpec` checks them.
fn sources(spec: &PersistentVolumeSpec) -> Vec<&'static str> {
    [
        ("hostPath", spec.host_path.is_some()),
        ("gcePersistentDisk", spec.gce_persistent_disk.is_some()),
        (
            "awsElasticBlockStore",
            spec.aws_elastic_block_store.is_some(),
        ),
        ("glusterfs", spec.glusterfs.is_some()),
        ("flocker", spec.flocker.is_some()),
        ("nfs", spec.nfs.is_some()),
        ("rbd", spec.rbd.is_some()),
        ("quobyte", spec.quobyte.is_some()),
        ("cephFS", spec.cephfs.is_some()),
        ("iscsi", spec.iscsi.is_some()),
        ("cinder", spec.cinder.is_some()),
        ("fc", spec.fc.is_some()),
        ("flexVolume", spec.flex_volume.is_some()),
        ("azureFile", spec.azure_file.is_some()),
        ("vsphereVolume", spec.vsphere_volume.is_some()),
        (
            "photonPersistentDisk",
            spec.photon_persistent_disk.is_some(),
        ),
        ("portworxVolume", spec.portworx_volume.is_some()),
        ("azureDisk", spec.azure_disk.is_some()),
        ("scaleIO", spec.scale_io.is_some()),
        ("local", spec.local.is_some()),
        ("storageos", spec.storageos.is_some()),
        ("csi", spec.csi.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(name, _)| name)
    .collect()
}

/// `validatePathNoBacksteps`.
fn no_backsteps(p: &str, path: &FieldPath) -> Vec<FieldError> {
    if p.split('/').any(|part| part == "..") {
        vec![FieldError::invalid(path, p, "must not contain '..'")]
    } else {
        Vec::new()
    }
}

/// The one volume source's own fields.
fn validate_source(spec: &PersistentVolumeSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(h) = &spec.host_path {
        let p = path.child("hostPath");
        if h.path.is_empty() {
            errs.push(FieldError::required(&p.child("path"), ""));
        }
        errs.extend(no_backsteps(&h.path, &p.child("path")));
        if let Some(t) = h.type_.as_deref()
            && !HOST_PATH_TYPES.contains(&t)
        {
            errs.push(FieldError::not_supported(
                &p.child("type"),
                t,
                &HOST_PATH_TYPES,
            ));
        }
    }
    if let Some(l) = &spec.local {
        let p = path.child("local");
        if l.path.is_empty() {
            errs.push(FieldError::required(&p.child("path"), ""));
        }
        errs.extend(no_backsteps(&l.path, &p.child("path")));
        if spec.node_affinity.is_none() {
            errs.push(FieldError::required(
                &path.child("nodeAffinity"),
                "Local volume requires node affinity",
            ));
        }
    }
    if let Some(n) = &spec.nfs {
        let p = path.child("nfs");
        if n.server.is_empty() {
            errs.push(FieldError::required(&p.child("server"), ""));
        }
        if n.path.is_empty() {
            errs.push(FieldError::required(&p.child("path"), ""));
        } else if !n.path.starts_with('/') {
            errs.push(FieldError::invalid(
                &p.child("path"),
                n.path.as_str(),
                "must be an absolute path",
            ));
        }
    }
    if let Some(c) = &spec.csi {
        let p = path.child("csi");
        if c.driver.is_empty() {
            errs.push(FieldError::required(&p.child("driver"), ""));
        }
        if c.volume_handle.is_empty() {
            errs.push(FieldError::required(&p.child("volumeHandle"), ""));
        }
    }
    errs
}

/// `validateVolumeNodeAffinity`: a `required` with at least one term.
fn validate_node_affinity(spec: &PersistentVolumeSpec, path: &FieldPath) -> Vec<FieldError> {
    let Some(affinity) = &spec.node_affinity else {
        return Vec::new();
    };
    let path = path.child("nodeAffinity");
    match &affinity.required {
        None => vec![FieldError::required(
            &path.child("required"),
            "must specify required node constraints",
        )],
        Some(r) if r.node_selector_terms.is_empty() => vec![FieldError::required(
            &path.child("required").child("nodeSelectorTerms"),
            "must have at least one node selector term",
        )],
        Some(_) => Vec::new(),
    }
}

/// `ValidatePersistentVolumeSpec`.
pub fn validate_spec(spec: &PersistentVolumeSpec, path: &FieldPath) -> Vec<FieldError> {
    let modes = spec.access_modes.clone().unwrap_or_default();
    let mut errs = validate_access_modes(&modes, &path.child("accessModes"), "");
    let capacity = spec.capacity.clone().unwrap_or_default();
    let cap_path = path.child("capacity");
    if capacity.is_empty() {
        errs.push(FieldError::required(&cap_path, ""));
    }
    if !capacity.contains_key("storage") || capacity.len() > 1 {
        let keys: Vec<String> = capacity.keys().map(|k| format!("{k:?}")).collect();
        errs.push(FieldError::not_supported(
            &cap_path,
            Rendered(format!("core.ResourceList{{{}}}", keys.join(", "))),
            &["storage"],
        ));
    }
    for (name, q) in &capacity {
        validate_storage_quantity(&q.0, &cap_path.key(name), &mut errs);
    }
    if let Some(policy) = spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        && !SUPPORTED_RECLAIM_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported(
            &path.child("persistentVolumeReclaimPolicy"),
            policy,
            &SUPPORTED_RECLAIM_POLICIES,
        ));
    }
    errs.extend(validate_class_name(
        spec.storage_class_name.as_deref(),
        &path.child("storageClassName"),
    ));
    errs.extend(validate_node_affinity(spec, path));
    let sources = sources(spec);
    match sources.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a volume type")),
        [_, more @ ..] => {
            for extra in more {
                errs.push(FieldError::forbidden(
                    &path.child(extra),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    errs.extend(validate_source(spec, path));
    errs.extend(validate_volume_mode(
        spec.volume_mode.as_deref(),
        &path.child("volumeMode"),
    ));
    errs
}

/// The volume source of a spec, as JSON (everything but the non-source fields).
fn source_json(spec: &Option<PersistentVolumeSpec>) -> Value {
    let mut v = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        for f in NON_SOURCE_FIELDS {
            map.remove(f);
        }
    }
    v
}

impl KindRules for PersistentVolumeRules {
    type Object = PersistentVolume;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut PersistentVolume) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        if spec
            .persistent_volume_reclaim_policy
            .as_deref()
            .unwrap_or("")
            .is_empty()
        {
            spec.persistent_volume_reclaim_policy = Some("Retain".to_owned());
        }
        spec.volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
        if let Some(h) = &mut spec.host_path {
            h.type_.get_or_insert_with(String::new);
        }
        canonical_resources(spec.capacity.as_mut());
        let status = obj.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().unwrap_or("").is_empty() {
            status.phase = Some("Pending".to_owned());
        }
    }

    fn prepare_for_create(&self, obj: &mut PersistentVolume) {
        obj.status = Some(PersistentVolumeStatus {
            phase: Some("Pending".to_owned()),
            last_phase_transition_time: Some(Time(jiff::Timestamp::now())),
            ..Default::default()
        });
    }

    fn validate(&self, obj: &PersistentVolume) -> Vec<FieldError> {
        validate_spec(
            &obj.spec.clone().unwrap_or_default(),
            &FieldPath::new("spec"),
        )
    }

    fn validate_update(&self, new: &PersistentVolume, old: &PersistentVolume) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if source_json(&new.spec) != source_json(&old.spec) {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("persistentvolumesource"),
                "spec.persistentvolumesource is immutable after creation",
            ));
        }
        let mode = |pv: &PersistentVolume| pv.spec.as_ref().and_then(|s| s.volume_mode.clone());
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
        let affinity =
            |pv: &PersistentVolume| pv.spec.as_ref().and_then(|s| s.node_affinity.clone());
        if affinity(old).is_some() && affinity(new) != affinity(old) {
            errs.push(FieldError::invalid(
                &FieldPath::new("nodeAffinity"),
                Rendered("core.VolumeNodeAffinity{...}".to_owned()),
                super::field::FIELD_IMMUTABLE,
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Capacity",
                "string",
                "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
                0,
            ),
            column(
                "Access Modes",
                "string",
                "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
                0,
            ),
            column(
                "Reclaim Policy",
                "string",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
                0,
            ),
            column(
                "Status",
                "string",
                "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
                0,
            ),
            column(
                "Claim",
                "string",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
                0,
            ),
            column("StorageClass", "string", "StorageClass of the pv", 0),
            column(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pv",
                0,
            ),
            column(
                "Reason",
                "string",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
                0,
            ),
            age_column(),
            column(
                "VolumeMode",
                "string",
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
                1,
            ),
        ]
    }

    fn table_row(&self, obj: &PersistentVolume, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let capacity = super::volume::storage_of(spec.capacity.as_ref()).unwrap_or_default();
        let phase = if obj.metadata.deletion_timestamp.is_some() {
            "Terminating".to_owned()
        } else {
            status.phase.unwrap_or_default()
        };
        let claim = spec.claim_ref.as_ref().map_or(String::new(), |c| {
            format!(
                "{}/{}",
                c.namespace.as_deref().unwrap_or(""),
                c.name.as_deref().unwrap_or("")
            )
        });
        vec![
            text(capacity),
            text(access_modes_string(&spec.access_modes.unwrap_or_default())),
            text(spec.persistent_volume_reclaim_policy.unwrap_or_default()),
            text(phase),
            text(claim),
            text(storage_class(
                &obj.metadata,
                spec.storage_class_name.as_deref(),
            )),
            text(
                spec.volume_attributes_class_name
                    .unwrap_or_else(|| "<unset>".to_owned()),
            ),
            text(status.reason.unwrap_or_default()),
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

    fn pv() -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": "pv0001", "creationTimestamp": "2024-01-01T00:00:00Z"},
               "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                        "hostPath": {"path": "/data/pv0001"}, "storageClassName": "manual"}})
    }

    #[test]
    fn defaults_and_create() {
        let s = Typed(PersistentVolumeRules);
        let mut obj = pv();
        assert!(s.admit_create(&mut obj).unwrap().is_empty());
        assert_eq!(obj["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
        assert_eq!(obj["status"]["phase"], "Pending");
        assert!(obj["status"]["lastPhaseTransitionTime"].is_string());
    }

    #[test]
    fn validation_messages() {
        let s = Typed(PersistentVolumeRules);
        let mut obj = pv();
        obj["spec"] =
            json!({"capacity": {"storage": "0"}, "persistentVolumeReclaimPolicy": "Keep"});
        s.default(&mut obj).unwrap();
        assert_eq!(
            messages(&s.validate_create(&obj)),
            vec![
                "spec.accessModes: Required value",
                "spec.capacity[storage]: Invalid value: \"0\": must be greater than zero",
                "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
                "spec: Required value: must specify a volume type",
            ]
        );
        let mut two = pv();
        two["spec"]["nfs"] = json!({"server": "nfs.example.com", "path": "/exports"});
        assert_eq!(
            messages(&s.validate_create(&two)),
            vec!["spec.nfs: Forbidden: may not specify more than 1 volume type"]
        );
        let mut local = pv();
        local["spec"].as_object_mut().unwrap().remove("hostPath");
        local["spec"]["local"] = json!({"path": "/mnt/disks/ssd1"});
        assert_eq!(
            messages(&s.validate_create(&local)),
            vec!["spec.nodeAffinity: Required value: Local volume requires node affinity"]
        );
    }

    #[test]
    fn the_source_is_immutable() {
        let s = Typed(PersistentVolumeRules);
        let mut old = pv();
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["hostPath"]["path"] = json!("/elsewhere");
        new["spec"]["capacity"]["storage"] = json!("10Gi");
        assert_eq!(
            messages(&s.validate_update(&new, &old)),
            vec![
                "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
            ]
        );
    }

    #[test]
    fn table_row() {
        let s = Typed(PersistentVolumeRules);
        let mut obj = pv();
        s.default(&mut obj).unwrap();
        obj["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
        obj["status"] = json!({"phase": "Bound"});
        let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!("5Gi"),
                json!("RWO"),
                json!("Retain"),
                json!("Bound"),
                json!("default/data"),
                json!("manual"),
                json!("<unset>"),
                json!(""),
                json!("5m"),
                json!("Filesystem"),
            ]
        );
        assert_eq!(s.table_columns().len(), 10);
    }
}
