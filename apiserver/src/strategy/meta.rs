//! `metadata` validation on create and update (apimachinery's
//! `pkg/api/validation/objectmeta.go` and `pkg/apis/meta/v1/validation/validation.go`
//! `ValidateLabels`).
//!
//! The registry owns the server-set fields (uid, resourceVersion, creationTimestamp,
//! generation, managedFields); this module checks what the client controls: the name (with the
//! kind's [`NameRule`]), the namespace, labels, annotations, owner references and finalizers,
//! and on update that name and namespace did not change.

use super::FieldError;
use super::field::{FieldPath, Rendered, validate_immutable};
use apimachinery::validation::{NameRule, is_dns1123_label, is_label_value, is_qualified_name};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::{BTreeMap, BTreeSet};

/// apimachinery's `TotalAnnotationSizeLimitB`: keys plus values, 256 KiB.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateObjectMeta` for a new object. `namespaced` says whether the kind lives in a
/// namespace. The name is the final one (the registry has already expanded `generateName`).
pub fn validate_object_meta(
    meta: &ObjectMeta,
    namespaced: bool,
    rule: NameRule,
) -> Vec<FieldError> {
    let path = FieldPath::new("metadata");
    let mut errs = Vec::new();
    if let Some(gen_name) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        for msg in rule.check(gen_name, true) {
            errs.push(FieldError::invalid(
                &path.child("generateName"),
                gen_name,
                &msg,
            ));
        }
    }
    match meta.name.as_deref().unwrap_or("") {
        "" => errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        )),
        name => {
            for msg in rule.check(name, false) {
                errs.push(FieldError::invalid(&path.child("name"), name, &msg));
            }
        }
    }
    let namespace = meta.namespace.as_deref().unwrap_or("");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    &path.child("namespace"),
                    namespace,
                    &msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.generation.filter(|g| *g < 0) {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            g,
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_common(meta, &path));
    errs
}

/// [`validate_object_meta`] over a JSON object's `metadata`, for kinds without a typed strategy
/// (custom resources): names must be DNS subdomains.
pub fn validate_metadata_value(obj: &serde_json::Value, namespaced: bool) -> Vec<FieldError> {
    match serde_json::from_value::<ObjectMeta>(obj["metadata"].clone()) {
        Ok(meta) => validate_object_meta(&meta, namespaced, NameRule::Dns1123Subdomain),
        Err(e) => vec![FieldError::invalid(
            &FieldPath::new("metadata"),
            Rendered(String::new()),
            &e.to_string(),
        )],
    }
}

/// `ValidateObjectMetaUpdate`: the create rules for labels, annotations, owners and finalizers,
/// plus immutable name and namespace, and no new finalizers once deletion started.
pub fn validate_object_meta_update(new: &ObjectMeta, old: &ObjectMeta) -> Vec<FieldError> {
    let path = FieldPath::new("metadata");
    let mut errs = Vec::new();
    if old.deletion_timestamp.is_some() {
        let old_set: BTreeSet<&String> = old.finalizers.iter().flatten().collect();
        let extra: Vec<String> = new
            .finalizers
            .iter()
            .flatten()
            .filter(|f| !old_set.contains(f))
            .map(|f| format!("{f:?}"))
            .collect();
        if !extra.is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("finalizers"),
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    extra.join(", ")
                ),
            ));
        }
    }
    let new_name = new.name.clone().unwrap_or_default();
    let old_name = old.name.clone().unwrap_or_default();
    errs.extend(validate_immutable(
        &new_name,
        &old_name,
        || format!("{new_name:?}"),
        &path.child("name"),
    ));
    let new_ns = new.namespace.clone().unwrap_or_default();
    let old_ns = old.namespace.clone().unwrap_or_default();
    errs.extend(validate_immutable(
        &new_ns,
        &old_ns,
        || format!("{new_ns:?}"),
        &path.child("namespace"),
    ));
    errs.extend(validate_common(new, &path));
    errs
}

/// The labels and annotations of `meta`, reported under `path.labels` and `path.annotations`.
pub fn validate_labels_and_annotations(meta: &ObjectMeta, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, &path.child("labels")));
    }
    if let Some(annotations) = &meta.annotations {
        errs.extend(validate_annotations(
            annotations,
            &path.child("annotations"),
        ));
    }
    errs
}

