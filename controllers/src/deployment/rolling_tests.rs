//! Tables ported from `pkg/controller/deployment/rolling_test.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::action::Action;
use crate::deployment::fixtures::{at, deployment, rs};

static NO_PODS: BTreeMap<String, Vec<Pod>> = BTreeMap::new();

fn syncer(d: &k8s_openapi::api::apps::v1::Deployment) -> DeploymentSyncer<'static> {
    DeploymentSyncer::new(d, &NO_PODS, at(100))
}

/// The replicas of every `UpdateReplicaSet` action, by name.
pub(crate) fn updates(actions: &[Action]) -> Vec<(String, i32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateReplicaSet(rs) => Some((name_of(rs), rs_replicas(rs))),
            _ => None,
        })
        .collect()
}

#[test]
fn reconcile_new_replica_set_table() {
    // TestDeploymentController_reconcileNewReplicaSet: (deployment replicas, maxSurge, old,
    // new, scale expected, expected new replicas); maxUnavailable 0.
    let cases = [
        (10, "0", 10, 0, None),
        (10, "2", 10, 0, Some(2)),
        (10, "2", 5, 0, Some(7)),
        (10, "2", 10, 2, None),
        (10, "2", 2, 11, Some(10)),
    ];
    for (replicas, surge, old, new, want) in cases {
        let d = deployment(replicas, surge, "0");
        let new_rs = rs("foo-v2", "v1", new, 0, 1);
        let old_rs = rs("foo-v1", "v0", old, old, 0);
        let mut s = syncer(&d);
        let scaled = s
            .reconcile_new_replica_set(&[&new_rs, &old_rs], &new_rs)
            .expect("valid surge");
        assert_eq!(scaled, want.is_some(), "{replicas} {surge} {old} {new}");
        let expected: Vec<(String, i32)> = want
            .map(|n| ("foo-v2".to_string(), n))
            .into_iter()
            .collect();
        assert_eq!(
            updates(&s.actions),
            expected,
            "{replicas} {surge} {old} {new}"
        );
    }
}

#[test]
fn reconcile_old_replica_sets_table() {
    // TestDeploymentController_reconcileOldReplicaSets: (replicas, maxUnavailable, old, new,
    // ready old, ready new, expected old replicas); maxSurge 0.
    let cases = [
        (10, "0", 10, 0, 10, 0, Some(9)),
        (10, "2", 10, 0, 10, 0, Some(8)),
        (10, "2", 10, 0, 8, 0, Some(8)), // unhealthy old replicas cleaned up
        (10, "2", 10, 0, 9, 0, Some(8)), // 1 unhealthy cleaned up, 1 ready scaled down
        (10, "2", 8, 2, 8, 0, None),     // new RS unavailable pods block further scale down
    ];
    for (replicas, unavailable, old, new, ready_old, ready_new, want) in cases {
        let d = deployment(replicas, "0", unavailable);
        let new_rs = rs("foo-new", "v1", new, ready_new, 1);
        let old_rs = rs("foo-old", "v0", old, ready_old, 0);
        let mut s = syncer(&d);
        let scaled = s.reconcile_old_replica_sets(
            &[&old_rs, &new_rs],
            std::slice::from_ref(&old_rs),
            &new_rs,
        );
        assert_eq!(
            scaled,
            want.is_some(),
            "case {replicas} {unavailable} {old} {new} {ready_old}"
        );
        let last = updates(&s.actions).last().map(|(_, n)| *n);
        assert_eq!(
            last, want,
            "case {replicas} {unavailable} {old} {new} {ready_old}"
        );
    }
}

#[test]
fn cleanup_unhealthy_replicas_table() {
    // TestDeploymentController_cleanupUnhealthyReplicas: (old, ready, max cleanup, expected).
    let cases = [(10, 8, 1, 1), (10, 8, 3, 2), (10, 8, 0, 0), (10, 10, 3, 0)];
    for (old, ready, max, want) in cases {
        let d = deployment(10, "2", "2");
        let mut s = syncer(&d);
        let (after, count) = s
            .cleanup_unhealthy_replicas(&[rs("foo-v2", "v0", old, ready, 0)], max)
            .expect("a valid cleanup");
        assert_eq!(count, want, "{old} {ready} {max}");
        assert_eq!(rs_replicas(&after[0]), old - want);
    }
}

#[test]
fn an_old_replica_set_reporting_more_available_than_it_wants_is_never_scaled_up() {
    // Just scaled 6 → 5, its status still says 6 available (a restarted controller-manager
    // sees this): "cleaning up" would mean 5 → 6, past maxSurge. Kubernetes refuses.
    let d = deployment(6, "2", "1");
    let mut s = syncer(&d);
    let refused = s
        .cleanup_unhealthy_replicas(&[rs("web-old", "v0", 5, 6, 0)], 2)
        .expect_err("refused");
    assert_eq!(
        refused,
        "when cleaning up unhealthy replicas, got invalid request to scale down default/web-old 5 -> 6"
    );
    assert!(updates(&s.actions).is_empty(), "nothing scaled");
    // And the rolling update leaves the old ReplicaSets alone this sync.
    let new_rs = rs("web-new", "v1", 3, 3, 1);
    let old_rs = rs("web-old", "v0", 5, 6, 0);
    let mut s = syncer(&d);
    let scaled =
        s.reconcile_old_replica_sets(&[&old_rs, &new_rs], std::slice::from_ref(&old_rs), &new_rs);
    assert!(!scaled);
    assert!(updates(&s.actions).is_empty(), "{:?}", updates(&s.actions));
}

#[test]
fn scale_down_old_replica_sets_for_rolling_update_table() {
    // TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate:
    // (replicas, maxUnavailable, ready, old, expected old replicas); maxSurge 0.
    let cases = [
        (10, "0", 10, 10, Some(9)),
        (10, "2", 10, 10, Some(8)),
        (10, "2", 8, 10, None),
        (10, "2", 10, 0, None),
        (10, "2", 1, 10, None),
    ];
    for (replicas, unavailable, ready, old, want) in cases {
        let d = deployment(replicas, "0", unavailable);
        let old_rs = rs("foo-v2", "v0", old, ready, 0);
        let mut s = syncer(&d);
        let scaled = s.scale_down_old_replica_sets_for_rolling_update(
            &[&old_rs],
            std::slice::from_ref(&old_rs),
        );
        assert_eq!(
            scaled > 0,
            want.is_some(),
            "{replicas} {unavailable} {ready} {old}"
        );
        assert_eq!(updates(&s.actions).last().map(|(_, n)| *n), want);
    }
}

#[test]
fn scale_down_takes_oldest_first() {
    let d = deployment(4, "0", "2");
    let older = rs("older", "v0", 2, 2, 0);
    let newer = rs("newer", "va", 2, 2, 5);
    let new_rs = rs("new", "v1", 2, 2, 9);
    let mut s = syncer(&d);
    // available 6, min 2 → 4 may go: older 2→0, newer 2→0.
    let n = s.scale_down_old_replica_sets_for_rolling_update(
        &[&newer, &older, &new_rs],
        &[newer.clone(), older.clone()],
    );
    assert_eq!(n, 4);
    assert_eq!(
        updates(&s.actions),
        vec![("older".into(), 0), ("newer".into(), 0)]
    );
}
