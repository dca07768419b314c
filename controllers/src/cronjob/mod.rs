//! The CronJob controller: create a Job at each time of the schedule.
//!
//! Mirrors `pkg/controller/cronjob/cronjob_controllerv2.go` (`syncCronJob`,
//! `cleanupFinishedJobs`) and `utils.go` (`mostRecentScheduleTime`, `nextScheduleTime`,
//! `nextScheduleTimeDuration`, `getJobFromTemplate2`, `getJobName`). The async shell is in
//! [`controller`]; the schedule syntax is [`apimachinery::cron`].
//!
//! ```text
//!  sync_cron_job(CronJob, its Jobs, Jobs confirmed missing, now)
//!   ├─ reconcile status.active: finished → SawCompletedJob, missing → MissingJob,
//!   │   succeeded → lastSuccessfulTime
//!   ├─ deleting / bad timeZone (UnknownTimeZone) / suspended / bad schedule (UnparseableSchedule) → stop
//!   ├─ the most recent unmet time (from lastScheduleTime or creation; >100 missed → TooManyMissedTimes)
//!   │     none yet                       → requeue at the next time
//!   │     older than startingDeadlineSeconds → MissSchedule
//!   │     already started                → requeue
//!   │     Forbid and a Job active        → JobAlreadyActive
//!   │     Replace                        → delete the active Jobs
//!   │     POST Job <name>-<minutes since epoch> ─▶ SuccessfulCreate, status.active += it,
//!   │                                               lastScheduleTime
//!   ├─ PUT /status when it changed
//!   └─ history: delete the oldest finished Jobs beyond successful/failedJobsHistoryLimit
//!      ─▶ requeue 100 ms after the next time of the schedule
//! ```

pub mod controller;

use std::collections::HashSet;
use std::time::Duration;

use apimachinery::cron::{Schedule, parse_standard, time_zone};
use apimachinery::{EventType, ObjectRef};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::action::{Action, PropagationPolicy, event};
use crate::job::conditions::find_condition;
use crate::owner_ref::new_controller_ref;

/// `batch.kubernetes.io/cronjob-scheduled-timestamp`: when the Job was scheduled to run.
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// `nextScheduleDelta`: the controller wakes this long after a scheduled time.
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);
/// More missed times than this get a `TooManyMissedTimes` warning.
pub const TOO_MANY_MISSED: u64 = 100;

/// Everything one CronJob sync reads.
#[derive(Debug, Clone, Copy)]
pub struct CronJobSyncInput<'a> {
    /// The CronJob (from the lister).
    pub cron_job: &'a CronJob,
    /// The Jobs it controls (from the Job lister).
    pub jobs: &'a [&'a Job],
    /// UIDs of `status.active` Jobs absent from the cache that a live GET found gone.
    pub missing: &'a HashSet<String>,
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct CronJobSync {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
}

/// `getJobName`: `<cronjob>-<minutes since the epoch of the scheduled time>`.
pub fn job_name(cron_job: &CronJob, scheduled: Timestamp) -> String {
    let name = cron_job.metadata.name.as_deref().unwrap_or("");
    format!("{name}-{}", scheduled.as_second().div_euclid(60))
}

fn is_finished(job: &Job) -> Option<&'static str> {
    for t in ["Complete", "Failed"] {
        if find_condition(job, t).is_some_and(|c| c.status == "True") {
            return Some(if t == "Complete" {
                "Complete"
            } else {
                "Failed"
            });
        }
    }
    None
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// `mostRecentScheduleTime`: the latest time of the schedule in `(earliest, now]` and how
/// many there were (counted up to a bound, then estimated from the period), or an error for
/// a schedule whose times are less than a second apart.
pub fn most_recent_schedule_time(
    earliest: Timestamp,
    now: Timestamp,
    schedule: &Schedule,
    zone: &TimeZone,
) -> Result<Option<(Timestamp, u64)>, String> {
    let Some(t1) = schedule.next(earliest, zone) else {
        return Ok(None);
    };
    if now < t1 {
        return Ok(None);
    }
    let Some(t2) = schedule.next(t1, zone) else {
        return Ok(Some((t1, 1)));
    };
    if now < t2 {
        return Ok(Some((t1, 1)));
    }
    let period = t2.duration_since(t1).as_secs();
    if period < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let missed = (now.duration_since(t1).as_secs() / period) as u64 + 1;
    // Start close to `now` (two periods back) and walk forward, as Kubernetes does, so the
    // walk is short whatever the number of missed times.
    let back = jiff::SignedDuration::from_secs(period.saturating_mul(2));
    let start = now.checked_sub(back).ok().filter(|s| *s > t1).unwrap_or(t1);
    let mut latest = t1;
    let mut t = if start > t1 {
        schedule.next(start, zone)
    } else {
        Some(t1)
    };
    while let Some(at) = t.filter(|at| *at <= now) {
        latest = at;
        t = schedule.next(at, zone);
    }
    Ok(Some((latest, missed)))
}

