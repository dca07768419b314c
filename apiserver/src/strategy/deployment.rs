//! apps/v1 Deployment (`pkg/apis/apps/v1/defaults.go` `SetDefaults_Deployment`,
//! `pkg/apis/apps/validation/validation.go` `ValidateDeploymentSpec`,
//! `ValidateDeploymentStrategy`, `ValidateRollingUpdateDeployment`,
//! `pkg/registry/apps/deployment/strategy.go`, and `printDeployment` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! A minimal Deployment is defaulted to one replica rolled out with `RollingUpdate` (25% surge,
//! 25% unavailable), ten old ReplicaSets kept and a 600 s progress deadline.

use super::field::{FieldPath, validate_nonnegative};
use super::pod_spec::default_pod_template;
use super::table::{age_column, column, container_columns, int, text};
use super::typed::{KindRules, age};
use super::workload::{
    REPLICA_SET_DEADLINE, RollingBounds, go_render_int_or_string,
    validate_not_more_than_100_percent, validate_selector_and_template, validate_workload_update,
    wide_cells,
};
use super::{FieldError, TableColumn};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// The Deployment rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeploymentRules;

impl KindRules for DeploymentRules {
    type Object = Deployment;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut Deployment) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.replicas.get_or_insert(1);
        let strategy = spec
            .strategy
            .get_or_insert_with(DeploymentStrategy::default);
        if strategy.type_.as_deref().unwrap_or("").is_empty() {
            strategy.type_ = Some("RollingUpdate".to_owned());
        }
        if strategy.type_.as_deref() == Some("RollingUpdate") {
            let ru = strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateDeployment::default);
            ru.max_unavailable
                .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
            ru.max_surge
                .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
        }
        spec.revision_history_limit.get_or_insert(10);
        spec.progress_deadline_seconds.get_or_insert(600);
        default_pod_template(&mut spec.template);
    }

    fn validate(&self, obj: &Deployment) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = validate_nonnegative(
            i64::from(spec.replicas.unwrap_or(0)),
            &path.child("replicas"),
        );
        errs.extend(validate_selector_and_template(
            &spec.selector,
            &spec.template,
            &path,
            REPLICA_SET_DEADLINE,
        ));
        errs.extend(validate_strategy(
            spec.strategy.as_ref(),
            &path.child("strategy"),
        ));
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        errs.extend(validate_nonnegative(
            i64::from(min_ready),
            &path.child("minReadySeconds"),
        ));
        if let Some(limit) = spec.revision_history_limit {
            errs.extend(validate_nonnegative(
                i64::from(limit),
                &path.child("revisionHistoryLimit"),
            ));
        }
        if let Some(deadline) = spec.progress_deadline_seconds {
            let p = path.child("progressDeadlineSeconds");
            errs.extend(validate_nonnegative(i64::from(deadline), &p));
            if deadline <= min_ready {
                errs.push(FieldError::invalid(
                    &p,
                    deadline,
                    "must be greater than minReadySeconds",
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Deployment, old: &Deployment) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_workload_update(new, old));
        errs
    }

    fn bumps_generation(&self, new: &Deployment, old: &Deployment, _: (&Value, &Value)) -> bool {
        new.spec != old.spec || new.metadata.annotations != old.metadata.annotations
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column("Ready", "string", "Number of the pod with ready state", 0),
            column(
                "Up-to-date",
                "string",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            column(
                "Available",
                "string",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
        ));
        cols
    }

    fn table_row(&self, obj: &Deployment, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let mut row = vec![
            text(format!(
                "{}/{}",
                status.ready_replicas.unwrap_or(0),
                spec.replicas.unwrap_or(0)
            )),
            int(status.updated_replicas.unwrap_or(0)),
            int(status.available_replicas.unwrap_or(0)),
            text(age(&obj.metadata, now)),
        ];
        row.extend(wide_cells(&spec.template, &spec.selector));
        row
    }
}

