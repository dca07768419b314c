//! The async shell: informers in, decisions out (`pkg/scheduler/scheduler.go`,
//! `schedule_one.go` `ScheduleOne` / `bindingCycle` / `handleSchedulingFailure`).
//!
//! ```text
//!   loop: pop a pod ─▶ latest pod from the informer ─▶ Algorithm::schedule_pod (sync, under
//!         the state lock) ─┬─ ok:  assume on the node, spawn the binding (≤ MAX_IN_FLIGHT
//!                          │       writes at once), pop the next pod right away
//!                          └─ err: DefaultPreemption (crate::preemption: victims evicted,
//!                                  nominatedNodeName), back to the queue, PodScheduled=False
//!                                  + FailedScheduling
//!   binding task: PreBind (VolumeBinding: PUT PVs, PATCH claims with selected-node, wait
//!                 until bound) ─▶ POST pods/{name}/binding ─┬─ ok:  queue.done, event Scheduled
//!                                                           └─ err: unreserve, forget, back
//!                                                              to the queue, event
//! ```
//!
//! Informers: pods (all but finished ones), nodes, namespaces (their labels, for
//! InterPodAffinity's `namespaceSelector`), and PersistentVolumeClaims, PersistentVolumes and
//! StorageClasses (for VolumeBinding). Unlike kube-scheduler, no informer for Services,
//! ReplicaSets and the like: the default spreading counts a pod's controller's pods instead
//! (see [`crate::plugins::pod_topology_spread`]).
//!
//! One lock guards the queue, the cache and the algorithm; it is only held by synchronous
//! code (a handler call, one decision), never across an `.await`.
//!
//! Traced (unless `--tracing=false`): each decision is a "schedule pod" span under the watch
//! event that queued the pod ([`crate::decision_trace`]), and the binding request continues
//! it, so the kubelet that sees the bound pod continues the same trace.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use apimachinery::{EventType, ObjectKey};
use client::events::{ApiEventSink, new_recorder_with_capacity};
use client::list_watch::ApiListerWatcher;
use client::trace::{Cause, SpanContext, SpanKind};
use client::{ClientConfig, EventRecorder, SharedClock, SharedInformerFactory, Tracer};
use k8s_openapi::api::core::v1::{
    Namespace, Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Result;
use crate::cache::Cache;
use crate::decision_trace;
use crate::eventhandlers::{
    claim_handler, class_handler, namespace_handler, node_handler, pod_handler, volume_handler,
};
use crate::metrics::{self, Metrics};
use crate::node_info::PodInfo;
use crate::plugins::volume_binding::{self, PodVolumes};
use crate::prebind::{BindError, PreBindWriter};
use crate::queue::SchedulingQueue;
use crate::schedule_one::{Algorithm, ScheduleError, ScheduleResult};

/// The component name of the scheduler's spans.
pub const COMPONENT: &str = "kube-scheduler";

/// Bindings and status writes in flight at once (the binding cycles Kubernetes runs in
/// goroutines, bounded here).
pub const MAX_IN_FLIGHT: usize = 64;
/// How many recent decisions are kept for "why this node".
pub const RECENT_DECISIONS: usize = 64;
/// How often unschedulable pods are checked for the 5-minute flush (Kubernetes: 30 s).
const FLUSH_UNSCHEDULABLE_PERIOD: Duration = Duration::from_secs(30);

/// How to run the scheduler.
pub struct Config {
    /// Where the API server is, and client-side throttling (`--kube-api-qps/-burst`).
    pub client: ClientConfig,
    /// Pods with this `spec.schedulerName` are ours (`default-scheduler`).
    pub scheduler_name: String,
    /// Where to serve `/healthz` and `/metrics`, already bound.
    pub listener: Option<TcpListener>,
    /// Seeds the tie-breaking RNG.
    pub seed: u64,
    /// Time source: `None` reads the cluster's clock ([`client::cluster_clock`]: the
    /// machine's, or the virtual one every component follows); tests inject a fake one.
    pub clock: Option<SharedClock>,
    /// `--leader-elect`: schedule only while holding the Lease `kube-system/kube-scheduler`
    /// ([`LEASE_NAME`]); `None`: always schedule.
    pub leader_election: Option<client::LeaderElection>,
}

/// The Lease kube-scheduler campaigns for, in `kube-system`.
pub const LEASE_NAME: &str = "kube-scheduler";

/// The state the lock guards.
pub struct State {
    /// Pending pods.
    pub queue: SchedulingQueue,
    /// Nodes and pods on them.
    pub cache: Cache,
    /// Decision state (scan start, RNG).
    pub algorithm: Algorithm,
    /// The last decisions, newest last ("why this node").
    pub recent: VecDeque<ScheduleResult>,
}

/// What the scheduling loop, the handlers and the binding tasks share.
pub struct Shared {
    state: Mutex<State>,
    /// Woken when the queue may have a pod to pop.
    pub(crate) wake: Notify,
    pub(crate) clock: SharedClock,
    pub(crate) scheduler_name: String,
    metrics: Arc<Metrics>,
    /// Objects the handlers have processed (pods, nodes): start-up waits until they caught
    /// up with the informers' first lists (`WaitForHandlersSync`).
    pub(crate) handled: [AtomicUsize; 2],
    /// Records decisions (disabled: nothing).
    pub(crate) tracer: Tracer,
    /// The watch event that queued each pending pod, when traced (first one wins).
    causes: Mutex<HashMap<ObjectKey, Cause>>,
}

impl Shared {
    /// The state; a poisoned lock is taken over (every update is a single step).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn causes(&self) -> MutexGuard<'_, HashMap<ObjectKey, Cause>> {
        self.causes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the cause of the event being handled as the reason `key` is queued.
    pub(crate) fn remember_cause(&self, key: &ObjectKey) {
        if let Some(cause) = client::trace::take_cause("scheduling") {
            self.causes().entry(key.clone()).or_insert(cause);
        }
    }

    /// Forgets why `key` was queued (it left the queue).
    pub(crate) fn forget_cause(&self, key: &ObjectKey) {
        if self.tracer.is_enabled() {
            self.causes().remove(key);
        }
    }

    /// Where the decision about `pod` goes in a trace: under the event that queued the pod,
    /// else under the pod's last write, else (`Some(None)`) at the root of a new trace;
    /// `None` when tracing is off.
    fn decision_parent(&self, pod: &Pod, key: &ObjectKey) -> Option<Option<SpanContext>> {
        if !self.tracer.is_enabled() {
            return None;
        }
        Some(
            self.causes()
                .remove(key)
                .map(|c| c.context)
                .or_else(|| client::trace::object_context(&pod.metadata)),
        )
    }

    /// Records the span of one decision under `parent` (from [`Shared::decision_parent`])
    /// and returns the context the binding continues. A parent that is not sampled is
    /// carried on with no span, and its decision was not described.
    fn record_decision(
        &self,
        parent: Option<SpanContext>,
        started: SystemTime,
        described: Option<(String, Vec<(String, client::trace::AttributeValue)>)>,
    ) -> Option<SpanContext> {
        if let Some(parent) = parent.filter(|p| !p.sampled) {
            return Some(parent);
        }
        let mut span = match parent {
            Some(parent) => self
                .tracer
                .child(&parent, "schedule pod", SpanKind::Internal),
            None => self.tracer.root("schedule pod", SpanKind::Internal),
        }?
        .started_at(started);
        let (summary, attributes) = described?;
        span.summary = summary;
        span.attributes.extend(attributes);
        span.end();
        let ctx = span.context();
        self.tracer.record(span);
        Some(ctx)
    }
}

/// Talks to the API server for one decision's outcome.
#[derive(Clone)]
struct Writer {
    /// The scheduler's client, continuing the decision's trace inside [`client::trace::under`].
    client: kube::Client,
    recorder: EventRecorder,
    shared: Arc<Shared>,
    /// Ends PreBind's wait for volumes on shutdown.
    stop: CancellationToken,
}

fn object_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

impl Writer {
    /// PreBind (VolumeBinding's volumes, when Reserve left some to write), then POST
    /// `pods/{name}/binding` (`DefaultBinder`), then the outcome into queue and cache; the
    /// requests continue the decision's trace.
    async fn bind(
        self,
        pod: Arc<Pod>,
        key: ObjectKey,
        node: String,
        volumes: Option<PodVolumes>,
        trace: Option<SpanContext>,
    ) {
        let result = match volumes {
            Some(mut volumes) => match crate::prebind::bind_pod_volumes(
                &PreBindWriter {
                    client: &self.client,
                    shared: &self.shared,
                    stop: &self.stop,
                },
                &node,
                &mut volumes,
                trace,
            )
            .await
            {
                Ok(()) => self.post_binding(&key, &node, trace).await.map_err(|err| {
                    self.shared.lock().cache.volumes.restore_all(&volumes);
                    BindError::Bind(err)
                }),
                Err(err) => {
                    // Unreserve: the assumed claims and volumes are forgotten.
                    self.shared.lock().cache.volumes.restore_all(&volumes);
                    Err(BindError::PreBind(err))
                }
            },
            None => self
                .post_binding(&key, &node, trace)
                .await
                .map_err(BindError::Bind),
        };
        let shared = &self.shared;
        let now = shared.clock.now();
        match result {
            Ok(()) => {
                shared.lock().queue.done(&key);
                Metrics::inc(&shared.metrics.scheduled);
                let message = format!("Successfully assigned {key} to {node}");
                self.recorder.event(
                    &object_reference(&pod),
                    EventType::Normal,
                    "Scheduled",
                    &message,
                );
            }
            Err(err) => {
                Metrics::inc(&shared.metrics.errors);
                tracing::warn!(pod = %key, %node, %err, "binding failed");
                {
                    let mut state = shared.lock();
                    state.cache.forget_pod(&key);
                    let gone =
                        matches!(&err, BindError::Bind(e) if e.is_conflict() || e.is_not_found());
                    if gone {
                        // Bound by someone else, or gone: the informer will tell the cache.
                        state.queue.done(&key);
                    } else {
                        state.queue.add_unschedulable_if_not_present(&key, now);
                        state.queue.move_all_to_active_or_backoff(now);
                    }
                }
                shared.wake.notify_one();
                let message = err.to_string();
                self.recorder.event(
                    &object_reference(&pod),
                    EventType::Warning,
                    "FailedScheduling",
                    &message,
                );
            }
        }
    }

    async fn post_binding(
        &self,
        key: &ObjectKey,
        node: &str,
        trace: Option<SpanContext>,
    ) -> Result<(), client::Error> {
        let namespace = key.namespace.as_deref().unwrap_or("default");
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": key.name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
            .create_subresource(
                "binding",
                &key.name,
                &PostParams::default(),
                body.to_string().into_bytes(),
            )
            .map_err(|e| client::Error::from(kube::Error::BuildRequest(e)))?;
        let send = self.client.request_text(request);
        match trace {
            Some(ctx) => client::trace::under(&self.shared.tracer, ctx, send).await,
            None => send.await,
        }
        .map(|_| ())
        .map_err(client::Error::from)
    }

    /// Carries out DefaultPreemption's outcome ([`crate::preemption::shell`]).
    async fn preempt(
        &self,
        pod: &Pod,
        outcome: Option<&crate::preemption::Outcome>,
        scheduler_name: &str,
        trace: Option<SpanContext>,
    ) {
        let Some(outcome) = outcome else { return };
        crate::preemption::shell::PreemptionWriter {
            client: &self.client,
            recorder: &self.recorder,
            tracer: &self.shared.tracer,
            trace,
            now: self.shared.clock.wall().to_string(),
        }
        .carry_out(pod, outcome, scheduler_name)
        .await;
    }

    /// `updatePod` with the PodScheduled=False condition, skipped when the pod already has
    /// that exact condition (`UpdatePodCondition` returning false).
    async fn set_unschedulable(self, pod: Arc<Pod>, message: String, trace: Option<SpanContext>) {
        let current = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        let unchanged = current.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message.as_deref() == Some(message.as_str())
        });
        if unchanged {
            return;
        }
        let now = self.shared.clock.wall().to_string();
        let transition = match current {
            Some(c) if c.status == "False" => {
                c.last_transition_time.as_ref().map(|t| t.0.to_string())
            }
            _ => None,
        }
        .unwrap_or(now);
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": transition,
        }]}});
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let (params, patch) = (PatchParams::default(), Patch::Strategic(patch));
        let patch = api.patch_status(&name, &params, &patch);
        let patched = match trace {
            Some(ctx) => client::trace::under(&self.shared.tracer, ctx, patch).await,
            None => patch.await,
        };
        if let Err(err) = patched {
            tracing::warn!(pod = %name, %err, "could not set PodScheduled=False");
        }
    }
}