fn validate_common(meta: &ObjectMeta, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_labels_and_annotations(meta, path);
    if let Some(owners) = &meta.owner_references {
        errs.extend(validate_owner_references(
            owners,
            &path.child("ownerReferences"),
        ));
    }
    if let Some(finalizers) = &meta.finalizers {
        errs.extend(validate_finalizers(finalizers, &path.child("finalizers")));
    }
    errs
}

/// `ValidateLabels`: keys are qualified names, values label values; both errors point at
/// the `labels` path itself, as in Kubernetes.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, &msg));
        }
        for msg in is_label_value(v) {
            errs.push(FieldError::invalid(path, v, &msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitively) and keys plus values
/// total at most 256 KiB.
pub fn validate_annotations(
    annotations: &BTreeMap<String, String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, &msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn validate_owner_references(owners: &[OwnerReference], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for owner in owners {
        let version = owner.api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("apiVersion"),
                &owner.api_version,
                "version must not be empty",
            ));
        }
        for (field, value) in [
            ("kind", &owner.kind),
            ("name", &owner.name),
            ("uid", &owner.uid),
        ] {
            if value.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child(field),
                    value,
                    "must not be empty",
                ));
            }
        }
        if owner.api_version == "v1" && owner.kind == "Event" {
            errs.push(FieldError::invalid(
                path,
                Rendered(format!("{owner:?}")),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if owner.controller == Some(true) {
            let current = format!("{}/{}", owner.kind, owner.name);
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    Rendered(format!("{owners:?}")),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

fn validate_finalizers(finalizers: &[String], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in finalizers {
        for msg in is_qualified_name(f) {
            errs.push(FieldError::invalid(path, f, &msg));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has("orphan") && has("foregroundDeletion") {
        errs.push(FieldError::invalid(
            path,
            Rendered(format!("{finalizers:?}")),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: ns.map(str::to_owned),
            ..Default::default()
        }
    }

    fn strings(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn bad_name_is_reported_with_the_kubernetes_message() {
        let errs = strings(validate_object_meta(
            &meta("Bad_Name", Some("default")),
            true,
            NameRule::Dns1123Subdomain,
        ));
        assert_eq!(
            errs,
            vec![
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
    }

    #[test]
    fn name_and_namespace_presence() {
        assert_eq!(
            strings(validate_object_meta(
                &meta("", Some("default")),
                true,
                NameRule::Dns1123Subdomain
            )),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        assert_eq!(
            strings(validate_object_meta(
                &meta("a", None),
                true,
                NameRule::Dns1123Subdomain
            )),
            vec!["metadata.namespace: Required value"]
        );
        assert_eq!(
            strings(validate_object_meta(
                &meta("a", Some("x")),
                false,
                NameRule::Dns1123Label
            )),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn labels_and_annotations() {
        let mut m = meta("a", Some("default"));
        m.labels = Some(BTreeMap::from([("app".to_owned(), "-bad".to_owned())]));
        m.annotations = Some(BTreeMap::from([(
            "x".to_owned(),
            "y".repeat(TOTAL_ANNOTATION_SIZE_LIMIT),
        )]));
        let errs = strings(validate_object_meta(&m, true, NameRule::Dns1123Subdomain));
        assert_eq!(errs.len(), 2);
        assert!(errs[0].starts_with(
            "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string"
        ));
        assert_eq!(
            errs[1],
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn owners_and_finalizers() {
        let mut m = meta("a", Some("default"));
        m.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: String::new(),
            ..Default::default()
        }]);
        m.finalizers = Some(vec!["orphan".into(), "foregroundDeletion".into()]);
        let errs = strings(validate_object_meta(&m, true, NameRule::Dns1123Subdomain));
        assert_eq!(
            errs[0],
            "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
        );
        assert!(errs[1].ends_with("finalizer orphan and foregroundDeletion cannot be both set"));
    }

    #[test]
    fn update_keeps_name_and_blocks_new_finalizers_when_deleting() {
        let mut old = meta("a", Some("default"));
        old.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
        let mut new = meta("b", Some("default"));
        new.finalizers = Some(vec!["example.com/x".into()]);
        let errs = strings(validate_object_meta_update(&new, &old));
        assert_eq!(
            errs,
            vec![
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/x\"}",
                "metadata.name: Invalid value: \"b\": field is immutable",
            ]
        );
    }
}
