//! core/v1 ConfigMap (`pkg/registry/core/configmap/strategy.go`, `ValidateConfigMap` and
//! `ValidateConfigMapUpdate` in `pkg/apis/core/validation/validation.go`, and
//! `printConfigMap`).

use super::config_data::{MAX_PAYLOAD_BYTES, validate_immutable_payload, validate_keys};
use super::field::FieldPath;
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

/// The ConfigMap rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConfigMapRules;

impl KindRules for ConfigMapRules {
    type Object = ConfigMap;

    fn validate(&self, obj: &ConfigMap) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let data = obj.data.clone().unwrap_or_default();
        let binary = obj.binary_data.clone().unwrap_or_default();
        let mut total = validate_keys(
            &data,
            |v: &String| v.len(),
            &FieldPath::new("data"),
            &mut errs,
        );
        total += validate_keys(
            &binary,
            |v: &k8s_openapi::ByteString| v.0.len(),
            &FieldPath::new("binaryData"),
            &mut errs,
        );
        for key in binary.keys().filter(|k| data.contains_key(*k)) {
            errs.push(FieldError::invalid(
                &FieldPath::new("binaryData").key(key),
                key.as_str(),
                "duplicate of key present in data",
            ));
        }
        if total > MAX_PAYLOAD_BYTES {
            errs.push(FieldError::too_long(&FieldPath::new(""), MAX_PAYLOAD_BYTES));
        }
        errs
    }

    fn validate_update(&self, new: &ConfigMap, old: &ConfigMap) -> Vec<FieldError> {
        let mut errs = validate_immutable_payload(
            new.immutable,
            old.immutable,
            &[
                ("data", new.data != old.data),
                ("binaryData", new.binary_data != old.binary_data),
            ],
        );
        errs.extend(self.validate(new));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Data",
                "string",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &ConfigMap, now: jiff::Timestamp) -> Vec<Value> {
        let n = obj.data.as_ref().map_or(0, |d| d.len())
            + obj.binary_data.as_ref().map_or(0, |d| d.len());
        vec![
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

    fn errs(obj: Value) -> Vec<String> {
        crate::strategy::messages(&Typed(ConfigMapRules).validate_create(&obj))
    }

    #[test]
    fn keys_and_size() {
        assert!(
            errs(json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"app.conf": "x"}}))
                .is_empty()
        );
        assert_eq!(
            errs(json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a/b": "x"}})),
            vec![
                "data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(
            errs(
                json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"k": "x"}, "binaryData": {"k": "eA=="}})
            ),
            vec!["binaryData[k]: Invalid value: \"k\": duplicate of key present in data"]
        );
        assert_eq!(
            errs(
                json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"k": "x".repeat(MAX_PAYLOAD_BYTES + 1)}})
            ),
            vec![": Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn immutable_configmaps_keep_their_data() {
        let s = Typed(ConfigMapRules);
        let old = json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"k": "1"}, "immutable": true});
        let new = json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"k": "2"}});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
    }

    #[test]
    fn table_row() {
        let obj = json!({"metadata": {"name": "c", "creationTimestamp": "2024-01-01T00:00:00Z"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "eA=="}});
        let now: jiff::Timestamp = "2024-01-01T00:00:09Z".parse().unwrap();
        assert_eq!(
            Typed(ConfigMapRules).table_row(&obj, now),
            vec![json!(3), json!("9s")]
        );
    }
}
