//! The OpenAPI v3 document of one group/version, as kube-apiserver serves it at
//! `/openapi/v3/apis/<group>/<version>` (built by `staging/src/k8s.io/apiserver/pkg/endpoints/openapi`
//! and `k8s.io/kube-openapi/pkg/builder3`, served by `pkg/handler3`).
//!
//! ```text
//! {"openapi": "3.0.0", "info": {...},
//!  "paths": {"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": {
//!              "patch": {"operationId": "patchAppsV1NamespacedDeployment",
//!                        "parameters": [.. {"name": "fieldValidation", ..} ..],
//!                        "x-kubernetes-action": "patch",
//!                        "x-kubernetes-group-version-kind": {"group": "apps", ..}}, ..}, ..},
//!  "components": {"schemas": {"io.k8s.api.apps.v1.Deployment": {..}, ..}}}
//! ```
//!
//! kubectl reads it for two things: `apply`/`edit`/`create` look for the PATCH operation of the
//! kind and, if it lists a `fieldValidation` parameter, leave validation to the server;
//! `explain` finds the schema carrying `x-kubernetes-group-version-kind` and walks its
//! properties through `$ref`/`allOf`. Every map here is a `BTreeMap`, so a document is a pure
//! function of its input and its hash only changes with its content.

use super::OpenApiKind;
use super::builtin::{
    self, DELETE_OPTIONS, EXT_GVK, PATCH, SCALE, SCHEMA_REF_PREFIX, STATUS, gvk_extension,
    list_schema, schema_ref,
};
use crate::gvk::{GroupVersion, GroupVersionKind};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// Builds the document of `gv` serving `kinds`.
pub fn build(gv: &GroupVersion, kinds: &[OpenApiKind]) -> Value {
    let mut doc = Document::default();
    for kind in kinds {
        doc.add_kind(gv, kind);
    }
    for shared in [STATUS, DELETE_OPTIONS, PATCH] {
        doc.roots.insert(shared.to_owned());
    }
    let schemas = doc.schemas_closure();
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": doc.paths,
        "components": {"schemas": schemas},
    })
}

#[derive(Default)]
struct Document {
    paths: BTreeMap<String, Map<String, Value>>,
    /// Schemas taken from the built-in definitions (with everything they reference).
    roots: BTreeSet<String>,
    /// Schemas made here (custom resources and their lists).
    own: BTreeMap<String, Value>,
}

/// The parts of an operation that differ between operations.
struct Op<'a> {
    method: &'static str,
    action: &'static str,
    verb: &'static str,
    suffix: &'a str,
    gvk: &'a GroupVersionKind,
    query: &'static [&'static str],
    body: Option<Value>,
    response: &'a str,
}

impl Document {
    /// Registers the schema of `kind` (and its list) and returns its name.
    fn add_schema(&mut self, kind: &OpenApiKind) -> String {
        let gvk = &kind.gvk;
        if let (None, Some(name)) = (&kind.schema, builtin::schema_name(gvk)) {
            self.roots.insert(name.to_owned());
            self.roots.insert(format!("{name}List"));
            return name.to_owned();
        }
        let name = custom_schema_name(gvk);
        self.own
            .insert(name.clone(), custom_schema(kind.schema.as_ref(), gvk));
        let list_gvk = GroupVersionKind::new(&gvk.group, &gvk.version, format!("{}List", gvk.kind));
        self.own
            .insert(format!("{name}List"), list_schema(&name, &list_gvk));
        self.roots.insert(builtin::LIST_META.to_owned());
        self.roots.insert(OBJECT_META.to_owned());
        name
    }

