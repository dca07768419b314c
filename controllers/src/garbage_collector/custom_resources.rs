//! The garbage collector's monitors for custom resources: the dynamic part of
//! `pkg/controller/garbagecollector/graph_builder.go`.
//!
//! Kubernetes' graph builder re-reads discovery every 30 seconds and starts a metadata
//! informer for every deletable resource it finds. miniplane's built-in monitors are typed
//! (one per built-in kind, [`super::controller`]); for custom resources it watches
//! CustomResourceDefinitions instead and starts an untyped (`DynamicObject`) informer for each
//! established CRD — and stops it when the CRD goes:
//!
//! ```text
//!   informer CustomResourceDefinition ── established websites.demo.miniplane.dev
//!        └▶ start informer demo.miniplane.dev/v1 websites ─▶ graph.observe / graph.forget
//!   CRD deleted ─▶ cancel that informer
//! ```
//!
//! So a Website owning a Deployment, or a custom resource owned by another, is collected like
//! any built-in owner or dependent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::list_watch::ApiListerWatcher;
use client::{DeltaObject, ResourceEventHandlerFuncs, SharedIndexInformer};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::controller::GarbageCollector;

/// The running custom-resource monitors, by `group/plural`.
pub struct CustomMonitors {
    client: kube::Client,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Cancelled when the collector stops; each monitor's token is a child.
    root: CancellationToken,
    tasks: TaskTracker,
}

impl CustomMonitors {
    /// No monitors yet; informers list and watch through `client`.
    pub fn new(client: kube::Client) -> Self {
        CustomMonitors {
            client,
            running: Mutex::new(HashMap::new()),
            root: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// Stops every monitor and waits for them.
    pub async fn stop(&self) {
        self.root.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// The resource a CRD serves, in its storage version, if it is established.
pub fn served_resource(crd: &CustomResourceDefinition) -> Option<ApiResource> {
    let status = crd.status.as_ref()?;
    let established = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Established" && c.status == "True");
    if !established || crd.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let names = status.accepted_names.as_ref()?;
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage && v.served)
        .or_else(|| crd.spec.versions.iter().find(|v| v.served))?;
    let group = crd.spec.group.clone();
    Some(ApiResource {
        api_version: format!("{group}/{}", version.name),
        group,
        version: version.name.clone(),
        kind: names.kind.clone(),
        plural: names.plural.clone(),
    })
}

fn key(resource: &ApiResource) -> String {
    format!("{}/{}", resource.group, resource.plural)
}

impl GarbageCollector {
    /// Watches CRDs and keeps one monitor per established CRD.
    pub(super) fn monitor_custom_resources(&self, factory: &client::SharedInformerFactory) {
        let (add, update, delete) = (self.clone(), self.clone(), self.clone());
        factory
            .informer::<CustomResourceDefinition>()
            .add_event_handler(
                ResourceEventHandlerFuncs::new()
                    .on_add(move |crd: Arc<CustomResourceDefinition>, _| add.sync_monitor(&crd))
                    .on_update(move |_, crd: Arc<CustomResourceDefinition>| {
                        update.sync_monitor(&crd)
                    })
                    .on_delete(move |crd: DeltaObject<CustomResourceDefinition>| {
                        delete
                            .stop_monitor(&crd.object().spec.group, &crd.object().spec.names.plural)
                    }),
            );
    }

    fn sync_monitor(&self, crd: &CustomResourceDefinition) {
        match served_resource(crd) {
            Some(resource) => self.start_monitor(resource),
            None => self.stop_monitor(&crd.spec.group, &crd.spec.names.plural),
        }
    }

    fn start_monitor(&self, resource: ApiResource) {
        let monitors = self.custom_monitors();
        let mut running = monitors.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.contains_key(&key(&resource)) || monitors.root.is_cancelled() {
            return;
        }
        let api: Api<DynamicObject> = Api::all_with(monitors.client.clone(), &resource);
        let informer: SharedIndexInformer<DynamicObject> = SharedIndexInformer::new(
            Arc::new(ApiListerWatcher::new(api).without_managed_fields()),
            Duration::ZERO,
        );
        let (add, update, delete) = (self.clone(), self.clone(), self.clone());
        let (av1, kind1) = (resource.api_version.clone(), resource.kind.clone());
        let (av2, kind2) = (resource.api_version.clone(), resource.kind.clone());
        informer.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .on_add(move |obj: Arc<DynamicObject>, _| {
                    add.observe_as(&av1, &kind1, None, &obj.metadata)
                })
                .on_update(move |old: Arc<DynamicObject>, cur: Arc<DynamicObject>| {
                    update.observe_as(&av2, &kind2, Some(&old.metadata), &cur.metadata)
                })
                .on_delete(move |obj: DeltaObject<DynamicObject>| {
                    delete.forget(&obj.object().metadata)
                }),
        );
        let token = monitors.root.child_token();
        running.insert(key(&resource), token.clone());
        tracing::info!(resource = %key(&resource), "garbage collector: monitoring a custom resource");
        monitors.tasks.spawn(informer.run_boxed(token));
    }

    fn stop_monitor(&self, group: &str, plural: &str) {
        let monitors = self.custom_monitors();
        let mut running = monitors.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(token) = running.remove(&format!("{group}/{plural}")) {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_established_crds_are_monitored_in_their_storage_version() {
        let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "websites.demo.dev"},
            "spec": {"group": "demo.dev", "scope": "Namespaced",
                "names": {"plural": "websites", "kind": "Website"},
                "versions": [{"name": "v1beta1", "served": true, "storage": false},
                             {"name": "v1", "served": true, "storage": true}]}
        }))
        .expect("test CRD decodes");
        assert!(served_resource(&crd).is_none());
        crd.status = serde_json::from_value(json!({
            "acceptedNames": {"plural": "websites", "kind": "Website"},
            "conditions": [{"type": "Established", "status": "True"}]
        }))
        .expect("test status decodes");
        let r = served_resource(&crd).expect("established");
        assert_eq!(r.api_version, "demo.dev/v1");
        assert_eq!(r.plural, "websites");
        assert_eq!(key(&r), "demo.dev/websites");
    }
}
