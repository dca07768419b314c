//! scheduling.k8s.io/v1 PriorityClass (`pkg/apis/scheduling/v1/defaults.go`
//! `SetDefaults_PriorityClass`, `pkg/apis/scheduling/validation/validation.go`
//! `ValidatePriorityClass` and `ValidatePriorityClassUpdate`, the system classes of
//! `pkg/apis/scheduling/v1/helpers.go` `SystemPriorityClasses` / `IsKnownSystemPriorityClass`,
//! and `printPriorityClass` in `pkg/printers/internalversion/printers.go`).
//!
//! ```text
//!   defaults   preemptionPolicy: PreemptLowerPriority
//!   create     name "system-*" ─▶ must be one of the two system classes, with its value
//!                                 and globalDefault
//!              else value ≤ 1000000000 (HighestUserDefinablePriority)
//!              preemptionPolicy ∈ {Never, PreemptLowerPriority}
//!   update     value and preemptionPolicy are immutable
//! ```
//!
//! The single-`globalDefault` rule and the pods' priorities are the Priority admission
//! plugin's (`crate::admission::priority`); the two system classes are created when the API
//! server starts (`crate::admission::priority::bootstrap_system_priority_classes`).

use super::field::{FieldPath, validate_immutable};
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::Value;

/// `SystemPriorityClassPrefix`: names with it are reserved.
pub const SYSTEM_PREFIX: &str = "system-";
/// `HighestUserDefinablePriority`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
/// `SystemCriticalPriority` (2 × HighestUserDefinablePriority).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;
/// `PreemptLowerPriority`, the default `preemptionPolicy`.
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
/// `PreemptNever`.
pub const PREEMPT_NEVER: &str = "Never";

/// One of the system classes: name, value and description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemClass {
    /// The class's name.
    pub name: &'static str,
    /// Its value.
    pub value: i32,
    /// Its `description`.
    pub description: &'static str,
}

/// `SystemPriorityClasses()`: `system-node-critical` and `system-cluster-critical`.
pub const SYSTEM_CLASSES: [SystemClass; 2] = [
    SystemClass {
        name: "system-node-critical",
        value: SYSTEM_CRITICAL_PRIORITY + 1000,
        description: "Used for system critical pods that must not be moved from their current node.",
    },
    SystemClass {
        name: "system-cluster-critical",
        value: SYSTEM_CRITICAL_PRIORITY,
        description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    },
];

/// Whether `name` is one of the system classes.
pub fn is_system_class(name: &str) -> bool {
    SYSTEM_CLASSES.iter().any(|c| c.name == name)
}

/// `IsKnownSystemPriorityClass`: `Err` says what is wrong (system classes are never global
/// defaults).
fn known_system_class(name: &str, value: i32, global_default: bool) -> Result<(), String> {
    let Some(class) = SYSTEM_CLASSES.iter().find(|c| c.name == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if class.value != value {
        return Err(format!(
            "value of {} PriorityClass must be {}",
            class.name, class.value
        ));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {} PriorityClass must be false",
            class.name
        ));
    }
    Ok(())
}

/// The PriorityClass rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct PriorityClassRules;

impl KindRules for PriorityClassRules {
    type Object = PriorityClass;

    fn set_defaults(&self, obj: &mut PriorityClass) {
        obj.preemption_policy
            .get_or_insert_with(|| PREEMPT_LOWER_PRIORITY.to_owned());
    }

