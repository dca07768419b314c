//! A cursor over an OpenAPI schema that answers what patching needs to know about a field:
//! its patch strategy and merge key (strategic merge patch) and its list/map type
//! (server-side apply). It plays the part of `strategicpatch.LookupPatchMeta`
//! (`staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/meta.go`) and of
//! structured-merge-diff's `schema.Schema` built by kube-openapi's `pkg/schemaconv`.
//!
//! The answers come only from the extensions in the schema (`x-kubernetes-patch-strategy`,
//! `x-kubernetes-list-type`, ...), never from type names, so a custom resource's schema can be
//! walked by the same code: build a [`Schema`] over its definitions and root.

use super::merge_keys::{
    EXT_LIST_MAP_KEYS, EXT_LIST_TYPE, EXT_MAP_TYPE, EXT_PATCH_MERGE_KEY, EXT_PATCH_STRATEGY,
};
use crate::gvk::GroupVersionKind;
use crate::openapi::builtin::{self, SCHEMA_REF_PREFIX};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// How server-side apply treats a list (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; owned as one field.
    Atomic,
    /// A set of scalars; each value owned separately (`v:"value"`).
    Set,
    /// Elements identified by key fields (`k:{"name":"nginx"}`), merged element by element.
    Map(Vec<String>),
}

/// A position in a schema: the node at hand plus the definitions its `$ref`s point into.
#[derive(Debug, Clone, Copy)]
pub struct Schema<'a> {
    definitions: &'a Map<String, Value>,
    node: &'a Value,
    /// `node` after following its references, resolved once when the cursor moves there.
    target: &'a Value,
}

impl<'a> Schema<'a> {
    /// A cursor at `node`, resolving references against `definitions` (keyed by name as in
    /// `components.schemas`).
    pub fn new(definitions: &'a Map<String, Value>, node: &'a Value) -> Self {
        Schema {
            definitions,
            node,
            target: resolve(definitions, node),
        }
    }

    /// The root schema of a built-in kind, or None for kinds without one.
    pub fn builtin(gvk: &GroupVersionKind) -> Option<Schema<'static>> {
        let definitions = &builtin::definitions().schemas;
        builtin::kind_schema(gvk).map(|node| Schema::new(definitions, node))
    }

    /// The schema this node stands for after following `$ref` and a single-`allOf` wrapper.
    fn target(self) -> &'a Value {
        self.target
    }

    fn at(self, node: &'a Value) -> Self {
        Schema::new(self.definitions, node)
    }

    /// The schema of member `name` of an object: a declared property, or the value schema of a
    /// map (`additionalProperties`). None when the schema does not know the member.
    pub fn field(self, name: &str) -> Option<Self> {
        let target = self.target();
        if let Some(property) = target.get("properties").and_then(|p| p.get(name)) {
            return Some(self.at(property));
        }
        match target.get("additionalProperties") {
            Some(v @ Value::Object(_)) => Some(self.at(v)),
            _ => None,
        }
    }

    /// Whether `name` is a declared property (a struct field) rather than an entry of a map.
    pub fn declares(self, name: &str) -> bool {
        self.target()
            .get("properties")
            .is_some_and(|p| p.get(name).is_some())
    }

    /// The element schema of a list.
    pub fn items(self) -> Option<Self> {
        self.target().get("items").map(|i| self.at(i))
    }

    /// An extension on the field itself, else on the type it refers to.
    fn extension(self, name: &str) -> Option<&'a Value> {
        self.node.get(name).or_else(|| self.target().get(name))
    }

    /// `x-kubernetes-patch-strategy` contains `merge`: lists merge element-wise.
    pub fn merges(self) -> bool {
        self.strategies().any(|s| s == "merge")
    }

    #[cfg(test)]
    /// `x-kubernetes-patch-strategy` contains `retainKeys`.
    pub fn retains_keys(self) -> bool {
        self.strategies().any(|s| s == "retainKeys")
    }

    /// `x-kubernetes-patch-strategy` is `replace`: maps are replaced, not merged.
    pub fn replaces(self) -> bool {
        self.strategies().any(|s| s == "replace")
    }

    fn strategies(self) -> impl Iterator<Item = &'a str> {
        self.extension(EXT_PATCH_STRATEGY)
            .and_then(Value::as_str)
            .unwrap_or("")
            .split(',')
    }

    /// `x-kubernetes-patch-merge-key`, e.g. `name` for containers.
    pub fn merge_key(self) -> Option<&'a str> {
        self.extension(EXT_PATCH_MERGE_KEY).and_then(Value::as_str)
    }

    /// The list type server-side apply uses: `x-kubernetes-list-type` if present, else derived
    /// from the patch strategy as kube-openapi's `schemaconv` does (merge with a key is a map
    /// list, merge without a key a set), else atomic.
    pub fn list_type(self) -> ListType {
        match self.extension(EXT_LIST_TYPE).and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => {
                let keys = self
                    .extension(EXT_LIST_MAP_KEYS)
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                ListType::Map(keys)
            }
            Some(_) => ListType::Atomic,
            None if self.merges() => match self.merge_key() {
                Some(key) => ListType::Map(vec![key.to_owned()]),
                None => ListType::Set,
            },
            None => ListType::Atomic,
        }
    }

    /// Whether a list is atomic: [`Schema::list_type`] is [`ListType::Atomic`] (without building
    /// the key list).
    pub fn list_is_atomic(self) -> bool {
        match self.extension(EXT_LIST_TYPE).and_then(Value::as_str) {
            Some("set" | "map") => false,
            Some(_) => true,
            None => !self.merges(),
        }
    }

    /// Whether a map or struct is owned and replaced as a whole (`x-kubernetes-map-type:
    /// atomic`).
    pub fn is_atomic(self) -> bool {
        self.extension(EXT_MAP_TYPE).and_then(Value::as_str) == Some("atomic")
    }

    /// The `default` of member `name`, used for list-map keys left out of an element.
    pub fn default_of(self, name: &str) -> Option<&'a Value> {
        self.field(name)?.node.get("default")
    }
}

