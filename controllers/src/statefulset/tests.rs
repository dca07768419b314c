//! Unit tests of the StatefulSet controller's decisions: ordered and parallel creation,
//! scale-down order, partitioned rolling updates, `OnDelete`, claims and their retention
//! owner references, status and history.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller::new_revision;
use super::identity::{POD_INDEX_LABEL, POD_NAME_LABEL, new_stateful_set_pod};
use super::*;
use crate::testing::{app_labels, at, object_meta, pod_template, ready_since, selector_for};

fn set(replicas: i32, image: &str) -> StatefulSet {
    let labels = app_labels("web");
    StatefulSet {
        metadata: object_meta("web"),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: selector_for(&labels),
            service_name: Some("nginx".into()),
            template: pod_template(&labels, image),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    max_unavailable: None,
                }),
            }),
            revision_history_limit: Some(10),
            ..Default::default()
        }),
        status: None,
    }
}

fn with_partition(mut s: StatefulSet, partition: i32) -> StatefulSet {
    if let Some(ru) = s
        .spec
        .as_mut()
        .and_then(|s| s.update_strategy.as_mut())
        .and_then(|u| u.rolling_update.as_mut())
    {
        ru.partition = Some(partition);
    }
    s
}

fn with_claims(mut s: StatefulSet, when_deleted: &str, when_scaled: &str) -> StatefulSet {
    let spec = s.spec.as_mut().expect("spec");
    spec.volume_claim_templates = Some(vec![PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("www".into()),
            labels: Some(BTreeMap::from([("tier".into(), "data".into())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..Default::default()
        }),
        status: None,
    }]);
    spec.persistent_volume_claim_retention_policy =
        Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
            when_deleted: Some(when_deleted.into()),
            when_scaled: Some(when_scaled.into()),
        });
    s
}

fn revision(s: &StatefulSet, number: i64) -> ControllerRevision {
    let mut r = new_revision(s, number, 0);
    r.metadata.uid = Some(format!("uid-{}", name(&r.metadata)));
    r
}

/// A created pod of `s` at ordinal `o` and revision `rev`, Running and (if `ready`) Ready.
fn pod(s: &StatefulSet, o: i64, rev: &ControllerRevision, ready: bool) -> Pod {
    let mut p = new_stateful_set_pod(&apply_revision(s, rev), o);
    p.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(REVISION_LABEL.into(), name(&rev.metadata).into());
    p.metadata.uid = Some(format!("uid-web-{o}"));
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: ready_since(ready.then_some(0)),
        ..Default::default()
    });
    p
}

fn run(
    s: &StatefulSet,
    pods: &[Pod],
    current: &ControllerRevision,
    update: &ControllerRevision,
    claims: &BTreeMap<String, PersistentVolumeClaim>,
) -> StatefulSetSync {
    let refs: Vec<&Pod> = pods.iter().collect();
    let revisions = vec![current.clone(), update.clone()];
    sync_stateful_set(StatefulSetSyncInput {
        set: s,
        pods: &refs,
        current_revision: current,
        update_revision: update,
        collision_count: 0,
        revisions: &revisions,
        claims,
        now: at(100),
    })
}

fn created(out: &StatefulSetSync) -> Vec<String> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            SetAction::CreatePod { pod, .. } => Some(name(&pod.metadata).to_owned()),
            _ => None,
        })
        .collect()
}

fn deleted(out: &StatefulSetSync) -> Vec<String> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            SetAction::DeletePod(p) => Some(p.name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_with_its_identity() {
    let s = set(3, "nginx:1");
    let r1 = revision(&s, 1);
    let out = run(&s, &[], &r1, &r1, &BTreeMap::new());
    assert_eq!(created(&out), ["web-0"]);
    assert!(
        out.reason
            .contains("waiting for web-0 to be Running and Ready"),
        "{}",
        out.reason
    );
    let SetAction::CreatePod { pod, .. } = &out.actions[0] else {
        panic!("expected a creation");
    };
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    let labels = pod.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels[POD_NAME_LABEL], "web-0");
    assert_eq!(labels[POD_INDEX_LABEL], "0");
    assert_eq!(labels[REVISION_LABEL], name(&r1.metadata));
    assert_eq!(labels["app"], "web");
    let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("StatefulSet", Some(true))
    );

    // web-0 exists but is not ready: nothing more.
    let out = run(&s, &[pod_at(&s, 0, &r1, false)], &r1, &r1, &BTreeMap::new());
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert!(
        out.reason
            .contains("waiting for web-0 to be Running and Ready")
    );

    // web-0 ready: web-1 next.
    let out = run(&s, &[pod_at(&s, 0, &r1, true)], &r1, &r1, &BTreeMap::new());
    assert_eq!(created(&out), ["web-1"]);
}

