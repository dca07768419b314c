//! The writes of a preemption (`prepareCandidate` in
//! `pkg/scheduler/framework/preemption/preemption.go`, and the nomination that
//! `handleSchedulingFailure` writes): the only I/O of DefaultPreemption, run by the
//! scheduler's shell after [`super::post_filter`] decided.
//!
//! ```text
//!   PATCH preemptor pods/status   nominatedNodeName: <node>   (or null when cleared)
//!   each victim: PATCH pods/status  DisruptionTarget=True, PreemptionByScheduler,
//!                                   "<scheduler>: preempting to accommodate a higher priority pod"
//!                DELETE the pod (its own grace period)
//!                Event Normal Preempted "Preempted by pod <preemptor uid> on node <node>"
//! ```
//!
//! Unlike Kubernetes, the nomination is written before the victims are deleted (so a retry
//! of the preemptor sees it), and lower-priority pods nominated to the same node keep their
//! nomination.

use std::sync::Arc;

use apimachinery::EventType;
use client::trace::SpanContext;
use client::{EventRecorder, Tracer};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

use super::{
    Candidate, DISRUPTION_TARGET, Outcome, PREEMPTED, PREEMPTION_BY_SCHEDULER, disruption_message,
    nominated_node, preempted_message,
};

/// What the writes need: the client, the recorder, and the decision's trace.
pub struct PreemptionWriter<'a> {
    /// The scheduler's client.
    pub client: &'a kube::Client,
    /// Records the `Preempted` Events.
    pub recorder: &'a EventRecorder,
    /// Continues the decision's trace.
    pub tracer: &'a Tracer,
    /// The decision's span, when traced.
    pub trace: Option<SpanContext>,
    /// The wall-clock time of the conditions (RFC 3339).
    pub now: String,
}

fn reference(pod: &Pod) -> ObjectReference {
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

fn api(client: &kube::Client, pod: &Pod) -> Api<Pod> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Api::namespaced(client.clone(), namespace)
}

impl PreemptionWriter<'_> {
    async fn traced<F: Future>(&self, fut: F) -> F::Output {
        match self.trace {
            Some(ctx) => client::trace::under(self.tracer, ctx, fut).await,
            None => fut.await,
        }
    }

    /// Sets (or, with `None`, clears) the preemptor's `status.nominatedNodeName`.
    pub async fn nominate(&self, pod: &Pod, node: Option<&str>) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"status": {"nominatedNodeName": node}});
        let api = api(self.client, pod);
        let params = PatchParams::default();
        let patch = Patch::Merge(patch);
        if let Err(err) = self.traced(api.patch_status(&name, &params, &patch)).await {
            tracing::warn!(pod = %name, %err, "could not write nominatedNodeName");
        }
    }

    /// The writes of `outcome` for `pod`: the victims and the nomination of a preemption, or
    /// the nomination cleared when preemption found no node.
    pub async fn carry_out(&self, pod: &Pod, outcome: &Outcome, scheduler_name: &str) {
        match outcome {
            Outcome::Preempt { candidate, .. } => {
                self.preempt(pod, candidate, scheduler_name).await;
            }
            Outcome::NoCandidates { .. } if nominated_node(pod).is_some() => {
                self.nominate(pod, None).await;
            }
            _ => {}
        }
    }

    /// Evicts the candidate's victims for `preemptor` of `scheduler_name`.
    pub async fn preempt(&self, preemptor: &Pod, candidate: &Candidate, scheduler_name: &str) {
        self.nominate(preemptor, Some(&candidate.node)).await;
        let uid = preemptor.metadata.uid.clone().unwrap_or_default();
        let message = preempted_message(&uid, &candidate.node);
        for victim in &candidate.victims {
            self.evict(&victim.pod, scheduler_name).await;
            self.recorder.event(
                &reference(&victim.pod),
                EventType::Normal,
                PREEMPTED,
                &message,
            );
        }
    }

    /// The DisruptionTarget condition, then the delete, of one victim.
    async fn evict(&self, victim: &Arc<Pod>, scheduler_name: &str) {
        let name = victim.metadata.name.clone().unwrap_or_default();
        let api = api(self.client, victim);
        let has_condition = victim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == DISRUPTION_TARGET
                        && c.status == "True"
                        && c.reason.as_deref() == Some(PREEMPTION_BY_SCHEDULER)
                })
            });
        if !has_condition {
            let patch = serde_json::json!({"status": {"conditions": [{
                "type": DISRUPTION_TARGET,
                "status": "True",
                "reason": PREEMPTION_BY_SCHEDULER,
                "message": disruption_message(scheduler_name),
                "lastProbeTime": null,
                "lastTransitionTime": self.now,
            }]}});
            let params = PatchParams::default();
            let patch = Patch::Strategic(patch);
            if let Err(err) = self.traced(api.patch_status(&name, &params, &patch)).await {
                tracing::warn!(pod = %name, %err, "could not mark the victim");
            }
        }
        match self
            .traced(api.delete(&name, &DeleteParams::default()))
            .await
        {
            Ok(_) => tracing::info!(victim = %name, "preempted"),
            Err(err) => tracing::warn!(pod = %name, %err, "could not delete the victim"),
        }
    }
}
