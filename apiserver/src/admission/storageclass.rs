//! The `DefaultStorageClass` admission plugin: a PersistentVolumeClaim created without a class
//! gets the cluster's default StorageClass.
//!
//! Mirrors `plugin/pkg/admission/storage/storageclass/setdefault/admission.go` (`Admit`) and
//! `pkg/volume/util/storageclass.go` (`GetDefaultClass`):
//!
//! ```text
//!   POST .../persistentvolumeclaims
//!     the claim names a class (spec.storageClassName set, even to "", or the beta
//!     annotation volume.beta.kubernetes.io/storage-class) ─▶ unchanged
//!     else the StorageClasses annotated storageclass.kubernetes.io/is-default-class: "true"
//!       none ─▶ unchanged (the claim binds only to volumes without a class)
//!       some ─▶ spec.storageClassName = the newest (by creationTimestamp, then name)
//! ```
//!
//! The classes are listed from the store when a claim without a class is created
//! ([`default_class_for`]); the decision ([`default_class`], [`admit`]) is a plain function.
//! Unlike Kubernetes, which reads an informer's cache, the store is read directly. It runs on a
//! create by POST (`handlers/create.rs`), not on a server-side apply that creates a claim.
//!
//! The cluster's default class itself, `standard`, is created here at the API server's
//! bootstrap ([`bootstrap_default_storage_class`]) where kind applies a manifest.

use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use crate::error::Result;
use crate::gvk::GroupVersion;
use crate::registry::ResourceInfo;
use crate::storage::{Storage, prefix};
use crate::strategy::storageclass::is_default;
use crate::strategy::volume::BETA_STORAGE_CLASS_ANNOTATION;

/// The plugin's name.
pub const DEFAULT_STORAGE_CLASS: &str = "DefaultStorageClass";

/// Whether the plugin looks at creates of this resource (core/v1 `persistentvolumeclaims`).
pub fn applies_to(info: &ResourceInfo) -> bool {
    info.gvr.group.is_empty() && info.gvr.resource == "persistentvolumeclaims"
}

/// `PersistentVolumeClaimHasClass`: the beta annotation or `spec.storageClassName` is set
/// (an empty `storageClassName` counts: it asks for no class).
pub fn has_class(claim: &Value) -> bool {
    claim["metadata"]["annotations"]
        .get(BETA_STORAGE_CLASS_ANNOTATION)
        .is_some()
        || claim["spec"]
            .get("storageClassName")
            .is_some_and(|c| !c.is_null())
}

/// `GetDefaultClass`: of the classes marked default, the newest (ties: the first name).
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| is_default(&c.metadata))
        .min_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b)
                .cmp(&created(a))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}

/// `Admit`: sets `spec.storageClassName` of a claim without a class to `default`. Returns
/// whether the claim changed.
pub fn admit(claim: &mut Value, default: Option<&str>) -> bool {
    let Some(default) = default else {
        return false;
    };
    if has_class(claim) {
        return false;
    }
    if !claim.get("spec").is_some_and(Value::is_object) {
        claim["spec"] = Value::Object(Default::default());
    }
    claim["spec"]["storageClassName"] = Value::String(default.to_owned());
    true
}

/// The default class for a claim created with `body`: `None` when the claim names a class,
/// the plugin does not apply, or there is no default class. Reads the StorageClasses only
/// when the claim has none.
pub async fn default_class_for(
    storage: &Storage,
    registry: &crate::registry::Registry,
    body: &Value,
) -> Result<Option<String>> {
    if has_class(body) {
        return Ok(None);
    }
    let Some(info) = registry.lookup(&GroupVersion::new("storage.k8s.io", "v1"), "storageclasses")
    else {
        return Ok(None);
    };
    let page = storage
        .list(&prefix(&info, None), None, None, 0, &|_| true)
        .await?;
    let classes: Vec<StorageClass> = page
        .items
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    Ok(default_class(&classes).and_then(|c| c.metadata.name.clone()))
}

/// The default StorageClass every miniplane cluster has, as kind installs its `standard`
/// class: the simulated provisioner's (`miniplane.io/simulated`, served by the
/// controller-manager's `simulated-provisioner`), binding on first consumer, deleting
/// released volumes.
pub const DEFAULT_CLASS: &str = "standard";

/// Creates the [`DEFAULT_CLASS`] StorageClass if it is missing (at the API server's bootstrap,
/// as it creates the system PriorityClasses); returns whether it did. A class deleted by the
/// user comes back at the next start.
pub async fn bootstrap_default_storage_class(state: &crate::state::AppState) -> Result<bool> {
    use crate::rest::{self, WriteContext, WritePart};
    let Some(info) = state
        .registry()
        .lookup(&GroupVersion::new("storage.k8s.io", "v1"), "storageclasses")
    else {
        return Ok(false);
    };
    let r = crate::storage::ObjectRef {
        info: info.clone(),
        namespace: None,
        name: DEFAULT_CLASS.to_owned(),
    };
    if state.storage().get(&r).await?.is_some() {
        return Ok(false);
    }
    let mut obj = serde_json::json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS,
                     "annotations": {crate::strategy::storageclass::IS_DEFAULT_ANNOTATION: "true"}},
        "provisioner": "miniplane.io/simulated",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    });
    let wctx = WriteContext {
        manager: Some("kube-apiserver".into()),
        now: state.now(),
        ids: state.ids().clone(),
        part: WritePart::Main,
        escalation: None,
        service_account: None,
        user: None,
        signer_check: None,
    };
    rest::default(&info, &mut obj)?;
    rest::before_create(&info, None, &mut obj, &wctx)?;
    match state.storage().create(&r, obj).await {
        Ok(_) => Ok(true),
        Err(crate::error::ApiError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, created: &str, default: bool) -> StorageClass {
        let annotations = if default {
            json!({"storageclass.kubernetes.io/is-default-class": "true"})
        } else {
            json!({})
        };
        serde_json::from_value(
            json!({"metadata": {"name": name, "creationTimestamp": created,
            "annotations": annotations}, "provisioner": "p"}),
        )
        .expect("class")
    }

    #[test]
    fn the_newest_default_class_wins() {
        let classes = [
            class("old", "2024-01-01T00:00:00Z", true),
            class("new", "2024-02-01T00:00:00Z", true),
            class("newest-but-not-default", "2024-03-01T00:00:00Z", false),
        ];
        let name = default_class(&classes).and_then(|c| c.metadata.name.clone());
        assert_eq!(name.as_deref(), Some("new"));
        assert!(default_class(&classes[2..]).is_none());
    }

    #[test]
    fn only_a_claim_without_a_class_gets_the_default() {
        let mut claim =
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        assert!(admit(&mut claim, Some("standard")));
        assert_eq!(claim["spec"]["storageClassName"], "standard");
        let mut none = json!({"metadata": {"name": "data"}, "spec": {"storageClassName": ""}});
        assert!(!admit(&mut none, Some("standard")));
        assert_eq!(none["spec"]["storageClassName"], "");
        let mut beta = json!({"metadata": {"name": "d", "annotations": {BETA_STORAGE_CLASS_ANNOTATION: "x"}}, "spec": {}});
        assert!(!admit(&mut beta, Some("standard")));
        let mut no_default = json!({"metadata": {"name": "d"}, "spec": {}});
        assert!(!admit(&mut no_default, None));
    }
}