/// The definition `name` of `definitions`; the built-in ones through a hashed index, since a
/// `$ref` is followed at nearly every step of a walk and the ordered map's lookups compare
/// long names that share their `io.k8s.api.` prefixes.
fn definition<'a>(definitions: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    static BUILTIN: OnceLock<HashMap<&'static str, &'static Value>> = OnceLock::new();
    let builtin = &builtin::definitions().schemas;
    if std::ptr::eq(definitions, builtin) {
        let index = BUILTIN.get_or_init(|| builtin.iter().map(|(k, v)| (k.as_str(), v)).collect());
        index.get(name).copied()
    } else {
        definitions.get(name)
    }
}

/// What `node` stands for after following `$ref` and a single-`allOf` wrapper into
/// `definitions`.
fn resolve<'a>(definitions: &'a Map<String, Value>, mut node: &'a Value) -> &'a Value {
    // Bounded: a reference cycle must not hang the server.
    for _ in 0..8 {
        let next = node
            .get("$ref")
            .or_else(|| match node.get("allOf") {
                Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref"),
                _ => None,
            })
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(SCHEMA_REF_PREFIX))
            .and_then(|name| definition(definitions, name));
        match next {
            Some(n) => node = n,
            None => break,
        }
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_resolve_through_the_builtin_index_as_through_their_map() {
        let builtin = &builtin::definitions().schemas;
        for (name, value) in builtin {
            let found = definition(builtin, name).expect("every built-in name resolves");
            assert!(std::ptr::eq(found, value), "{name}");
        }
        assert!(definition(builtin, "io.k8s.api.core.v1.NoSuchKind").is_none());
        // Other definitions (a custom resource's) are looked up in their own map.
        let mut own = Map::new();
        own.insert(
            "io.k8s.api.core.v1.Pod".into(),
            serde_json::json!({"type": "string"}),
        );
        let found = definition(&own, "io.k8s.api.core.v1.Pod");
        assert!(found.is_some_and(|v| std::ptr::eq(v, &own["io.k8s.api.core.v1.Pod"])));
    }

    #[test]
    fn walks_deployment_to_container_ports() {
        let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
        let deployment = Schema::builtin(&gvk).expect("built in");
        let pod_spec = ["spec", "template", "spec"]
            .iter()
            .try_fold(deployment, |s, f| s.field(f))
            .expect("spec.template.spec");
        let containers = pod_spec.field("containers").expect("containers");
        assert!(containers.merges());
        assert_eq!(containers.merge_key(), Some("name"));
        assert_eq!(containers.list_type(), ListType::Map(vec!["name".into()]));
        let ports = containers
            .items()
            .and_then(|c| c.field("ports"))
            .expect("ports");
        assert_eq!(ports.merge_key(), Some("containerPort"));
        assert_eq!(
            ports.items().and_then(|p| p.default_of("protocol")),
            Some(&Value::from("TCP"))
        );
        assert_eq!(
            pod_spec.field("tolerations").map(|t| t.list_type()),
            Some(ListType::Atomic)
        );
        let selector = deployment.field("spec").and_then(|s| s.field("selector"));
        assert!(selector.is_some_and(|s| s.is_atomic()));
        let strategy = deployment.field("spec").and_then(|s| s.field("strategy"));
        assert!(strategy.is_some_and(|s| s.retains_keys() && !s.merges()));
        let labels = deployment.field("metadata").and_then(|m| m.field("labels"));
        assert!(labels.and_then(|l| l.field("app")).is_some());
    }

    #[test]
    fn list_atomicity_is_what_the_list_type_says() {
        let definitions = &builtin::definitions().schemas;
        let mut lists = 0;
        for node in definitions.values() {
            let schema = Schema::new(definitions, node);
            for property in node
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|p| p.values())
            {
                let field = schema.at(property);
                if field.target().get("type").and_then(Value::as_str) == Some("array") {
                    lists += 1;
                }
                assert_eq!(
                    field.list_is_atomic(),
                    field.list_type() == ListType::Atomic,
                    "{property}"
                );
            }
        }
        assert!(lists > 100, "{lists} lists");
    }
}
