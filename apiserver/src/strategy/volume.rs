//! What PersistentVolumes and PersistentVolumeClaims share: access modes (their validation and
//! kubectl's `RWO,ROX` rendering), volume modes, storage class names and quantities.
//!
//! Mirrors the helpers of `pkg/apis/core/validation/validation.go` (`supportedAccessModes`,
//! `ValidateClassName`, `ValidatePositiveQuantityValue`), `pkg/apis/core/helper`
//! (`GetAccessModesAsString`) and `pkg/apis/core/v1/helper` (`GetPersistentVolumeClass`,
//! `GetPersistentVolumeClaimClass`).

use super::FieldError;
use super::field::FieldPath;
use apimachinery::resource::quantity::Quantity;
use apimachinery::validation::is_dns1123_subdomain;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The access modes Kubernetes accepts, sorted as `sets.List` prints them.
pub const SUPPORTED_ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
/// The volume modes Kubernetes accepts.
pub const SUPPORTED_VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
/// The deprecated annotation that names a class before `storageClassName` existed.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// The message of `ValidatePositiveQuantityValue`.
const NOT_POSITIVE: &str = "must be greater than zero";

/// Access modes validation shared by both kinds: each supported, `ReadWriteOncePod` alone.
/// `required_detail` is the `Required` detail for an empty list (claims and volumes word it
/// differently).
pub fn validate_access_modes(
    modes: &[String],
    path: &FieldPath,
    required_detail: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if modes.is_empty() {
        errs.push(FieldError::required(path, required_detail));
    }
    let mut found_read_write_once_pod = false;
    let mut found_other = false;
    for mode in modes {
        if !SUPPORTED_ACCESS_MODES.contains(&mode.as_str()) {
            errs.push(FieldError::not_supported(
                path,
                mode,
                &SUPPORTED_ACCESS_MODES,
            ));
        }
        if mode == "ReadWriteOncePod" {
            found_read_write_once_pod = true;
        } else if SUPPORTED_ACCESS_MODES.contains(&mode.as_str()) {
            found_other = true;
        }
    }
    if found_read_write_once_pod && found_other {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errs
}

/// `volumeMode`: `Block` or `Filesystem`.
pub fn validate_volume_mode(mode: Option<&str>, path: &FieldPath) -> Vec<FieldError> {
    match mode {
        Some(m) if !SUPPORTED_VOLUME_MODES.contains(&m) => {
            vec![FieldError::not_supported(path, m, &SUPPORTED_VOLUME_MODES)]
        }
        _ => Vec::new(),
    }
}

/// `ValidateClassName` of a non-empty `storageClassName`: a DNS subdomain.
pub fn validate_class_name(name: Option<&str>, path: &FieldPath) -> Vec<FieldError> {
    match name.filter(|n| !n.is_empty()) {
        Some(n) => is_dns1123_subdomain(n)
            .into_iter()
            .map(|msg| FieldError::invalid(path, n, &msg))
            .collect(),
        None => Vec::new(),
    }
}

/// A storage quantity: it parses, is not negative (`ValidateResourceQuantityValue`) and is
/// more than zero (`ValidatePositiveQuantityValue`). `None` when it does not parse.
pub fn validate_storage_quantity(
    text: &str,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> Option<Quantity> {
    match Quantity::parse(text) {
        Ok(q) => {
            if q.nanos() < 0 {
                errs.push(FieldError::invalid(
                    path,
                    text,
                    "must be greater than or equal to 0",
                ));
            }
            if q.nanos() <= 0 {
                errs.push(FieldError::invalid(path, text, NOT_POSITIVE));
            }
            Some(q)
        }
        Err(e) => {
            errs.push(FieldError::invalid(path, text, &e.to_string()));
            None
        }
    }
}

/// `GetAccessModesAsString`: `RWO,ROX,RWX,RWOP` in that order, duplicates dropped.
pub fn access_modes_string(modes: &[String]) -> String {
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(mode, _)| modes.iter().any(|m| m == mode))
    .map(|(_, short)| short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The class of a volume or claim: the beta annotation when present, else `storageClassName`
/// (`GetPersistentVolumeClass`, `GetPersistentVolumeClaimClass`).
pub fn storage_class(meta: &ObjectMeta, spec_class: Option<&str>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .map(String::as_str)
        .or(spec_class)
        .unwrap_or("")
        .to_owned()
}

/// The `storage` entry of a resource list, as text.
pub fn storage_of(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<String> {
    list.and_then(|l| l.get("storage")).map(|q| q.0.clone())
}

/// `SetDefaults_ResourceList` for a storage list: quantities in canonical form.
pub fn canonical_resources(
    list: Option<&mut BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) {
    for q in list.into_iter().flat_map(|l| l.values_mut()) {
        if let Some(c) = apimachinery::resource::quantity::canonicalize(&q.0) {
            q.0 = c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_print_and_validate_as_kubernetes() {
        let modes = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            access_modes_string(&modes(&["ReadWriteMany", "ReadWriteOnce"])),
            "RWO,RWX"
        );
        let path = FieldPath::new("spec").child("accessModes");
        let errs = validate_access_modes(&modes(&["Sometimes"]), &path, "");
        assert_eq!(
            crate::strategy::messages(&errs),
            vec![
                "spec.accessModes: Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
            ]
        );
        let errs = validate_access_modes(&modes(&["ReadWriteOncePod", "ReadWriteOnce"]), &path, "");
        assert_eq!(
            crate::strategy::messages(&errs),
            vec![
                "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"
            ]
        );
    }
}