    fn validate(&self, obj: &PriorityClass) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        if name.starts_with(SYSTEM_PREFIX) {
            if let Err(why) =
                known_system_class(name, obj.value, obj.global_default.unwrap_or(false))
            {
                errs.push(FieldError::forbidden(
                    &FieldPath::new("metadata").child("name"),
                    &format!(
                        "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {why}"
                    ),
                ));
            }
        } else if obj.value > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(FieldError::forbidden(
                &FieldPath::new("value"),
                &format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            ));
        }
        if let Some(policy) = obj.preemption_policy.as_deref()
            && policy != PREEMPT_LOWER_PRIORITY
            && policy != PREEMPT_NEVER
        {
            errs.push(FieldError::not_supported(
                &FieldPath::new("preemptionPolicy"),
                policy,
                &[PREEMPT_NEVER, PREEMPT_LOWER_PRIORITY],
            ));
        }
        errs
    }

    fn validate_update(&self, new: &PriorityClass, old: &PriorityClass) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if new.value != old.value {
            errs.push(FieldError::forbidden(
                &FieldPath::new("value"),
                "may not be changed in an update.",
            ));
        }
        errs.extend(validate_immutable(
            &new.preemption_policy,
            &old.preemption_policy,
            || format!("{:?}", new.preemption_policy.as_deref().unwrap_or_default()),
            &FieldPath::new("preemptionPolicy"),
        ));
        errs
    }

    fn bumps_generation(
        &self,
        _new: &PriorityClass,
        _old: &PriorityClass,
        json: (&Value, &Value),
    ) -> bool {
        let fields = |v: &Value| {
            (
                v.get("value").cloned(),
                v.get("globalDefault").cloned(),
                v.get("description").cloned(),
                v.get("preemptionPolicy").cloned(),
            )
        };
        fields(json.0) != fields(json.1)
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Value",
                "integer",
                "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
                0,
            ),
            column(
                "Global-Default",
                "boolean",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
                0,
            ),
            age_column(),
            column(
                "PreemptionPolicy",
                "string",
                "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
                0,
            ),
        ]
    }

    fn table_row(&self, obj: &PriorityClass, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            int(obj.value),
            Value::Bool(obj.global_default.unwrap_or(false)),
            text(age(&obj.metadata, now)),
            text(obj.preemption_policy.clone().unwrap_or_default()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::messages;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn pc(name: &str, value: i64) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"}, "value": value})
    }

    fn create_errors(mut obj: Value) -> Vec<String> {
        let s = Typed(PriorityClassRules);
        s.default(&mut obj).unwrap();
        messages(&s.validate_create(&obj))
    }

    #[test]
    fn defaults_the_preemption_policy() {
        let mut obj = pc("high", 1000);
        Typed(PriorityClassRules).default(&mut obj).unwrap();
        assert_eq!(obj["preemptionPolicy"], json!("PreemptLowerPriority"));
        assert!(obj.get("globalDefault").is_none());
        assert!(create_errors(obj).is_empty());
    }

    #[test]
    fn values_over_a_billion_are_for_system_classes_only() {
        assert_eq!(
            create_errors(pc("huge", 1_000_000_001)),
            vec![
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
            ]
        );
        assert!(create_errors(pc("system-node-critical", 2_000_001_000)).is_empty());
        assert!(create_errors(pc("system-cluster-critical", 2_000_000_000)).is_empty());
        assert_eq!(
            create_errors(pc("system-mine", 10)),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"
            ]
        );
        assert_eq!(
            create_errors(pc("system-node-critical", 10)),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"
            ]
        );
        let mut bad = pc("x", 1);
        bad["preemptionPolicy"] = json!("Sometimes");
        assert_eq!(
            create_errors(bad),
            vec![
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\""
            ]
        );
    }

    #[test]
    fn value_and_preemption_policy_are_immutable() {
        let s = Typed(PriorityClassRules);
        let mut old = pc("high", 1000);
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["value"] = json!(2000);
        new["preemptionPolicy"] = json!("Never");
        assert_eq!(
            messages(&s.validate_update(&new, &old)),
            vec![
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"Never\": field is immutable"
            ]
        );
        let mut described = old.clone();
        described["description"] = json!("more");
        assert!(messages(&s.validate_update(&described, &old)).is_empty());
    }

    #[test]
    fn table_row_is_printpriorityclass() {
        let s = Typed(PriorityClassRules);
        let mut obj = pc("high", 1000);
        obj["globalDefault"] = json!(true);
        s.default(&mut obj).unwrap();
        let now: jiff::Timestamp = "2024-01-03T00:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&obj, now),
            vec![
                json!(1000),
                json!(true),
                json!("2d"),
                json!("PreemptLowerPriority")
            ]
        );
        let names: Vec<String> = s
            .table_columns()
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(
            names,
            ["Value", "Global-Default", "Age", "PreemptionPolicy"]
        );
    }
}
