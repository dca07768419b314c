//! The API aggregation layer inside the API server: `apiregistration.k8s.io/v1` APIServices,
//! their `Available` condition, discovery of the groups they register, and the proxy that
//! sends a registered group's requests to the server behind it (a metrics-server).
//!
//! Mirrors kube-aggregator (`staging/src/k8s.io/kube-aggregator`): `pkg/apiserver/
//! handler_proxy.go` (the proxy: 503 `service unavailable` while the APIService is not
//! Available, the user in `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*`),
//! `pkg/apiserver/handler_apis.go` and `handler_discovery.go` (the registered groups in
//! `/apis`, `/apis/<group>` and the aggregated discovery document, from each backend's
//! `/apis/<group>/<version>`), `pkg/controllers/status/{local,remote}` (the
//! `AvailableConditionController`), kube-apiserver's autoregister controller
//! (`pkg/controlplane/apiserver/aggregator.go`: a local APIService per built-in group
//! version) and `k8s.io/apiserver/pkg/util/proxy` `ResolveEndpoint` (endpoint routing).
//!
//! ```text
//!   GET /apis/metrics.k8s.io/v1beta1/nodes        (authenticated, authorized as usual)
//!     group version served by the registry? ── yes ─▶ handled here as any resource
//!     an APIService v1beta1.metrics.k8s.io with spec.service? ── no ─▶ 404
//!     not Available ─▶ 503 "service unavailable" (text/plain, as http.Error writes it)
//!     Service kube-system/metrics-server port 443 ─▶ its EndpointSlices ─▶ a ready endpoint,
//!       port of the same name ─▶ dial 127.0.0.1:<that port> ─▶ same method, path, query,
//!       body; X-Remote-User: <user>, X-Remote-Group: <each group>; the answer streamed back
//!     dial or send fails ─▶ 503 with the error's text
//!
//!   controller (available.rs): every APIService, on each APIService change, every second
//!     for changed Services/EndpointSlices or a failed proxied request, every 30 s anyway
//!     (sooner after a failure):
//!     local ─▶ Available=True  Local  "Local APIServices are always available"
//!     remote ─▶ ServiceNotFound │ ServicePortError │ EndpointsNotFound │ MissingEndpoints
//!               │ FailedDiscoveryCheck (GET /apis/<g>/<v> as system:kube-aggregator)
//!               │ Passed "all checks passed"  — the GET's APIResourceList feeds discovery
//! ```
//!
//! How a backend is reached, and why: every miniplane component runs on this machine, and
//! Service cluster IPs are not routed (there is no kube-proxy), so the aggregator routes to
//! endpoints, as kube-apiserver does with `--enable-aggregator-routing=true`. The Service an
//! APIService names is a real, selectorless Service; the backend writes its EndpointSlice
//! (label `kubernetes.io/service-name`) with an address of this machine and the port it
//! listens on, as it registers. Because every endpoint is on this machine, the proxy dials
//! `127.0.0.1:<endpoint port>` whatever the address (the same simplification the connect
//! subresources make for kubelets), so the Service and the APIService stay what they are on a
//! cluster, and `kubectl get apiservice,svc,endpointslices -n kube-system` shows them.
//!
//! Simplifications: plain HTTP to the backend (kube-aggregator speaks HTTPS with its
//! front-proxy client certificate; an APIService's `caBundle` and `insecureSkipTLSVerify`
//! are stored and validated but not used), so a backend must trust the `X-Remote-*`
//! headers of whoever reaches its loopback port; one discovery check per round, not five in
//! parallel; a proxied request that cannot reach its backend has the APIService checked on
//! the controller's next pass (kube-aggregator waits for its 30 s resync); no upgrades (watch over WebSocket, exec) through the proxy; no OpenAPI of
//! aggregated groups; local groups are always served from the registry (an APIService with
//! a `service` for a built-in group does not take it over); autoregistered APIServices are
//! made for the built-in group versions Kubernetes lists priorities for, not for
//! CustomResourceDefinitions, and are not removed.

pub mod apiservice;
pub mod autoregister;
pub mod available;
pub mod discovery;
pub mod proxy;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::gvk::GroupVersion;
use crate::registry::Registry;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::Value;

/// `apiregistration.k8s.io`.
pub const GROUP: &str = "apiregistration.k8s.io";
/// The resource's plural.
pub const RESOURCE: &str = "apiservices";

/// Where a registered group's backend is: the Service an APIService names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceRef {
    /// `spec.service.namespace`.
    pub namespace: String,
    /// `spec.service.name`.
    pub name: String,
    /// `spec.service.port` (443 by default).
    pub port: i32,
}

/// One APIService as the proxy and discovery use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `metadata.name` (`v1beta1.metrics.k8s.io`).
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority: i32,
    /// `spec.versionPriority`.
    pub version_priority: i32,
    /// `spec.service`; `None` for a local APIService.
    pub service: Option<ServiceRef>,
    /// Whether its `Available` condition is `True`.
    pub available: bool,
}

