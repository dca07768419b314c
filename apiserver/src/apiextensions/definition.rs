//! The CustomResourceDefinition kind itself: defaults, validation and table
//! (`apiextensions-apiserver/pkg/apis/apiextensions/v1/defaults.go`,
//! `pkg/apis/apiextensions/validation/validation.go` `ValidateCustomResourceDefinition`,
//! `pkg/registry/customresourcedefinition/strategy.go`).
//!
//! ```text
//! metadata.name      must be <spec.names.plural>.<spec.group>
//! spec.group         a DNS subdomain with at least one dot
//! spec.names         plural/singular/kind as DNS-1035 labels (kind in mixed case); listKind defaulted
//! spec.scope         Cluster | Namespaced
//! spec.versions      unique DNS-1035 names, exactly one storage version, a structural schema each
//! ```
//!
//! Unlike Kubernetes, a list value in an error (`spec.versions: Invalid value: ...`) is printed
//! as JSON, not as Go's `%#v` of the internal structs; CEL rules, conversion webhooks and
//! `selectableFields` are not checked.

use super::printer_columns::check_path;
use crate::strategy::field::{FieldPath, Rendered};
use crate::strategy::table::column;
use crate::strategy::typed::KindRules;
use crate::strategy::{FieldError, TableColumn};
use apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionSpec,
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde_json::Value;

/// The group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The resource name of CustomResourceDefinitions.
pub const RESOURCE: &str = "customresourcedefinitions";

/// The finalizer that makes deleting a CRD delete its custom resources first
/// (`apiextensions.CustomResourceCleanupFinalizer`).
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CustomResourceDefinition rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct CustomResourceDefinitionRules;

fn rendered_json(v: &impl serde::Serialize) -> Rendered {
    Rendered(serde_json::to_string(v).unwrap_or_default())
}

fn join(errs: Vec<String>) -> Option<String> {
    (!errs.is_empty()).then(|| errs.join(","))
}

impl KindRules for CustomResourceDefinitionRules {
    type Object = CustomResourceDefinition;

    const STATUS_SUBRESOURCE: bool = true;

    /// `SetDefaults_CustomResourceDefinitionSpec`.
    fn set_defaults(&self, obj: &mut CustomResourceDefinition) {
        let names = &mut obj.spec.names;
        if names.singular.as_deref().unwrap_or_default().is_empty() {
            names.singular = Some(names.kind.to_lowercase());
        }
        if names.list_kind.as_deref().unwrap_or_default().is_empty() && !names.kind.is_empty() {
            names.list_kind = Some(format!("{}List", names.kind));
        }
        if obj.spec.conversion.is_none() {
            obj.spec.conversion = Some(CustomResourceConversion {
                strategy: "None".into(),
                webhook: None,
            });
        }
    }

