//! Writing the bootstrap policy at start: every default ClusterRole, ClusterRoleBinding,
//! Role and RoleBinding that is missing is created (Kubernetes' policy, the
//! cloud-controller-manager's role, and miniplane's own additions).
//!
//! Mirrors the `rbac/bootstrap-roles` post-start hook of kube-apiserver
//! (`pkg/registry/rbac/rest/storage_rbac.go`, `ensureRBACPolicy`) with
//! `pkg/registry/rbac/reconciliation`. Simplification: an object that exists is left as it
//! is; Kubernetes also adds back the default rules and subjects missing from objects
//! annotated `rbac.authorization.kubernetes.io/autoupdate: "true"`.

use super::bootstrap_policy;
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::rest::{self, WriteContext, WritePart};
use crate::state::AppState;
use crate::storage::ObjectRef;
use crate::strategy::rbac::GROUP;
use serde::Serialize;

/// Creates the missing objects of the bootstrap policy (and the cloud-controller-manager's
/// role and binding). Returns how many were created.
pub async fn ensure_policy(state: &AppState) -> Result<usize> {
    let mut created = 0;
    let (ccm_role, ccm_binding) = bootstrap_policy::cloud_controller_manager();
    let (own_roles, own_bindings, own_ns_roles, own_ns_bindings) = bootstrap_policy::miniplane();
    let mut cluster_roles = bootstrap_policy::cluster_roles();
    cluster_roles.push(ccm_role);
    cluster_roles.extend(own_roles);
    let mut cluster_role_bindings = bootstrap_policy::cluster_role_bindings();
    cluster_role_bindings.push(ccm_binding);
    cluster_role_bindings.extend(own_bindings);
    let mut namespace_roles = bootstrap_policy::namespace_roles();
    namespace_roles.extend(own_ns_roles);
    let mut namespace_role_bindings = bootstrap_policy::namespace_role_bindings();
    namespace_role_bindings.extend(own_ns_bindings);
    for role in &cluster_roles {
        created += ensure(state, "clusterroles", "ClusterRole", None, role).await? as usize;
    }
    for binding in &cluster_role_bindings {
        created += ensure(
            state,
            "clusterrolebindings",
            "ClusterRoleBinding",
            None,
            binding,
        )
        .await? as usize;
    }
    for role in &namespace_roles {
        let ns = role.metadata.namespace.as_deref();
        created += ensure(state, "roles", "Role", ns, role).await? as usize;
    }
    for binding in &namespace_role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        created += ensure(state, "rolebindings", "RoleBinding", ns, binding).await? as usize;
    }
    Ok(created)
}

/// Creates `obj` unless an object of its name exists; whether it did.
async fn ensure<
    T: Serialize
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    state: &AppState,
    resource: &str,
    kind: &str,
    namespace: Option<&str>,
    obj: &T,
) -> Result<bool> {
    let info = state
        .registry()
        .lookup(&GroupVersion::new(GROUP, "v1"), resource)
        .ok_or_else(|| ApiError::Internal(format!("{resource} are not registered")))?;
    let name = obj.metadata().name.clone().unwrap_or_default();
    let r = ObjectRef {
        info: info.clone(),
        namespace: namespace.map(str::to_string),
        name,
    };
    if state.storage().get(&r).await?.is_some() {
        return Ok(false);
    }
    let mut value = serde_json::to_value(obj)
        .map_err(|e| ApiError::Internal(format!("encoding the bootstrap {kind}: {e}")))?;
    if let Some(m) = value.as_object_mut() {
        m.insert("apiVersion".into(), format!("{GROUP}/v1").into());
        m.insert("kind".into(), kind.into());
    }
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
    rest::default(&info, &mut value)?;
    rest::before_create(&info, namespace, &mut value, &wctx)?;
    match state.storage().create(&r, value).await {
        Ok(_) => Ok(true),
        Err(ApiError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
