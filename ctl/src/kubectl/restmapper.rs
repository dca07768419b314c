//! From what a user types (`deploy`, `deployments.apps`, `Deployment`, `po`) or what a manifest
//! says (`apps/v1` + `Deployment`) to a REST resource: kubectl's RESTMapper, built from
//! discovery (`k8s.io/client-go/restmapper/discovery.go`, `shortcut.go`, `category_expansion.go`).
//!
//! Discovery is asked once per command, as kubectl 1.33 asks it: aggregated discovery
//! (`apidiscovery.k8s.io/v2`, two requests: `/api` and `/apis`) when the server offers it,
//! otherwise the legacy documents (`/api`, `/api/v1`, `/apis`, `/apis/<group>/<version>`...).
//!
//! ```text
//!   "deploy"            ─┐                                  ┌─ apps/v1 deployments (Deployment)
//!   "deployment"        ─┤  plural | singular | short name  │  namespaced, verbs, categories
//!   "Deployment"        ─┼─ | kind, optionally .group or  ──▶  preferred version of its group
//!   "deployments.apps"  ─┤  .version.group                  │  first, core group first
//!   "deploy.v1.apps"    ─┘                                  └─
//! ```
//!
//! Unlike kubectl there is no discovery cache on disk: miniplane answers in microseconds.

use kube::api::ApiResource;
use kube::core::discovery::v2::{
    ACCEPT_AGGREGATED_DISCOVERY_V2, APIGroupDiscovery, APIGroupDiscoveryList,
};
use serde_json::Value;

use super::error::{Error, KubeResultExt, Result};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList, APIVersions};

/// One resource of one group version, with what discovery says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    /// Group, version, kind and plural (what kube's `Api` needs).
    pub resource: ApiResource,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Singular name (`deployment`).
    pub singular: String,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Verbs the resource supports (`get`, `list`, `watch`, `patch`...).
    pub verbs: Vec<String>,
    /// Whether this is the preferred version of its group.
    pub preferred: bool,
}

impl Mapping {
    /// `deployment.apps` (core: `pod`): kubectl's lowercased group kind, as in
    /// `deployment.apps/nginx` (`-o name`) or `deployment.apps "nginx" deleted`.
    pub fn kind_group(&self) -> String {
        join_group(&self.resource.kind.to_lowercase(), &self.resource.group)
    }

    /// `deployments.apps` (core: `pods`): the group resource, as in server messages.
    pub fn resource_group(&self) -> String {
        join_group(&self.resource.plural, &self.resource.group)
    }

    /// `deployment.apps/nginx`.
    pub fn object_name(&self, name: &str) -> String {
        format!("{}/{name}", self.kind_group())
    }

    /// Whether `name` (already lowercased) names this resource.
    fn answers_to(&self, name: &str) -> bool {
        self.resource.plural == name
            || self.singular == name
            || self.resource.kind.to_lowercase() == name
            || self.short_names.iter().any(|s| s == name)
    }
}

fn join_group(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{group}")
    }
}

/// Every resource the server serves, in discovery order (core first, then `/apis` order;
/// within a group, preferred version first).
#[derive(Debug, Clone, Default)]
pub struct RestMapper {
    mappings: Vec<Mapping>,
}

