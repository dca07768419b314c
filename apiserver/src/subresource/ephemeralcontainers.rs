//! `pods/{name}/ephemeralcontainers`: the only way to add a container to a running pod, what
//! `kubectl debug` sends (a strategic merge patch of `spec.ephemeralContainers`).
//!
//! Mirrors `EphemeralContainersREST` in `pkg/registry/core/pod/storage/storage.go` (GET answers
//! the whole Pod; PUT and PATCH go through the pod store with `podEphemeralContainersStrategy`,
//! never creating a missing pod) and the strategy in `pkg/registry/core/pod/strategy.go`:
//! everything of the request but `spec.ephemeralContainers` is dropped
//! ([`crate::rest::WritePart::EphemeralContainers`]), then the pod's strategy validates the
//! change as `ValidatePodEphemeralContainersUpdate` does
//! (`crate::strategy::pod_spec::ephemeral`).
//!
//! ```text
//!   PATCH pods/web/ephemeralcontainers  {"spec":{"ephemeralContainers":[{"name":"debugger",...}]}}
//!     pod missing ─▶ 404 with details {name: web, kind: pods} (kubectl reads them)
//!     existing one removed or changed, ports/probes/resources/lifecycle set,
//!     name taken ─▶ 422 Pod "web" is invalid: ...
//!     else ─▶ 200 and the Pod; the kubelet starts the new container
//! ```

use crate::error::Result;
use crate::handlers::{
    RequestContext, get as get_handler, patch as patch_handler, update as update_handler,
};
use crate::registry::ResourceInfo;
use crate::rest::WritePart;
use axum::response::Response;
use std::sync::Arc;

/// GET `pods/{name}/ephemeralcontainers`: the whole Pod.
pub async fn get(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    get_handler::get(ctx, info, name).await
}

/// PUT `pods/{name}/ephemeralcontainers`: replaces `spec.ephemeralContainers` only.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    update_handler::replace(ctx, info, name, WritePart::EphemeralContainers).await
}

/// PATCH `pods/{name}/ephemeralcontainers`: patches the pod, keeps only the patched
/// `spec.ephemeralContainers`.
pub async fn patch(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    patch_handler::patch_part(ctx, info, name, WritePart::EphemeralContainers).await
}

#[cfg(test)]
mod tests {
    use crate::rest::{WriteContext, WritePart, before_create, before_update};
    use crate::storage::ObjectRef;
    use serde_json::json;

    /// A write to `pods/{name}/ephemeralcontainers` keeps only the sent
    /// `spec.ephemeralContainers` (defaulted), and refuses what Kubernetes refuses there.
    #[test]
    fn an_ephemeral_containers_write_keeps_only_them_and_validates_them() {
        use crate::gvk::GroupVersion;
        use crate::patch::json_merge_patch;
        let info = crate::registry::Registry::builtin()
            .lookup(&GroupVersion::new("", "v1"), "pods")
            .expect("pods are built in");
        let r = ObjectRef {
            info,
            namespace: Some("default".into()),
            name: "web".into(),
        };
        let ctx = |part| WriteContext {
            manager: Some("kubectl-debug".into()),
            now: "2026-12-02T23:00:00Z".parse().expect("a time"),
            ids: Default::default(),
            part,
            escalation: None,
            service_account: None,
            user: None,
            signer_check: None,
        };
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}});
        before_create(&r.info, Some("default"), &mut pod, &ctx(WritePart::Main)).expect("creates");
        let sent = json!({"metadata": {"labels": {"x": "y"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}],
                "ephemeralContainers": [{"name": "debugger", "image": "busybox",
                    "targetContainerName": "nginx", "stdin": true, "tty": true}]}});
        let written = before_update(
            &r,
            &pod,
            json_merge_patch(&pod, &sent),
            &ctx(WritePart::EphemeralContainers),
        )
        .expect("an addition is allowed");
        assert_eq!(written["spec"]["containers"][0]["image"], "nginx:1.27");
        assert!(written["metadata"].get("labels").is_none(), "{written}");
        let e = &written["spec"]["ephemeralContainers"][0];
        assert_eq!(e["name"], "debugger");
        assert_eq!(e["imagePullPolicy"], "Always");
        assert_eq!(e["terminationMessagePolicy"], "File");
        let manager = &written["metadata"]["managedFields"][1];
        assert_eq!(manager["subresource"], "ephemeralcontainers", "{written}");

        let ports = json!({"spec": {"ephemeralContainers": [{"name": "debugger",
            "image": "busybox", "ports": [{"containerPort": 80}]}]}});
        let err = before_update(
            &r,
            &pod,
            json_merge_patch(&pod, &ports),
            &ctx(WritePart::EphemeralContainers),
        )
        .expect_err("ports are forbidden");
        assert_eq!(
            err.to_status()["message"],
            "Pod \"web\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"
        );
        assert_eq!(err.to_status()["code"], 422);
        let removed = before_update(
            &r,
            &written,
            json_merge_patch(&written, &json!({"spec": {"ephemeralContainers": null}})),
            &ctx(WritePart::EphemeralContainers),
        )
        .expect_err("an existing one stays");
        assert!(
            removed
                .to_string()
                .contains("existing ephemeral containers \"debugger\" may not be removed"),
            "{removed}"
        );
        let created = {
            let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                "spec": {"containers": [{"name": "a", "image": "busybox"}],
                    "ephemeralContainers": [{"name": "b", "image": "busybox"}]}});
            before_create(&r.info, Some("default"), &mut p, &ctx(WritePart::Main))
                .expect_err("none on create")
        };
        assert!(
            created
                .to_string()
                .contains("spec.ephemeralContainers: Forbidden: cannot be set on create"),
            "{created}"
        );
    }
}
