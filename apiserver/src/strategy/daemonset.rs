//! apps/v1 DaemonSet (`pkg/apis/apps/v1/defaults.go` `SetDefaults_DaemonSet`,
//! `pkg/apis/apps/validation/validation.go` `ValidateDaemonSetSpec`,
//! `ValidateDaemonSetUpdateStrategy`, `ValidateRollingUpdateDaemonSet`, and `printDaemonSet` in
//! `pkg/printers/internalversion/printers.go`).

use super::field::{FieldPath, validate_nonnegative};
use super::pod_spec::default_pod_template;
use super::table::{age_column, column, container_columns, int, text};
use super::typed::{KindRules, age};
use super::workload::{
    DeadlineRule, RollingBounds, go_render_int_or_string, validate_not_more_than_100_percent,
    validate_selector_and_template, validate_workload_update, wide_cells,
};
use super::{FieldError, TableColumn};
use apimachinery::labels::format_labels;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// The DaemonSet rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct DaemonSetRules;

impl KindRules for DaemonSetRules {
    type Object = DaemonSet;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut DaemonSet) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        let strategy = spec
            .update_strategy
            .get_or_insert_with(DaemonSetUpdateStrategy::default);
        if strategy.type_.as_deref().unwrap_or("").is_empty() {
            strategy.type_ = Some("RollingUpdate".to_owned());
        }
        if strategy.type_.as_deref() == Some("RollingUpdate") {
            let ru = strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateDaemonSet::default);
            ru.max_unavailable.get_or_insert(IntOrString::Int(1));
            ru.max_surge.get_or_insert(IntOrString::Int(0));
        }
        spec.revision_history_limit.get_or_insert(10);
        default_pod_template(&mut spec.template);
    }

    /// `PrepareForCreate`: `spec.templateGeneration` starts at 1 (kept if the client set a
    /// higher one), carried in apps/v1 as the annotation
    /// `deprecated.daemonset.template.generation`.
    fn prepare_for_create(&self, obj: &mut DaemonSet) {
        let generation = template_generation(obj).filter(|g| *g >= 1).unwrap_or(1);
        set_template_generation(obj, generation);
    }

    /// `PrepareForUpdate`: the template generation is the old one, plus one when the template
    /// changed; a client cannot set it.
    fn prepare_for_update(&self, new: &mut DaemonSet, old: &DaemonSet) {
        let mut generation = template_generation(old).unwrap_or(0);
        let template = |ds: &DaemonSet| ds.spec.as_ref().map(|s| s.template.clone());
        if template(new) != template(old) {
            generation += 1;
        }
        set_template_generation(new, generation);
    }

    fn validate(&self, obj: &DaemonSet) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = validate_selector_and_template(
            &spec.selector,
            &spec.template,
            &path,
            DeadlineRule::Invalid("activeDeadlineSeconds in DaemonSet is not Supported"),
        );
        errs.extend(validate_nonnegative(
            i64::from(spec.min_ready_seconds.unwrap_or(0)),
            &path.child("minReadySeconds"),
        ));
        errs.extend(validate_update_strategy(
            &spec.update_strategy.unwrap_or_default(),
            &path.child("updateStrategy"),
        ));
        if let Some(limit) = spec.revision_history_limit {
            errs.extend(validate_nonnegative(
                i64::from(limit),
                &path.child("revisionHistoryLimit"),
            ));
        }
        errs
    }

    fn validate_update(&self, new: &DaemonSet, old: &DaemonSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_workload_update(new, old));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
                0,
            ),
            column(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
                0,
            ),
            column(
                "Ready",
                "integer",
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
                0,
            ),
            column(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
                0,
            ),
            column(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
                0,
            ),
            column(
                "Node Selector",
                "string",
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(
            "A label query over pods that are managed by the daemon set. Must match in order to be controlled.",
        ));
        cols
    }

    fn table_row(&self, obj: &DaemonSet, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let node_selector = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref());
        let mut row = vec![
            int(status.desired_number_scheduled),
            int(status.current_number_scheduled),
            int(status.number_ready),
            int(status.updated_number_scheduled.unwrap_or(0)),
            int(status.number_available.unwrap_or(0)),
            text(format_labels(node_selector)),
            text(age(&obj.metadata, now)),
        ];
        row.extend(wide_cells(&spec.template, &spec.selector));
        row
    }
}

