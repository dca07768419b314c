//! Table tests of `sync_cron_job`, after `pkg/controller/cronjob/cronjob_controllerv2_test.go`.

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use serde_json::{Value, json};

use super::*;
use crate::action::{Action, Event};

fn at(s: &str) -> Timestamp {
    s.parse().expect("time")
}

fn cron_job(spec: Value, status: Value) -> CronJob {
    let mut full = json!({
        "schedule": "*/1 * * * *", "concurrencyPolicy": "Allow", "suspend": false,
        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
        "jobTemplate": {"metadata": {"labels": {"team": "a"}}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    });
    if let (Some(base), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick", "namespace": "default", "uid": "cj-uid",
                     "creationTimestamp": "2025-01-01T10:00:30Z"},
        "spec": full, "status": status,
    }))
    .expect("cronjob")
}

fn job(name: &str, uid: &str, condition: Option<&str>, start: &str) -> Job {
    let conditions = condition.map_or(json!([]), |c| json!([{"type": c, "status": "True"}]));
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": uid,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "cj-uid", "controller": true}]},
        "spec": {"template": {}},
        "status": {"conditions": conditions, "startTime": start, "completionTime": start},
    }))
    .expect("job")
}

fn run(cj: &CronJob, jobs: &[Job], now: &str) -> CronJobSync {
    let refs: Vec<&Job> = jobs.iter().collect();
    sync_cron_job(CronJobSyncInput {
        cron_job: cj,
        jobs: &refs,
        missing: &HashSet::new(),
        now: at(now),
    })
}

fn events(out: &CronJobSync) -> Vec<String> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(Event { reason, .. }) => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

fn requeue(out: &CronJobSync) -> Option<Duration> {
    out.actions.iter().find_map(|a| match a {
        Action::RequeueAfter(d) => Some(*d),
        _ => None,
    })
}

fn created(out: &CronJobSync) -> Option<&Job> {
    out.actions.iter().find_map(|a| match a {
        Action::CreateJob(j) => Some(j.as_ref()),
        _ => None,
    })
}

fn status(out: &CronJobSync) -> Option<&CronJob> {
    out.actions.iter().find_map(|a| match a {
        Action::UpdateCronJobStatus(c) => Some(c.as_ref()),
        _ => None,
    })
}

#[test]
fn nothing_before_the_first_time_then_a_job_named_after_its_minute() {
    let cj = cron_job(json!({}), json!({}));
    let early = run(&cj, &[], "2025-01-01T10:00:45Z");
    assert!(created(&early).is_none());
    assert_eq!(requeue(&early), Some(Duration::from_millis(15_100)));

    let due = run(&cj, &[], "2025-01-01T10:01:05Z");
    let job = created(&due).expect("a job");
    let minutes = at("2025-01-01T10:01:00Z").as_second() / 60;
    assert_eq!(job.metadata.name, Some(format!("tick-{minutes}")));
    assert_eq!(
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED_TIMESTAMP_ANNOTATION))
            .map(String::as_str),
        Some("2025-01-01T10:01:00Z")
    );
    assert_eq!(
        job.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(
        job.metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].kind.as_str()),
        Some("CronJob")
    );
    assert_eq!(events(&due), vec!["SuccessfulCreate"]);
    let s = status(&due).and_then(|c| c.status.clone()).expect("status");
    assert_eq!(
        s.last_schedule_time.map(|t| t.0),
        Some(at("2025-01-01T10:01:00Z"))
    );
    assert_eq!(s.active.map(|a| a.len()), Some(1));
    assert_eq!(requeue(&due), Some(Duration::from_millis(55_100)));
}

#[test]
fn forbid_skips_while_a_job_runs_and_replace_deletes_it() {
    let one_active = json!({"lastScheduleTime": "2025-01-01T10:01:00Z",
        "active": [{"kind": "Job", "name": "tick-1", "namespace": "default", "uid": "j1"}]});
    let running = [job("tick-1", "j1", None, "2025-01-01T10:01:00Z")];
    let forbid = cron_job(json!({"concurrencyPolicy": "Forbid"}), one_active.clone());
    let out = run(&forbid, &running, "2025-01-01T10:02:01Z");
    assert!(created(&out).is_none());
    assert_eq!(events(&out), vec!["JobAlreadyActive"]);

    let replace = cron_job(json!({"concurrencyPolicy": "Replace"}), one_active);
    let out = run(&replace, &running, "2025-01-01T10:02:01Z");
    assert!(matches!(&out.actions[0], Action::Delete { target, .. } if target.name == "tick-1"));
    assert!(created(&out).is_some());
    assert_eq!(events(&out), vec!["SuccessfulDelete", "SuccessfulCreate"]);
    let active = status(&out)
        .and_then(|c| c.status.clone())
        .and_then(|s| s.active)
        .expect("active");
    assert_eq!(active.len(), 1);
    assert_ne!(active[0].name.as_deref(), Some("tick-1"));
}

