//! The RBAC authorizer: a request is allowed when a binding that applies to its user grants a
//! rule that covers it; nothing is ever denied outright, only not allowed.
//!
//! Mirrors `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RBACAuthorizer.Authorize`, `RulesFor`)
//! and `pkg/registry/rbac/validation/rule.go` (`DefaultRuleResolver.VisitRulesFor`,
//! `appliesTo`, the binding describers of the allow reason):
//!
//! ```text
//!   ClusterRoleBindings (all)            ─┐ subject applies to the user?
//!   RoleBindings in the request's ns     ─┘   (User name, Group, ServiceAccount ns/name)
//!        └▶ roleRef ─▶ Role / ClusterRole rules ─▶ rules::rule_allows(request)?
//!   allowed: "RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "alice""
//!   not:     no opinion; the reason lists roles that were referenced but missing
//! ```

pub mod cache;
pub mod escalation;
pub mod rules;

use super::attributes::Attributes;
use super::user::{UserInfo, split_service_account_user_name};
use cache::{Binding, Snapshot};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use std::sync::Arc;

/// What the RBAC authorizer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether a rule allows the request.
    pub allowed: bool,
    /// Why: the binding that allowed it, or the errors met (missing roles) when not.
    pub reason: String,
}

/// Decides on `attrs` over the RBAC objects in `snapshot`.
pub fn authorize(snapshot: &Snapshot, attrs: &Attributes) -> Decision {
    let mut errors = Vec::new();
    let mut reason = None;
    visit_rules_for(
        snapshot,
        &attrs.user,
        &attrs.namespace,
        |source, rule, err| {
            if let Some(rule) = rule
                && rules::rule_allows(attrs, rule)
            {
                reason = Some(format!("RBAC: allowed by {}", source()));
                return false;
            }
            if let Some(e) = err {
                errors.push(e);
            }
            true
        },
    );
    match reason {
        Some(reason) => Decision {
            allowed: true,
            reason,
        },
        None => Decision {
            allowed: false,
            reason: if errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: {}", aggregate(&errors))
            },
        },
    }
}

/// Every rule that applies to `user` in `namespace` (cluster-wide rules included), and the
/// errors met (roles referenced but missing): `RulesFor`, for SelfSubjectRulesReview.
pub fn rules_for(
    snapshot: &Snapshot,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules_for(snapshot, user, namespace, |_, rule, err| {
        if let Some(rule) = rule {
            rules.push(rule.clone());
        }
        if let Some(e) = err {
            errors.push(e);
        }
        true
    });
    (rules, errors)
}

/// `utilerrors.NewAggregate(errs).Error()`: one error as it is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    }
}

/// Calls `visit` with each rule that applies to `user` in `namespace` (first every
/// ClusterRoleBinding's, then the namespace's RoleBindings'), or with an error for a binding
/// whose role is missing; stops when `visit` returns false (`VisitRulesFor`).
fn visit_rules_for(
    snapshot: &Snapshot,
    user: &UserInfo,
    namespace: &str,
    mut visit: impl FnMut(&dyn Fn() -> String, Option<&PolicyRule>, Option<String>) -> bool,
) {
    let cluster = snapshot.cluster_role_bindings.iter();
    if !visit_bindings(snapshot, user, "", cluster, &mut visit) || namespace.is_empty() {
        return;
    }
    if let Some(bindings) = snapshot.role_bindings.get(namespace) {
        visit_bindings(snapshot, user, namespace, bindings.iter(), &mut visit);
    }
}

/// [`visit_rules_for`] over one kind of binding: ClusterRoleBindings (`namespace` empty) or
/// the RoleBindings of `namespace`. Returns false when `visit` asked to stop.
fn visit_bindings<'a>(
    snapshot: &Snapshot,
    user: &UserInfo,
    namespace: &str,
    bindings: impl Iterator<Item = (&'a String, &'a Binding)>,
    visit: &mut impl FnMut(&dyn Fn() -> String, Option<&PolicyRule>, Option<String>) -> bool,
) -> bool {
    for (name, binding) in bindings {
        let Some(subject) = applies_to(user, &binding.subjects, namespace) else {
            continue;
        };
        match role_rules(snapshot, &binding.role_ref, namespace) {
            Ok(rules) => {
                let source = || {
                    if namespace.is_empty() {
                        describe_binding("ClusterRoleBinding", name, binding, subject, "")
                    } else {
                        let qualified = format!("{name}/{namespace}");
                        describe_binding("RoleBinding", &qualified, binding, subject, namespace)
                    }
                };
                for rule in rules.iter() {
                    if !visit(&source, Some(rule), None) {
                        return false;
                    }
                }
            }
            Err(e) => {
                if !visit(&String::new, None, Some(e)) {
                    return false;
                }
            }
        }
    }
    true
}

/// The rules a binding's roleRef names (`GetRoleReferenceRules`).
fn role_rules(
    snapshot: &Snapshot,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<Arc<[PolicyRule]>, String> {
    match role_ref.kind.as_str() {
        "Role" => snapshot
            .roles
            .get(&(namespace.to_string(), role_ref.name.clone()))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "role.rbac.authorization.k8s.io {:?} not found",
                    role_ref.name
                )
            }),
        "ClusterRole" => snapshot
            .cluster_roles
            .get(&role_ref.name)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {:?} not found",
                    role_ref.name
                )
            }),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

/// The first subject of `subjects` that is `user` (`appliesTo`).
fn applies_to<'a>(
    user: &UserInfo,
    subjects: &'a [Subject],
    namespace: &str,
) -> Option<&'a Subject> {
    subjects.iter().find(|s| match s.kind.as_str() {
        "User" => user.name == s.name,
        "Group" => user.in_group(&s.name),
        "ServiceAccount" => {
            let sa_namespace = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !sa_namespace.is_empty()
                && split_service_account_user_name(&user.name) == Some((sa_namespace, &s.name))
        }
        _ => false,
    })
}

/// `ClusterRoleBinding "x" of ClusterRole "y" to User "alice"` (the describers of rule.go).
fn describe_binding(
    kind: &str,
    name: &str,
    binding: &Binding,
    subject: &Subject,
    namespace: &str,
) -> String {
    let subject = match subject.kind.as_str() {
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
        }
        _ => format!("{} {:?}", subject.kind, subject.name),
    };
    format!(
        "{kind} {name:?} of {} {:?} to {subject}",
        binding.role_ref.kind, binding.role_ref.name
    )
}

#[cfg(test)]
mod tests;
