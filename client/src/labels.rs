//! Label selectors: apimachinery's `pkg/labels/selector.go` (`labels.Selector`,
//! `labels.Parse`, `SelectorFromSet`) and `metav1.LabelSelectorAsSelector`
//! (`pkg/apis/meta/v1/helpers.go`).
//!
//! A selector is a conjunction of requirements, each equality- or set-based:
//!
//! ```text
//!   app=web, tier!=db, env in (prod,staging), release notin (canary), gpu, !legacy
//!   └Equals┘ └NotEquals┘ └────────In────────┘ └────────NotIn───────┘ Exists DoesNotExist
//! ```
//!
//! `NotEquals`/`NotIn` also match objects **without** the label, as in Kubernetes. From a
//! `metav1.LabelSelector` (a Deployment's or ReplicaSet's `spec.selector`): `matchLabels`
//! become `Equals`, `matchExpressions` keep their operator; an empty selector matches
//! everything, and [`Selector::nothing`] (for a missing selector) matches nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::{Error, Result};

/// How a requirement compares a label (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value`: the label is present with this value.
    Equals,
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
}

/// One condition on one label key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The comparison.
    pub operator: Operator,
    /// The values compared against (empty for `Exists`/`DoesNotExist`).
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// A requirement, checked like `labels.NewRequirement`: a key is required; `In`/`NotIn`
    /// need values, `Equals`/`NotEquals` exactly one, `Exists`/`DoesNotExist` none.
    pub fn new(
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Self> {
        let values: BTreeSet<String> = values.into_iter().collect();
        // Kubernetes' messages (`selector.go`), after the key they are about.
        let problem = match operator {
            _ if key.is_empty() => Some("name part must be non-empty"),
            Operator::In | Operator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(Error::InvalidSelector(format!("{key}: {problem}")));
        }
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// True if `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = || self.values.iter().cloned().collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, values()),
            Operator::NotEquals => write!(f, "{}!={}", self.key, values()),
            Operator::In => write!(f, "{} in ({})", self.key, values()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, values()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

/// A label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

    /// A selector from requirements.
    pub fn new(requirements: Vec<Requirement>) -> Self {
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

    /// `metav1.LabelSelectorAsSelector`: `None` matches nothing, an empty selector everything.
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Self> {
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
                    return Err(Error::InvalidSelector(format!(
                        "{other:?} is not a valid label selector operator"
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

    /// Parses the string form (`labels.Parse`): `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(selector: &str) -> Result<Self> {
        let mut requirements = Vec::new();
        for term in split_top_level(selector) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(Selector::new(requirements))
    }

    /// True if `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for a selector that matches everything.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// The requirements.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&terms.join(","))
    }
}

/// Splits at commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_requirement(term: &str) -> Result<Requirement> {
    let invalid = || Error::InvalidSelector(term.to_owned());
    if let Some(key) = term.strip_prefix('!') {
        return Requirement::new(key.trim(), Operator::DoesNotExist, []);
    }
    for (word, operator) in [(" notin ", Operator::NotIn), (" in ", Operator::In)] {
        if let Some((key, rest)) = term.split_once(word) {
            let list = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let values = list
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty());
            return Requirement::new(key.trim(), operator, values);
        }
    }
    for (symbol, operator) in [
        ("!=", Operator::NotEquals),
        ("==", Operator::Equals),
        ("=", Operator::Equals),
    ] {
        if let Some((key, value)) = term.split_once(symbol) {
            return Requirement::new(key.trim(), operator, [value.trim().to_owned()]);
        }
    }
    if term.contains(['(', ')', ' ']) {
        return Err(invalid());
    }
    Requirement::new(term, Operator::Exists, [])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_equality_and_set_based_terms() {
        let s = Selector::parse(
            "app=web, tier!=db, env in (prod, staging), release notin (canary), gpu, !legacy",
        )
        .unwrap();
        assert_eq!(s.requirements().len(), 6);
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("gpu", "")])));
        assert!(
            !s.matches(&labels(&[("app", "web"), ("env", "prod")])),
            "gpu missing"
        );
        assert!(
            !s.matches(&labels(&[("app", "web"), ("env", "dev"), ("gpu", "")])),
            "env not in set"
        );
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("gpu", ""),
            ("tier", "db")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("gpu", ""),
            ("legacy", "y")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("gpu", ""),
            ("release", "canary")
        ])));
        assert_eq!(
            s.to_string(),
            "app=web,tier!=db,env in (prod,staging),release notin (canary),gpu,!legacy"
        );
        assert!(Selector::parse("env in prod").is_err());
        assert!(Selector::parse("").unwrap().is_everything());
    }

    #[test]
    fn converts_label_selectors() {
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "track".into(),
                operator: "NotIn".into(),
                values: Some(vec!["canary".into()]),
            }]),
        };
        let s = Selector::from_label_selector(Some(&selector)).unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(s.matches(&labels(&[("app", "web"), ("track", "stable")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("track", "canary")])));
        assert!(!s.matches(&labels(&[("app", "db")])));

        assert!(
            Selector::from_label_selector(Some(&LabelSelector::default()))
                .unwrap()
                .matches(&labels(&[]))
        );
        assert!(
            !Selector::from_label_selector(None)
                .unwrap()
                .matches(&labels(&[]))
        );
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "In".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(
            Selector::from_label_selector(Some(&bad)).is_err(),
            "In needs values"
        );
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_every_expression_operator_are_anded() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "nginx")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["web", "api"]),
                expr("track", "NotIn", &["canary"]),
                expr("team", "Exists", &[]),
                expr("legacy", "DoesNotExist", &[]),
            ]),
        };
        let s = Selector::from_label_selector(Some(&selector)).unwrap();
        let cases: [(&[(&str, &str)], bool); 7] = [
            (&[("app", "nginx"), ("tier", "web"), ("team", "a")], true),
            (
                &[
                    ("app", "nginx"),
                    ("tier", "api"),
                    ("team", "a"),
                    ("track", "stable"),
                ],
                true,
            ),
            (&[("app", "nginx"), ("tier", "db"), ("team", "a")], false),
            (
                &[
                    ("app", "nginx"),
                    ("tier", "web"),
                    ("team", "a"),
                    ("track", "canary"),
                ],
                false,
            ),
            (&[("app", "nginx"), ("tier", "web")], false),
            (
                &[
                    ("app", "nginx"),
                    ("tier", "web"),
                    ("team", "a"),
                    ("legacy", "1"),
                ],
                false,
            ),
            (&[("app", "apache"), ("tier", "web"), ("team", "a")], false),
        ];
        for (pairs, want) in cases {
            assert_eq!(s.matches(&labels(pairs)), want, "{pairs:?}");
        }
    }

    #[test]
    fn invalid_operators_and_values_are_refused_with_kubernetes_messages() {
        for (bad, message) in [
            (
                expr("a", "Like", &["x"]),
                "\"Like\" is not a valid label selector operator",
            ),
            (
                expr("a", "In", &[]),
                "a: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                expr("a", "Exists", &["x"]),
                "a: values set must be empty for exists and does not exist",
            ),
            (expr("", "Exists", &[]), ": name part must be non-empty"),
        ] {
            let selector = LabelSelector {
                match_expressions: Some(vec![bad]),
                ..Default::default()
            };
            match Selector::from_label_selector(Some(&selector)) {
                Err(Error::InvalidSelector(m)) => assert_eq!(m, message),
                other => panic!("{selector:?}: {other:?}"),
            }
        }
    }
}