/// Runs the scheduler until `shutdown` fires: informers, the scheduling loop, bindings and
/// the optional metrics listener; everything is joined before it returns. With
/// [`Config::leader_election`] the informers fill the caches at once (as kube-scheduler's
/// do, so a standby takes over warm) but pods are scheduled only while the Lease is held;
/// losing it stops everything with [`crate::Error::LeaderElectionLost`].
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<()> {
    // Everything below stops with `stop`: on shutdown, or when leadership is lost.
    let stop = shutdown.child_token();
    let client_config = config.client.clone().user_agent(
        config
            .client
            .user_agent
            .clone()
            .unwrap_or_else(|| COMPONENT.into()),
    );
    let client = client::build_client(&client_config).await?;
    let (tracer, exporter) = client::trace::start(&client_config, COMPONENT).await?;
    let (clock, clock_watcher) = match &config.clock {
        Some(clock) => (clock.clone(), None),
        None => client::cluster_clock::discover(&client)
            .await
            .map_err(crate::Error::Clock)?,
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: SchedulingQueue::new(),
            cache: Cache::new(),
            algorithm: Algorithm::new(config.seed),
            recent: VecDeque::new(),
        }),
        wake: Notify::new(),
        clock: clock.clone(),
        scheduler_name: config.scheduler_name.clone(),
        metrics: Arc::new(Metrics::default()),
        handled: Default::default(),
        tracer: tracer.clone(),
        causes: Mutex::new(HashMap::new()),
    });
    let tasks = TaskTracker::new();
    // The exporter outlives the scheduling loop, to send its last spans.
    let exporting = CancellationToken::new();
    if let Some(exporter) = exporter {
        tasks.spawn(exporter.run(exporting.clone()));
    }
    if let Some(watcher) = clock_watcher {
        tasks.spawn(watcher.run(exporting.clone()));
    }
    if let Some(listener) = config.listener {
        let (metrics, token) = (shared.metrics.clone(), stop.clone());
        tasks.spawn(async move {
            if let Err(err) = metrics::serve(listener, metrics, token).await {
                tracing::error!(%err, "metrics listener failed");
            }
        });
    }
    let factory = SharedInformerFactory::with_clock(client.clone(), Duration::ZERO, clock.clone());
    factory.set_tracer(tracer);
    let pods = {
        let client = client.clone();
        factory.informer_with::<Pod>(move || {
            // As kube-scheduler (`newPodInformer`): finished pods hold no resources, and the
            // cache keeps pods without their managedFields.
            Arc::new(
                ApiListerWatcher::new(Api::<Pod>::all(client))
                    .field_selector("status.phase!=Succeeded,status.phase!=Failed")
                    .without_managed_fields(),
            )
        })
    };
    pods.add_event_handler(pod_handler(shared.clone()));
    let nodes = factory.informer::<Node>();
    nodes.add_event_handler(node_handler(shared.clone()));
    let namespaces = factory.informer::<Namespace>();
    namespaces.add_event_handler(namespace_handler(shared.clone()));
    factory
        .informer::<PersistentVolumeClaim>()
        .add_event_handler(claim_handler(shared.clone()));
    factory
        .informer::<PersistentVolume>()
        .add_event_handler(volume_handler(shared.clone()));
    factory
        .informer::<StorageClass>()
        .add_event_handler(class_handler(shared.clone()));
    let (recorder, broadcaster) = new_recorder_with_capacity(
        Arc::new(ApiEventSink::new(client.clone())),
        &config.scheduler_name,
        clock.clone(),
        10_000,
    );
    tasks.spawn(broadcaster.run(stop.clone()));
    factory.start(&stop);
    let mut result = Ok(());
    if factory.wait_for_cache_sync(&stop).await
        && wait_for_handlers_sync(
            &shared,
            [pods.indexer().len(), nodes.indexer().len()],
            &stop,
        )
        .await
    {
        let writer = Writer {
            // Built once: each binding continues its decision's trace through `under`.
            client: client::trace::sync_client(&shared.tracer, &client),
            recorder,
            shared: shared.clone(),
            stop: stop.clone(),
        };
        let name = &config.scheduler_name;
        match &config.leader_election {
            None => {
                tracing::info!(scheduler_name = %name, "caches synced, scheduling");
                scheduling_loop(&shared, &pods, writer, &tasks, &stop).await;
            }
            Some(election) => {
                tracing::info!(scheduler_name = %name, "caches synced, campaigning for the lease");
                let (shared, pods, tasks) = (&shared, &pods, &tasks);
                let leadership = client::run_while_leading(
                    &client,
                    election,
                    &clock,
                    &stop,
                    |token| async move {
                        tracing::info!(scheduler_name = %name, "became leader: scheduling");
                        scheduling_loop(shared, pods, writer, tasks, &token).await;
                    },
                )
                .await;
                if leadership.lost {
                    result = Err(crate::Error::LeaderElectionLost);
                }
            }
        }
    }
    stop.cancel();
    exporting.cancel();
    tasks.close();
    tasks.wait().await;
    factory.shutdown().await;
    result
}