fn pod_at(s: &StatefulSet, o: i64, rev: &ControllerRevision, ready: bool) -> Pod {
    pod(s, o, rev, ready)
}

#[test]
fn min_ready_seconds_holds_the_next_pod() {
    let mut s = set(2, "nginx:1");
    if let Some(spec) = s.spec.as_mut() {
        spec.min_ready_seconds = Some(1000);
    }
    let r1 = revision(&s, 1);
    let out = run(&s, &[pod(&s, 0, &r1, true)], &r1, &r1, &BTreeMap::new());
    assert!(created(&out).is_empty());
    assert!(
        out.reason.contains("waiting for web-0 to be Available"),
        "{}",
        out.reason
    );
    assert_eq!(out.requeue_after, Some(Duration::from_secs(1000)));
}

#[test]
fn parallel_creates_every_missing_pod() {
    let mut s = set(3, "nginx:1");
    if let Some(spec) = s.spec.as_mut() {
        spec.pod_management_policy = Some("Parallel".into());
    }
    let r1 = revision(&s, 1);
    let out = run(&s, &[pod(&s, 1, &r1, false)], &r1, &r1, &BTreeMap::new());
    assert_eq!(created(&out), ["web-0", "web-2"]);
}

#[test]
fn ordinals_start_names_pods_from_it() {
    let mut s = set(2, "nginx:1");
    if let Some(spec) = s.spec.as_mut() {
        spec.ordinals = Some(StatefulSetOrdinals { start: Some(5) });
    }
    let r1 = revision(&s, 1);
    let out = run(&s, &[pod(&s, 5, &r1, true)], &r1, &r1, &BTreeMap::new());
    assert_eq!(created(&out), ["web-6"]);
    // web-0 is outside [5, 6]: condemned once the replicas are healthy.
    let pods = [
        pod(&s, 5, &r1, true),
        pod(&s, 6, &r1, true),
        pod(&s, 0, &r1, true),
    ];
    assert_eq!(
        deleted(&run(&s, &pods, &r1, &r1, &BTreeMap::new())),
        ["web-0"]
    );
}

#[test]
fn scale_down_deletes_the_highest_ordinal_first_one_at_a_time() {
    let s = set(1, "nginx:1");
    let r1 = revision(&s, 1);
    let pods: Vec<Pod> = (0..3).map(|o| pod(&s, o, &r1, true)).collect();
    let out = run(&s, &pods, &r1, &r1, &BTreeMap::new());
    assert_eq!(deleted(&out), ["web-2"]);
    assert!(
        out.reason.contains("deleting web-2 for scale down"),
        "{}",
        out.reason
    );

    // web-2 terminating: wait for it before web-1.
    let mut terminating = pods.clone();
    terminating[2].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(50)));
    let out = run(&s, &terminating, &r1, &r1, &BTreeMap::new());
    assert!(deleted(&out).is_empty());
    assert!(
        out.reason
            .contains("waiting for web-2 to terminate prior to scale down")
    );

    // Parallel: both at once.
    let mut p = s.clone();
    if let Some(spec) = p.spec.as_mut() {
        spec.pod_management_policy = Some("Parallel".into());
    }
    assert_eq!(
        deleted(&run(&p, &pods, &r1, &r1, &BTreeMap::new())),
        ["web-2", "web-1"]
    );
}

