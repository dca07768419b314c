//! Sync-level tests of the ReplicaSet controller.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

pub(crate) use crate::testing::at;
use crate::testing::{object_meta, pod_template, ready_since as ready_conditions, selector_for};

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "web".to_string())])
}

/// A ReplicaSet `name` in `default` wanting `replicas` pods labelled `app: web`.
pub(crate) fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: object_meta(name),
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: selector_for(&labels()),
            template: Some(pod_template(&labels(), "nginx")),
            min_ready_seconds: None,
        }),
        status: Some(ReplicaSetStatus {
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

/// A running pod `name`, ready since `ready_since` (None: not ready).
pub(crate) fn pod(name: &str, ready_since: Option<i64>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(name.into()),
            labels: Some(labels()),
            creation_timestamp: Some(Time(at(0))),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: ready_conditions(ready_since),
            ..Default::default()
        }),
    }
}

fn sync(e: &mut Expectations, rs: &ReplicaSet, pods: &[Pod], now: i64) -> ReplicaSetSync {
    let pods: Vec<&Pod> = pods.iter().collect();
    sync_replica_set(
        e,
        ReplicaSetSyncInput {
            replica_set: rs,
            pods: &pods,
            related_pods: &[],
            now: at(now),
        },
    )
}

#[test]
fn too_few_pods_creates_in_slow_start_batches_and_expects_them() {
    let mut e = Expectations::new();
    let rs = replica_set("web", 3);
    let out = sync(&mut e, &rs, &[], 1);
    assert_eq!(out.summary, "desired 3, have 0 → create 3 in batches 1, 2");
    let Some(Action::CreatePods {
        batches,
        pod: template,
        ..
    }) = out.actions.first()
    else {
        panic!("{:?}", out.actions)
    };
    assert_eq!(batches, &[1, 2]);
    assert_eq!(template.metadata.generate_name.as_deref(), Some("web-"));
    // The informer has not seen the pods yet: the next sync must not create them again.
    let again = sync(&mut e, &rs, &[], 2);
    assert!(
        !again
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreatePods { .. })),
        "{}",
        again.summary
    );
    assert!(
        again.summary.contains("waiting for 3 creations"),
        "{}",
        again.summary
    );
    let key = ObjectKey::from_meta(&rs.metadata);
    for _ in 0..3 {
        e.creation_observed(&key);
    }
    let pods = [
        pod("web-a", Some(0)),
        pod("web-b", Some(0)),
        pod("web-c", Some(0)),
    ];
    let settled = sync(&mut e, &rs, &pods, 3);
    assert!(settled.summary.ends_with("in sync"), "{}", settled.summary);
}

#[test]
fn burst_replicas_caps_one_sync() {
    let mut e = Expectations::new();
    let out = sync(&mut e, &replica_set("big", 2000), &[], 0);
    let Some(Action::CreatePods { batches, .. }) = out.actions.first() else {
        panic!()
    };
    assert_eq!(batches.iter().sum::<usize>(), BURST_REPLICAS);
}

#[test]
fn too_many_pods_deletes_the_least_valuable() {
    let mut e = Expectations::new();
    let rs = replica_set("web", 2);
    let mut terminating = pod("web-terminating", Some(0));
    terminating.metadata.deletion_timestamp = Some(Time(at(5)));
    let pods = [
        pod("web-ready", Some(0)),
        pod("web-not-ready", None),
        pod("web-ready-2", Some(0)),
        terminating,
    ];
    let out = sync(&mut e, &rs, &pods, 100);
    let Some(Action::DeletePods { pods: victims, .. }) = out.actions.first() else {
        panic!("{:?}", out.actions)
    };
    assert_eq!(
        victims.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["web-not-ready"],
        "the terminating pod does not count"
    );
    let key = ObjectKey::from_meta(&rs.metadata);
    assert_eq!(e.get_expectations(&key).map(|x| x.del), Some(1));
}

