//! Cases in the spirit of `TestSortingActivePods` and `TestSortingActivePodsWithRanks`
//! (`pkg/controller/controller_utils_test.go`).

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

use crate::testing::{at, ready_since as ready_conditions, total_order_violation};

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

/// The first way the deletion order over `pods` fails to be a total order (see
/// [`total_order_violation`]), comparing with `less` both ways as a sort does.
fn strict_weak_order_violation(pods: &[(Pod, usize)], now: Option<Timestamp>) -> Option<String> {
    total_order_violation(pods, |(a, ra), (b, rb)| {
        if less(a, *ra, b, *rb, now) {
            std::cmp::Ordering::Less
        } else if less(b, *rb, a, *ra, now) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    })
}

/// Three ready pods in one age bucket, two of them ready at the same second: Go's `Less`
/// orders the pair with equal times by restarts and the others by UID, which is a cycle
/// (`a < b` and `b < c` by UID, `c < a` by restarts). The rollout that made the
/// ReplicaSet controller panic had such pods.
#[test]
fn same_bucket_pods_are_ordered_without_a_cycle() {
    let now = Some(at(100_000));
    let pods = [
        (pod("c", "n1", "Running", Some(99_000), 5, Some(0)), 0),
        (pod("a", "n1", "Running", Some(99_000), 1, Some(0)), 0),
        (pod("b", "n1", "Running", Some(99_001), 9, Some(0)), 0),
    ];
    assert_eq!(strict_weak_order_violation(&pods, now), None);
    let mut ranked: Vec<(&Pod, usize)> = pods.iter().map(|(p, r)| (p, *r)).collect();
    sort_active_pods_with_ranks(&mut ranked, now);
    // One bucket: the restarts decide (rule 7), the UID only among equal restarts.
    assert_eq!(names(&ranked), ["b", "c", "a"]);
}

fn arb_pod() -> impl proptest::strategy::Strategy<Value = (Pod, usize)> {
    use proptest::prelude::*;
    // Few distinct values, repeated ones more likely (a pick from a list with repeats), so
    // that many pods tie on the early rules and the later ones get compared.
    (
        (
            prop::sample::select(vec!["n1", "n1", "n1", "n2", ""]),
            prop::sample::select(vec!["Running", "Running", "Running", "Pending", "Unknown"]),
            // Ready since (now is 100,000): three times in one age bucket, two of them often
            // equal, one in another bucket, one not ready.
            prop::sample::select(vec![
                Some(99_000i64),
                Some(99_000),
                Some(99_001),
                Some(99_002),
                Some(99_999),
                None,
            ]),
        ),
        (
            0i32..3,
            prop::sample::select(vec![Some(0i64), Some(0), Some(1), Some(50_000), None]),
            prop::sample::select(vec!["u1", "u2", "u3", "u4", "u5", "u6"]),
            prop::sample::select(vec![None, None, None, Some(1i32), Some(-1)]),
            prop::sample::select(vec![0usize, 0, 0, 1]),
        ),
    )
        .prop_map(
            |((node, phase, ready), (restarts, created, uid, cost, rank))| {
                let mut p = pod(uid, node, phase, ready, restarts, created);
                if let Some(cost) = cost {
                    p.metadata.annotations =
                        Some([(POD_DELETION_COST.to_string(), cost.to_string())].into());
                }
                (p, rank)
            },
        )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Over random pod sets (few distinct values, so ties and shared buckets are common), the
    /// deletion order is a strict weak order with `now` and without, and sorting never panics.
    #[test]
    fn the_deletion_order_is_a_total_order(
        pods in proptest::collection::vec(arb_pod(), 1..12),
        with_now in proptest::prelude::any::<bool>(),
    ) {
        let now = with_now.then(|| at(100_000));
        if let Some(violation) = strict_weak_order_violation(&pods, now) {
            proptest::prop_assert!(false, "{violation}");
        }
        let mut ranked: Vec<(&Pod, usize)> = pods.iter().map(|(p, r)| (p, *r)).collect();
        sort_active_pods_with_ranks(&mut ranked, now);
        for w in ranked.windows(2) {
            proptest::prop_assert!(!less(w[1].0, w[1].1, w[0].0, w[0].1, now));
        }
    }
}
