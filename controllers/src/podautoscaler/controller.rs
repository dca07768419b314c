//! The horizontal pod autoscaler's async shell (`pkg/controller/podautoscaler/horizontal.go`:
//! `NewHorizontalController`, `worker`, `reconcileKey`, `reconcileAutoscaler`'s reads and
//! writes, `updateStatusIfNeeded`), over any [`MetricsSource`].
//!
//! ```text
//!   HPA informer ─ add/update ─▶ queue "horizontalpodautoscaler", after the sync period
//!   sync: GET {target}/scale ─▶ pods by status.selector (Pod lister), PodMetrics list
//!         ─▶ reconcile ─▶ PUT {target}/scale when rescaling (re-read and retried on conflict)
//!         ─▶ Events ─▶ PUT hpa/status when it changed ─▶ again after the sync period
//! ```
//!
//! As in Kubernetes every key is synced once per `--horizontal-pod-autoscaler-sync-period`
//! (15 s), a new or changed autoscaler included (the fixed-interval rate limiter of
//! `NewDefaultHPARateLimiter`); a failed sync is logged and traced, not retried sooner.
//!
//! Simplification: the target's resource is the kind's lower-cased plural (kube's
//! `ApiResource::from_gvk`), not a discovery RESTMapper lookup, so an unknown kind fails as a
//! 404 of its guessed resource rather than `no matches for kind`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef, Selector};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::behavior::History;
use super::metrics::MetricsSource;
use super::reconcile::{Decision, HpaEvent, Observed, after_rescale, failed_get_scale, reconcile};
use super::replica_calculator::{CalculatorConfig, PodInfo, pod_info};
use crate::action::Event;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The default `--horizontal-pod-autoscaler-sync-period`.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(15);

/// How many times a `/scale` write is retried after a conflict (`retry.DefaultRetry`).
const SCALE_WRITE_ATTEMPTS: usize = 5;

