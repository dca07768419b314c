//! Tables ported from `pkg/controller/deployment/util/deployment_util_test.go`.

use super::*;
use crate::deployment::fixtures::{annotate, at, deployment, intstr, recreate_deployment, rs};
use crate::testing::annotation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

#[test]
fn resolve_fenceposts_table() {
    // TestResolveFenceposts
    type Case = (
        Option<&'static str>,
        Option<&'static str>,
        i32,
        Result<(i32, i32)>,
    );
    let cases: [Case; 9] = [
        (Some("0"), Some("0"), 0, Ok((0, 1))),
        (Some("39%"), Some("39%"), 10, Ok((4, 3))),
        (
            Some("oops"),
            Some("39%"),
            10,
            Err(Error::InvalidIntOrPercent(
                "invalid type: string is not a percentage".into(),
            )),
        ),
        (
            Some("55%"),
            Some("urg%"),
            10,
            Err(Error::InvalidIntOrPercent(
                r#"invalid value "urg%": strconv.Atoi: parsing "urg": invalid syntax"#.into(),
            )),
        ),
        (None, Some("39%"), 10, Ok((0, 3))),
        (Some("39%"), None, 10, Ok((4, 0))),
        (None, None, 10, Ok((0, 1))),
        // The defaults: 25%/25%.
        (Some("25%"), Some("25%"), 3, Ok((1, 0))),
        (Some("25%"), Some("25%"), 10, Ok((3, 2))),
    ];
    for (surge, unavailable, desired, want) in cases {
        let got = resolve_fenceposts(
            surge.map(intstr).as_ref(),
            unavailable.map(intstr).as_ref(),
            desired,
        );
        assert_eq!(
            got, want,
            "surge {surge:?} unavailable {unavailable:?} desired {desired}"
        );
    }
}

#[test]
fn max_unavailable_is_capped_and_zero_for_recreate() {
    assert_eq!(max_unavailable(&deployment(10, "0", "20")), 10);
    assert_eq!(max_unavailable(&deployment(0, "1", "1")), 0);
    assert_eq!(max_unavailable(&recreate_deployment(10)), 0);
    assert_eq!(max_surge(&recreate_deployment(10)), 0);
    assert_eq!(
        (
            max_surge(&deployment(1, "25%", "25%")),
            max_unavailable(&deployment(1, "25%", "25%"))
        ),
        (1, 0)
    );
}

#[test]
fn new_rs_new_replicas_table() {
    // TestNewRSNewReplicas: all RSs = [rs5 with 5 replicas].
    let cases = [
        ("RollingUpdate", 1, 5, 1, 5),
        ("RollingUpdate", 6, 2, 10, 6),
        ("Recreate", 3, 1, 1, 3),
    ];
    for (strategy, dep_replicas, new_rs_replicas, surge, want) in cases {
        let mut d = if strategy == "Recreate" {
            recreate_deployment(dep_replicas)
        } else {
            deployment(dep_replicas, &surge.to_string(), "1")
        };
        if strategy == "Recreate" {
            d = recreate_deployment(dep_replicas);
        }
        let rs5 = rs("foo-5", "v1", 5, 5, 0);
        let new_rs = rs("foo-new", "v1", new_rs_replicas, 0, 1);
        assert_eq!(
            new_rs_new_replicas(&d, &[&rs5], &new_rs),
            Ok(want),
            "{strategy} {dep_replicas} {new_rs_replicas} {surge}"
        );
    }
    let mut bad = deployment(1, "1", "1");
    if let Some(s) = bad.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
        s.type_ = Some("Canary".into());
    }
    assert_eq!(
        new_rs_new_replicas(&bad, &[], &rs("x", "v1", 0, 0, 0)),
        Err(Error::UnsupportedStrategy("Canary".into()))
    );
}

fn with_revision(name: &str, revision: &str) -> ReplicaSet {
    let mut r = rs(name, "v1", 1, 1, 0);
    annotate(&mut r.metadata, REVISION_ANNOTATION, revision);
    r
}

