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
//!
//!     default.deployments.api: {..., "selector":"app=api","totalCpu":"230m"}
//!   `totalCpu` is what the workload's serving pods use together, shared evenly as a load
//!   balancer shares requests: each Ready, Running pod that is not being deleted uses
//!   totalCpu / (such pods), split among its containers; a pod that is not serving gets no
//!   share (its containers use the defaults). More replicas, less each: what an
//!   HorizontalPodAutoscaler converges on.
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
    /// The CPU all the serving pods use together (a quantity), shared evenly.
    #[serde(default, rename = "totalCpu", skip_serializing_if = "Option::is_none")]
    pub total_cpu: Option<String>,
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
    /// CPU of all the serving pods together, if set ([`Loads::for_pod_among`] turns it into
    /// each container's `cpu`).
    pub total_cpu: Option<Quantity>,
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
                        total_cpu: quantity(spec.total_cpu.as_deref())?,
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

    /// The load that applies to `pod`, if any, as written (a `total_cpu` not shared out).
    pub fn for_pod(&self, pod: &Pod) -> Option<Load> {
        self.entry_for(pod).map(|e| e.load)
    }

    fn entry_for(&self, pod: &Pod) -> Option<Entry> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| e.namespace == namespace && e.selector.matches(&labels))
            .cloned()
    }

    /// The load of `pod` with a `total_cpu` shared out: each container's `cpu` is the total
    /// over the serving pods of `pods` the load selects (`pods` is only listed then), over the
    /// pod's containers. A pod that is not serving gets no CPU from a total.
    pub fn for_pod_among<F>(&self, pod: &Pod, pods: F) -> Option<Load>
    where
        F: FnOnce() -> Vec<std::sync::Arc<Pod>>,
    {
        let entry = self.entry_for(pod)?;
        let mut load = entry.load;
        let Some(total) = load.total_cpu else {
            return Some(load);
        };
        if !serving(pod) {
            return Some(load);
        }
        let peers = pods()
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref().unwrap_or("default") == entry.namespace
                    && serving(p)
                    && entry
                        .selector
                        .matches(&p.metadata.labels.clone().unwrap_or_default())
            })
            .count()
            .max(1);
        let containers = pod.spec.as_ref().map_or(1, |s| s.containers.len().max(1));
        let share = total.nanos() / (peers as i128 * containers as i128);
        load.cpu = load.cpu.or(Some(Quantity::from_nanos(share)));
        Some(load)
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

/// Whether `pod` gets a share of a workload's traffic: Running, Ready and not being deleted
/// (as a Service's endpoints count it ready).
fn serving(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    pod.metadata.deletion_timestamp.is_none()
        && status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
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
            total_cpu: None,
        })
        .expect("json")
    }

    /// A Running pod of `app=web`, Ready or not, with `containers` containers.
    fn web(name: &str, ready: bool, containers: usize) -> Pod {
        let mut p = pod("default", &[("app", "web")]);
        p.metadata.name = Some(name.into());
        let names: Vec<serde_json::Value> = (0..containers)
            .map(|i| serde_json::json!({"name": format!("c{i}")}))
            .collect();
        p.spec = serde_json::from_value(serde_json::json!({"containers": names})).ok();
        p.status = serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        }))
        .ok();
        p
    }

    #[test]
    fn a_total_is_shared_by_the_serving_pods_and_their_containers() {
        let loads = Loads::default();
        let spec = LoadSpec {
            namespace: "default".into(),
            workload: "deployments/web".into(),
            selector: "app=web".into(),
            cpu: None,
            memory: None,
            total_cpu: Some("300m".into()),
        };
        let text = serde_json::to_string(&spec).expect("json");
        assert!(text.contains(r#""totalCpu":"300m""#), "{text}");
        loads.set_data(&BTreeMap::from([(
            key("default", "deployments", "web"),
            text,
        )]));
        let (a, b, c) = (web("a", true, 1), web("b", true, 2), web("c", false, 1));
        let mut gone = web("d", true, 1);
        gone.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let all = || {
            vec![a.clone(), b.clone(), c.clone(), gone.clone()]
                .into_iter()
                .map(Arc::new)
                .collect()
        };
        let cpu = |p: &Pod| {
            loads
                .for_pod_among(p, all)
                .and_then(|l| l.cpu)
                .map(|q| q.millis())
        };
        // Two serving pods (c is not Ready, d is being deleted): 150m each.
        assert_eq!(cpu(&a), Some(150));
        assert_eq!(
            cpu(&b),
            Some(75),
            "b's share split between its 2 containers"
        );
        assert_eq!(cpu(&c), None, "not serving: no share, the defaults apply");
        assert_eq!(
            loads
                .for_pod(&a)
                .and_then(|l| l.total_cpu)
                .map(|q| q.millis()),
            Some(300)
        );
        // Alone, a serving pod takes it all.
        assert_eq!(
            loads
                .for_pod_among(&a, Vec::new)
                .and_then(|l| l.cpu)
                .map(|q| q.millis()),
            Some(300)
        );
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