#[test]
fn scale_down_waits_for_an_unhealthy_replica() {
    let s = set(2, "nginx:1");
    let r1 = revision(&s, 1);
    let pods = [
        pod(&s, 0, &r1, true),
        pod(&s, 1, &r1, false),
        pod(&s, 2, &r1, true),
    ];
    let out = run(&s, &pods, &r1, &r1, &BTreeMap::new());
    assert!(deleted(&out).is_empty());
    assert!(
        out.reason
            .contains("waiting for web-1 to be Running and Ready")
    );
}

#[test]
fn rolling_update_goes_down_from_the_highest_ordinal_to_the_partition() {
    let old = set(3, "nginx:1");
    let r1 = revision(&old, 1);
    let new = with_partition(set(3, "nginx:2"), 1);
    let r2 = revision(&new, 2);
    let pods: Vec<Pod> = (0..3).map(|o| pod(&old, o, &r1, true)).collect();
    let out = run(&new, &pods, &r1, &r2, &BTreeMap::new());
    assert_eq!(deleted(&out), ["web-2"]);
    let expected = format!(
        "updating web-2 to revision {} (partition 1)",
        name(&r2.metadata)
    );
    assert!(out.reason.contains(&expected), "{}", out.reason);
    let status = out.status.expect("status changes");
    assert_eq!(status.current_replicas, Some(2));
    assert_eq!(status.update_revision.as_deref(), Some(name(&r2.metadata)));
    assert_eq!(status.current_revision.as_deref(), Some(name(&r1.metadata)));

    // web-2 gone: it is recreated at the update revision.
    let out = run(&new, &pods[..2], &r1, &r2, &BTreeMap::new());
    let SetAction::CreatePod {
        pod: created_pod, ..
    } = &out.actions[0]
    else {
        panic!("expected web-2's creation: {:?}", out.actions);
    };
    assert_eq!(pod_revision(created_pod), name(&r2.metadata));
    let image = created_pod
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].image.clone());
    assert_eq!(image.as_deref(), Some("nginx:2"));

    // web-2 updated and ready: web-1 next; then web-0 stays below the partition.
    let pods2 = [
        pod(&old, 0, &r1, true),
        pod(&old, 1, &r1, true),
        pod(&new, 2, &r2, true),
    ];
    assert_eq!(
        deleted(&run(&new, &pods2, &r1, &r2, &BTreeMap::new())),
        ["web-1"]
    );
    let pods3 = [
        pod(&old, 0, &r1, true),
        pod(&new, 1, &r2, true),
        pod(&new, 2, &r2, true),
    ];
    let out = run(&new, &pods3, &r1, &r2, &BTreeMap::new());
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    let status = out.status.expect("status");
    assert_eq!(
        (status.updated_replicas, status.current_replicas),
        (Some(2), Some(1))
    );

    // A pod recreated below the partition keeps the current revision.
    let out = run(&new, &pods3[1..], &r1, &r2, &BTreeMap::new());
    let SetAction::CreatePod { pod: web0, .. } = &out.actions[0] else {
        panic!("expected web-0's creation");
    };
    assert_eq!(pod_revision(web0), name(&r1.metadata));
}

#[test]
fn rolling_update_waits_for_an_unhealthy_updated_pod() {
    let old = set(2, "nginx:1");
    let r1 = revision(&old, 1);
    let mut new = set(2, "nginx:2");
    if let Some(spec) = new.spec.as_mut() {
        spec.pod_management_policy = Some("Parallel".into());
    }
    let r2 = revision(&new, 2);
    let pods = [pod(&old, 0, &r1, true), pod(&new, 1, &r2, false)];
    let out = run(&new, &pods, &r1, &r2, &BTreeMap::new());
    assert!(deleted(&out).is_empty());
    assert!(
        out.reason
            .contains("waiting for web-1 to be Running and Ready to continue the update"),
        "{}",
        out.reason
    );
}

