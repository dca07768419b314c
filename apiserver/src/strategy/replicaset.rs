//! apps/v1 ReplicaSet (`pkg/apis/apps/v1/defaults.go` `SetDefaults_ReplicaSet`,
//! `pkg/apis/apps/validation/validation.go` `ValidateReplicaSetSpec`,
//! `pkg/registry/apps/replicaset/strategy.go` (`status.replicas` field selector) and
//! `printReplicaSet` in `pkg/printers/internalversion/printers.go`).

use super::field::{FieldPath, validate_nonnegative};
use super::pod_spec::default_pod_template;
use super::table::{age_column, column, container_columns, int, text};
use super::typed::{KindRules, age};
use super::workload::{
    REPLICA_SET_DEADLINE, validate_selector_and_template, validate_workload_update, wide_cells,
};
use super::{FieldError, TableColumn};
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;

/// The ReplicaSet rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplicaSetRules;

impl KindRules for ReplicaSetRules {
    type Object = ReplicaSet;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut ReplicaSet) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.replicas.get_or_insert(1);
        default_pod_template(spec.template.get_or_insert_with(Default::default));
    }

    fn validate(&self, obj: &ReplicaSet) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = validate_nonnegative(
            i64::from(spec.replicas.unwrap_or(0)),
            &path.child("replicas"),
        );
        errs.extend(validate_nonnegative(
            i64::from(spec.min_ready_seconds.unwrap_or(0)),
            &path.child("minReadySeconds"),
        ));
        errs.extend(validate_selector_and_template(
            &spec.selector,
            &spec.template.unwrap_or_default(),
            &path,
            REPLICA_SET_DEADLINE,
        ));
        errs
    }

    fn validate_update(&self, new: &ReplicaSet, old: &ReplicaSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_workload_update(new, old));
        errs
    }

    fn selectable_fields(&self, obj: &ReplicaSet) -> Vec<(&'static str, String)> {
        let replicas = obj.status.as_ref().map_or(0, |s| s.replicas);
        vec![("status.replicas", replicas.to_string())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column(
                "Desired",
                "integer",
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.",
                0,
            ),
            column(
                "Current",
                "integer",
                "Replicas is the most recently observed number of non-terminating pods.",
                0,
            ),
            column(
                "Ready",
                "integer",
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(
            "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set.",
        ));
        cols
    }

    fn table_row(&self, obj: &ReplicaSet, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let mut row = vec![
            int(spec.replicas.unwrap_or(0)),
            int(status.replicas),
            int(status.ready_replicas.unwrap_or(0)),
            text(age(&obj.metadata, now)),
        ];
        row.extend(wide_cells(
            &spec.template.unwrap_or_default(),
            &spec.selector,
        ));
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn rs() -> Value {
        json!({
            "metadata": {"name": "nginx-7c5ddbdf54", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "nginx", "pod-template-hash": "7c5ddbdf54"}},
                "template": {"metadata": {"labels": {"app": "nginx", "pod-template-hash": "7c5ddbdf54"}},
                             "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}
            },
            "status": {"replicas": 3, "readyReplicas": 1}
        })
    }

    #[test]
    fn defaults_validation_and_fields() {
        let s = Typed(ReplicaSetRules);
        let mut obj = json!({"metadata": {"name": "a", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        s.default(&mut obj).unwrap();
        assert_eq!(obj["spec"]["replicas"], json!(1));
        assert!(s.validate_create(&obj).is_empty());
        obj["spec"]["replicas"] = json!(-1);
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&obj));
        assert_eq!(
            errs,
            vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            s.selectable_fields(&rs()),
            vec![("status.replicas", "3".to_owned())]
        );
    }

    #[test]
    fn table_row() {
        let s = Typed(ReplicaSetRules);
        let now: jiff::Timestamp = "2024-01-03T01:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&rs(), now),
            vec![
                json!(3),
                json!(3),
                json!(1),
                json!("2d1h"),
                json!("nginx"),
                json!("nginx"),
                json!("app=nginx,pod-template-hash=7c5ddbdf54")
            ]
        );
        assert_eq!(s.table_columns().len(), 7);
    }
}
