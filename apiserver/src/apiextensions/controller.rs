//! The CRD controllers inside the API server: naming, establishing, finalizing, and the
//! registry rows of every established CRD.
//!
//! Kubernetes runs several controllers in kube-apiserver's apiextensions part:
//! `pkg/controller/status/naming_controller.go` (`NamesAccepted`, `acceptedNames`),
//! `pkg/controller/establish/establishing_controller.go` (`Established`),
//! `pkg/controller/finalizer/crd_finalizer.go` (deleting a CRD deletes its custom resources,
//! then drops the `customresourcecleanup` finalizer) and `customresource_handler.go`, which
//! starts serving a CRD's versions once it is established. miniplane folds them into one
//! level-triggered loop over all CRDs:
//!
//! ```text
//!  list CRDs ─▶ for each (oldest first):
//!                 names free in the group? ── NamesAccepted, Established, acceptedNames,
//!                                              storedVersions  (status written when changed)
//!                 deletionTimestamp?        ── delete its custom resources; none left →
//!                                              drop the cleanup finalizer (the CRD goes)
//!            ─▶ registry.set_custom(rows of every established CRD)
//!  wait for a CRD event (or, while a CRD terminates, a short tick) and again
//! ```
//!
//! The first pass runs before the server answers requests, so after a restart the custom
//! resources of stored CRDs are served at once.

use super::custom_resource::rows_for;
use super::definition::CLEANUP_FINALIZER;
use super::definition::{GROUP, RESOURCE};
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::meta::{self, MetaField};
use crate::registry::ResourceInfo;
use crate::state::AppState;
use crate::storage::{ObjectRef, Update, prefix};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition, CustomResourceDefinitionNames,
    CustomResourceDefinitionStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use store::Revision;

/// How often a terminating CRD is looked at again while its custom resources go away (their
/// finalizers are removed by controllers elsewhere; no CRD event says so).
const TERMINATING_RECHECK: Duration = Duration::from_millis(100);
/// A full resync when nothing happens (a safety net, as informers' resync).
const RESYNC: Duration = Duration::from_secs(30);

/// What one pass saw.
#[derive(Debug, Clone, Copy)]
pub struct SyncOutcome {
    /// The revision the CRDs were listed at (watch from here).
    pub revision: Revision,
    /// Whether a CRD is being deleted and waits for its custom resources.
    pub terminating: bool,
}

fn crd_info(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new(GROUP, "v1"), RESOURCE)
        .ok_or_else(|| ApiError::Internal("customresourcedefinitions are not registered".into()))
}

/// The names of `crd` another, older CRD of the same group already holds, as the naming
/// controller reports them: `(reason, message)` of a `NamesAccepted=False` condition.
fn conflict(
    names: &CustomResourceDefinitionNames,
    taken_resources: &BTreeSet<String>,
    taken_kinds: &BTreeSet<String>,
) -> Option<(&'static str, String)> {
    if taken_resources.contains(&names.plural) {
        return Some((
            "PluralConflict",
            format!("{:?} is already in use", names.plural),
        ));
    }
    if let Some(s) = names
        .singular
        .as_ref()
        .filter(|s| taken_resources.contains(*s))
    {
        return Some(("SingularConflict", format!("{s:?} is already in use")));
    }
    for short in names.short_names.iter().flatten() {
        if taken_resources.contains(short) {
            return Some((
                "ShortNamesConflict",
                format!("{:?} is already in use", [short]),
            ));
        }
    }
    if taken_kinds.contains(&names.kind) {
        return Some((
            "KindConflict",
            format!("{:?} is already in use", names.kind),
        ));
    }
    if let Some(l) = names
        .list_kind
        .as_ref()
        .filter(|l| taken_kinds.contains(*l))
    {
        return Some(("ListKindConflict", format!("{l:?} is already in use")));
    }
    None
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> CustomResourceDefinitionCondition {
    CustomResourceDefinitionCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: None,
    }
}