#[test]
fn completed_rollout_makes_the_update_revision_current() {
    let new = set(2, "nginx:2");
    let r1 = revision(&set(2, "nginx:1"), 1);
    let r2 = revision(&new, 2);
    let pods = [pod(&new, 0, &r2, true), pod(&new, 1, &r2, true)];
    let status = run(&new, &pods, &r1, &r2, &BTreeMap::new())
        .status
        .expect("status");
    assert_eq!(status.current_revision.as_deref(), Some(name(&r2.metadata)));
    assert_eq!(status.current_replicas, Some(2));
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(status.available_replicas, Some(2));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.collision_count, Some(0));
}

#[test]
fn on_delete_never_deletes_for_an_update() {
    let old = set(2, "nginx:1");
    let r1 = revision(&old, 1);
    let mut new = set(2, "nginx:2");
    if let Some(spec) = new.spec.as_mut() {
        spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
    }
    let r2 = revision(&new, 2);
    let pods = [pod(&old, 0, &r1, true), pod(&old, 1, &r1, true)];
    let out = run(&new, &pods, &r1, &r2, &BTreeMap::new());
    assert!(out.actions.is_empty());
    assert!(out.reason.contains("OnDelete"));
    // A pod deleted by hand comes back at the update revision (no rollingUpdate: ordinals
    // at or above status.currentReplicas, here 0).
    let out = run(&new, &pods[..1], &r1, &r2, &BTreeMap::new());
    let SetAction::CreatePod { pod: web1, .. } = &out.actions[0] else {
        panic!("expected web-1's creation");
    };
    assert_eq!(pod_revision(web1), name(&r2.metadata));
}

#[test]
fn failed_pods_are_deleted_to_be_recreated() {
    let s = set(1, "nginx:1");
    let r1 = revision(&s, 1);
    let mut failed = pod(&s, 0, &r1, false);
    if let Some(st) = failed.status.as_mut() {
        st.phase = Some("Failed".into());
    }
    let out = run(&s, &[failed], &r1, &r1, &BTreeMap::new());
    assert_eq!(deleted(&out), ["web-0"]);
}

#[test]
fn claims_are_created_before_the_pod_with_the_retention_owner() {
    let s = with_claims(set(2, "nginx:1"), "Delete", "Retain");
    let r1 = revision(&s, 1);
    let out = run(&s, &[], &r1, &r1, &BTreeMap::new());
    let SetAction::CreatePod { pod, claims } = &out.actions[0] else {
        panic!("expected a creation");
    };
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!(name(&claim.metadata), "www-web-0");
    let labels = claim.metadata.labels.as_ref().expect("labels");
    assert_eq!(
        (labels["tier"].as_str(), labels["app"].as_str()),
        ("data", "web")
    );
    let owners = claim.metadata.owner_references.as_ref().expect("owners");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("StatefulSet", "web")
    );
    assert_eq!(owners[0].controller, None);
    let volume = &pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .expect("volumes")[0];
    assert_eq!(volume.name, "www");
    assert_eq!(
        volume
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("www-web-0")
    );

    // An existing claim is not created again.
    let existing = BTreeMap::from([("www-web-0".to_owned(), claim.clone())]);
    let out = run(&s, &[], &r1, &r1, &existing);
    let SetAction::CreatePod { claims, .. } = &out.actions[0] else {
        panic!("expected a creation");
    };
    assert!(claims.is_empty());

    // A claim being deleted blocks the pod, with FailedCreate.
    let mut deleting = claim.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(1)));
    let out = run(
        &s,
        &[],
        &r1,
        &r1,
        &BTreeMap::from([("www-web-0".to_owned(), deleting)]),
    );
    assert!(created(&out).is_empty());
    let SetAction::Event(Action::Event(e)) = &out.actions[0] else {
        panic!("expected an event");
    };
    assert_eq!(e.reason, "FailedCreate");
    assert_eq!(
        e.message,
        "create Pod web-0 in StatefulSet web failed error: pvc www-web-0 is being deleted"
    );
}

#[test]
fn retain_policy_creates_claims_without_owners() {
    let s = with_claims(set(1, "nginx:1"), "Retain", "Retain");
    let r1 = revision(&s, 1);
    let out = run(&s, &[], &r1, &r1, &BTreeMap::new());
    let SetAction::CreatePod { claims, .. } = &out.actions[0] else {
        panic!("expected a creation");
    };
    assert!(
        claims[0]
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    );
}