impl Registration {
    /// The registration of a stored APIService.
    pub fn of(svc: &APIService) -> Registration {
        let spec = svc.spec.clone().unwrap_or_default();
        Registration {
            name: svc.metadata.name.clone().unwrap_or_default(),
            group: spec.group.unwrap_or_default(),
            version: spec.version.unwrap_or_default(),
            group_priority: spec.group_priority_minimum,
            version_priority: spec.version_priority,
            service: spec.service.map(|s| ServiceRef {
                namespace: s.namespace.unwrap_or_default(),
                name: s.name.unwrap_or_default(),
                port: s.port.unwrap_or(apiservice::DEFAULT_PORT),
            }),
            available: apiservice::available_condition(svc).is_some_and(|c| c.status == "True"),
        }
    }

    /// Its group version.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(&self.group, &self.version)
    }
}

/// What a backend's discovery answered last: its `APIResourceList.resources`.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The resources, as the backend listed them; `None` until it answered once.
    pub resources: Option<Vec<Value>>,
    /// Whether the last attempt failed (the resources are from an earlier one, if any).
    pub stale: bool,
}

/// The aggregator's view of the APIServices, kept by the controller ([`available`]) and read
/// by the proxy and discovery on every request (cheap to read: two locks, no I/O).
#[derive(Debug, Default)]
pub struct Aggregator {
    registrations: RwLock<Arc<Vec<Registration>>>,
    discovered: RwLock<HashMap<String, Discovered>>,
    /// APIServices whose backend failed a proxied request since the controller's last pass.
    suspect: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Aggregator {
    /// Every APIService, by name.
    pub fn registrations(&self) -> Arc<Vec<Registration>> {
        self.registrations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the registrations (sorted by name) and forgets the discovery of those gone.
    pub fn set_registrations(&self, mut all: Vec<Registration>) {
        all.sort_by(|a, b| a.name.cmp(&b.name));
        {
            let mut discovered = self.discovered.write().unwrap_or_else(|p| p.into_inner());
            discovered.retain(|name, _| all.iter().any(|r| &r.name == name && r.service.is_some()));
        }
        *self
            .registrations
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(all);
    }

    /// Records what the backend of APIService `name` answered (`None`: it did not).
    pub fn set_discovered(&self, name: &str, resources: Option<Vec<Value>>) {
        let mut discovered = self.discovered.write().unwrap_or_else(|p| p.into_inner());
        let entry = discovered.entry(name.to_owned()).or_insert(Discovered {
            resources: None,
            stale: true,
        });
        match resources {
            Some(r) => {
                entry.resources = Some(r);
                entry.stale = false;
            }
            None => entry.stale = true,
        }
    }

    /// Marks APIService `name` for a check on the controller's next pass (its backend just
    /// failed a proxied request).
    pub fn suspect(&self, name: &str) {
        self.suspect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned());
    }

    /// Whether APIService `name` was marked by [`Aggregator::suspect`]; clears the mark.
    pub fn take_suspect(&self, name: &str) -> bool {
        self.suspect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
    }

    /// What the backend of APIService `name` answered last.
    pub fn discovered(&self, name: &str) -> Option<Discovered> {
        self.discovered
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The registration whose backend serves `gv`, when the registry does not serve it.
    pub fn remote(&self, reg: &Registry, gv: &GroupVersion) -> Option<Registration> {
        let all = self.registrations();
        let found = all
            .iter()
            .find(|r| r.service.is_some() && r.group == gv.group && r.version == gv.version)?;
        (!reg.serves(gv)).then(|| found.clone())
    }

    /// The groups only aggregated servers serve, each with its registrations in preference
    /// order (highest `versionPriority` first, then by version), the groups by
    /// `groupPriorityMinimum` (highest first), then by name.
    pub fn remote_groups(&self, reg: &Registry) -> Vec<(String, Vec<Registration>)> {
        let all = self.registrations();
        let local: std::collections::HashSet<String> = reg
            .group_versions()
            .into_iter()
            .map(|gv| gv.group)
            .collect();
        let mut groups: Vec<(String, Vec<Registration>)> = Vec::new();
        for r in all.iter().filter(|r| r.service.is_some()) {
            if local.contains(&r.group) || r.group.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, rs)) => rs.push(r.clone()),
                None => groups.push((r.group.clone(), vec![r.clone()])),
            }
        }
        for (_, rs) in &mut groups {
            rs.sort_by(|a, b| {
                b.version_priority
                    .cmp(&a.version_priority)
                    .then_with(|| a.version.cmp(&b.version))
            });
        }
        let priority = |rs: &[Registration]| rs.iter().map(|r| r.group_priority).max();
        groups.sort_by(|(a, ra), (b, rb)| priority(rb).cmp(&priority(ra)).then_with(|| a.cmp(b)));
        groups
    }
}

/// Whether a request for `path` goes to an aggregated server: `/apis/<group>/<version>[/...]`
/// of a group version the registry does not serve and a non-local APIService registers.
pub fn proxies(aggregator: &Aggregator, reg: &Registry, path: &str) -> bool {
    target(path).is_some_and(|gv| aggregator.remote(reg, &gv).is_some())
}

/// The group version of an `/apis/<group>/<version>[/...]` path.
pub fn target(path: &str) -> Option<GroupVersion> {
    let mut segs = path.split('/').filter(|s| !s.is_empty());
    if segs.next() != Some("apis") {
        return None;
    }
    let group = segs.next()?;
    let version = segs.next()?;
    Some(GroupVersion::new(group, version))
}
