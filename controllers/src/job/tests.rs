//! Table tests of `sync_job`, modelled on `pkg/controller/job/job_controller_test.go`.

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::backoff::BackoffRecord;
use super::*;
use crate::action::{Action, Event};
use crate::expectations::Expectations;

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("time")
}

fn ago(secs: i64) -> String {
    (now() - jiff::SignedDuration::from_secs(secs)).to_string()
}

/// A Job as the API server stores it after defaulting.
fn job(spec: Value, status: Value) -> Job {
    let mut full = json!({
        "parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
        "suspend": false, "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "pi"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}
    });
    if let (Some(base), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid", "resourceVersion": "7"},
        "spec": full,
        "status": status,
    }))
    .expect("job")
}

/// A pod of the Job in `phase`, with the tracking finalizer unless `finalizer` is false.
fn pod(name: &str, phase: &str, finalizer: bool, extra: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "creationTimestamp": ago(100), "resourceVersion": "1",
            "labels": {"batch.kubernetes.io/controller-uid": "job-uid"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "job-uid", "controller": true}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "pi", "image": "perl"}]},
        "status": {"phase": phase}
    });
    if finalizer {
        p["metadata"]["finalizers"] = json!([JOB_TRACKING_FINALIZER]);
    }
    if let Some(extra) = extra.as_object() {
        for (section, fields) in extra {
            if let (Some(target), Some(fields)) = (p[section].as_object_mut(), fields.as_object()) {
                for (k, v) in fields {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
    }
    serde_json::from_value(p).expect("pod")
}

fn terminated(code: i32, finished_secs_ago: i64) -> Value {
    json!({"status": {"containerStatuses": [{"name": "pi", "image": "perl", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "finishedAt": ago(finished_secs_ago)}}}]}})
}

fn run(job: &Job, pods: &[Pod]) -> JobSync {
    run_with(job, pods, &BackoffRecord::default())
}

fn run_with(job: &Job, pods: &[Pod], backoff: &BackoffRecord) -> JobSync {
    let refs: Vec<&Pod> = pods.iter().collect();
    let mut expectations = Expectations::new();
    sync_job(
        &mut expectations,
        JobSyncInput {
            job,
            pods: &refs,
            expected_rm_finalizers: &HashSet::new(),
            backoff,
            now: now(),
        },
    )
}

fn statuses(out: &JobSync) -> Vec<&Job> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateJobStatus(j) => Some(j.as_ref()),
            _ => None,
        })
        .collect()
}

fn events(out: &JobSync) -> Vec<(&str, &str)> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(Event {
                reason, message, ..
            }) => Some((reason.as_str(), message.as_str())),
            _ => None,
        })
        .collect()
}

fn condition_types(job: &Job) -> Vec<(String, String)> {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.reason.unwrap_or_default()))
        .collect()
}

#[test]
fn a_new_job_creates_parallelism_pods_with_the_tracking_finalizer() {
    let j = job(json!({"parallelism": 3, "completions": 5}), json!({}));
    let out = run(&j, &[]);
    let Some(Action::CreatePods { pod, batches, .. }) = out.actions.first() else {
        panic!("expected pod creation first: {:?}", out.actions);
    };
    assert_eq!(batches, &vec![1, 2]);
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("pi-"));
    assert_eq!(
        pod.metadata.finalizers.as_deref(),
        Some(&[JOB_TRACKING_FINALIZER.to_owned()][..])
    );
    let status = statuses(&out)[0].status.clone().expect("status");
    assert_eq!(status.active, Some(3));
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(0));
    assert_eq!(status.start_time.map(|t| t.0), Some(now()));
}

#[test]
fn a_succeeded_pod_is_counted_through_uncounted_then_the_job_completes() {
    let j = job(json!({}), json!({"startTime": ago(30), "active": 1}));
    let pods = [pod("pi-a", "Succeeded", true, terminated(0, 5))];
    let out = run(&j, &pods);
    let writes = statuses(&out);
    assert_eq!(writes.len(), 2, "{}", out.summary);
    let first = writes[0].status.clone().expect("status");
    assert_eq!(
        first.uncounted_terminated_pods.and_then(|u| u.succeeded),
        Some(vec!["uid-pi-a".to_owned()])
    );
    assert_eq!(
        condition_types(writes[0]),
        vec![("SuccessCriteriaMet".into(), "CompletionsReached".into())]
    );
    assert!(matches!(&out.actions[1], Action::RemovePodFinalizers { pods, .. } if pods.len() == 1));
    let last = writes[1].status.clone().expect("status");
    assert_eq!(last.succeeded, Some(1));
    assert_eq!(last.active, Some(0));
    assert!(last.completion_time.is_some());
    assert_eq!(
        condition_types(writes[1]),
        vec![
            ("SuccessCriteriaMet".into(), "CompletionsReached".into()),
            ("Complete".into(), "CompletionsReached".into())
        ]
    );
    assert_eq!(events(&out), vec![("Completed", "Job completed")]);
    assert!(out.finished);
    assert_eq!(out.rm_finalizers, vec!["uid-pi-a".to_owned()]);
}

