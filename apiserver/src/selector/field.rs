//! Field selectors: `metadata.name=nginx,status.phase!=Running`.
//!
//! Mirrors apimachinery's `pkg/fields/selector.go` (`ParseSelector`: `=`, `==`, `!=`, commas
//! AND, `\` escapes) and the per-kind `GetAttrs`/`SelectableFields` of the registry: every kind
//! supports `metadata.name` and `metadata.namespace`; a strategy adds its own
//! ([`crate::strategy::Strategy::selectable_fields`]). A selector naming any other field is
//! refused with `field label not supported: <field>` (400), as Kubernetes does.

use crate::meta;
use crate::strategy::Strategy;
use serde_json::Value;
use std::borrow::Cow;

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, e.g. `spec.nodeName`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `!=` rather than `=`.
    pub negate: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// ANDed requirements.
    pub requirements: Vec<FieldRequirement>,
}

/// Why a field selector was refused (all are 400 BadRequest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// A term has no operator (`invalid selector: '...'; can't understand '...'`).
    #[error("{0}")]
    Parse(String),
    /// A value is badly escaped (`invalid field selector: ...`).
    #[error("{0}")]
    Invalid(String),
    /// The field is not selectable for this kind.
    #[error("field label not supported: {0}")]
    Unsupported(String),
}

/// `splitTerms`: splits on commas not escaped by a backslash (escapes are kept).
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// `splitTerm`: the first `!=`, `==` or `=` splits a term (the left side has no escapes).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        for op in ["!=", "==", "="] {
            if term[i..].starts_with(op) {
                return Some((&term[..i], op, &term[i + op.len()..]));
            }
        }
    }
    None
}

/// `UnescapeValue`: `\\`, `\,` and `\=` are the only escapes, and `,` or `=` may not appear
/// unescaped. Go prints the offending rune with `%v`, that is as its number (`61` for `=`).
fn unescape(s: &str) -> Result<String, FieldSelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(FieldSelectorError::Invalid(format!(
                        "invalid field selector: invalid escape sequence: \\{c}"
                    )));
                }
            }
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(FieldSelectorError::Invalid(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err(FieldSelectorError::Invalid(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses the string form as `fields.ParseSelector` does: terms sorted, each split at its
    /// first operator, the value unescaped.
    pub fn parse(s: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut terms = split_terms(s);
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms {
            if term.is_empty() {
                continue;
            }
            let Some((field, op, value)) = split_term(term) else {
                return Err(FieldSelectorError::Parse(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: unescape(value)?,
                negate: op == "!=",
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Checks every field is selectable for the kind (by asking the strategy which fields a
    /// sample object offers).
    ///
    /// The strategy is asked with a skeleton object (`apiVersion`, `kind`, empty `metadata`),
    /// so a strategy must list all its selectable fields for any object, with empty values
    /// where the object has none.
    pub fn check_supported(&self, strategy: &dyn Strategy) -> Result<(), FieldSelectorError> {
        let gvk = strategy.gvk();
        let skeleton = serde_json::json!({
            "apiVersion": gvk.group_version().api_version(),
            "kind": gvk.kind,
            "metadata": {},
        });
        let offered = strategy.selectable_fields(&skeleton);
        for r in &self.requirements {
            let generic = matches!(r.field.as_str(), "metadata.name" | "metadata.namespace");
            if !generic && !offered.iter().any(|(f, _)| *f == r.field) {
                return Err(FieldSelectorError::Unsupported(r.field.clone()));
            }
        }
        Ok(())
    }

    /// Whether the object's fields satisfy every requirement.
    pub fn matches(&self, obj: &Value, strategy: &dyn Strategy) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        self.requirements.iter().all(|r| {
            let actual = match r.field.as_str() {
                "metadata.name" => Cow::Borrowed(meta::name(obj).unwrap_or_default()),
                "metadata.namespace" => Cow::Borrowed(meta::namespace(obj).unwrap_or_default()),
                other => strategy.selectable_field(obj, other).unwrap_or_default(),
            };
            (*actual == *r.value) != r.negate
        })
    }

    /// The name this selector pins (`metadata.name=x`), if any: a watch on one object.
    pub fn single_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negate)
            .map(|r| r.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvk::GroupVersionKind;
    use crate::strategy::DefaultStrategy;
    use serde_json::json;

    struct PodLike;
    impl Strategy for PodLike {
        fn gvk(&self) -> GroupVersionKind {
            GroupVersionKind::new("", "v1", "Pod")
        }
        fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
            vec![(
                "spec.nodeName",
                obj.pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )]
        }
    }

    #[test]
    fn generic_fields_match() {
        let s = DefaultStrategy {
            gvk: GroupVersionKind::new("", "v1", "ConfigMap"),
        };
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let sel = FieldSelector::parse("metadata.name=a,metadata.namespace==ns").expect("ok");
        assert!(sel.matches(&o, &s));
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .expect("ok")
                .matches(&o, &s)
        );
        assert_eq!(sel.single_name(), Some("a"));
    }

    #[test]
    fn strategy_fields_and_unsupported_ones() {
        let o = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}});
        let sel = FieldSelector::parse("spec.nodeName=n1").expect("ok");
        assert!(sel.check_supported(&PodLike).is_ok());
        assert!(sel.matches(&o, &PodLike));
        let bad = FieldSelector::parse("spec.foo=x").expect("ok");
        assert_eq!(
            bad.check_supported(&PodLike).map_err(|e| e.to_string()),
            Err("field label not supported: spec.foo".to_string())
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
