//! The namespace controller's async shell: `pkg/controller/namespace/namespace_controller.go`
//! and the I/O half of `deletion/namespaced_resources_deleter.go` (discovery, listing what
//! is left in the namespace).
//!
//! ```text
//!   Namespace informer ─ add/update with deletionTimestamp ─▶ queue "namespace" ─▶ workers
//!     sync(name): discovery (namespaced resources that can be listed and deleted)
//!                 ─▶ LIST each in the namespace ─▶ sync_namespace (sans-IO)
//!                 ─▶ Executor (DELETE each object, PUT /status, PUT /finalize), requeue
//! ```
//!
//! Unlike Kubernetes, which caches discovery and sends one `DeleteCollection` per resource,
//! each sync runs discovery again and lists every resource (namespace deletions are rare),
//! and objects are deleted one by one with a UID precondition.

use std::sync::Arc;

use apimachinery::{ObjectKey, ObjectRef};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope, verbs};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::namespace::{RemainingObject, ResourceContent, sync_namespace};
use crate::worker::{SyncResult, Workers};

/// The namespace controller (cheap to clone).
#[derive(Clone)]
pub struct NamespaceController {
    namespaces: Lister<Namespace>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl NamespaceController {
    /// Builds the controller on the factory's Namespace informer.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let informer = factory.informer::<Namespace>();
        let this = NamespaceController {
            namespaces: Lister::new(informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("namespace", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("namespace")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |ns: Arc<Namespace>, _| add.enqueue(&ns))
                .on_update(move |_, ns: Arc<Namespace>| update.enqueue(&ns))
                .on_delete(move |ns: DeltaObject<Namespace>| delete.queue.add(ns.key())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn enqueue(&self, ns: &Namespace) {
        if ns.metadata.deletion_timestamp.is_some() {
            self.queue.add(ObjectKey::of(ns));
        }
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
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncNamespaceFromKey`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(ns) = self.namespaces.get(None, &key.name) else {
            return Ok(None);
        };
        if ns.metadata.deletion_timestamp.is_none() {
            return Ok(None);
        }
        let content = self.list_content(&key.name).await?;
        let out = sync_namespace(&ns, &content, self.executor.clock().wall());
        tracing::info!(namespace = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        self.executor
            .execute(out.actions, None)
            .await
            .map(|outcome| outcome.requeue_after)
            .map_err(|f| f.error)
    }

    /// Every object of every namespaced, listable, deletable resource still in `namespace`.
    async fn list_content(&self, namespace: &str) -> Result<Vec<ResourceContent>> {
        let client = self.executor.client().clone();
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| Error::from_kube("discover", "API resources", e))?;
        let mut content = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                if caps.scope != Scope::Namespaced
                    || !caps.supports_operation(verbs::LIST)
                    || !caps.supports_operation(verbs::DELETE)
                {
                    continue;
                }
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &resource);
                let list = api
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| Error::from_kube("list", &resource.plural, e))?;
                let objects: Vec<RemainingObject> = list
                    .items
                    .iter()
                    .map(|obj| RemainingObject {
                        identity: ObjectRef {
                            api_version: resource.api_version.clone(),
                            kind: resource.kind.clone(),
                            namespace: Some(namespace.to_owned()),
                            name: obj.name_any(),
                            uid: obj.uid().unwrap_or_default(),
                        },
                        finalizers: obj.finalizers().to_vec(),
                        being_deleted: obj.metadata.deletion_timestamp.is_some(),
                        grace_period_seconds: obj.metadata.deletion_grace_period_seconds,
                    })
                    .collect();
                if !objects.is_empty() {
                    content.push(ResourceContent {
                        group: resource.group.clone(),
                        resource: resource.plural.clone(),
                        objects,
                    });
                }
            }
        }
        Ok(content)
    }
}
