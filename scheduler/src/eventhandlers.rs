//! Informer handlers that feed the queue and the cache (`pkg/scheduler/eventhandlers.go`).
//!
//! ```text
//!   pod, unassigned, ours ── add/update/delete ──▶ SchedulingQueue
//!   pod, assigned         ── add/update/delete ──▶ Cache   (delete also moves
//!                                                         unschedulable pods back; add,
//!                                                         and label changes, move those
//!                                                         InterPodAffinity or
//!                                                         PodTopologySpread rejected)
//!   node                  ── add/update/delete ──▶ Cache   (add, and updates that change
//!                                                         what filters see, move them)
//!   namespace             ── add/update/delete ──▶ Cache   (labels, for InterPodAffinity's
//!                                                         namespaceSelector)
//!   claim, volume,        ── add/update/delete ──▶ Cache   (VolumeBinding's assume cache; add
//!   storage class                                         and update move the pods VolumeBinding
//!                                                         rejected, as its queueing hints allow)
//! ```

use std::sync::Arc;
use std::sync::atomic::Ordering;

use apimachinery::ObjectKey;
use client::{DeltaObject, ResourceEventHandlerFuncs};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::plugins::volume_binding;
use crate::scheduler::Shared;

fn is_assigned(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// The pod's `spec.priority` (0 when unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// `isPodUpdated`: whether anything but status, resourceVersion, generation and managed
/// fields changed. Our own status writes must not re-queue an unschedulable pod; nor does the
/// trace annotation every write stamps (miniplane's, see `client::trace`).
fn is_pod_updated(old: &Pod, new: &Pod) -> bool {
    let strip = |p: &Pod| {
        let mut p = p.clone();
        p.status = None;
        p.metadata.resource_version = None;
        p.metadata.generation = None;
        p.metadata.managed_fields = None;
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.remove(client::trace::TRACEPARENT_ANNOTATION);
        }
        p
    };
    strip(old) != strip(new)
}

/// `nodeSchedulingPropertiesChange`: whether a node update can make a pod fit.
fn node_scheduling_properties_changed(old: &Node, new: &Node) -> bool {
    let spec = |n: &Node| n.spec.as_ref().map(|s| (s.unschedulable, s.taints.clone()));
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    spec(old) != spec(new)
        || old.metadata.labels != new.metadata.labels
        || allocatable(old) != allocatable(new)
}

impl Shared {
    fn responsible_for(&self, pod: &Pod) -> bool {
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
            == Some(self.scheduler_name.as_str())
            && pod.metadata.deletion_timestamp.is_none()
    }

    /// An assigned pod into the cache; when it is new or relabelled (`AssignedPodAdd` /
    /// `AssignedPodUpdate`), the pods InterPodAffinity or PodTopologySpread rejected may fit.
    fn assigned_pod_added(&self, key: &ObjectKey, pod: Arc<Pod>, changed: bool) {
        let now = self.clock.now();
        let mut state = self.lock();
        state.queue.delete(key);
        state.cache.add_pod(pod);
        if changed && state.queue.move_pods_waiting_for_pods(now) > 0 {
            drop(state);
            self.wake.notify_one();
        }
    }

    fn pod_added(&self, pod: Arc<Pod>) {
        self.handled[0].fetch_add(1, Ordering::Relaxed);
        let key = ObjectKey::of(pod.as_ref());
        if is_assigned(&pod) {
            self.assigned_pod_added(&key, pod, true);
        } else if self.responsible_for(&pod) {
            let now = self.clock.now();
            self.remember_cause(&key);
            self.lock().queue.add(key, priority(&pod), now);
            self.wake.notify_one();
        }
    }

    fn pod_updated(&self, old: Arc<Pod>, new: Arc<Pod>) {
        let key = ObjectKey::of(new.as_ref());
        if is_assigned(&new) {
            // Bound now (our binding confirmed, or someone else's), or relabelled.
            let changed = !is_assigned(&old) || old.metadata.labels != new.metadata.labels;
            self.assigned_pod_added(&key, new, changed);
        } else if !self.responsible_for(&new) {
            self.lock().queue.delete(&key);
        } else if is_pod_updated(&old, &new) {
            let now = self.clock.now();
            self.remember_cause(&key);
            self.lock().queue.update(key, priority(&new), now);
            self.wake.notify_one();
        }
    }

    fn pod_deleted(&self, pod: DeltaObject<Pod>) {
        let key = pod.key();
        self.forget_cause(&key);
        let now = self.clock.now();
        let mut state = self.lock();
        state.queue.delete(&key);
        if state.cache.has_pod(&key) {
            state.cache.remove_pod(&key);
            // Its resources and ports are free: unschedulable pods may fit now.
            state.queue.move_all_to_active_or_backoff(now);
            drop(state);
            self.wake.notify_one();
        }
    }

    fn node_added(&self, node: Arc<Node>) {
        self.handled[1].fetch_add(1, Ordering::Relaxed);
        let now = self.clock.now();
        let mut state = self.lock();
        state.cache.add_node(node);
        state.queue.move_all_to_active_or_backoff(now);
        drop(state);
        self.wake.notify_one();
    }

