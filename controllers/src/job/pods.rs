//! A Job's pods: made from its template, with the tracking finalizer, and for Indexed Jobs
//! with their index; classified as failed, terminating or finished.
//!
//! Mirrors `pkg/controller/job/job_controller.go` (`isPodFailed`, `activePodsForRemoval`,
//! `removeTrackingFinalizerPatch`, the pod creation in `manageJob`), `indexed_job_utils.go`
//! (`addCompletionIndexEnvVariables`, `addCompletionIndexAnnotation`,
//! `addIndexFailureCountAnnotation`) and `controller_utils.go` (`GetPodFromTemplate`,
//! `CountTerminatingPods`).
//!
//! An Indexed Job's pod for index 3 of Job `pi`:
//!
//! ```text
//!   generateName: pi-3-          hostname: pi-3
//!   annotations:  batch.kubernetes.io/job-completion-index: "3"
//!   labels:       batch.kubernetes.io/job-completion-index: "3"
//!   env:          JOB_COMPLETION_INDEX from metadata.annotations['batch.kubernetes.io/job-completion-index']
//!   finalizers:   [batch.kubernetes.io/job-tracking]
//! ```

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::failure_policy::match_pod_failure_policy;
use super::indexes::pod_generate_name_with_index;
use super::{
    JOB_COMPLETION_INDEX_ANNOTATION, JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, JOB_TRACKING_FINALIZER, spec_of,
};
use crate::owner_ref::{name, new_controller_ref};
use crate::pod_readiness::pod_phase;
use crate::replicaset::ranking::sort_active_pods_with_ranks;

/// The env var carrying an Indexed Job pod's index.
pub const JOB_COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Whether the pod carries `batch.kubernetes.io/job-tracking`.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == JOB_TRACKING_FINALIZER)
}

/// `removeTrackingFinalizerPatch`: the strategic merge patch removing the finalizer.
pub fn remove_tracking_finalizer_patch() -> serde_json::Value {
    json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER] } })
}

/// `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, always so with a pod failure
/// policy.
pub fn only_replace_failed_pods(job: &Job) -> bool {
    let spec = spec_of(job);
    spec.pod_failure_policy.is_some() || spec.pod_replacement_policy.as_deref() == Some("Failed")
}

/// `isPodFailed`: phase Failed, or (unless only failed pods are replaced) being deleted
/// before it succeeded.
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = pod_phase(pod);
    if phase == "Failed" {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded"
}

/// `IsPodTerminating`: being deleted and not yet in a terminal phase.
pub fn is_pod_terminating(pod: &Pod) -> bool {
    let phase = pod_phase(pod);
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded" && phase != "Failed"
}

/// `activePodsForRemoval` (non-indexed half): the `count` active pods to remove first
/// (`controller.ActivePods` order: unscheduled, pending, not ready before the others).
pub fn rank_for_removal<'a>(pods: &mut Vec<&'a Pod>) {
    let mut ranked: Vec<(&'a Pod, usize)> = pods.iter().map(|p| (*p, 0)).collect();
    sort_active_pods_with_ranks(&mut ranked, None);
    *pods = ranked.into_iter().map(|(p, _)| p).collect();
}

/// The number in one of the index failure-count annotations, 0 when absent or malformed.
fn count_annotation(pod: &Pod, key: &str) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|n| *n >= 0)
        .unwrap_or(0)
}

/// `getIndexFailureCount`: previous counted failures of the pod's index.
pub fn index_failure_count(pod: &Pod) -> i32 {
    count_annotation(pod, JOB_INDEX_FAILURE_COUNT_ANNOTATION)
}

/// `getIndexAbsoluteFailureCount`: previous failures of the pod's index, ignored ones too.
pub fn index_absolute_failure_count(pod: &Pod) -> i32 {
    index_failure_count(pod) + count_annotation(pod, JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
}

/// `getNewIndexFailureCounts`: the counts the replacement of `replaced` starts with.
fn new_index_failure_counts(job: &Job, replaced: Option<&Pod>) -> (i32, i32) {
    let Some(pod) = replaced else {
        return (0, 0);
    };
    let (mut failed, mut ignored) = (
        index_failure_count(pod),
        count_annotation(pod, JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION),
    );
    if match_pod_failure_policy(spec_of(job).pod_failure_policy.as_ref(), pod).count_failed {
        failed += 1;
    } else {
        ignored += 1;
    }
    (failed, ignored)
}

/// The template every pod of `job` starts from: with the tracking finalizer and, for Indexed
/// Jobs, the `JOB_COMPLETION_INDEX` env var in every container that lacks it.
pub fn pod_template(job: &Job, indexed: bool) -> PodTemplateSpec {
    let mut template = spec_of(job).template.clone();
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.to_owned());
    }
    if indexed && let Some(spec) = template.spec.as_mut() {
        let add_env = |c: &mut Container| {
            let env = c.env.get_or_insert_with(Vec::new);
            if env.iter().all(|e| e.name != JOB_COMPLETION_INDEX_ENV) {
                env.push(EnvVar {
                    name: JOB_COMPLETION_INDEX_ENV.to_owned(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            api_version: None,
                            field_path: format!(
                                "metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']"
                            ),
                        }),
                        ..Default::default()
                    }),
                });
            }
        };
        spec.init_containers.iter_mut().flatten().for_each(add_env);
        spec.containers.iter_mut().for_each(add_env);
    }
    template
}

/// `GetPodFromTemplate` for a Job: the template's metadata and spec, the Job as controller,
/// `generateName` `<job>-` or, for `index`, `<job>-<index>-` with the index annotation and
/// label, hostname `<job>-<index>` and (with `backoffLimitPerIndex`) the failure counts carried
/// over from `replaced`.
pub fn new_pod(
    job: &Job,
    template: &PodTemplateSpec,
    index: Option<i32>,
    replaced: Option<&Pod>,
) -> Pod {
    let job_name = name(&job.metadata);
    let meta = template.metadata.clone().unwrap_or_default();
    let mut pod = Pod {
        metadata: ObjectMeta {
            namespace: job.metadata.namespace.clone(),
            generate_name: Some(format!("{job_name}-")),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![new_controller_ref(job)]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    if let Some(ix) = index {
        let value = ix.to_string();
        let annotations = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), value.clone());
        if spec_of(job).backoff_limit_per_index.is_some() {
            let (failed, ignored) = new_index_failure_counts(job, replaced);
            annotations.insert(
                JOB_INDEX_FAILURE_COUNT_ANNOTATION.to_owned(),
                failed.to_string(),
            );
            if ignored > 0 {
                annotations.insert(
                    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_owned(),
                    ignored.to_string(),
                );
            }
        }
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), value);
        pod.metadata.generate_name = Some(pod_generate_name_with_index(job_name, ix));
        if let Some(spec) = pod.spec.as_mut() {
            spec.hostname = Some(format!("{job_name}-{ix}"));
        }
    }
    pod
}
