//! The ReplicationController's conversion and the ReplicaSet sync run through it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ReplicationControllerSpec};

use super::*;
use crate::expectations::Expectations;
use crate::replicaset::tests::pod;
use crate::replicaset::{ReplicaSetSyncInput, sync_replica_set};
use crate::testing::{at, object_meta, pod_template};

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "web".to_string())])
}

fn rc(replicas: i32) -> ReplicationController {
    ReplicationController {
        metadata: object_meta("web"),
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(labels()),
            template: Some(pod_template(&labels(), "nginx")),
            min_ready_seconds: None,
        }),
        status: Some(ReplicationControllerStatus {
            replicas: 1,
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

fn sync(rc: &ReplicationController, pods: &[Pod]) -> Vec<Action> {
    let rs = rc.to_replica_set();
    let pods: Vec<&Pod> = pods.iter().collect();
    let out = sync_replica_set(
        &mut Expectations::new(),
        ReplicaSetSyncInput {
            replica_set: &rs,
            pods: &pods,
            related_pods: &[],
            now: at(10),
        },
    );
    rc.adapt_actions(out.actions)
}

#[test]
fn the_replica_set_view_keeps_identity_and_selects_with_match_labels() {
    let rc = rc(3);
    let rs = convert_rc_to_rs(&rc);
    assert_eq!(rs.metadata, rc.metadata);
    let spec = rs.spec.expect("spec");
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.selector.match_labels, Some(labels()));
    assert_eq!(
        spec.template,
        rc.spec.as_ref().and_then(|s| s.template.clone())
    );
    assert_eq!(rs.status.map(|s| s.replicas), Some(1));
    let selector = rc.selector().expect("a selector");
    assert!(selector.matches(&[("app", "web")]));
    assert!(!selector.matches(&[("app", "db")]));
}

#[test]
fn created_pods_are_owned_by_the_replication_controller() {
    let rc = rc(2);
    let actions = sync(&rc, &[]);
    let Some(Action::CreatePods {
        controller,
        pod,
        batches,
    }) = actions.first()
    else {
        panic!("expected CreatePods first: {actions:?}");
    };
    assert_eq!(batches, &vec![1, 1]);
    assert_eq!(
        (controller.api_version.as_str(), controller.kind.as_str()),
        ("v1", "ReplicationController")
    );
    let owners = pod.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].api_version.as_str(), owners[0].kind.as_str()),
        ("v1", "ReplicationController")
    );
    assert_eq!(owners[0].uid, "uid-web");
    assert_eq!(owners[0].controller, Some(true));
}

#[test]
fn extra_pods_are_deleted_in_the_replication_controllers_name() {
    let rc = rc(1);
    let pods = [pod("web-a", Some(0)), pod("web-b", None)];
    let actions = sync(&rc, &pods);
    let Some(Action::DeletePods { controller, pods }) = actions.first() else {
        panic!("expected DeletePods first: {actions:?}");
    };
    assert_eq!(controller.kind, "ReplicationController");
    let names: Vec<&str> = pods.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, vec!["web-b"], "the not-ready pod goes first");
}

#[test]
fn the_status_is_written_to_the_replication_controller() {
    let rc = rc(2);
    let pods = [pod("web-a", Some(0)), pod("web-b", Some(0))];
    let actions = sync(&rc, &pods);
    let status = actions
        .iter()
        .find_map(|a| match a {
            Action::UpdateReplicationControllerStatus(rc) => Some(rc.clone()),
            Action::UpdateReplicaSetStatus(_) => panic!("a ReplicaSet status write: {a:?}"),
            _ => None,
        })
        .expect("a status write");
    assert_eq!(status.metadata.name.as_deref(), Some("web"));
    let status = status.status.expect("status");
    assert_eq!(status.replicas, 2);
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(status.available_replicas, Some(2));
    assert_eq!(status.fully_labeled_replicas, Some(2));
}

#[test]
fn conditions_convert_both_ways() {
    let rs_status = ReplicaSetStatus {
        replicas: 0,
        conditions: Some(vec![ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some("FailedCreate".into()),
            message: Some("pods \"web-\" is forbidden: quota".into()),
            last_transition_time: None,
        }]),
        ..Default::default()
    };
    let rc_status = convert_status(&rs_status);
    let mut rc = rc(1);
    rc.status = Some(rc_status.clone());
    let back = convert_rc_to_rs(&rc).status.expect("status");
    assert_eq!(back.conditions, rs_status.conditions);
    assert_eq!(
        rc_status.conditions.expect("conditions")[0]
            .reason
            .as_deref(),
        Some("FailedCreate")
    );
}