/// The annotation apps/v1 carries the internal `spec.templateGeneration` in
/// (`DeprecatedTemplateGeneration`); the DaemonSet controller labels pods with it.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

fn set_template_generation(ds: &mut DaemonSet, generation: i64) {
    let annotations = ds.metadata.annotations.get_or_insert_with(Default::default);
    if generation == 0 {
        annotations.remove(TEMPLATE_GENERATION_ANNOTATION);
    } else {
        annotations.insert(
            TEMPLATE_GENERATION_ANNOTATION.to_owned(),
            generation.to_string(),
        );
    }
}

/// `ValidateDaemonSetUpdateStrategy` and `ValidateRollingUpdateDaemonSet`: exactly one of
/// `maxSurge`/`maxUnavailable` is non-zero.
fn validate_update_strategy(
    strategy: &DaemonSetUpdateStrategy,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match strategy.type_.as_deref().unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = &strategy.rolling_update else {
                return vec![FieldError::required(&path.child("rollingUpdate"), "")];
            };
            let b = RollingBounds::check(
                ru.max_unavailable.as_ref(),
                ru.max_surge.as_ref(),
                path.child("rollingUpdate"),
                &mut errs,
            );
            errs.extend(validate_not_more_than_100_percent(
                b.max_unavailable,
                &b.unavailable_path(),
            ));
            errs.extend(validate_not_more_than_100_percent(
                b.max_surge,
                &b.surge_path(),
            ));
            let (unavailable, surge) = b.values();
            let (has_unavailable, has_surge) = (unavailable != 0, surge != 0);
            if has_unavailable && has_surge {
                errs.push(FieldError::invalid(
                    &b.surge_path(),
                    go_render_int_or_string(b.max_surge),
                    "may not be set when maxUnavailable is non-zero",
                ));
            } else if !has_unavailable && !has_surge {
                errs.push(FieldError::required(
                    &b.unavailable_path(),
                    "cannot be 0 when maxSurge is 0",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            path,
            other,
            &["RollingUpdate", "OnDelete"],
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

    fn ds() -> Value {
        json!({
            "metadata": {"name": "fluentd", "namespace": "kube-system", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "selector": {"matchLabels": {"name": "fluentd"}},
                "template": {"metadata": {"labels": {"name": "fluentd"}},
                             "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "f", "image": "fluentd:v1"}]}}
            },
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2, "numberMisscheduled": 0}
        })
    }

    #[test]
    fn defaults_and_strategy_rules() {
        let s = Typed(DaemonSetRules);
        let mut obj = ds();
        s.default(&mut obj).unwrap();
        assert_eq!(
            obj["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
        );
        assert_eq!(obj["spec"]["revisionHistoryLimit"], json!(10));
        assert!(s.validate_create(&obj).is_empty());
        obj["spec"]["updateStrategy"]["rollingUpdate"] =
            json!({"maxSurge": 1, "maxUnavailable": 1});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&obj));
        assert_eq!(
            errs,
            vec![
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero"
            ]
        );
        obj["spec"]["updateStrategy"] = json!({"type": "Sometimes"});
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&obj));
        assert_eq!(
            errs,
            vec![
                "spec.updateStrategy: Unsupported value: \"Sometimes\": supported values: \"RollingUpdate\", \"OnDelete\""
            ]
        );
    }

    #[test]
    fn template_generation_counts_template_changes() {
        let s = Typed(DaemonSetRules);
        let mut old = ds();
        s.default(&mut old).unwrap();
        s.prepare_for_create(&mut old);
        let generation =
            |o: &Value| o["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION].clone();
        assert_eq!(generation(&old), json!("1"));
        let mut same = old.clone();
        same["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION] = json!("7");
        s.prepare_for_update(&mut same, &old);
        assert_eq!(generation(&same), json!("1"), "clients cannot set it");
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("fluentd:v2");
        s.prepare_for_update(&mut new, &old);
        assert_eq!(generation(&new), json!("2"));
    }

    #[test]
    fn table_row() {
        let s = Typed(DaemonSetRules);
        let now: jiff::Timestamp = "2024-01-01T00:00:30Z".parse().unwrap();
        let cols = s.table_columns();
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            s.table_row(&ds(), now),
            vec![
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux"),
                json!("30s"),
                json!("f"),
                json!("fluentd:v1"),
                json!("name=fluentd")
            ]
        );
    }
}
