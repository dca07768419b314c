//! The pod workers of all simulated nodes: one shared pod informer, dispatch by
//! `spec.nodeName`, one work queue, a few workers that run [`crate::stages::step`] and write
//! what it says.
//!
//! Mirrors `pkg/kubelet/pod_workers.go` (a worker per pod fed by pod updates, re-synced when a
//! timer fires) and `pkg/kubelet/status/status_manager.go` (post the status only when it
//! changed). Unlike a real kubelet, which watches only its own pods
//! (`fieldSelector=spec.nodeName=<me>`), a thousand simulated nodes share **one** pod watch
//! and the handler drops pods bound to nodes this process does not simulate.
//!
//! ```text
//!   pod informer ──handler: nodeName simulated here?──▶ queue(key)
//!   worker: get key ─▶ pod from cache, node state, memory ─▶ stages::step(now)
//!           ─▶ events ─▶ PATCH status (if changed) ─▶ DELETE grace 0 (if terminated)
//!           ─▶ queue.add_after(key, wake_at − now)
//! ```
//!
//! A pod is not synced again for the watch event of its own status write ([`OwnWrites`]), as
//! a real kubelet's config source only reconciles a change of status alone.
//!
//! The kubelet API reports container processes that end through it
//! ([`PodWorkers::process_exited`]: `kill 1`, a main shell's `exit`), as the runtime's events
//! reach a kubelet's PLEG: the pod is queued and its next sync ends that run
//! ([`crate::stages::Runtime`]). A pod on the host's network (`hostNetwork: true`) gets the
//! node's address instead of one from the pod CIDR.
//!
//! Traced (unless `--tracing=false`): each sync is a "kubelet sync pod" span under the event
//! that queued the pod (the binding, or the kubelet's own previous sync for a timed wake-up),
//! naming the stages it went through; its status write and delete continue the trace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use apimachinery::ObjectKey;
use client::impersonation::acting_as;
use client::indexer::NODE_NAME_INDEX;
use client::shared_informer::SharedIndexInformer;
use client::workqueue::Queue;
use client::{ResourceEventHandlerFuncs, SharedClock, Tracer};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, Resource};

use crate::config::StageConfig;
use crate::containers::ProcessExit;
use crate::node::NodeState;
use crate::recorder::Recorder;
use crate::stages::{PodMemory, Runtime, step_with};

/// The "what and why" of one sync: the stages passed, the events, what is written.
fn sync_summary(node: &str, before: &PodMemory, step: &crate::stages::Step) -> String {
    let (from, to) = (before.stage.name(), step.memory.stage.name());
    let mut line = if from == to {
        format!("{node}: {to}")
    } else {
        format!("{node}: {from} → {to}")
    };
    if !step.events.is_empty() {
        let reasons: Vec<&str> = step.events.iter().map(|e| e.reason).collect();
        line.push_str(&format!(" ({})", reasons.join(", ")));
    }
    if let Some(status) = &step.status {
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map_or("?", |c| c.status.as_str());
        line.push_str(&format!(
            "; post status phase {}, Ready {ready}",
            status.phase.as_deref().unwrap_or("?")
        ));
    } else if !step.delete {
        line.push_str("; status unchanged");
    }
    if step.delete {
        line.push_str("; containers stopped: delete the pod");
    }
    line
}

