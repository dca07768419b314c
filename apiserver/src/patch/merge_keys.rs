//! The patch strategies, merge keys and list types of the built-in types: the Go struct tags
//! `patchStrategy`, `patchMergeKey`, `+listType`, `+listMapKey`, `+mapType` and `+structType`
//! of `k8s.io/api/**/types.go` (Kubernetes 1.33), written down once as data.
//!
//! k8s-openapi's schemas do not carry these tags, so [`annotate`] writes them into the schema
//! definitions as the OpenAPI extensions Kubernetes publishes:
//!
//! ```text
//! PodSpec.containers  ──►  "x-kubernetes-patch-strategy": "merge",
//!                          "x-kubernetes-patch-merge-key": "name",
//!                          "x-kubernetes-list-type": "map",
//!                          "x-kubernetes-list-map-keys": ["name"]
//! ```
//!
//! Everything downstream reads the extensions, never this table: the OpenAPI documents kubectl
//! downloads, strategic merge patch (`patchStrategy`/`patchMergeKey`) and server-side apply
//! (`listType`/`listMapKey`) — the same seam a custom resource's schema will use.

use serde_json::{Map, Value, json};

/// `x-kubernetes-patch-strategy`: `merge`, `retainKeys` or `merge,retainKeys`.
pub const EXT_PATCH_STRATEGY: &str = "x-kubernetes-patch-strategy";
/// `x-kubernetes-patch-merge-key`: the field identifying an element of a merged list.
pub const EXT_PATCH_MERGE_KEY: &str = "x-kubernetes-patch-merge-key";
/// `x-kubernetes-list-type`: `atomic`, `set` or `map` (server-side apply).
pub const EXT_LIST_TYPE: &str = "x-kubernetes-list-type";
/// `x-kubernetes-list-map-keys`: the key fields of a `map` list.
pub const EXT_LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";
/// `x-kubernetes-map-type`: `atomic` or `granular`, for maps and structs.
pub const EXT_MAP_TYPE: &str = "x-kubernetes-map-type";

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";
const CORE: &str = "io.k8s.api.core.v1.";
const APPS: &str = "io.k8s.api.apps.v1.";
const BATCH: &str = "io.k8s.api.batch.v1.";
const CRD: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";
const DISCOVERY: &str = "io.k8s.api.discovery.v1.";
const RBAC: &str = "io.k8s.api.rbac.v1.";

/// The tags of one field of one type.
#[derive(Debug, Clone, Copy)]
struct FieldRule {
    /// Package prefix of the type, e.g. [`CORE`].
    package: &'static str,
    /// The type's short name, e.g. `PodSpec`.
    ty: &'static str,
    /// The JSON field name.
    field: &'static str,
    /// `patchStrategy`, or empty.
    patch_strategy: &'static str,
    /// `patchMergeKey`, or empty.
    merge_key: &'static str,
    /// `+listType`, or empty (server-side apply then derives it from the patch strategy).
    list_type: &'static str,
    /// `+listMapKey`s of a `map` list.
    list_map_keys: &'static [&'static str],
    /// `+mapType` of a map field, or empty.
    map_type: &'static str,
}

const fn rule(package: &'static str, ty: &'static str, field: &'static str) -> FieldRule {
    FieldRule {
        package,
        ty,
        field,
        patch_strategy: "",
        merge_key: "",
        list_type: "",
        list_map_keys: &[],
        map_type: "",
    }
}

/// A list merged by `key` in SMP and a `map` list keyed by `keys` in SSA.
const fn merged_by(
    package: &'static str,
    ty: &'static str,
    field: &'static str,
    key: &'static str,
    keys: &'static [&'static str],
) -> FieldRule {
    FieldRule {
        patch_strategy: "merge",
        merge_key: key,
        list_type: "map",
        list_map_keys: keys,
        ..rule(package, ty, field)
    }
}

/// A list SMP merges by `key` but SSA treats as atomic (e.g. `JobStatus.conditions`).
const fn merged_atomic(
    package: &'static str,
    ty: &'static str,
    field: &'static str,
    key: &'static str,
) -> FieldRule {
    FieldRule {
        patch_strategy: "merge",
        merge_key: key,
        list_type: "atomic",
        ..rule(package, ty, field)
    }
}

/// A list of primitives merged as a set (`finalizers`).
const fn set(package: &'static str, ty: &'static str, field: &'static str) -> FieldRule {
    FieldRule {
        patch_strategy: "merge",
        list_type: "set",
        ..rule(package, ty, field)
    }
}

/// A list replaced as a whole.
const fn atomic(package: &'static str, ty: &'static str, field: &'static str) -> FieldRule {
    FieldRule {
        list_type: "atomic",
        ..rule(package, ty, field)
    }
}

/// A map (e.g. `nodeSelector`) replaced as a whole by server-side apply.
const fn atomic_map(package: &'static str, ty: &'static str, field: &'static str) -> FieldRule {
    FieldRule {
        map_type: "atomic",
        ..rule(package, ty, field)
    }
}

