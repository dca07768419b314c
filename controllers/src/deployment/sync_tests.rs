//! Cases ported from `pkg/controller/deployment/sync_test.go` (`TestScale`,
//! `TestDeploymentController_cleanupDeployment`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::action::Action;
use crate::deployment::fixtures::{annotate, at, deployment, rs};
use crate::deployment::rolling::tests::updates;

static NO_PODS: BTreeMap<String, Vec<Pod>> = BTreeMap::new();

/// An RS last sized by a Deployment of `old_replicas` (surge 0): its replica annotations.
fn sized(name: &str, replicas: i32, created: i64, old_replicas: i32) -> ReplicaSet {
    let mut r = rs(name, name, replicas, replicas, created);
    set_replicas_annotations(&mut r, old_replicas, old_replicas);
    r
}

#[test]
fn scale_table() {
    // TestScale: (name, new replicas, old deployment replicas, new RS, old RSs, expected new,
    // expected olds). The test Deployment has maxSurge 0 and maxUnavailable 0.
    type Case = (
        &'static str,
        i32,
        i32,
        (&'static str, i32),
        Vec<(&'static str, i32)>,
        i32,
        Vec<i32>,
    );
    let cases: Vec<Case> = vec![
        (
            "normal scaling event: 10 -> 12",
            12,
            10,
            ("foo-v1", 10),
            vec![],
            12,
            vec![],
        ),
        (
            "normal scaling event: 10 -> 5",
            5,
            10,
            ("foo-v1", 10),
            vec![],
            5,
            vec![],
        ),
        (
            "proportional scaling: 5 -> 10",
            10,
            5,
            ("foo-v2", 2),
            vec![("foo-v1", 3)],
            4,
            vec![6],
        ),
        (
            "proportional scaling: 5 -> 3",
            3,
            5,
            ("foo-v2", 2),
            vec![("foo-v1", 3)],
            1,
            vec![2],
        ),
        (
            "proportional scaling: 9 -> 4",
            4,
            9,
            ("foo-v2", 8),
            vec![("foo-v1", 1)],
            4,
            vec![0],
        ),
        (
            "proportional scaling: 7 -> 10",
            10,
            7,
            ("foo-v3", 2),
            vec![("foo-v2", 3), ("foo-v1", 2)],
            3,
            vec![4, 3],
        ),
        (
            "proportional scaling: 13 -> 8",
            8,
            13,
            ("foo-v3", 2),
            vec![("foo-v2", 8), ("foo-v1", 3)],
            1,
            vec![5, 2],
        ),
    ];
    for (name, replicas, old_replicas, (new_name, new_size), olds, want_new, want_olds) in cases {
        let d = deployment(replicas, "0", "0");
        let new_rs = sized(new_name, new_size, 30, old_replicas);
        let old: Vec<ReplicaSet> = olds
            .iter()
            .enumerate()
            .map(|(i, (n, size))| sized(n, *size, 20 - 10 * i as i64, old_replicas))
            .collect();
        let mut s = DeploymentSyncer::new(&d, &NO_PODS, at(100));
        s.scale(Some(&new_rs), &old);
        let after: BTreeMap<String, i32> = updates(&s.actions).into_iter().collect();
        let size = |rs: &ReplicaSet| {
            after
                .get(&name_of(rs))
                .copied()
                .unwrap_or_else(|| rs_replicas(rs))
        };
        assert_eq!(size(&new_rs), want_new, "{name}");
        assert_eq!(
            old.iter().map(size).collect::<Vec<_>>(),
            want_olds,
            "{name}"
        );
    }
}

#[test]
fn scale_with_a_saturated_new_replica_set_zeroes_old_ones() {
    let d = deployment(3, "1", "0");
    let mut new_rs = rs("new", "v1", 3, 3, 10);
    annotate(&mut new_rs.metadata, DESIRED_REPLICAS_ANNOTATION, "3");
    let old = rs("old", "v0", 2, 2, 0);
    let mut s = DeploymentSyncer::new(&d, &NO_PODS, at(0));
    s.scale(Some(&new_rs), &[old]);
    assert_eq!(updates(&s.actions), [("old".to_string(), 0)]);
}

#[test]
fn cleanup_deployment_keeps_the_limit_and_spares_busy_replica_sets() {
    // TestDeploymentController_cleanupDeployment-like: limit 1, four old RSs.
    let mut d = deployment(1, "1", "0");
    if let Some(spec) = d.spec.as_mut() {
        spec.revision_history_limit = Some(1);
    }
    let mut with_pods = rs("r2-has-pods", "v2", 0, 0, 2);
    if let Some(status) = with_pods.status.as_mut() {
        status.replicas = 1;
    }
    let mut deleting = rs("r3-deleting", "v3", 0, 0, 3);
    deleting.metadata.deletion_timestamp = Some(Time(at(5)));
    let mut stale = rs("r4-stale", "v4", 0, 0, 4);
    stale.metadata.generation = Some(2);
    let mut old = vec![
        rs("r1", "v1", 0, 0, 1),
        with_pods,
        deleting,
        stale,
        rs("r5", "v5", 0, 0, 5),
    ];
    for (i, r) in old.iter_mut().enumerate() {
        annotate(&mut r.metadata, REVISION_ANNOTATION, &(i + 1).to_string());
    }
    let mut s = DeploymentSyncer::new(&d, &NO_PODS, at(0));
    s.cleanup_deployment(&old);
    let deleted: Vec<String> = s
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { target, .. } => Some(target.name.clone()),
            _ => None,
        })
        .collect();
    // 4 cleanable (not being deleted) - limit 1 = 3 oldest by revision: r1, r2 (has pods:
    // spared), r4 (stale status: spared).
    assert_eq!(deleted, ["r1"]);
}

