//! The ServiceAccount controller's async shell: the handlers, the queue and `syncNamespace`'s
//! create of `pkg/controller/serviceaccount/serviceaccounts_controller.go`.

use std::sync::Arc;

use apimachinery::ObjectKey;
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// The ServiceAccount controller (cheap to clone).
#[derive(Clone)]
pub struct ServiceAccountsController {
    namespaces: Lister<Namespace>,
    service_accounts: Lister<ServiceAccount>,
    /// Namespace names (cluster-scoped keys).
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl ServiceAccountsController {
    /// Builds the controller on the factory's Namespace and ServiceAccount informers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let namespaces = factory.informer::<Namespace>();
        let service_accounts = factory.informer::<ServiceAccount>();
        let this = ServiceAccountsController {
            namespaces: Lister::new(namespaces.indexer().clone()),
            service_accounts: Lister::new(service_accounts.indexer().clone()),
            queue: RateLimitingQueue::on_clock("serviceaccount", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("serviceaccount")),
        };
        let (add, update) = (this.clone(), this.clone());
        namespaces.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |ns: Arc<Namespace>, _| add.enqueue(&ns.metadata))
                .on_update(move |_, ns: Arc<Namespace>| update.enqueue(&ns.metadata)),
        );
        let deleted = this.clone();
        service_accounts.add_event_handler(client::ResourceEventHandlerFuncs::new().on_delete(
            move |sa: DeltaObject<ServiceAccount>| {
                if let Some(ns) = sa.object().metadata.namespace.as_deref() {
                    deleted.queue.add(ObjectKey::new(None, ns));
                }
            },
        ));
        this
    }

    fn enqueue(&self, meta: &ObjectMeta) {
        if let Some(name) = meta.name.as_deref() {
            self.queue.add(ObjectKey::new(None, name));
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
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncNamespace`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(namespace) = self.namespaces.get(None, &key.name) else {
            return Ok(None);
        };
        let missing = super::missing(&namespace, |name| {
            self.service_accounts.get(Some(&key.name), name).is_some()
        });
        if missing.is_empty() {
            client::trace::set_summary(format!("{}: nothing to create", key.name));
            return Ok(None);
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.executor.client(), &key.name);
        let mut first_error = None;
        for name in &missing {
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some((*name).to_owned()),
                    namespace: Some(key.name.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            if let Err(e) = api.create(&PostParams::default(), &sa).await {
                let e = Error::from_kube("create", format!("{}/{name}", key.name), e);
                if !e.is_already_exists() && !e.is_namespace_terminating() {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                client::trace::set_summary(format!(
                    "{}: created ServiceAccount {}",
                    key.name,
                    missing.join(", ")
                ));
                Ok(None)
            }
        }
    }
}