#[test]
fn max_and_last_revision() {
    let rss = [
        with_revision("a", "3"),
        with_revision("b", "1"),
        with_revision("c", "7"),
        with_revision("d", "garbled"),
    ];
    let refs: Vec<&ReplicaSet> = rss.iter().collect();
    assert_eq!(max_revision(&refs), 7);
    assert_eq!(last_revision(&refs), 3);
    assert_eq!(max_revision(&[]), 0);
    assert_eq!(last_revision(&refs[..1]), 0);
}

#[test]
fn new_replica_set_annotations_bump_revision_and_keep_history() {
    let mut d = deployment(3, "1", "0");
    annotate(&mut d.metadata, "team", "a");
    annotate(&mut d.metadata, LAST_APPLIED_CONFIG_ANNOTATION, "{}");
    annotate(&mut d.metadata, REVISION_ANNOTATION, "9");
    // A brand-new RS gets revision, copied annotations and the replica annotations.
    let mut fresh = rs("foo-new", "v1", 0, 0, 0);
    assert!(set_new_replica_set_annotations(
        &d,
        &mut fresh,
        "4",
        false,
        MAX_REV_HISTORY_LENGTH_IN_CHARS
    ));
    let a = &fresh.metadata;
    assert_eq!(annotation(a, REVISION_ANNOTATION), Some("4"));
    assert_eq!(annotation(a, "team"), Some("a"));
    assert_eq!(annotation(a, DESIRED_REPLICAS_ANNOTATION), Some("3"));
    assert_eq!(annotation(a, MAX_REPLICAS_ANNOTATION), Some("4"));
    assert_eq!(annotation(a, LAST_APPLIED_CONFIG_ANNOTATION), None);
    // Rolling back to revision 2: it becomes 5, history "1,2".
    let mut old = with_revision("foo-old", "2");
    annotate(&mut old.metadata, REVISION_HISTORY_ANNOTATION, "1");
    assert!(set_new_replica_set_annotations(
        &d,
        &mut old,
        "5",
        true,
        MAX_REV_HISTORY_LENGTH_IN_CHARS
    ));
    let a = &old.metadata;
    assert_eq!(annotation(a, REVISION_ANNOTATION), Some("5"));
    assert_eq!(annotation(a, REVISION_HISTORY_ANNOTATION), Some("1,2"));
    // Never lowered.
    assert!(!set_new_replica_set_annotations(
        &d,
        &mut old,
        "3",
        true,
        MAX_REV_HISTORY_LENGTH_IN_CHARS
    ));
    // History trimmed from the front to the limit: "1,2" + ",5" is 5 chars > 4 → "2,5".
    let mut again = old.clone();
    assert!(set_new_replica_set_annotations(
        &d, &mut again, "6", true, 4
    ));
    let a = &again.metadata;
    assert_eq!(annotation(a, REVISION_HISTORY_ANNOTATION), Some("2,5"));
}

#[test]
fn equal_ignore_hash_ignores_only_the_hash_label() {
    let mut a = rs("a", "v1", 1, 1, 0);
    if let Some(l) = a
        .spec
        .as_mut()
        .and_then(|s| s.template.as_mut())
        .and_then(|t| t.metadata.as_mut())
        .and_then(|m| m.labels.as_mut())
    {
        l.insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "abc".into());
    }
    let d = deployment(1, "1", "0");
    assert!(equal_ignore_hash(
        &rs_template(&a),
        &deployment_template(&d)
    ));
    assert!(!equal_ignore_hash(
        &rs_template(&rs("b", "v2", 1, 1, 0)),
        &deployment_template(&d)
    ));
}

#[test]
fn find_new_and_old_replica_sets() {
    let d = deployment(3, "1", "0");
    // Two RSs match the template: the oldest is the new one (issue 40415).
    let rss = vec![
        rs("dup-newer", "v1", 1, 1, 20),
        rs("old", "v0", 0, 0, 0),
        rs("dup-older", "v1", 2, 2, 10),
        rs("older", "v9", 3, 3, 5),
    ];
    assert_eq!(find_new_replica_set(&d, &rss), Some(2));
    let (required, all) = find_old_replica_sets(&d, &rss);
    assert_eq!(all, vec![0, 1, 3]);
    assert_eq!(required, vec![0, 3]);
}