impl RestMapper {
    /// Asks the server (aggregated discovery if offered, legacy otherwise).
    pub async fn discover(client: &kube::Client, server: &str) -> Result<RestMapper> {
        let core = get_discovery(client, "/api", server).await?;
        if core["kind"] == "APIGroupDiscoveryList" {
            let apis = get_discovery(client, "/apis", server).await?;
            let lists = [core, apis]
                .into_iter()
                .map(serde_json::from_value::<APIGroupDiscoveryList>)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::Other(format!("bad discovery document: {e}")))?;
            return Ok(RestMapper::from_aggregated(&lists));
        }
        let versions: APIVersions = serde_json::from_value(core)
            .map_err(|e| Error::Other(format!("bad discovery document /api: {e}")))?;
        let mut lists = Vec::new();
        for (i, v) in versions.versions.iter().enumerate() {
            lists.push((client.list_core_api_resources(v).await.at(server)?, i == 0));
        }
        let groups: APIGroupList = client.list_api_groups().await.at(server)?;
        for group in groups.groups {
            let preferred = group.preferred_version.map(|p| p.group_version);
            for v in group.versions {
                let is_preferred = preferred.as_deref() == Some(v.group_version.as_str());
                let list = client
                    .list_api_group_resources(&v.group_version)
                    .await
                    .at(server)?;
                lists.push((list, is_preferred));
            }
        }
        Ok(RestMapper::from_legacy(&lists))
    }

    /// Every resource of every group version the server serves.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The mapper of aggregated discovery documents (`/api` then `/apis`).
    pub fn from_aggregated(lists: &[APIGroupDiscoveryList]) -> RestMapper {
        let mut mappings = Vec::new();
        for group in lists.iter().flat_map(|l| &l.items) {
            add_aggregated_group(&mut mappings, group);
        }
        RestMapper { mappings }
    }

    /// The mapper of legacy `APIResourceList`s, each flagged preferred or not.
    pub fn from_legacy(lists: &[(APIResourceList, bool)]) -> RestMapper {
        let mut mappings = Vec::new();
        for (list, preferred) in lists {
            let (group, version) = split_group_version(&list.group_version);
            for r in list.resources.iter().filter(|r| !r.name.contains('/')) {
                let group = r.group.clone().unwrap_or_else(|| group.to_owned());
                let version = r.version.clone().unwrap_or_else(|| version.to_owned());
                mappings.push(Mapping {
                    resource: api_resource(&group, &version, &r.kind, &r.name),
                    namespaced: r.namespaced,
                    singular: if r.singular_name.is_empty() {
                        r.kind.to_lowercase()
                    } else {
                        r.singular_name.clone()
                    },
                    short_names: r.short_names.clone().unwrap_or_default(),
                    categories: r.categories.clone().unwrap_or_default(),
                    verbs: r.verbs.clone(),
                    preferred: *preferred,
                });
            }
        }
        RestMapper { mappings }
    }

    /// The resource a `TYPE` argument names (`deploy`, `deployments.apps`, `deploy.v1.apps`,
    /// `Deployment`), preferring the preferred version of a group, as kubectl does.
    pub fn resource_for(&self, arg: &str) -> Result<&Mapping> {
        let arg_lower = arg.to_lowercase();
        let mut candidates: Vec<(&str, Option<&str>, Option<&str>)> =
            vec![(arg_lower.as_str(), None, None)];
        if let Some((name, rest)) = arg_lower.split_once('.') {
            // `resource.version.group` first (kubectl's ParseResourceArg), then `resource.group`.
            if let Some((version, group)) = rest.split_once('.') {
                candidates.push((name, Some(group), Some(version)));
            }
            candidates.push((name, Some(rest), None));
        }
        for (name, group, version) in candidates {
            let mut matches = self.mappings.iter().filter(|m| {
                m.answers_to(name)
                    && group.is_none_or(|g| m.resource.group == g)
                    && version.is_none_or(|v| m.resource.version == v)
            });
            let first = matches.next();
            let preferred = std::iter::once(first)
                .flatten()
                .chain(matches)
                .find(|m| m.preferred || version.is_some());
            if let Some(found) = preferred.or(first) {
                return Ok(found);
            }
        }
        Err(Error::UnknownResourceType(arg.to_owned()))
    }

    /// The resource of a manifest's `apiVersion` and `kind`.
    pub fn kind_for(&self, api_version: &str, kind: &str) -> Option<&Mapping> {
        let (group, version) = split_group_version(api_version);
        self.mappings.iter().find(|m| {
            m.resource.group == group && m.resource.version == version && m.resource.kind == kind
        })
    }

    /// The resources of a category (`all`), preferred versions only, in discovery order.
    pub fn category(&self, name: &str) -> Vec<&Mapping> {
        self.mappings
            .iter()
            .filter(|m| m.preferred && m.categories.iter().any(|c| c == name))
            .collect()
    }
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
fn split_group_version(gv: &str) -> (&str, &str) {
    gv.split_once('/').unwrap_or(("", gv))
}

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

fn add_aggregated_group(mappings: &mut Vec<Mapping>, group: &APIGroupDiscovery) {
    let group_name = group
        .metadata
        .as_ref()
        .and_then(|m| m.name.clone())
        .unwrap_or_default();
    // Versions are listed in order of preference.
    for (i, version) in group.versions.iter().enumerate() {
        let version_name = version.version.clone().unwrap_or_default();
        for r in &version.resources {
            let plural = r.resource.clone().unwrap_or_default();
            let kind = r
                .response_kind
                .as_ref()
                .and_then(|k| k.kind.clone())
                .unwrap_or_default();
            mappings.push(Mapping {
                resource: api_resource(&group_name, &version_name, &kind, &plural),
                namespaced: r.scope.as_deref() == Some("Namespaced"),
                singular: r
                    .singular_resource
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| kind.to_lowercase()),
                short_names: r.short_names.clone(),
                categories: r.categories.clone(),
                verbs: r.verbs.clone(),
                preferred: i == 0,
            });
        }
    }
}

