//! Discovery: which groups, versions and resources are served, computed from the registry.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/discovery/` (legacy `APIVersions`,
//! `APIGroupList`, `APIGroup`, `APIResourceList`) and `discovery/aggregated/handler.go`
//! (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`, served only to clients whose `Accept`
//! asks for it — kubectl decides by the response `Content-Type`, so sending it to a client that
//! did not ask breaks that client).
//!
//! Groups served by aggregated servers (`crate::aggregator`: APIServices with a `service`)
//! come after the registry's, as [`RemoteGroup`]s: listed in `/apis` and
//! `/apis/{group}` from their APIServices, and in the aggregated document with the resources
//! their backends listed (`freshness: Stale` when the last answer failed). Their
//! `/apis/{group}/{version}` is the backend's own answer, proxied.

use crate::gvk::GroupVersion;
use crate::registry::{Registry, ResourceInfo};
use crate::request::AggregatedDiscovery;
use serde_json::{Value, json};

/// A group only an aggregated server serves, with its versions in preference order.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteGroup {
    /// The group's name.
    pub name: String,
    /// Its versions, the preferred first.
    pub versions: Vec<RemoteVersion>,
}

/// One version of a [`RemoteGroup`].
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteVersion {
    /// The version, e.g. `v1beta1`.
    pub version: String,
    /// Its resources as aggregated discovery lists them (`APIResourceDiscovery`).
    pub resources: Vec<Value>,
    /// Whether its backend's last answer failed.
    pub stale: bool,
}

impl RemoteGroup {
    fn versions(&self) -> Vec<GroupVersion> {
        self.versions
            .iter()
            .map(|v| GroupVersion::new(&self.name, &v.version))
            .collect()
    }

    fn aggregated(&self) -> Value {
        let versions: Vec<Value> = self
            .versions
            .iter()
            .map(|v| {
                json!({
                    "version": v.version,
                    "resources": v.resources,
                    "freshness": if v.stale { "Stale" } else { "Current" },
                })
            })
            .collect();
        json!({"metadata": {"name": self.name, "creationTimestamp": null}, "versions": versions})
    }
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": concat!("v1.33.0-miniplane.", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api` (legacy form).
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

fn group_json(group: &str, versions: &[GroupVersion]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|gv| json!({"groupVersion": gv.api_version(), "version": gv.version}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

fn named_groups(reg: &Registry) -> Vec<(String, Vec<GroupVersion>)> {
    let mut out: Vec<(String, Vec<GroupVersion>)> = Vec::new();
    for gv in reg.group_versions() {
        if gv.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| *g == gv.group) {
            Some((_, vs)) => vs.push(gv),
            None => out.push((gv.group.clone(), vec![gv])),
        }
    }
    out
}

/// `/apis` (legacy form).
pub fn group_list(reg: &Registry, remote: &[RemoteGroup]) -> Value {
    let groups: Vec<Value> = named_groups(reg)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .chain(remote.iter().map(|g| group_json(&g.name, &g.versions())))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if served.
pub fn group(reg: &Registry, remote: &[RemoteGroup], name: &str) -> Option<Value> {
    named_groups(reg)
        .into_iter()
        .chain(remote.iter().map(|g| (g.name.clone(), g.versions())))
        .find(|(g, _)| g == name)
        .map(|(g, vs)| {
            let mut v = group_json(&g, &vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        })
}

fn rows_of<'a>(
    rows: &'a [std::sync::Arc<ResourceInfo>],
    gv: &GroupVersion,
) -> impl Iterator<Item = &'a std::sync::Arc<ResourceInfo>> {
    rows.iter().filter(move |r| r.group_version() == *gv)
}

/// `/api/v1`, `/apis/{group}/{version}` (legacy `APIResourceList`), if served.
pub fn resource_list(reg: &Registry, gv: &GroupVersion) -> Option<Value> {
    if !reg.serves(gv) {
        return None;
    }
    let rows = reg.snapshot();
    let mut resources = Vec::new();
    for r in rows_of(&rows, gv) {
        resources.push(json!({
            "name": r.gvr.resource,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
            "shortNames": r.short_names,
            "categories": r.categories,
        }));
        for sub in &r.subresources {
            let mut e = json!({
                "name": format!("{}/{}", r.gvr.resource, sub.name()),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sub.verbs(),
            });
            if let Some(k) = sub.response_kind() {
                e["group"] = json!(k.group);
                e["version"] = json!(k.version);
                e["kind"] = json!(k.kind);
            }
            resources.push(e);
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv.api_version(),
        "resources": resources,
    }))
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let subs: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let k = sub.response_kind().unwrap_or_else(|| r.gvk());
            json!({
                "subresource": sub.name(),
                "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
                "verbs": sub.verbs(),
            })
        })
        .collect();
    json!({
        "resource": r.gvr.resource,
        "responseKind": {"group": r.gvr.group, "version": r.gvr.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
        "shortNames": r.short_names,
        "categories": r.categories,
        "subresources": subs,
    })
}

