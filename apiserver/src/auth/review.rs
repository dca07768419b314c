//! The reviews: questions about access and identity asked by POSTing an object that is never
//! stored; the answer is the object with its `status` filled in (201).
//!
//! Mirrors `pkg/registry/authorization/{selfsubjectaccessreview,subjectaccessreview,
//! localsubjectaccessreview,selfsubjectrulesreview}/rest.go` and
//! `pkg/registry/authentication/selfsubjectreview/rest.go`:
//!
//! ```text
//!   POST authorization.k8s.io/v1 selfsubjectaccessreviews   can I <verb> <resource>?
//!        (kubectl auth can-i)                                 status {allowed, reason}
//!   POST authorization.k8s.io/v1 subjectaccessreviews        can spec.user/groups ...?
//!   POST authorization.k8s.io/v1 namespaces/<ns>/localsubjectaccessreviews   (in <ns> only)
//!   POST authorization.k8s.io/v1 selfsubjectrulesreviews     what may I do in spec.namespace?
//!        (kubectl auth can-i --list)                          status {resourceRules, ...}
//!   POST authentication.k8s.io/v1 selfsubjectreviews          who am I?
//!        (kubectl auth whoami)                                status {userInfo}
//! ```

use super::attributes::Attributes;
use super::user::{self, UserInfo};
use super::{Auth, AuthorizationMode, rbac};
use crate::error::{ApiError, ErrorTarget, Result};
use crate::strategy::{FieldError, FieldErrorKind};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Map, Value, json};

/// The group of the access reviews.
pub const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";
/// The group of the identity reviews.
pub const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// Which review a resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// `selfsubjectaccessreviews`.
    SelfSubjectAccess,
    /// `subjectaccessreviews`.
    SubjectAccess,
    /// `localsubjectaccessreviews` (namespaced).
    LocalSubjectAccess,
    /// `selfsubjectrulesreviews`.
    SelfSubjectRules,
    /// `selfsubjectreviews`.
    SelfSubject,
    /// `tokenreviews`: is this token valid, and whose is it? (answered by
    /// [`token_review`]).
    Token,
}

impl Review {
    /// The review served at `group`/`resource`, if any.
    pub fn of(group: &str, resource: &str) -> Option<Review> {
        match (group, resource) {
            (AUTHORIZATION_GROUP, "selfsubjectaccessreviews") => Some(Review::SelfSubjectAccess),
            (AUTHORIZATION_GROUP, "subjectaccessreviews") => Some(Review::SubjectAccess),
            (AUTHORIZATION_GROUP, "localsubjectaccessreviews") => Some(Review::LocalSubjectAccess),
            (AUTHORIZATION_GROUP, "selfsubjectrulesreviews") => Some(Review::SelfSubjectRules),
            (AUTHENTICATION_GROUP, "selfsubjectreviews") => Some(Review::SelfSubject),
            (AUTHENTICATION_GROUP, "tokenreviews") => Some(Review::Token),
            _ => None,
        }
    }

    /// The kind.
    pub fn kind(self) -> &'static str {
        match self {
            Review::SelfSubjectAccess => "SelfSubjectAccessReview",
            Review::SubjectAccess => "SubjectAccessReview",
            Review::LocalSubjectAccess => "LocalSubjectAccessReview",
            Review::SelfSubjectRules => "SelfSubjectRulesReview",
            Review::SelfSubject => "SelfSubjectReview",
            Review::Token => "TokenReview",
        }
    }

    fn group(self) -> &'static str {
        match self {
            Review::SelfSubject | Review::Token => AUTHENTICATION_GROUP,
            _ => AUTHORIZATION_GROUP,
        }
    }
}

