//! Label selectors for the controllers: `metav1.LabelSelector` → a matcher, with a failed
//! conversion as the controllers' [`Error::InvalidSelector`].
//!
//! The conversion is apimachinery's `LabelSelectorAsSelector`
//! ([`apimachinery::labels::Selector::from_label_selector`]), which listers use too:
//!
//! ```text
//!   matchLabels {app: nginx}                       app = nginx
//!   matchExpressions [{tier In [web, api]}]   ─▶   AND tier in (web, api)
//!                    [{canary DoesNotExist}]       AND !canary
//! ```
//!
//! Two Kubernetes rules a reader may not expect: an empty selector `{}` matches **everything**,
//! while a missing selector (`None`) matches **nothing**.

use apimachinery::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::{Error, Result};

/// `metav1.LabelSelectorAsSelector`: `None` selects nothing, `{}` everything. Errors (as
/// [`Error::InvalidSelector`]) for an unknown operator and for values that do not fit it.
pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Selector> {
    Selector::from_label_selector(selector).map_err(|e| Error::InvalidSelector(e.0))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    #[test]
    fn none_selects_nothing_and_empty_selects_everything() {
        let none = from_label_selector(None).expect("None is a selector");
        assert!(!none.matches(&[("app", "x")]));
        let empty = from_label_selector(Some(&LabelSelector::default())).expect("{} is one");
        assert!(empty.matches(&[("app", "x")]));
        assert!(empty.matches(&BTreeMap::<String, String>::new()));
    }

    #[test]
    fn an_invalid_selector_is_an_error_with_kubernetes_message() {
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "In".into(),
                values: None,
            }]),
            ..Default::default()
        };
        match from_label_selector(Some(&selector)) {
            Err(Error::InvalidSelector(m)) => assert!(m.contains("values set can't be empty")),
            other => panic!("{other:?}"),
        }
    }
}
