//! The Deployment controller's arithmetic and bookkeeping.
//!
//! Mirrors `pkg/controller/deployment/util/deployment_util.go` (and the `ReplicaSetsBy*`
//! sorts of `pkg/controller/controller_utils.go`). Conditions and the
//! complete/progressing/timed-out tests are in [`super::conditions`]; the pod-template-hash in
//! [`super::hash`].
//!
//! The central piece is [`resolve_fenceposts`]: a rolling update may run up to
//! `replicas + maxSurge` pods and must keep at least `replicas - maxUnavailable` available.
//!
//! ```text
//!   replicas 10, maxSurge 25%, maxUnavailable 25%
//!   surge       = ceil(10 × 25 / 100)  = 3   → at most 13 pods
//!   unavailable = floor(10 × 25 / 100) = 2   → at least 8 available
//!   (both 0 after rounding → unavailable 1, or the rollout could never move)
//! ```

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::{Error, Result};

/// Records the rollout sequence number of a ReplicaSet (and the Deployment's current one).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet served (it was rolled back to), comma separated.
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when it last scaled this ReplicaSet: tells scaling
/// events (the user changed `replicas`) apart from rollout steps.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `replicas + maxSurge` when it last scaled this ReplicaSet: the base of proportions.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The annotation that round-trips the removed `spec.rollbackTo` field (`apps.DeprecatedRollbackTo`).
pub const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// kubectl's client-side apply record; never copied between Deployment and ReplicaSet.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The label that makes each ReplicaSet's pods distinct (`apps.DefaultDeploymentUniqueLabelKey`).
pub const DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: &str = "pod-template-hash";
/// Longest `revision-history` value kept (`maxRevHistoryLengthInChars` in `sync.go`).
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Annotations that are never copied from a Deployment to its ReplicaSets (`annotationsToSkip`).
///
/// Unlike Kubernetes, the list also holds miniplane's trace annotation: the API server
/// stamps it on every write, so copying it would make each ReplicaSet write look like a
/// change the Deployment must copy again.
pub const ANNOTATIONS_TO_SKIP: [&str; 7] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    DEPRECATED_ROLLBACK_TO,
    client::trace::TRACEPARENT_ANNOTATION,
];

// ---- accessors: objects are external data, missing fields get the API server's defaults ----

