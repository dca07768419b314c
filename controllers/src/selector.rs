//! Label selectors: `metav1.LabelSelector` → a matcher.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`
//! (`LabelSelectorAsSelector`) and `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`.
//!
//! ```text
//!   matchLabels {app: nginx}                       app = nginx
//!   matchExpressions [{tier In [web, api]}]   ─▶   AND tier in (web, api)
//!                    [{canary DoesNotExist}]       AND !canary
//! ```
//!
//! Two Kubernetes rules a reader may not expect: an empty selector `{}` matches **everything**,
//! while a missing selector (`None`) matches **nothing**.
//!
//! This is a minimal version written for the controllers; the API server's field and label
//! selectors (`?labelSelector=`) live in the `apiserver` crate and the two should be unified
//! once both land.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::{Error, Result};

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key in (values)`; also what `matchLabels` entries become (`key in (value)`).
    In(String, Vec<String>),
    /// `key notin (values)`: true when the label is absent or has another value.
    NotIn(String, Vec<String>),
    /// `key`: the label is present, whatever its value.
    Exists(String),
    /// `!key`: the label is absent.
    DoesNotExist(String),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

/// A parsed label selector: all requirements must hold (`labels.Selector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Matches no object (a missing selector: `labels.Nothing()`).
    Nothing,
    /// Matches when every requirement holds; no requirements matches everything.
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// Parses a `LabelSelector` as `metav1.LabelSelectorAsSelector` does: `None` selects
    /// nothing, `{}` selects everything.
    ///
    /// Errors for an unknown operator, and for `In`/`NotIn` without values or
    /// `Exists`/`DoesNotExist` with values (Kubernetes' `labels.NewRequirement` checks).
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Selector> {
        let Some(selector) = selector else {
            return Ok(Selector::Nothing);
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expr in selector.match_expressions.iter().flatten() {
            let values = expr.values.clone().unwrap_or_default();
            let key = expr.key.clone();
            let requirement = match expr.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(Error::InvalidSelector(format!(
                        "{key}: for 'in', 'notin' operators, values set can't be empty"
                    )));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(Error::InvalidSelector(format!(
                        "{key}: values set must be empty for exists and does not exist"
                    )));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(Error::InvalidSelector(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            requirements.push(requirement);
        }
        Ok(Selector::Requirements(requirements))
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Whether this selector selects everything (the `{}` selector).
    pub fn is_everything(&self) -> bool {
        matches!(self, Selector::Requirements(r) if r.is_empty())
    }
}

/// Convenience: does `selector` select an object with `labels`? A selector that fails to
/// parse selects nothing, as in Kubernetes' controllers (they log and skip).
pub fn labels_match(
    selector: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    Selector::from_label_selector(selector)
        .map(|s| s.matches(labels.unwrap_or(&empty)))
        .unwrap_or(false)
}

/// `labels.SelectorFromSet(set).Matches(labels)`: every key/value of `set` is in `labels`
/// (used for `fullyLabeledReplicas`: pod labels ⊇ template labels).
pub fn labels_superset(labels: &BTreeMap<String, String>, set: &BTreeMap<String, String>) -> bool {
    set.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn none_selects_nothing_and_empty_selects_everything() {
        assert!(!labels_match(None, Some(&labels(&[("app", "x")]))));
        assert!(labels_match(
            Some(&LabelSelector::default()),
            Some(&labels(&[("app", "x")]))
        ));
        assert!(labels_match(Some(&LabelSelector::default()), None));
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "nginx")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["web", "api"]),
                expr("track", "NotIn", &["canary"]),
                expr("team", "Exists", &[]),
                expr("legacy", "DoesNotExist", &[]),
            ]),
        };
        let cases = [
            (vec![("app", "nginx"), ("tier", "web"), ("team", "a")], true),
            (
                vec![
                    ("app", "nginx"),
                    ("tier", "api"),
                    ("team", "a"),
                    ("track", "stable"),
                ],
                true,
            ),
            (vec![("app", "nginx"), ("tier", "db"), ("team", "a")], false),
            (
                vec![
                    ("app", "nginx"),
                    ("tier", "web"),
                    ("team", "a"),
                    ("track", "canary"),
                ],
                false,
            ),
            (vec![("app", "nginx"), ("tier", "web")], false),
            (
                vec![
                    ("app", "nginx"),
                    ("tier", "web"),
                    ("team", "a"),
                    ("legacy", "1"),
                ],
                false,
            ),
            (
                vec![("app", "apache"), ("tier", "web"), ("team", "a")],
                false,
            ),
        ];
        for (pairs, want) in cases {
            assert_eq!(
                labels_match(Some(&selector), Some(&labels(&pairs))),
                want,
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn invalid_operators_and_values_are_errors() {
        for bad in [
            expr("a", "Like", &["x"]),
            expr("a", "In", &[]),
            expr("a", "Exists", &["x"]),
        ] {
            let selector = LabelSelector {
                match_expressions: Some(vec![bad]),
                ..Default::default()
            };
            assert!(Selector::from_label_selector(Some(&selector)).is_err());
            assert!(!labels_match(Some(&selector), Some(&labels(&[("a", "x")]))));
        }
    }

    #[test]
    fn superset() {
        assert!(labels_superset(
            &labels(&[("a", "1"), ("b", "2")]),
            &labels(&[("a", "1")])
        ));
        assert!(!labels_superset(
            &labels(&[("a", "2")]),
            &labels(&[("a", "1")])
        ));
    }
}