/// The status `crd` should have; `lastTransitionTime` is kept for conditions whose status
/// did not change.
fn desired_status(
    crd: &CustomResourceDefinition,
    conflict: Option<(&'static str, String)>,
    now: jiff::Timestamp,
) -> CustomResourceDefinitionStatus {
    let old = crd.status.clone().unwrap_or_default();
    let mut conditions = Vec::new();
    let accepted = conflict.is_none();
    match &conflict {
        None => conditions.push(condition(
            "NamesAccepted",
            true,
            "NoConflicts",
            "no conflicts found",
        )),
        Some((reason, message)) => {
            conditions.push(condition("NamesAccepted", false, reason, message))
        }
    }
    let was_established = old
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Established" && c.status == "True");
    if accepted || was_established {
        conditions.push(condition(
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ));
    } else {
        conditions.push(condition(
            "Established",
            false,
            "NotAccepted",
            "not all names are accepted",
        ));
    }
    if crd.metadata.deletion_timestamp.is_some() {
        conditions.push(condition(
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ));
    }
    for c in &mut conditions {
        let previous = old.conditions.iter().flatten().find(|o| o.type_ == c.type_);
        c.last_transition_time = match previous {
            Some(p) if p.status == c.status => p.last_transition_time.clone(),
            _ => Some(Time(now)),
        };
    }
    let accepted_names = if accepted {
        Some(crd.spec.names.clone())
    } else {
        old.accepted_names.clone()
    };
    let mut stored = old.stored_versions.clone().unwrap_or_default();
    if let Some(storage) = crd.spec.versions.iter().find(|v| v.storage)
        && !stored.contains(&storage.name)
    {
        stored.push(storage.name.clone());
    }
    CustomResourceDefinitionStatus {
        accepted_names,
        conditions: Some(conditions),
        stored_versions: Some(stored),
    }
}

/// One pass over every CRD (see the module docs).
pub async fn sync(state: &AppState) -> Result<SyncOutcome> {
    let info = crd_info(state)?;
    let page = state
        .storage()
        .list(&prefix(&info, None), None, None, 0, &|_| true)
        .await?;
    let mut crds: Vec<CustomResourceDefinition> = page
        .items
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    crds.sort_by_key(|c| {
        (
            c.metadata.creation_timestamp.as_ref().map(|t| t.0),
            c.metadata.name.clone(),
        )
    });
    let now = state.now();
    let mut rows = Vec::new();
    let mut terminating = false;
    // Names already held per group: resource names (plural, singular, short) and kinds.
    let mut taken: std::collections::HashMap<String, (BTreeSet<String>, BTreeSet<String>)> =
        Default::default();
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let (resources, kinds) = taken.entry(crd.spec.group.clone()).or_default();
        let clash = conflict(&crd.spec.names, resources, kinds);
        let status = desired_status(crd, clash, now);
        if let Some(names) = &status.accepted_names {
            resources.insert(names.plural.clone());
            resources.extend(names.singular.clone());
            resources.extend(names.short_names.iter().flatten().cloned());
            kinds.insert(names.kind.clone());
            kinds.extend(names.list_kind.clone());
        }
        let r = ObjectRef {
            info: info.clone(),
            namespace: None,
            name: name.clone(),
        };
        let mut current = crd.clone();
        let established = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established && crd.status.as_ref() != Some(&status) {
            // Served before it is reported Established: a client that waits for the
            // condition and then discovers the resource must find it.
            let mut reported = crd.clone();
            reported.status = Some(status.clone());
            for row in rows_for(&reported) {
                state.registry().add(row);
            }
        }
        if crd.status.as_ref() != Some(&status) {
            let status_json = serde_json::to_value(&status)
                .map_err(|e| ApiError::Internal(format!("encode CRD status: {e}")))?;
            let written = state
                .storage()
                .guaranteed_update(&r, false, |cur| {
                    let Some(mut obj) = cur.cloned() else {
                        return Ok(Update::Keep(Value::Null));
                    };
                    meta::set_status(&mut obj, Some(status_json.clone()));
                    Ok(Update::Put(obj))
                })
                .await?;
            current.status = Some(status.clone());
            if written.object.is_null() {
                continue;
            }
        }
        let mut crd_rows = if established {
            rows_for(&current)
        } else {
            Vec::new()
        };
        if crd.metadata.deletion_timestamp.is_some() {
            let remaining = match crd_rows.first() {
                // Its objects may be too deep for this task's stack (`crate::deep`).
                Some(row) => {
                    crate::deep::LargeStack::new(
                        delete_custom_resources(state, row, now),
                        row.deep_objects,
                    )
                    .await?
                }
                None => 0,
            };
            if remaining == 0 {
                finish_deletion(state, &r).await?;
                continue;
            }
            terminating = true;
            for row in &mut crd_rows {
                row.terminating = true;
            }
        }
        rows.extend(crd_rows);
    }
    state.registry().set_custom(rows);
    Ok(SyncOutcome {
        revision: page.revision,
        terminating,
    })
}

