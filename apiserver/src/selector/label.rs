//! Label selectors: `app=nginx,tier!=db,env in (prod,staging),!canary,release`.
//!
//! Mirrors apimachinery's `pkg/labels/selector.go` (`Parse`, `Requirement.Matches`). The
//! requirements of a selector are ANDed. Also renders a `metav1.LabelSelector`
//! (`matchLabels` + `matchExpressions`) as the string form, as the `/scale` subresource's
//! `status.selector` needs (`metav1.FormatLabelSelector`).

use serde_json::Value;
use std::fmt;

/// One requirement's operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// `key=value`, `key==value`, `key in (a,b)`.
    In(Vec<String>),
    /// `key!=value`, `key notin (a,b)`.
    NotIn(Vec<String>),
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>n`.
    GreaterThan(i64),
    /// `key<n`.
    LessThan(i64),
}

/// One requirement on one label key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// What the label's value must satisfy.
    pub op: Operator,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Operator::In(vals), Some(v)) => vals.iter().any(|x| x == v),
            (Operator::In(_), None) => false,
            (Operator::NotIn(vals), Some(v)) => !vals.iter().any(|x| x == v),
            (Operator::NotIn(_), None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (Operator::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (Operator::GreaterThan(_) | Operator::LessThan(_), None) => false,
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// ANDed requirements.
    pub requirements: Vec<Requirement>,
}

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct ParseError(pub String);

impl LabelSelector {
    /// Parses the string form.
    pub fn parse(s: &str) -> Result<LabelSelector, ParseError> {
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &[(&str, &str)]) -> bool {
        self.requirements.iter().all(|r| {
            let v = labels.iter().find(|(k, _)| *k == r.key).map(|(_, v)| *v);
            r.matches(v)
        })
    }

    /// Whether the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON value. `None` when it is malformed.
    pub fn from_label_selector(sel: &Value) -> Option<LabelSelector> {
        let mut requirements = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            let mut keys: Vec<_> = ml.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in keys {
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Operator::In(vec![v.as_str()?.to_string()]),
                });
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e.get("key")?.as_str()?.to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let op = match e.get("operator")?.as_str()? {
                "In" => Operator::In(values),
                "NotIn" => Operator::NotIn(values),
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => return None,
            };
            requirements.push(Requirement { key, op });
        }
        Some(LabelSelector { requirements })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match &r.op {
                Operator::In(v) if v.len() == 1 => format!("{}={}", r.key, v[0]),
                Operator::In(v) => format!("{} in ({})", r.key, v.join(",")),
                Operator::NotIn(v) if v.len() == 1 => format!("{}!={}", r.key, v[0]),
                Operator::NotIn(v) => format!("{} notin ({})", r.key, v.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
                Operator::GreaterThan(n) => format!("{}>{n}", r.key),
                Operator::LessThan(n) => format!("{}<{n}", r.key),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
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

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn checked_key(k: &str, whole: &str) -> Result<String, ParseError> {
    let k = k.trim();
    if valid_key(k) {
        Ok(k.to_string())
    } else {
        Err(ParseError(format!(
            "invalid label key \"{k}\" in \"{whole}\""
        )))
    }
}

fn checked_values(list: &str, whole: &str) -> Result<Vec<String>, ParseError> {
    let inner = list
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| ParseError(format!("expected parenthesised values in \"{whole}\"")))?;
    inner
        .split(',')
        .map(|v| {
            let v = v.trim();
            if valid_value(v) {
                Ok(v.to_string())
            } else {
                Err(ParseError(format!(
                    "invalid label value \"{v}\" in \"{whole}\""
                )))
            }
        })
        .collect()
}

fn parse_requirement(part: &str) -> Result<Requirement, ParseError> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement {
            key: checked_key(key, part)?,
            op: Operator::DoesNotExist,
        });
    }
    // Set-based: "key in (a,b)" / "key notin (a,b)".
    let words: Vec<&str> = part.splitn(3, char::is_whitespace).collect();
    if words.len() >= 2 && matches!(words[1], "in" | "notin") {
        let rest = part[words[0].len()..].trim_start()[words[1].len()..].trim();
        let values = checked_values(rest, part)?;
        let key = checked_key(words[0], part)?;
        let op = if words[1] == "in" {
            Operator::In(values)
        } else {
            Operator::NotIn(values)
        };
        return Ok(Requirement { key, op });
    }
    let single = |k: &str, v: &str, negate: bool| -> Result<Requirement, ParseError> {
        let v = v.trim();
        if !valid_value(v) {
            return Err(ParseError(format!(
                "invalid label value \"{v}\" in \"{part}\""
            )));
        }
        let vals = vec![v.to_string()];
        Ok(Requirement {
            key: checked_key(k, part)?,
            op: if negate {
                Operator::NotIn(vals)
            } else {
                Operator::In(vals)
            },
        })
    };
    if let Some((k, v)) = part.split_once("!=") {
        return single(k, v, true);
    }
    if let Some((k, v)) = part.split_once("==") {
        return single(k, v, false);
    }
    if let Some((k, v)) = part.split_once('=') {
        return single(k, v, false);
    }
    for (sym, gt) in [('>', true), ('<', false)] {
        if let Some((k, v)) = part.split_once(sym) {
            let n: i64 = v.trim().parse().map_err(|_| {
                ParseError(format!("invalid integer \"{}\" in \"{part}\"", v.trim()))
            })?;
            return Ok(Requirement {
                key: checked_key(k, part)?,
                op: if gt {
                    Operator::GreaterThan(n)
                } else {
                    Operator::LessThan(n)
                },
            });
        }
    }
    Ok(Requirement {
        key: checked_key(part, part)?,
        op: Operator::Exists,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(sel: &str, labels: &[(&str, &str)]) -> bool {
        LabelSelector::parse(sel).expect("parses").matches(labels)
    }

    #[test]
    fn equality_and_inequality() {
        assert!(m("app=nginx", &[("app", "nginx")]));
        assert!(m("app==nginx", &[("app", "nginx")]));
        assert!(!m("app=nginx", &[("app", "web")]));
        assert!(m("app!=nginx", &[("app", "web")]));
        assert!(m("app!=nginx", &[]));
        assert!(m("", &[]));
    }

    #[test]
    fn set_based_requirements() {
        let l = [("env", "prod"), ("tier", "web")];
        assert!(m("env in (prod, staging)", &l));
        assert!(!m("env notin (prod,staging)", &l));
        assert!(m("tier,!canary", &l));
        assert!(!m("!tier", &l));
        assert!(m("env in (prod),tier=web", &l));
        assert!(!m("env in (dev),tier=web", &l));
    }

    #[test]
    fn malformed_selectors_are_refused() {
        assert!(LabelSelector::parse("app in prod").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("x>abc").is_err());
    }

    #[test]
    fn label_selector_objects_render_as_strings() {
        let s = LabelSelector::from_label_selector(&json!({
            "matchLabels": {"app": "nginx"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]
        }))
        .expect("well-formed");
        assert_eq!(s.to_string(), "app=nginx,env in (a,b)");
    }
}
