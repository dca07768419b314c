//! batch/v1 CronJob (`pkg/apis/batch/v1/defaults.go` `SetDefaults_CronJob`,
//! `pkg/apis/batch/validation/validation.go` `ValidateCronJobCreate`, `validateCronJobSpec`,
//! `ValidateJobTemplateSpec`, and `printCronJob`).
//!
//! A CronJob's name is at most 52 characters: the controller appends `-<minutes since epoch>`
//! (11 characters) to name each Job, and Job names are DNS labels of at most 63.

use super::field::{FieldPath, validate_nonnegative};
use super::job::{JOB_SELECTOR_DESCRIPTION, validate_job_spec};
use super::pod_spec::default_pod_template;
use super::table::{age_column, column, container_columns, containers_and_images, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::cron::{parse_standard, time_zone};
use apimachinery::duration::since;
use apimachinery::labels::format_label_selector;
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec};
use serde_json::Value;

/// The CronJob rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct CronJobRules;

impl KindRules for CronJobRules {
    type Object = CronJob;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut CronJob) {
        let spec = obj.spec.get_or_insert_with(CronJobSpec::default);
        if spec.concurrency_policy.as_deref().unwrap_or("").is_empty() {
            spec.concurrency_policy = Some("Allow".to_owned());
        }
        spec.suspend.get_or_insert(false);
        spec.successful_jobs_history_limit.get_or_insert(3);
        spec.failed_jobs_history_limit.get_or_insert(1);
        default_pod_template(
            &mut spec
                .job_template
                .spec
                .get_or_insert_with(JobSpec::default)
                .template,
        );
    }

    fn validate(&self, obj: &CronJob) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj.metadata.name.as_deref().unwrap_or("");
        if name.len() > 52 {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                name,
                "must be no more than 52 characters",
            ));
        }
        errs.extend(validate_spec(&obj.spec.clone().unwrap_or_default(), None));
        errs
    }

    fn validate_update(&self, new: &CronJob, old: &CronJob) -> Vec<FieldError> {
        validate_spec(&new.spec.clone().unwrap_or_default(), old.spec.as_ref())
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        let mut cols = vec![
            column(
                "Schedule",
                "string",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
                0,
            ),
            column(
                "Timezone",
                "string",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
                0,
            ),
            column(
                "Suspend",
                "boolean",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
                0,
            ),
            column(
                "Active",
                "integer",
                "A list of pointers to currently running jobs.",
                0,
            ),
            column(
                "Last Schedule",
                "string",
                "Information when was the last time the job was successfully scheduled.",
                0,
            ),
            age_column(),
        ];
        cols.extend(container_columns(JOB_SELECTOR_DESCRIPTION));
        cols
    }

    fn table_row(&self, obj: &CronJob, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let status = obj.status.clone().unwrap_or_default();
        let job_spec = spec.job_template.spec.clone().unwrap_or_default();
        let last = status
            .last_schedule_time
            .as_ref()
            .map_or_else(|| "<none>".to_owned(), |t| since(Some(t.0), now));
        let suspend = match spec.suspend {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let active = status.active.as_ref().map_or(0, Vec::len);
        let [containers, images] = containers_and_images(job_spec.template.spec.as_ref());
        vec![
            text(spec.schedule.clone()),
            text(
                spec.time_zone
                    .clone()
                    .unwrap_or_else(|| "<none>".to_owned()),
            ),
            text(suspend),
            int(i64::try_from(active).unwrap_or(i64::MAX)),
            text(last),
            text(age(&obj.metadata, now)),
            containers,
            images,
            text(format_label_selector(job_spec.selector.as_ref())),
        ]
    }
}