/// PATCHes (JSON merge patch) `pods/<name>/status` and reads from the reply only the
/// resourceVersion it gave the pod: the kubelet does not use the rest, and at thousands of
/// pods decoding it is CPU spent on nothing (client-go's typed client, which the real kubelet
/// uses, decodes it). Errors are what `Api::patch_status` returns.
async fn patch_status_unread(
    client: Client,
    namespace: &str,
    name: &str,
    patch: &impl serde::Serialize,
) -> Result<Option<String>, kube::Error> {
    /// The part of the reply read.
    #[derive(serde::Deserialize)]
    struct Written {
        metadata: WrittenMeta,
    }
    #[derive(serde::Deserialize)]
    struct WrittenMeta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    let mut request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
        .patch_subresource(
            "status",
            name,
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch_status");
    let text = client.request_text(request).await?;
    Ok(serde_json::from_str::<Written>(&text)
        .ok()
        .and_then(|w| w.metadata.resource_version))
}

/// The resourceVersion each pod got from this kubelet's last status write, until the watch
/// event of that write comes back.
///
/// A real kubelet does not sync a pod again when only its status changed: its config source
/// (`pkg/kubelet/config/config.go`, `checkAndUpdatePod`) turns such an update into a
/// RECONCILE, not an UPDATE for the pod worker. Here the pod workers skip exactly the echo of
/// their own status write (the event whose resourceVersion that write returned): any other
/// change, status included (the node lifecycle controller marking the pod not Ready), has
/// another resourceVersion and is synced. If the event comes before the write's reply, the
/// pod is synced once more for nothing, as it always was.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<ObjectKey, String>>);

impl OwnWrites {
    fn map(&self) -> MutexGuard<'_, HashMap<ObjectKey, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that this kubelet's status write gave `key` the resourceVersion `rv`.
    pub fn record(&self, key: ObjectKey, rv: String) {
        self.map().insert(key, rv);
    }

    /// True when `pod` is exactly what the last recorded write made of it. Any update ends the
    /// record: a later one is not an echo.
    pub fn is_echo(&self, pod: &Pod) -> bool {
        self.map()
            .remove(&ObjectKey::of(pod))
            .is_some_and(|rv| pod.metadata.resource_version.as_deref() == Some(rv.as_str()))
    }

    /// Drops the record of a pod the kubelet forgets.
    pub fn forget(&self, key: &ObjectKey) {
        self.map().remove(key);
    }
}

/// How soon a pod is retried after a failed API write.
pub const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The simulated nodes by name.
pub type NodeTable = Arc<RwLock<HashMap<String, Arc<NodeState>>>>;

/// Looks a node up in `table`.
pub fn lookup(table: &NodeTable, name: &str) -> Option<Arc<NodeState>> {
    table
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .cloned()
}

/// The container exits reported for each pod, with the UID of the pod they were reported for.
type ReportedExits = HashMap<ObjectKey, Vec<(String, ProcessExit)>>;

/// The pod workers (cheap to clone; clones share everything).
#[derive(Clone)]
pub struct PodWorkers {
    /// The client it was given.
    base: Client,
    /// `base`, continuing the trace of the sync that sends each request when tracing.
    client: Client,
    pods: SharedIndexInformer<Pod>,
    nodes: NodeTable,
    queue: Queue<ObjectKey>,
    /// The kubelet's memory of each pod, by key (the UID inside tells reincarnations apart).
    memory: Arc<Mutex<HashMap<ObjectKey, PodMemory>>>,
    /// The resourceVersion each pod got from this kubelet's last status write.
    own_writes: Arc<OwnWrites>,
    /// Container processes that ended by themselves ([`PodWorkers::process_exited`]), by pod,
    /// until a sync took them.
    exits: Arc<Mutex<ReportedExits>>,
    recorder: Recorder,
    clock: SharedClock,
    stages: Arc<StageConfig>,
    /// Records the syncs (disabled: nothing).
    tracer: Tracer,
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl PodWorkers {
    /// Pod workers over `pods` for the nodes in `nodes`; call [`PodWorkers::register_handler`]
    /// before the informer starts.
    pub fn new(
        client: Client,
        pods: SharedIndexInformer<Pod>,
        nodes: NodeTable,
        recorder: Recorder,
        clock: SharedClock,
        stages: StageConfig,
    ) -> Self {
        let queue = Queue::with_clock("kubelet_pods", clock.clone());
        PodWorkers {
            base: client.clone(),
            client,
            pods,
            nodes,
            queue,
            memory: Arc::new(Mutex::new(HashMap::new())),
            own_writes: Arc::default(),
            exits: Arc::default(),
            recorder,
            clock,
            stages: Arc::new(stages),
            tracer: Tracer::disabled(),
        }
    }

    /// The same workers, recording their syncs with `tracer`.
    pub fn with_tracer(mut self, tracer: Tracer) -> Self {
        self.client = client::trace::sync_client(&tracer, &self.base);
        self.tracer = tracer;
        self
    }

    fn memory(&self) -> MutexGuard<'_, HashMap<ObjectKey, PodMemory>> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn exits(&self) -> MutexGuard<'_, ReportedExits> {
        self.exits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hook of the container runtime's events: the process of a container of the pod
    /// `key` (with UID `uid`) ended now by itself, outside its plan (`kill 1` or `exit` in its
    /// shell). The pod is synced at once; the container ends with that code and is restarted
    /// or not as for any exit ([`crate::containers`]).
    pub fn process_exited(&self, key: &ObjectKey, uid: &str, exit: ProcessExit) {
        self.exits()
            .entry(key.clone())
            .or_default()
            .push((uid.to_owned(), exit));
        self.queue.add(key.clone());
    }

    /// The container exits reported for `key` that no sync has applied yet (tests read it).
    pub fn reported_exits(&self, key: &ObjectKey) -> Vec<ProcessExit> {
        self.exits()
            .get(key)
            .map(|all| all.iter().map(|(_, e)| e.clone()).collect())
            .unwrap_or_default()
    }

    /// The exits reported for `key`'s incarnation `uid` not yet taken by a sync.
    fn pending_exits(&self, key: &ObjectKey, uid: &str) -> Vec<ProcessExit> {
        self.exits()
            .get(key)
            .map(|all| {
                all.iter()
                    .filter(|(u, _)| u == uid)
                    .map(|(_, e)| e.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Drops the exits a sync applied (and those of other incarnations of the pod).
    fn took_exits(&self, key: &ObjectKey, uid: &str, taken: &[ProcessExit]) {
        let mut all = self.exits();
        if let Some(list) = all.get_mut(key) {
            list.retain(|(u, e)| u == uid && !taken.contains(e));
            if list.is_empty() {
                all.remove(key);
            }
        }
    }

    /// Adds the node-name index and the handler that queues pods bound to simulated nodes.
    pub fn register_handler(&self) {
        if !self.pods.indexer().has_index(NODE_NAME_INDEX) {
            self.pods.add_indexer(
                NODE_NAME_INDEX,
                Arc::new(client::indexer::pod_node_name_index_func),
            );
        }
        let (on_add, on_update, on_delete) = (self.clone(), self.clone(), self.clone());
        self.pods.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| on_add.enqueue(&pod))
                .on_update(move |_, pod: Arc<Pod>| {
                    if !on_update.own_writes.is_echo(&pod) {
                        on_update.enqueue(&pod);
                    }
                })
                .on_delete(move |obj| on_delete.enqueue(obj.object())),
        );
    }

    fn enqueue(&self, pod: &Pod) {
        if node_of(pod).is_some_and(|n| lookup(&self.nodes, n).is_some()) {
            self.queue.add(ObjectKey::of(pod));
        }
    }

    /// Queues every pod bound to `node` (after its heartbeats come back).
    pub fn resync_node(&self, node: &str) {
        for pod in self
            .pods
            .indexer()
            .by_index(NODE_NAME_INDEX, node)
            .unwrap_or_default()
        {
            self.queue.add(ObjectKey::of(pod.as_ref()));
        }
    }

    /// Pods the workers currently remember (tests and benchmarks read it).
    pub fn tracked(&self) -> usize {
        self.memory().len()
    }

    /// Stops the queue; workers return once it is drained.
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// One worker: processes keys until the queue shuts down.
    pub async fn run_worker(self) {
        while let Some(key) = self.queue.get().await {
            let causes = self.queue.take_causes(&key);
            let object = self
                .pods
                .get(&key)
                .filter(|_| self.tracer.is_enabled())
                .and_then(|p| client::trace::object_context(&p.metadata));
            let work = self.tracer.begin_work(
                self.queue.name(),
                &key,
                &causes,
                0,
                "kubelet sync pod",
                object,
            );
            let retry = work.run(self.sync_pod(&key)).await;
            // A timed wake-up continues this sync's trace.
            work.requeue(|| {
                self.queue.done(&key);
                if let Some(after) = retry {
                    self.queue.add_after(key.clone(), after);
                }
            });
            work.finish(None);
        }
    }

    fn forget(&self, key: &ObjectKey, node: Option<&NodeState>) {
        self.own_writes.forget(key);
        self.exits().remove(key);
        if let Some(memory) = self.memory().remove(key)
            && let Some(node) = node
            && let Some(allocator) = node.allocator().as_mut()
        {
            allocator.release(&memory.uid);
        }
    }

    /// Syncs one pod; returns when to look at it again.
    async fn sync_pod(&self, key: &ObjectKey) -> Option<Duration> {
        let Some(pod) = self.pods.get(key) else {
            client::trace::set_summary(format!("{key}: gone, resources released"));
            // Gone from the API: release what the kubelet held for it.
            let uid = self.memory().get(key).map(|m| m.uid.clone());
            if let Some(uid) = uid {
                let nodes: Vec<_> = self
                    .nodes
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect();
                for node in nodes {
                    if let Some(allocator) = node.allocator().as_mut() {
                        allocator.release(&uid);
                    }
                }
                self.memory().remove(key);
            }
            self.exits().remove(key);
            return None;
        };
        let node = lookup(&self.nodes, node_of(&pod)?)?;
        if !node.alive() {
            client::trace::set_summary(format!(
                "{}: heartbeats stopped, doing nothing",
                node.name()
            ));
            return None; // a dead kubelet does nothing; resync_node restarts the work
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let memory = {
            let mut all = self.memory();
            match all.get(key) {
                Some(entry) if entry.uid == uid => entry.clone(),
                previous => {
                    if let Some(old) = previous
                        && let Some(allocator) = node.allocator().as_mut()
                    {
                        allocator.release(&old.uid);
                    }
                    // First sight (or a restarted simulator): rebuild from the posted status.
                    let recovered = PodMemory::recover(&pod, self.clock.wall());
                    if let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref())
                        && let Ok(ip) = ip.parse()
                        && let Some(allocator) = node.allocator().as_mut()
                    {
                        allocator.claim(&uid, ip);
                    }
                    all.insert(key.clone(), recovered.clone());
                    recovered
                }
            }
        };
        // A pod on the host's network has the node's address (`hostNetwork: true`, as
        // `kubectl debug node/...` creates); the others one from the node's pod CIDR.
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let allocated = if host_network {
            Some(node.context.host_ip.parse().ok())
        } else {
            node.allocator().as_mut().map(|a| a.allocate(&uid))
        };
        let ip: std::net::Ipv4Addr = match allocated {
            Some(Some(ip)) => ip,
            Some(None) => {
                tracing::warn!(pod = %key, node = node.name(), "pod CIDR exhausted");
                client::trace::set_summary(format!("{}: pod CIDR exhausted", node.name()));
                return Some(Duration::from_secs(5));
            }
            None => {
                // The sandbox's network needs the node's pod CIDR: the Node informer's
                // handler resyncs the node's pods once the node IPAM controller wrote it.
                client::trace::set_summary(format!(
                    "{}: no pod CIDR yet, waiting for the node IPAM controller",
                    node.name()
                ));
                return None;
            }
        };
        let now = self.clock.wall();
        let exits = self.pending_exits(key, &uid);
        let result = {
            let runtime = Runtime {
                present: &|image| node.has_image(image),
                exits: &exits,
            };
            step_with(
                &pod,
                &memory,
                &node.context,
                &runtime,
                &ip.to_string(),
                now,
                &self.stages,
            )
        };
        node.add_images(&result.pulled);
        self.memory().insert(key.clone(), result.memory.clone());
        if !exits.is_empty() {
            self.took_exits(key, &uid, &exits);
        }
        for event in &result.events {
            self.recorder
                .record(&pod, event, node.name(), node.identity(), now);
        }
        if client::trace::recording() {
            client::trace::set_summary(sync_summary(node.name(), &memory, &result));
            client::trace::set_attribute("node", node.name());
            client::trace::set_attribute("stage", result.memory.stage.name());
        }
        let namespace = key.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        if result.delete {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let who = node.identity().clone();
            return match acting_as(who, api.delete(&key.name, &params)).await {
                Ok(_) => {
                    self.forget(key, Some(&node));
                    None
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                    self.forget(key, Some(&node));
                    None
                }
                Err(e) => {
                    tracing::warn!(pod = %key, error = %e, "deleting terminated pod failed");
                    Some(RETRY_AFTER)
                }
            };
        }
        if let Some(status) = &result.status {
            /// `{"status": ...}`, written straight from the typed status (no JSON tree).
            #[derive(serde::Serialize)]
            struct StatusPatch<'a> {
                status: &'a k8s_openapi::api::core::v1::PodStatus,
            }
            let patch = StatusPatch { status };
            let patching = patch_status_unread(self.client.clone(), namespace, &key.name, &patch);
            match acting_as(node.identity().clone(), patching).await {
                Ok(Some(rv)) => self.own_writes.record(key.clone(), rv),
                Ok(None) => {}
                Err(e) => {
                    if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                        return None;
                    }
                    tracing::warn!(pod = %key, error = %e, "posting pod status failed");
                    return Some(RETRY_AFTER);
                }
            }
        }
        result.wake_at.map(|t| {
            let wait = t.duration_since(now);
            Duration::try_from(wait).unwrap_or(Duration::ZERO)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, rv: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("default".into());
        pod.metadata.name = Some(name.into());
        pod.metadata.resource_version = Some(rv.into());
        pod
    }

    #[test]
    fn only_the_echo_of_the_last_own_write_is_skipped_and_only_once() {
        let own = OwnWrites::default();
        let key = ObjectKey::of(&pod("a", "1"));
        // Nothing written: every update is synced.
        assert!(!own.is_echo(&pod("a", "7")));

        own.record(key.clone(), "7".into());
        assert!(!own.is_echo(&pod("b", "7")), "another pod's event");
        assert!(own.is_echo(&pod("a", "7")), "the write's own event");
        assert!(!own.is_echo(&pod("a", "7")), "a record serves once");

        // The event came before the reply: the record is stale, and the next update (someone
        // else's, at another resourceVersion) is synced and ends it.
        own.record(key.clone(), "9".into());
        assert!(!own.is_echo(&pod("a", "10")));
        assert!(!own.is_echo(&pod("a", "9")), "ended by the update before");

        // A newer write replaces the record; a forgotten pod has none.
        own.record(key.clone(), "11".into());
        own.record(key.clone(), "12".into());
        assert!(!own.is_echo(&pod("a", "11")));
        own.record(key.clone(), "13".into());
        own.forget(&key);
        assert!(!own.is_echo(&pod("a", "13")));
    }
}
