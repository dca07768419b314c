//! The privilege-escalation check on writes of RBAC objects: a user may grant (in a Role, a
//! ClusterRole or through a binding) only permissions they hold, unless they may `escalate`
//! (roles) or `bind` (the bound role).
//!
//! Mirrors `pkg/registry/rbac/escalation_check.go` (`EscalationAllowed`,
//! `RoleEscalationAuthorized`, `BindingAuthorized`), the policy-based storages of
//! `pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/`,
//! `ConfirmNoEscalation` and `CompactRules` of `pkg/registry/rbac/validation/` and `Covers`
//! of `k8s.io/component-helpers/auth/rbac/validation/policy_comparator.go`:
//!
//! ```text
//!   system:masters ─────────────────────────────────────────────▶ allowed
//!   Role/ClusterRole write: may `escalate` it? ─ yes ────────────▶ allowed
//!   binding write:          may `bind` its roleRef? ─ yes ───────▶ allowed
//!   else: the writer's own rules (RulesFor, in the namespace) must cover every
//!         (group, resource, verb, name) the object grants, else 403:
//!   user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC
//!   permissions not currently held:
//!   {APIGroups:[""], Resources:["secrets"], Verbs:["get"]}
//! ```

use super::super::attributes::Attributes;
use super::super::user::UserInfo;
use super::cache::{Binding, PolicyCache};
use super::rules::{ALL, compact_string};
use crate::error::{ApiError, ErrorTarget};
use crate::strategy::rbac::GROUP;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The check for one request's write of an RBAC object (built only under RBAC, for users
/// outside `system:masters`).
#[derive(Debug, Clone)]
pub struct EscalationCheck {
    policy: Arc<PolicyCache>,
    user: UserInfo,
}

impl EscalationCheck {
    /// The check for `user` over the RBAC objects in `policy`.
    pub fn new(policy: Arc<PolicyCache>, user: UserInfo) -> EscalationCheck {
        EscalationCheck { policy, user }
    }

    /// Whether the write of `obj` (a `resource` of rbac.authorization.k8s.io in `namespace`)
    /// grants nothing its writer lacks; `old` is the stored object on an update.
    pub fn check(
        &self,
        resource: &str,
        namespace: Option<&str>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let namespace = namespace.unwrap_or("");
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(old) = old
            && only_garbage_collection_fields_change(obj, old)
        {
            return Ok(());
        }
        let rules: Vec<PolicyRule> = match resource {
            "roles" | "clusterroles" => {
                if self.may("escalate", resource, namespace, name) {
                    return Ok(());
                }
                let rules = obj.get("rules").cloned().unwrap_or(Value::Null);
                serde_json::from_value::<Option<Vec<PolicyRule>>>(rules)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
            }
            "rolebindings" | "clusterrolebindings" => {
                let Ok(binding) = serde_json::from_value::<Binding>(obj.clone()) else {
                    // Validation refuses it later with its field errors.
                    return Ok(());
                };
                if self.may_bind(&binding.role_ref, namespace) {
                    return Ok(());
                }
                self.role_rules(&binding.role_ref, namespace, resource, name)?
            }
            _ => return Ok(()),
        };
        let (owner_rules, errors) = self
            .policy
            .read(|s| super::rules_for(s, &self.user, namespace));
        let missing = uncovered(&owner_rules, &rules);
        if missing.is_empty() {
            return Ok(());
        }
        let described: BTreeSet<String> =
            compact_rules(missing).iter().map(compact_string).collect();
        let groups: Vec<String> = self
            .user
            .groups
            .iter()
            .map(|g| apimachinery::fmt::go_quote(g))
            .collect();
        let mut detail = format!(
            "user {} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            apimachinery::fmt::go_quote(&self.user.name),
            groups.join(" "),
            described.into_iter().collect::<Vec<_>>().join("\n")
        );
        if !errors.is_empty() {
            detail.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
        }
        Err(forbidden(resource, name, &detail))
    }

