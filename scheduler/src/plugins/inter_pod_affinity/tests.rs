//! Table tests after Kubernetes' `filtering_test.go` and `scoring_test.go`.

use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::filtering::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
};
use super::*;
use crate::cycle_state::CycleState;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::fixtures::{info, labelled_node, labelled_pod, labels, node_info};
use crate::plugins::volume_binding::VolumeCache;
use crate::plugins::{Code, Status};

const ZONE: &str = "zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn term(key: &str, app: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(labels(&[("app", app)])),
            match_expressions: None,
        }),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn weighted(weight: i32, key: &str, app: &str) -> WeightedPodAffinityTerm {
    WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: term(key, app),
    }
}

fn app(name: &str, app: &str) -> Pod {
    labelled_pod(name, &[("app", app)])
}

fn with_affinity(
    mut pod: Pod,
    affinity: Option<PodAffinity>,
    anti: Option<PodAntiAffinity>,
) -> Pod {
    pod.spec.get_or_insert_default().affinity = Some(Affinity {
        pod_affinity: affinity,
        pod_anti_affinity: anti,
        ..Default::default()
    });
    pod
}

fn required(pod: Pod, terms: Vec<PodAffinityTerm>) -> Pod {
    with_affinity(
        pod,
        Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(terms),
            ..Default::default()
        }),
        None,
    )
}

fn required_anti(pod: Pod, terms: Vec<PodAffinityTerm>) -> Pod {
    with_affinity(
        pod,
        None,
        Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(terms),
            ..Default::default()
        }),
    )
}

/// n1, n2 in zone1 and n3 in zone2 (each with its hostname label), holding `pods`.
fn three_nodes(pods: [Vec<Pod>; 3]) -> Vec<NodeInfo> {
    [("n1", "zone1"), ("n2", "zone1"), ("n3", "zone2")]
        .into_iter()
        .zip(pods)
        .map(|((name, zone), pods)| {
            node_info(labelled_node(name, &[(ZONE, zone), (HOSTNAME, name)]), pods)
        })
        .collect()
}

fn filter_all(pod: Pod, nodes: &[NodeInfo]) -> Vec<Result<(), Status>> {
    let pod = info(pod);
    let state = CycleState::pre_filter(&pod, nodes.into());
    nodes.iter().map(|n| filter(&pod, n, &state)).collect()
}

fn affinity_fails() -> Result<(), Status> {
    Err(Status::new(
        NAME,
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ))
}

fn anti_affinity_fails() -> Result<(), Status> {
    Err(Status::new(
        NAME,
        Code::Unschedulable,
        ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ))
}

fn existing_anti_affinity_fails() -> Result<(), Status> {
    Err(Status::new(
        NAME,
        Code::Unschedulable,
        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    ))
}

#[test]
fn a_pod_without_affinity_skips_the_filter() {
    let nodes = three_nodes([vec![app("db", "db")], vec![], vec![]]);
    assert!(
        CycleState::pre_filter(&info(app("p", "web")), (&nodes).into())
            .inter_pod_affinity
            .is_none()
    );
    assert_eq!(filter_all(app("p", "web"), &nodes), vec![Ok(()); 3]);
}

#[test]
fn required_affinity_needs_a_matching_pod_in_the_domain() {
    // db runs on n1 (zone1): n1 and n2 share its zone, n3 does not.
    let nodes = three_nodes([vec![app("db", "db")], vec![], vec![]]);
    let pod = required(app("p", "web"), vec![term(ZONE, "db")]);
    assert_eq!(
        filter_all(pod.clone(), &nodes),
        vec![Ok(()), Ok(()), affinity_fails()]
    );
    // By hostname: only n1.
    let pod = required(app("p", "web"), vec![term(HOSTNAME, "db")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), affinity_fails(), affinity_fails()]
    );
}

#[test]
fn required_affinity_fails_on_a_node_without_the_topology_key() {
    let mut nodes = three_nodes([vec![app("db", "db")], vec![], vec![]]);
    nodes[1] = node_info(labelled_node("n2", &[(HOSTNAME, "n2")]), vec![]);
    let pod = required(app("p", "web"), vec![term(ZONE, "db")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), affinity_fails(), affinity_fails()]
    );
}

#[test]
fn existing_pods_must_match_all_affinity_terms_and_be_in_the_namespace() {
    // A db pod in another namespace does not count, nor one matching only one of two terms.
    let mut other = app("db", "db");
    other.metadata.namespace = Some("other".into());
    let nodes = three_nodes([vec![other], vec![app("cache", "cache")], vec![]]);
    let pod = required(app("p", "web"), vec![term(ZONE, "db"), term(ZONE, "cache")]);
    assert_eq!(filter_all(pod, &nodes), vec![affinity_fails(); 3]);
}