#[test]
fn a_finished_job_leaves_the_active_list_and_history_is_trimmed() {
    let cj = cron_job(
        json!({"successfulJobsHistoryLimit": 2}),
        json!({"lastScheduleTime": "2025-01-01T10:05:00Z",
               "active": [{"kind": "Job", "name": "tick-5", "namespace": "default", "uid": "j5"}]}),
    );
    let jobs: Vec<Job> = (1..=5)
        .map(|i| {
            job(
                &format!("tick-{i}"),
                &format!("j{i}"),
                Some("Complete"),
                &format!("2025-01-01T10:0{i}:00Z"),
            )
        })
        .collect();
    let out = run(&cj, &jobs, "2025-01-01T10:05:30Z");
    let s = status(&out).and_then(|c| c.status.clone()).expect("status");
    assert!(s.active.is_none());
    assert_eq!(
        s.last_successful_time.map(|t| t.0),
        Some(at("2025-01-01T10:05:00Z"))
    );
    let deleted: Vec<String> = out
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { target, .. } => Some(target.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec!["tick-1", "tick-2", "tick-3"]);
    assert_eq!(events(&out)[0], "SawCompletedJob");
}

#[test]
fn a_time_zone_moves_the_schedule_and_the_annotation() {
    let cj = cron_job(
        json!({"schedule": "0 9 * * *", "timeZone": "Asia/Seoul"}),
        json!({}),
    );
    // 09:00 in Seoul is 00:00 UTC the next day.
    let out = run(&cj, &[], "2025-01-02T00:00:30Z");
    let job = created(&out).expect("a job");
    assert_eq!(
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED_TIMESTAMP_ANNOTATION))
            .map(String::as_str),
        Some("2025-01-02T09:00:00+09:00")
    );
    let bad = cron_job(json!({"timeZone": "Mars/Olympus"}), json!({}));
    assert_eq!(
        events(&run(&bad, &[], "2025-01-02T00:00:30Z")),
        vec!["UnknownTimeZone"]
    );
}

#[test]
fn suspended_missing_and_many_missed_times() {
    let suspended = cron_job(json!({"suspend": true}), json!({}));
    let out = run(&suspended, &[], "2025-01-01T12:00:00Z");
    assert!(created(&out).is_none());
    assert!(out.summary.contains("suspended"));

    let cj = cron_job(
        json!({}),
        json!({"active": [{"kind": "Job", "name": "gone", "namespace": "default", "uid": "g1"}]}),
    );
    let missing: HashSet<String> = ["g1".to_owned()].into_iter().collect();
    let out = sync_cron_job(CronJobSyncInput {
        cron_job: &cj,
        jobs: &[],
        missing: &missing,
        now: at("2025-01-01T12:00:30Z"),
    });
    // The job went missing, and 120 minutes of times were missed: the latest one runs.
    assert_eq!(
        events(&out),
        vec!["MissingJob", "TooManyMissedTimes", "SuccessfulCreate"]
    );
    let minutes = at("2025-01-01T12:00:00Z").as_second() / 60;
    assert_eq!(
        created(&out).and_then(|j| j.metadata.name.clone()),
        Some(format!("tick-{minutes}"))
    );
}

#[test]
fn a_job_of_that_name_is_taken_into_the_active_list_instead_of_created() {
    // `@every 20s` runs twice a minute, and Job names count minutes: the second time of a
    // minute finds the first one's Job, as Kubernetes' create would meet AlreadyExists.
    let cj = cron_job(
        json!({"schedule": "@every 20s"}),
        json!({"lastScheduleTime": "2025-01-01T10:01:00Z"}),
    );
    let minutes = at("2025-01-01T10:01:00Z").as_second() / 60;
    let done = job(
        &format!("tick-{minutes}"),
        "j1",
        Some("Complete"),
        "2025-01-01T10:01:00Z",
    );
    let out = run(&cj, &[done], "2025-01-01T10:01:21Z");
    assert!(created(&out).is_none());
    let s = status(&out).and_then(|c| c.status.clone()).expect("status");
    assert_eq!(
        s.last_schedule_time.map(|t| t.0),
        Some(at("2025-01-01T10:01:20Z"))
    );
    assert_eq!(
        s.active.and_then(|a| a.first().and_then(|r| r.uid.clone())),
        Some("j1".to_owned())
    );
}
