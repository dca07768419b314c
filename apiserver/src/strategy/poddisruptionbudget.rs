//! policy/v1 PodDisruptionBudget (`pkg/apis/policy/validation/validation.go`
//! `ValidatePodDisruptionBudget`, `ValidatePodDisruptionBudgetSpec`,
//! `pkg/registry/policy/poddisruptionbudget/strategy.go` and `printPodDisruptionBudget` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! ```text
//!   spec.minAvailable: 2 | "50%"      at most one of the two
//!   spec.maxUnavailable: 1 | "25%"
//!   spec.selector                     which pods (`{}`: every pod of the namespace)
//!   spec.unhealthyPodEvictionPolicy   IfHealthyBudget (when unset) | AlwaysAllow
//! ```
//!
//! Every field of the spec may change (as in Kubernetes since 1.15). The status is the
//! disruption controller's: how many pods are healthy, how many must be, and how many may be
//! disrupted now, which the eviction API reads (`crate::subresource::eviction`).
//!
//! Unlike Kubernetes, whose message for both bounds set prints the Go struct with its pointers
//! (`policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000...)...}`), the value
//! shown is the two bounds.

use super::field::{FieldPath, Rendered};
use super::selector::validate_label_selector;
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::workload::{
    go_render_int_or_string, validate_not_more_than_100_percent, validate_positive_int_or_percent,
};
use super::{FieldError, TableColumn};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// `unhealthyPodEvictionPolicy` values.
const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

/// The PodDisruptionBudget rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct PodDisruptionBudgetRules;

fn render(v: &Option<IntOrString>) -> String {
    v.as_ref()
        .map(|v| go_render_int_or_string(v).0)
        .unwrap_or_else(|| "nil".to_owned())
}

impl KindRules for PodDisruptionBudgetRules {
    type Object = PodDisruptionBudget;
    const STATUS_SUBRESOURCE: bool = true;

    fn validate(&self, obj: &PodDisruptionBudget) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let spec = obj.spec.clone().unwrap_or_default();
        let mut errs = Vec::new();
        if spec.min_available.is_some() && spec.max_unavailable.is_some() {
            errs.push(FieldError::invalid(
                &path,
                Rendered(format!(
                    "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, MaxUnavailable:{}}}",
                    render(&spec.min_available),
                    render(&spec.max_unavailable)
                )),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for (value, name) in [
            (&spec.min_available, "minAvailable"),
            (&spec.max_unavailable, "maxUnavailable"),
        ] {
            if let Some(v) = value {
                errs.extend(validate_positive_int_or_percent(v, &path.child(name)));
                errs.extend(validate_not_more_than_100_percent(v, &path.child(name)));
            }
        }
        if let Some(selector) = &spec.selector {
            errs.extend(validate_label_selector(selector, &path.child("selector")));
        }
        if let Some(policy) = &spec.unhealthy_pod_eviction_policy
            && !EVICTION_POLICIES.contains(&policy.as_str())
        {
            errs.push(FieldError::not_supported(
                &path.child("unhealthyPodEvictionPolicy"),
                policy.as_str(),
                &EVICTION_POLICIES,
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Min Available",
                "string",
                "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                0,
            ),
            column(
                "Max Unavailable",
                "string",
                "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                0,
            ),
            column(
                "Allowed Disruptions",
                "integer",
                "Number of pod disruptions that are currently allowed.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &PodDisruptionBudget, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let cell = |v: &Option<IntOrString>| match v {
            Some(IntOrString::Int(n)) => text(n.to_string()),
            Some(IntOrString::String(s)) => text(s.clone()),
            None => text("N/A".to_owned()),
        };
        vec![
            cell(&spec.min_available),
            cell(&spec.max_unavailable),
            int(obj.status.as_ref().map_or(0, |s| s.disruptions_allowed)),
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

    fn pdb(spec: Value) -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": spec,
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
        })
    }

    fn errors(obj: &Value) -> Vec<String> {
        crate::strategy::messages(&Typed(PodDisruptionBudgetRules).validate_create(obj))
    }

    #[test]
    fn bounds_are_an_integer_or_a_percentage_and_never_both() {
        assert!(
            errors(&pdb(
                json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}})
            ))
            .is_empty()
        );
        assert!(errors(&pdb(json!({"maxUnavailable": "25%"}))).is_empty());
        assert_eq!(
            errors(&pdb(json!({"minAvailable": 1, "maxUnavailable": 1}))),
            vec![
                "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}, MaxUnavailable:intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}}: minAvailable and maxUnavailable cannot be both set"
            ]
        );
        assert_eq!(
            errors(&pdb(json!({"minAvailable": -1}))),
            vec!["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            errors(&pdb(json!({"maxUnavailable": "150%"}))),
            vec![
                "spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
            ]
        );
        assert_eq!(
            errors(&pdb(json!({"minAvailable": "half"}))),
            vec![
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"half\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
            ]
        );
        assert_eq!(
            errors(&pdb(
                json!({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"})
            )),
            vec![
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
            ]
        );
    }

    #[test]
    fn the_table_shows_the_bounds_and_the_allowed_disruptions() {
        let s = Typed(PodDisruptionBudgetRules);
        let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&pdb(json!({"minAvailable": "50%"})), now),
            vec![json!("50%"), json!("N/A"), json!(1), json!("5m")]
        );
        assert_eq!(s.table_columns().len(), 4);
    }
}