/// `ValidateDeploymentStrategy` and `ValidateRollingUpdateDeployment`.
fn validate_strategy(strategy: Option<&DeploymentStrategy>, path: &FieldPath) -> Vec<FieldError> {
    let strategy = strategy.cloned().unwrap_or_default();
    let mut errs = Vec::new();
    match strategy.type_.as_deref().unwrap_or("") {
        "Recreate" => {
            if strategy.rolling_update.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match &strategy.rolling_update {
            None => errs.push(FieldError::required(
                &path.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let b = RollingBounds::check(
                    ru.max_unavailable.as_ref(),
                    ru.max_surge.as_ref(),
                    path.child("rollingUpdate"),
                    &mut errs,
                );
                if b.values() == (0, 0) {
                    errs.push(FieldError::invalid(
                        &b.unavailable_path(),
                        go_render_int_or_string(b.max_unavailable),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                errs.extend(validate_not_more_than_100_percent(
                    b.max_unavailable,
                    &b.unavailable_path(),
                ));
            }
        },
        other => errs.push(FieldError::not_supported(
            path,
            other,
            &["Recreate", "RollingUpdate"],
        )),
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {
                    "metadata": {"labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}]}
                }
            }
        })
    }

    fn errors(obj: Value) -> Vec<String> {
        let s = Typed(DeploymentRules);
        let mut obj = obj;
        s.default(&mut obj).unwrap();
        crate::strategy::messages(&s.validate_create(&obj))
    }

    #[test]
    fn minimal_deployment_defaults_like_kubernetes() {
        let mut obj = minimal();
        Typed(DeploymentRules).default(&mut obj).unwrap();
        assert_eq!(
            obj,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "nginx", "namespace": "default"},
                "spec": {
                    "progressDeadlineSeconds": 600,
                    "replicas": 1,
                    "revisionHistoryLimit": 10,
                    "selector": {"matchLabels": {"app": "nginx"}},
                    "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                    "template": {
                        "metadata": {"labels": {"app": "nginx"}},
                        "spec": {
                            "containers": [{
                                "image": "nginx:1.14.2",
                                "imagePullPolicy": "IfNotPresent",
                                "name": "nginx",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "resources": {},
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File"
                            }],
                            "dnsPolicy": "ClusterFirst",
                            "restartPolicy": "Always",
                            "schedulerName": "default-scheduler",
                            "securityContext": {},
                            "terminationGracePeriodSeconds": 30
                        }
                    }
                }
            })
        );
        assert!(Typed(DeploymentRules).validate_create(&obj).is_empty());
        let mut with_status = obj.clone();
        with_status["status"] = json!({"replicas": 3});
        Typed(DeploymentRules).prepare_for_create(&mut with_status);
        assert_eq!(with_status["status"], json!({}));
    }

    #[test]
    fn validation_rules() {
        let mut neg = minimal();
        neg["spec"]["replicas"] = json!(-1);
        assert_eq!(
            errors(neg),
            vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
        );

        let mut zero = minimal();
        zero["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}});
        assert_eq!(
            errors(zero),
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"
            ]
        );

        let mut pct = minimal();
        pct["spec"]["strategy"] = json!({"rollingUpdate": {"maxUnavailable": "150%"}});
        assert_eq!(
            errors(pct),
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
            ]
        );

        let mut recreate = minimal();
        recreate["spec"]["strategy"] = json!({"type": "Recreate", "rollingUpdate": {}});
        assert_eq!(
            errors(recreate),
            vec![
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
            ]
        );

        let mut deadline = minimal();
        deadline["spec"]["minReadySeconds"] = json!(700);
        assert_eq!(
            errors(deadline),
            vec![
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"
            ]
        );

        let mut limit = minimal();
        limit["spec"]["revisionHistoryLimit"] = json!(-2);
        assert_eq!(
            errors(limit),
            vec![
                "spec.revisionHistoryLimit: Invalid value: -2: must be greater than or equal to 0"
            ]
        );

        let mut bad_name = minimal();
        bad_name["metadata"]["name"] = json!("Bad_Name");
        assert_eq!(errors(bad_name).len(), 1);
    }

    #[test]
    fn selector_is_immutable_on_update() {
        let s = Typed(DeploymentRules);
        let mut old = minimal();
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["selector"]["matchLabels"]["tier"] = json!("web");
        new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("web");
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"nginx\", \"tier\":\"web\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ]
        );
        assert!(s.validate_update(&old, &old).is_empty());
        assert!(s.bumps_generation(&new, &old));
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"] = json!({"kubernetes.io/change-cause": "x"});
        assert!(s.bumps_generation(&annotated, &old));
        assert!(!s.bumps_generation(&old, &old));
    }

    #[test]
    fn table_row() {
        let s = Typed(DeploymentRules);
        let mut obj = minimal();
        s.default(&mut obj).unwrap();
        obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
        obj["spec"]["replicas"] = json!(3);
        obj["status"] = json!({"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2});
        let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        let cols = s.table_columns();
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!("2/3"),
                json!(3),
                json!(2),
                json!("5m"),
                json!("nginx"),
                json!("nginx:1.14.2"),
                json!("app=nginx")
            ]
        );
    }
}
