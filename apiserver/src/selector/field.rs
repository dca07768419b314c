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

/// Why a field selector was refused (both are 400 BadRequest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// The string does not parse.
    #[error("invalid field selector: {0}")]
    Parse(String),
    /// The field is not selectable for this kind.
    #[error("field label not supported: {0}")]
    Unsupported(String),
}

/// Splits on unescaped commas and unescapes `\,`, `\=`, `\\`.
fn split_terms(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the first unescaped occurrence of `op` in `term`.
fn find_op(term: &str, op: &str) -> Option<usize> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if term[i..].starts_with(op) {
            return Some(i);
        }
        i += 1;
    }
    None
}

impl FieldSelector {
    /// Parses the string form.
    pub fn parse(s: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut requirements = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, value, negate) = if let Some(i) = find_op(term, "!=") {
                (&term[..i], &term[i + 2..], true)
            } else if let Some(i) = find_op(term, "==") {
                (&term[..i], &term[i + 2..], false)
            } else if let Some(i) = find_op(term, "=") {
                (&term[..i], &term[i + 1..], false)
            } else {
                return Err(FieldSelectorError::Parse(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            requirements.push(FieldRequirement {
                field: field.trim().to_string(),
                value: unescape(value.trim()),
                negate,
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
