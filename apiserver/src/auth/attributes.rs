//! What a request asks to do, in the terms authorization decides on: verb, API group,
//! resource, subresource, namespace and name, or a non-resource path.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`
//! (`RequestInfoFactory.NewRequestInfo`) and `pkg/authorization/authorizer`'s
//! `AttributesRecord`:
//!
//! ```text
//!   GET    /api/v1/namespaces/default/pods            list   pods          ns default
//!   GET    /api/v1/namespaces/default/pods?watch=1    watch  pods          ns default
//!   GET    /api/v1/namespaces/default/pods/web        get    pods  web     ns default
//!   PATCH  /apis/apps/v1/namespaces/d/deployments/w/scale  patch deployments/scale (apps)
//!   DELETE /api/v1/namespaces/default/pods            deletecollection
//!   GET    /api/v1/watch/namespaces/default/pods      watch  (the verb in the path)
//!   GET    /healthz, /api, /apis/apps                 get    non-resource path
//! ```

use super::user::UserInfo;
use axum::http::Method;

/// A request (or a review's question) as the authorizer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`, `escalate`, `bind`...; for a non-resource path the lower-case method.
    pub verb: String,
    /// Whether this is about an API resource (else about [`Attributes::path`]).
    pub resource_request: bool,
    /// The URL path (non-resource requests).
    pub path: String,
    /// The API group (empty for the core group).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace (empty: cluster-scoped or all namespaces).
    pub namespace: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object's name (empty for collections).
    pub name: String,
}

/// `proxy` and `watch` may come first in the path (`/api/v1/watch/pods`).
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];

impl Attributes {
    /// The attributes of a request (`NewRequestInfo`): `query` is the raw query string.
    pub fn of_request(user: UserInfo, method: &Method, path: &str, query: Option<&str>) -> Self {
        let mut attrs = Attributes {
            user,
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
            ..Attributes::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let parts: &[&str] = if path.trim_matches('/').is_empty() {
            &[]
        } else {
            &parts
        };
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return attrs;
        }
        let mut rest = &parts[1..];
        if parts[0] == "apis" {
            if rest.len() < 3 {
                return attrs;
            }
            attrs.api_group = rest[0].to_string();
            rest = &rest[1..];
        }
        attrs.resource_request = true;
        attrs.api_version = rest[0].to_string();
        rest = &rest[1..];
        if SPECIAL_VERBS.contains(&rest[0]) {
            if rest.len() < 2 {
                // Kubernetes refuses such a path outright; it never names a resource.
                attrs.resource_request = false;
                return attrs;
            }
            attrs.verb = rest[0].to_string();
            rest = &rest[1..];
        } else {
            attrs.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }
        if rest[0] == "namespaces" && rest.len() > 1 {
            attrs.namespace = rest[1].to_string();
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        if rest.len() >= 3 && attrs.verb != "proxy" {
            attrs.subresource = rest[2].to_string();
        }
        if rest.len() >= 2 {
            attrs.name = rest[1].to_string();
        }
        attrs.resource = rest[0].to_string();
        if attrs.name.is_empty() && attrs.verb == "get" {
            let mut watch = false;
            let mut field_selector = None;
            for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
                match &*k {
                    "watch" if !watch => {
                        watch = !matches!(&*v, "" | "false" | "0" | "f" | "F" | "FALSE" | "False")
                    }
                    "fieldSelector" if field_selector.is_none() => {
                        field_selector = Some(v.into_owned())
                    }
                    _ => {}
                }
            }
            attrs.verb = if watch { "watch" } else { "list" }.to_string();
            // A list or watch of one object by `metadata.name=` is about that name.
            if let Some(name) = field_selector.as_deref().and_then(exact_name) {
                attrs.name = name.to_string();
            }
        }
        if attrs.name.is_empty() && attrs.verb == "delete" {
            attrs.verb = "deletecollection".to_string();
        }
        // A WebSocket exec, attach or port-forward is a GET that creates a session: it needs
        // `create` (`AuthorizePodWebsocketUpgradeCreatePermission`, on by default since 1.31).
        if attrs.verb == "get"
            && attrs.resource == "pods"
            && matches!(
                attrs.subresource.as_str(),
                "exec" | "attach" | "portforward"
            )
        {
            attrs.verb = "create".to_string();
        }
        attrs
    }