    /// Whether the writer may `verb` the role `name` (`RoleEscalationAuthorized`).
    fn may(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let attrs = Attributes {
            user: self.user.clone(),
            verb: verb.into(),
            resource_request: true,
            api_group: GROUP.into(),
            api_version: "*".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            name: name.into(),
            ..Attributes::default()
        };
        self.policy.read(|s| super::authorize(s, &attrs)).allowed
    }

    /// Whether the writer may `bind` the role a binding refers to (`BindingAuthorized`).
    fn may_bind(&self, role_ref: &RoleRef, namespace: &str) -> bool {
        let resource = match role_ref.kind.as_str() {
            "ClusterRole" => "clusterroles",
            "Role" => "roles",
            _ => return false,
        };
        let attrs = Attributes {
            user: self.user.clone(),
            verb: "bind".into(),
            resource_request: true,
            api_group: role_ref.api_group.clone(),
            api_version: "*".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            name: role_ref.name.clone(),
            ..Attributes::default()
        };
        self.policy.read(|s| super::authorize(s, &attrs)).allowed
    }

    /// The rules of the role a binding refers to (`GetRoleReferenceRules`): a missing role is
    /// a 404 of that role.
    fn role_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> Result<Vec<PolicyRule>, ApiError> {
        let found = self.policy.read(|s| match role_ref.kind.as_str() {
            "Role" => s
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone()))
                .map(|r| r.to_vec()),
            "ClusterRole" => s.cluster_roles.get(&role_ref.name).map(|r| r.to_vec()),
            _ => None,
        });
        match (found, role_ref.kind.as_str()) {
            (Some(rules), _) => Ok(rules),
            (None, kind @ ("Role" | "ClusterRole")) => Err(ApiError::NotFound {
                target: ErrorTarget {
                    group: GROUP.into(),
                    // The listers' resource names: singular.
                    resource: if kind == "Role" {
                        "role"
                    } else {
                        "clusterrole"
                    }
                    .into(),
                    kind: kind.into(),
                    name: role_ref.name.clone(),
                },
            }),
            (None, kind) => Err(forbidden(
                resource,
                name,
                &format!("unsupported role reference kind: {kind:?}"),
            )),
        }
    }
}

fn forbidden(resource: &str, name: &str, detail: &str) -> ApiError {
    let target = ErrorTarget {
        group: GROUP.into(),
        resource: resource.into(),
        kind: String::new(),
        name: name.into(),
    };
    let message = if name.is_empty() {
        format!("{} is forbidden: {detail}", target.group_resource())
    } else {
        format!(
            "{} {} is forbidden: {detail}",
            target.group_resource(),
            apimachinery::fmt::go_quote(name)
        )
    };
    ApiError::Forbidden { target, message }
}

/// Whether an update changes only `ownerReferences` and `finalizers` (what the garbage
/// collector writes; `IsOnlyMutatingGCFields`), ignoring the server-kept metadata.
fn only_garbage_collection_fields_change(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
                "generation",
            ] {
                m.remove(key);
            }
        }
        v
    };
    strip(new) == strip(old)
}

/// The atomic rules (one group, resource, verb and name each) of `servant` no rule of
/// `owner` covers (`Covers` over `BreakdownRule`).
fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

