//! The SharedInformerFactory: client-go's `informers/factory.go`.
//!
//! Every controller asks the factory for the informers it needs; the factory creates one
//! informer per resource type, so a controller-manager running the Deployment and ReplicaSet
//! controllers opens **one** ReplicaSet watch, not two:
//!
//! ```text
//!   let factory = SharedInformerFactory::new(client, resync);
//!   let rs = factory.informer::<ReplicaSet>();   // deployment controller
//!   let rs2 = factory.informer::<ReplicaSet>();  // replicaset controller: the same informer
//!   factory.start(&shutdown);                    // runs every informer not yet running
//!   factory.wait_for_cache_sync(&shutdown).await;
//! ```
//!
//! Informers run on tasks owned by the factory's task tracker; [`SharedInformerFactory::shutdown`]
//! waits for them after the token fires.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{SharedClock, TokioClock};
use crate::list_watch::{ApiListerWatcher, ListerWatcher};
use crate::shared_informer::{HasSynced, SharedIndexInformer, wait_for_cache_sync};

/// One informer per resource type (a cheap-to-clone handle).
#[derive(Clone)]
pub struct SharedInformerFactory {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    default_resync: Duration,
    clock: SharedClock,
    informers: Mutex<HashMap<TypeId, Entry>>,
    tracker: TaskTracker,
    /// Given to every informer: traces the deliveries handlers react to.
    tracer: Mutex<crate::trace::Tracer>,
    /// Informers built by [`SharedInformerFactory::informer`] decode objects without
    /// managedFields.
    without_managed_fields: AtomicBool,
}

struct Entry {
    /// A `SharedIndexInformer<K>` for the entry's type.
    informer: Box<dyn Any + Send + Sync>,
    runner: Arc<dyn RunInformer>,
    started: bool,
}

/// The type-erased part of an informer the factory needs.
trait RunInformer: HasSynced {
    fn run(&self, shutdown: CancellationToken) -> futures::future::BoxFuture<'static, ()>;
}

impl<K> RunInformer for SharedIndexInformer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
{
    fn run(&self, shutdown: CancellationToken) -> futures::future::BoxFuture<'static, ()> {
        self.run_boxed(shutdown)
    }
}

impl SharedInformerFactory {
    /// A factory whose informers list and watch through `client` (all namespaces), with
    /// `default_resync` for handlers that do not choose their own (zero: none).
    pub fn new(client: Client, default_resync: Duration) -> Self {
        Self::with_clock(client, default_resync, TokioClock::shared())
    }

    /// A factory on the given clock.
    pub fn with_clock(client: Client, default_resync: Duration, clock: SharedClock) -> Self {
        SharedInformerFactory {
            shared: Arc::new(Shared {
                client,
                default_resync,
                clock,
                informers: Mutex::new(HashMap::new()),
                tracker: TaskTracker::new(),
                tracer: Mutex::new(crate::trace::Tracer::disabled()),
                without_managed_fields: AtomicBool::new(false),
            }),
        }
    }

    /// Traces the informers' deliveries with `tracer`: informers created from now on (call
    /// before asking for informers).
    pub fn set_tracer(&self, tracer: crate::trace::Tracer) {
        *self.shared.tracer.lock().unwrap_or_else(|p| p.into_inner()) = tracer;
    }

    /// Informers created from now on by [`SharedInformerFactory::informer`] keep objects
    /// without `metadata.managedFields`: kube-controller-manager's factory does the same with
    /// its `trim` transform (`informers.WithTransform`). See [`crate::without_managed_fields`].
    pub fn set_without_managed_fields(&self) {
        self.shared
            .without_managed_fields
            .store(true, Ordering::Relaxed);
    }

    fn informers(&self) -> MutexGuard<'_, HashMap<TypeId, Entry>> {
        self.shared
            .informers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The shared informer for `K`, watching all namespaces through the API server.
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let client = self.shared.client.clone();
        let without_managed_fields = self.shared.without_managed_fields.load(Ordering::Relaxed);
        self.informer_with(move || {
            let lw = ApiListerWatcher::new(Api::<K>::all(client));
            Arc::new(if without_managed_fields {
                lw.without_managed_fields()
            } else {
                lw
            })
        })
    }

    /// The shared informer for `K`; if there is none yet, it is built over the lister-watcher
    /// `make` returns (tests pass a [`crate::fake_source::FakeSource`]).
    pub fn informer_with<K>(
        &self,
        make: impl FnOnce() -> Arc<dyn ListerWatcher<K>>,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Debug + Send + Sync + 'static,
    {
        let mut informers = self.informers();
        if let Some(existing) = informers
            .get(&TypeId::of::<K>())
            .and_then(|entry| entry.informer.downcast_ref::<SharedIndexInformer<K>>())
        {
            return existing.clone();
        }
        let informer = SharedIndexInformer::with_clock(
            make(),
            self.shared.default_resync,
            self.shared.clock.clone(),
        );
        informer.set_tracer(
            self.shared
                .tracer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        );
        informers.insert(
            TypeId::of::<K>(),
            Entry {
                informer: Box::new(informer.clone()),
                runner: Arc::new(informer.clone()),
                started: false,
            },
        );
        informer
    }

    /// Starts every informer not yet running; call again after asking for more informers.
    pub fn start(&self, shutdown: &CancellationToken) {
        for entry in self.informers().values_mut() {
            if !entry.started {
                entry.started = true;
                self.shared
                    .tracker
                    .spawn(entry.runner.run(shutdown.clone()));
            }
        }
    }

    /// Waits until every started informer has synced; false if `shutdown` fired first.
    pub async fn wait_for_cache_sync(&self, shutdown: &CancellationToken) -> bool {
        let runners: Vec<Arc<dyn RunInformer>> = self
            .informers()
            .values()
            .filter(|entry| entry.started)
            .map(|entry| entry.runner.clone())
            .collect();
        let synced: Vec<&dyn HasSynced> = runners
            .iter()
            .map(|r| r.as_ref() as &dyn HasSynced)
            .collect();
        wait_for_cache_sync(&synced, shutdown).await
    }

    /// Waits for every informer task to finish (after the shutdown token fired).
    pub async fn shutdown(&self) {
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_source::FakeSource;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    /// A kube client whose every request fails: the tests' informers use fakes.
    fn offline_client() -> Client {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn one_informer_per_type_started_and_synced() {
        let factory = SharedInformerFactory::new(offline_client(), Duration::ZERO);
        let pods = FakeSource::<Pod>::new();
        pods.add(Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some("p".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        let a = factory.informer_with::<Pod>(|| Arc::new(pods.clone()));
        let b = factory.informer_with::<Pod>(|| panic!("the existing informer is reused"));
        let rs = factory.informer_with::<ReplicaSet>(|| Arc::new(FakeSource::<ReplicaSet>::new()));
        let shutdown = CancellationToken::new();
        factory.start(&shutdown);
        factory.start(&shutdown); // idempotent
        assert!(factory.wait_for_cache_sync(&shutdown).await);
        assert!(a.has_synced() && rs.has_synced());
        assert_eq!(b.indexer().len(), 1, "both handles share one cache");
        let lists = pods
            .requests()
            .iter()
            .filter(|r| matches!(r, crate::fake_source::Request::List(_)))
            .count();
        assert_eq!(lists, 1, "one list for the shared Pod informer");
        shutdown.cancel();
        factory.shutdown().await;
    }
}
