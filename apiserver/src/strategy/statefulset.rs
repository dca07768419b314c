//! apps/v1 StatefulSet (`pkg/apis/apps/v1/defaults.go` `SetDefaults_StatefulSet`,
//! `pkg/apis/apps/validation/validation.go` `ValidateStatefulSetSpec`,
//! `ValidateStatefulSetUpdate`, and `printStatefulSet` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! After creation only `replicas`, `ordinals`, `template`, `updateStrategy`,
//! `revisionHistoryLimit`, `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` may
//! change.

use super::field::{FieldPath, Rendered, validate_nonnegative};
use super::pod_spec::default_pod_template;
use super::table::{age_column, column, container_columns, text};
use super::typed::{KindRules, age};
use super::workload::{
    DeadlineRule, validate_selector_and_template, validate_workload_update, wide_cells,
};
use super::{FieldError, TableColumn};
use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetUpdateStrategy,
};
use serde_json::Value;

/// The StatefulSet rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct StatefulSetRules;

impl KindRules for StatefulSetRules {
    type Object = StatefulSet;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut StatefulSet) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        if spec
            .pod_management_policy
            .as_deref()
            .unwrap_or("")
            .is_empty()
        {
            spec.pod_management_policy = Some("OrderedReady".to_owned());
        }
        let strategy = spec
            .update_strategy
            .get_or_insert_with(StatefulSetUpdateStrategy::default);
        if strategy.type_.as_deref().unwrap_or("").is_empty() {
            strategy.type_ = Some("RollingUpdate".to_owned());
            strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateStatefulSetStrategy::default);
        }
        if strategy.type_.as_deref() == Some("RollingUpdate")
            && let Some(ru) = &mut strategy.rolling_update
        {
            ru.partition.get_or_insert(0);
        }
        let retention = spec
            .persistent_volume_claim_retention_policy
            .get_or_insert_with(StatefulSetPersistentVolumeClaimRetentionPolicy::default);
        for policy in [&mut retention.when_deleted, &mut retention.when_scaled] {
            if policy.as_deref().unwrap_or("").is_empty() {
                *policy = Some("Retain".to_owned());
            }
        }
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(10);
        default_pod_template(&mut spec.template);
    }

    fn validate(&self, obj: &StatefulSet) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = Vec::new();
        match spec.pod_management_policy.as_deref().unwrap_or("") {
            "" => errs.push(FieldError::required(&path.child("podManagementPolicy"), "")),
            "OrderedReady" | "Parallel" => {}
            other => errs.push(FieldError::invalid(
                &path.child("podManagementPolicy"),
                other,
                "must be 'OrderedReady' or 'Parallel'",
            )),
        }
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let strategy_path = path.child("updateStrategy");
        match strategy.type_.as_deref().unwrap_or("") {
            "" => errs.push(FieldError::required(&strategy_path, "")),
            "OnDelete" => {
                if strategy.rolling_update.is_some() {
                    errs.push(FieldError::invalid(
                        &strategy_path.child("rollingUpdate"),
                        Rendered(format!("{:?}", strategy.rolling_update)),
                        "only allowed for updateStrategy 'RollingUpdate'",
                    ));
                }
            }
            "RollingUpdate" => {
                if let Some(partition) = strategy.rolling_update.as_ref().and_then(|r| r.partition)
                {
                    errs.extend(validate_nonnegative(
                        i64::from(partition),
                        &strategy_path.child("rollingUpdate").child("partition"),
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                &strategy_path,
                other,
                "must be 'RollingUpdate' or 'OnDelete'",
            )),
        }
        errs.extend(validate_nonnegative(
            i64::from(spec.replicas.unwrap_or(0)),
            &path.child("replicas"),
        ));
        errs.extend(validate_nonnegative(
            i64::from(spec.min_ready_seconds.unwrap_or(0)),
            &path.child("minReadySeconds"),
        ));
        errs.extend(validate_selector_and_template(
            &spec.selector,
            &spec.template,
            &path,
            DeadlineRule::Invalid("must not be specified"),
        ));
        errs
    }

    fn validate_update(&self, new: &StatefulSet, old: &StatefulSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (Some(new_spec), Some(old_spec)) = (&new.spec, &old.spec) else {
            return errs;
        };
        errs.extend(validate_workload_update(new, old));
        let mut masked = new_spec.clone();
        masked.replicas = old_spec.replicas;
        masked.template = old_spec.template.clone();
        masked.update_strategy = old_spec.update_strategy.clone();
        masked.min_ready_seconds = old_spec.min_ready_seconds;
        masked.ordinals = old_spec.ordinals.clone();
        masked.revision_history_limit = old_spec.revision_history_limit;
        masked.persistent_volume_claim_retention_policy =
            old_spec.persistent_volume_claim_retention_policy.clone();
        // The selector has its own, more precise, error above.
        masked.selector = old_spec.selector.clone();
        if masked != *old_spec {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec"),
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column("Ready", "string", "Number of the pod with ready state", 0),
            age_column(),
        ];
        cols.extend(
            container_columns(
                "selector is a label query over pods that should match the replica count.",
            )
            .into_iter()
            .take(2),
        );
        cols
    }

    fn table_row(&self, obj: &StatefulSet, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let ready = obj
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let mut row = vec![
            text(format!("{ready}/{}", spec.replicas.unwrap_or(0))),
            text(age(&obj.metadata, now)),
        ];
        row.extend(
            wide_cells(&spec.template, &spec.selector)
                .into_iter()
                .take(2),
        );
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn sts() -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "serviceName": "nginx",
                "replicas": 2,
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                             "spec": {"containers": [{"name": "nginx", "image": "registry.k8s.io/nginx-slim:0.8"}]}}
            },
            "status": {"replicas": 2, "readyReplicas": 1}
        })
    }

    #[test]
    fn defaults() {
        let mut obj = sts();
        Typed(StatefulSetRules).default(&mut obj).unwrap();
        let spec = &obj["spec"];
        assert_eq!(spec["podManagementPolicy"], json!("OrderedReady"));
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        assert!(Typed(StatefulSetRules).validate_create(&obj).is_empty());
    }

    #[test]
    fn only_some_fields_may_change() {
        let s = Typed(StatefulSetRules);
        let mut old = sts();
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(5);
        assert!(s.validate_update(&new, &old).is_empty());
        new["spec"]["serviceName"] = json!("other");
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec![
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ]
        );
    }

    #[test]
    fn table_row() {
        let s = Typed(StatefulSetRules);
        let now: jiff::Timestamp = "2024-01-01T03:00:00Z".parse().unwrap();
        let cols = s.table_columns();
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(names, ["Ready", "Age", "Containers", "Images"]);
        assert_eq!(
            s.table_row(&sts(), now),
            vec![
                json!("1/2"),
                json!("3h"),
                json!("nginx"),
                json!("registry.k8s.io/nginx-slim:0.8")
            ]
        );
    }
}
