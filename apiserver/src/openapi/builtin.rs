//! The schemas of the built-in kinds, generated once from `k8s-openapi`'s `schemars` support
//! (what kube-apiserver gets from `pkg/generated/openapi/zz_generated.openapi.go`).
//!
//! One `schemars` generator with OpenAPI 3.0 settings walks every built-in kind, so shared types
//! (`ObjectMeta`, `PodSpec`, ...) are generated once and referenced as
//! `#/components/schemas/<canonical name>`, the names Kubernetes uses
//! (`io.k8s.api.apps.v1.Deployment`). Then the Kubernetes extensions are added:
//! `x-kubernetes-group-version-kind` on each kind and the patch/list tags of
//! [`crate::patch::merge_keys`]. The result is shared by the OpenAPI documents and by
//! strategic merge patch and server-side apply, which read the tags from it.

use crate::gvk::GroupVersionKind;
use k8s_openapi::api::{
    apps::v1 as apps, autoscaling::v1 as autoscaling, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
    discovery::v1 as discovery, events::v1 as events, networking::v1 as networking,
    policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// `x-kubernetes-group-version-kind`: the kinds a schema (or an operation) is about.
pub const EXT_GVK: &str = "x-kubernetes-group-version-kind";
/// Where OpenAPI 3.0 keeps named schemas; every `$ref` points below it.
pub const SCHEMA_REF_PREFIX: &str = "#/components/schemas/";

/// Canonical names of the `meta.k8s.io/v1` types the operations of every document use.
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// See [`STATUS`].
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// See [`STATUS`].
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// See [`STATUS`].
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// The `/scale` subresource's kind.
pub const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// All built-in schemas, by canonical name, plus which name each kind's root schema has.
#[derive(Debug)]
pub struct Definitions {
    /// `components.schemas` of every built-in type (OpenAPI 3.0, with Kubernetes extensions).
    pub schemas: Map<String, Value>,
    /// The root schema name of each built-in kind.
    pub kinds: BTreeMap<GroupVersionKind, String>,
}

/// Registers kind `K` with the generator and returns its GVK and schema name.
fn register<K: k8s_openapi::Resource + JsonSchema>(
    generator: &mut SchemaGenerator,
) -> (GroupVersionKind, String) {
    generator.subschema_for::<K>();
    (GroupVersionKind::of::<K>(), K::schema_name().into_owned())
}

macro_rules! kinds {
    ($generator:ident: $($ty:ty),* $(,)?) => {
        vec![$(register::<$ty>(&mut $generator)),*]
    };
}

fn generate() -> Definitions {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let kinds = kinds!(generator:
        core::Binding, core::ComponentStatus, core::ConfigMap, core::Endpoints, core::Event, core::LimitRange,
        core::Namespace, core::Node, core::PersistentVolume, core::PersistentVolumeClaim,
        core::Pod, core::PodTemplate, core::ReplicationController, core::ResourceQuota,
        core::Secret, core::Service, core::ServiceAccount,
        apps::ControllerRevision, apps::DaemonSet, apps::Deployment, apps::ReplicaSet,
        apps::StatefulSet,
        autoscaling::Scale, autoscaling::HorizontalPodAutoscaler,
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        batch::CronJob, batch::Job,
        certificates::CertificateSigningRequest,
        coordination::Lease,
        discovery::EndpointSlice,
        events::Event,
        networking::Ingress, networking::IngressClass, networking::NetworkPolicy,
        policy::PodDisruptionBudget,
        rbac::ClusterRole, rbac::ClusterRoleBinding, rbac::Role, rbac::RoleBinding,
        scheduling::PriorityClass,
        storage::StorageClass,
        apiextensions::CustomResourceDefinition,
    );
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::Patch>();
    generator.subschema_for::<meta::ListMeta>();
    let mut schemas = generator.take_definitions(true);
    crate::patch::merge_keys::annotate(&mut schemas);
    let mut by_gvk = BTreeMap::new();
    for (gvk, name) in kinds {
        if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
            schema.insert(EXT_GVK.to_owned(), gvk_extension(&gvk));
            optional_metadata(schema);
        }
        let list_gvk = GroupVersionKind::new(&gvk.group, &gvk.version, format!("{}List", gvk.kind));
        schemas.insert(format!("{name}List"), list_schema(&name, &list_gvk));
        by_gvk.insert(gvk, name);
    }
    Definitions {
        schemas,
        kinds: by_gvk,
    }
}

/// k8s-openapi lists `metadata` as required (it is not an `Option` in Rust); Kubernetes does
/// not, and `kubectl explain` would print `-required-` for it.
fn optional_metadata(schema: &mut Map<String, Value>) {
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| r != "metadata");
        if required.is_empty() {
            schema.remove("required");
        }
    }
}

/// The built-in schemas, generated on first use (a few milliseconds) and kept for the process.
pub fn definitions() -> &'static Definitions {
    static DEFINITIONS: OnceLock<Definitions> = OnceLock::new();
    DEFINITIONS.get_or_init(generate)
}

/// The canonical schema name of a built-in kind (`io.k8s.api.apps.v1.Deployment`), or None for
/// kinds miniplane has no built-in schema for (custom resources).
pub fn schema_name(gvk: &GroupVersionKind) -> Option<&'static str> {
    definitions().kinds.get(gvk).map(String::as_str)
}

/// The root schema of a built-in kind.
pub fn kind_schema(gvk: &GroupVersionKind) -> Option<&'static Value> {
    definitions().schemas.get(schema_name(gvk)?)
}

/// The `x-kubernetes-group-version-kind` value for one kind (a list of one).
pub fn gvk_extension(gvk: &GroupVersionKind) -> Value {
    json!([{ "group": gvk.group, "kind": gvk.kind, "version": gvk.version }])
}

/// A `$ref` to a named schema.
pub fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{SCHEMA_REF_PREFIX}{name}") })
}

/// The `<Kind>List` schema (k8s-openapi's `List<T>` has no schema of its own).
pub fn list_schema(item_schema: &str, list_gvk: &GroupVersionKind) -> Value {
    let kind = list_gvk.kind.trim_end_matches("List");
    json!({
        "description": format!("{} is a list of {kind} objects.", list_gvk.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string"
            },
            "items": {
                "description": format!("List of {kind} objects."),
                "type": "array",
                "items": schema_ref(item_schema)
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string"
            },
            "metadata": {
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "allOf": [schema_ref(LIST_META)]
            }
        },
        EXT_GVK: gvk_extension(list_gvk),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_schema_has_gvk_and_descriptions() {
        let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
        assert_eq!(schema_name(&gvk), Some("io.k8s.api.apps.v1.Deployment"));
        let schema = kind_schema(&gvk).expect("Deployment is built in");
        assert_eq!(schema[EXT_GVK][0]["kind"], "Deployment");
        assert!(
            schema["description"]
                .as_str()
                .is_some_and(|d| d.contains("declarative updates"))
        );
        assert!(!definitions().schemas.contains_key("$defs"));
        let required = schema.get("required").and_then(Value::as_array);
        assert!(!required.is_some_and(|r| r.contains(&json!("metadata"))));
    }
}