fn aggregated_group(reg: &Registry, name: &str, versions: &[GroupVersion]) -> Value {
    let rows = reg.snapshot();
    let vs: Vec<Value> = versions
        .iter()
        .map(|gv| {
            let resources: Vec<Value> =
                rows_of(&rows, gv).map(|r| aggregated_resource(r)).collect();
            json!({"version": gv.version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !name.is_empty() {
        metadata["name"] = json!(name);
    }
    json!({"metadata": metadata, "versions": vs})
}

/// Aggregated discovery for `/api` (`core == true`) or `/apis`.
pub fn aggregated(
    reg: &Registry,
    remote: &[RemoteGroup],
    core: bool,
    version: AggregatedDiscovery,
) -> Value {
    let items: Vec<Value> = if core {
        let core_gvs: Vec<GroupVersion> = reg
            .group_versions()
            .into_iter()
            .filter(|gv| gv.group.is_empty())
            .collect();
        vec![aggregated_group(reg, "", &core_gvs)]
    } else {
        named_groups(reg)
            .iter()
            .map(|(g, vs)| aggregated_group(reg, g, vs))
            .chain(remote.iter().map(RemoteGroup::aggregated))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": version.api_version(),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_lists_carry_subresources_with_their_kinds() {
        let reg = Registry::builtin();
        let apps = resource_list(&reg, &GroupVersion::new("apps", "v1")).expect("apps/v1 served");
        let names: Vec<&str> = apps["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"deployments/scale"));
        let scale = apps["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "deployments/scale")
            .cloned()
            .unwrap_or_default();
        assert_eq!(scale["group"], "autoscaling");
        assert!(resource_list(&reg, &GroupVersion::new("nope", "v1")).is_none());
    }

    #[test]
    fn aggregated_core_group_has_no_name() {
        let reg = Registry::builtin();
        let a = aggregated(&reg, &[], true, AggregatedDiscovery::V2);
        assert!(a["items"][0]["metadata"].get("name").is_none());
        assert_eq!(a["items"][0]["versions"][0]["version"], "v1");
        let g = aggregated(&reg, &[], false, AggregatedDiscovery::V2);
        assert!(
            g["items"]
                .as_array()
                .is_some_and(|i| i.iter().any(|x| x["metadata"]["name"] == "apps"))
        );
    }

    #[test]
    fn remote_groups_follow_the_local_ones() {
        let reg = Registry::builtin();
        let remote = vec![RemoteGroup {
            name: "metrics.k8s.io".into(),
            versions: vec![RemoteVersion {
                version: "v1beta1".into(),
                resources: vec![json!({"resource": "pods", "scope": "Namespaced"})],
                stale: false,
            }],
        }];
        let list = group_list(&reg, &remote);
        let groups = list["groups"].as_array().cloned().unwrap_or_default();
        let last = groups.last().cloned().unwrap_or_default();
        assert_eq!(last["name"], "metrics.k8s.io");
        assert_eq!(
            last["preferredVersion"]["groupVersion"],
            "metrics.k8s.io/v1beta1"
        );
        let one = group(&reg, &remote, "metrics.k8s.io").expect("served");
        assert_eq!(one["kind"], "APIGroup");
        assert_eq!(one["versions"][0]["version"], "v1beta1");
        assert!(group(&reg, &[], "metrics.k8s.io").is_none());
        let agg = aggregated(&reg, &remote, false, AggregatedDiscovery::V2);
        let item = agg["items"]
            .as_array()
            .and_then(|i| i.iter().find(|x| x["metadata"]["name"] == "metrics.k8s.io"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(item["versions"][0]["freshness"], "Current");
        assert_eq!(item["versions"][0]["resources"][0]["resource"], "pods");
        let core = aggregated(&reg, &remote, true, AggregatedDiscovery::V2);
        assert_eq!(core["items"].as_array().map(Vec::len), Some(1));
    }
}