    /// Unlike Kubernetes, which adds the cleanup finalizer when the CRD is first deleted
    /// (`customresourcedefinition/etcd.go`), miniplane adds it on create; the deletion then
    /// proceeds the same way.
    fn prepare_for_create(&self, obj: &mut CustomResourceDefinition) {
        let finalizers = obj.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_owned());
        }
    }

    fn validate(&self, obj: &CustomResourceDefinition) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let required = format!("{}.{}", obj.spec.names.plural, obj.spec.group);
        if !name.is_empty() && name != required {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                &name,
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
        errs.extend(validate_spec(&obj.spec, &FieldPath::new("spec")));
        errs.extend(validate_api_approval(obj));
        errs
    }

    /// `ValidateCustomResourceDefinitionUpdate`: the create rules, and the scope may not change.
    fn validate_update(
        &self,
        new: &CustomResourceDefinition,
        old: &CustomResourceDefinition,
    ) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.spec.scope != old.spec.scope {
            errs.push(FieldError::invalid(
                &FieldPath::new("spec").child("scope"),
                &new.spec.scope,
                "field is immutable",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut created = column(
            "Created At",
            "date",
            "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
            0,
        );
        created.format = "".into();
        vec![created]
    }

    /// The default table convertor's `Created At` cell: the timestamp in RFC 3339.
    fn table_row(&self, obj: &CustomResourceDefinition, _now: jiff::Timestamp) -> Vec<Value> {
        let created = obj
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        vec![Value::String(created)]
    }
}

/// The annotation a CRD in a Kubernetes-owned group must carry (`apihelpers.IsProtectedCommunityGroup`).
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Groups `k8s.io`, `kubernetes.io` and their subdomains belong to the Kubernetes project: a
/// CRD there needs the approval annotation (`validateAPIApproval`).
fn validate_api_approval(obj: &CustomResourceDefinition) -> Vec<FieldError> {
    let group = obj.spec.group.as_str();
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|p| group == *p || group.ends_with(&format!(".{p}")));
    let approved = obj
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(API_APPROVED));
    if protected && !approved {
        vec![FieldError::required(
            &FieldPath::new("metadata")
                .child("annotations")
                .key(API_APPROVED),
            &format!(
                "protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateCustomResourceDefinitionSpec` (the parts miniplane serves).
fn validate_spec(spec: &CustomResourceDefinitionSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let group = path.child("group");
    if spec.group.is_empty() {
        errs.push(FieldError::required(&group, ""));
    } else if let Some(msg) = join(is_dns1123_subdomain(&spec.group)) {
        errs.push(FieldError::invalid(&group, &spec.group, &msg));
    } else if !spec.group.contains('.') {
        errs.push(FieldError::invalid(
            &group,
            &spec.group,
            "should be a domain with at least one dot",
        ));
    }
    let scope = path.child("scope");
    if spec.scope.is_empty() {
        errs.push(FieldError::required(&scope, ""));
    } else if spec.scope != "Cluster" && spec.scope != "Namespaced" {
        errs.push(FieldError::not_supported(
            &scope,
            &spec.scope,
            &["Cluster", "Namespaced"],
        ));
    }
    errs.extend(validate_names(spec, &path.child("names")));
    let versions = path.child("versions");
    if spec.versions.is_empty() {
        errs.push(FieldError::invalid(
            &versions,
            rendered_json(&spec.versions),
            "must have exactly one version marked as storage version",
        ));
        return errs;
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut unique = true;
    for (i, version) in spec.versions.iter().enumerate() {
        let vp = versions.index(i);
        unique &= seen.insert(version.name.as_str());
        if let Some(msg) = join(is_dns1035_label(&version.name)) {
            errs.push(FieldError::invalid(&vp.child("name"), &version.name, &msg));
        }
        let schema_path = vp.child("schema").child("openAPIV3Schema");
        match version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        {
            None => errs.push(FieldError::required(&schema_path, "schemas are required")),
            Some(schema) => errs.extend(validate_structural(schema, &schema_path, true)),
        }
        for (j, col) in version
            .additional_printer_columns
            .iter()
            .flatten()
            .enumerate()
        {
            let cp = vp.child("additionalPrinterColumns").index(j);
            if col.name.is_empty() {
                errs.push(FieldError::required(&cp.child("name"), ""));
            }
            let types = ["boolean", "date", "integer", "number", "string"];
            if col.type_.is_empty() {
                errs.push(FieldError::required(
                    &cp.child("type"),
                    &format!("must be one of {}", types.join(",")),
                ));
            } else if !types.contains(&col.type_.as_str()) {
                errs.push(FieldError::not_supported(
                    &cp.child("type"),
                    &col.type_,
                    &types,
                ));
            }
            if col.json_path.is_empty() {
                errs.push(FieldError::required(&cp.child("jsonPath"), ""));
            } else if !col.json_path.starts_with('.') || check_path(&col.json_path).is_err() {
                errs.push(FieldError::invalid(
                    &cp.child("jsonPath"),
                    &col.json_path,
                    "must be a simple json path starting with .",
                ));
            }
        }
        if let Some(scale) = version.subresources.as_ref().and_then(|s| s.scale.as_ref()) {
            let sp = vp.child("subresources").child("scale");
            if !scale.spec_replicas_path.starts_with(".spec.") {
                errs.push(FieldError::invalid(
                    &sp.child("specReplicasPath"),
                    &scale.spec_replicas_path,
                    "should be a json path under .spec",
                ));
            }
            if !scale.status_replicas_path.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    &sp.child("statusReplicasPath"),
                    &scale.status_replicas_path,
                    "should be a json path under .status",
                ));
            }
            if let Some(sel) = &scale.label_selector_path
                && !(sel.starts_with(".spec.") || sel.starts_with(".status."))
            {
                errs.push(FieldError::invalid(
                    &sp.child("labelSelectorPath"),
                    sel,
                    "should be a json path under either .spec or .status",
                ));
            }
        }
    }
    if !unique {
        errs.push(FieldError::invalid(
            &versions,
            rendered_json(&spec.versions),
            "must contain unique version names",
        ));
    }
    if spec.versions.iter().filter(|v| v.storage).count() != 1 {
        errs.push(FieldError::invalid(
            &versions,
            rendered_json(&spec.versions),
            "must have exactly one version marked as storage version",
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionNames`.
fn validate_names(spec: &CustomResourceDefinitionSpec, path: &FieldPath) -> Vec<FieldError> {
    let names = &spec.names;
    let mut errs = Vec::new();
    if names.plural.is_empty() {
        errs.push(FieldError::required(&path.child("plural"), ""));
    } else if let Some(msg) = join(is_dns1035_label(&names.plural)) {
        errs.push(FieldError::invalid(
            &path.child("plural"),
            &names.plural,
            &msg,
        ));
    }
    if let Some(singular) = names.singular.as_deref().filter(|s| !s.is_empty())
        && let Some(msg) = join(is_dns1035_label(singular))
    {
        errs.push(FieldError::invalid(&path.child("singular"), singular, &msg));
    }
    if names.kind.is_empty() {
        errs.push(FieldError::required(&path.child("kind"), ""));
    } else if let Some(msg) = join(is_dns1035_label(&names.kind.to_lowercase())) {
        errs.push(FieldError::invalid(
            &path.child("kind"),
            &names.kind,
            &format!("may have mixed case, but should otherwise match: {msg}"),
        ));
    }
    if names.list_kind.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("listKind"), ""));
    }
    for (i, short) in names.short_names.iter().flatten().enumerate() {
        if let Some(msg) = join(is_dns1035_label(short)) {
            errs.push(FieldError::invalid(
                &path.child("shortNames").index(i),
                short,
                &msg,
            ));
        }
    }
    errs
}

/// The structural-schema rules miniplane checks (`structuralschema.ValidateStructural`):
/// every specified field has a `type` (unless it preserves unknown fields or is
/// int-or-string), the root is an object, arrays have `items`; and every `pattern` compiles.
fn validate_structural(schema: &JSONSchemaProps, path: &FieldPath, root: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let untyped_ok = schema.x_kubernetes_preserve_unknown_fields == Some(true)
        || schema.x_kubernetes_int_or_string == Some(true);
    match schema.type_.as_deref() {
        None | Some("") if root && !untyped_ok => errs.push(FieldError::required(
            &path.child("type"),
            "must not be empty at the root",
        )),
        None | Some("") if !untyped_ok => errs.push(FieldError::required(
            &path.child("type"),
            "must not be empty for specified object fields",
        )),
        Some(t) if root && t != "object" => errs.push(FieldError::invalid(
            &path.child("type"),
            t,
            "must be object at the root",
        )),
        Some("array") if schema.items.is_none() => errs.push(FieldError::required(
            &path.child("items"),
            "must be specified",
        )),
        _ => {}
    }
    if let Some(pattern) = &schema.pattern
        && let Err(e) = regex::Regex::new(pattern)
    {
        // Unlike Kubernetes (Go's `regexp`), the reason is the Rust regex crate's.
        errs.push(FieldError::invalid(
            &path.child("pattern"),
            pattern,
            &format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
    for (name, prop) in schema.properties.iter().flatten() {
        errs.extend(validate_structural(
            prop,
            &path.child("properties").key(name),
            false,
        ));
    }
    if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
        errs.extend(validate_structural(item, &path.child("items"), false));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::messages;
    use serde_json::json;

    fn crd(v: Value) -> CustomResourceDefinition {
        serde_json::from_value(v).expect("test CRD decodes")
    }

    #[test]
    fn a_good_crd_defaults_and_validates() {
        let mut c = crd(json!({
            "metadata": {"name": "websites.demo.miniplane.dev"},
            "spec": {"group": "demo.miniplane.dev", "scope": "Namespaced",
                "names": {"plural": "websites", "kind": "Website"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}}}}}]}
        }));
        let rules = CustomResourceDefinitionRules;
        rules.set_defaults(&mut c);
        assert_eq!(c.spec.names.singular.as_deref(), Some("website"));
        assert_eq!(c.spec.names.list_kind.as_deref(), Some("WebsiteList"));
        assert_eq!(messages(&rules.validate(&c)), Vec::<String>::new());
        rules.prepare_for_create(&mut c);
        assert_eq!(
            c.metadata.finalizers,
            Some(vec![CLEANUP_FINALIZER.to_owned()])
        );
        let mut cluster = c.clone();
        cluster.spec.scope = "Cluster".into();
        assert_eq!(
            messages(&rules.validate_update(&cluster, &c)),
            vec!["spec.scope: Invalid value: \"Cluster\": field is immutable"]
        );
        c.spec.group = "demo.k8s.io".into();
        c.metadata.name = Some("websites.demo.k8s.io".into());
        assert_eq!(
            messages(&rules.validate(&c)),
            vec![
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
    }

    #[test]
    fn bad_crds_get_kubernetes_errors() {
        let c = crd(json!({
            "metadata": {"name": "website.demo"},
            "spec": {"group": "demo", "scope": "Global",
                "names": {"plural": "websites", "kind": "Website", "listKind": "WebsiteList"},
                "versions": [{"name": "v1", "served": true, "storage": true},
                             {"name": "v2", "served": true, "storage": false,
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"properties": {}}, "name": {"type": "string", "pattern": "(["}}}}}]}
        }));
        assert_eq!(
            messages(&CustomResourceDefinitionRules.validate(&c)),
            vec![
                "metadata.name: Invalid value: \"website.demo\": must be spec.names.plural+\".\"+spec.group",
                "spec.group: Invalid value: \"demo\": should be a domain with at least one dot",
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
                "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
                "spec.versions[1].schema.openAPIV3Schema.properties[name].pattern: Invalid value: \"([\": must be a valid regular expression, but isn't: regex parse error:\n    ([\n     ^\nerror: unclosed character class",
                "spec.versions[1].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            ]
        );
    }
}