fn claim_of(s: &StatefulSet, o: i64) -> PersistentVolumeClaim {
    let mut c = identity::claims_for(s, o).remove("www").expect("template");
    c.metadata.uid = Some(format!("uid-www-web-{o}"));
    c
}

#[test]
fn when_scaled_delete_hands_condemned_claims_to_their_pod() {
    let s = with_claims(set(1, "nginx:1"), "Retain", "Delete");
    let r1 = revision(&s, 1);
    let pods = [pod(&s, 0, &r1, true), pod(&s, 1, &r1, true)];
    let claims = BTreeMap::from([
        ("www-web-0".to_owned(), claim_of(&s, 0)),
        ("www-web-1".to_owned(), claim_of(&s, 1)),
    ]);
    let out = run(&s, &pods, &r1, &r1, &claims);
    let SetAction::UpdateClaims(updated) = &out.actions[0] else {
        panic!("expected the claim update first: {:?}", out.actions);
    };
    assert_eq!(name(&updated[0].metadata), "www-web-1");
    let owners = updated[0]
        .metadata
        .owner_references
        .as_ref()
        .expect("owners");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("Pod", "uid-web-1")
    );
    assert_eq!(deleted(&out), ["web-1"]);

    // A claim still owned by a deleted pod of that ordinal is stale: no new pod yet.
    let mut stale = claim_of(&s, 0);
    stale.metadata.owner_references = owners
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o.name = "web-0".into();
            o.uid = "uid-old-web-0".into();
            o
        })
        .collect::<Vec<_>>()
        .into();
    let out = run(
        &s,
        &[],
        &r1,
        &r1,
        &BTreeMap::from([("www-web-0".to_owned(), stale)]),
    );
    assert!(created(&out).is_empty());
    assert!(
        out.reason.contains("stale claim www-web-0"),
        "{}",
        out.reason
    );
}

#[test]
fn when_deleted_delete_adds_the_set_to_existing_claims() {
    let s = with_claims(set(1, "nginx:1"), "Delete", "Delete");
    let r1 = revision(&s, 1);
    let claims = BTreeMap::from([("www-web-0".to_owned(), claim_of(&s, 0))]);
    let out = run(&s, &[pod(&s, 0, &r1, true)], &r1, &r1, &claims);
    let SetAction::UpdatePod {
        write_pod, claims, ..
    } = &out.actions[0]
    else {
        panic!("expected an update: {:?}", out.actions);
    };
    assert!(!write_pod);
    let owners = claims[0]
        .metadata
        .owner_references
        .as_ref()
        .expect("owners");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("StatefulSet", "uid-web")
    );
}

#[test]
fn history_beyond_the_limit_is_deleted_oldest_first_sparing_live_revisions() {
    let mut s = set(1, "nginx:9");
    if let Some(spec) = s.spec.as_mut() {
        spec.revision_history_limit = Some(1);
    }
    let revs: Vec<ControllerRevision> = (1..=5)
        .map(|i| revision(&set(1, &format!("nginx:{i}")), i))
        .collect();
    let pods = [pod(&s, 0, &revs[1], true)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let victims = truncate_history(
        &s,
        &refs,
        &revs,
        name(&revs[4].metadata),
        name(&revs[4].metadata),
    );
    let names: Vec<&str> = victims.iter().map(|v| v.name.as_str()).collect();
    // Live: revs[1] (a pod), revs[4] (current/update); history 0, 2, 3 with limit 1.
    assert_eq!(names, [name(&revs[0].metadata), name(&revs[2].metadata)]);
}

#[test]
fn status_is_written_only_when_it_changes() {
    let s = set(1, "nginx:1");
    let r1 = revision(&s, 1);
    let pods = [pod(&s, 0, &r1, true)];
    let status = run(&s, &pods, &r1, &r1, &BTreeMap::new())
        .status
        .expect("first write");
    let mut synced = s.clone();
    synced.status = Some(status);
    assert_eq!(run(&synced, &pods, &r1, &r1, &BTreeMap::new()).status, None);
}
