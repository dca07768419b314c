//! Label selectors: apimachinery's `pkg/labels` (`labels.Selector`, `labels.Requirement`,
//! `labels.Parse`, `SelectorFromSet`, `FormatLabels`) and the `metav1.LabelSelector` helpers of
//! `pkg/apis/meta/v1/helpers.go` (`LabelSelectorAsSelector`, `FormatLabelSelector`).
//!
//! A selector is a conjunction of requirements, each equality-based or set-based:
//!
//! ```text
//!   app=web, tier!=db, env in (prod,staging), release notin (canary), gpu, !legacy, rank>3
//!   └Equals┘ └NotEquals┘ └────────In────────┘ └────────NotIn───────┘ Exists DoesNotExist Gt
//! ```
//!
//! The requirements are kept sorted by key, as `Selector.Add` keeps them, so a selector prints
//! the same whichever order it was written in. `NotEquals`/`NotIn` also match objects
//! **without** the label. From a `metav1.LabelSelector` (a workload's `spec.selector`):
//! `matchLabels` become `Equals`, `matchExpressions` keep their operator; an empty selector
//! matches everything, a missing one ([`Selector::nothing`]) matches nothing.
//!
//! kube-core's `Selector` only builds query strings (no parser, no `Gt`/`Lt`, no `Nothing`),
//! so the types here are Kubernetes' own.

mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::fmt::go_quote;
use crate::validation::{is_label_value, is_qualified_name};

/// A selector or requirement that Kubernetes refuses, with its message (`labels.Parse`'s and
/// `labels.NewRequirement`'s wording, several problems joined as `[a, b]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub String);

/// How a requirement compares a label (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// `key=value`: the label is present with this value.
    Equals,
    /// `key==value`: the same as [`Operator::Equals`], printed as written.
    DoubleEquals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key in (a,b)`: the label is present with one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is an integer less than `n`.
    LessThan,
}

/// One condition on one label key (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The comparison.
    pub operator: Operator,
    /// The values compared against (empty for `Exists`/`DoesNotExist`).
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// `labels.NewRequirement`: the key must be a qualified name; `In`/`NotIn` need values,
    /// `Equals`/`NotEquals` exactly one, `Exists`/`DoesNotExist` none, `Gt`/`Lt` one integer;
    /// every value must be a label value.
    pub fn new(
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Self, Error> {
        let values: Vec<String> = values.into_iter().collect();
        let mut errs = Vec::new();
        let key_problems = is_qualified_name(key);
        if !key_problems.is_empty() {
            errs.push(invalid("key", &go_quote(key), &key_problems.join("; ")));
        }
        let n = values.len();
        let problem = match operator {
            Operator::In | Operator::NotIn if n == 0 => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if n != 1 => {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if n != 0 => {
                Some("values set must be empty for exists and does not exist")
            }
            Operator::GreaterThan | Operator::LessThan if n != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(problem) = problem {
            errs.push(invalid("values", &go_string_slice(&values), problem));
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(invalid(
                        &format!("values[{i}]"),
                        &go_quote(v),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = is_label_value(v);
            if !problems.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    &go_quote(v),
                    &problems.join("; "),
                ));
            }
        }
        match errs.len() {
            0 => Ok(Requirement {
                key: key.to_owned(),
                operator,
                values: values.into_iter().collect(),
            }),
            1 => Err(Error(errs.remove(0))),
            _ => Err(Error(format!("[{}]", errs.join(", ")))),
        }
    }

    /// `Requirement.Matches`: whether `labels` satisfy this requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.values.contains(v))
            }
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                // `NewRequirement` checked there is exactly one integer.
                let Some(want) = self.values.iter().find_map(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// A `field.Invalid` error's text (`path: Invalid value: <value>: detail`).
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// A `[]string` as Go's `%#v` prints it (`[]string(nil)` when empty, as the values of a
/// `matchExpressions` entry without values are).
fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_owned();
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