#[test]
fn the_first_pod_of_a_self_affine_group_goes_anywhere() {
    // No pod matches app=web yet and the pod matches its own term: every node with the key.
    let mut nodes = three_nodes([vec![app("db", "db")], vec![], vec![]]);
    nodes[2] = node_info(labelled_node("n3", &[(HOSTNAME, "n3")]), vec![]);
    let pod = required(app("web-0", "web"), vec![term(ZONE, "web")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), Ok(()), affinity_fails()]
    );
    // A pod that does not match its own term gets no such pass.
    let pod = required(app("p", "other"), vec![term(ZONE, "web")]);
    assert_eq!(filter_all(pod, &nodes), vec![affinity_fails(); 3]);
    // Once a web pod runs (n3, zone2), the others must join its zone.
    let nodes = three_nodes([vec![], vec![], vec![app("web-0", "web")]]);
    let pod = required(app("web-1", "web"), vec![term(ZONE, "web")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![affinity_fails(), affinity_fails(), Ok(())]
    );
}

#[test]
fn required_anti_affinity_keeps_the_pod_out_of_the_domain() {
    let nodes = three_nodes([vec![app("web-0", "web")], vec![], vec![]]);
    let pod = required_anti(app("web-1", "web"), vec![term(HOSTNAME, "web")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![anti_affinity_fails(), Ok(()), Ok(())]
    );
    let pod = required_anti(app("web-1", "web"), vec![term(ZONE, "web")]);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![anti_affinity_fails(), anti_affinity_fails(), Ok(())]
    );
}

#[test]
fn existing_pods_anti_affinity_rejects_the_incoming_pod() {
    // db on n1 wants no web pod in its zone: a plain web pod is kept out of zone1.
    let db = required_anti(app("db", "db"), vec![term(ZONE, "web")]);
    let nodes = three_nodes([vec![db], vec![], vec![]]);
    assert_eq!(
        (
            nodes[0].pods_with_affinity,
            nodes[0].pods_with_required_anti_affinity
        ),
        (1, 1)
    );
    let pod = info(app("p", "web"));
    let s = CycleState::pre_filter(&pod, (&nodes).into())
        .inter_pod_affinity
        .expect("an existing pod's anti-affinity matches");
    assert_eq!(s.existing_anti_affinity_counts.get(ZONE, "zone1"), 1);
    assert_eq!(
        filter_all(app("p", "web"), &nodes),
        vec![
            existing_anti_affinity_fails(),
            existing_anti_affinity_fails(),
            Ok(())
        ]
    );
    // Its terms do not match other pods: skipped.
    assert!(
        CycleState::pre_filter(&info(app("p", "api")), (&nodes).into())
            .inter_pod_affinity
            .is_none()
    );
    // Once db is gone, nothing is left to check.
    let mut nodes = nodes;
    let db_key = apimachinery::ObjectKey::new(Some("default"), "db");
    assert!(nodes[0].remove_pod(&db_key).is_some());
    assert_eq!(
        (
            nodes[0].pods_with_affinity,
            nodes[0].pods_with_required_anti_affinity
        ),
        (0, 0)
    );
    assert!(
        CycleState::pre_filter(&info(app("p", "web")), (&nodes).into())
            .inter_pod_affinity
            .is_none()
    );
}

#[test]
fn affinity_is_checked_before_anti_affinity() {
    let nodes = three_nodes([vec![app("db", "db")], vec![app("web-0", "web")], vec![]]);
    let pod = with_affinity(
        app("p", "web"),
        Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term(ZONE, "db")]),
            ..Default::default()
        }),
        Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term(HOSTNAME, "web")]),
            ..Default::default()
        }),
    );
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), anti_affinity_fails(), affinity_fails()]
    );
}

// ---- scoring ----

/// Normalised scores of every node as feasible, or `None` when PreScore skips.
fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Option<Vec<i64>> {
    let feasible: Vec<&NodeInfo> = nodes.iter().collect();
    let mut state = CycleState::pre_filter(pod, nodes.into());
    state.pre_score(pod, nodes.into(), &feasible);
    state.inter_pod_affinity_score.as_ref()?;
    let mut raw: Vec<i64> = nodes.iter().map(|n| score(pod, n, &state)).collect();
    normalize(&mut raw, &state);
    Some(raw)
}

fn preferring(
    pod: Pod,
    affinity: Vec<WeightedPodAffinityTerm>,
    anti: Vec<WeightedPodAffinityTerm>,
) -> Pod {
    with_affinity(
        pod,
        Some(PodAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(affinity),
            ..Default::default()
        }),
        Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(anti),
            ..Default::default()
        }),
    )
}

#[test]
fn no_affinity_anywhere_skips_the_score() {
    let nodes = three_nodes([vec![app("db", "db")], vec![], vec![]]);
    assert_eq!(scores(&info(app("p", "web")), &nodes), None);
    // Preferred terms that match nothing leave no pair: skipped as well.
    let pod = preferring(app("p", "web"), vec![weighted(5, ZONE, "none")], vec![]);
    assert_eq!(scores(&info(pod), &nodes), None);
}

