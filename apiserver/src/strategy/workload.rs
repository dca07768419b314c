//! What the apps/v1 workloads (Deployment, ReplicaSet, DaemonSet, StatefulSet) share: a
//! selector that must select their own pod template, a template whose pods restart `Always`,
//! and a selector that never changes after creation (`pkg/apis/apps/validation/validation.go`
//! `ValidatePodTemplateSpecForReplicaSet`, and the `ValidateImmutableField(..., spec.selector)`
//! of each `pkg/registry/apps/<kind>/strategy.go`).
//!
//! ```text
//! spec.selector.matchLabels:        app=nginx      ─┐ must match
//! spec.template.metadata.labels:    app=nginx,x=y  ◀┘ (`selector` does not match template `labels`)
//! ```

use super::FieldError;
use super::field::Rendered;
use super::field::{FIELD_IMMUTABLE, FieldPath};
use super::pod_spec::validate_pod_template;
use super::selector::{go_render, is_empty, validate_label_selector};
use super::table::{containers_and_images, text};
use apimachinery::Selector;
use apimachinery::labels::format_label_selector;
use apimachinery::validation::is_valid_percent;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// How a workload rejects `activeDeadlineSeconds` in its template (each kind words it its own
/// way in Kubernetes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineRule {
    /// `Forbidden: <message>` (Deployment, ReplicaSet).
    Forbidden(&'static str),
    /// `Invalid value: <seconds>: <message>` (DaemonSet, StatefulSet).
    Invalid(&'static str),
}

/// Deployment's and ReplicaSet's rule.
pub const REPLICA_SET_DEADLINE: DeadlineRule =
    DeadlineRule::Forbidden("activeDeadlineSeconds in ReplicaSet is not Supported");

/// The selector and template of an apps/v1 workload, on create and update.
///
/// Unlike Kubernetes, a missing selector and an explicitly empty `{}` selector are both
/// reported as `spec.selector: Required value` (the typed decoding cannot tell them apart).
pub fn validate_selector_and_template(
    selector: &LabelSelector,
    template: &PodTemplateSpec,
    spec: &FieldPath,
    deadline: DeadlineRule,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector_path = spec.child("selector");
    if is_empty(selector) {
        errs.push(FieldError::required(&selector_path, ""));
    } else {
        errs.extend(validate_label_selector(selector, &selector_path));
    }
    let template_path = spec.child("template");
    let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
    if is_empty(selector)
        || !Selector::from_label_selector(Some(selector)).is_ok_and(|s| s.matches(&labels.as_ref()))
    {
        errs.push(FieldError::invalid(
            &template_path.child("metadata").child("labels"),
            labels.clone().unwrap_or_default(),
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(validate_pod_template(template, &template_path));
    let pod_spec = template.spec.clone().unwrap_or_default();
    let restart = pod_spec.restart_policy.as_deref().unwrap_or("");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            &template_path.child("spec").child("restartPolicy"),
            restart,
            &["Always"],
        ));
    }
    if let Some(deadline_secs) = pod_spec.active_deadline_seconds {
        let p = template_path.child("spec").child("activeDeadlineSeconds");
        errs.push(match deadline {
            DeadlineRule::Forbidden(msg) => FieldError::forbidden(&p, msg),
            DeadlineRule::Invalid(msg) => FieldError::invalid(&p, deadline_secs, msg),
        });
    }
    errs
}

/// `spec.selector: Invalid value: v1.LabelSelector{...}: field is immutable` when the selector
/// changed on update.
pub fn validate_selector_unchanged(
    new: &LabelSelector,
    old: &LabelSelector,
    spec: &FieldPath,
) -> Vec<FieldError> {
    if new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(
            &spec.child("selector"),
            go_render(new),
            FIELD_IMMUTABLE,
        )]
    }
}

/// The `-o wide` cells of workloads: containers, images and the selector.
pub fn wide_cells(template: &PodTemplateSpec, selector: &LabelSelector) -> [Value; 3] {
    let [containers, images] = containers_and_images(template.spec.as_ref());
    // kubectl prints `selector.String()`, which is empty for a selector without requirements.
    let sel = format_label_selector(Some(selector));
    let sel = if sel == "<none>" { String::new() } else { sel };
    [containers, images, text(sel)]
}

/// An apps/v1 workload, as far as the rules shared here need to see it.
pub trait Workload {
    /// `spec.selector` (empty when there is no spec).
    fn selector(&self) -> LabelSelector;
}

macro_rules! workload {
    ($($kind:ty),*) => {$(
        impl Workload for $kind {
            fn selector(&self) -> LabelSelector {
                self.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default()
            }
        }
    )*};
}
workload!(
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::apps::v1::StatefulSet
);

/// The update rule every apps/v1 workload adds to its create rules: the selector is fixed.
pub fn validate_workload_update<W: Workload>(new: &W, old: &W) -> Vec<FieldError> {
    validate_selector_unchanged(&new.selector(), &old.selector(), &FieldPath::new("spec"))
}