/// `nextScheduleTimeDuration`: how long until 100 ms past the next time of the schedule.
fn next_schedule_duration(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    zone: &TimeZone,
) -> Option<Duration> {
    let earliest = earliest_time(cron_job);
    let base = match most_recent_schedule_time(earliest, now, schedule, zone).ok()? {
        Some((t, _)) => t,
        None if earliest > now => now,
        None => earliest,
    };
    let next = schedule.next(base, zone)?;
    let wait = Duration::try_from(next.duration_since(now)).unwrap_or_default();
    Some(wait + NEXT_SCHEDULE_DELTA)
}

fn earliest_time(cron_job: &CronJob) -> Timestamp {
    cron_job
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .or(cron_job.metadata.creation_timestamp.as_ref())
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

/// `getJobFromTemplate2`: the Job for `scheduled`, named deterministically, with the template's
/// labels and annotations, the scheduled-time annotation (in the CronJob's zone) and the
/// CronJob as controller.
pub fn job_from_template(cron_job: &CronJob, scheduled: Timestamp, zone: &TimeZone) -> Job {
    let template = cron_job
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let local = scheduled.to_zoned(zone.clone());
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.to_owned(),
        local
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cron_job, scheduled)),
            namespace: cron_job.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![new_controller_ref(cron_job)]),
            ..Default::default()
        },
        spec: Some(template.spec.unwrap_or_default()),
        status: None,
    }
}

/// `syncCronJob` + `cleanupFinishedJobs`: the whole decision for one CronJob.
pub fn sync_cron_job(input: CronJobSyncInput<'_>) -> CronJobSync {
    let me = ObjectRef::from_object(input.cron_job);
    let mut cj = input.cron_job.clone();
    let mut actions = Vec::new();
    let mut notes = Vec::new();
    let mut update_status = false;
    let status = cj.status.get_or_insert_with(CronJobStatus::default);
    let mut children: HashSet<String> = HashSet::new();
    for job in input.jobs {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        children.insert(uid.clone());
        let active = status
            .active
            .iter()
            .flatten()
            .any(|r| r.uid.as_deref() == Some(uid.as_str()));
        let finished = is_finished(job);
        if !active && finished.is_none() {
            actions.push(event(
                me.clone(),
                EventType::Warning,
                "UnexpectedJob",
                format!("Saw a job that the controller did not create or forgot: {name}"),
            ));
        } else if active && let Some(condition) = finished {
            if let Some(list) = status.active.as_mut() {
                list.retain(|r| r.uid.as_deref() != Some(uid.as_str()));
            }
            actions.push(event(
                me.clone(),
                EventType::Normal,
                "SawCompletedJob",
                format!("Saw completed job: {name}, condition: {condition}"),
            ));
            notes.push(format!("Job {name} finished ({condition})"));
            update_status = true;
        }
        if finished == Some("Complete")
            && let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.clone())
            && status
                .last_successful_time
                .as_ref()
                .is_none_or(|t| done.0 > t.0)
        {
            status.last_successful_time = Some(done);
            update_status = true;
        }
    }
    let gone: Vec<ObjectReference> = status
        .active
        .iter()
        .flatten()
        .filter(|r| {
            let uid = r.uid.clone().unwrap_or_default();
            !children.contains(&uid) && input.missing.contains(&uid)
        })
        .cloned()
        .collect();
    for r in gone {
        let name = r.name.clone().unwrap_or_default();
        actions.push(event(
            me.clone(),
            EventType::Normal,
            "MissingJob",
            format!("Active job went missing: {name}"),
        ));
        if let Some(list) = status.active.as_mut() {
            list.retain(|a| a.uid != r.uid);
        }
        update_status = true;
    }
    let requeue = schedule_next(
        &mut cj,
        &me,
        input,
        &mut actions,
        &mut notes,
        &mut update_status,
    );
    if update_status {
        if let Some(s) = cj.status.as_mut()
            && s.active.as_ref().is_some_and(Vec::is_empty)
        {
            s.active = None;
        }
        actions.push(Action::UpdateCronJobStatus(Box::new(cj.clone())));
    }
    cleanup_finished_jobs(&cj, input.jobs, &me, &mut actions, &mut notes);
    if let Some(after) = requeue {
        actions.push(Action::RequeueAfter(after));
    }
    if notes.is_empty() {
        notes.push("nothing due".into());
    }
    CronJobSync {
        actions,
        summary: notes.join(" → "),
    }
}

