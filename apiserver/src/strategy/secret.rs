//! core/v1 Secret (`pkg/registry/core/secret/strategy.go`, `SetDefaults_Secret`, the v1
//! conversion that folds `stringData` into `data`, `ValidateSecret`/`ValidateSecretUpdate` in
//! `pkg/apis/core/validation/validation.go`, and `printSecret`).
//!
//! The well-known secret types require their keys: `kubernetes.io/tls` needs `tls.crt` and
//! `tls.key`, `kubernetes.io/dockerconfigjson` needs `.dockerconfigjson`, and so on.

use super::config_data::{MAX_PAYLOAD_BYTES, validate_immutable_payload, validate_keys};
use super::field::{FieldPath, validate_immutable};
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

/// The Secret rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct SecretRules;

/// The keys each well-known secret type must have in `data`.
fn required_keys(type_: &str) -> &'static [&'static str] {
    match type_ {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        _ => &[],
    }
}

impl KindRules for SecretRules {
    type Object = Secret;

    fn set_defaults(&self, obj: &mut Secret) {
        if obj.type_.as_deref().unwrap_or("").is_empty() {
            obj.type_ = Some("Opaque".to_owned());
        }
        // Conversion to the internal type merges `stringData` into `data` (stringData wins) and
        // drops it: it is write-only.
        if let Some(string_data) = obj.string_data.take() {
            let data = obj.data.get_or_insert_with(Default::default);
            for (k, v) in string_data {
                data.insert(k, ByteString(v.into_bytes()));
            }
        }
    }

    fn validate(&self, obj: &Secret) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let data_path = FieldPath::new("data");
        let data = obj.data.clone().unwrap_or_default();
        let total = validate_keys(&data, |v: &ByteString| v.0.len(), &data_path, &mut errs);
        if total > MAX_PAYLOAD_BYTES {
            errs.push(FieldError::too_long(&data_path, MAX_PAYLOAD_BYTES));
        }
        let type_ = obj.type_.as_deref().unwrap_or("");
        for key in required_keys(type_) {
            if !data.contains_key(*key) {
                errs.push(FieldError::required(&data_path.key(key), ""));
            }
        }
        if type_ == "kubernetes.io/basic-auth"
            && !data.contains_key("username")
            && !data.contains_key("password")
        {
            errs.push(FieldError::required(&data_path.key("username"), ""));
            errs.push(FieldError::required(&data_path.key("password"), ""));
        }
        if type_ == "kubernetes.io/service-account-token"
            && obj
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .is_none_or(String::is_empty)
        {
            errs.push(FieldError::required(
                &FieldPath::new("metadata")
                    .child("annotations")
                    .key("kubernetes.io/service-account.name"),
                "",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Secret, old: &Secret) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let new_type = new.type_.clone().unwrap_or_default();
        let old_type = old.type_.clone().unwrap_or_default();
        errs.extend(validate_immutable(
            &new_type,
            &old_type,
            || format!("{new_type:?}"),
            &FieldPath::new("type"),
        ));
        errs.extend(validate_immutable_payload(
            new.immutable,
            old.immutable,
            &[("data", new.data != old.data)],
        ));
        errs
    }

    fn selectable_fields(&self, obj: &Secret) -> Vec<(&'static str, String)> {
        vec![("type", obj.type_.clone().unwrap_or_default())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
                0,
            ),
            column(
                "Data",
                "string",
                "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &Secret, now: jiff::Timestamp) -> Vec<Value> {
        let n = obj.data.as_ref().map_or(0, |d| d.len());
        vec![
            text(obj.type_.clone().unwrap_or_default()),
            int(i64::try_from(n).unwrap_or(i64::MAX)),
            text(age(&obj.metadata, now)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    #[test]
    fn string_data_folds_into_data_and_type_defaults() {
        let s = Typed(SecretRules);
        let mut obj = json!({"metadata": {"name": "s", "namespace": "d"}, "data": {"a": "eA=="}, "stringData": {"b": "hello"}});
        s.default(&mut obj).unwrap();
        assert_eq!(obj["data"], json!({"a": "eA==", "b": "aGVsbG8="}));
        assert_eq!(obj["type"], json!("Opaque"));
        assert!(obj.get("stringData").is_none());
        assert_eq!(
            s.selectable_fields(&obj),
            vec![("type", "Opaque".to_owned())]
        );
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![json!("Opaque"), json!(2), json!("<unknown>")]
        );
    }

    #[test]
    fn typed_secrets_need_their_keys_and_keep_their_type() {
        let s = Typed(SecretRules);
        let tls = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&tls));
        assert_eq!(errs, vec!["data[tls.key]: Required value"]);
        let old = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"});
        let new = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "example.com/x"});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec!["type: Invalid value: \"example.com/x\": field is immutable"]
        );
    }
}