    fn node_updated(&self, old: Arc<Node>, new: Arc<Node>) {
        let changed = node_scheduling_properties_changed(&old, &new);
        let now = self.clock.now();
        let mut state = self.lock();
        state.cache.add_node(new);
        if changed {
            state.queue.move_all_to_active_or_backoff(now);
            drop(state);
            self.wake.notify_one();
        }
    }

    fn node_deleted(&self, node: DeltaObject<Node>) {
        self.lock().cache.remove_node(&node.key().name);
    }

    fn namespace_changed(&self, namespace: Arc<Namespace>) {
        self.lock().cache.add_namespace(&namespace);
    }

    fn namespace_deleted(&self, namespace: DeltaObject<Namespace>) {
        self.lock().cache.remove_namespace(&namespace.key().name);
    }

    /// Moves the pods VolumeBinding rejected for which `may_help(pod namespace, its claims)`.
    fn move_pods_waiting_for_volumes(
        &self,
        state: &mut crate::scheduler::State,
        may_help: impl Fn(&str, &[String]) -> bool,
    ) -> bool {
        let now = self.clock.now();
        state
            .queue
            .move_pods_waiting_for_volumes(now, |key, claims| {
                may_help(key.namespace.as_deref().unwrap_or(""), claims)
            })
            > 0
    }

    fn claim_changed(&self, pvc: Arc<PersistentVolumeClaim>) {
        let mut state = self.lock();
        state.cache.volumes.set_pvc(pvc.clone());
        let moved = self.move_pods_waiting_for_volumes(&mut state, |namespace, claims| {
            volume_binding::claim_change_may_help(namespace, claims, &pvc)
        });
        drop(state);
        if moved {
            self.wake.notify_one();
        }
    }

    fn claim_deleted(&self, pvc: DeltaObject<PersistentVolumeClaim>) {
        let key = pvc.key();
        let namespace = key.namespace.as_deref().unwrap_or("");
        self.lock().cache.volumes.delete_pvc(namespace, &key.name);
    }

    fn volume_changed(&self, pv: Arc<PersistentVolume>) {
        let mut state = self.lock();
        state.cache.volumes.set_pv(pv);
        // No hint: any volume added or updated may be the one a claim binds to.
        let moved = self.move_pods_waiting_for_volumes(&mut state, |_, _| true);
        drop(state);
        if moved {
            self.wake.notify_one();
        }
    }

    fn volume_deleted(&self, pv: DeltaObject<PersistentVolume>) {
        self.lock().cache.volumes.delete_pv(&pv.key().name);
    }

    fn class_changed(&self, old: Option<Arc<StorageClass>>, new: Arc<StorageClass>) {
        let may_help = volume_binding::class_change_may_help(old.as_deref(), &new);
        let mut state = self.lock();
        state.cache.volumes.set_class(new);
        let moved = may_help && self.move_pods_waiting_for_volumes(&mut state, |_, _| true);
        drop(state);
        if moved {
            self.wake.notify_one();
        }
    }

    fn class_deleted(&self, class: DeltaObject<StorageClass>) {
        self.lock().cache.volumes.delete_class(&class.key().name);
    }
}

/// The pod informer's handler.
pub fn pod_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<Pod> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |pod, _| s1.pod_added(pod))
        .on_update(move |old, new| s2.pod_updated(old, new))
        .on_delete(move |pod| s3.pod_deleted(pod))
}

/// The node informer's handler.
pub fn node_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<Node> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |node, _| s1.node_added(node))
        .on_update(move |old, new| s2.node_updated(old, new))
        .on_delete(move |node| s3.node_deleted(node))
}

/// The namespace informer's handler (kube-scheduler's namespace lister, which
/// InterPodAffinity reads for `namespaceSelector`).
pub fn namespace_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<Namespace> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |namespace, _| s1.namespace_changed(namespace))
        .on_update(move |_, new| s2.namespace_changed(new))
        .on_delete(move |namespace| s3.namespace_deleted(namespace))
}

/// The PersistentVolumeClaim informer's handler (VolumeBinding's claim cache and hint).
pub fn claim_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<PersistentVolumeClaim> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |pvc, _| s1.claim_changed(pvc))
        .on_update(move |_, new| s2.claim_changed(new))
        .on_delete(move |pvc| s3.claim_deleted(pvc))
}

/// The PersistentVolume informer's handler (VolumeBinding's volume cache).
pub fn volume_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<PersistentVolume> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |pv, _| s1.volume_changed(pv))
        .on_update(move |_, new| s2.volume_changed(new))
        .on_delete(move |pv| s3.volume_deleted(pv))
}

/// The StorageClass informer's handler (VolumeBinding's class lister and hint).
pub fn class_handler(shared: Arc<Shared>) -> ResourceEventHandlerFuncs<StorageClass> {
    let (s1, s2, s3) = (shared.clone(), shared.clone(), shared);
    ResourceEventHandlerFuncs::new()
        .on_add(move |class, _| s1.class_changed(None, class))
        .on_update(move |old, new| s2.class_changed(Some(old), new))
        .on_delete(move |class| s3.class_deleted(class))
}