    /// The resource with its subresource: `pods/status`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The name a field selector pins, if it is `metadata.name=<name>` (or `==`) alone and a
/// valid path segment (`RequiresExactMatch("metadata.name")`).
fn exact_name(selector: &str) -> Option<&str> {
    let selector = selector.trim();
    if selector.contains(',') {
        return None;
    }
    let (key, value) = selector
        .split_once("==")
        .or_else(|| selector.split_once('='))?;
    if key.trim() != "metadata.name" || value.starts_with('=') {
        return None;
    }
    let value = value.trim();
    let valid = !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
    valid.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, path: &str, query: Option<&str>) -> Attributes {
        Attributes::of_request(UserInfo::default(), &method, path, query)
    }

    /// (method, path, query) → (resource?, verb, group, namespace, resource, sub, name)
    type Case = (
        Method,
        &'static str,
        Option<&'static str>,
        bool,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    );

    #[test]
    fn requests_map_to_attributes_as_request_info_maps_them() {
        let cases: &[Case] = &[
            (
                Method::GET,
                "/api/v1/namespaces/default/pods/web/exec",
                Some("command=ls"),
                true,
                "create",
                "",
                "default",
                "pods",
                "exec",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods/web/log",
                None,
                true,
                "get",
                "",
                "default",
                "pods",
                "log",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                None,
                true,
                "list",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("watch=true"),
                true,
                "watch",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("watch=false"),
                true,
                "list",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods/web",
                None,
                true,
                "get",
                "",
                "default",
                "pods",
                "",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/pods",
                None,
                true,
                "list",
                "",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/default/pods",
                None,
                true,
                "create",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/default/pods/web/binding",
                None,
                true,
                "create",
                "",
                "default",
                "pods",
                "binding",
                "web",
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/d/deployments/w/status",
                None,
                true,
                "update",
                "apps",
                "d",
                "deployments",
                "status",
                "w",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/d/deployments/w/scale",
                None,
                true,
                "patch",
                "apps",
                "d",
                "deployments",
                "scale",
                "w",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/default/pods/web",
                None,
                true,
                "delete",
                "",
                "default",
                "pods",
                "",
                "web",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/default/pods",
                None,
                true,
                "deletecollection",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default",
                None,
                true,
                "get",
                "",
                "default",
                "namespaces",
                "",
                "default",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/finalize",
                None,
                true,
                "update",
                "",
                "ns",
                "namespaces",
                "finalize",
                "ns",
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                None,
                true,
                "list",
                "",
                "",
                "namespaces",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/default/pods",
                None,
                true,
                "watch",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("fieldSelector=metadata.name%3Dweb"),
                true,
                "list",
                "",
                "default",
                "pods",
                "",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("fieldSelector=metadata.name%3Dweb,spec.nodeName%3Dn"),
                true,
                "list",
                "",
                "default",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/healthz",
                None,
                false,
                "get",
                "",
                "",
                "",
                "",
                "",
            ),
            (Method::GET, "/api", None, false, "get", "", "", "", "", ""),
            (
                Method::GET,
                "/api/v1",
                None,
                false,
                "get",
                "",
                "",
                "",
                "",
                "",
            ),
            (
                Method::GET,
                "/apis/apps/v1",
                None,
                false,
                "get",
                "",
                "",
                "",
                "",
                "",
            ),
            (
                Method::POST,
                "/miniplane/v1/faults",
                None,
                false,
                "post",
                "",
                "",
                "",
                "",
                "",
            ),
        ];
        for (method, path, query, resource_request, verb, group, ns, resource, sub, name) in cases {
            let a = attrs(method.clone(), path, *query);
            let got = (
                a.resource_request,
                a.verb.as_str(),
                a.api_group.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.name.as_str(),
            );
            assert_eq!(
                got,
                (
                    *resource_request,
                    *verb,
                    *group,
                    *ns,
                    *resource,
                    *sub,
                    *name
                ),
                "{method} {path} {query:?}"
            );
        }
    }
}
