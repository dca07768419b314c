//! Cases in the spirit of `TestSortingActivePods` and `TestSortingActivePodsWithRanks`
//! (`pkg/controller/controller_utils_test.go`).

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

use crate::testing::{at, ready_since as ready_conditions};

/// A pod: name (also its UID), node, phase, ready since (None: not ready), restarts, created.
fn pod(
    name: &str,
    node: &str,
    phase: &str,
    ready_since: Option<i64>,
    restarts: i32,
    created: Option<i64>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(name.into()),
            creation_timestamp: created.map(|s| Time(at(s))),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: ready_conditions(ready_since),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                restart_count: restarts,
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn names(pods: &[(&Pod, usize)]) -> Vec<String> {
    pods.iter()
        .map(|(p, _)| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn sorting_active_pods_without_now() {
    // ActivePods order: each pod differs from the next by exactly one more rule.
    let pods = [
        pod("unscheduled", "", "Pending", None, 0, Some(0)),
        pod("scheduled-but-pending", "n1", "Pending", None, 0, Some(0)),
        pod("unknown-phase", "n1", "Unknown", None, 0, Some(0)),
        pod("running-not-ready", "n1", "Running", None, 0, Some(0)),
        pod("ready-recently", "n1", "Running", Some(1000), 9, Some(0)),
        pod(
            "ready-long-ago-more-restarts",
            "n1",
            "Running",
            Some(10),
            5,
            Some(0),
        ),
        pod(
            "ready-long-ago-newer",
            "n1",
            "Running",
            Some(10),
            1,
            Some(5),
        ),
        pod(
            "ready-long-ago-older",
            "n1",
            "Running",
            Some(10),
            1,
            Some(1),
        ),
    ];
    let mut ranked: Vec<(&Pod, usize)> = pods.iter().rev().map(|p| (p, 0)).collect();
    sort_active_pods_with_ranks(&mut ranked, None);
    let want: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names(&ranked), want);
}

#[test]
fn pairwise_rules_with_ranks() {
    // (deleted first, deleted later, ranks) — each must hold both ways round.
    let mut costly = pod("costly", "n1", "Running", Some(0), 0, Some(0));
    costly.metadata.annotations = Some([(POD_DELETION_COST.to_string(), "100".to_string())].into());
    let cheap = pod("cheap", "n1", "Running", Some(0), 0, Some(0));
    let cases: Vec<(Pod, Pod, (usize, usize), &str)> = vec![
        (
            pod("a", "", "Running", Some(0), 0, Some(0)),
            pod("b", "n1", "Pending", None, 0, Some(0)),
            (0, 0),
            "unassigned before assigned",
        ),
        (
            pod("a", "n1", "Pending", None, 0, Some(0)),
            pod("b", "n1", "Running", None, 0, Some(0)),
            (0, 0),
            "pending before running",
        ),
        (
            pod("a", "n1", "Running", None, 0, Some(0)),
            pod("b", "n1", "Running", Some(0), 0, Some(0)),
            (0, 0),
            "not ready before ready",
        ),
        (cheap, costly, (0, 0), "lower deletion cost first"),
        (
            pod("a", "n1", "Running", Some(0), 0, Some(0)),
            pod("b", "n2", "Running", Some(0), 0, Some(0)),
            (3, 1),
            "more co-located first",
        ),
        (
            pod("a", "n1", "Running", None, 7, Some(0)),
            pod("b", "n1", "Running", None, 2, Some(0)),
            (0, 0),
            "more restarts first",
        ),
        (
            pod("a", "n1", "Running", None, 0, None),
            pod("b", "n1", "Running", None, 0, Some(5)),
            (0, 0),
            "no creation time first",
        ),
    ];
    for (first, later, (rank_first, rank_later), why) in &cases {
        for now in [None, Some(at(10_000))] {
            assert!(
                less(first, *rank_first, later, *rank_later, now),
                "{why} (now {now:?})"
            );
            assert!(
                !less(later, *rank_later, first, *rank_first, now),
                "{why} reversed (now {now:?})"
            );
        }
    }
}

#[test]
fn logarithmic_buckets_treat_similar_ages_alike() {
    let now = at(100_000);
    // Ready 1000 s vs 1001 s ago: same power-of-two bucket of nanoseconds → UID decides.
    let a = pod("uid-a", "n1", "Running", Some(100_000 - 1001), 0, Some(0));
    let b = pod("uid-b", "n1", "Running", Some(100_000 - 1000), 0, Some(0));
    assert!(
        less(&a, 0, &b, 0, Some(now)),
        "same bucket: lower UID first"
    );
    assert!(
        less(&b, 0, &a, 0, None),
        "without now: the more recently ready first"
    );
    // Ready 10 s vs 10000 s ago: different buckets → the newer one first either way.
    let new = pod("uid-z", "n1", "Running", Some(100_000 - 10), 0, Some(0));
    let old = pod("uid-a", "n1", "Running", Some(100_000 - 10_000), 0, Some(0));
    assert!(less(&new, 0, &old, 0, Some(now)));
}

#[test]
fn get_pods_to_delete_prefers_crowded_nodes() {
    // n1 holds 2 related pods, n2 and n3 one each: after the pending pod, an n1 pod goes.
    let pods = [
        pod("n2-a", "n2", "Running", Some(0), 0, Some(0)),
        pod("n1-a", "n1", "Running", Some(0), 0, Some(0)),
        pod("n1-b", "n1", "Running", Some(0), 0, Some(0)),
        pod("pending", "n3", "Pending", None, 0, Some(0)),
    ];
    let filtered: Vec<&Pod> = pods.iter().collect();
    let victims = get_pods_to_delete(&filtered, &filtered, 2, at(100));
    let victims: Vec<&str> = victims
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(victims, ["pending", "n1-a"]);
    assert_eq!(
        get_pods_to_delete(&filtered, &filtered, 9, at(100)).len(),
        4
    );
}