#[test]
fn a_pod_whose_finalizer_removal_is_pending_is_not_counted_twice() {
    let j = job(
        json!({"completions": 2, "parallelism": 1}),
        json!({"startTime": ago(30), "succeeded": 1, "active": 0, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}),
    );
    let pods = [pod("pi-a", "Succeeded", true, terminated(0, 5))];
    let refs: Vec<&Pod> = pods.iter().collect();
    let expected: HashSet<String> = ["uid-pi-a".to_owned()].into_iter().collect();
    let out = sync_job(
        &mut Expectations::new(),
        JobSyncInput {
            job: &j,
            pods: &refs,
            expected_rm_finalizers: &expected,
            backoff: &BackoffRecord::default(),
            now: now(),
        },
    );
    // One more completion is needed: one pod is created, nothing is recounted.
    assert!(
        matches!(out.actions.first(), Some(Action::CreatePods { batches, .. }) if batches == &vec![1])
    );
    assert!(
        !out.actions
            .iter()
            .any(|a| matches!(a, Action::RemovePodFinalizers { .. }))
    );
}

#[test]
fn failures_past_the_backoff_limit_fail_the_job_in_two_steps() {
    let j = job(
        json!({"backoffLimit": 1}),
        json!({"startTime": ago(60), "failed": 1}),
    );
    let pods = [pod("pi-b", "Failed", true, terminated(1, 5))];
    let out = run(&j, &pods);
    let writes = statuses(&out);
    assert_eq!(
        condition_types(writes[0]),
        vec![("FailureTarget".into(), "BackoffLimitExceeded".into())]
    );
    let last = writes.last().expect("status");
    assert_eq!(last.status.as_ref().and_then(|s| s.failed), Some(2));
    assert_eq!(
        condition_types(last),
        vec![
            ("FailureTarget".into(), "BackoffLimitExceeded".into()),
            ("Failed".into(), "BackoffLimitExceeded".into())
        ]
    );
    assert_eq!(
        events(&out),
        vec![(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit"
        )]
    );
}

#[test]
fn a_failure_delays_the_replacement_by_the_backoff() {
    let j = job(json!({}), json!({"startTime": ago(60)}));
    let pods = [pod("pi-c", "Failed", true, terminated(1, 2))];
    let out = run(&j, &pods);
    assert!(
        !out.actions
            .iter()
            .any(|a| matches!(a, Action::CreatePods { .. }))
    );
    assert!(
        out.actions
            .contains(&Action::RequeueAfter(Duration::from_secs(8))),
        "{:?}",
        out.actions
    );
    assert_eq!(out.backoff.failures_after_last_success, 1);
    // Once the back-off has passed (the failure is 20 s old), the replacement is created.
    let counted = pod("pi-c", "Failed", false, terminated(1, 20));
    let record = BackoffRecord {
        failures_after_last_success: 1,
        last_failure_time: Some(now() - jiff::SignedDuration::from_secs(20)),
    };
    let out = run_with(&j, &[counted], &record);
    assert!(
        out.actions
            .iter()
            .any(|a| matches!(a, Action::CreatePods { .. }))
    );
}

#[test]
fn indexed_jobs_create_one_pod_per_pending_index() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 4, "parallelism": 3}),
        json!({"startTime": ago(10), "completedIndexes": "0"}),
    );
    let mut running = pod("pi-2-x", "Running", true, json!({}));
    running
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(JOB_COMPLETION_INDEX_ANNOTATION.into(), "2".into());
    let out = run(&j, &[running]);
    let Some(Action::CreateDistinctPods { pods, batches, .. }) = out.actions.first() else {
        panic!("expected indexed creation: {:?}", out.actions);
    };
    assert_eq!(batches, &vec![1, 1]);
    let names: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.generate_name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, vec!["pi-1-", "pi-3-"]);
    let p = &pods[0];
    assert_eq!(
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(JOB_COMPLETION_INDEX_ANNOTATION))
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        p.metadata
            .labels
            .as_ref()
            .and_then(|a| a.get(JOB_COMPLETION_INDEX_ANNOTATION))
            .map(String::as_str),
        Some("1")
    );
    let spec = p.spec.as_ref().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("pi-1"));
    let env = spec.containers[0].env.as_ref().expect("env");
    assert_eq!(env[0].name, "JOB_COMPLETION_INDEX");
}