#[test]
fn calculate_status_counts_and_sets_available() {
    let mut d = deployment(4, "1", "1");
    d.metadata.generation = Some(7);
    let new_rs = rs("new", "v1", 2, 1, 10);
    let old_rs = rs("old", "v0", 3, 2, 0);
    let status = calculate_status(&[&old_rs, &new_rs], Some(&new_rs), &d, at(0));
    assert_eq!(status.observed_generation, Some(7));
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas,
            status.unavailable_replicas
        ),
        (Some(3), Some(1), Some(3), Some(2))
    );
    let available = get_deployment_condition(Some(&status), DEPLOYMENT_AVAILABLE).expect("set");
    assert_eq!(
        (available.status.as_str(), available.reason.as_deref()),
        ("True", Some(MINIMUM_REPLICAS_AVAILABLE))
    );
    let low = calculate_status(&[&rs("old", "v0", 4, 2, 0)], None, &d, at(0));
    let available = get_deployment_condition(Some(&low), DEPLOYMENT_AVAILABLE).expect("set");
    assert_eq!(
        available.message.as_deref(),
        Some("Deployment does not have minimum availability.")
    );
}

#[test]
fn create_conflicts_bump_collision_count_or_requeue() {
    let d = deployment(1, "1", "0");
    let ours = rs("foo-x", "v1", 1, 1, 0);
    assert_eq!(
        on_replica_set_already_exists(&d, &ours),
        [Action::RequeueAfter(std::time::Duration::ZERO)]
    );
    let other = rs("foo-x", "other", 1, 1, 0);
    let actions = on_replica_set_already_exists(&d, &other);
    let [Action::UpdateDeploymentStatus(bumped)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(
        bumped.status.as_ref().and_then(|s| s.collision_count),
        Some(1)
    );
    let actions = on_replica_set_create_error(&d, "foo-x", "quota exceeded", at(0));
    assert!(
        matches!(&actions[1], Action::Event(e) if e.message == "Failed to create new replica set \"foo-x\": quota exceeded")
    );
}
