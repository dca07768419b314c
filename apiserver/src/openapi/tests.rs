//! Tests of the OpenAPI v3 documents, checked the way kubectl reads them.

use super::*;
use crate::openapi::builtin::{EXT_GVK, SCHEMA_REF_PREFIX};

fn kind(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    subresources: &[&str],
) -> OpenApiKind {
    OpenApiKind {
        gvk: GroupVersionKind::new(group, "v1", kind),
        plural: plural.into(),
        namespaced,
        subresources: subresources.iter().map(|s| s.to_string()).collect(),
        schema: None,
    }
}

fn apps_v1() -> Value {
    document(
        &GroupVersion::new("apps", "v1"),
        &[
            kind(
                "apps",
                "Deployment",
                "deployments",
                true,
                &["status", "scale"],
            ),
            kind(
                "apps",
                "ReplicaSet",
                "replicasets",
                true,
                &["status", "scale"],
            ),
        ],
    )
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    &doc["components"]["schemas"][name]
}

/// Follows a property the way `kubectl explain` does: `$ref` or `allOf: [{$ref}]`.
fn resolve<'a>(doc: &'a Value, node: &'a Value) -> &'a Value {
    let reference = node["$ref"]
        .as_str()
        .or_else(|| node["allOf"][0]["$ref"].as_str());
    match reference.and_then(|r| r.strip_prefix(SCHEMA_REF_PREFIX)) {
        Some(name) => schema(doc, name),
        None => node,
    }
}

#[test]
fn deployment_schema_is_published_with_its_gvk() {
    let doc = apps_v1();
    assert_eq!(doc["openapi"], "3.0.0");
    let deployment = schema(&doc, "io.k8s.api.apps.v1.Deployment");
    assert_eq!(
        deployment[EXT_GVK],
        json!([{"group":"apps","kind":"Deployment","version":"v1"}])
    );
    assert_eq!(
        schema(&doc, "io.k8s.api.apps.v1.DeploymentList")[EXT_GVK][0]["kind"],
        "DeploymentList"
    );
}

#[test]
fn every_ref_resolves_and_no_defs_remain() {
    let doc = apps_v1();
    let mut refs = Vec::new();
    document::collect_refs(&doc, &mut refs);
    assert!(refs.len() > 100, "only {} refs", refs.len());
    for name in refs {
        assert!(schema(&doc, &name).is_object(), "dangling $ref {name}");
    }
    assert!(!doc.to_string().contains("$defs"));
}

#[test]
fn patch_operation_lets_kubectl_skip_client_validation() {
    let doc = apps_v1();
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
    assert_eq!(patch["x-kubernetes-action"], "patch");
    assert_eq!(
        patch[EXT_GVK],
        json!({"group":"apps","kind":"Deployment","version":"v1"})
    );
    let params: Vec<&str> = patch["parameters"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(params.contains(&"fieldValidation"), "{params:?}");
    let scale =
        &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"];
    assert_eq!(scale[EXT_GVK]["kind"], "Scale");
    assert_eq!(
        doc["paths"]["/apis/apps/v1/deployments"]["get"]["operationId"],
        "listAppsV1DeploymentForAllNamespaces"
    );
}

#[test]
fn containers_carry_merge_key_extensions() {
    let doc = apps_v1();
    let containers = &schema(&doc, "io.k8s.api.core.v1.PodSpec")["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(containers["x-kubernetes-list-type"], "map");
    assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
}

#[test]
fn explain_can_walk_deployment_spec_strategy() {
    let doc = apps_v1();
    let deployment = schema(&doc, "io.k8s.api.apps.v1.Deployment");
    let spec = &deployment["properties"]["spec"];
    assert!(spec["description"].is_string());
    let spec = resolve(&doc, spec);
    let strategy = &spec["properties"]["strategy"];
    assert!(
        strategy["description"]
            .as_str()
            .is_some_and(|d| d.contains("deployment strategy"))
    );
    let strategy = resolve(&doc, strategy);
    assert!(strategy["properties"]["type"]["description"].is_string());
}

#[test]
fn documents_and_index_hashes_are_stable() {
    let gv = GroupVersion::new("apps", "v1");
    let (a, b) = (apps_v1(), apps_v1());
    assert_eq!(a, b);
    let one = index(&[(gv.clone(), a)]);
    let two = index(&[(gv.clone(), b)]);
    assert_eq!(one, two);
    let url = one["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_default();
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    let other = document(&gv, &[kind("apps", "Deployment", "deployments", true, &[])]);
    let three = index(&[(gv, other)]);
    assert_ne!(one, three, "the hash follows the content");
}

#[test]
fn core_v1_paths_for_namespaced_and_cluster_kinds() {
    let doc = document(
        &GroupVersion::new("", "v1"),
        &[
            kind("", "Pod", "pods", true, &["status", "binding"]),
            kind("", "Node", "nodes", false, &["status"]),
        ],
    );
    let paths = &doc["paths"];
    assert_eq!(
        paths["/api/v1/namespaces/{namespace}/pods"]["get"]["operationId"],
        "listCoreV1NamespacedPod"
    );
    assert_eq!(
        paths["/api/v1/nodes/{name}"]["patch"]["operationId"],
        "patchCoreV1Node"
    );
    assert!(paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"].is_object());
    assert!(paths.get("/api/v1/namespaces/{namespace}/nodes").is_none());
    assert!(schema(&doc, "io.k8s.api.core.v1.Node")[EXT_GVK].is_array());
    assert_eq!(index_key(&GroupVersion::new("", "v1")), "api/v1");
}

#[test]
fn custom_resources_use_their_own_schema() {
    let mut crontab = kind(
        "stable.example.com",
        "CronTab",
        "crontabs",
        true,
        &["status"],
    );
    crontab.schema = Some(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"cronSpec": {"type": "string"}}}}}),
    );
    let doc = document(&GroupVersion::new("stable.example.com", "v1"), &[crontab]);
    let schema = schema(&doc, "com.example.stable.v1.CronTab");
    assert_eq!(
        schema["properties"]["spec"]["properties"]["cronSpec"]["type"],
        "string"
    );
    assert_eq!(schema[EXT_GVK][0]["group"], "stable.example.com");
    let patch = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]
        ["patch"];
    assert_eq!(
        patch["operationId"],
        "patchStableExampleComV1NamespacedCronTab"
    );
    let mut refs = Vec::new();
    document::collect_refs(&doc, &mut refs);
    assert!(
        refs.iter()
            .all(|r| doc["components"]["schemas"][r].is_object())
    );
}