/// `GET path` with the aggregated-discovery `Accept` header (which also accepts plain JSON).
async fn get_discovery(client: &kube::Client, path: &str, server: &str) -> Result<Value> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, ACCEPT_AGGREGATED_DISCOVERY_V2)
        .body(Vec::new())
        .map_err(|e| Error::Other(e.to_string()))?;
    client.request::<Value>(request).await.at(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapper() -> RestMapper {
        let core: APIGroupDiscoveryList = serde_json::from_value(json!({
            "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
                {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                 "scope": "Namespaced", "singularResource": "pod", "shortNames": ["po"],
                 "categories": ["all"], "verbs": ["get", "list"]},
                {"resource": "nodes", "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                 "scope": "Cluster", "singularResource": "node", "shortNames": ["no"], "verbs": ["get"]}
            ]}]}]
        }))
        .unwrap();
        let apis: APIGroupDiscoveryList = serde_json::from_value(json!({
            "items": [{"metadata": {"name": "autoscaling"}, "versions": [
                {"version": "v2", "resources": [{"resource": "horizontalpodautoscalers",
                  "responseKind": {"kind": "HorizontalPodAutoscaler"}, "scope": "Namespaced",
                  "singularResource": "horizontalpodautoscaler", "shortNames": ["hpa"]}]},
                {"version": "v1", "resources": [{"resource": "horizontalpodautoscalers",
                  "responseKind": {"kind": "HorizontalPodAutoscaler"}, "scope": "Namespaced",
                  "singularResource": "horizontalpodautoscaler", "shortNames": ["hpa"]}]}]},
              {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments", "responseKind": {"kind": "Deployment"},
                 "scope": "Namespaced", "singularResource": "deployment", "shortNames": ["deploy"],
                 "categories": ["all"], "verbs": ["get", "patch"]}]}]}]
        }))
        .unwrap();
        RestMapper::from_aggregated(&[core, apis])
    }

    #[test]
    fn resolves_plural_singular_short_name_and_kind() {
        let m = mapper();
        for arg in [
            "deployments",
            "deployment",
            "deploy",
            "Deployment",
            "deployments.apps",
            "deploy.apps",
            "deployments.v1.apps",
        ] {
            let found = m.resource_for(arg).unwrap();
            assert_eq!(found.resource.plural, "deployments", "{arg}");
            assert_eq!(found.kind_group(), "deployment.apps");
            assert_eq!(found.resource_group(), "deployments.apps");
        }
        assert_eq!(m.resource_for("po").unwrap().object_name("p"), "pod/p");
        assert!(!m.resource_for("no").unwrap().namespaced);
    }

    #[test]
    fn prefers_the_preferred_version_unless_one_is_named() {
        let m = mapper();
        assert_eq!(m.resource_for("hpa").unwrap().resource.version, "v2");
        assert_eq!(
            m.resource_for("hpa.v1.autoscaling")
                .unwrap()
                .resource
                .version,
            "v1"
        );
        assert_eq!(
            m.kind_for("autoscaling/v1", "HorizontalPodAutoscaler")
                .unwrap()
                .resource
                .api_version,
            "autoscaling/v1"
        );
    }

    #[test]
    fn unknown_types_and_categories() {
        let m = mapper();
        assert_eq!(
            m.resource_for("foos").unwrap_err().to_string(),
            "error: the server doesn't have a resource type \"foos\""
        );
        assert!(m.resource_for("deployments.batch").is_err());
        assert!(m.kind_for("v1", "Foo").is_none());
        let all: Vec<String> = m
            .category("all")
            .iter()
            .map(|m| m.resource.plural.clone())
            .collect();
        assert_eq!(all, ["pods", "deployments"]);
    }

    #[test]
    fn legacy_lists_map_the_same() {
        let list: APIResourceList = serde_json::from_value(json!({
            "groupVersion": "apps/v1",
            "resources": [
                {"name": "deployments", "singularName": "deployment", "namespaced": true,
                 "kind": "Deployment", "verbs": ["get"], "shortNames": ["deploy"]},
                {"name": "deployments/scale", "singularName": "", "namespaced": true,
                 "kind": "Scale", "verbs": ["get"]}
            ]
        }))
        .unwrap();
        let m = RestMapper::from_legacy(&[(list, true)]);
        let d = m.resource_for("deploy").unwrap();
        assert_eq!(d.resource.api_version, "apps/v1");
        assert!(d.namespaced && d.preferred);
        assert!(m.resource_for("scale").is_err());
    }
}
