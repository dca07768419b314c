//! rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding and ClusterRoleBinding:
//! `pkg/apis/rbac/validation/validation.go` (`ValidateRole`, `ValidateClusterRole`,
//! `ValidatePolicyRule`, `ValidateRoleBinding`, `ValidateClusterRoleBinding`,
//! `ValidateRoleBindingSubject` and their `...Update`), `pkg/registry/rbac/*/strategy.go`,
//! `pkg/apis/rbac/v1/defaults.go`, and the tables: the default table convertor
//! (`rest.NewDefaultTableConvertor`) for roles, `printRoleBinding`/`printClusterRoleBinding`
//! of `pkg/printers/internalversion/printers.go` for bindings.
//!
//! ```text
//!   names        path segment names only (ValidateRBACName), as for Nodes and Events
//!   rules[i]     verbs required; apiGroups + resources required unless nonResourceURLs,
//!                which Roles may not have and which exclude resources
//!   aggregation  a ClusterRole's aggregationRule needs clusterRoleSelectors, each a valid
//!                label selector
//!   roleRef      apiGroup rbac.authorization.k8s.io (the default), kind Role|ClusterRole
//!                (a ClusterRoleBinding: ClusterRole), name a path segment; immutable
//!   subjects[i]  ServiceAccount (name a DNS subdomain, apiGroup "", a namespace in cluster
//!                bindings), User or Group (apiGroup rbac.authorization.k8s.io, the default)
//!   tables       roles: NAME CREATED AT; bindings: NAME ROLE AGE (+ USERS GROUPS
//!                SERVICEACCOUNTS with -o wide)
//! ```
//!
//! As in Kubernetes, an update validates the new object twice (`ValidateUpdate` runs
//! `ValidateRole` and then `ValidateRoleUpdate`, which runs it again): each error is listed
//! twice in the `Status` causes, once in its message (`ToAggregate` drops repeats).
//!
//! The objects are stored and validated only: no request is authorized against them yet.

