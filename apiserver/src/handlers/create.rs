//! CREATE (POST) (`endpoints/handlers/create.go`, `registry/generic/registry/store.go`
//! `Create`), plus the namespace lifecycle admission check (`plugin/pkg/admission/namespace/
//! lifecycle`): objects may only be created in a namespace that exists and is not terminating.
//! A pod is admitted by the `ServiceAccount` plugin too (`crate::admission::serviceaccount`):
//! its ServiceAccount is looked up here, and the pod is mutated in `rest::before_create`. A
//! PersistentVolumeClaim without a class gets the default one here (`DefaultStorageClass`,
//! `crate::admission::storageclass`).

use super::{RequestContext, object_response, stored_object_response};
use crate::admission::serviceaccount::{self, ServiceAccountAdmission};
use crate::admission::storageclass;
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::meta;
use crate::registry::ResourceInfo;
use crate::request::decode_body_noting_duplicates;
use crate::rest::{self, WriteContext, WritePart};
use crate::state::AppState;
use crate::storage::{ObjectRef, target};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// How often a create with `generateName` retries after a name collision (as
/// `RetryGenerateName` does).
const GENERATE_NAME_ATTEMPTS: usize = 8;

fn namespaces(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), "namespaces")
        .ok_or_else(|| ApiError::Internal("namespaces are not registered".into()))
}

/// The part of a stored Namespace the lifecycle check reads (the rest is skipped unparsed).
#[derive(serde::Deserialize)]
struct NamespaceLifecycle {
    #[serde(default)]
    metadata: Option<LifecycleMeta>,
}

#[derive(serde::Deserialize)]
struct LifecycleMeta {
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<Value>,
}

impl NamespaceLifecycle {
    /// `metadata.deletionTimestamp` is set (as [`meta::deletion_timestamp`] reads it).
    fn terminating(&self) -> bool {
        self.metadata
            .as_ref()
            .and_then(|m| m.deletion_timestamp.as_ref())
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
    }
}

/// 404 `namespaces "x" not found` when the namespace is missing, 403 when it is terminating.
pub async fn check_namespace(state: &AppState, info: &ResourceInfo, namespace: &str) -> Result<()> {
    let ns_info = namespaces(state)?;
    let r = ObjectRef {
        info: ns_info,
        namespace: None,
        name: namespace.to_string(),
    };
    // Only the lifecycle is read, not the whole Namespace (this runs on every create).
    let ns: NamespaceLifecycle = state
        .storage()
        .get_as(&r)
        .await?
        .ok_or_else(|| r.not_found())?;
    if ns.terminating() {
        return Err(ApiError::Forbidden {
            target: target(info, ""),
            message: format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        });
    }
    Ok(())
}

/// Creates a namespace if it does not exist (server bootstrap).
pub async fn ensure_namespace(state: &AppState, name: &str) -> Result<()> {
    let info = namespaces(state)?;
    let r = ObjectRef {
        info: info.clone(),
        namespace: None,
        name: name.to_string(),
    };
    if state.storage().get(&r).await?.is_some() {
        return Ok(());
    }
    let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let wctx = WriteContext {
        manager: Some("kube-apiserver".into()),
        now: state.now(),
        ids: state.ids().clone(),
        part: WritePart::Main,
        escalation: None,
        service_account: None,
        user: None,
        signer_check: None,
    };
    rest::default(&info, &mut obj)?;
    rest::before_create(&info, None, &mut obj, &wctx)?;
    match state.storage().create(&r, obj).await {
        Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The `ServiceAccount` admission plugin for a create of a pod in `namespace` with `body`,
/// its ServiceAccount looked up; `None` for other resources or with the plugin off.
pub async fn service_account_admission(
    ctx: &RequestContext,
    info: &ResourceInfo,
    namespace: Option<&str>,
    body: &Value,
) -> Result<Option<Arc<ServiceAccountAdmission>>> {
    let (Some(namespace), true) = (
        namespace,
        serviceaccount::applies_to(info) && ctx.state.options().admission.service_account(),
    ) else {
        return Ok(None);
    };
    let service_accounts = ctx
        .state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), "serviceaccounts")
        .ok_or_else(|| ApiError::Internal("serviceaccounts are not registered".into()))?;
    let admission =
        serviceaccount::prepare(ctx.storage(), service_accounts, namespace, body).await?;
    Ok(Some(Arc::new(admission)))
}

/// Decodes, checks and prepares a new object, then stores it (201) — or, with `dryRun=All`,
/// only answers what would be stored.
pub async fn create(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    let namespace = ctx.path.namespace.clone();
    if info.namespaced && namespace.is_none() {
        return Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        ));
    }
    if info.terminating {
        // `customresource_handler.go`: a CRD being deleted takes no new custom resources.
        return Err(ApiError::MethodNotAllowed(
            "create not allowed while custom resource definition is terminating".into(),
        ));
    }
    ctx.query.validate_options("CreateOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let mode = ctx.query.field_validation()?;
    let (mut body, duplicates) =
        decode_body_noting_duplicates(&ctx.headers, &ctx.body, &info.kind)?;
    rest::check_type(&info, &mut body)?;
    // Unknown fields and decoding are checked here; `before_create` defaults the body.
    let warnings = rest::check_body(&info, &body, &duplicates, mode)?;
    if let Some(ns) = &namespace {
        check_namespace(&ctx.state, &info, ns).await?;
    }
    // `DefaultStorageClass`: a claim without a class gets the default one.
    if storageclass::applies_to(&info)
        && ctx
            .state
            .options()
            .admission
            .is_enabled(storageclass::DEFAULT_STORAGE_CLASS)
    {
        let default =
            storageclass::default_class_for(ctx.storage(), ctx.state.registry(), &body).await?;
        storageclass::admit(&mut body, default.as_deref());
    }
    let wctx = WriteContext {
        manager: Some(ctx.field_manager()),
        now: ctx.state.now(),
        ids: ctx.state.ids().clone(),
        part: WritePart::Main,
        escalation: ctx.escalation_check(&info),
        service_account: service_account_admission(&ctx, &info, namespace.as_deref(), &body)
            .await?,
        user: Some(ctx.user.clone()),
        signer_check: ctx.signer_check(&info),
    };
    // `Priority` (after `ServiceAccount`'s lookup, as kube-apiserver orders them).
    crate::admission::priority::admit_create(&ctx.state, &info, &mut body).await?;
    let generated = meta::name(&body).is_none();
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Only a generated name is retried (with a new name): otherwise the body is used once.
        let mut obj: Value = if generated {
            body.clone()
        } else {
            std::mem::take(&mut body)
        };
        rest::before_create(&info, namespace.as_deref(), &mut obj, &wctx)?;
        let r = ObjectRef {
            info: info.clone(),
            namespace: namespace.clone(),
            name: meta::name(&obj).unwrap_or_default().to_string(),
        };
        if dry_run {
            return object_response(&ctx, &info, StatusCode::CREATED, &obj, &warnings);
        }
        match ctx
            .storage_for_written_object()
            .create_with_json(&r, obj)
            .await
        {
            Ok((stored, json)) => {
                return stored_object_response(
                    &ctx,
                    &info,
                    StatusCode::CREATED,
                    &stored,
                    json.as_ref(),
                    &warnings,
                );
            }
            Err(ApiError::AlreadyExists { .. })
                if generated && attempt < GENERATE_NAME_ATTEMPTS =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
    }
}
