//! The pod garbage collector's async shell (`PodGCController.Run` / `gc` in
//! `pkg/controller/podgc/gc_controller.go`).
//!
//! ```text
//!   informers: Pods (indexed by spec.nodeName), Nodes
//!   every gcCheckPeriod (20 s): plan (sans-IO)
//!     terminating / terminated / unscheduled terminating ─▶ DELETE grace 0
//!     nodes missing past the quarantine ─▶ GET node: 404? ─▶ each pod: PATCH status
//!        (Failed, DisruptionTarget) ─▶ DELETE grace 0
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::ObjectKey;
use client::indexer::{NODE_NAME_INDEX, pod_node_name_index_func};
use client::shared_informer::SharedIndexInformer;
use client::{SharedClock, SharedInformerFactory};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::{Config, failed_status_patch, plan};
use crate::error::Result;

/// The pod garbage collector.
pub struct PodGcController {
    client: Client,
    factory: SharedInformerFactory,
    pods: SharedIndexInformer<Pod>,
    nodes: SharedIndexInformer<Node>,
    config: Config,
    clock: SharedClock,
    missing_since: BTreeMap<String, Timestamp>,
}

impl PodGcController {
    /// Builds the controller on `factory`'s Pod and Node informers (call before the factory
    /// starts: it adds the pods' node-name index).
    pub fn new(
        client: Client,
        factory: &SharedInformerFactory,
        config: Config,
        clock: SharedClock,
    ) -> Self {
        let pods = factory.informer::<Pod>();
        if !pods.indexer().has_index(NODE_NAME_INDEX) {
            pods.add_indexer(NODE_NAME_INDEX, Arc::new(pod_node_name_index_func));
        }
        PodGcController {
            client,
            factory: factory.clone(),
            pods,
            nodes: factory.informer::<Node>(),
            config,
            clock,
            missing_since: BTreeMap::new(),
        }
    }

    /// Runs a pass every `check_period` until `shutdown` fires.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        self.factory.start(&shutdown);
        if !self.factory.wait_for_cache_sync(&shutdown).await {
            return Ok(());
        }
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = self.clock.sleep(self.config.check_period) => {}
            }
            self.gc().await;
        }
    }

    /// One pass.
    pub async fn gc(&mut self) {
        let now = self.clock.wall();
        let pods = self.pods.indexer().list();
        let nodes = self.nodes.indexer().list();
        let pod_refs: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let node_map: BTreeMap<String, &Node> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone().map(|name| (name, n.as_ref())))
            .collect();
        let planned = plan(
            &pod_refs,
            &node_map,
            &mut self.missing_since,
            &self.config,
            now,
        );
        for key in &planned.terminating {
            self.fail_and_delete(key, false, "terminating on an out-of-service node", now)
                .await;
        }
        if !planned.terminated.is_empty() {
            tracing::info!(
                count = planned.terminated.len(),
                threshold = self.config.terminated_pod_threshold,
                "garbage collecting terminated pods"
            );
        }
        for key in &planned.terminated {
            self.force_delete(key, "terminated pods over the threshold")
                .await;
        }
        for key in &planned.unscheduled_terminating {
            self.force_delete(key, "terminating and never scheduled")
                .await;
        }
        for node in &planned.nodes_to_verify {
            match Api::<Node>::all(self.client.clone()).get_opt(node).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(e) => {
                    tracing::warn!(node, error = %e, "could not confirm the node is gone");
                    continue;
                }
            }
            let on_node = self
                .pods
                .indexer()
                .by_index(NODE_NAME_INDEX, node)
                .unwrap_or_default();
            for pod in on_node {
                let key = ObjectKey::from_meta(&pod.metadata);
                tracing::info!(pod = %key, node, "found orphaned pod assigned to the node, deleting");
                self.fail_and_delete(&key, true, "its node no longer exists", now)
                    .await;
            }
            self.missing_since.remove(node);
        }
    }

    /// `markFailedAndDeletePodWithCondition`.
    async fn fail_and_delete(&self, key: &ObjectKey, condition: bool, why: &str, now: Timestamp) {
        let Some(pod) = self.pods.indexer().get_by_key(key) else {
            return;
        };
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            key.namespace.as_deref().unwrap_or("default"),
        );
        if let Some(patch) = failed_status_patch(&pod, condition, now)
            && let Err(e) = api
                .patch_status(&key.name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
        {
            if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                tracing::warn!(pod = %key, error = %e, "marking the pod Failed");
            }
            return;
        }
        self.force_delete(key, why).await;
    }

    /// `DeletePod` with grace period 0 and a UID precondition.
    async fn force_delete(&self, key: &ObjectKey, why: &str) {
        let uid = self
            .pods
            .indexer()
            .get_by_key(key)
            .and_then(|p| p.metadata.uid.clone());
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            key.namespace.as_deref().unwrap_or("default"),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => tracing::info!(pod = %key, "pod GC: deleted ({why})"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(pod = %key, error = %e, "pod GC: delete failed"),
        }
    }
}
