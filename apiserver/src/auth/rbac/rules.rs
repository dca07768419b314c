//! Whether a policy rule covers a request: RBAC's matching of verbs, API groups, resources,
//! resource names and non-resource URLs.
//!
//! Mirrors `pkg/apis/rbac/v1/evaluation_helpers.go` (`VerbMatches`, `APIGroupMatches`,
//! `ResourceMatches`, `ResourceNameMatches`, `NonResourceURLMatches`) and `RuleAllows` of
//! `plugin/pkg/auth/authorizer/rbac/rbac.go`:
//!
//! ```text
//!   verbs [get list]   apiGroups [""]   resources [pods pods/log]   resourceNames []
//!     allows: get pods, list pods, get pods/log (any name)
//!   resources [*/scale]           allows any resource's scale subresource
//!   nonResourceURLs [/healthz /api/*]   allows /healthz and every path under /api/
//! ```

use super::super::attributes::Attributes;
use k8s_openapi::api::rbac::v1::PolicyRule;

/// `*`: every verb, group, resource or non-resource URL.
pub const ALL: &str = "*";

/// Whether `rule` allows the request `attrs` (`RuleAllows`).
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if attrs.resource_request {
        let combined = attrs.combined_resource();
        verb_matches(rule, &attrs.verb)
            && api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &combined, &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        verb_matches(rule, &attrs.verb) && non_resource_url_matches(rule, &attrs.path)
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups
        .iter()
        .flatten()
        .any(|g| g == ALL || g == group)
}

fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().flatten().any(|r| {
        r == ALL
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    match &rule.resource_names {
        None => true,
        Some(names) if names.is_empty() => true,
        Some(names) => names.iter().any(|n| n == name),
    }
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().flatten().any(|u| {
        u == ALL || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

/// A rule in Kubernetes' compact form, as escalation errors print it (`CompactString`):
/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let list = |items: &[String]| {
        let quoted: Vec<String> = items
            .iter()
            .map(|s| apimachinery::fmt::go_quote(s))
            .collect();
        format!("[{}]", quoted.join(" "))
    };
    let mut parts = Vec::new();
    let fields: [(&str, Option<&Vec<String>>); 5] = [
        ("APIGroups", rule.api_groups.as_ref()),
        ("Resources", rule.resources.as_ref()),
        ("NonResourceURLs", rule.non_resource_urls.as_ref()),
        ("ResourceNames", rule.resource_names.as_ref()),
        ("Verbs", Some(&rule.verbs)),
    ];
    for (name, values) in fields {
        if let Some(values) = values.filter(|v| !v.is_empty()) {
            parts.push(format!("{name}:{}", list(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        PolicyRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            resource_names: (!names.is_empty()).then(|| v(names)),
            non_resource_urls: None,
        }
    }

    fn request(method: Method, path: &str) -> Attributes {
        Attributes::of_request(Default::default(), &method, path, None)
    }

    #[test]
    fn rules_match_verb_group_resource_and_name() {
        let pods = rule(&["get", "list"], &[""], &["pods"], &[]);
        assert!(rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/pods"),
            &pods
        ));
        assert!(rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/pods/web"),
            &pods
        ));
        assert!(!rule_allows(
            &request(Method::DELETE, "/api/v1/namespaces/d/pods/web"),
            &pods
        ));
        assert!(!rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/pods/web/status"),
            &pods
        ));
        assert!(!rule_allows(
            &request(Method::GET, "/apis/apps/v1/namespaces/d/deployments"),
            &pods
        ));
        let named = rule(&["get"], &[""], &["configmaps"], &["settings"]);
        assert!(rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/configmaps/settings"),
            &named
        ));
        assert!(!rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/configmaps/other"),
            &named
        ));
        assert!(!rule_allows(
            &request(Method::GET, "/api/v1/namespaces/d/configmaps"),
            &named
        ));
        let scale = rule(&["*"], &["*"], &["*/scale"], &[]);
        assert!(rule_allows(
            &request(
                Method::PATCH,
                "/apis/apps/v1/namespaces/d/deployments/w/scale"
            ),
            &scale
        ));
        assert!(!rule_allows(
            &request(
                Method::PATCH,
                "/apis/apps/v1/namespaces/d/deployments/w/status"
            ),
            &scale
        ));
        let everything = rule(&["*"], &["*"], &["*"], &[]);
        assert!(rule_allows(
            &request(Method::DELETE, "/apis/apps/v1/namespaces/d/deployments"),
            &everything
        ));
        assert!(!rule_allows(&request(Method::GET, "/healthz"), &everything));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix_star() {
        let r = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz".into(), "/apis/*".into()]),
            ..PolicyRule::default()
        };
        assert!(rule_allows(&request(Method::GET, "/healthz"), &r));
        assert!(!rule_allows(&request(Method::GET, "/healthz/etcd"), &r));
        assert!(rule_allows(&request(Method::GET, "/apis/apps"), &r));
        assert!(!rule_allows(&request(Method::POST, "/healthz"), &r));
        assert!(!rule_allows(&request(Method::GET, "/api"), &r));
    }

    #[test]
    fn compact_strings_read_as_kubernetes_prints_them() {
        let r = rule(&["get", "list"], &["apps"], &["deployments"], &["web"]);
        assert_eq!(
            compact_string(&r),
            r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get" "list"]}"#
        );
    }
}