/// Waits until the handlers have seen at least `listed` pods and nodes, so the first
/// decisions see every node (a handler may lag behind its informer's cache).
async fn wait_for_handlers_sync(
    shared: &Shared,
    listed: [usize; 2],
    shutdown: &CancellationToken,
) -> bool {
    let deadline = shared.clock.now() + Duration::from_secs(10);
    loop {
        let caught_up = shared
            .handled
            .iter()
            .zip(listed)
            .all(|(seen, listed)| seen.load(Ordering::Relaxed) >= listed);
        if caught_up || shared.clock.now() >= deadline {
            return true;
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = shared.clock.sleep(Duration::from_millis(10)) => {}
        }
    }
}

/// `ScheduleOne` in a loop until shutdown; waits for a wake-up, the next backoff expiry or
/// the periodic flush when the queue has nothing ready.
async fn scheduling_loop(
    shared: &Arc<Shared>,
    pods: &client::SharedIndexInformer<Pod>,
    writer: Writer,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) {
    let writes = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut next_flush = shared.clock.now() + FLUSH_UNSCHEDULABLE_PERIOD;
    while !shutdown.is_cancelled() {
        let now = shared.clock.now();
        let (popped, wake_at) = {
            let mut state = shared.lock();
            if now >= next_flush {
                state.queue.flush_unschedulable_left_over(now);
                next_flush = now + FLUSH_UNSCHEDULABLE_PERIOD;
            }
            let popped = state.queue.pop(now);
            if popped.is_none() {
                // Counting is O(pods): only when idle.
                let (active, backoff, unschedulable, _) = state.queue.lens();
                for (gauge, n) in
                    shared
                        .metrics
                        .pending
                        .iter()
                        .zip([active, backoff, unschedulable])
                {
                    gauge.store(n as u64, Ordering::Relaxed);
                }
            }
            let wake_at = state
                .queue
                .next_backoff_expiry()
                .map_or(next_flush, |t| t.min(next_flush));
            (popped, wake_at)
        };
        let Some(info) = popped else {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = shared.wake.notified() => {}
                () = shared.clock.sleep_until(wake_at) => {}
            }
            continue;
        };
        // Bound the writes in flight: wait for a slot before deciding.
        let permit = tokio::select! {
            () = shutdown.cancelled() => return,
            permit = writes.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let key = info.key;
        let started = SystemTime::now();
        let Some(pod) = pods.get(&key).filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
                && p.metadata.deletion_timestamp.is_none()
        }) else {
            shared.lock().queue.delete(&key);
            shared.forget_cause(&key);
            continue;
        };
        let pod_info = PodInfo::new(pod.clone());
        // DefaultPreemption's decision when no node fits (crate::preemption).
        let mut preemption: Option<crate::preemption::Outcome> = None;
        let parent = shared.decision_parent(&pod, &key);
        let recorded = parent.is_some_and(|p| p.is_none_or(|c| c.sampled));
        let decision = {
            let mut state = shared.lock();
            let state = &mut *state;
            let decision = state
                .algorithm
                .schedule_pod(&pod_info, state.cache.snapshot());
            let described = recorded.then(|| decision_trace::describe(&key.to_string(), &decision));
            // Reserve (VolumeBinding's AssumePodVolumes) for the chosen node.
            let reserved = match &decision {
                Ok(result) => volume_binding::reserve(
                    &pod_info,
                    state.cache.snapshot(),
                    &result.suggested_host,
                ),
                Err(_) => Ok(None),
            };
            match (&decision, &reserved) {
                (Ok(result), Ok(volumes)) => {
                    if let Some(volumes) = volumes {
                        volume_binding::assume(&mut state.cache.volumes, volumes);
                    }
                    state.cache.assume_pod(pod_info, &result.suggested_host);
                    tracing::debug!(decision = %result.summary(), "scheduled");
                }
                (Ok(_), Err(_)) => {
                    state
                        .queue
                        .add_unschedulable_if_not_present(&key, shared.clock.now());
                    state
                        .queue
                        .note_waiting_for_volumes(&key, volume_binding::claim_names(&pod));
                }
                (Err(err), _) => {
                    state
                        .queue
                        .add_unschedulable_if_not_present(&key, shared.clock.now());
                    if let ScheduleError::Fit(fit) = err {
                        preemption = Some(crate::preemption::post_filter(
                            &pod_info,
                            state.cache.snapshot(),
                            fit,
                        ));
                        if fit.waits_for_pods() {
                            state.queue.note_waiting_for_pods(&key);
                        }
                        if fit.waits_for_volumes() {
                            state
                                .queue
                                .note_waiting_for_volumes(&key, volume_binding::claim_names(&pod));
                        }
                    }
                }
            }
            let decision = match (decision, reserved) {
                (Ok(result), Ok(volumes)) => {
                    let host = result.suggested_host.clone();
                    if state.recent.len() == RECENT_DECISIONS {
                        state.recent.pop_front();
                    }
                    state.recent.push_back(result);
                    Ok((host, volumes))
                }
                (Ok(_), Err(err)) => Err(format!(
                    "running Reserve plugin {}: {err}",
                    apimachinery::fmt::go_quote(volume_binding::NAME)
                )),
                (Err(ScheduleError::Fit(fit)), _) => Err(crate::preemption::failure_message(
                    &fit,
                    preemption.as_ref(),
                )),
                (Err(err), _) => Err(err.to_string()),
            };
            (decision, described)
        };
        let (decision, mut described) = decision;
        if let (Some(outcome), Some((summary, attributes)), Err(message)) =
            (&preemption, described.as_mut(), &decision)
        {
            crate::preemption::describe_in_trace(outcome, message, summary, attributes);
        }
        let trace = parent.and_then(|p| shared.record_decision(p, started, described));
        let writer = writer.clone();
        match decision {
            Ok((node, volumes)) => {
                tasks.spawn(async move {
                    writer.bind(pod, key, node, volumes, trace).await;
                    drop(permit);
                });
            }
            Err(message) => {
                tracing::info!(pod = %key, %message, "unschedulable");
                Metrics::inc(&shared.metrics.unschedulable);
                writer.recorder.event(
                    &object_reference(&pod),
                    EventType::Warning,
                    "FailedScheduling",
                    &message,
                );
                let scheduler_name = shared.scheduler_name.clone();
                tasks.spawn(async move {
                    writer
                        .preempt(&pod, preemption.as_ref(), &scheduler_name, trace)
                        .await;
                    writer.set_unschedulable(pod, message, trace).await;
                    drop(permit);
                });
            }
        }
    }
}

/// The address a metrics listener is bound to, for the start-up line.
pub fn listener_address(listener: &Option<TcpListener>) -> Option<SocketAddr> {
    listener.as_ref().and_then(|l| l.local_addr().ok())
}