#[test]
fn status_counts_ready_and_available_with_min_ready_seconds() {
    let mut e = Expectations::new();
    let mut rs = replica_set("web", 2);
    if let Some(spec) = rs.spec.as_mut() {
        spec.min_ready_seconds = Some(10);
    }
    rs.metadata.generation = Some(2);
    let mut stray = pod("web-relabelled", Some(0));
    stray.metadata.labels = Some(BTreeMap::from([("app".to_string(), "other".to_string())]));
    let pods = [pod("web-a", Some(0)), pod("web-b", Some(95)), stray];
    let out = sync(&mut e, &rs, &pods, 100);
    let Some(Action::UpdateReplicaSetStatus(updated)) = out
        .actions
        .iter()
        .find(|a| matches!(a, Action::UpdateReplicaSetStatus(_)))
    else {
        panic!("{:?}", out.actions)
    };
    let s = updated.status.clone().unwrap_or_default();
    assert_eq!(
        (
            s.replicas,
            s.fully_labeled_replicas,
            s.ready_replicas,
            s.available_replicas,
            s.observed_generation
        ),
        (3, Some(2), Some(3), Some(2), Some(2))
    );
    // Exactly 2 ready of 2 desired but only 1 available → look again after minReadySeconds.
    let two = [pod("web-a", Some(0)), pod("web-b", Some(95))];
    let out = sync(&mut Expectations::new(), &rs, &two, 100);
    assert!(
        out.actions
            .contains(&Action::RequeueAfter(Duration::from_secs(10))),
        "{:?}",
        out.actions
    );
}

#[test]
fn failures_become_a_replica_failure_condition_and_clear() {
    let rs = replica_set("web", 3);
    let Some(Action::UpdateReplicaSetStatus(failed)) = status_after_manage_error(
        &rs,
        &[],
        "pods \"web-\" is forbidden: exceeded quota",
        at(1),
    ) else {
        panic!()
    };
    let c = failed
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.first())
        .cloned()
        .expect("condition");
    assert_eq!(
        (c.type_.as_str(), c.reason.as_deref()),
        ("ReplicaFailure", Some("FailedCreate"))
    );
    let healed = status::calculate_status(&failed, &[], None, at(2));
    assert!(healed.conditions.unwrap_or_default().is_empty());
}

#[test]
fn unchanged_status_is_not_written() {
    let mut rs = replica_set("web", 1);
    let pods = [pod("web-a", Some(0))];
    rs.status = Some(ReplicaSetStatus {
        replicas: 1,
        fully_labeled_replicas: Some(1),
        ready_replicas: Some(1),
        available_replicas: Some(1),
        observed_generation: Some(1),
        ..Default::default()
    });
    let out = sync(&mut Expectations::new(), &rs, &pods, 5);
    assert_eq!(out.actions, []);
}

#[test]
fn slow_start_failure_lowers_expectations_and_the_next_sync_retries() {
    // The shell's side of CreatePods, against a quota of 4 pods.
    let mut e = Expectations::new();
    let rs = replica_set("web", 10);
    let key = ObjectKey::from_meta(&rs.metadata);
    let out = sync(&mut e, &rs, &[], 1);
    let Some(Action::CreatePods { batches, .. }) = out.actions.first() else {
        panic!()
    };
    assert_eq!(batches, &[1, 2, 4, 3]);
    let mut created = 0;
    let (successes, error) = pods::slow_start_batch(10, || {
        if created < 4 {
            created += 1;
            Ok(())
        } else {
            Err("exceeded quota")
        }
    });
    assert_eq!(
        (successes, error),
        (4, Some("exceeded quota")),
        "batches 1 and 2 succeed, the batch of 4 gets 1 in"
    );
    for _ in successes..10 {
        e.creation_observed(&key);
    }
    let status = status_after_manage_error(&rs, &[], "exceeded quota", at(1));
    assert!(matches!(status, Some(Action::UpdateReplicaSetStatus(_))));
    // The informer sees the 4 pods: expectations are met, the next sync asks for 6 more.
    for _ in 0..successes {
        e.creation_observed(&key);
    }
    let pods: Vec<Pod> = (0..4).map(|i| pod(&format!("web-{i}"), Some(0))).collect();
    let retry = sync(&mut e, &rs, &pods, 2);
    assert!(
        retry.summary.contains("create 6 in batches 1, 2, 3"),
        "{}",
        retry.summary
    );
}
