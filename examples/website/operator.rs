//! The Website operator, written with miniplane's own `client` crate the way client-go
//! controllers are written: shared informers feed a rate-limited work queue of keys, and
//! workers reconcile one Website at a time from the informers' caches.
//!
//! ```text
//!  informers: Website ──────────────┐ on add/update/delete: queue.add(ns/name)
//!             Deployment, Service ──┘ on change: queue.add(their owner Website)
//!  worker: key = queue.get() ─▶ sync(key) ─▶ ok: forget   error: add_rate_limited
//!  sync:  gone?                → nothing (a deleted Website is cleaned up before it goes)
//!         being deleted?       → delete Deployment + Service, drop the finalizer
//!         no finalizer yet?    → add it (the update event brings the key back)
//!         else                 → server-side apply Deployment + Service,
//!                                patch /status (observedGeneration, availableReplicas, Ready)
//! ```
//!
//! Everything it knows comes from the API: kill it at any point and a new one picks up where
//! the objects are (level-triggered, not edge-triggered).
//!
//! Run against a cluster (`miniplane up` writes `.miniplane/kubeconfig`):
//!
//! ```text
//! kubectl apply -f examples/website/crd.yaml
//! cargo run -p ctl --example website-operator -- .miniplane/kubeconfig
//! kubectl apply -f examples/website/website.yaml
//! ```

#[path = "website.rs"]
mod website;

use std::sync::Arc;
use std::time::Duration;

use apimachinery::ObjectKey;
use client::{
    ClientConfig, ClusterSource, DeltaObject, Lister, RateLimitingQueue, ResourceEventHandlerFuncs,
    SharedInformerFactory, build_client,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use tokio_util::sync::CancellationToken;
use website::{Website, desired_deployment, desired_service, desired_status, finalizers_patch};

/// The field manager of the operator's writes.
const MANAGER: &str = "website-operator";
/// Workers reconciling in parallel (never the same key twice at once: the queue sees to it).
const WORKERS: usize = 2;

/// The operator's caches and queue (cheap to clone).
#[derive(Clone)]
pub struct Operator {
    client: kube::Client,
    websites: Lister<Website>,
    deployments: Lister<Deployment>,
    services: Lister<Service>,
    queue: RateLimitingQueue<ObjectKey>,
}

/// The Website that controls an object, from its controller owner reference.
fn owner_key(meta: &ObjectMeta) -> Option<ObjectKey> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "Website")
        .map(|o| ObjectKey::new(meta.namespace.as_deref(), o.name.clone()))
}

/// Queues the Website that controls an object, if one does.
fn enqueue_owner(queue: &RateLimitingQueue<ObjectKey>, meta: &ObjectMeta) {
    if let Some(key) = owner_key(meta) {
        queue.add(key);
    }
}

impl Operator {
    /// Builds the informers and the handlers that feed the queue.
    pub fn new(client: kube::Client, factory: &SharedInformerFactory) -> Self {
        let queue = RateLimitingQueue::new("website");
        let websites = factory.informer::<Website>();
        let deployments = factory.informer::<Deployment>();
        let services = factory.informer::<Service>();
        let (q1, q2, q3) = (queue.clone(), queue.clone(), queue.clone());
        websites.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .on_add(move |w: Arc<Website>, _| q1.add(ObjectKey::of(w.as_ref())))
                .on_update(move |_, w: Arc<Website>| q2.add(ObjectKey::of(w.as_ref())))
                .on_delete(move |w: DeltaObject<Website>| {
                    q3.add(ObjectKey::of(w.object().as_ref()))
                }),
        );
        let (q4, q5, q6) = (queue.clone(), queue.clone(), queue.clone());
        deployments.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .on_add(move |d: Arc<Deployment>, _| enqueue_owner(&q4, &d.metadata))
                .on_update(move |_, d: Arc<Deployment>| enqueue_owner(&q5, &d.metadata))
                .on_delete(move |d: DeltaObject<Deployment>| {
                    enqueue_owner(&q6, &d.object().metadata)
                }),
        );
        let (q7, q8) = (queue.clone(), queue.clone());
        services.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .on_update(move |_, s: Arc<Service>| enqueue_owner(&q7, &s.metadata))
                .on_delete(move |s: DeltaObject<Service>| enqueue_owner(&q8, &s.object().metadata)),
        );
        Operator {
            client,
            websites: Lister::new(websites.indexer().clone()),
            deployments: Lister::new(deployments.indexer().clone()),
            services: Lister::new(services.indexer().clone()),
            queue,
        }
    }

    /// One worker: takes keys until the queue shuts down.
    async fn worker(self) {
        while let Some(key) = self.queue.get().await {
            match self.sync(&key).await {
                Ok(()) => self.queue.forget(&key),
                Err(e) => {
                    eprintln!("website-operator: sync {key}: {e}");
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }

    /// Brings the world in line with one Website (see the module docs).
    pub async fn sync(&self, key: &ObjectKey) -> Result<(), kube::Error> {
        let ns = key.namespace.as_deref().unwrap_or("default");
        let Some(website) = self.websites.get(Some(ns), &key.name) else {
            return Ok(());
        };
        let api: Api<Website> = Api::namespaced(self.client.clone(), ns);
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        if website.is_deleting() {
            if website.has_finalizer() {
                ignore_not_found(
                    deployments
                        .delete(&key.name, &DeleteParams::background())
                        .await,
                )?;
                ignore_not_found(
                    services
                        .delete(&key.name, &DeleteParams::background())
                        .await,
                )?;
                let patch = finalizers_patch(&website, false);
                ignore_not_found(
                    api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )?;
                println!("website-operator: cleaned up {key}");
            }
            return Ok(());
        }
        if !website.has_finalizer() {
            let patch = finalizers_patch(&website, true);
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(());
        }
        let apply = PatchParams::apply(MANAGER).force();
        deployments
            .patch(
                &key.name,
                &apply,
                &Patch::Apply(desired_deployment(&website)),
            )
            .await?;
        services
            .patch(&key.name, &apply, &Patch::Apply(desired_service(&website)))
            .await?;
        let deployment = self.deployments.get(Some(ns), &key.name);
        let service = self.services.get(Some(ns), &key.name);
        let status = desired_status(
            &website,
            deployment.as_deref(),
            service.as_deref(),
            &website::now(),
        );
        if website.status.as_ref() != Some(&status) {
            let patch = serde_json::json!({"status": status});
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
}

/// `Ok` for a 404: the object is already gone.
fn ignore_not_found<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs the operator against `client` until `shutdown` fires.
pub async fn run(client: kube::Client, shutdown: CancellationToken) {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let operator = Operator::new(client, &factory);
    factory.start(&shutdown);
    if !factory.wait_for_cache_sync(&shutdown).await {
        return;
    }
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(operator.clone().worker()))
        .collect();
    shutdown.cancelled().await;
    operator.queue.shut_down();
    for w in workers {
        let _ = w.await;
    }
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let source = match std::env::args().nth(1) {
        Some(path) => ClusterSource::Kubeconfig(path.into()),
        None => ClusterSource::Infer,
    };
    let client = build_client(&ClientConfig::new(source).tracing(false)).await?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    println!("website-operator: running (Ctrl-C to stop)");
    run(client, shutdown).await;
    Ok(())
}