/// Container-like types (`Container`, `EphemeralContainer`) share their list tags.
macro_rules! container_rules {
    ($ty:literal) => {
        [
            merged_by(
                CORE,
                $ty,
                "ports",
                "containerPort",
                &["containerPort", "protocol"],
            ),
            merged_by(CORE, $ty, "env", "name", &["name"]),
            merged_by(CORE, $ty, "volumeMounts", "mountPath", &["mountPath"]),
            merged_by(CORE, $ty, "volumeDevices", "devicePath", &["devicePath"]),
            atomic(CORE, $ty, "envFrom"),
            atomic(CORE, $ty, "args"),
            atomic(CORE, $ty, "command"),
            atomic(CORE, $ty, "resizePolicy"),
        ]
    };
}

const CONTAINER_RULES: [FieldRule; 8] = container_rules!("Container");
const EPHEMERAL_CONTAINER_RULES: [FieldRule; 8] = container_rules!("EphemeralContainer");

/// The field rules of the built-in types.
const FIELD_RULES: &[FieldRule] = &[
    // ObjectMeta
    set(META, "ObjectMeta", "finalizers"),
    merged_by(META, "ObjectMeta", "ownerReferences", "uid", &["uid"]),
    atomic(META, "ObjectMeta", "managedFields"),
    atomic(META, "LabelSelector", "matchExpressions"),
    // PodSpec
    FieldRule {
        patch_strategy: "merge,retainKeys",
        ..merged_by(CORE, "PodSpec", "volumes", "name", &["name"])
    },
    merged_by(CORE, "PodSpec", "initContainers", "name", &["name"]),
    merged_by(CORE, "PodSpec", "containers", "name", &["name"]),
    merged_by(CORE, "PodSpec", "ephemeralContainers", "name", &["name"]),
    merged_by(CORE, "PodSpec", "imagePullSecrets", "name", &["name"]),
    merged_by(CORE, "PodSpec", "hostAliases", "ip", &["ip"]),
    merged_by(
        CORE,
        "PodSpec",
        "topologySpreadConstraints",
        "topologyKey",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    FieldRule {
        patch_strategy: "merge,retainKeys",
        ..merged_by(CORE, "PodSpec", "resourceClaims", "name", &["name"])
    },
    merged_by(CORE, "PodSpec", "schedulingGates", "name", &["name"]),
    atomic(CORE, "PodSpec", "tolerations"),
    atomic(CORE, "PodSpec", "readinessGates"),
    atomic_map(CORE, "PodSpec", "nodeSelector"),
    // PodStatus
    merged_by(CORE, "PodStatus", "conditions", "type", &["type"]),
    merged_by(CORE, "PodStatus", "podIPs", "ip", &["ip"]),
    merged_by(CORE, "PodStatus", "hostIPs", "ip", &["ip"]),
    atomic(CORE, "PodStatus", "containerStatuses"),
    atomic(CORE, "PodStatus", "initContainerStatuses"),
    atomic(CORE, "PodStatus", "ephemeralContainerStatuses"),
    merged_by(
        CORE,
        "PodStatus",
        "resourceClaimStatuses",
        "name",
        &["name"],
    ),
    // Service
    merged_by(CORE, "ServiceSpec", "ports", "port", &["port", "protocol"]),
    atomic(CORE, "ServiceSpec", "clusterIPs"),
    atomic(CORE, "ServiceSpec", "externalIPs"),
    atomic(CORE, "ServiceSpec", "ipFamilies"),
    atomic_map(CORE, "ServiceSpec", "selector"),
    merged_by(CORE, "ServiceStatus", "conditions", "type", &["type"]),
    // Node, Namespace, PVC, ServiceAccount, ReplicationController
    set(CORE, "NodeSpec", "podCIDRs"),
    atomic(CORE, "NodeSpec", "taints"),
    merged_by(CORE, "NodeStatus", "conditions", "type", &["type"]),
    merged_by(CORE, "NodeStatus", "addresses", "type", &["type"]),
    atomic(CORE, "NodeStatus", "images"),
    atomic(CORE, "NodeStatus", "volumesAttached"),
    merged_by(CORE, "NamespaceStatus", "conditions", "type", &["type"]),
    merged_by(
        CORE,
        "PersistentVolumeClaimStatus",
        "conditions",
        "type",
        &["type"],
    ),
    merged_by(CORE, "ServiceAccount", "secrets", "name", &["name"]),
    merged_by(
        CORE,
        "ReplicationControllerStatus",
        "conditions",
        "type",
        &["type"],
    ),
    // apps/v1
    FieldRule {
        patch_strategy: "retainKeys",
        ..rule(APPS, "DeploymentSpec", "strategy")
    },
    merged_by(APPS, "DeploymentStatus", "conditions", "type", &["type"]),
    merged_by(APPS, "ReplicaSetStatus", "conditions", "type", &["type"]),
    merged_by(APPS, "StatefulSetStatus", "conditions", "type", &["type"]),
    merged_by(APPS, "DaemonSetStatus", "conditions", "type", &["type"]),
    // batch/v1
    merged_atomic(BATCH, "JobStatus", "conditions", "type"),
    atomic(BATCH, "CronJobStatus", "active"),
    // discovery.k8s.io/v1
    atomic(DISCOVERY, "EndpointSlice", "endpoints"),
    atomic(DISCOVERY, "EndpointSlice", "ports"),
    // rbac.authorization.k8s.io/v1
    atomic(RBAC, "PolicyRule", "verbs"),
    atomic(RBAC, "PolicyRule", "apiGroups"),
    atomic(RBAC, "PolicyRule", "resources"),
    atomic(RBAC, "PolicyRule", "resourceNames"),
    atomic(RBAC, "PolicyRule", "nonResourceURLs"),
    atomic(RBAC, "Role", "rules"),
    atomic(RBAC, "ClusterRole", "rules"),
    atomic(RBAC, "AggregationRule", "clusterRoleSelectors"),
    atomic(RBAC, "RoleBinding", "subjects"),
    atomic(RBAC, "ClusterRoleBinding", "subjects"),
    // apiextensions.k8s.io/v1
    FieldRule {
        list_type: "map",
        list_map_keys: &["type"],
        ..rule(CRD, "CustomResourceDefinitionStatus", "conditions")
    },
];

/// Types tagged `+structType=atomic`: server-side apply owns them as one leaf.
const ATOMIC_STRUCTS: &[(&str, &str)] = &[
    (META, "LabelSelector"),
    (CORE, "LocalObjectReference"),
    (CORE, "ObjectReference"),
    (CORE, "TypedLocalObjectReference"),
    (CORE, "NodeSelector"),
    (CORE, "ConfigMapKeySelector"),
    (CORE, "SecretKeySelector"),
    (CORE, "ObjectFieldSelector"),
    (CORE, "ResourceFieldSelector"),
    (RBAC, "Subject"),
    (RBAC, "RoleRef"),
];

/// Defaults of list-map key fields (`+default`), which server-side apply uses when an element
/// leaves a key out (`protocol` of a port).
const KEY_DEFAULTS: &[(&str, &str, &str, &str)] = &[
    (CORE, "ContainerPort", "protocol", "TCP"),
    (CORE, "ServicePort", "protocol", "TCP"),
];

/// Writes the table's extensions into `definitions` (keyed by canonical type name, as in
/// `components.schemas`). Types absent from `definitions` are skipped.
pub fn annotate(definitions: &mut Map<String, Value>) {
    let rules = FIELD_RULES
        .iter()
        .chain(CONTAINER_RULES.iter())
        .chain(EPHEMERAL_CONTAINER_RULES.iter());
    for r in rules {
        let Some(property) = property_mut(definitions, r.package, r.ty, r.field) else {
            continue;
        };
        let ext = [
            (EXT_PATCH_STRATEGY, r.patch_strategy),
            (EXT_PATCH_MERGE_KEY, r.merge_key),
            (EXT_LIST_TYPE, r.list_type),
            (EXT_MAP_TYPE, r.map_type),
        ];
        for (name, value) in ext {
            if !value.is_empty() {
                property.insert(name.to_owned(), json!(value));
            }
        }
        if !r.list_map_keys.is_empty() {
            property.insert(EXT_LIST_MAP_KEYS.to_owned(), json!(r.list_map_keys));
        }
    }
    for (package, ty) in ATOMIC_STRUCTS {
        if let Some(Value::Object(schema)) = definitions.get_mut(&format!("{package}{ty}")) {
            schema.insert(EXT_MAP_TYPE.to_owned(), json!("atomic"));
        }
    }
    for (package, ty, field, default) in KEY_DEFAULTS {
        if let Some(property) = property_mut(definitions, package, ty, field) {
            property.insert("default".to_owned(), json!(default));
        }
    }
}

fn property_mut<'a>(
    definitions: &'a mut Map<String, Value>,
    package: &str,
    ty: &str,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    definitions
        .get_mut(&format!("{package}{ty}"))?
        .get_mut("properties")?
        .get_mut(field)?
        .as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_a_field_of_a_known_type() {
        let defs = &crate::openapi::builtin::definitions().schemas;
        let rules = FIELD_RULES
            .iter()
            .chain(CONTAINER_RULES.iter())
            .chain(EPHEMERAL_CONTAINER_RULES.iter());
        for r in rules {
            let name = format!("{}{}", r.package, r.ty);
            let props = defs.get(&name).and_then(|d| d.get("properties"));
            assert!(
                props.and_then(|p| p.get(r.field)).is_some(),
                "{name}.{} is not in the generated schemas",
                r.field
            );
        }
        for (package, ty) in ATOMIC_STRUCTS {
            assert!(
                defs.contains_key(&format!("{package}{ty}")),
                "{package}{ty}"
            );
        }
    }
}