/// The scheduling half of `syncCronJob`. Returns when to look again.
fn schedule_next(
    cj: &mut CronJob,
    me: &ObjectRef,
    input: CronJobSyncInput<'_>,
    actions: &mut Vec<Action>,
    notes: &mut Vec<String>,
    update_status: &mut bool,
) -> Option<Duration> {
    let now = input.now;
    if cj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = cj.spec.clone().unwrap_or_default();
    let zone = match spec.time_zone.as_deref() {
        Some(name) => match time_zone(name) {
            Ok(z) => z,
            Err(e) => {
                actions.push(event(
                    me.clone(),
                    EventType::Warning,
                    "UnknownTimeZone",
                    format!("invalid timeZone: {name:?}: {e}"),
                ));
                notes.push(format!("unknown time zone {name}"));
                return None;
            }
        },
        None => TimeZone::UTC,
    };
    if spec.suspend == Some(true) {
        notes.push("suspended".into());
        return None;
    }
    let schedule = match parse_standard(&spec.schedule) {
        Ok(s) => s,
        Err(e) => {
            actions.push(event(
                me.clone(),
                EventType::Warning,
                "UnparseableSchedule",
                format!("unparseable schedule: {:?} : {e}", spec.schedule),
            ));
            notes.push(format!("unparseable schedule {:?}", spec.schedule));
            return None;
        }
    };
    let mut earliest = earliest_time(cj);
    if let Some(deadline) = spec.starting_deadline_seconds
        && let Ok(limit) = now.checked_sub(jiff::SignedDuration::from_secs(deadline))
        && limit > earliest
    {
        earliest = limit;
    }
    let scheduled = match most_recent_schedule_time(earliest, now, &schedule, &zone) {
        Err(e) => {
            actions.push(event(
                me.clone(),
                EventType::Warning,
                "InvalidSchedule",
                format!("invalid schedule: {} : {e}", spec.schedule),
            ));
            return None;
        }
        Ok(None) => {
            let wait = next_schedule_duration(cj, now, &schedule, &zone);
            if let Some(w) = wait {
                notes.push(format!("next run in {}s", w.as_secs()));
            }
            return wait;
        }
        Ok(Some((t, missed))) => {
            if missed > TOO_MANY_MISSED {
                actions.push(event(
                    me.clone(),
                    EventType::Warning,
                    "TooManyMissedTimes",
                    format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"),
                ));
            }
            t
        }
    };
    if let Some(deadline) = spec.starting_deadline_seconds
        && scheduled
            .checked_add(jiff::SignedDuration::from_secs(deadline))
            .is_ok_and(|d| d < now)
    {
        let when = scheduled.strftime("%a, %d %b %Y %H:%M:%S %z").to_string();
        actions.push(event(
            me.clone(),
            EventType::Warning,
            "MissSchedule",
            format!("Missed scheduled time to start a job: {when}"),
        ));
        notes.push(format!(
            "missed {scheduled} (startingDeadlineSeconds {deadline})"
        ));
        return next_schedule_duration(cj, now, &schedule, &zone);
    }
    let name = job_name(cj, scheduled);
    let status = cj.status.get_or_insert_with(CronJobStatus::default);
    let in_active = status
        .active
        .iter()
        .flatten()
        .any(|r| r.name.as_deref() == Some(name.as_str()));
    if in_active
        || status
            .last_schedule_time
            .as_ref()
            .is_some_and(|t| t.0 == scheduled)
    {
        return next_schedule_duration(cj, now, &schedule, &zone);
    }
    // A Job of this name exists already (created before a restart whose status write was
    // lost, or a schedule more often than once a minute: Job names count minutes). Kubernetes'
    // create meets AlreadyExists, and a Job this CronJob controls goes into the active list
    // with this time as the last scheduled one, finished or not; someone else's is left alone.
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    if let Some(existing) = input
        .jobs
        .iter()
        .find(|j| j.metadata.name.as_deref() == Some(name.as_str()))
    {
        if crate::owner_ref::is_controlled_by(&existing.metadata, &uid) {
            status
                .active
                .get_or_insert_with(Vec::new)
                .push(job_ref(existing));
            status.last_schedule_time = Some(Time(scheduled));
            *update_status = true;
            notes.push(format!("{scheduled}: Job {name} exists already"));
        }
        return next_schedule_duration(cj, now, &schedule, &zone);
    }
    let active_now = status.active.as_ref().map_or(0, Vec::len);
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    if policy == "Forbid" && active_now > 0 {
        actions.push(event(
            me.clone(),
            EventType::Normal,
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        ));
        notes.push(format!(
            "{scheduled}: a Job still runs and concurrencyPolicy is Forbid"
        ));
        return next_schedule_duration(cj, now, &schedule, &zone);
    }
    if policy == "Replace" {
        for r in status.active.take().unwrap_or_default() {
            let job_name = r.name.clone().unwrap_or_default();
            actions.push(Action::Delete {
                target: ObjectRef {
                    api_version: "batch/v1".into(),
                    kind: "Job".into(),
                    namespace: r.namespace.clone(),
                    name: job_name.clone(),
                    uid: r.uid.clone().unwrap_or_default(),
                },
                propagation: Some(PropagationPolicy::Background),
            });
            actions.push(event(
                me.clone(),
                EventType::Normal,
                "SuccessfulDelete",
                format!("Deleted job {job_name}"),
            ));
            notes.push(format!("replace {job_name}"));
            *update_status = true;
        }
    }
    let job = job_from_template(cj, scheduled, &zone);
    notes.push(format!("{scheduled} is due: create Job {name}"));
    actions.push(Action::CreateJob(Box::new(job)));
    actions.push(event(
        me.clone(),
        EventType::Normal,
        "SuccessfulCreate",
        format!("Created job {name}"),
    ));
    let status = cj.status.get_or_insert_with(CronJobStatus::default);
    // The created Job's UID is filled in by the shell from the API server's answer.
    status
        .active
        .get_or_insert_with(Vec::new)
        .push(ObjectReference {
            api_version: Some("batch/v1".into()),
            kind: Some("Job".into()),
            name: Some(name),
            namespace: cj.metadata.namespace.clone(),
            ..Default::default()
        });
    status.last_schedule_time = Some(Time(scheduled));
    *update_status = true;
    next_schedule_duration(cj, now, &schedule, &zone)
}