    fn add_kind(&mut self, gv: &GroupVersion, kind: &OpenApiKind) {
        let gvk = &kind.gvk;
        let name = self.add_schema(kind);
        let list = format!("{name}List");
        let ops_id = operation_infix(gv, &gvk.kind, kind.namespaced);
        let base = gv.url_prefix();
        let scope = if kind.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let collection = format!("{base}{scope}/{}", kind.plural);
        let item = format!("{collection}/{{name}}");
        let scope_params: &[&str] = if kind.namespaced { &["namespace"] } else { &[] };

        let collection_ops = [
            Op::new("get", "list", "list", gvk, LIST_QUERY, &list),
            Op {
                body: Some(schema_ref(&name)),
                ..Op::new("post", "post", "create", gvk, WRITE_QUERY, &name)
            },
            Op {
                body: Some(schema_ref(DELETE_OPTIONS)),
                ..Op::new(
                    "delete",
                    "deletecollection",
                    "deleteCollection",
                    gvk,
                    DELETE_COLLECTION_QUERY,
                    STATUS,
                )
            },
        ];
        self.path(&collection, scope_params, &collection_ops, &ops_id);
        let item_params: Vec<&str> = ["name"].iter().chain(scope_params).copied().collect();
        self.path(&item, &item_params, &item_ops(gvk, &name, ""), &ops_id);
        if kind.namespaced {
            let all = format!("{base}/{}", kind.plural);
            let all_id = format!("{}ForAllNamespaces", operation_infix(gv, &gvk.kind, false));
            let list_op = Op::new("get", "list", "list", gvk, LIST_QUERY, &list);
            self.path(&all, &[], &[list_op], &all_id);
        }
        for sub in &kind.subresources {
            let path = format!("{item}/{sub}");
            match sub.as_str() {
                "status" => self.path(
                    &path,
                    &item_params,
                    &item_ops(gvk, &name, "Status"),
                    &ops_id,
                ),
                "scale" => {
                    self.roots.insert(SCALE.to_owned());
                    let scale = GroupVersionKind::new("autoscaling", "v1", "Scale");
                    self.path(
                        &path,
                        &item_params,
                        &item_ops(&scale, SCALE, "Scale"),
                        &ops_id,
                    );
                }
                "binding" => {
                    let binding = GroupVersionKind::new("", "v1", "Binding");
                    if let Some(binding_schema) = builtin::schema_name(&binding) {
                        self.roots.insert(binding_schema.to_owned());
                        let create = Op {
                            suffix: "Binding",
                            body: Some(schema_ref(binding_schema)),
                            ..Op::new(
                                "post",
                                "post",
                                "create",
                                &binding,
                                WRITE_QUERY,
                                binding_schema,
                            )
                        };
                        self.path(&path, &item_params, &[create], &ops_id);
                    }
                }
                // Other subresources (log, exec, eviction, ...) are not described.
                _ => {}
            }
        }
    }

    /// Adds the operations of one path, with its path parameters.
    fn path(&mut self, path: &str, path_params: &[&str], ops: &[Op<'_>], ops_id: &str) {
        let entry = self.paths.entry(path.to_owned()).or_default();
        let mut params: Vec<Value> = path_params.iter().map(|p| path_parameter(p)).collect();
        params.push(query_parameter("pretty"));
        entry.insert("parameters".into(), Value::Array(params));
        for op in ops {
            entry.insert(op.method.into(), operation(op, ops_id));
        }
    }

    /// The schemas the document needs: its own plus the built-in ones reachable from its roots.
    fn schemas_closure(&self) -> BTreeMap<String, Value> {
        let definitions = &builtin::definitions().schemas;
        let mut out: BTreeMap<String, Value> = self.own.clone();
        let mut pending: Vec<String> = self.roots.iter().cloned().collect();
        for schema in self.own.values() {
            collect_refs(schema, &mut pending);
        }
        while let Some(name) = pending.pop() {
            if out.contains_key(&name) {
                continue;
            }
            if let Some(schema) = definitions.get(&name) {
                collect_refs(schema, &mut pending);
                out.insert(name, schema.clone());
            }
        }
        out
    }
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// get/put/patch/delete of an object (or of its `suffix` subresource, without delete).
fn item_ops<'a>(gvk: &'a GroupVersionKind, schema: &'a str, suffix: &'a str) -> Vec<Op<'a>> {
    let mut ops = vec![
        Op {
            suffix,
            ..Op::new("get", "get", "read", gvk, &[], schema)
        },
        Op {
            suffix,
            body: Some(schema_ref(schema)),
            ..Op::new("put", "put", "replace", gvk, WRITE_QUERY, schema)
        },
        Op {
            suffix,
            ..Op::new("patch", "patch", "patch", gvk, PATCH_QUERY, schema)
        },
    ];
    if suffix.is_empty() {
        ops.push(Op {
            body: Some(schema_ref(DELETE_OPTIONS)),
            ..Op::new("delete", "delete", "delete", gvk, DELETE_QUERY, STATUS)
        });
    }
    ops
}

impl<'a> Op<'a> {
    /// An operation on the object itself without a request body.
    fn new(
        method: &'static str,
        action: &'static str,
        verb: &'static str,
        gvk: &'a GroupVersionKind,
        query: &'static [&'static str],
        response: &'a str,
    ) -> Self {
        Op {
            method,
            action,
            verb,
            suffix: "",
            gvk,
            query,
            body: None,
            response,
        }
    }
}