/// `BreakdownRule`: one rule per group × resource × verb (× name), then per URL × verb.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut out = Vec::new();
    for group in rule.api_groups.iter().flatten() {
        for resource in rule.resources.iter().flatten() {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                match rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
                    Some(names) => out.extend(names.iter().map(|n| PolicyRule {
                        resource_names: one(n),
                        ..base.clone()
                    })),
                    None => out.push(base),
                }
            }
        }
    }
    for url in rule.non_resource_urls.iter().flatten() {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn slice(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or(&[])
}

fn has_all(set: &[String], contains: &[String]) -> bool {
    contains.iter().all(|c| set.contains(c))
}

/// `ruleCovers`.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let all = ALL.to_string();
    let verbs = owner.verbs.contains(&all) || has_all(&owner.verbs, &sub.verbs);
    let groups = slice(&owner.api_groups).contains(&all)
        || has_all(slice(&owner.api_groups), slice(&sub.api_groups));
    let owner_resources = slice(&owner.resources);
    let resources = owner_resources.contains(&all)
        || has_all(owner_resources, slice(&sub.resources))
        || slice(&sub.resources).iter().all(|path| {
            owner_resources.contains(path)
                || path
                    .split_once('/')
                    .is_some_and(|(_, sub)| owner_resources.contains(&format!("*/{sub}")))
        });
    let urls = slice(&sub.non_resource_urls).iter().all(|path| {
        slice(&owner.non_resource_urls)
            .iter()
            .any(|o| o == path || (o.ends_with('*') && path.starts_with(o.trim_end_matches('*'))))
    });
    let names = if slice(&sub.resource_names).is_empty() {
        slice(&owner.resource_names).is_empty()
    } else {
        slice(&owner.resource_names).is_empty()
            || has_all(slice(&owner.resource_names), slice(&sub.resource_names))
    };
    verbs && groups && resources && names && urls
}

/// `CompactRules`: the simple rules (one group, one resource, at most one name) of the same
/// resource merged into one with all their verbs.
fn compact_rules(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut compacted = Vec::new();
    let mut simple: BTreeMap<(String, String, Option<String>), PolicyRule> = BTreeMap::new();
    for rule in rules {
        let is_simple = slice(&rule.resource_names).len() <= 1
            && slice(&rule.non_resource_urls).is_empty()
            && slice(&rule.api_groups).len() == 1
            && slice(&rule.resources).len() == 1;
        if !is_simple {
            compacted.push(rule);
            continue;
        }
        let key = (
            slice(&rule.api_groups)[0].clone(),
            slice(&rule.resources)[0].clone(),
            slice(&rule.resource_names).first().cloned(),
        );
        match simple.get_mut(&key) {
            Some(existing) => existing.verbs.extend(rule.verbs),
            None => {
                simple.insert(key, rule);
            }
        }
    }
    compacted.extend(simple.into_values());
    compacted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        PolicyRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn owner_rules_cover_by_star_by_subresource_star_and_by_name() {
        let owner = [rule(&["get", "list"], &[""], &["pods", "*/status"])];
        assert!(uncovered(&owner, &[rule(&["get"], &[""], &["pods"])]).is_empty());
        assert!(uncovered(&owner, &[rule(&["list"], &[""], &["deployments/status"])]).is_empty());
        let missing = uncovered(
            &owner,
            &[rule(&["get", "delete"], &["", "apps"], &["pods"])],
        );
        assert_eq!(missing.len(), 3, "{missing:?}");
        let star = [rule(&["*"], &["*"], &["*"])];
        assert!(uncovered(&star, &[rule(&["escalate"], &["x"], &["y/z"])]).is_empty());
        let named = PolicyRule {
            resource_names: Some(vec!["cm1".into()]),
            ..rule(&["get"], &[""], &["configmaps"])
        };
        assert!(uncovered(std::slice::from_ref(&named), std::slice::from_ref(&named)).is_empty());
        assert_eq!(
            uncovered(&[named], &[rule(&["get"], &[""], &["configmaps"])]).len(),
            1
        );
    }

    #[test]
    fn a_user_cannot_grant_what_they_do_not_hold() {
        let policy = Arc::new(PolicyCache::default());
        let alice = UserInfo::new("alice", &["system:authenticated"]);
        let check = EscalationCheck::new(policy, alice);
        let role = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"]}]});
        let err = check.check("roles", Some("dev"), &role, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
        );
        // Changing only owner references and finalizers is what the garbage collector does.
        let mut gc = role.clone();
        gc["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
        assert!(check.check("roles", Some("dev"), &gc, Some(&role)).is_ok());
        let binding = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "missing"}, "subjects": []});
        let err = check
            .check("rolebindings", Some("dev"), &binding, None)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "clusterrole.rbac.authorization.k8s.io \"missing\" not found"
        );
    }
}