/// `spec.replicas` of a Deployment (defaulted to 1 by the API server).
pub fn deployment_replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.replicas` of a ReplicaSet (defaulted to 1 by the API server).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Sets `spec.replicas` of a ReplicaSet.
pub fn set_rs_replicas(rs: &mut ReplicaSet, replicas: i32) {
    rs.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
}

/// `status.replicas`, `status.readyReplicas`, `status.availableReplicas` of a ReplicaSet.
pub fn rs_status_counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    rs.status.as_ref().map_or((0, 0, 0), |s| {
        (
            s.replicas,
            s.ready_replicas.unwrap_or(0),
            s.available_replicas.unwrap_or(0),
        )
    })
}

/// `status.availableReplicas` of a ReplicaSet.
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs_status_counts(rs).2
}

/// `spec.template` of a ReplicaSet (an empty template when missing).
pub fn rs_template(rs: &ReplicaSet) -> PodTemplateSpec {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default()
}

/// `spec.template` of a Deployment.
pub fn deployment_template(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// `IsRollingUpdate`: the strategy is `RollingUpdate` (the default when unset).
pub fn is_rolling_update(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

/// `spec.strategy.type`, defaulted to `RollingUpdate`.
pub fn strategy_type(d: &Deployment) -> &str {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// `spec.minReadySeconds` of a Deployment.
pub fn deployment_min_ready_seconds(d: &Deployment) -> i32 {
    d.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

fn annotation<'a>(annotations: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    annotations?.get(key).map(String::as_str)
}

// ---- maxSurge / maxUnavailable ----

/// `intstr.GetScaledValueFromIntOrPercent`: an int as is, `"25%"` of `total` rounded up or
/// down. A string without `%` is an error, with Kubernetes' message.
pub fn get_scaled_value_from_int_or_percent(
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32> {
    match value {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(Error::InvalidIntOrPercent(
                    "invalid type: string is not a percentage".into(),
                ));
            };
            let percent: i64 = number.parse().map_err(|_| {
                Error::InvalidIntOrPercent(format!(
                    "invalid value {s:?}: strconv.Atoi: parsing {number:?}: invalid syntax"
                ))
            })?;
            let scaled = percent * i64::from(total);
            let value = if round_up {
                scaled.div_euclid(100) + i64::from(scaled.rem_euclid(100) != 0)
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(value).map_err(|_| {
                Error::InvalidIntOrPercent(format!("invalid value {s:?}: out of range"))
            })
        }
    }
}

/// `ResolveFenceposts`: `(maxSurge, maxUnavailable)` in pods for `desired` replicas. Surge
/// rounds up, unavailable rounds down, missing values count as 0, and when both resolve to 0
/// unavailable becomes 1 so the rollout can make progress.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32)> {
    let zero = IntOrString::Int(0);
    let surge = get_scaled_value_from_int_or_percent(max_surge.unwrap_or(&zero), desired, true)?;
    let mut unavailable =
        get_scaled_value_from_int_or_percent(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// The Deployment's `rollingUpdate` parameters, with the API server's 25%/25% defaults.
fn rolling_params(d: &Deployment) -> (Option<IntOrString>, Option<IntOrString>) {
    let default = || Some(IntOrString::String("25%".into()));
    match d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
    {
        Some(ru) => (ru.max_surge.clone(), ru.max_unavailable.clone()),
        None => (default(), default()),
    }
}

/// Both fenceposts of a rolling Deployment (errors are validation's job; they resolve to 0
/// here as in Kubernetes, which ignores the error).
fn fenceposts(d: &Deployment) -> (i32, i32) {
    let (surge, unavailable) = rolling_params(d);
    resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), deployment_replicas(d))
        .unwrap_or((0, 0))
}

/// `MaxSurge`: extra pods a rolling update may create; 0 for Recreate.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `MaxUnavailable`: pods a rolling update may take down; 0 for Recreate or 0 replicas,
/// never more than `replicas`.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = deployment_replicas(d);
    if !is_rolling_update(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

/// `MinAvailable`: `replicas - maxUnavailable` for a rolling update, else 0.
pub fn min_available(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    deployment_replicas(d) - max_unavailable(d)
}

/// `NewRSNewReplicas`: how big the new ReplicaSet may be now. Rolling: grow by what the surge
/// leaves free (`replicas + maxSurge - Σ spec.replicas`), never past `replicas`. Recreate:
/// `replicas` at once (old ones are already at 0).
pub fn new_rs_new_replicas(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    new_rs: &ReplicaSet,
) -> Result<i32> {
    let replicas = deployment_replicas(d);
    match strategy_type(d) {
        "RollingUpdate" => {
            let (surge, _) = rolling_params(d);
            let zero = IntOrString::Int(0);
            let max_surge = get_scaled_value_from_int_or_percent(
                surge.as_ref().unwrap_or(&zero),
                replicas,
                true,
            )?;
            let current = get_replica_count_for_replica_sets(all_rss);
            let max_total = replicas + max_surge;
            let new_replicas = rs_replicas(new_rs);
            if current >= max_total {
                return Ok(new_replicas);
            }
            let scale_up = (max_total - current).min(replicas - new_replicas);
            Ok(new_replicas + scale_up)
        }
        "Recreate" => Ok(replicas),
        other => Err(Error::UnsupportedStrategy(other.to_string())),
    }
}

// ---- sums over replica sets ----

/// `GetReplicaCountForReplicaSets`: Σ `spec.replicas`.
pub fn get_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_replicas(rs)).sum()
}

/// `GetActualReplicaCountForReplicaSets`: Σ `status.replicas`.
pub fn get_actual_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_status_counts(rs).0).sum()
}

/// `GetReadyReplicaCountForReplicaSets`: Σ `status.readyReplicas`.
pub fn get_ready_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_status_counts(rs).1).sum()
}

/// `GetAvailableReplicaCountForReplicaSets`: Σ `status.availableReplicas`.
pub fn get_available_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_status_counts(rs).2).sum()
}

/// `FilterActiveReplicaSets`: those with `spec.replicas > 0`.
pub fn filter_active_replica_sets<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    rss.iter()
        .copied()
        .filter(|rs| rs_replicas(rs) > 0)
        .collect()
}

// ---- revisions ----

/// `Revision`: the `revision` annotation as a number (0 when absent, an error when garbled).
pub fn revision(rs: &ReplicaSet) -> std::result::Result<i64, std::num::ParseIntError> {
    match annotation(rs.metadata.annotations.as_ref(), REVISION_ANNOTATION) {
        None => Ok(0),
        Some(v) => v.parse(),
    }
}

/// `MaxRevision`: the highest revision (garbled ones skipped).
pub fn max_revision(rss: &[&ReplicaSet]) -> i64 {
    rss.iter()
        .filter_map(|rs| revision(rs).ok())
        .max()
        .unwrap_or(0)
        .max(0)
}

/// `LastRevision`: the second highest revision — what `rollout undo` goes back to.
pub fn last_revision(rss: &[&ReplicaSet]) -> i64 {
    let (mut max, mut second) = (0, 0);
    for v in rss.iter().filter_map(|rs| revision(rs).ok()) {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// `SetDeploymentRevision`: records `revision` on the Deployment; true if it changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = d.metadata.annotations.get_or_insert_with(Default::default);
    if annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION_ANNOTATION.into(), revision.into());
    true
}

// ---- annotations ----

/// `skipCopyAnnotation`.
pub fn skip_copy_annotation(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

/// `copyDeploymentAnnotationsToReplicaSet`: the Deployment's annotations except the skip
/// list; true if the ReplicaSet's annotations changed. (Annotations are only added or
/// overwritten, never removed, as in Kubernetes.)
pub fn copy_deployment_annotations_to_replica_set(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    let target = rs.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) || target.get(k) == Some(v) {
            continue;
        }
        target.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// `SetDeploymentAnnotationsTo`: on rollback, the Deployment takes the annotations of the
/// ReplicaSet it rolls back to, keeping its own skip-listed ones.
pub fn set_deployment_annotations_to(d: &mut Deployment, rollback_to: &ReplicaSet) {
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| skip_copy_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in rollback_to.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(annotations);
}

/// `SetNewReplicaSetAnnotations`: copies the Deployment's annotations, raises the revision to
/// `new_revision` if it is lower (keeping the old one in `revision-history`, trimmed to
/// `rev_history_limit_in_chars`), and for a ReplicaSet about to be created (`!exists`) sets
/// `desired-replicas`/`max-replicas`. True if anything changed.
pub fn set_new_replica_set_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: &str,
    exists: bool,
    rev_history_limit_in_chars: usize,
) -> bool {
    let mut changed = copy_deployment_annotations_to_replica_set(d, rs);
    let annotations = rs.metadata.annotations.get_or_insert_with(Default::default);
    let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
    let old_revision_int: i64 = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse() {
            Ok(n) => n,
            Err(_) => return false, // Kubernetes logs "OldRevision not int" and gives up
        },
    };
    let Ok(new_revision_int) = new_revision.parse::<i64>() else {
        return false;
    };
    if old_revision_int < new_revision_int {
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.into());
        changed = true;
        // It served an earlier revision: this is a rollback to it; keep the history.
        if let Some(old) = old_revision {
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            if history.is_empty() {
                annotations.insert(REVISION_HISTORY_ANNOTATION.into(), old);
            } else {
                let mut entries: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > rev_history_limit_in_chars && start < entries.len() {
                    total -= entries[start].len() + 1;
                    start += 1;
                }
                if total <= rev_history_limit_in_chars {
                    entries = entries.split_off(start);
                    entries.push(&old);
                    let joined = entries.join(",");
                    annotations.insert(REVISION_HISTORY_ANNOTATION.into(), joined);
                }
            }
        }
    }
    if !exists {
        let replicas = deployment_replicas(d);
        changed |= set_replicas_annotations(rs, replicas, replicas + max_surge(d));
    }
    changed
}

fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(rs.metadata.annotations.as_ref(), key)?
        .parse()
        .ok()
}

/// `GetDesiredReplicasAnnotation`.
pub fn get_desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
}

/// `getMaxReplicasAnnotation`.
pub fn get_max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, MAX_REPLICAS_ANNOTATION)
}

/// `SetReplicasAnnotations`: true if either annotation changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(Default::default);
    let mut updated = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired),
        (MAX_REPLICAS_ANNOTATION, max),
    ] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.into(), value);
            updated = true;
        }
    }
    updated
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = rs.metadata.annotations.as_ref();
    annotation(annotations, DESIRED_REPLICAS_ANNOTATION) != Some(desired.to_string().as_str())
        || annotation(annotations, MAX_REPLICAS_ANNOTATION) != Some(max.to_string().as_str())
}

// ---- proportional scaling ----

/// `GetProportion`: how many of the `to_add` replicas (negative when scaling down) this
/// ReplicaSet gets, given `added` were already handed out.
pub fn get_proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = get_replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `getReplicaSetFraction`: `round(rs.replicas × (replicas + surge) / max-replicas) - rs.replicas`.
fn get_replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = deployment_replicas(d);
    if replicas == 0 {
        return -rs_replicas(rs);
    }
    let deployment_replicas = replicas + max_surge(d);
    let annotated = get_max_replicas_annotation(rs)
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0; // never proportionally scale from zero (Go would divide by zero to +Inf)
    }
    let size = f64::from(rs_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
    // integer.RoundToInt32 rounds half away from zero, like f64::round.
    size.round() as i32 - rs_replicas(rs)
}

// ---- new and old replica sets ----

/// `EqualIgnoreHash`: templates equal once the `pod-template-hash` label is removed from both.
pub fn equal_ignore_hash(t1: &PodTemplateSpec, t2: &PodTemplateSpec) -> bool {
    fn strip(t: &PodTemplateSpec) -> PodTemplateSpec {
        let mut t = t.clone();
        let meta = t.metadata.get_or_insert_with(Default::default);
        if let Some(labels) = meta.labels.as_mut() {
            labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
            if labels.is_empty() {
                meta.labels = None; // semantic equality: an empty map equals a missing one
            }
        }
        if meta == &Default::default() {
            t.metadata = None;
        }
        t
    }
    strip(t1) == strip(t2)
}

/// `ReplicaSetsByCreationTimestamp`: older first, ties by name.
pub fn by_creation_timestamp(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `ReplicaSetsBySizeOlder`: larger first, ties older first (scale down the old ones first).
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| by_creation_timestamp(a, b))
}

/// `ReplicaSetsBySizeNewer`: larger first, ties newer first (scale up the new ones first).
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| by_creation_timestamp(b, a))
}

/// `ReplicaSetsByRevision`: lower revision first, ties by creation.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let (ra, rb) = (revision(a).unwrap_or(0), revision(b).unwrap_or(0));
    ra.cmp(&rb).then_with(|| by_creation_timestamp(a, b))
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's
/// (ignoring the hash label). Returns its index in `rss`.
pub fn find_new_replica_set(d: &Deployment, rss: &[ReplicaSet]) -> Option<usize> {
    let template = deployment_template(d);
    let mut order: Vec<usize> = (0..rss.len()).collect();
    order.sort_by(|&a, &b| by_creation_timestamp(&rss[a], &rss[b]));
    order
        .into_iter()
        .find(|&i| equal_ignore_hash(&rs_template(&rss[i]), &template))
}

/// `FindOldReplicaSets`: indices of every ReplicaSet but the new one, as
/// `(with replicas > 0, all)`.
pub fn find_old_replica_sets(d: &Deployment, rss: &[ReplicaSet]) -> (Vec<usize>, Vec<usize>) {
    let new = find_new_replica_set(d, rss);
    let all: Vec<usize> = (0..rss.len()).filter(|&i| Some(i) != new).collect();
    let required = all
        .iter()
        .copied()
        .filter(|&i| rs_replicas(&rss[i]) != 0)
        .collect();
    (required, all)
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or the newest one if none is active;
/// `None` when several are active (then scaling is proportional).
pub fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSet>,
    old_rss: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    let mut old: Vec<&ReplicaSet> = old_rss.to_vec();
    old.sort_by(|a, b| by_creation_timestamp(b, a));
    let mut all = old.clone();
    all.extend(new_rs);
    let active = filter_active_replica_sets(&all);
    match active.len() {
        0 => new_rs.or_else(|| old.first().copied()),
        1 => Some(active[0]),
        _ => None,
    }
}

/// `IsSaturated`: the new ReplicaSet owns all `replicas`, believes so (annotation), and all are
/// available.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(desired) = annotation(
        rs.metadata.annotations.as_ref(),
        DESIRED_REPLICAS_ANNOTATION,
    )
    .and_then(|v| v.parse::<i32>().ok()) else {
        return false;
    };
    let replicas = deployment_replicas(d);
    rs_replicas(rs) == replicas && desired == replicas && rs_available(rs) == replicas
}

/// `SetFromReplicaSetTemplate`: the Deployment's template becomes the ReplicaSet's, without
/// the hash label.
pub fn set_from_replica_set_template(d: &mut Deployment, template: &PodTemplateSpec) {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
    }
    d.spec.get_or_insert_with(Default::default).template = template;
}

/// `HasRevisionHistoryLimit`: set and not `MaxInt32` (the API server defaults it to 10).
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|&l| l != i32::MAX)
}

#[cfg(test)]
#[path = "util_tests.rs"]
mod tests;
