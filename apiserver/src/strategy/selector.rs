//! Label selectors in object specs: validation (apimachinery's
//! `pkg/apis/meta/v1/validation/validation.go` `ValidateLabelSelector`) and the Go rendering
//! of a `metav1.LabelSelector` in error messages.
//!
//! [`validate_label_selector`] is what the workloads use; [`validate_label_selector_with`]
//! is apimachinery 1.33's to the letter (its order, and the label values of expressions),
//! which the RBAC kinds use.
//!
//! Matching and printing (`LabelSelectorAsSelector`, `FormatLabelSelector`) are the
//! `apimachinery` crate's [`apimachinery::labels`].

use super::FieldError;
use super::field::{FieldPath, Rendered};
use super::meta::validate_labels;
use apimachinery::fmt::go_quote;
use apimachinery::validation::{is_label_value, is_qualified_name};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// `ValidateLabelSelector`: matchLabels are valid labels; each matchExpression has a valid key,
/// a known operator and values exactly when the operator needs them.
pub fn validate_label_selector(sel: &LabelSelector, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let n_values = req.values.as_ref().map_or(0, Vec::len);
        match req.operator.as_str() {
            "In" | "NotIn" => {
                if n_values == 0 {
                    errs.push(FieldError::required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if n_values > 0 {
                    errs.push(FieldError::forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                &p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for msg in is_qualified_name(&req.key) {
            errs.push(FieldError::invalid(&p.child("key"), &req.key, &msg));
        }
    }
    if let Some(labels) = &sel.match_labels {
        errs.extend(validate_labels(labels, &path.child("matchLabels")));
    }
    errs
}

/// `ValidateLabelSelector` as apimachinery 1.33 has it, with
/// `LabelSelectorValidationOptions.AllowInvalidLabelValueInSelector`: `matchLabels` first,
/// then each matchExpression's operator and values, its key, and (unless
/// `allow_invalid_label_values`) each value, which must be a label value.
pub fn validate_label_selector_with(
    sel: &LabelSelector,
    allow_invalid_label_values: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = &sel.match_labels {
        errs.extend(validate_labels(labels, &path.child("matchLabels")));
    }
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                &p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for msg in is_qualified_name(&req.key) {
            errs.push(FieldError::invalid(&p.child("key"), &req.key, &msg));
        }
        if !allow_invalid_label_values {
            for (j, value) in values.iter().enumerate() {
                for msg in is_label_value(value) {
                    errs.push(FieldError::invalid(
                        &p.child("values").index(j),
                        value,
                        &msg,
                    ));
                }
            }
        }
    }
    errs
}

/// Whether the selector has no requirement at all (`{}`), which selects everything in
/// Kubernetes but is rejected for workloads.
pub fn is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// A label selector as Go's `%#v` prints a `metav1.LabelSelector` in error messages, e.g.
/// `v1.LabelSelector{MatchLabels:map[string]string{"app":"nginx"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}`.
pub fn go_render(sel: &LabelSelector) -> Rendered {
    let labels = match &sel.match_labels {
        Some(m) => {
            let entries: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
                .collect();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
        None => "map[string]string(nil)".to_owned(),
    };
    let exprs = match &sel.match_expressions {
        None => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|r| {
                    let values = match &r.values {
                        None => "[]string(nil)".to_owned(),
                        Some(v) => format!(
                            "[]string{{{}}}",
                            v.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", ")
                        ),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        go_quote(&r.key),
                        go_quote(&r.operator)
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    Rendered(format!(
        "v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::field::GoValue;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn sel() -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "nginx".into())])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["web".into(), "api".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        }
    }

    #[test]
    fn validation_and_rendering() {
        let mut s = sel();
        if let Some(e) = s.match_expressions.as_mut() {
            e[0].values = None;
            e[1].operator = "Equals".into();
        }
        let errs: Vec<String> = crate::strategy::messages(&validate_label_selector(
            &s,
            &FieldPath::new("spec").child("selector"),
        ));
        assert_eq!(
            errs,
            vec![
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].operator: Invalid value: \"Equals\": not a valid selector operator",
            ]
        );
        let only_labels = LabelSelector {
            match_labels: sel().match_labels,
            match_expressions: None,
        };
        assert_eq!(
            go_render(&only_labels).go(),
            "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"nginx\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
    }
}
