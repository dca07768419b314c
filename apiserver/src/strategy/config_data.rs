//! The key/value payload ConfigMaps and Secrets share (`ValidateConfigMap`, `ValidateSecret`,
//! `ValidateConfigMapUpdate`, `ValidateSecretUpdate` in
//! `pkg/apis/core/validation/validation.go`): keys are config keys
//! (`[-._a-zA-Z0-9]+`, not `.`/`..`), the payload is at most 1 MiB, and an object marked
//! `immutable: true` keeps its payload and the mark forever.

use super::FieldError;
use super::field::FieldPath;
use apimachinery::validation::is_config_map_key;

/// `corev1.MaxSecretSize`, also the ConfigMap limit: 1 MiB.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// Checks the keys under `path` (`data[<key>]`) and returns the payload size they add up to.
pub fn validate_keys<'a, V: 'a>(
    entries: impl IntoIterator<Item = (&'a String, V)>,
    value_len: impl Fn(V) -> usize,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> usize {
    let mut total = 0;
    for (key, value) in entries {
        for msg in is_config_map_key(key) {
            errs.push(FieldError::invalid(&path.key(key), key.as_str(), &msg));
        }
        total += value_len(value);
    }
    total
}

/// The `immutable: true` rules on update: the flag cannot be removed and `fields` (name, changed)
/// cannot change.
pub fn validate_immutable_payload(
    new_immutable: Option<bool>,
    old_immutable: Option<bool>,
    changed: &[(&str, bool)],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old_immutable != Some(true) {
        return errs;
    }
    if new_immutable != Some(true) {
        errs.push(FieldError::forbidden(
            &FieldPath::new("immutable"),
            "field is immutable when `immutable` is set",
        ));
    }
    for (field, differs) in changed {
        if *differs {
            errs.push(FieldError::forbidden(
                &FieldPath::new(field),
                "field is immutable when `immutable` is set",
            ));
        }
    }
    errs
}
