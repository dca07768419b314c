//! Authentication and authorization: who sent a request, and whether they may.
//!
//! Mirrors kube-apiserver's handler chain (`staging/src/k8s.io/apiserver/pkg/server/config.go`,
//! `DefaultBuildHandlerChain`) and its pieces:
//!
//! ```text
//!   request ─▶ authenticate ───────────▶ impersonate ─────────▶ authorize ─────────▶ handler
//!              client certificate        Impersonate-User/      system:masters: yes
//!              (--client-ca-file; CN     -Group/-Uid/-Extra-*   AlwaysAllow: yes
//!              user, O groups), bearer   each checked as the    RBAC: a bound rule
//!              token (--token-auth-      `impersonate` verb     covers it, else 403
//!              file), else anonymous     (403 if not allowed)   "User "alice" cannot
//!              bad credentials: 401                              list resource ..."
//! ```
//!
//! - [`user`]: `user.Info` and the well-known names;
//! - [`attributes`]: `RequestInfo` → the authorizer's `Attributes`;
//! - [`token_file`]: the static token file;
//! - [`rbac`]: the RBAC authorizer over an in-memory copy of the RBAC objects;
//! - [`bootstrap_policy`] and [`reconcile`]: the default roles and bindings written at start;
//! - [`review`]: the access and identity reviews (`kubectl auth can-i`, `kubectl auth whoami`).
//!
//! The authorization mode is kube-apiserver's `--authorization-mode`: `AlwaysAllow` (its
//! default, and the bare `miniplane apiserver`'s) or `RBAC` (what kubeadm and kind set, and
//! what `miniplane up` runs). Unlike kubeadm's `Node,RBAC`, there is no Node authorizer: the
//! simulated kubelets (group `system:nodes`) are bound to the `system:node` ClusterRole, as
//! Kubernetes did before 1.8.

pub mod attributes;
pub(crate) mod bootstrap_policy;
pub mod rbac;
pub mod reconcile;
pub mod review;
pub mod serviceaccount;
pub mod signer;
pub mod token_file;
pub mod user;

use crate::error::{ApiError, ErrorTarget};
use attributes::Attributes;
use axum::http::{HeaderMap, header};
use rbac::cache::PolicyCache;
use std::sync::Arc;
use token_file::TokenFile;
use user::UserInfo;

/// How requests are authorized (`--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Every request is allowed (kube-apiserver's default).
    #[default]
    AlwaysAllow,
    /// Role-based access control over the rbac.authorization.k8s.io objects.
    Rbac,
}

impl AuthorizationMode {
    /// Parses kube-apiserver's names: `AlwaysAllow`, `RBAC`.
    pub fn parse(s: &str) -> Result<AuthorizationMode, String> {
        match s {
            "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
            "RBAC" => Ok(AuthorizationMode::Rbac),
            other => Err(format!(
                "authorization-mode {other:?} is not a valid mode (AlwaysAllow, RBAC)"
            )),
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthorizationMode::AlwaysAllow => "AlwaysAllow",
            AuthorizationMode::Rbac => "RBAC",
        }
    }
}

/// Who may authenticate and how requests are authorized.
#[derive(Debug, Clone)]
pub struct AuthOptions {
    /// `--authorization-mode`.
    pub authorization_mode: AuthorizationMode,
    /// `--anonymous-auth`: requests without credentials are `system:anonymous` (else 401).
    pub anonymous: bool,
    /// `--token-auth-file`, read.
    pub tokens: Option<Arc<TokenFile>>,
    /// `--client-ca-file`: the CA (DER) client certificates must chain to; without it a
    /// client certificate is not looked at.
    pub client_ca: Option<Arc<Vec<u8>>>,
    /// The ServiceAccount token issuer (`--service-account-signing-key-file`,
    /// `--service-account-issuer`, `--api-audiences`); without it no token is issued or
    /// accepted.
    pub service_accounts: Option<Arc<serviceaccount::TokenIssuer>>,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            authorization_mode: AuthorizationMode::AlwaysAllow,
            anonymous: true,
            tokens: None,
            client_ca: None,
            service_accounts: None,
        }
    }
}