/// `cleanupFinishedJobs`: the oldest finished Jobs beyond the history limits are deleted.
fn cleanup_finished_jobs(
    cj: &CronJob,
    jobs: &[&Job],
    me: &ObjectRef,
    actions: &mut Vec<Action>,
    notes: &mut Vec<String>,
) {
    let spec = cj.spec.clone().unwrap_or_default();
    for (condition, limit) in [
        ("Complete", spec.successful_jobs_history_limit),
        ("Failed", spec.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else {
            continue;
        };
        let mut finished: Vec<&&Job> = jobs
            .iter()
            .filter(|j| {
                is_finished(j) == Some(condition) && j.metadata.deletion_timestamp.is_none()
            })
            .collect();
        let excess = finished.len().saturating_sub(limit.max(0) as usize);
        if excess == 0 {
            continue;
        }
        // `byJobStartTime`: Jobs without a start time last, then oldest start, then name.
        finished.sort_by_key(|j| {
            let start = j
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0);
            (start.is_none(), start, j.metadata.name.clone())
        });
        for job in finished.into_iter().take(excess) {
            let name = job.metadata.name.clone().unwrap_or_default();
            actions.push(Action::Delete {
                target: ObjectRef::from_object(*job),
                propagation: Some(PropagationPolicy::Background),
            });
            actions.push(event(
                me.clone(),
                EventType::Normal,
                "SuccessfulDelete",
                format!("Deleted job {name}"),
            ));
            notes.push(format!("history: delete {condition} Job {name}"));
        }
    }
}

#[cfg(test)]
mod tests;