/// Answers a review `body` posted by `requestor` (in `namespace` for a local review).
pub fn answer(
    auth: &Auth,
    review: Review,
    requestor: &UserInfo,
    namespace: Option<&str>,
    mut body: Value,
) -> Result<Value> {
    let invalid = |field: &str, value: &str, detail: &str| ApiError::Invalid {
        target: ErrorTarget {
            group: review.group().into(),
            resource: String::new(),
            kind: review.kind().into(),
            name: String::new(),
        },
        errors: vec![FieldError {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }],
    };
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let status = match review {
        Review::SelfSubject => json!({"userInfo": user_info_json(requestor)}),
        Review::Token => body.get("status").cloned().unwrap_or(json!({})),
        Review::SelfSubjectRules => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            if ns.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            rules_status(auth, requestor, ns)
        }
        Review::SelfSubjectAccess | Review::SubjectAccess | Review::LocalSubjectAccess => {
            let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
            let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
            let user = match review {
                Review::SelfSubjectAccess => requestor.clone(),
                _ => subject_of(&spec),
            };
            if review != Review::SelfSubjectAccess && user.name.is_empty() && user.groups.is_empty()
            {
                return Err(invalid(
                    "spec.user",
                    "\"\"",
                    "at least one of user or group must be specified",
                ));
            }
            if resource.is_some() == non_resource.is_some() {
                let detail =
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified";
                let shown = if resource.is_some() { "{...}" } else { "null" };
                return Err(invalid("spec.resourceAttributes", shown, detail));
            }
            let attrs = match (resource, non_resource) {
                (Some(r), _) => {
                    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let attrs = Attributes {
                        user,
                        verb: s("verb"),
                        resource_request: true,
                        api_group: s("group"),
                        api_version: s("version"),
                        namespace: s("namespace"),
                        resource: s("resource"),
                        subresource: s("subresource"),
                        name: s("name"),
                        ..Attributes::default()
                    };
                    if let Some(ns) = namespace
                        && attrs.namespace != ns
                    {
                        return Err(ApiError::BadRequest(format!(
                            "spec.resourceAttributes.namespace must match namespace: {ns}"
                        )));
                    }
                    attrs
                }
                (None, Some(n)) => {
                    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    Attributes {
                        user,
                        verb: s("verb"),
                        path: s("path"),
                        ..Attributes::default()
                    }
                }
                (None, None) => unreachable!("exactly one is present, checked above"),
            };
            let decision = auth.authorize(&attrs);
            let mut status = Map::new();
            status.insert("allowed".into(), Value::Bool(decision.allowed));
            if !decision.reason.is_empty() {
                status.insert("reason".into(), Value::String(decision.reason));
            }
            Value::Object(status)
        }
    };
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::BadRequest(format!(
            "the object provided is unrecognized (must be of type {})",
            review.kind()
        )));
    };
    obj.insert("kind".into(), Value::String(review.kind().into()));
    obj.insert(
        "apiVersion".into(),
        Value::String(format!("{}/v1", review.group())),
    );
    let metadata = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = metadata.as_object_mut() {
        m.entry("creationTimestamp").or_insert(Value::Null);
        if let Some(ns) = namespace {
            m.insert("namespace".into(), Value::String(ns.into()));
        }
    }
    if !obj.contains_key("spec") {
        obj.insert("spec".into(), json!({}));
    }
    obj.insert("status".into(), status);
    Ok(body)
}

