//! End to end: Jobs. The API server, the controller-manager (Job, TTL-after-finished and pod
//! GC controllers), the scheduler and two simulated kubelets as separate processes, driven by
//! the real kubectl: a Job whose containers `sleep 1` completes (`kubectl wait
//! --for=condition=complete`), its pods counted through the tracking finalizer; a Job whose
//! container exits 1 stops at `backoffLimit`; a `podFailurePolicy` rule fails a Job at once; an
//! Indexed Job writes `completedIndexes`; a suspended Job runs once resumed; and
//! `ttlSecondsAfterFinished` deletes a finished Job with its pods; a CronJob runs a Job on its
//! schedule, trims its history, and `kubectl create job --from=cronjob/...` runs its template.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::process_cluster::ProcessCluster;
use support::{DEADLINE, Server, eventually};

fn cluster() -> ProcessCluster {
    ProcessCluster::start(2)
}

fn job_yaml(name: &str, spec: &str, command: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
{spec}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: {command}
"
    )
}

fn job_json(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "job", name, "-o", "json"])
}

fn conditions(job: &Value) -> Vec<(String, String, String)> {
    job["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn event_reasons(s: &Server, name: &str) -> Vec<String> {
    event_reasons_of(s, "Job", name)
}

fn wait(s: &Server, condition: &str, job: &str) {
    let run = s.kubectl(&[
        "wait",
        &format!("--for=condition={condition}"),
        &format!("job/{job}"),
        "--timeout=90s",
    ]);
    assert!(run.ok(), "kubectl wait {condition} job/{job}: {run}");
}

#[test]
fn a_job_completes_and_each_pod_is_counted_once() {
    let c = cluster();
    let s = &c.s;
    s.apply_ok(
        &job_yaml(
            "pi",
            "  completions: 3\n  parallelism: 2",
            r#"["sh", "-c", "sleep 1"]"#,
        ),
        &[],
    );
    wait(s, "complete", "pi");
    let job = job_json(s, "pi");
    assert_eq!(job["status"]["succeeded"], 3, "{job}");
    assert_eq!(job["status"]["active"], 0, "{job}");
    assert!(job["status"]["completionTime"].is_string(), "{job}");
    assert!(job["status"]["startTime"].is_string(), "{job}");
    assert_eq!(
        conditions(&job),
        vec![
            (
                "SuccessCriteriaMet".into(),
                "True".into(),
                "CompletionsReached".into()
            ),
            (
                "Complete".into(),
                "True".into(),
                "CompletionsReached".into()
            ),
        ]
    );
    // Every pod finished and none still carries the tracking finalizer.
    let pods = s.kubectl_json(&[
        "get",
        "pods",
        "-l",
        "batch.kubernetes.io/job-name=pi",
        "-o",
        "json",
    ]);
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 3, "{pods}");
    for p in &items {
        assert_eq!(p["status"]["phase"], "Succeeded", "{p}");
        assert!(p["metadata"]["finalizers"].is_null(), "{p}");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Job");
    }
    let table = s.kubectl_ok(&["get", "job", "pi", "--no-headers"]);
    let cols: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(&cols[..3], &["pi", "Complete", "3/3"], "{table}");
    eventually("the Completed event", DEADLINE, || {
        let reasons = event_reasons(s, "pi");
        (reasons.iter().filter(|r| *r == "SuccessfulCreate").count() == 3
            && reasons.iter().any(|r| r == "Completed"))
        .then_some(())
    });
}

#[test]
fn failures_stop_at_the_backoff_limit_and_a_failure_policy_fails_at_once() {
    let c = cluster();
    let s = &c.s;
    s.apply_ok(
        &job_yaml("flaky", "  backoffLimit: 0", r#"["sh", "-c", "exit 1"]"#),
        &[],
    );
    s.apply_ok(
        &job_yaml(
            "doomed",
            "  completions: 2
  parallelism: 2
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {containerName: main, operator: In, values: [42]}",
            r#"["sh", "-c", "exit 42"]"#,
        ),
        &[],
    );
    wait(s, "failed", "flaky");
    let flaky = job_json(s, "flaky");
    assert_eq!(flaky["status"]["failed"], 1, "{flaky}");
    assert_eq!(
        conditions(&flaky),
        vec![
            (
                "FailureTarget".into(),
                "True".into(),
                "BackoffLimitExceeded".into()
            ),
            (
                "Failed".into(),
                "True".into(),
                "BackoffLimitExceeded".into()
            ),
        ]
    );
    let message = flaky["status"]["conditions"][1]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(message, "Job has reached the specified backoff limit");

    wait(s, "failed", "doomed");
    let doomed = job_json(s, "doomed");
    let failed = &doomed["status"]["conditions"][1];
    assert_eq!(failed["type"], "Failed", "{doomed}");
    assert_eq!(failed["reason"], "PodFailurePolicy", "{doomed}");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Container main for pod default/doomed-")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    eventually("the failure events", DEADLINE, || {
        (event_reasons(s, "flaky")
            .iter()
            .any(|r| r == "BackoffLimitExceeded")
            && event_reasons(s, "doomed")
                .iter()
                .any(|r| r == "PodFailurePolicy"))
        .then_some(())
    });
}

