//! The disruption controller's decisions, after `disruption_test.go`.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::json;

use super::*;
use crate::testing::at;

fn pdb(
    min_available: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("pdb-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available,
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                match_expressions: None,
            }),
            unhealthy_pod_eviction_policy: None,
        }),
        status: None,
    }
}

/// A pod `name` of the ReplicaSet `rs-uid` (or of no controller), Ready or not.
fn pod(name: &str, ready: bool, owned: bool) -> Pod {
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    if owned {
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-rs".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
    }
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    p
}

fn five_replicas(r: &OwnerReference, _: &str) -> Option<ControllerScale> {
    (r.uid == "rs-uid").then(|| ControllerScale {
        uid: "rs-uid".into(),
        scale: 5,
    })
}

fn sync(pdb: &PodDisruptionBudget, pods: &[Pod], now: i64) -> DisruptionSync {
    let pods: Vec<&Pod> = pods.iter().collect();
    sync_pdb(SyncInput {
        pdb,
        pods: &pods,
        scale_of: &five_replicas,
        now: at(now),
    })
}

fn written(out: &DisruptionSync) -> PodDisruptionBudgetStatus {
    out.actions
        .iter()
        .find_map(|a| match a {
            Action::UpdatePodDisruptionBudgetStatus(p) => p.status.clone(),
            _ => None,
        })
        .expect("a status write")
}

fn reasons(out: &DisruptionSync) -> Vec<String> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_integer_min_available_counts_the_selected_pods() {
    let budget = pdb(Some(IntOrString::Int(2)), None);
    let pods = [
        pod("a", true, true),
        pod("b", true, true),
        pod("c", false, true),
    ];
    let out = sync(&budget, &pods, 10);
    let status = written(&out);
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.expected_pods,
            status.disruptions_allowed
        ),
        (2, 2, 3, 0)
    );
    assert_eq!(status.observed_generation, Some(1));
    let cond = &status.conditions.unwrap()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "InsufficientPods")
    );
    assert_eq!(
        out.summary,
        "2 healthy, 2 desired of 3 expected → 0 disruption(s) allowed"
    );
}

#[test]
fn percentages_and_max_unavailable_use_the_controllers_scale_rounded_up() {
    let pods = [
        pod("a", true, true),
        pod("b", true, true),
        pod("c", true, true),
    ];
    // 5 replicas wanted, 3 pods: maxUnavailable 1 → 4 must be healthy, none may go.
    let status = written(&sync(&pdb(None, Some(IntOrString::Int(1))), &pods, 10));
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (5, 4, 0)
    );
    // minAvailable 30% of 5 = 1.5 → 2; 3 healthy → 1 may go.
    let status = written(&sync(
        &pdb(Some(IntOrString::String("30%".into())), None),
        &pods,
        10,
    ));
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (5, 2, 1)
    );
    let cond = &status.conditions.unwrap()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "SufficientPods")
    );
}

#[test]
fn unmanaged_and_unknown_controllers_are_reported() {
    let budget = pdb(None, Some(IntOrString::Int(1)));
    let out = sync(
        &budget,
        &[pod("a", true, true), pod("lonely", true, false)],
        10,
    );
    assert_eq!(reasons(&out), vec!["UnmanagedPods"]);
    // A controller the finders do not know: fail safe, no disruption allowed.
    let mut stranger = pod("b", true, true);
    stranger.metadata.owner_references.as_mut().unwrap()[0].uid = "other".into();
    let mut budget = budget;
    budget.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: 3,
        ..Default::default()
    });
    let out = sync(&budget, &[stranger], 10);
    assert_eq!(reasons(&out), vec!["CalculateExpectedPodCountFailed"]);
    let status = written(&out);
    assert_eq!(status.disruptions_allowed, 0);
    let cond = &status.conditions.unwrap()[0];
    assert_eq!(cond.reason, "SyncFailed");
    assert_eq!(cond.message, "found no controllers for pod \"b\"");
    // No pods at all: an event, and nothing may go.
    let out = sync(&pdb(Some(IntOrString::Int(1)), None), &[], 10);
    assert_eq!(reasons(&out), vec!["NoPods"]);
    assert_eq!(written(&out).disruptions_allowed, 0);
}

#[test]
fn evicted_pods_do_not_count_until_they_go_or_time_out() {
    let mut budget = pdb(Some(IntOrString::Int(1)), None);
    budget.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some([("a".to_owned(), Time(at(0)))].into()),
        ..Default::default()
    });
    let pods = [pod("a", true, true), pod("b", true, true)];
    let out = sync(&budget, &pods, 30);
    let status = written(&out);
    assert_eq!((status.current_healthy, status.disruptions_allowed), (1, 0));
    assert!(status.disrupted_pods.unwrap().contains_key("a"));
    assert_eq!(out.recheck_after, Some(Duration::from_secs(90)));
    // After the deletion timeout the pod counts again and leaves the map.
    let out = sync(&budget, &pods, 121);
    let status = written(&out);
    assert_eq!((status.current_healthy, status.disruptions_allowed), (2, 1));
    assert!(status.disrupted_pods.is_none());
    assert_eq!(out.recheck_after, None);
}

#[test]
fn an_up_to_date_status_is_not_written_again() {
    let mut budget = pdb(Some(IntOrString::Int(1)), None);
    let pods = [pod("a", true, true), pod("b", true, true)];
    budget.status = Some(written(&sync(&budget, &pods, 10)));
    let out = sync(&budget, &pods, 20);
    assert!(out.actions.is_empty(), "{:?}", out.actions);
}
