//! core/v1 ReplicationController, the ReplicaSet's predecessor with an equality-only selector
//! (`pkg/apis/core/v1/defaults.go` `SetDefaults_ReplicationController`,
//! `pkg/apis/core/validation/validation.go` `ValidateReplicationController`,
//! `ValidatePodTemplateSpecForRC`, `pkg/registry/core/replicationcontroller/strategy.go` (the
//! `status.replicas` field selector) and `printReplicationController` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! ```text
//!   spec.selector:                  {app: nginx}          (a plain map, defaulted from
//!   spec.template.metadata.labels:  {app: nginx, x: y}     the template's labels when empty)
//!   metadata.labels:                defaulted from the template's labels when empty
//! ```
//!
//! Unlike the apps/v1 kinds, the selector may change after creation, and a missing template is
//! only `spec.template: Required value`.

use super::field::{FieldPath, validate_nonnegative};
use super::meta::validate_labels;
use super::pod_spec::{default_pod_template, validate_pod_template};
use super::table::{age_column, column, container_columns, int, text};
use super::typed::{KindRules, age};
use super::workload::wide_cells;
use super::{FieldError, TableColumn};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// The ReplicationController rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplicationControllerRules;

impl KindRules for ReplicationControllerRules {
    type Object = ReplicationController;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut ReplicationController) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        let labels = spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.clone());
        if let Some(labels) = labels {
            if spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
                spec.selector = Some(labels.clone());
            }
            if obj.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
                obj.metadata.labels = Some(labels);
            }
        }
        spec.replicas.get_or_insert(1);
        if let Some(template) = &mut spec.template {
            default_pod_template(template);
        }
    }

    fn validate(&self, obj: &ReplicationController) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = validate_nonnegative(
            i64::from(spec.min_ready_seconds.unwrap_or(0)),
            &path.child("minReadySeconds"),
        );
        let selector = spec.selector.unwrap_or_default();
        let selector_path = path.child("selector");
        if selector.is_empty() {
            errs.push(FieldError::required(&selector_path, ""));
        }
        errs.extend(validate_labels(&selector, &selector_path));
        errs.extend(validate_nonnegative(
            i64::from(spec.replicas.unwrap_or(0)),
            &path.child("replicas"),
        ));
        let template_path = path.child("template");
        let Some(template) = spec.template else {
            errs.push(FieldError::required(&template_path, ""));
            return errs;
        };
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        if !selector.is_empty() && !selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            errs.push(FieldError::invalid(
                &template_path.child("metadata").child("labels"),
                labels,
                "`selector` does not match template `labels`",
            ));
        }
        errs.extend(validate_pod_template(&template, &template_path));
        let pod_spec = template.spec.unwrap_or_default();
        let restart = pod_spec.restart_policy.as_deref().unwrap_or("");
        if restart != "Always" {
            errs.push(FieldError::not_supported(
                &template_path.child("spec").child("restartPolicy"),
                restart,
                &["Always"],
            ));
        }
        if let Some(deadline) = pod_spec.active_deadline_seconds {
            errs.push(FieldError::invalid(
                &template_path.child("spec").child("activeDeadlineSeconds"),
                deadline,
                "activeDeadlineSeconds in ReplicationController is not Supported",
            ));
        }
        errs
    }

    fn selectable_fields(&self, obj: &ReplicationController) -> Vec<(&'static str, String)> {
        let replicas = obj.status.as_ref().map_or(0, |s| s.replicas);
        vec![("status.replicas", replicas.to_string())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column(
                "Desired",
                "integer",
                "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
                0,
            ),
            column(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
                0,
            ),
            column(
                "Ready",
                "integer",
                "The number of ready replicas for this replication controller.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(
            "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ));
        cols
    }

    fn table_row(&self, obj: &ReplicationController, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let mut row = vec![
            int(spec.replicas.unwrap_or(0)),
            int(status.replicas),
            int(status.ready_replicas.unwrap_or(0)),
            text(age(&obj.metadata, now)),
        ];
        let selector = LabelSelector {
            match_labels: spec.selector,
            ..Default::default()
        };
        row.extend(wide_cells(&spec.template.unwrap_or_default(), &selector));
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn rc() -> Value {
        json!({
            "metadata": {"name": "nginx", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "replicas": 3,
                "template": {"metadata": {"labels": {"app": "nginx"}},
                             "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}
            },
            "status": {"replicas": 3, "readyReplicas": 2}
        })
    }

    fn errors(obj: &Value) -> Vec<String> {
        crate::strategy::messages(&Typed(ReplicationControllerRules).validate_create(obj))
    }

    #[test]
    fn selector_and_labels_default_from_the_template() {
        let mut obj = rc();
        obj["spec"].as_object_mut().unwrap().remove("replicas");
        Typed(ReplicationControllerRules).default(&mut obj).unwrap();
        assert_eq!(obj["spec"]["selector"], json!({"app": "nginx"}));
        assert_eq!(obj["metadata"]["labels"], json!({"app": "nginx"}));
        assert_eq!(obj["spec"]["replicas"], json!(1));
        assert_eq!(
            obj["spec"]["template"]["spec"]["restartPolicy"],
            json!("Always")
        );
        assert!(errors(&obj).is_empty(), "{:?}", errors(&obj));
    }

    #[test]
    fn an_explicit_selector_is_kept_and_must_match_the_template() {
        let mut obj = rc();
        obj["spec"]["selector"] = json!({"app": "web"});
        obj["metadata"]["labels"] = json!({"team": "a"});
        Typed(ReplicationControllerRules).default(&mut obj).unwrap();
        assert_eq!(obj["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(obj["metadata"]["labels"], json!({"team": "a"}));
        assert_eq!(
            errors(&obj),
            vec![
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"nginx\"}: `selector` does not match template `labels`"
            ]
        );
    }

    #[test]
    fn bad_specs_are_worded_as_kubernetes_words_them() {
        let mut obj =
            json!({"metadata": {"name": "x", "namespace": "default"}, "spec": {"replicas": -1}});
        Typed(ReplicationControllerRules).default(&mut obj).unwrap();
        assert_eq!(
            errors(&obj),
            vec![
                "spec.selector: Required value",
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template: Required value",
            ]
        );
        let mut obj = rc();
        obj["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        obj["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
        Typed(ReplicationControllerRules).default(&mut obj).unwrap();
        assert_eq!(
            errors(&obj),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in ReplicationController is not Supported",
            ]
        );
    }

    #[test]
    fn the_selector_may_change_on_update() {
        let s = Typed(ReplicationControllerRules);
        let mut old = rc();
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["selector"] = json!({});
        new["spec"]["template"]["metadata"]["labels"] = json!({"app": "nginx", "v": "2"});
        new["spec"]["selector"] = json!({"app": "nginx", "v": "2"});
        assert!(s.validate_update(&new, &old).is_empty());
    }

    #[test]
    fn table_row_and_field_selector() {
        let s = Typed(ReplicationControllerRules);
        let mut obj = rc();
        s.default(&mut obj).unwrap();
        let now: jiff::Timestamp = "2024-01-03T01:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!(3),
                json!(3),
                json!(2),
                json!("2d1h"),
                json!("nginx"),
                json!("nginx"),
                json!("app=nginx")
            ]
        );
        assert_eq!(s.table_columns().len(), 7);
        assert_eq!(
            s.selectable_fields(&obj),
            vec![("status.replicas", "3".to_owned())]
        );
    }
}