/// What authentication found: a user, or a ServiceAccount token whose ServiceAccount (and
/// bound object) still has to be looked up ([`serviceaccount::lookup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    /// The user.
    User(UserInfo),
    /// A valid ServiceAccount token.
    ServiceAccount(serviceaccount::ValidToken),
}

/// The authenticated user of a request and why it was allowed, in its extensions for the
/// handlers that need them (the reviews, the trace).
#[derive(Debug, Clone)]
pub struct RequestUser {
    /// Who (after impersonation).
    pub user: UserInfo,
    /// The authorizer's reason (`RBAC: allowed by ...`; empty for `system:masters` and under
    /// AlwaysAllow).
    pub reason: String,
}

/// The state of authentication and authorization: the options and the RBAC objects.
#[derive(Debug, Default)]
pub struct Auth {
    options: AuthOptions,
    policy: Arc<PolicyCache>,
    /// The x509 authenticator: `options.client_ca`'s verifier, which remembers the chains it
    /// verified.
    x509: Option<apimachinery::pki::ClientVerifier>,
}

impl Auth {
    /// With these options.
    pub fn new(options: AuthOptions) -> Auth {
        Auth {
            x509: options
                .client_ca
                .as_ref()
                .map(|ca| apimachinery::pki::ClientVerifier::new(ca.to_vec())),
            options,
            policy: Arc::default(),
        }
    }

    /// The options.
    pub fn options(&self) -> &AuthOptions {
        &self.options
    }

    /// The RBAC objects (followed from the store once the server starts).
    pub fn policy(&self) -> &Arc<PolicyCache> {
        &self.policy
    }

