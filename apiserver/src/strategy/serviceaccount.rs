//! core/v1 ServiceAccount (`pkg/registry/core/serviceaccount/strategy.go`,
//! `ValidateServiceAccount` in `pkg/apis/core/validation/validation.go`, and
//! `printServiceAccount`).

use super::field::FieldPath;
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::validation::is_dns1123_subdomain;
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::Value;

/// The ServiceAccount rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServiceAccountRules;

impl KindRules for ServiceAccountRules {
    type Object = ServiceAccount;

    fn validate(&self, obj: &ServiceAccount) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, s) in obj.image_pull_secrets.iter().flatten().enumerate() {
            let name = s.name.as_str();
            for msg in is_dns1123_subdomain(name) {
                errs.push(FieldError::invalid(
                    &FieldPath::new("imagePullSecrets").index(i).child("name"),
                    name,
                    &msg,
                ));
            }
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &ServiceAccount, now: jiff::Timestamp) -> Vec<Value> {
        let n = obj.secrets.as_ref().map_or(0, Vec::len);
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

    #[test]
    fn table_and_validation() {
        let s = Typed(ServiceAccountRules);
        let obj = json!({"metadata": {"name": "default", "namespace": "d", "creationTimestamp": "2024-01-01T00:00:00Z"}, "secrets": [{"name": "tok"}]});
        let now: jiff::Timestamp = "2024-01-09T00:00:00Z".parse().unwrap();
        assert_eq!(s.table_row(&obj, now), vec![json!(1), json!("8d")]);
        assert!(s.validate_create(&obj).is_empty());
        let bad = json!({"metadata": {"name": "a", "namespace": "d"}, "imagePullSecrets": [{"name": "Bad"}]});
        assert_eq!(s.validate_create(&bad).len(), 1);
    }
}
