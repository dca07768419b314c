//! What discovery shows of the groups aggregated servers serve: each registered group
//! version, with the resources its backend listed in its last answer.
//!
//! Mirrors kube-aggregator's `pkg/apiserver/handler_apis.go` (`convertToDiscoveryAPIGroup`:
//! the group's versions in priority order, the first preferred) and the discovery manager of
//! `handler_discovery.go`, which falls back to a backend's legacy `/apis/<g>/<v>` and converts
//! it with `endpoints.ConvertGroupVersionIntoToDiscovery`: top-level resources become
//! `APIResourceDiscovery` entries, `name/sub` entries their subresources. A version whose
//! backend never answered is listed without resources; one whose last answer failed keeps
//! its resources with `freshness: Stale`.

use serde_json::{Value, json};

use super::{Aggregator, Registration};
use crate::discovery::{RemoteGroup, RemoteVersion};
use crate::registry::Registry;

/// `ConvertGroupVersionIntoToDiscovery` of a backend's `APIResourceList.resources` for
/// `group`/`version` (a response kind without group or version gets the group version's).
pub fn aggregated_resources(group: &str, version: &str, list: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for r in list {
        let name = r["name"].as_str().unwrap_or_default();
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let scope = if r["namespaced"].as_bool().unwrap_or(false) {
            "Namespaced"
        } else {
            "Cluster"
        };
        let mut entry = json!({
            "resource": name,
            "responseKind": response_kind(r, group, version),
            "scope": scope,
            "singularResource": r["singularName"].as_str().unwrap_or_default(),
            "verbs": r["verbs"].clone(),
        });
        for key in ["shortNames", "categories"] {
            if r[key].as_array().is_some_and(|a| !a.is_empty()) {
                entry[key] = r[key].clone();
            }
        }
        out.push(entry);
    }
    for r in list {
        let name = r["name"].as_str().unwrap_or_default();
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        let Some(entry) = out.iter_mut().find(|e| e["resource"] == parent) else {
            continue;
        };
        let subresource = json!({
            "subresource": sub,
            "responseKind": response_kind(r, group, version),
            "verbs": r["verbs"].clone(),
        });
        match entry["subresources"].as_array_mut() {
            Some(subs) => subs.push(subresource),
            None => entry["subresources"] = json!([subresource]),
        }
    }
    out
}

fn response_kind(r: &Value, group: &str, version: &str) -> Value {
    let or = |key: &str, default: &str| {
        r[key]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or(default)
            .to_owned()
    };
    json!({"group": or("group", group), "version": or("version", version), "kind": or("kind", "")})
}

impl Aggregator {
    /// The groups only aggregated servers serve, as discovery lists them.
    pub fn discovery_groups(&self, reg: &Registry) -> Vec<RemoteGroup> {
        self.remote_groups(reg)
            .into_iter()
            .map(|(name, registrations)| RemoteGroup {
                versions: registrations
                    .iter()
                    .map(|r| self.discovered_version(r))
                    .collect(),
                name,
            })
            .collect()
    }

    fn discovered_version(&self, r: &Registration) -> RemoteVersion {
        let found = self.discovered(&r.name);
        let resources = found
            .as_ref()
            .and_then(|d| d.resources.as_deref())
            .map(|list| aggregated_resources(&r.group, &r.version, list))
            .unwrap_or_default();
        RemoteVersion {
            version: r.version.clone(),
            resources,
            stale: found.is_none_or(|d| d.stale),
        }
    }
}