    /// Who sent a request: its client certificate, else its bearer token, else anonymous.
    /// `Err(why)` for credentials that were presented and are not valid (answered 401; `why`
    /// goes to the log only).
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&crate::PeerCertificates>,
    ) -> Result<Authenticated, String> {
        // The x509 authenticator (`x509.Authenticator`): CN is the user, O the groups.
        if let (Some(x509), Some(chain)) = (&self.x509, peer.filter(|c| !c.0.is_empty())) {
            let identity = x509
                .verify(&chain.0, std::time::SystemTime::now())
                .map_err(|e| format!("verifying certificate failed: {e}"))?;
            return Ok(Authenticated::User(
                UserInfo {
                    name: identity.common_name,
                    groups: identity.organizations,
                    ..UserInfo::default()
                }
                .with_authenticated_group(),
            ));
        }
        if !headers.contains_key(header::AUTHORIZATION)
            && let Some(token) = cookie(headers, UI_COOKIE)
        {
            return self.authenticate_token(&token);
        }
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| {
                    let (scheme, rest) = v.trim().split_once(' ')?;
                    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
                })
                .filter(|t| !t.is_empty());
            // kube-apiserver ignores an Authorization header that is not a bearer token
            // (its basic-auth authenticator is gone); a bearer token must be known.
            if let Some(token) = token {
                return self.authenticate_token(token);
            }
        }
        if self.options.anonymous {
            Ok(Authenticated::User(UserInfo::anonymous()))
        } else {
            Err("no credentials and anonymous requests are disabled".into())
        }
    }

    /// A bearer token: the token file's, else a ServiceAccount token of this issuer.
    pub fn authenticate_token(&self, token: &str) -> Result<Authenticated, String> {
        if let Some(user) = self.options.tokens.as_ref().and_then(|f| f.user(token)) {
            return Ok(Authenticated::User(user.clone().with_authenticated_group()));
        }
        match &self.options.service_accounts {
            Some(issuer) if issuer.is_ours(token) => issuer
                .validate(
                    token,
                    issuer.audiences(),
                    jiff::Timestamp::now().as_second(),
                )
                .map(Authenticated::ServiceAccount),
            _ => Err("invalid bearer token".into()),
        }
    }

    /// Whether `attrs` is allowed, and why (the privileged group, then the mode).
    pub fn authorize(&self, attrs: &Attributes) -> rbac::Decision {
        if attrs.user.in_group(user::SYSTEM_MASTERS) {
            return rbac::Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        match self.options.authorization_mode {
            AuthorizationMode::AlwaysAllow => rbac::Decision {
                allowed: true,
                reason: String::new(),
            },
            AuthorizationMode::Rbac => self.policy.read(|s| rbac::authorize(s, attrs)),
        }
    }

    /// Applies the `Impersonate-*` headers: the user the request acts as, each impersonated
    /// name checked with the `impersonate` verb (`filters.WithImpersonation`). The headers
    /// are removed. `Ok(None)`: no impersonation asked.
    pub fn impersonate(
        &self,
        requestor: &UserInfo,
        headers: &mut HeaderMap,
    ) -> Result<Option<UserInfo>, Refusal> {
        let requests = impersonation_requests(headers).map_err(Refusal::Malformed)?;
        if requests.is_empty() {
            return Ok(None);
        }
        let groups_specified = headers.contains_key(IMPERSONATE_GROUP);
        let mut name = String::new();
        let mut groups: Vec<String> = Vec::new();
        let mut uid = String::new();
        let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
        for request in requests {
            let mut attrs = Attributes {
                user: requestor.clone(),
                verb: "impersonate".into(),
                resource_request: true,
                ..Attributes::default()
            };
            match request {
                Impersonation::ServiceAccount {
                    namespace,
                    name: sa,
                } => {
                    attrs.resource = "serviceaccounts".into();
                    attrs.api_version = "v1".into();
                    name = user::service_account_user_name(&namespace, &sa);
                    if !groups_specified {
                        groups = user::service_account_groups(&namespace);
                    }
                    attrs.namespace = namespace;
                    attrs.name = sa;
                }
                Impersonation::User(u) => {
                    attrs.resource = "users".into();
                    attrs.api_version = "v1".into();
                    attrs.name = u.clone();
                    name = u;
                }
                Impersonation::Group(g) => {
                    attrs.resource = "groups".into();
                    attrs.api_version = "v1".into();
                    attrs.name = g.clone();
                    groups.push(g);
                }
                Impersonation::Extra { key, value } => {
                    attrs.resource = "userextras".into();
                    attrs.api_group = "authentication.k8s.io".into();
                    attrs.api_version = "v1".into();
                    attrs.subresource = key.clone();
                    attrs.name = value.clone();
                    extra.entry(key).or_default().push(value);
                }
                Impersonation::Uid(u) => {
                    attrs.resource = "uids".into();
                    attrs.api_group = "authentication.k8s.io".into();
                    attrs.api_version = "v1".into();
                    attrs.name = u.clone();
                    uid = u;
                }
            }
            let decision = self.authorize(&attrs);
            if !decision.allowed {
                return Err(Refusal::Forbidden(Box::new(forbidden(
                    &attrs,
                    &decision.reason,
                ))));
            }
        }
        if name != user::ANONYMOUS {
            if !groups
                .iter()
                .any(|g| g == user::ALL_AUTHENTICATED || g == user::ALL_UNAUTHENTICATED)
            {
                groups.push(user::ALL_AUTHENTICATED.into());
            }
        } else if !groups.iter().any(|g| g == user::ALL_UNAUTHENTICATED) {
            groups.push(user::ALL_UNAUTHENTICATED.into());
        }
        headers.remove(IMPERSONATE_USER);
        headers.remove(IMPERSONATE_GROUP);
        headers.remove(IMPERSONATE_UID);
        let extra_headers: Vec<_> = headers
            .keys()
            .filter(|k| k.as_str().starts_with(IMPERSONATE_EXTRA_PREFIX))
            .cloned()
            .collect();
        for k in extra_headers {
            headers.remove(k);
        }
        Ok(Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// The cookie the web UI's browser keeps its token in (set by [`ui_login`]).
pub const UI_COOKIE: &str = "miniplane-token";

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// The web UI's login, as Jupyter's: `GET /ui?token=<t>` with a token that authenticates
/// answers 303 to `/ui` with the token in an HttpOnly, SameSite=Strict cookie (Secure over
/// HTTPS), which the browser then sends with every request of the UI's pages; a token that
/// does not authenticate is a 401. `None`: not a login request.
pub fn ui_login(
    auth: &Auth,
    path: &str,
    query: Option<&str>,
    secure: bool,
) -> Option<Result<String, ApiError>> {
    if path != "/ui" && path != "/ui/" {
        return None;
    }
    let token = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())?;
    match auth.authenticate_token(&token) {
        Ok(Authenticated::User(_)) => {
            let secure = if secure { "; Secure" } else { "" };
            Some(Ok(format!(
                "{UI_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{secure}"
            )))
        }
        _ => {
            tracing::info!("the web UI's login token was not accepted");
            Some(Err(ApiError::Unauthorized))
        }
    }
}

/// Why impersonation was refused.
#[derive(Debug)]
pub enum Refusal {
    /// The headers make no sense (groups without a user): kube-apiserver answers 500 in
    /// plain text.
    Malformed(String),
    /// The requestor may not impersonate one of the names.
    Forbidden(Box<ApiError>),
}

const IMPERSONATE_USER: &str = "impersonate-user";
const IMPERSONATE_GROUP: &str = "impersonate-group";
const IMPERSONATE_UID: &str = "impersonate-uid";
const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

/// One name the request wants to act as.
#[derive(Debug, PartialEq, Eq)]
enum Impersonation {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

/// The impersonation the headers ask for (`buildImpersonationRequests`).
fn impersonation_requests(headers: &HeaderMap) -> Result<Vec<Impersonation>, String> {
    let text = |v: &axum::http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let mut out = Vec::new();
    let user = headers
        .get(IMPERSONATE_USER)
        .map(text)
        .filter(|u| !u.is_empty());
    if let Some(u) = &user {
        out.push(match user::split_service_account_user_name(u) {
            Some((ns, name)) => Impersonation::ServiceAccount {
                namespace: ns.into(),
                name: name.into(),
            },
            None => Impersonation::User(u.clone()),
        });
    }
    let mut others = false;
    for g in headers.get_all(IMPERSONATE_GROUP) {
        others = true;
        out.push(Impersonation::Group(text(g)));
    }
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix(IMPERSONATE_EXTRA_PREFIX) {
            others = true;
            let key = percent_decode(key);
            out.push(Impersonation::Extra {
                key,
                value: text(v),
            });
        }
    }
    if let Some(uid) = headers
        .get(IMPERSONATE_UID)
        .map(text)
        .filter(|u| !u.is_empty())
    {
        others = true;
        out.push(Impersonation::Uid(uid));
    }
    if others && user.is_none() {
        return Err(format!(
            "requested {} without impersonating a user",
            out.iter()
                .map(|r| format!("{r:?}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    Ok(out)
}

/// `url.PathUnescape`, keeping the key as it is when it is not valid escaping.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return s.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// The 403 of a request `attrs` that was not allowed (`responsewriters.ForbiddenStatusError`):
/// `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the
/// namespace "default"`, with RBAC's reason after a colon when it has one.
pub fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let user = apimachinery::fmt::go_quote(&attrs.user.name);
    let q = apimachinery::fmt::go_quote;
    let what = if !attrs.resource_request {
        format!("User {user} cannot {} path {}", attrs.verb, q(&attrs.path))
    } else {
        let resource = attrs.combined_resource();
        if attrs.namespace.is_empty() {
            format!(
                "User {user} cannot {} resource {} in API group {} at the cluster scope",
                attrs.verb,
                q(&resource),
                q(&attrs.api_group)
            )
        } else {
            format!(
                "User {user} cannot {} resource {} in API group {} in the namespace {}",
                attrs.verb,
                q(&resource),
                q(&attrs.api_group),
                q(&attrs.namespace)
            )
        }
    };
    // Go's sanitizer keeps HTML out of the message.
    let what = what
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let detail = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let target = ErrorTarget {
        group: if attrs.resource_request {
            attrs.api_group.clone()
        } else {
            String::new()
        },
        resource: if attrs.resource_request {
            attrs.resource.clone()
        } else {
            String::new()
        },
        kind: String::new(),
        name: attrs.name.clone(),
    };
    let message = if target.resource.is_empty() && target.group.is_empty() {
        format!("forbidden: {detail}")
    } else if target.name.is_empty() {
        format!("{} is forbidden: {detail}", target.group_resource())
    } else {
        format!(
            "{} {} is forbidden: {detail}",
            target.group_resource(),
            q(&target.name)
        )
    };
    ApiError::Forbidden { target, message }
}

#[cfg(test)]
mod tests;
