//! The ClusterRole aggregation controller's async shell: the handlers, the queue and
//! `syncClusterRole`'s apply of `pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go`.

use std::sync::Arc;

use apimachinery::{ObjectKey, Selector};
use client::{Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Aggregation, FIELD_MANAGER, aggregate, apply_body};
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// The workers kube-controller-manager runs it with (`startClusterRoleAggregationController`).
pub const WORKERS: usize = 5;

/// The ClusterRole aggregation controller (cheap to clone).
#[derive(Clone)]
pub struct ClusterRoleAggregationController {
    cluster_roles: Lister<ClusterRole>,
    /// Names of aggregated ClusterRoles (cluster-scoped keys).
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl ClusterRoleAggregationController {
    /// Builds the controller on the factory's ClusterRole informer.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let informer = factory.informer::<ClusterRole>();
        let this = ClusterRoleAggregationController {
            cluster_roles: Lister::new(informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("ClusterRoleAggregator", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("clusterrole-aggregation")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |_, _| add.enqueue())
                .on_update(move |_, _| update.enqueue())
                .on_delete(move |_| delete.enqueue()),
        );
        this
    }

    /// `enqueue`: any change to any ClusterRole may change what an aggregated one gathers,
    /// so every ClusterRole with an aggregation rule is queued.
    fn enqueue(&self) {
        for role in self.cluster_roles.list(None, &Selector::everything()) {
            if role.aggregation_rule.is_some()
                && let Some(name) = role.metadata.name.as_deref()
            {
                self.queue.add(ObjectKey::new(None, name));
            }
        }
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            // A sync follows the change that queued it (usually another ClusterRole's), not
            // the aggregated role's own last write.
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncClusterRole`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(role) = self.cluster_roles.get(None, &key.name) else {
            return Ok(None);
        };
        let all = self.cluster_roles.list(None, &Selector::everything());
        let rules = match aggregate(&role, &all)? {
            Aggregation::NotAggregated => return Ok(None),
            Aggregation::UpToDate => {
                client::trace::set_summary(format!("{}: rules up to date", key.name));
                return Ok(None);
            }
            Aggregation::Update(rules) => rules,
        };
        let api: Api<ClusterRole> = Api::all(self.executor.client());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let body = apply_body(&key.name, &rules);
        if let Err(e) = api.patch(&key.name, &params, &Patch::Apply(&body)).await {
            let e = Error::from_kube("apply", format!("ClusterRole {}", key.name), e);
            // A server without server-side apply: Kubernetes falls back to an update.
            if !matches!(e, Error::Api { code: 415, .. }) {
                return Err(e);
            }
            let mut updated = (*role).clone();
            updated.rules = Some(rules.clone());
            api.replace(&key.name, &Default::default(), &updated)
                .await
                .map_err(|e| Error::from_kube("update", format!("ClusterRole {}", key.name), e))?;
        }
        client::trace::set_summary(format!(
            "{}: aggregated {} rule{}",
            key.name,
            rules.len(),
            if rules.len() == 1 { "" } else { "s" }
        ));
        Ok(None)
    }
}