impl fmt::Display for Requirement {
    /// `Requirement.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = || self.values.iter().cloned().collect::<Vec<_>>().join(",");
        let key = &self.key;
        match self.operator {
            Operator::Equals => write!(f, "{key}={}", values()),
            Operator::DoubleEquals => write!(f, "{key}=={}", values()),
            Operator::NotEquals => write!(f, "{key}!={}", values()),
            Operator::In => write!(f, "{key} in ({})", values()),
            Operator::NotIn => write!(f, "{key} notin ({})", values()),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::GreaterThan => write!(f, "{key}>{}", values()),
            Operator::LessThan => write!(f, "{key}<{}", values()),
        }
    }
}

/// A set of labels a selector is matched against (`labels.Labels`).
pub trait Labels {
    /// The value of label `key`, if the label is present.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl Labels for [(&str, &str)] {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

impl<const N: usize> Labels for [(&str, &str); N] {
    fn get(&self, key: &str) -> Option<&str> {
        Labels::get(self.as_slice(), key)
    }
}

impl Labels for Vec<(&str, &str)> {
    fn get(&self, key: &str) -> Option<&str> {
        Labels::get(self.as_slice(), key)
    }
}

/// Missing labels (`metadata.labels` absent) are no labels.
impl<L: Labels + ?Sized> Labels for Option<&L> {
    fn get(&self, key: &str) -> Option<&str> {
        self.and_then(|l| l.get(key))
    }
}

/// A label selector: every requirement must hold (`labels.Selector`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    /// `labels.Nothing()`: matches no object at all.
    nothing: bool,
}

impl Selector {
    /// Matches every object (`labels.Everything()`).
    pub fn everything() -> Self {
        Selector::default()
    }

    /// Matches no object (`labels.Nothing()`), e.g. for a missing `spec.selector`.
    pub fn nothing() -> Self {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// A selector from requirements, sorted by key (`NewSelector().Add(...)`).
    pub fn new(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Selector {
            requirements,
            nothing: false,
        }
    }

    /// `key=value` for every entry (`labels.SelectorFromSet`).
    pub fn from_set(set: &BTreeMap<String, String>) -> Self {
        Selector::new(
            set.iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    operator: Operator::Equals,
                    values: BTreeSet::from([v.clone()]),
                })
                .collect(),
        )
    }

    /// `metav1.LabelSelectorAsSelector`: `None` matches nothing, an empty selector everything;
    /// an unknown operator or a requirement `NewRequirement` refuses is an error.
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Self, Error> {
        let Some(selector) = selector else {
            return Ok(Selector::nothing());
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::new(key, Operator::Equals, [value.clone()])?);
        }
        for expr in selector.match_expressions.iter().flatten() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(Error(format!(
                        "{} is not a valid label selector operator",
                        go_quote(other)
                    )));
                }
            };
            requirements.push(Requirement::new(
                &expr.key,
                operator,
                expr.values.iter().flatten().cloned(),
            )?);
        }
        Ok(Selector::new(requirements))
    }

    /// Parses the string form as `labels.Parse` does, with its error messages:
    /// `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>1`.
    pub fn parse(selector: &str) -> Result<Self, Error> {
        parse::parse(selector).map(Selector::new)
    }

    /// `Selector.Matches`: whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// `Selector.Empty`: true for a selector that matches everything.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for Selector {
    /// `Selector.String`: the requirements joined by `,` (empty for everything and nothing).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&terms.join(","))
    }
}

/// `metav1.FormatLabelSelector`: the selector's string form, `<none>` when it has no
/// requirement (or is missing), `<error>` when Kubernetes cannot convert it.
pub fn format_label_selector(selector: Option<&LabelSelector>) -> String {
    match Selector::from_label_selector(selector) {
        Err(_) => "<error>".to_owned(),
        Ok(s) if s.requirements.is_empty() => "<none>".to_owned(),
        Ok(s) => s.to_string(),
    }
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted by key, `<none>` when empty.
pub fn format_labels(labels: Option<&BTreeMap<String, String>>) -> String {
    match labels {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".to_owned(),
    }
}

/// `labels.SelectorFromSet(set).Matches(labels)`: every key/value of `set` is in `labels`.
pub fn is_superset(labels: &BTreeMap<String, String>, set: &BTreeMap<String, String>) -> bool {
    set.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests;