/// Deletes every custom resource of `row`'s resource (all versions share the storage) and
/// returns how many are left (those waiting for finalizers).
async fn delete_custom_resources(
    state: &AppState,
    row: &ResourceInfo,
    now: jiff::Timestamp,
) -> Result<usize> {
    let info = Arc::new(row.clone());
    let page = state
        .storage()
        .list(&prefix(&info, None), None, None, 0, &|_| true)
        .await?;
    let mut remaining = 0;
    for obj in &page.items {
        let r = ObjectRef {
            info: info.clone(),
            namespace: meta::namespace(obj).map(str::to_owned),
            name: meta::name(obj).unwrap_or_default().to_owned(),
        };
        let result = state
            .storage()
            .guaranteed_update(&r, false, |cur| {
                let Some(mut obj) = cur.cloned() else {
                    return Ok(Update::Keep(Value::Null));
                };
                if meta::finalizers(&obj).is_empty() {
                    return Ok(Update::Delete(obj));
                }
                if meta::deletion_timestamp(&obj).is_some() {
                    return Ok(Update::Keep(obj));
                }
                meta::set_meta_str(
                    &mut obj,
                    MetaField::DeletionTimestamp,
                    Some(&meta::format_time(now)),
                );
                meta::set_meta_i64(&mut obj, MetaField::DeletionGracePeriodSeconds, Some(0));
                Ok(Update::Put(obj))
            })
            .await;
        match result {
            Ok(updated) if !updated.deleted && !updated.object.is_null() => remaining += 1,
            Ok(_) | Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(remaining)
}

/// Drops the cleanup finalizer; the CRD is removed when no other finalizer is left.
async fn finish_deletion(state: &AppState, r: &ObjectRef) -> Result<()> {
    let result = state
        .storage()
        .guaranteed_update(r, false, |cur| {
            let Some(mut obj) = cur.cloned() else {
                return Ok(Update::Keep(Value::Null));
            };
            let left: Vec<String> = meta::finalizers(&obj)
                .into_iter()
                .filter(|f| f != CLEANUP_FINALIZER)
                .collect();
            if left.is_empty() {
                return Ok(Update::Delete(obj));
            }
            meta::set_finalizers(&mut obj, left);
            Ok(Update::Put(obj))
        })
        .await;
    match result {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs [`sync`] on every CRD change until the server shuts down.
pub async fn run(state: AppState, mut outcome: SyncOutcome) {
    let Ok(info) = crd_info(&state) else { return };
    let crd_prefix = prefix(&info, None);
    loop {
        let wait = if outcome.terminating {
            TERMINATING_RECHECK
        } else {
            RESYNC
        };
        match state
            .watch_cache()
            .watch(&crd_prefix, outcome.revision)
            .await
        {
            Ok(mut events) => {
                tokio::select! {
                    _ = state.shutdown().cancelled() => return,
                    _ = events.next() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching CustomResourceDefinitions failed");
                tokio::select! {
                    _ = state.shutdown().cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        match sync(&state).await {
            Ok(o) => outcome = o,
            Err(e) => {
                tracing::warn!(error = %e, "syncing CustomResourceDefinitions failed");
                outcome.revision = Revision::ZERO;
                outcome.terminating = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(name: &str, plural: &str, kind: &str) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"group": "demo.dev", "scope": "Namespaced",
                "names": {"plural": plural, "kind": kind, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true}]}
        }))
        .expect("test CRD decodes")
    }

    #[test]
    fn names_are_accepted_then_established() {
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().expect("valid time");
        let c = crd("websites.demo.dev", "websites", "Website");
        let s = desired_status(&c, None, now);
        let conds = s.conditions.clone().unwrap_or_default();
        assert_eq!(conds[0].type_, "NamesAccepted");
        assert_eq!(conds[0].reason.as_deref(), Some("NoConflicts"));
        assert_eq!(conds[1].type_, "Established");
        assert_eq!(conds[1].status, "True");
        assert_eq!(s.stored_versions, Some(vec!["v1".to_owned()]));
        assert_eq!(
            s.accepted_names.map(|n| n.plural),
            Some("websites".to_owned())
        );
    }

    #[test]
    fn a_second_crd_with_a_taken_plural_is_not_accepted() {
        let taken: BTreeSet<String> = ["websites".to_owned()].into();
        let c = crd("websites2.demo.dev", "websites", "Site");
        let clash = conflict(&c.spec.names, &taken, &BTreeSet::new());
        assert_eq!(clash.as_ref().map(|c| c.0), Some("PluralConflict"));
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().expect("valid time");
        let s = desired_status(&c, clash, now);
        let conds = s.conditions.unwrap_or_default();
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds[1].status, "False");
        assert!(s.accepted_names.is_none());
    }
}