/// The status of a TokenReview of `body` (`pkg/registry/authentication/tokenreview/storage.go`):
/// the token's user and audiences when it authenticates, else `authenticated: false` with
/// the reason. Audiences default to the API server's.
pub async fn token_review(state: &crate::state::AppState, body: &Value) -> Result<Value> {
    let token = body
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview".into(),
        ));
    }
    let auth = state.auth();
    let wanted = crate::meta::string_list(body.pointer("/spec/audiences"));
    let api_audiences = auth
        .options()
        .service_accounts
        .as_ref()
        .map(|i| i.audiences().to_vec())
        .unwrap_or_default();
    let audiences = if wanted.is_empty() {
        api_audiences
    } else {
        wanted
    };
    let found = match auth.authenticate_token(token) {
        Ok(super::Authenticated::User(u)) => Ok(u),
        Ok(super::Authenticated::ServiceAccount(_)) => {
            // Validated against the API server's audiences; a review may ask for others.
            let issuer = auth.options().service_accounts.clone();
            match issuer.map(|i| i.validate(token, &audiences, jiff::Timestamp::now().as_second()))
            {
                Some(Ok(valid)) => super::serviceaccount::lookup(state, &valid).await,
                Some(Err(e)) => Err(e),
                None => Err("invalid bearer token".into()),
            }
        }
        Err(e) => Err(e),
    };
    Ok(match found {
        Ok(user) => {
            json!({"authenticated": true, "user": user_info_json(&user), "audiences": audiences})
        }
        Err(why) => {
            tracing::debug!(reason = %why, "TokenReview: not authenticated");
            json!({"authenticated": false, "error": "[invalid bearer token, service account token has been invalidated]"})
        }
    })
}

/// The user a SubjectAccessReview asks about: `spec.user`, `groups`, `uid`, `extra`.
fn subject_of(spec: &Value) -> UserInfo {
    let strings = crate::meta::string_list;
    UserInfo {
        name: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .into(),
        uid: spec.get("uid").and_then(Value::as_str).unwrap_or("").into(),
        groups: strings(spec.get("groups")),
        extra: spec
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), strings(Some(v))))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `authenticationv1.UserInfo` as JSON (empty fields left out).
fn user_info_json(u: &UserInfo) -> Value {
    let mut m = Map::new();
    if !u.name.is_empty() {
        m.insert("username".into(), Value::String(u.name.clone()));
    }
    if !u.uid.is_empty() {
        m.insert("uid".into(), Value::String(u.uid.clone()));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

/// What `user` may do in `namespace`: the union of what each authorizer lists (`RulesFor`):
/// everything for `system:masters` and under AlwaysAllow, else RBAC's rules.
fn rules_status(auth: &Auth, user: &UserInfo, namespace: &str) -> Value {
    let all = || {
        (
            vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
        )
    };
    let everything = user.in_group(user::SYSTEM_MASTERS)
        || auth.options().authorization_mode == AuthorizationMode::AlwaysAllow;
    let (mut resource_rules, mut non_resource_rules) =
        if everything { all() } else { (vec![], vec![]) };
    let mut errors = Vec::new();
    if auth.options().authorization_mode == AuthorizationMode::Rbac {
        let (rules, errs) = auth.policy().read(|s| rbac::rules_for(s, user, namespace));
        errors = errs;
        for rule in rules {
            split_rule(&rule, &mut resource_rules, &mut non_resource_rules);
        }
    }
    let mut status = Map::new();
    status.insert("resourceRules".into(), Value::Array(resource_rules));
    status.insert("nonResourceRules".into(), Value::Array(non_resource_rules));
    status.insert("incomplete".into(), Value::Bool(false));
    if !errors.is_empty() {
        status.insert("evaluationError".into(), Value::String(errors.join(", ")));
    }
    Value::Object(status)
}

/// A policy rule as the rules review lists it: its resource part and its non-resource part.
fn split_rule(
    rule: &PolicyRule,
    resource_rules: &mut Vec<Value>,
    non_resource_rules: &mut Vec<Value>,
) {
    if rule.resources.as_ref().is_some_and(|r| !r.is_empty()) {
        let mut r = Map::new();
        r.insert("verbs".into(), json!(rule.verbs));
        if let Some(g) = &rule.api_groups {
            r.insert("apiGroups".into(), json!(g));
        }
        r.insert("resources".into(), json!(rule.resources));
        if let Some(n) = rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
            r.insert("resourceNames".into(), json!(n));
        }
        resource_rules.push(Value::Object(r));
    }
    if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
        non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": urls}));
    }
}