/// The error text client-go gives for a failed request: the `Status` message the server sent.
pub fn client_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// The horizontal pod autoscaler controller (cheap to clone).
#[derive(Clone)]
pub struct HorizontalController<M: MetricsSource + Clone + 'static> {
    hpas: Lister<HorizontalPodAutoscaler>,
    pods: Lister<Pod>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    source: M,
    history: Arc<Mutex<HashMap<ObjectKey, History>>>,
    config: CalculatorConfig,
    sync_period: Duration,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl<M: MetricsSource + Clone + 'static> HorizontalController<M> {
    /// Builds the controller on the factory's informers and registers its handlers; every
    /// autoscaler is synced every `sync_period`.
    pub fn new(
        factory: &SharedInformerFactory,
        executor: Executor,
        source: M,
        sync_period: Duration,
    ) -> Self {
        let hpa_informer = factory.informer::<HorizontalPodAutoscaler>();
        let this = HorizontalController {
            hpas: Lister::new(hpa_informer.indexer().clone()),
            pods: Lister::new(factory.informer::<Pod>().indexer().clone()),
            queue: RateLimitingQueue::on_clock("horizontalpodautoscaler", executor.clock().clone()),
            executor,
            source,
            history: Arc::default(),
            config: CalculatorConfig::default(),
            sync_period,
            metrics: Arc::new(ControllerMetrics::new("horizontalpodautoscaler")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        hpa_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |h: Arc<HorizontalPodAutoscaler>, _| add.enqueue(h.as_ref()))
                .on_update(move |_, h: Arc<HorizontalPodAutoscaler>| update.enqueue(h.as_ref()))
                .on_delete(move |h: DeltaObject<HorizontalPodAutoscaler>| {
                    if let Ok(mut history) = delete.history.lock() {
                        history.remove(&h.key());
                    }
                }),
        );
        this
    }

    /// `enqueueHPA`: `AddRateLimited` with the fixed interval limiter.
    fn enqueue(&self, hpa: &HorizontalPodAutoscaler) {
        self.queue.add_after(ObjectKey::of(hpa), self.sync_period);
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
            object_context: Some(object_context_of(&self.hpas)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    fn record(&self, hpa: &HorizontalPodAutoscaler, e: &HpaEvent) {
        self.executor.record(&Event {
            regarding: ObjectRef::from_object(hpa),
            type_: if e.type_ == "Warning" {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.into(),
            message: e.message.clone(),
        });
    }

    /// The target's `/scale` API and reference.
    fn target_api(&self, hpa: &HorizontalPodAutoscaler) -> (Api<DynamicObject>, ObjectRef) {
        let spec = hpa.spec.clone().unwrap_or_default();
        let target = ObjectRef {
            api_version: spec
                .scale_target_ref
                .api_version
                .clone()
                .unwrap_or_else(|| "v1".into()),
            kind: spec.scale_target_ref.kind.clone(),
            namespace: hpa.metadata.namespace.clone(),
            name: spec.scale_target_ref.name.clone(),
            uid: String::new(),
        };
        (self.executor.dynamic(&target), target)
    }

    /// `reconcileKey` for one key: synced again after the sync period while it exists.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(hpa) = self.hpas.get(key.namespace.as_deref(), &key.name) else {
            return Ok(None);
        };
        let now = self.executor.clock().wall();
        let (api, target) = self.target_api(&hpa);
        let scale = match api.get_scale(&target.name).await {
            Ok(s) => s,
            Err(e) => {
                let err = client_error_text(&e);
                let (status, event) = failed_get_scale(&hpa, &err, now);
                self.record(&hpa, &event);
                self.write_status(&hpa, status).await;
                self.trace_error(
                    key,
                    &format!(
                        "failed to query scale subresource for {}/{}: {err}",
                        target.kind, target.name
                    ),
                );
                return Ok(Some(self.sync_period));
            }
        };
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let selector_text = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        let pods: Vec<PodInfo> = match Selector::parse(&selector_text) {
            Ok(selector) if !selector_text.is_empty() => self
                .pods
                .list(key.namespace.as_deref(), &selector)
                .iter()
                .map(|p| pod_info(p))
                .collect(),
            _ => Vec::new(),
        };
        let namespace = key.namespace.clone().unwrap_or_default();
        let metrics = self.source.pod_metrics(&namespace, &selector_text).await;
        let observed = Observed {
            scale_replicas: current,
            selector: &selector_text,
            pods: &pods,
            metrics: &metrics,
        };
        let mut decision = {
            let mut all = self.history.lock().unwrap_or_else(|e| e.into_inner());
            let history = all.entry(key.clone()).or_default();
            reconcile(&hpa, &observed, history, &self.config, now)
        };
        if decision.rescale {
            let result = self
                .write_scale(&api, &target.name, scale, decision.desired_replicas)
                .await;
            after_rescale(&mut decision, result, now);
        }
        self.trace(key, &decision);
        for e in &decision.events {
            self.record(&hpa, e);
        }
        self.write_status(&hpa, decision.status).await;
        Ok(Some(self.sync_period))
    }

    /// The decision in the sync's span and the log: the summary with the arithmetic (the span's
    /// one line), the arithmetic alone as the reason.
    fn trace(&self, key: &ObjectKey, decision: &Decision) {
        tracing::info!(hpa = %key, "{}", decision.summary);
        for a in &decision.arithmetic {
            tracing::debug!(hpa = %key, "{a}");
        }
        // The tree's line names the decision and how it was reached (`miniplane trace hpa/X`).
        if decision.arithmetic.is_empty() {
            client::trace::set_summary(&decision.summary);
        } else {
            client::trace::set_summary(format!(
                "{}: {}",
                decision.summary,
                decision.arithmetic.join("; ")
            ));
        }
        if client::trace::recording() {
            client::trace::set_attribute(
                client::trace::attr::REASON,
                decision.arithmetic.join("; ").as_str(),
            );
        }
        if let Some(err) = &decision.error {
            self.trace_error(key, err);
        }
    }

    fn trace_error(&self, key: &ObjectKey, err: &str) {
        tracing::warn!(hpa = %key, "{err}");
        client::trace::set_attribute(client::trace::attr::ERROR, err);
    }

    /// Writes `spec.replicas` of the target's `/scale`, re-reading it after a conflict.
    async fn write_scale(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        mut scale: Scale,
        replicas: i32,
    ) -> Result<(), String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
            match api
                .replace_scale(name, &PostParams::default(), &scale)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < SCALE_WRITE_ATTEMPTS => {
                    match api.get_scale(name).await {
                        Ok(latest) => scale = latest,
                        Err(e) => tracing::warn!(%name, "re-reading the scale: {e}"),
                    }
                }
                Err(e) => return Err(client_error_text(&e)),
            }
        }
    }

    /// `updateStatusIfNeeded`: PUT `/status` when the status changed; a failure is an Event.
    async fn write_status(
        &self,
        hpa: &HorizontalPodAutoscaler,
        status: HorizontalPodAutoscalerStatus,
    ) {
        if hpa.status.as_ref() == Some(&status) {
            return;
        }
        let mut updated = hpa.clone();
        updated.status = Some(status);
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(
            self.executor.client(),
            hpa.metadata.namespace.as_deref().unwrap_or_default(),
        );
        if let Err(e) = api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            let err = client_error_text(&e);
            self.record(
                hpa,
                &HpaEvent {
                    type_: "Warning",
                    reason: "FailedUpdateStatus",
                    message: err.clone(),
                },
            );
            tracing::warn!(hpa = %name, "failed to update status: {err}");
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