fn operation(op: &Op<'_>, ops_id: &str) -> Value {
    let mut operation = Map::new();
    operation.insert(
        "operationId".into(),
        json!(format!("{}{ops_id}{}", op.verb, op.suffix)),
    );
    operation.insert(
        "parameters".into(),
        op.query.iter().map(|q| query_parameter(q)).collect(),
    );
    let request = match (op.method, &op.body) {
        ("patch", _) => Some(json!({
            "content": PATCH_CONTENT_TYPES.iter().map(|t| (t.to_string(), json!({"schema": schema_ref(PATCH)}))).collect::<Map<_, _>>(),
            "required": true,
        })),
        (_, Some(schema)) => Some(
            json!({"content": {"application/json": {"schema": schema}}, "required": op.method != "delete"}),
        ),
        _ => None,
    };
    if let Some(request) = request {
        operation.insert("requestBody".into(), request);
    }
    let ok = json!({"description": "OK", "content": {"application/json": {"schema": schema_ref(op.response)}}});
    let mut responses = Map::from_iter([
        ("200".to_owned(), ok.clone()),
        ("401".to_owned(), json!({"description": "Unauthorized"})),
    ]);
    if matches!(op.action, "post" | "patch") {
        responses.insert(
            "201".into(),
            json!({"description": "Created", "content": ok["content"].clone()}),
        );
    }
    operation.insert("responses".into(), Value::Object(responses));
    operation.insert("x-kubernetes-action".into(), json!(op.action));
    let gvk = gvk_extension(op.gvk);
    operation.insert(EXT_GVK.into(), gvk[0].clone());
    Value::Object(operation)
}

const PATCH_CONTENT_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

const LIST_QUERY: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_QUERY: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_COLLECTION_QUERY: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];

/// Query parameters: name, schema type, description.
const QUERY_PARAMETERS: &[(&str, &str, &str)] = &[
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server.",
    ),
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    ),
    (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.",
    ),
    (
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
    ),
];

fn query_parameter(name: &str) -> Value {
    let (ty, description) = QUERY_PARAMETERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, t, d)| (*t, *d))
        .unwrap_or(("string", ""));
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
}

fn path_parameter(name: &str) -> Value {
    let description = match name {
        "namespace" => "object name and auth scope, such as for teams and projects",
        _ => "name of the object",
    };
    json!({"name": name, "in": "path", "description": description, "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

/// `AppsV1NamespacedDeployment`: the middle of Kubernetes' operation ids.
fn operation_infix(gv: &GroupVersion, kind: &str, namespaced: bool) -> String {
    let group = if gv.group.is_empty() {
        "core"
    } else {
        gv.group.trim_end_matches(".k8s.io")
    };
    let group: String = group.split(['.', '-']).map(capitalize).collect();
    let scope = if namespaced { "Namespaced" } else { "" };
    format!("{group}{}{scope}{kind}", capitalize(&gv.version))
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Kubernetes names custom resource schemas by the reversed group: `com.example.stable.v1.CronTab`.
pub fn custom_schema_name(gvk: &GroupVersionKind) -> String {
    let group: Vec<&str> = gvk.group.split('.').rev().collect();
    format!("{}.{}.{}", group.join("."), gvk.version, gvk.kind)
}

/// A custom resource's schema (or, without one, an open object) with the GVK extension and the
/// standard `apiVersion`/`kind`/`metadata` properties the apiserver adds.
fn custom_schema(schema: Option<&Value>, gvk: &GroupVersionKind) -> Value {
    let mut schema = match schema {
        Some(Value::Object(s)) => s.clone(),
        _ => Map::from_iter([
            ("type".to_owned(), json!("object")),
            (
                "x-kubernetes-preserve-unknown-fields".to_owned(),
                json!(true),
            ),
        ]),
    };
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        // The descriptions Kubernetes' CRD OpenAPI builder gives these (`builder.go`
        // `addTypeMetaProperties`, `generateBuilder`), so `kubectl explain` prints them.
        props.entry("apiVersion").or_insert(json!({
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        }));
        props.entry("kind").or_insert(json!({
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        }));
        props.insert(
            "metadata".into(),
            json!({
                "allOf": [schema_ref(OBJECT_META)],
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            }),
        );
    }
    schema.insert(EXT_GVK.into(), gvk_extension(gvk));
    Value::Object(schema)
}

/// Pushes the names of all schemas `value` references.
pub fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(SCHEMA_REF_PREFIX))
            {
                out.push(name.to_owned());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