#[test]
fn indexed_suspended_and_ttl_jobs() {
    let c = cluster();
    let s = &c.s;
    s.apply_ok(
        &job_yaml(
            "idx",
            "  completions: 3\n  parallelism: 3\n  completionMode: Indexed",
            r#"["sleep", "1"]"#,
        ),
        &[],
    );
    s.apply_ok(&job_yaml("later", "  suspend: true", r#"["true"]"#), &[]);
    s.apply_ok(
        &job_yaml("brief", "  ttlSecondsAfterFinished: 1", r#"["true"]"#),
        &[],
    );

    wait(s, "complete", "idx");
    let idx = job_json(s, "idx");
    assert_eq!(idx["status"]["completedIndexes"], "0-2", "{idx}");
    let pods = s.kubectl_json(&[
        "get",
        "pods",
        "-l",
        "batch.kubernetes.io/job-name=idx",
        "-o",
        "json",
    ]);
    let mut hosts: Vec<String> = pods["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let index = &p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"];
            assert_eq!(
                p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"], *index,
                "{p}"
            );
            p["spec"]["hostname"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    hosts.sort();
    assert_eq!(hosts, vec!["idx-0", "idx-1", "idx-2"]);

    // Suspended: no pod, the Suspended condition; resumed: it runs to completion.
    eventually("later suspended", DEADLINE, || {
        let later = job_json(s, "later");
        conditions(&later)
            .contains(&("Suspended".into(), "True".into(), "JobSuspended".into()))
            .then_some(())
    });
    let none = s.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "batch.kubernetes.io/job-name=later",
        "--no-headers",
    ]);
    assert!(none.trim().is_empty(), "{none}");
    s.kubectl_ok(&[
        "patch",
        "job",
        "later",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    wait(s, "complete", "later");
    let later = job_json(s, "later");
    assert!(
        conditions(&later).contains(&("Suspended".into(), "False".into(), "JobResumed".into())),
        "{later}"
    );

    // ttlSecondsAfterFinished: the Job and its pod are gone a moment after it completed.
    eventually("brief deleted after its TTL", DEADLINE, || {
        let gone = s.kubectl(&["get", "job", "brief"]);
        (!gone.ok()).then_some(())
    });
    eventually("brief's pod deleted with it", DEADLINE, || {
        s.kubectl_ok(&[
            "get",
            "pods",
            "-l",
            "batch.kubernetes.io/job-name=brief",
            "--no-headers",
        ])
        .trim()
        .is_empty()
        .then_some(())
    });
}

#[test]
fn a_cron_job_runs_a_job_on_its_schedule_and_trims_its_history() {
    let c = cluster();
    let s = &c.s;
    s.apply_ok(
        "apiVersion: batch/v1
kind: CronJob
metadata:
  name: tick
spec:
  schedule: '@every 2s'
  successfulJobsHistoryLimit: 0
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: main
            image: busybox
            command: [\"true\"]
",
        &[],
    );
    // A scheduled run completes: the CronJob notices (SawCompletedJob), records
    // lastSuccessfulTime, and with a history limit of 0 deletes the finished Job.
    let cj = eventually("a scheduled run completed and trimmed", DEADLINE, || {
        let cj = s.kubectl_json(&["get", "cronjob", "tick", "-o", "json"]);
        let reasons = event_reasons_of(s, "CronJob", "tick");
        let seen = |r: &str| reasons.iter().any(|x| x == r);
        (seen("SuccessfulCreate")
            && seen("SawCompletedJob")
            && seen("SuccessfulDelete")
            && cj["status"]["lastSuccessfulTime"].is_string())
        .then_some(cj)
    });
    assert!(cj["status"]["lastScheduleTime"].is_string(), "{cj}");
    // The Job is named after the minute of its scheduled time.
    let first = s.kubectl_json(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=CronJob,involvedObject.name=tick,reason=SuccessfulCreate",
        "-o",
        "json",
    ]);
    let message = first["items"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.starts_with("Created job tick-"), "{message}");

    // `kubectl create job --from=cronjob/...` makes a Job of the template that runs (from a
    // suspended CronJob whose history keeps it: tick's limit of 0 would delete it at once).
    s.kubectl_ok(&[
        "create",
        "cronjob",
        "nightly",
        "--image=busybox",
        "--schedule=0 3 * * *",
        "--",
        "true",
    ]);
    s.kubectl_ok(&[
        "patch",
        "cronjob",
        "nightly",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    s.kubectl_ok(&["create", "job", "by-hand", "--from=cronjob/nightly"]);
    wait(s, "complete", "by-hand");
    let manual = job_json(s, "by-hand");
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"], "manual",
        "{manual}"
    );
    assert_eq!(manual["status"]["succeeded"], 1, "{manual}");
}

fn event_reasons_of(s: &Server, kind: &str, name: &str) -> Vec<String> {
    let list = s.kubectl_json(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind={kind},involvedObject.name={name}"),
        "-o",
        "json",
    ]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}