use super::field::{FieldPath, Rendered};
use super::selector::validate_label_selector_with;
use super::table::{age_column, column, created_at, created_at_column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::Selector;
use apimachinery::fmt::go_quote;
use apimachinery::validation::{NameRule, is_dns1123_subdomain, is_path_segment_name};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::Value;

/// The API group of the kinds, and the `apiGroup` of a binding's `roleRef` (`rbac.GroupName`).
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// `rbac.ServiceAccountKind`.
const SERVICE_ACCOUNT: &str = "ServiceAccount";
/// `rbac.UserKind`.
const USER: &str = "User";
/// `rbac.GroupKind`.
const GROUP_KIND: &str = "Group";

/// The Role rules (namespaced).
#[derive(Debug, Default, Clone, Copy)]
pub struct RoleRules;

impl KindRules for RoleRules {
    type Object = Role;
    const NAME_RULE: NameRule = NameRule::PathSegment;

    fn set_defaults(&self, obj: &mut Role) {
        obj.rules.iter_mut().flatten().for_each(omit_empty_lists);
    }

    /// `ValidateRole` (metadata aside).
    fn validate(&self, obj: &Role) -> Vec<FieldError> {
        validate_rules(obj.rules.as_deref().unwrap_or_default(), true)
    }

    /// `ValidateRole` and then `ValidateRoleUpdate` (which runs `ValidateRole` again).
    fn validate_update(&self, new: &Role, _old: &Role) -> Vec<FieldError> {
        twice(self.validate(new))
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![created_at_column()]
    }

    fn table_row(&self, obj: &Role, _now: jiff::Timestamp) -> Vec<Value> {
        vec![text(created_at(&obj.metadata))]
    }
}

/// The ClusterRole rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterRoleRules;

impl KindRules for ClusterRoleRules {
    type Object = ClusterRole;
    const NAME_RULE: NameRule = NameRule::PathSegment;

    fn set_defaults(&self, obj: &mut ClusterRole) {
        obj.rules.iter_mut().flatten().for_each(omit_empty_lists);
        if let Some(rule) = &mut obj.aggregation_rule
            && rule
                .cluster_role_selectors
                .as_ref()
                .is_some_and(Vec::is_empty)
        {
            rule.cluster_role_selectors = None;
        }
    }

    /// `ValidateClusterRole` (metadata aside) as the strategy's `Validate` calls it: label
    /// values in selectors must be valid.
    fn validate(&self, obj: &ClusterRole) -> Vec<FieldError> {
        validate_cluster_role(obj, false)
    }

    /// `ValidateClusterRole` and then `ValidateClusterRoleUpdate` (which runs it again),
    /// allowing invalid label values in selectors when the old object had such a selector.
    fn validate_update(&self, new: &ClusterRole, old: &ClusterRole) -> Vec<FieldError> {
        twice(validate_cluster_role(
            new,
            has_invalid_label_value_in_selector(old),
        ))
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![created_at_column()]
    }

    fn table_row(&self, obj: &ClusterRole, _now: jiff::Timestamp) -> Vec<Value> {
        vec![text(created_at(&obj.metadata))]
    }
}

/// The RoleBinding rules (namespaced).
#[derive(Debug, Default, Clone, Copy)]
pub struct RoleBindingRules;

impl KindRules for RoleBindingRules {
    type Object = RoleBinding;
    const NAME_RULE: NameRule = NameRule::PathSegment;

    /// `SetDefaults_RoleBinding` and `SetDefaults_Subject`.
    fn set_defaults(&self, obj: &mut RoleBinding) {
        default_role_ref(&mut obj.role_ref);
        default_subjects(&mut obj.subjects);
    }

    /// `ValidateRoleBinding` (metadata aside).
    fn validate(&self, obj: &RoleBinding) -> Vec<FieldError> {
        validate_binding(&obj.role_ref, obj.subjects.as_deref(), true)
    }

    /// `ValidateRoleBinding`, then `ValidateRoleBindingUpdate`: the same again, and
    /// `roleRef` may not change.
    fn validate_update(&self, new: &RoleBinding, old: &RoleBinding) -> Vec<FieldError> {
        let mut errs = twice(self.validate(new));
        errs.extend(validate_role_ref_unchanged(&new.role_ref, &old.role_ref));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        binding_columns(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            [
                "Users in the roleBinding",
                "Groups in the roleBinding",
                "ServiceAccounts in the roleBinding",
            ],
        )
    }

    fn table_row(&self, obj: &RoleBinding, now: jiff::Timestamp) -> Vec<Value> {
        let mut row = vec![
            text(role_cell(&obj.role_ref)),
            text(age(&obj.metadata, now)),
        ];
        row.extend(subject_cells(obj.subjects.as_deref().unwrap_or_default()));
        row
    }
}

/// The ClusterRoleBinding rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterRoleBindingRules;

impl KindRules for ClusterRoleBindingRules {
    type Object = ClusterRoleBinding;
    const NAME_RULE: NameRule = NameRule::PathSegment;

    /// `SetDefaults_ClusterRoleBinding` and `SetDefaults_Subject`.
    fn set_defaults(&self, obj: &mut ClusterRoleBinding) {
        default_role_ref(&mut obj.role_ref);
        default_subjects(&mut obj.subjects);
    }

    /// `ValidateClusterRoleBinding` (metadata aside).
    fn validate(&self, obj: &ClusterRoleBinding) -> Vec<FieldError> {
        validate_binding(&obj.role_ref, obj.subjects.as_deref(), false)
    }

    /// `ValidateClusterRoleBinding`, then `ValidateClusterRoleBindingUpdate`: the same again,
    /// and `roleRef` may not change.
    fn validate_update(
        &self,
        new: &ClusterRoleBinding,
        old: &ClusterRoleBinding,
    ) -> Vec<FieldError> {
        let mut errs = twice(self.validate(new));
        errs.extend(validate_role_ref_unchanged(&new.role_ref, &old.role_ref));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        binding_columns(
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            [
                "Users in the clusterRoleBinding",
                "Groups in the clusterRoleBinding",
                "ServiceAccounts in the clusterRoleBinding",
            ],
        )
    }

    fn table_row(&self, obj: &ClusterRoleBinding, now: jiff::Timestamp) -> Vec<Value> {
        let mut row = vec![
            text(role_cell(&obj.role_ref)),
            text(age(&obj.metadata, now)),
        ];
        row.extend(subject_cells(obj.subjects.as_deref().unwrap_or_default()));
        row
    }
}

/// The errors of one validation, listed twice as the update strategies list them.
fn twice(errs: Vec<FieldError>) -> Vec<FieldError> {
    let mut out = errs.clone();
    out.extend(errs);
    out
}

/// Empty lists of a rule are dropped, as Go's `omitempty` drops them when the object is
/// written (`verbs` has no `omitempty` and is kept).
fn omit_empty_lists(rule: &mut PolicyRule) {
    for list in [
        &mut rule.api_groups,
        &mut rule.resources,
        &mut rule.resource_names,
        &mut rule.non_resource_urls,
    ] {
        if list.as_ref().is_some_and(Vec::is_empty) {
            *list = None;
        }
    }
}

/// `SetDefaults_RoleBinding` / `SetDefaults_ClusterRoleBinding`: an empty `roleRef.apiGroup`
/// is `rbac.authorization.k8s.io`.
fn default_role_ref(role_ref: &mut RoleRef) {
    if role_ref.api_group.is_empty() {
        GROUP.clone_into(&mut role_ref.api_group);
    }
}

/// `SetDefaults_Subject` on each subject: Users and Groups without an `apiGroup` get
/// `rbac.authorization.k8s.io`. Empty optional strings (and an empty list) are dropped, as
/// `omitempty` drops them.
fn default_subjects(subjects: &mut Option<Vec<Subject>>) {
    if subjects.as_ref().is_some_and(Vec::is_empty) {
        *subjects = None;
    }
    for subject in subjects.iter_mut().flatten() {
        if subject.api_group.as_deref().unwrap_or_default().is_empty() {
            subject.api_group = match subject.kind.as_str() {
                USER | GROUP_KIND => Some(GROUP.to_owned()),
                _ => None,
            };
        }
        if subject.namespace.as_deref() == Some("") {
            subject.namespace = None;
        }
    }
}

/// `ValidatePolicyRule` over each rule, under `rules[i]`.
fn validate_rules(rules: &[PolicyRule], namespaced: bool) -> Vec<FieldError> {
    let path = FieldPath::new("rules");
    rules
        .iter()
        .enumerate()
        .flat_map(|(i, rule)| validate_policy_rule(rule, namespaced, &path.index(i)))
        .collect()
}

/// `ValidatePolicyRule`: verbs are required; a rule is either about non-resource URLs (only
/// in cluster roles, and then without groups, resources or names) or about resources, with
/// at least one API group and one resource.
pub fn validate_policy_rule(
    rule: &PolicyRule,
    namespaced: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let len = |list: &Option<Vec<String>>| list.as_ref().map_or(0, Vec::len);
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    if let Some(urls) = rule.non_resource_urls.as_deref().filter(|u| !u.is_empty()) {
        let urls_path = path.child("nonResourceURLs");
        if namespaced {
            errs.push(FieldError::invalid(
                &urls_path,
                go_string_slice(urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(&rule.api_groups) > 0 || len(&rule.resources) > 0 || len(&rule.resource_names) > 0 {
            errs.push(FieldError::invalid(
                &urls_path,
                go_string_slice(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if len(&rule.api_groups) == 0 {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(&rule.resources) == 0 {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

/// `ValidateClusterRole` (metadata aside): the rules, and the aggregation rule's selectors.
/// `allow_invalid_label_values` is `ClusterRoleValidationOptions.AllowInvalidLabelValueInSelector`.
fn validate_cluster_role(obj: &ClusterRole, allow_invalid_label_values: bool) -> Vec<FieldError> {
    let mut errs = validate_rules(obj.rules.as_deref().unwrap_or_default(), false);
    let Some(aggregation) = &obj.aggregation_rule else {
        return errs;
    };
    let path = FieldPath::new("aggregationRule").child("clusterRoleSelectors");
    let selectors = aggregation
        .cluster_role_selectors
        .as_deref()
        .unwrap_or_default();
    if selectors.is_empty() {
        errs.push(FieldError::required(
            &path,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        let at = path.index(i);
        errs.extend(validate_label_selector_with(
            selector,
            allow_invalid_label_values,
            &at,
        ));
        if Selector::from_label_selector(Some(selector)).is_err() {
            // Kubernetes reports the selector it failed to build: a nil `labels.Selector`,
            // which `field.Error` prints as the string "null".
            errs.push(FieldError::invalid(&at, "null", "invalid label selector."));
        }
    }
    errs
}

/// `hasInvalidLabelValueInLabelSelector` of the ClusterRole strategy: whether any selector of
/// the aggregation rule fails `ValidateLabelSelector` (label values checked).
fn has_invalid_label_value_in_selector(role: &ClusterRole) -> bool {
    role.aggregation_rule
        .iter()
        .flat_map(|rule| rule.cluster_role_selectors.iter().flatten())
        .any(|selector| {
            !validate_label_selector_with(selector, false, &FieldPath::new("")).is_empty()
        })
}

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding` (metadata aside); `namespaced` for a
/// RoleBinding.
fn validate_binding(
    role_ref: &RoleRef,
    subjects: Option<&[Subject]>,
    namespaced: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = FieldPath::new("roleRef");
    if role_ref.api_group != GROUP {
        errs.push(FieldError::not_supported(
            &path.child("apiGroup"),
            &role_ref.api_group,
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        errs.push(FieldError::not_supported(
            &path.child("kind"),
            &role_ref.kind,
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        for msg in is_path_segment_name(&role_ref.name) {
            errs.push(FieldError::invalid(
                &path.child("name"),
                &role_ref.name,
                &msg,
            ));
        }
    }
    let path = FieldPath::new("subjects");
    for (i, subject) in subjects.unwrap_or_default().iter().enumerate() {
        errs.extend(validate_subject(subject, namespaced, &path.index(i)));
    }
    errs
}

/// `ValidateRoleBindingSubject`.
pub fn validate_subject(subject: &Subject, namespaced: bool, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = subject.name.as_str();
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let api_group = subject.api_group.as_deref().unwrap_or_default();
    match subject.kind.as_str() {
        SERVICE_ACCOUNT => {
            if !name.is_empty() {
                // `ValidateServiceAccountName`: a DNS subdomain.
                for msg in is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(&path.child("name"), name, &msg));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && subject.namespace.as_deref().unwrap_or_default().is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        USER | GROUP_KIND => {
            if api_group != GROUP {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &[SERVICE_ACCOUNT, USER, GROUP_KIND],
        )),
    }
    errs
}

/// `ValidateRoleBindingUpdate`'s last check: `Invalid value: <the new roleRef>: cannot
/// change roleRef`, the value printed as Go's `%#v` prints the internal `rbac.RoleRef`.
fn validate_role_ref_unchanged(new: &RoleRef, old: &RoleRef) -> Vec<FieldError> {
    if new == old {
        return Vec::new();
    }
    vec![FieldError::invalid(
        &FieldPath::new("roleRef"),
        go_role_ref(new),
        "cannot change roleRef",
    )]
}

/// A `RoleRef` as Go's `%#v` prints the internal type:
/// `rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"view"}`.
fn go_role_ref(r: &RoleRef) -> Rendered {
    Rendered(format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        go_quote(&r.api_group),
        go_quote(&r.kind),
        go_quote(&r.name)
    ))
}

/// A `[]string` as Go's `%#v` prints it: `[]string{"/healthz", "/metrics"}`.
fn go_string_slice(items: &[String]) -> Rendered {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    Rendered(format!("[]string{{{}}}", quoted.join(", ")))
}

/// The columns of both binding tables after `Name`: `Role`, `Age`, and the `-o wide`
/// subjects, with the descriptions Kubernetes gives them.
fn binding_columns(role_description: &'static str, wide: [&'static str; 3]) -> Vec<TableColumn> {
    vec![
        column("Role", "string", role_description, 0),
        age_column(),
        column("Users", "string", wide[0], 1),
        column("Groups", "string", wide[1], 1),
        column("ServiceAccounts", "string", wide[2], 1),
    ]
}

/// The `Role` cell: `ClusterRole/view`.
fn role_cell(role_ref: &RoleRef) -> String {
    format!("{}/{}", role_ref.kind, role_ref.name)
}

/// The `Users`, `Groups` and `ServiceAccounts` cells (`rbac.SubjectsStrings`, joined with
/// `", "`): user and group names, service accounts as `namespace/name`. Subjects of other
/// kinds are in none of them.
fn subject_cells(subjects: &[Subject]) -> [Value; 3] {
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in subjects {
        match subject.kind.as_str() {
            SERVICE_ACCOUNT => service_accounts.push(format!(
                "{}/{}",
                subject.namespace.as_deref().unwrap_or_default(),
                subject.name
            )),
            USER => users.push(subject.name.clone()),
            GROUP_KIND => groups.push(subject.name.clone()),
            _ => {}
        }
    }
    [
        text(users.join(", ")),
        text(groups.join(", ")),
        text(service_accounts.join(", ")),
    ]
}

#[cfg(test)]
mod tests;
