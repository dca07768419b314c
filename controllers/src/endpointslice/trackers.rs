//! What the EndpointSlice and Endpoints controllers remember between syncs:
//! `staging/src/k8s.io/endpointslice/util/endpointslice_tracker.go` (the generations this
//! controller wrote, to tell a stale cache from a current one) and
//! `util/trigger_time_tracker.go` (the `endpoints.kubernetes.io/last-change-trigger-time`
//! annotation).
//!
//! ```text
//!   after a write: tracker.update(slice)  (uid → generation) / expect_deletion(slice)
//!   next sync:     cache lacks a written slice, has an older generation, or still has a
//!                  deleted one ─▶ stale: fail the sync, retry with back-off
//!   trigger time:  new Service → its creationTimestamp; else the earliest pod Ready
//!                  transition (or Service creation) newer than what the last sync saw
//! ```

use std::collections::HashMap;

use apimachinery::ObjectKey;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::pod_readiness::get_pod_ready_condition;

/// `deletionExpected`: the generation recorded for a slice this controller deleted.
const DELETION_EXPECTED: i64 = -1;

/// `EndpointSliceTracker`: per Service, the generation of each slice (by UID) as last
/// written by this controller.
#[derive(Debug, Default)]
pub struct EndpointSliceTracker {
    generations: HashMap<ObjectKey, HashMap<String, i64>>,
}

fn service_key(slice: &EndpointSlice) -> Option<ObjectKey> {
    let name = slice
        .metadata
        .labels
        .as_ref()?
        .get(super::endpoints::LABEL_SERVICE_NAME)?;
    Some(ObjectKey::new(slice.metadata.namespace.as_deref(), name))
}

impl EndpointSliceTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Has`: whether the slice is tracked.
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        let uid = slice.metadata.uid.as_deref().unwrap_or("");
        service_key(slice)
            .and_then(|k| self.generations.get(&k))
            .is_some_and(|g| g.contains_key(uid))
    }

    /// `ShouldSync`: an event about `slice` needs a sync of its Service unless it is one this
    /// controller wrote (same or older generation).
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        let uid = slice.metadata.uid.as_deref().unwrap_or("");
        let Some(g) = service_key(slice)
            .and_then(|k| self.generations.get(&k))
            .and_then(|g| g.get(uid))
        else {
            return true;
        };
        slice.metadata.generation.unwrap_or(0) > *g
    }

    /// `StaleSlices`: whether the cached `slices` of `service` lag behind this controller's
    /// own writes.
    pub fn stale_slices(&self, service: &ObjectKey, slices: &[&EndpointSlice]) -> bool {
        let Some(tracked) = self.generations.get(service) else {
            return false;
        };
        let mut provided = HashMap::new();
        for s in slices {
            let uid = s.metadata.uid.as_deref().unwrap_or("");
            let generation = s.metadata.generation.unwrap_or(0);
            provided.insert(uid, generation);
            if let Some(g) = tracked.get(uid)
                && (*g == DELETION_EXPECTED || *g > generation)
            {
                return true;
            }
        }
        tracked
            .iter()
            .any(|(uid, g)| *g != DELETION_EXPECTED && !provided.contains_key(uid.as_str()))
    }

    /// `Update`: a slice as the API server answered a write.
    pub fn update(&mut self, slice: &EndpointSlice) {
        if let (Some(key), Some(uid)) = (service_key(slice), slice.metadata.uid.clone()) {
            let generation = slice.metadata.generation.unwrap_or(0);
            self.generations
                .entry(key)
                .or_default()
                .insert(uid, generation);
        }
    }

    /// `ExpectDeletion`: a slice this controller deleted.
    pub fn expect_deletion(&mut self, slice: &EndpointSlice) {
        if let (Some(key), Some(uid)) = (service_key(slice), slice.metadata.uid.clone()) {
            self.generations
                .entry(key)
                .or_default()
                .insert(uid, DELETION_EXPECTED);
        }
    }

    /// `HandleDeletion`: the informer saw the slice go; true if it was expected.
    pub fn handle_deletion(&mut self, slice: &EndpointSlice) -> bool {
        let uid = slice.metadata.uid.as_deref().unwrap_or("");
        let Some(key) = service_key(slice) else {
            return false;
        };
        let Some(tracked) = self.generations.get_mut(&key) else {
            return false;
        };
        let expected = tracked.remove(uid) == Some(DELETION_EXPECTED);
        if tracked.is_empty() {
            self.generations.remove(&key);
        }
        expected
    }

    /// `DeleteService`: forget a deleted Service's slices.
    pub fn delete_service(&mut self, service: &ObjectKey) {
        self.generations.remove(service);
    }
}

#[derive(Debug, Default, Clone)]
struct TriggerState {
    pods: HashMap<String, Timestamp>,
    service: Option<Timestamp>,
}

/// `TriggerTimeTracker`: computes the `last-change-trigger-time` annotation of a sync.
#[derive(Debug, Default)]
pub struct TriggerTimeTracker {
    states: HashMap<ObjectKey, TriggerState>,
}

impl TriggerTimeTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// `ComputeEndpointLastChangeTriggerTime`: for a Service not seen before its
    /// creationTimestamp; else the earliest trigger (a pod's Ready transition, the Service's
    /// creation) newer than at the last sync; `None` when nothing changed.
    pub fn compute(&mut self, service: &Service, pods: &[&Pod]) -> Option<Timestamp> {
        let key = ObjectKey::from_meta(&service.metadata);
        let state = self.states.get(&key).cloned();
        let known = state.is_some();
        let state = state.unwrap_or_default();
        let mut min: Option<Timestamp> = None;
        let mut pod_times = HashMap::new();
        for pod in pods {
            let Some(t) = get_pod_ready_condition(pod)
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0)
            else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.pods.get(&name).is_none_or(|seen| t > *seen) {
                min = Some(min.map_or(t, |m| m.min(t)));
            }
            pod_times.insert(name, t);
        }
        let created = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(c) = created
            && state.service.is_none_or(|seen| c > seen)
        {
            min = Some(min.map_or(c, |m| m.min(c)));
        }
        self.states.insert(
            key,
            TriggerState {
                pods: pod_times,
                service: created,
            },
        );
        if known { min } else { created }
    }

    /// `DeleteService`.
    pub fn delete_service(&mut self, service: &ObjectKey) {
        self.states.remove(service);
    }
}
