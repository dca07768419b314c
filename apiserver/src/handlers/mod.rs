//! The REST handlers: one implementation per verb, shared by every resource.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/` (`get.go`, `create.go`,
//! `update.go`, `patch.go`, `delete.go`, `watch.go`); [`dispatch`] holds the route table of
//! `endpoints/installer.go`:
//!
//! ```text
//!   GET    .../{res}            list (or watch with ?watch=1)   GET    .../{res}/{name}  get
//!   POST   .../{res}            create                          PUT    .../{res}/{name}  update
//!   DELETE .../{res}            deletecollection                PATCH  .../{res}/{name}  patch
//!   DELETE .../{res}/{name}     delete                          *      .../{name}/{sub}  subresource
//! ```
//!
//! This module holds what the verbs share ([`RequestContext`], the object responses); the
//! verbs and [`crate::subresource`] import it, and [`dispatch`] imports them all. A version
//! served by conversion (autoscaling/v1 HorizontalPodAutoscalers) goes through [`converted`].

pub mod component_status;
pub mod converted;
pub mod create;
pub mod delete;
pub mod dispatch;
pub mod get;
pub mod list;
pub mod patch;
pub mod review;
pub mod update;
pub mod watch;

use crate::error::Result;
use crate::registry::ResourceInfo;
use crate::request::{Accept, Query, ResourcePath, field_manager};
use crate::response::json_response;
use crate::state::AppState;
use crate::storage::ObjectRef;
use crate::table::{self, IncludeObject};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;

/// One resource request, parsed.
pub struct RequestContext {
    /// Server state.
    pub state: AppState,
    /// HTTP method.
    pub method: Method,
    /// The split URL.
    pub path: ResourcePath,
    /// Query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// What the client accepts.
    pub accept: Accept,
    /// The body (at most [`crate::request::MAX_BODY_BYTES`]).
    pub body: Bytes,
    /// The store for this request's writes: it stamps the request's trace context on the
    /// objects it writes when the request is traced ([`crate::request_trace`]).
    pub storage: crate::storage::Storage,
    /// Who sent the request (after impersonation); the API server itself for the requests
    /// it serves to itself.
    pub user: crate::auth::user::UserInfo,
}

impl RequestContext {
    /// The privilege-escalation check this request's write needs: a write of an RBAC object
    /// under RBAC by a user outside `system:masters`.
    pub fn escalation_check(
        &self,
        info: &ResourceInfo,
    ) -> Option<std::sync::Arc<crate::auth::rbac::escalation::EscalationCheck>> {
        let auth = self.state.auth();
        let needed = info.gvr.group == crate::strategy::rbac::GROUP
            && auth.options().authorization_mode == crate::auth::AuthorizationMode::Rbac
            && !self.user.in_group(crate::auth::user::SYSTEM_MASTERS);
        needed.then(|| {
            std::sync::Arc::new(crate::auth::rbac::escalation::EscalationCheck::new(
                auth.policy().clone(),
                self.user.clone(),
            ))
        })
    }

    /// The CSR approval and signing checks this request's write needs: a write of a
    /// CertificateSigningRequest under RBAC by a user outside `system:masters`.
    pub fn signer_check(
        &self,
        info: &ResourceInfo,
    ) -> Option<std::sync::Arc<crate::auth::signer::SignerCheck>> {
        let auth = self.state.auth();
        let needed = crate::auth::signer::applies_to(info)
            && auth.options().authorization_mode == crate::auth::AuthorizationMode::Rbac
            && !self.user.in_group(crate::auth::user::SYSTEM_MASTERS);
        needed.then(|| {
            std::sync::Arc::new(crate::auth::signer::SignerCheck::new(
                auth.policy().clone(),
                self.user.clone(),
            ))
        })
    }

    /// The store, as this request writes to it.
    pub fn storage(&self) -> &crate::storage::Storage {
        &self.storage
    }

    /// The storage for a write answered with the written object ([`stored_object_response`]):
    /// when the answer is the object as plain JSON, the storage returns it as JSON and moves
    /// the object itself to the watch cache ([`crate::storage::Storage::answering_with_json`]).
    pub fn storage_for_written_object(&self) -> crate::storage::Storage {
        if self.accept.table || self.accept.partial_metadata {
            self.storage.clone()
        } else {
            self.storage.answering_with_json()
        }
    }

    /// The field manager of a write.
    pub fn field_manager(&self) -> String {
        field_manager(&self.query, &self.headers)
    }

    /// `?includeObject=` for Tables.
    pub fn include_object(&self) -> Result<IncludeObject> {
        IncludeObject::parse(self.query.get("includeObject"))
    }
}

/// The object a named request addresses.
pub fn object_ref(info: &Arc<ResourceInfo>, path: &ResourcePath, name: &str) -> ObjectRef {
    ObjectRef {
        info: info.clone(),
        namespace: if info.namespaced {
            path.namespace.clone()
        } else {
            None
        },
        name: name.to_string(),
    }
}

/// Answers with one object, as JSON or as a one-row Table.
pub fn object_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    code: StatusCode,
    obj: &Value,
    warnings: &[String],
) -> Result<Response> {
    let mut resp = if ctx.accept.table {
        let rv = crate::meta::resource_version(obj).unwrap_or_default();
        let table = table::table(
            info,
            std::slice::from_ref(obj),
            json!({"resourceVersion": rv}),
            ctx.include_object()?,
            true,
            ctx.state.now(),
        );
        json_response(code, &table)
    } else if ctx.accept.partial_metadata {
        json_response(code, &crate::meta::partial_object_metadata(obj))
    } else {
        json_response(code, obj)
    };
    add_warnings(&mut resp, warnings);
    Ok(resp)
}

/// [`object_response`] for an object just written, whose JSON the storage returned (`json`,
/// the stored bytes with the resourceVersion spliced in): a plain JSON answer sends those
/// bytes instead of encoding the object again.
pub fn stored_object_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    code: StatusCode,
    obj: &Value,
    json: Option<&Bytes>,
    warnings: &[String],
) -> Result<Response> {
    match json {
        Some(json) if !ctx.accept.table && !ctx.accept.partial_metadata => {
            // The stored bytes are already in kube-apiserver's order; `json.Encoder` ends the
            // document with a newline.
            let mut body = Vec::with_capacity(json.len() + 1);
            body.extend_from_slice(json);
            body.push(b'\n');
            let mut resp = (code, body).into_response();
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            add_warnings(&mut resp, warnings);
            Ok(resp)
        }
        _ => object_response(ctx, info, code, obj, warnings),
    }
}

/// Answers a read-modify-write: 201 when it created the object, else 200.
pub fn written_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    updated: &crate::storage::Updated,
    warnings: &[String],
) -> Result<Response> {
    let code = if updated.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    stored_object_response(
        ctx,
        info,
        code,
        &updated.object,
        updated.json.as_ref(),
        warnings,
    )
}

/// Adds `Warning: 299 - "..."` headers (RFC 7234 warn-code 299, as Kubernetes sends them).
pub fn add_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append("warning", v);
        }
    }
}
