//! Simulated load set on a workload (`miniplane load deployment/web --cpu 400m`): the
//! ConfigMap `kube-system/miniplane-load` the command writes and the kubelets read, and the
//! table of loads the usage model consults. No Kubernetes counterpart: a real workload's load
//! comes from its traffic; here it is API data, so every simulator process sees it by an
//! ordinary watch, and pods created later (an HPA's scale-out) pick it up too.
//!
//! ```text
//!   kube-system/miniplane-load  data:
//!     default.deployments.web: {"namespace":"default","workload":"deployments/web",
//!                               "selector":"app=web","cpu":"400m","memory":"256Mi"}
//!   a running container of a pod in `namespace` whose labels match `selector` uses `cpu`
//!   (and has `memory` as its working set), unless its pod's own `miniplane.dev/cpu-usage`
//!   / `memory-usage` annotations say otherwise (they win)
//! ```
//!
//! The selector is the workload's `spec.selector` when the command ran, so a load follows
//! the workload's pods, not its template: setting one rolls nothing out. When several loads
//! match a pod, the one whose key sorts first applies. A malformed entry is ignored (logged).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use apimachinery::labels::Selector;
use apimachinery::resource::quantity::Quantity;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The ConfigMap's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub const CONFIGMAP: &str = "miniplane-load";

/// One entry of the ConfigMap, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// The workload's namespace.
    pub namespace: String,
    /// The workload, `<resource>/<name>` (`deployments/web`), for people reading it.
    pub workload: String,
    /// The label selector of the pods it applies to (`labels.Selector` text).
    pub selector: String,
    /// The CPU each running container of those pods uses (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// The working set each of them has (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// The ConfigMap key of the load of `resource/name` in `namespace`.
pub fn key(namespace: &str, resource: &str, name: &str) -> String {
    format!("{namespace}.{resource}.{name}")
}

/// A load the usage model applies: what a matching pod's containers use.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Load {
    /// CPU per running container, if set.
    pub cpu: Option<Quantity>,
    /// Working set per running container, if set.
    pub memory: Option<Quantity>,
}

#[derive(Debug, Clone)]
struct Entry {
    namespace: String,
    selector: Selector,
    load: Load,
}

/// The loads in force, from the ConfigMap's data (cheap to clone; clones share the table).
#[derive(Debug, Clone, Default)]
pub struct Loads {
    entries: Arc<RwLock<Vec<Entry>>>,
}

fn quantity(v: Option<&str>) -> Result<Option<Quantity>, String> {
    v.map(|q| {
        Quantity::parse(q)
            .map_err(|e| format!("{q:?}: {e}"))
            .and_then(|q| {
                if q.nanos() < 0 {
                    Err("a negative quantity".to_owned())
                } else {
                    Ok(q)
                }
            })
    })
    .transpose()
}

impl Loads {
    /// Replaces the loads with the ConfigMap data `data` (by key).
    pub fn set_data(&self, data: &BTreeMap<String, String>) {
        let mut entries = Vec::new();
        for (key, value) in data {
            let parsed = serde_json::from_str::<LoadSpec>(value)
                .map_err(|e| e.to_string())
                .and_then(|spec| {
                    let selector = Selector::parse(&spec.selector).map_err(|e| e.to_string())?;
                    let load = Load {
                        cpu: quantity(spec.cpu.as_deref())?,
                        memory: quantity(spec.memory.as_deref())?,
                    };
                    Ok(Entry {
                        namespace: spec.namespace,
                        selector,
                        load,
                    })
                });
            match parsed {
                Ok(entry) => entries.push(entry),
                Err(e) => tracing::warn!(%key, error = %e, "ignoring a malformed load"),
            }
        }
        *self.entries.write().unwrap_or_else(|p| p.into_inner()) = entries;
    }

    /// The load that applies to `pod`, if any.
    pub fn for_pod(&self, pod: &Pod) -> Option<Load> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| e.namespace == namespace && e.selector.matches(&labels))
            .map(|e| e.load.clone())
    }

    /// Keeps the table current from the ConfigMap until `shutdown` fires (an absent
    /// ConfigMap is no load).
    pub async fn watch(self, client: kube::Client, shutdown: CancellationToken) {
        let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
        let config = watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP}"));
        let stream = watcher::watcher(api, config).default_backoff();
        futures::pin_mut!(stream);
        let mut listed: Option<BTreeMap<String, String>> = None;
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                e = stream.next() => e,
            };
            match event {
                None => return,
                Some(Err(e)) => tracing::debug!(error = %e, "watching the load ConfigMap"),
                Some(Ok(Event::Init)) => listed = Some(BTreeMap::new()),
                Some(Ok(Event::InitApply(cm))) => {
                    listed = Some(cm.data.unwrap_or_default());
                }
                Some(Ok(Event::InitDone)) => {
                    self.set_data(&listed.take().unwrap_or_default());
                }
                Some(Ok(Event::Apply(cm))) => self.set_data(&cm.data.unwrap_or_default()),
                Some(Ok(Event::Delete(_))) => self.set_data(&BTreeMap::new()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, labels: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    fn entry(ns: &str, selector: &str, cpu: Option<&str>) -> String {
        serde_json::to_string(&LoadSpec {
            namespace: ns.into(),
            workload: "deployments/web".into(),
            selector: selector.into(),
            cpu: cpu.map(str::to_owned),
            memory: None,
        })
        .expect("json")
    }

    #[test]
    fn loads_apply_to_matching_pods_of_their_namespace() {
        let loads = Loads::default();
        loads.set_data(&BTreeMap::from([
            (
                key("default", "deployments", "web"),
                entry("default", "app=web", Some("400m")),
            ),
            (key("default", "deployments", "bad"), "{not json".to_owned()),
            (
                key("default", "deployments", "neg"),
                entry("default", "app=neg", Some("-1")),
            ),
        ]));
        let load = loads.for_pod(&pod(
            "default",
            &[("app", "web"), ("pod-template-hash", "x")],
        ));
        assert_eq!(
            load.and_then(|l| l.cpu).map(|q| q.millis()),
            Some(400),
            "matched by the workload's selector"
        );
        assert_eq!(loads.for_pod(&pod("other", &[("app", "web")])), None);
        assert_eq!(loads.for_pod(&pod("default", &[("app", "db")])), None);
        assert_eq!(
            loads.for_pod(&pod("default", &[("app", "neg")])),
            None,
            "refused"
        );
        loads.set_data(&BTreeMap::new());
        assert_eq!(loads.for_pod(&pod("default", &[("app", "web")])), None);
        assert_eq!(
            key("default", "deployments", "web"),
            "default.deployments.web"
        );
    }
}