#[test]
fn preferred_affinity_and_anti_affinity_weigh_domains() {
    // db on n1 (zone1), cache on n3 (zone2). Prefer db's zone with 5, avoid cache's
    // hostname with 3: n1 5, n2 5, n3 -3 → 100 × (s + 3) / 8.
    let nodes = three_nodes([vec![app("db", "db")], vec![], vec![app("cache", "cache")]]);
    let pod = preferring(
        app("p", "web"),
        vec![weighted(5, ZONE, "db")],
        vec![weighted(3, HOSTNAME, "cache")],
    );
    assert_eq!(scores(&info(pod), &nodes), Some(vec![100, 100, 0]));
    // Two preferred terms over two domains: n1 5 + 2, n2 5, n3 0 → 100, 71, 0.
    let pod = preferring(
        app("p", "web"),
        vec![weighted(5, ZONE, "db"), weighted(2, HOSTNAME, "db")],
        vec![],
    );
    assert_eq!(scores(&info(pod), &nodes), Some(vec![100, 71, 0]));
}

#[test]
fn existing_pods_terms_score_the_incoming_pod() {
    // cache on n3 requires web pods in its zone (hardPodAffinityWeight 1); db on n1 prefers
    // web pods away from its hostname (weight 4): n1 -4, n2 0, n3 1 → 100 × (s + 4) / 5.
    let cache = required(app("cache", "cache"), vec![term(ZONE, "web")]);
    let db = with_affinity(
        app("db", "db"),
        None,
        Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![weighted(
                4, HOSTNAME, "web",
            )]),
            ..Default::default()
        }),
    );
    let nodes = three_nodes([vec![db], vec![], vec![cache]]);
    assert_eq!(
        scores(&info(app("p", "web")), &nodes),
        Some(vec![0, 80, 100])
    );
    // A pod their terms do not match: no pair gets a score, skipped.
    assert_eq!(scores(&info(app("p", "api")), &nodes), None);
}

#[test]
fn equal_scores_normalise_to_zero() {
    let nodes = three_nodes([
        vec![app("db", "db")],
        vec![app("db-2", "db")],
        vec![app("db-3", "db")],
    ]);
    let pod = preferring(app("p", "web"), vec![weighted(5, ZONE, "db")], vec![]);
    // zone1 has two db pods (10), zone2 one (5): 100, 100, 0.
    assert_eq!(scores(&info(pod), &nodes), Some(vec![100, 100, 0]));
    let pod = preferring(app("p", "web"), vec![weighted(5, HOSTNAME, "db")], vec![]);
    assert_eq!(scores(&info(pod), &nodes), Some(vec![0, 0, 0]));
}

#[test]
fn namespace_selectors_read_the_namespaces_labels() {
    use crate::affinity_term::{LABEL_METADATA_NAME, Namespaces};
    use crate::cache::Snapshot;
    let namespaces: Namespaces = [("default", "dev"), ("payments", "prod")]
        .map(|(name, tier)| {
            let labels = labels(&[(LABEL_METADATA_NAME, name), ("tier", tier)]);
            (name.to_owned(), labels)
        })
        .into();
    let mut db = app("db", "db");
    db.metadata.namespace = Some("payments".into());
    let nodes = three_nodes([vec![db], vec![], vec![]]);
    let snapshot = Snapshot {
        nodes: &nodes,
        namespaces: &namespaces,
        volumes: &VolumeCache::new(),
        groups: None,
    };
    // Affinity to db pods in prod namespaces: only payments' db counts, in zone1.
    let mut to_prod = term(ZONE, "db");
    to_prod.namespace_selector = Some(LabelSelector {
        match_labels: Some(labels(&[("tier", "prod")])),
        match_expressions: None,
    });
    let pod = info(required(app("p", "web"), vec![to_prod.clone()]));
    let state = CycleState::pre_filter(&pod, snapshot);
    let verdicts: Vec<_> = nodes.iter().map(|n| filter(&pod, n, &state)).collect();
    assert_eq!(verdicts, vec![Ok(()), Ok(()), affinity_fails()]);
    // Without the namespaces' labels, no namespace is prod: no node fits.
    let state = CycleState::pre_filter(&pod, (&nodes).into());
    let verdicts: Vec<_> = nodes.iter().map(|n| filter(&pod, n, &state)).collect();
    assert_eq!(verdicts, vec![affinity_fails(); 3]);
    // An existing pod's anti-affinity towards prod namespaces rejects a pod in payments, not
    // one in default.
    let mut by_host = to_prod;
    by_host.topology_key = HOSTNAME.into();
    let guard = required_anti(app("guard", "guard"), vec![by_host]);
    let nodes = three_nodes([vec![], vec![], vec![guard]]);
    let snapshot = Snapshot {
        nodes: &nodes,
        namespaces: &namespaces,
        volumes: &VolumeCache::new(),
        groups: None,
    };
    let mut payments_db = app("db-2", "db");
    payments_db.metadata.namespace = Some("payments".into());
    let state = CycleState::pre_filter(&info(payments_db.clone()), snapshot);
    assert_eq!(
        filter(&info(payments_db), &nodes[2], &state),
        existing_anti_affinity_fails()
    );
    let default_db = info(app("db-3", "db"));
    let state = CycleState::pre_filter(&default_db, snapshot);
    assert!(state.inter_pod_affinity.is_none());
}
