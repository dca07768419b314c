//! Creating pods: the pod a ReplicaSet stamps out, the slow-start batches, and the events.
//!
//! Mirrors `GetPodFromTemplate`, `slowStartBatch` and `RealPodControl.createPods/DeletePod`
//! in `pkg/controller/controller_utils.go` (with `replica_set.go`'s use of them).
//!
//! Slow start: instead of firing 100 creates at once (and 100 identical quota errors), create
//! 1, then 2, then 4, ... doubling after every fully successful batch and stopping after the
//! first batch with an error.
//!
//! ```text
//!   slow_start_batches(10) = [1, 2, 4, 3]
//!   batch 1 ok ─▶ batch 2 ok ─▶ batch 4: 1 error ─▶ stop; 3 never attempted
//!                                  (expectations lowered by 3; next sync retries)
//! ```

use apimachinery::{EventType, ObjectRef};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::action::{Action, event};
use crate::owner_ref::{name, new_controller_ref};

/// `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// Event reason of a created pod.
pub const SUCCESSFUL_CREATE_POD_REASON: &str = "SuccessfulCreate";
/// Event reason of a failed pod creation.
pub const FAILED_CREATE_POD_REASON: &str = "FailedCreate";
/// Event reason of a deleted pod.
pub const SUCCESSFUL_DELETE_POD_REASON: &str = "SuccessfulDelete";
/// Event reason of a failed pod deletion.
pub const FAILED_DELETE_POD_REASON: &str = "FailedDelete";

/// The batch sizes `slowStartBatch(count, 1, ...)` uses: 1, 2, 4, ... capped by what remains.
pub fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let mut remaining = count;
    let mut batch = remaining.min(SLOW_START_INITIAL_BATCH_SIZE);
    while batch > 0 {
        batches.push(batch);
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    batches
}

/// `slowStartBatch` run synchronously: calls `f` for each creation, batch by batch, and stops
/// after the first batch with an error. Returns the successes and the first error. The shell
/// runs each batch's calls concurrently; this is the reference semantics (and what tests use).
pub fn slow_start_batch<E>(
    count: usize,
    mut f: impl FnMut() -> Result<(), E>,
) -> (usize, Option<E>) {
    let mut successes = 0;
    for batch in slow_start_batches(count) {
        let mut first_error = None;
        for _ in 0..batch {
            match f() {
                Ok(()) => successes += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
    }
    (successes, None)
}

/// `GetPodFromTemplate` for a ReplicaSet: the template's labels, annotations, finalizers and
/// spec, `generateName: <rs>-`, and the ReplicaSet as controller.
pub fn get_pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            namespace: rs.metadata.namespace.clone(),
            generate_name: Some(format!("{}-", name(&rs.metadata))),
            labels: template_meta.labels,
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![new_controller_ref(rs)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// `SuccessfulCreate` — `Created pod: <name>` on the ReplicaSet.
pub fn created_event(rs: &ObjectRef, pod_name: &str) -> Action {
    event(
        rs.clone(),
        EventType::Normal,
        SUCCESSFUL_CREATE_POD_REASON,
        format!("Created pod: {pod_name}"),
    )
}

/// Warning `FailedCreate` — `Error creating: <error>`.
pub fn failed_create_event(rs: &ObjectRef, error: &str) -> Action {
    event(
        rs.clone(),
        EventType::Warning,
        FAILED_CREATE_POD_REASON,
        format!("Error creating: {error}"),
    )
}

/// `SuccessfulDelete` — `Deleted pod: <name>`.
pub fn deleted_event(rs: &ObjectRef, pod_name: &str) -> Action {
    event(
        rs.clone(),
        EventType::Normal,
        SUCCESSFUL_DELETE_POD_REASON,
        format!("Deleted pod: {pod_name}"),
    )
}

/// Warning `FailedDelete` — `Error deleting: <error>`.
pub fn failed_delete_event(rs: &ObjectRef, error: &str) -> Action {
    event(
        rs.clone(),
        EventType::Warning,
        FAILED_DELETE_POD_REASON,
        format!("Error deleting: {error}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_double_and_cap_at_what_remains() {
        assert_eq!(slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1), [1]);
        assert_eq!(slow_start_batches(3), [1, 2]);
        assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
        assert_eq!(slow_start_batches(15), [1, 2, 4, 8]);
        assert_eq!(slow_start_batches(500).iter().sum::<usize>(), 500);
    }

    #[test]
    fn an_error_stops_after_its_batch() {
        // TestSlowStartBatch-like: the 5th call fails (inside the batch of 4).
        let mut calls = 0;
        let (ok, err) = slow_start_batch(10, || {
            calls += 1;
            if calls == 5 { Err("quota") } else { Ok(()) }
        });
        assert_eq!(
            (ok, err, calls),
            (6, Some("quota"), 7),
            "batch [1,2,4] ran fully, batch of 3 never started"
        );
        let (ok, err) = slow_start_batch(10, || Ok::<(), ()>(()));
        assert_eq!((ok, err), (10, None));
        let (ok, err) = slow_start_batch(10, || Err::<(), _>("down"));
        assert_eq!((ok, err), (0, Some("down")));
    }

    #[test]
    fn pod_from_template_has_generate_name_labels_and_owner() {
        let rs = crate::replicaset::tests::replica_set("web-abc", 2);
        let pod = get_pod_from_template(&rs);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(
            pod.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str),
            Some("web")
        );
        let owner = crate::owner_ref::get_controller_of(&pod.metadata).expect("owner");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ReplicaSet", "web-abc", Some(true))
        );
        assert!(pod.spec.is_some());
    }
}