/// `validateCronJobSpec`; `old` is the previous spec on update (a `TZ=` schedule that was
/// already there is tolerated).
fn validate_spec(spec: &CronJobSpec, old: Option<&CronJobSpec>) -> Vec<FieldError> {
    let path = FieldPath::new("spec");
    let mut errs = Vec::new();
    let schedule_path = path.child("schedule");
    if spec.schedule.is_empty() {
        errs.push(FieldError::required(&schedule_path, ""));
    } else {
        if let Err(msg) = parse_standard(&spec.schedule) {
            errs.push(FieldError::invalid(
                &schedule_path,
                spec.schedule.as_str(),
                &msg,
            ));
        }
        let allow_tz = old.is_some_and(|o| o.schedule.contains("TZ"));
        if allow_tz && spec.schedule.contains("TZ") && spec.time_zone.is_some() {
            errs.push(FieldError::invalid(
                &schedule_path,
                spec.schedule.as_str(),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !allow_tz && spec.schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                &schedule_path,
                spec.schedule.as_str(),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    if let Some(d) = spec.starting_deadline_seconds {
        errs.extend(validate_nonnegative(
            d,
            &path.child("startingDeadlineSeconds"),
        ));
    }
    match spec.concurrency_policy.as_deref().unwrap_or("") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required(&path.child("concurrencyPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("concurrencyPolicy"),
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    let job_path = path.child("jobTemplate").child("spec");
    let job_spec = spec.job_template.spec.clone().unwrap_or_default();
    errs.extend(validate_job_spec(&job_spec, &job_path));
    if job_spec.selector.is_some() {
        errs.push(FieldError::invalid(
            &job_path.child("selector"),
            super::selector::go_render(&job_spec.selector.clone().unwrap_or_default()),
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.manual_selector == Some(true) {
        errs.push(FieldError::not_supported(
            &job_path.child("manualSelector"),
            true,
            &["nil", "false"],
        ));
    }
    for (field, value) in [
        (
            "successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit,
        ),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ] {
        if let Some(v) = value {
            errs.extend(validate_nonnegative(i64::from(v), &path.child(field)));
        }
    }
    errs.extend(validate_time_zone(
        spec.time_zone.as_deref(),
        &path.child("timeZone"),
    ));
    errs
}

/// `validateTimeZone`: an IANA name (each part as `validTimeZoneCharacters` allows) that
/// the tz database knows; `Local` is refused.
fn validate_time_zone(zone: Option<&str>, path: &FieldPath) -> Vec<FieldError> {
    let Some(zone) = zone else {
        return Vec::new();
    };
    if zone.is_empty() {
        return vec![FieldError::invalid(
            path,
            zone,
            "timeZone must be nil or non-empty string",
        )];
    }
    let valid_part = |part: &str| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && (1..=14).contains(&part.len())
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_+".contains(&b))
    };
    if !zone.split('/').all(valid_part) {
        return vec![FieldError::invalid(
            path,
            zone,
            &format!("unknown time zone {zone}"),
        )];
    }
    let mut errs = Vec::new();
    if zone.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            path,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    // Go's `time.LoadLocation("Local")` is the process's zone, not an error.
    if zone != "Local"
        && let Err(msg) = time_zone(zone)
    {
        errs.push(FieldError::invalid(path, zone, &msg));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn cronjob(schedule: &str) -> Value {
        let mut obj = json!({"metadata": {"name": "hello", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
                             "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                                 "restartPolicy": "OnFailure", "containers": [{"name": "hello", "image": "busybox:1.28"}]}}}}}});
        Typed(CronJobRules).default(&mut obj).unwrap();
        obj
    }

    #[test]
    fn defaults_and_validation() {
        let obj = cronjob("*/1 * * * *");
        assert_eq!(obj["spec"]["concurrencyPolicy"], json!("Allow"));
        assert_eq!(obj["spec"]["suspend"], json!(false));
        assert_eq!(obj["spec"]["successfulJobsHistoryLimit"], json!(3));
        assert_eq!(obj["spec"]["failedJobsHistoryLimit"], json!(1));
        assert!(Typed(CronJobRules).validate_create(&obj).is_empty());
        let errs: Vec<String> =
            crate::strategy::messages(&Typed(CronJobRules).validate_create(&cronjob("61 * * * *")));
        assert_eq!(
            errs,
            vec![
                "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
            ]
        );
        let errs: Vec<String> =
            crate::strategy::messages(&Typed(CronJobRules).validate_create(&cronjob("")));
        assert_eq!(errs, vec!["spec.schedule: Required value"]);
        let errs: Vec<String> = crate::strategy::messages(
            &Typed(CronJobRules).validate_create(&cronjob("TZ=UTC 0 * * * *")),
        );
        assert_eq!(
            errs,
            vec![
                "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            ]
        );
        for (zone, want) in [
            (
                "",
                vec![
                    "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string",
                ],
            ),
            (
                "Mars/Olympus",
                vec![
                    "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
                ],
            ),
            (
                "../etc",
                vec!["spec.timeZone: Invalid value: \"../etc\": unknown time zone ../etc"],
            ),
            (
                "Local",
                vec![
                    "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                ],
            ),
            (
                "local",
                vec![
                    "spec.timeZone: Invalid value: \"local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                    "spec.timeZone: Invalid value: \"local\": unknown time zone local",
                ],
            ),
            ("Europe/Paris", vec![]),
        ] {
            let mut obj = cronjob("0 * * * *");
            obj["spec"]["timeZone"] = json!(zone);
            let errs = crate::strategy::messages(&Typed(CronJobRules).validate_create(&obj));
            assert_eq!(errs, want, "{zone}");
        }
        let mut long = cronjob("@daily");
        long["metadata"]["name"] = json!("a".repeat(53));
        let errs: Vec<String> =
            crate::strategy::messages(&Typed(CronJobRules).validate_create(&long));
        assert_eq!(
            errs,
            vec![format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 52 characters",
                "a".repeat(53)
            )]
        );
    }

    #[test]
    fn table_row() {
        let mut obj = cronjob("*/1 * * * *");
        obj["status"] = json!({"active": [{"name": "hello-28000000"}], "lastScheduleTime": "2024-01-01T00:09:00Z"});
        let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(
            Typed(CronJobRules).table_row(&obj, now),
            vec![
                json!("*/1 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("60s"),
                json!("10m"),
                json!("hello"),
                json!("busybox:1.28"),
                json!("<none>")
            ]
        );
    }
}