#[test]
fn a_fail_job_rule_fails_the_job_with_the_rule_message_and_deletes_active_pods() {
    let j = job(
        json!({"completions": 2, "parallelism": 2, "podReplacementPolicy": "Failed",
               "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}}),
        json!({"startTime": ago(60)}),
    );
    let pods = [
        pod("pi-d", "Failed", true, terminated(42, 3)),
        pod("pi-e", "Running", true, json!({})),
    ];
    let out = run(&j, &pods);
    assert!(
        matches!(&out.actions[0], Action::DeletePods { pods, .. } if pods.len() == 1 && pods[0].name == "pi-e")
    );
    let writes = statuses(&out);
    let cond = writes[0]
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.first())
        .expect("condition");
    assert_eq!(cond.type_, "FailureTarget");
    assert_eq!(cond.reason.as_deref(), Some("PodFailurePolicy"));
    assert_eq!(
        cond.message.as_deref(),
        Some(
            "Container pi for pod default/pi-d failed with exit code 42 matching FailJob rule at index 0"
        )
    );
    // The deleted pod is still terminating: Failed waits for it.
    assert!(!out.finished);
    assert!(out.summary.contains("terminating"), "{}", out.summary);
}

#[test]
fn suspending_deletes_active_pods_after_stripping_their_finalizers() {
    let j = job(
        json!({"suspend": true, "parallelism": 2, "completions": 2}),
        json!({"startTime": ago(10), "active": 2}),
    );
    let pods = [
        pod("pi-f", "Running", true, json!({})),
        pod("pi-g", "Pending", true, json!({})),
    ];
    let out = run(&j, &pods);
    assert!(matches!(&out.actions[0], Action::RemovePodFinalizers { pods, .. } if pods.len() == 2));
    assert!(matches!(&out.actions[1], Action::DeletePods { pods, .. } if pods.len() == 2));
    assert_eq!(events(&out), vec![("Suspended", "Job suspended")]);
    let status = statuses(&out)[0].status.clone().expect("status");
    assert_eq!(status.active, Some(0));
    assert_eq!(status.terminating, Some(2));
    assert_eq!(
        condition_types(statuses(&out)[0]),
        vec![("Suspended".into(), "JobSuspended".into())]
    );
}

#[test]
fn the_active_deadline_fails_the_job_and_a_live_one_requeues_at_the_deadline() {
    let j = job(
        json!({"activeDeadlineSeconds": 30}),
        json!({"startTime": ago(31)}),
    );
    let out = run(&j, &[]);
    assert_eq!(
        condition_types(statuses(&out).last().expect("status")),
        vec![
            ("FailureTarget".into(), "DeadlineExceeded".into()),
            ("Failed".into(), "DeadlineExceeded".into())
        ]
    );
    let j = job(
        json!({"activeDeadlineSeconds": 30}),
        json!({"startTime": ago(10)}),
    );
    let out = run(&j, &[pod("pi-h", "Running", true, json!({}))]);
    assert!(
        out.actions
            .contains(&Action::RequeueAfter(Duration::from_secs(20)))
    );
}

#[test]
fn a_finished_job_only_releases_leftover_finalizers() {
    let j = job(
        json!({}),
        json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}),
    );
    let out = run(&j, &[pod("pi-i", "Succeeded", true, json!({}))]);
    assert_eq!(out.actions.len(), 1);
    assert!(matches!(
        &out.actions[0],
        Action::RemovePodFinalizers { .. }
    ));
    assert!(out.finished);
}

#[test]
fn indexed_completion_counts_indexes_and_writes_intervals() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
        json!({"startTime": ago(10), "completedIndexes": "0", "succeeded": 1}),
    );
    let mut done = Vec::new();
    for ix in [1, 2] {
        let mut p = pod(&format!("pi-{ix}-a"), "Succeeded", true, terminated(0, 1));
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(JOB_COMPLETION_INDEX_ANNOTATION.into(), ix.to_string());
        done.push(p);
    }
    let out = run(&j, &done);
    let last = statuses(&out).last().copied().expect("status");
    let status = last.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(status.succeeded, Some(3));
    assert!(out.finished);
}

#[test]
fn backoff_limit_per_index_fails_the_index_and_then_the_job() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 2147483647,
               "backoffLimitPerIndex": 1}),
        json!({"startTime": ago(60), "completedIndexes": "0", "succeeded": 1}),
    );
    let mut failed = pod("pi-1-b", "Failed", true, terminated(1, 5));
    let annotations = failed
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(JOB_COMPLETION_INDEX_ANNOTATION.into(), "1".into());
    annotations.insert(JOB_INDEX_FAILURE_COUNT_ANNOTATION.into(), "1".into());
    let out = run(&j, &[failed]);
    let last = statuses(&out).last().copied().expect("status");
    assert_eq!(
        last.status
            .as_ref()
            .and_then(|s| s.failed_indexes.as_deref()),
        Some("1")
    );
    assert_eq!(
        condition_types(last),
        vec![
            ("FailureTarget".into(), "FailedIndexes".into()),
            ("Failed".into(), "FailedIndexes".into())
        ]
    );
}
