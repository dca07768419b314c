//! batch/v1 Job (`pkg/apis/batch/v1/defaults.go` `SetDefaults_Job`,
//! `pkg/registry/batch/job/strategy.go` `generateSelector` and `JobToSelectableFields`,
//! `pkg/apis/batch/validation/validation.go` `ValidateJobSpec`/`ValidateJobSpecUpdate`, and
//! `printJob`).
//!
//! Unless `manualSelector` is true, a Job's selector is generated from its uid on create, and its
//! pods are labelled with it:
//!
//! ```text
//! spec.selector.matchLabels:      batch.kubernetes.io/controller-uid: <uid>
//! spec.template.metadata.labels:  batch.kubernetes.io/controller-uid: <uid>, controller-uid: <uid>,
//!                                 batch.kubernetes.io/job-name: <name>, job-name: <name>
//! ```

use super::field::{FieldPath, validate_immutable, validate_nonnegative};
use super::pod_spec::{default_pod_template, validate_pod_template};
use super::selector::{go_render, validate_label_selector};
use super::table::{age_column, column, container_columns, containers_and_images, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::Selector;
use apimachinery::duration::{human_duration, since};
use apimachinery::labels::format_label_selector;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// The Job rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct JobRules;

/// The label selecting a Job's pods by the Job's uid.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// How Jobs (and CronJobs) describe their `Selector` column.
pub const JOB_SELECTOR_DESCRIPTION: &str =
    "A label query over pods that should match the pod count.";
/// The label carrying the Job's name on its pods.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

impl KindRules for JobRules {
    type Object = Job;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut Job) {
        let spec = obj.spec.get_or_insert_with(JobSpec::default);
        if spec.completions.is_none() && spec.parallelism.is_none() {
            spec.completions = Some(1);
        }
        spec.parallelism.get_or_insert(1);
        if spec.backoff_limit.is_none() {
            spec.backoff_limit = Some(if spec.backoff_limit_per_index.is_some() {
                i32::MAX
            } else {
                6
            });
        }
        let template_labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone());
        if let Some(labels) = template_labels
            && obj.metadata.labels.as_ref().is_none_or(|l| l.is_empty())
        {
            obj.metadata.labels = Some(labels);
        }
        spec.completion_mode
            .get_or_insert_with(|| "NonIndexed".to_owned());
        spec.suspend.get_or_insert(false);
        spec.pod_replacement_policy.get_or_insert_with(|| {
            if spec.pod_failure_policy.is_some() {
                "Failed"
            } else {
                "TerminatingOrFailed"
            }
            .to_owned()
        });
        default_pod_template(&mut spec.template);
    }

    fn prepare_for_create(&self, obj: &mut Job) {
        let uid = obj.metadata.uid.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let spec = obj.spec.get_or_insert_with(JobSpec::default);
        if spec.manual_selector != Some(true) && !uid.is_empty() {
            let labels = spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .labels
                .get_or_insert_with(Default::default);
            for key in ["job-name", JOB_NAME_LABEL] {
                labels.entry(key.to_owned()).or_insert_with(|| name.clone());
            }
            for key in ["controller-uid", CONTROLLER_UID_LABEL] {
                labels.entry(key.to_owned()).or_insert_with(|| uid.clone());
            }
            spec.selector
                .get_or_insert_with(LabelSelector::default)
                .match_labels
                .get_or_insert_with(Default::default)
                .entry(CONTROLLER_UID_LABEL.to_owned())
                .or_insert(uid);
        }
        // Kubernetes defaults again when it reads the stored Job back: the Job takes the
        // (now generated) template labels when it has none of its own.
        self.set_defaults(obj);
    }

    fn validate(&self, obj: &Job) -> Vec<FieldError> {
        let spec = obj.spec.clone().unwrap_or_default();
        let path = FieldPath::new("spec");
        let mut errs = validate_job_spec(&spec, &path);
        match &spec.selector {
            None => errs.push(FieldError::required(&path.child("selector"), "")),
            Some(sel) => errs.extend(validate_label_selector(sel, &path.child("selector"))),
        }
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone());
        if spec.selector.as_ref().is_none_or(|sel| {
            !Selector::from_label_selector(Some(sel)).is_ok_and(|s| s.matches(&labels.as_ref()))
        }) {
            errs.push(FieldError::invalid(
                &path.child("template").child("metadata").child("labels"),
                labels.unwrap_or_default(),
                "`selector` does not match template `labels`",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Job, old: &Job) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (n, o) = (
            new.spec.clone().unwrap_or_default(),
            old.spec.clone().unwrap_or_default(),
        );
        let path = FieldPath::new("spec");
        let n_sel = n.selector.clone().unwrap_or_default();
        errs.extend(validate_immutable(
            &n.selector,
            &o.selector,
            || go_render(&n_sel).0,
            &path.child("selector"),
        ));
        errs.extend(validate_immutable(
            &n.template,
            &o.template,
            || "core.PodTemplateSpec{...}".to_owned(),
            &path.child("template"),
        ));
        errs.extend(validate_immutable(
            &n.completion_mode,
            &o.completion_mode,
            || format!("{:?}", n.completion_mode.clone().unwrap_or_default()),
            &path.child("completionMode"),
        ));
        errs.extend(validate_immutable(
            &n.completions,
            &o.completions,
            || {
                n.completions
                    .map_or_else(|| "null".to_owned(), |c| c.to_string())
            },
            &path.child("completions"),
        ));
        errs
    }

    fn selectable_fields(&self, obj: &Job) -> Vec<(&'static str, String)> {
        let succeeded = obj.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
        vec![("status.successful", succeeded.to_string())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column("Status", "string", "Status of the job.", 0),
            column(
                "Completions",
                "string",
                "The number of pods which reached phase Succeeded.",
                0,
            ),
            column(
                "Duration",
                "string",
                "Time required to complete the job.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(JOB_SELECTOR_DESCRIPTION));
        cols
    }

    fn table_row(&self, obj: &Job, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let succeeded = status.succeeded.unwrap_or(0);
        let completions = match spec.completions {
            Some(c) => format!("{succeeded}/{c}"),
            None => match spec.parallelism.unwrap_or(0) {
                p if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let duration = match (&status.start_time, &status.completion_time) {
            (None, _) => String::new(),
            (Some(start), None) => since(Some(start.0), now),
            (Some(start), Some(end)) => human_duration(end.0.duration_since(start.0)),
        };
        let has = |t: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == t && c.status == "True")
        };
        let state = if has("Complete") {
            "Complete"
        } else if has("Failed") {
            "Failed"
        } else if obj.metadata.deletion_timestamp.is_some() {
            "Terminating"
        } else if has("Suspended") {
            "Suspended"
        } else if has("FailureTarget") {
            "FailureTarget"
        } else if has("SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let [containers, images] = containers_and_images(spec.template.spec.as_ref());
        vec![
            text(state),
            text(completions),
            text(duration),
            text(age(&obj.metadata, now)),
            containers,
            images,
            text(format_label_selector(spec.selector.as_ref())),
        ]
    }
}

/// `validateJobSpec`: counts, completion mode, the pod template and its restart policy
/// (shared with a CronJob's `jobTemplate.spec`).
pub fn validate_job_spec(spec: &JobSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, value) in [
        ("parallelism", spec.parallelism.map(i64::from)),
        ("completions", spec.completions.map(i64::from)),
        ("activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoffLimit", spec.backoff_limit.map(i64::from)),
        (
            "ttlSecondsAfterFinished",
            spec.ttl_seconds_after_finished.map(i64::from),
        ),
    ] {
        if let Some(v) = value {
            errs.extend(validate_nonnegative(v, &path.child(field)));
        }
    }
    if let Some(mode) = spec.completion_mode.as_deref() {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(
                &path.child("completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" && spec.completions.is_none() {
            errs.push(FieldError::required(
                &path.child("completions"),
                "when completion mode is Indexed",
            ));
        }
    }
    let template_path = path.child("template");
    errs.extend(validate_pod_template(&spec.template, &template_path));
    let restart = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_default();
    let restart_path = template_path.child("spec").child("restartPolicy");
    match restart.as_str() {
        "Always" | "" => errs.push(FieldError::required(
            &restart_path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" | "Never" => {}
        other => errs.push(FieldError::not_supported(
            &restart_path,
            other,
            &["OnFailure", "Never"],
        )),
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn created(restart: &str) -> Value {
        let s = Typed(JobRules);
        let mut obj = json!({"metadata": {"name": "pi", "namespace": "default", "uid": "u-1", "creationTimestamp": "2024-01-01T00:00:00Z"},
                             "spec": {"template": {"spec": {"restartPolicy": restart, "containers": [{"name": "pi", "image": "perl:5.34"}]}}}});
        s.default(&mut obj).unwrap();
        s.prepare_for_create(&mut obj);
        obj
    }

    #[test]
    fn defaults_and_generated_selector() {
        let obj = created("Never");
        let spec = &obj["spec"];
        assert_eq!(spec["completions"], json!(1));
        assert_eq!(spec["parallelism"], json!(1));
        assert_eq!(spec["backoffLimit"], json!(6));
        assert_eq!(spec["completionMode"], json!("NonIndexed"));
        assert_eq!(spec["suspend"], json!(false));
        assert_eq!(spec["podReplacementPolicy"], json!("TerminatingOrFailed"));
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = json!({"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi", "controller-uid": "u-1", "job-name": "pi"});
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(obj["metadata"]["labels"], labels);
        assert!(Typed(JobRules).validate_create(&obj).is_empty());
    }

    #[test]
    fn restart_policy_must_be_on_failure_or_never() {
        let errs: Vec<String> =
            crate::strategy::messages(&Typed(JobRules).validate_create(&created("Always")));
        assert_eq!(
            errs,
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ]
        );
    }

    #[test]
    fn template_and_selector_are_immutable() {
        let s = Typed(JobRules);
        let old = created("Never");
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5.36");
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec!["spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"]
        );
    }

    #[test]
    fn table_row() {
        let mut obj = created("Never");
        obj["status"] = json!({"succeeded": 1, "startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:00:42Z",
                               "conditions": [{"type": "Complete", "status": "True"}]});
        let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(
            Typed(JobRules).table_row(&obj, now),
            vec![
                json!("Complete"),
                json!("1/1"),
                json!("42s"),
                json!("10m"),
                json!("pi"),
                json!("perl:5.34"),
                json!("batch.kubernetes.io/controller-uid=u-1")
            ]
        );
        assert_eq!(
            Typed(JobRules).selectable_fields(&obj),
            vec![("status.successful", "1".to_owned())]
        );
    }
}
