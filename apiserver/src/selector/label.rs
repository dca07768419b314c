//! Label selectors: `app=nginx,tier!=db,env in (prod,staging),!canary,release`.
//!
//! Mirrors apimachinery's `pkg/labels/selector.go` (`Parse`: its lexer, recursive-descent
//! parser and `NewRequirement` checks, with their messages; `Requirement.Matches`). The
//! requirements of a selector are ANDed, sorted by key. Also renders a `metav1.LabelSelector`
//! (`matchLabels` + `matchExpressions`) as the string form, as the `/scale` subresource's
//! `status.selector` needs (`metav1.FormatLabelSelector`).

use crate::strategy::field::go_quote;
use crate::strategy::names;
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

/// A selector that does not parse, with `labels.Parse`'s message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl LabelSelector {
    /// Parses the string form as `labels.Parse` does, with its error messages.
    pub fn parse(s: &str) -> Result<LabelSelector, ParseError> {
        let mut requirements = Parser::new(s).parse().map_err(ParseError)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
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

/// A token of `labels.Lexer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// `Lexer.Lex` over the whole input (a NUL byte ends it, as Go's lexer reads one as the end).
fn lex(s: &str) -> Vec<(Tok, String)> {
    let bytes = s.as_bytes();
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        while pos < end && is_space(bytes[pos]) {
            pos += 1;
        }
        if pos >= end {
            out.push((Tok::End, String::new()));
            return out;
        }
        let start = pos;
        if is_special(bytes[pos]) {
            // The longest run of symbols that is still a token.
            let mut best = None;
            while pos < end && is_special(bytes[pos]) {
                match keyword(&s[start..=pos]) {
                    Some(t) => best = Some((t, pos + 1)),
                    None if best.is_some() => break,
                    None => {}
                }
                pos += 1;
            }
            // Every single symbol is a token, so `best` is set.
            let (tok, next) = best.unwrap_or((Tok::Identifier, pos));
            out.push((tok, s[start..next].to_string()));
            pos = next;
        } else {
            while pos < end && !is_special(bytes[pos]) && !is_space(bytes[pos]) {
                pos += 1;
            }
            let lit = &s[start..pos];
            out.push((keyword(lit).unwrap_or(Tok::Identifier), lit.to_string()));
        }
    }
}

/// `labels.Parser`: a recursive-descent parser over the scanned tokens.
struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

/// The operator a requirement was written with (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Equals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Parser {
    fn new(s: &str) -> Parser {
        Parser {
            items: lex(s),
            pos: 0,
        }
    }

    /// The current token; in a values context `in`/`notin` are identifiers.
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (tok, lit) = self.items[self.pos.min(self.items.len() - 1)].clone();
        (as_value(tok, values), lit)
    }

    fn consume(&mut self, values: bool) -> (Tok, String) {
        let item = self.lookahead(values);
        self.pos = (self.pos + 1).min(self.items.len() - 1);
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut out = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(true);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    out.push(r);
                    let (t, l) = self.consume(true);
                    match t {
                        Tok::End => return Ok(out),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(true);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(out),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.key_and_inferred_operator()?;
        if let Some(op @ (Op::Exists | Op::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(true);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(true);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = names::is_qualified_name(&lit);
        if !errs.is_empty() {
            return Err(invalid("<nil>", &lit, &errs.join("; ")));
        }
        if matches!(self.lookahead(true).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(false);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals | Tok::DoubleEquals => Op::Equals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `(a,b,c)`, as a sorted set (the empty set `()` is `{""}`).
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(true);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.identifiers()?;
                if self.consume(true).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(true);
            match tok {
                Tok::Identifier => {
                    set.insert(lit);
                    let (t2, l2) = self.lookahead(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    // "(," ",)" and ",," stand for the empty value.
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.lookahead(true).0 {
                        Tok::ClosedPar => {
                            set.insert(String::new());
                            return Ok(set.into_iter().collect());
                        }
                        Tok::Comma => {
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(true).0, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(true);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

fn as_value(tok: Tok, values: bool) -> Tok {
    match tok {
        Tok::In | Tok::NotIn if values => Tok::Identifier,
        t => t,
    }
}

/// A `field.Invalid` error's text (`path: Invalid value: "v": detail`).
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `NewRequirement`: the values must be label values (and integers for `gt`/`lt`); several
/// errors are reported together as `[a, b]`.
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let mut errs = Vec::new();
    let mut bound = 0;
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            match v.parse::<i64>() {
                Ok(n) => bound = n,
                Err(_) => errs.push(invalid(
                    &format!("values[{i}]"),
                    v,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                )),
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let problems = names::is_label_value(v);
        if !problems.is_empty() {
            errs.push(invalid(
                &format!("values[{i}][{key}]"),
                v,
                &problems.join("; "),
            ));
        }
    }
    match errs.len() {
        0 => {}
        1 => return Err(errs.remove(0)),
        _ => return Err(format!("[{}]", errs.join(", "))),
    }
    let op = match op {
        Op::In | Op::Equals => Operator::In(values),
        Op::NotIn | Op::NotEquals => Operator::NotIn(values),
        Op::Exists => Operator::Exists,
        Op::DoesNotExist => Operator::DoesNotExist,
        Op::GreaterThan => Operator::GreaterThan(bound),
        Op::LessThan => Operator::LessThan(bound),
    };
    Ok(Requirement { key, op })
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
    fn errors_are_worded_as_labels_parse() {
        let err = |s: &str| LabelSelector::parse(s).expect_err(s).0;
        assert_eq!(err("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(
            err(","),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            err("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            err(&format!("{}=b", "k".repeat(64))),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 characters",
                "k".repeat(64)
            )
        );
        assert_eq!(
            err("x<y"),
            "unable to parse requirement: values[0]: Invalid value: \"y\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            err("a in (b c)"),
            "unable to parse requirement: found 'c', expected: ',' or ')'"
        );
    }

    #[test]
    fn kubernetes_accepts_these_and_so_do_we() {
        // `selector_test.go`'s valid strings: `()` and empty members are the empty value.
        for ok in [
            "",
            "a in ()",
            "x in (a,,b)",
            "x=",
            "x==a",
            "!x",
            "x,y",
            "x in (in)",
            " a = b ",
        ] {
            assert!(LabelSelector::parse(ok).is_ok(), "{ok}");
        }
        assert!(m("a in ()", &[("a", "")]));
        assert!(m("x in (a,,b)", &[("x", "")]));
        assert!(m("x>1", &[("x", "2")]));
        let s = LabelSelector::parse("z=1,a=2").expect("parses");
        assert_eq!(s.to_string(), "a=2,z=1", "sorted by key");
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