#[test]
fn sorting_by_size_and_revision() {
    let mut rss = vec![
        rs("a", "v1", 2, 0, 10),
        rs("b", "v1", 5, 0, 0),
        rs("c", "v1", 2, 0, 5),
    ];
    rss.sort_by(by_size_newer);
    assert_eq!(names(&rss), ["b", "a", "c"]);
    rss.sort_by(by_size_older);
    assert_eq!(names(&rss), ["b", "c", "a"]);
    let mut revs = vec![
        with_revision("x", "3"),
        with_revision("y", "1"),
        with_revision("z", "2"),
    ];
    revs.sort_by(by_revision);
    assert_eq!(names(&revs), ["y", "z", "x"]);
}

fn names(rss: &[ReplicaSet]) -> Vec<String> {
    rss.iter()
        .map(|r| r.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn proportion_rounds_and_respects_the_budget() {
    // deployment 10 (surge 0), rs of 3 annotated max-replicas 7: round(3*10/7)=4 → +1.
    let d = deployment(10, "0", "1");
    let mut r = rs("a", "v1", 3, 3, 0);
    annotate(&mut r.metadata, MAX_REPLICAS_ANNOTATION, "7");
    assert_eq!(get_proportion(&r, &d, 3, 0), 1);
    assert_eq!(get_proportion(&r, &d, 3, 3), 0, "budget used up");
    assert_eq!(get_proportion(&r, &d, 3, 2), 1);
    assert_eq!(
        get_proportion(&rs("z", "v1", 0, 0, 0), &d, 3, 0),
        0,
        "never from zero"
    );
    let zero = deployment(0, "0", "1");
    assert_eq!(get_proportion(&r, &zero, -3, 0), -3);
}

#[test]
fn saturation_and_active_or_latest() {
    let d = deployment(3, "1", "0");
    let mut new = rs("new", "v1", 3, 3, 10);
    assert!(!is_saturated(&d, Some(&new)), "no desired annotation yet");
    annotate(&mut new.metadata, DESIRED_REPLICAS_ANNOTATION, "3");
    assert!(is_saturated(&d, Some(&new)));
    let old0 = rs("old0", "v0", 0, 0, 0);
    let old1 = rs("old1", "v0", 0, 0, 5);
    assert_eq!(
        find_active_or_latest(None, &[&old0, &old1]).map(|r| r.metadata.name.clone()),
        Some(Some("old1".into()))
    );
    assert_eq!(
        find_active_or_latest(Some(&new), &[&old0]).map(|r| r.metadata.name.clone()),
        Some(Some("new".into()))
    );
    let old2 = rs("old2", "v0", 1, 1, 5);
    assert!(find_active_or_latest(Some(&new), &[&old2]).is_none());
    let _ = at(0);
}

/// A comparator the Deployment controller sorts ReplicaSets with.
type ReplicaSetOrder = fn(&ReplicaSet, &ReplicaSet) -> Ordering;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Every comparator the Deployment controller sorts ReplicaSets with is a total order
    /// over random sets (few names, sizes, times and revisions, so ties are common).
    #[test]
    fn replica_set_orders_are_total_orders(
        sets in proptest::collection::vec(
            (0usize..3, 0i32..3, proptest::option::of(0i64..3), proptest::option::of(0u8..3)),
            1..10,
        ),
    ) {
        let rss: Vec<ReplicaSet> = sets
            .iter()
            .map(|&(name, replicas, created, revision)| {
                let mut r = rs(&format!("rs-{name}"), "nginx", replicas, replicas, 0);
                r.metadata.creation_timestamp = created.map(|c| Time(at(c)));
                if let Some(revision) = revision {
                    annotate(&mut r.metadata, REVISION_ANNOTATION, &revision.to_string());
                }
                r
            })
            .collect();
        let orders: [(&str, ReplicaSetOrder); 4] = [
            ("by_creation_timestamp", by_creation_timestamp),
            ("by_size_older", by_size_older),
            ("by_size_newer", by_size_newer),
            ("by_revision", by_revision),
        ];
        for (name, order) in orders {
            if let Some(violation) = crate::testing::total_order_violation(&rss, order) {
                proptest::prop_assert!(false, "{name}: {violation}");
            }
        }
    }
}