/// An `IntOrString` as Go's `%#v` prints it in error messages
/// (`intstr.IntOrString{Type:1, IntVal:0, StrVal:"25%"}`).
pub fn go_render_int_or_string(v: &IntOrString) -> Rendered {
    Rendered(match v {
        IntOrString::Int(n) => format!("intstr.IntOrString{{Type:0, IntVal:{n}, StrVal:\"\"}}"),
        IntOrString::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            apimachinery::fmt::go_quote(s)
        ),
    })
}

/// `ValidatePositiveIntOrPercent`: a non-negative integer or a `N%` string.
pub fn validate_positive_int_or_percent(v: &IntOrString, path: &FieldPath) -> Vec<FieldError> {
    match v {
        IntOrString::String(s) => is_valid_percent(s)
            .into_iter()
            .map(|msg| FieldError::invalid(path, go_render_int_or_string(v), &msg))
            .collect(),
        IntOrString::Int(n) => super::field::validate_nonnegative(i64::from(*n), path),
    }
}

/// `getIntOrPercentValue`: the number, whether given as `5` or `5%`.
pub fn int_or_percent_value(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => s.trim_end_matches('%').parse().unwrap_or(0),
    }
}

/// The `maxUnavailable` and `maxSurge` of a rolling update (absent counts as 0), after
/// [`validate_positive_int_or_percent`] checked both; Deployment and DaemonSet then add their
/// own rules about which may be zero.
pub struct RollingBounds<'a> {
    /// `maxUnavailable`.
    pub max_unavailable: &'a IntOrString,
    /// `maxSurge`.
    pub max_surge: &'a IntOrString,
    /// The `rollingUpdate` path.
    pub path: FieldPath,
}

static ZERO: IntOrString = IntOrString::Int(0);

impl<'a> RollingBounds<'a> {
    /// Checks both values and keeps them for the kind's own rules.
    pub fn check(
        max_unavailable: Option<&'a IntOrString>,
        max_surge: Option<&'a IntOrString>,
        path: FieldPath,
        errs: &mut Vec<FieldError>,
    ) -> Self {
        let bounds = RollingBounds {
            max_unavailable: max_unavailable.unwrap_or(&ZERO),
            max_surge: max_surge.unwrap_or(&ZERO),
            path,
        };
        errs.extend(validate_positive_int_or_percent(
            bounds.max_unavailable,
            &bounds.unavailable_path(),
        ));
        errs.extend(validate_positive_int_or_percent(
            bounds.max_surge,
            &bounds.surge_path(),
        ));
        bounds
    }

    /// `rollingUpdate.maxUnavailable`.
    pub fn unavailable_path(&self) -> FieldPath {
        self.path.child("maxUnavailable")
    }

    /// `rollingUpdate.maxSurge`.
    pub fn surge_path(&self) -> FieldPath {
        self.path.child("maxSurge")
    }

    /// The two numbers, percentages or not: `(maxUnavailable, maxSurge)`.
    pub fn values(&self) -> (i64, i64) {
        (
            int_or_percent_value(self.max_unavailable),
            int_or_percent_value(self.max_surge),
        )
    }
}

/// `IsNotMoreThan100Percent`: a percentage may not exceed 100%.
pub fn validate_not_more_than_100_percent(v: &IntOrString, path: &FieldPath) -> Vec<FieldError> {
    match v {
        IntOrString::String(s)
            if is_valid_percent(s).is_empty() && int_or_percent_value(v) > 100 =>
        {
            vec![FieldError::invalid(
                path,
                go_render_int_or_string(v),
                "must not be greater than 100%",
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(v: serde_json::Value) -> PodTemplateSpec {
        let mut t: PodTemplateSpec = serde_json::from_value(v).unwrap();
        super::super::pod_spec::default_pod_template(&mut t);
        t
    }

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    fn run(s: serde_json::Value, t: serde_json::Value) -> Vec<String> {
        crate::strategy::messages(&validate_selector_and_template(
            &sel(s),
            &template(t),
            &FieldPath::new("spec"),
            REPLICA_SET_DEADLINE,
        ))
    }

    #[test]
    fn selector_must_match_template() {
        let t = json!({"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert!(run(json!({"matchLabels": {"app": "nginx"}}), t.clone()).is_empty());
        assert_eq!(
            run(json!({"matchLabels": {"app": "web"}}), t.clone()),
            vec![
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"nginx\"}: `selector` does not match template `labels`"
            ]
        );
        assert_eq!(
            run(json!({}), t),
            vec![
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"nginx\"}: `selector` does not match template `labels`",
            ]
        );
    }

    #[test]
    fn template_must_restart_always() {
        let t = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"restartPolicy": "OnFailure", "activeDeadlineSeconds": 5, "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            run(json!({"matchLabels": {"app": "a"}}), t),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ]
        );
    }

    #[test]
    fn selector_is_immutable() {
        let errs = validate_selector_unchanged(
            &sel(json!({"matchLabels": {"app": "b"}})),
            &sel(json!({"matchLabels": {"app": "a"}})),
            &FieldPath::new("spec"),
        );
        assert_eq!(
            errs[0].to_string(),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"b\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
    }
}
