//! Unit tests of the DaemonSet controller's decisions: placement, the manage step, rolling
//! updates with and without surge, status counts and revision naming.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy,
    RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    NodeSpec, Pod, PodSpec, PodStatus, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::failed_pods_backoff::FailedPodsBackoff;
use super::history::{History, get_patch, new_revision, revisions_to_delete, template_hash};
use super::placement::{get_target_node_name, node_should_run_daemon_pod};
use super::*;
use crate::testing::{app_labels, at, object_meta, pod_template, ready_since, selector_for};

pub(super) fn daemon_set(image: &str) -> DaemonSet {
    let labels = app_labels("logger");
    let mut meta = object_meta("logger");
    meta.annotations = Some(BTreeMap::from([(
        TEMPLATE_GENERATION_ANNOTATION.to_owned(),
        "1".to_owned(),
    )]));
    DaemonSet {
        metadata: meta,
        spec: Some(DaemonSetSpec {
            selector: selector_for(&labels),
            template: pod_template(&labels, image),
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            revision_history_limit: Some(10),
            ..Default::default()
        }),
        status: None,
    }
}

pub(super) fn with_surge(mut ds: DaemonSet, surge: i32) -> DaemonSet {
    if let Some(ru) = ds
        .spec
        .as_mut()
        .and_then(|s| s.update_strategy.as_mut())
        .and_then(|u| u.rolling_update.as_mut())
    {
        ru.max_surge = Some(IntOrString::Int(surge));
        ru.max_unavailable = Some(IntOrString::Int(0));
    }
    ds
}

pub(super) fn node(name: &str, labels: &[(&str, &str)], taints: Vec<Taint>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        }),
        status: None,
    }
}

pub(super) fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: Some("true".into()),
        effect: effect.into(),
        time_added: None,
    }
}

/// A daemon pod `name` of `hash` on `node`, created at `created`, ready since `ready`.
pub(super) fn pod(name: &str, node: &str, hash: &str, created: i64, ready: Option<i64>) -> Pod {
    let ds = daemon_set("logger:v1");
    let mut p = new_daemon_pod(&ds, node, hash, None);
    p.metadata.name = Some(name.into());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.creation_timestamp = Some(Time(at(created)));
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: ready_since(ready),
        ..Default::default()
    });
    p
}

pub(super) fn run(
    ds: &DaemonSet,
    nodes: &[Node],
    pods: &[Pod],
    hash: &str,
    now: i64,
) -> (DaemonSetSync, Expectations) {
    let mut expectations = Expectations::new();
    let mut backoff = FailedPodsBackoff::new();
    let nodes: Vec<&Node> = nodes.iter().collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let out = sync_daemon_set(
        &mut expectations,
        &mut backoff,
        DaemonSetSyncInput {
            daemon_set: ds,
            nodes: &nodes,
            pods: &pods,
            hash,
            old_revisions: &[],
            now: at(now),
        },
    );
    (out, expectations)
}

/// `(node, labels)` of the pods the actions create, and the names of the pods they delete.
pub(super) fn creates_and_deletes(actions: &[Action]) -> (Vec<String>, Vec<String>) {
    let mut creates = Vec::new();
    let mut deletes = Vec::new();
    for action in actions {
        match action {
            Action::CreateDistinctPods { pods, .. } => creates.extend(
                pods.iter()
                    .filter_map(|p| get_target_node_name(p.spec.as_ref())),
            ),
            Action::DeletePods { pods, .. } => deletes.extend(pods.iter().map(|k| k.name.clone())),
            _ => {}
        }
    }
    (creates, deletes)
}

pub(super) fn status_of(actions: &[Action]) -> Option<DaemonSetStatus> {
    actions.iter().find_map(|a| match a {
        Action::UpdateDaemonSetStatus(ds) => ds.status.clone(),
        _ => None,
    })
}

#[test]
fn one_pod_per_node_pinned_by_node_affinity_with_daemon_tolerations() {
    let ds = daemon_set("logger:v1");
    let nodes = [
        node("a", &[], vec![]),
        node("b", &[], vec![]),
        node("c", &[], vec![]),
    ];
    let (out, expectations) = run(&ds, &nodes, &[], "h1", 0);
    let (creates, deletes) = creates_and_deletes(&out.actions);
    assert_eq!(creates, ["a", "b", "c"]);
    assert!(deletes.is_empty());
    let exp = expectations
        .get_expectations(&ObjectKey::new(Some("default"), "logger"))
        .expect("expectations set");
    assert_eq!((exp.add, exp.del), (3, 0));
    let Some(Action::CreateDistinctPods { pods, batches, .. }) = out.actions.first() else {
        panic!("first action creates pods: {:?}", out.actions);
    };
    assert_eq!(batches, &[1, 2]);
    let p = &pods[0];
    assert_eq!(p.metadata.generate_name.as_deref(), Some("logger-"));
    let labels = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("controller-revision-hash").map(String::as_str),
        Some("h1")
    );
    assert_eq!(
        labels.get("pod-template-generation").map(String::as_str),
        Some("1")
    );
    let spec = p.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name, None, "the scheduler binds it");
    let keys: Vec<(&str, &str)> = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| {
            (
                t.key.as_deref().unwrap_or_default(),
                t.effect.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ]
    );
    // Status: 3 desired, none yet scheduled.
    let status = status_of(&out.actions).expect("status written");
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled
        ),
        (3, 0)
    );
    assert_eq!(status.number_unavailable, Some(3));
    assert_eq!(status.observed_generation, Some(1));
}

#[test]
fn host_network_pods_tolerate_network_unavailable() {
    let mut ds = daemon_set("logger:v1");
    if let Some(spec) = ds.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.host_network = Some(true);
    }
    let p = new_daemon_pod(&ds, "a", "h1", None);
    let last = p
        .spec
        .and_then(|s| s.tolerations)
        .and_then(|t| t.last().cloned())
        .expect("tolerations");
    assert_eq!(
        (last.key.as_deref(), last.effect.as_deref()),
        (
            Some("node.kubernetes.io/network-unavailable"),
            Some("NoSchedule")
        )
    );
}

#[test]
fn placement_follows_node_selector_affinity_and_taints() {
    let mut spec = PodSpec {
        node_selector: Some(BTreeMap::from([("disk".to_owned(), "ssd".to_owned())])),
        ..Default::default()
    };
    let fit = |spec: &PodSpec, n: &Node| {
        let f = node_should_run_daemon_pod(Some(spec), n);
        (f.should_run, f.should_continue_running)
    };
    assert_eq!(
        fit(&spec, &node("a", &[("disk", "ssd")], vec![])),
        (true, true)
    );
    assert_eq!(
        fit(&spec, &node("b", &[("disk", "hdd")], vec![])),
        (false, false)
    );
    // Required node affinity: zone NotIn [z2].
    spec.node_selector = None;
    spec.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "NotIn".into(),
                        values: Some(vec!["z2".into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(
        fit(&spec, &node("a", &[("zone", "z1")], vec![])),
        (true, true)
    );
    assert_eq!(
        fit(&spec, &node("b", &[("zone", "z2")], vec![])),
        (false, false)
    );
    let plain = PodSpec::default();
    // NoSchedule: no new pod, but one already there stays; NoExecute: it goes.
    let no_schedule = node("c", &[], vec![taint("dedicated", "NoSchedule")]);
    assert_eq!(fit(&plain, &no_schedule), (false, true));
    let no_execute = node("d", &[], vec![taint("dedicated", "NoExecute")]);
    assert_eq!(fit(&plain, &no_execute), (false, false));
    // Tolerated.
    let tolerant = PodSpec {
        tolerations: Some(vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    assert_eq!(fit(&tolerant, &no_execute), (true, true));
    // The daemon tolerations: a not-ready or cordoned node still runs daemon pods.
    let not_ready = node(
        "e",
        &[],
        vec![
            taint("node.kubernetes.io/not-ready", "NoExecute"),
            taint("node.kubernetes.io/unschedulable", "NoSchedule"),
        ],
    );
    assert_eq!(fit(&plain, &not_ready), (true, true));
    // A template pinned to another node.
    let pinned = PodSpec {
        node_name: Some("z".into()),
        ..Default::default()
    };
    assert_eq!(fit(&pinned, &node("a", &[], vec![])), (false, false));
}

#[test]
fn tainted_node_gets_no_pod_and_an_evicting_taint_removes_one() {
    let ds = daemon_set("logger:v1");
    let nodes = [
        node("a", &[], vec![]),
        node("b", &[], vec![taint("dedicated", "NoSchedule")]),
        node("c", &[], vec![taint("dedicated", "NoExecute")]),
    ];
    let pods = [
        pod("logger-b", "b", "h1", 0, Some(0)),
        pod("logger-c", "c", "h1", 0, Some(0)),
    ];
    let (out, _) = run(&ds, &nodes, &pods, "h1", 10);
    let (creates, deletes) = creates_and_deletes(&out.actions);
    assert_eq!(creates, ["a"]);
    assert_eq!(deletes, ["logger-c"]);
    let status = status_of(&out.actions).expect("status");
    // Desired: only a. b and c have pods they should not get: misscheduled.
    assert_eq!(status.desired_number_scheduled, 1);
    assert_eq!(status.current_number_scheduled, 0);
    assert_eq!(status.number_misscheduled, 2);
}

#[test]
fn failed_pods_are_deleted_with_an_event_then_backed_off() {
    let ds = daemon_set("logger:v1");
    let nodes = [node("a", &[], vec![])];
    let mut failed = pod("logger-x", "a", "h1", 0, None);
    if let Some(status) = failed.status.as_mut() {
        status.phase = Some("Failed".into());
    }
    let mut expectations = Expectations::new();
    let mut backoff = FailedPodsBackoff::new();
    let node_refs: Vec<&Node> = nodes.iter().collect();
    let pods = [&failed];
    let mut sync = |expectations: &mut Expectations, now| {
        sync_daemon_set(
            expectations,
            &mut backoff,
            DaemonSetSyncInput {
                daemon_set: &ds,
                nodes: &node_refs,
                pods: &pods,
                hash: "h1",
                old_revisions: &[],
                now: at(now),
            },
        )
    };
    let out = sync(&mut expectations, 0);
    let events: Vec<(&str, &str)> = out
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some((e.reason.as_str(), e.message.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        [(
            "FailedDaemonPod",
            "Found failed daemon pod default/logger-x on node a, will try to kill it"
        )]
    );
    assert_eq!(creates_and_deletes(&out.actions).1, ["logger-x"]);
    // The deletion was not observed: the next sync waits (expectations). Once it is, a pod
    // that fails again within the back-off is left and the sync requeued.
    let key = ObjectKey::new(Some("default"), "logger");
    let out = sync(&mut expectations, 0);
    assert!(
        creates_and_deletes(&out.actions).1.is_empty(),
        "{}",
        out.summary
    );
    expectations.delete_expectations(&key);
    let out = sync(&mut expectations, 0);
    assert!(creates_and_deletes(&out.actions).1.is_empty());
    assert!(
        out.actions
            .contains(&Action::RequeueAfter(Duration::from_secs(1)))
    );
}

#[test]
fn extra_pods_on_a_node_keep_the_oldest() {
    let ds = daemon_set("logger:v1");
    let nodes = [node("a", &[], vec![])];
    let pods = [
        pod("logger-new", "a", "h1", 20, Some(20)),
        pod("logger-old", "a", "h1", 10, Some(10)),
    ];
    let (out, _) = run(&ds, &nodes, &pods, "h1", 30);
    assert_eq!(creates_and_deletes(&out.actions).1, ["logger-new"]);
}

#[test]
fn on_delete_never_replaces_old_pods() {
    let mut ds = daemon_set("logger:v2");
    if let Some(u) = ds.spec.as_mut().and_then(|s| s.update_strategy.as_mut()) {
        *u = DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        };
    }
    let nodes = [node("a", &[], vec![])];
    let (out, _) = run(
        &ds,
        &nodes,
        &[pod("logger-a", "a", "h1", 0, Some(0))],
        "h2",
        10,
    );
    assert_eq!(creates_and_deletes(&out.actions), (vec![], vec![]));
    let status = status_of(&out.actions).expect("status");
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.updated_number_scheduled
        ),
        (1, Some(0))
    );
}

#[test]
fn status_counts_ready_available_and_unchanged_status_is_not_written() {
    let mut ds = daemon_set("logger:v1");
    if let Some(spec) = ds.spec.as_mut() {
        spec.min_ready_seconds = Some(10);
    }
    let nodes = [node("a", &[], vec![]), node("b", &[], vec![])];
    let pods = [
        pod("logger-a", "a", "h1", 0, Some(0)),
        pod("logger-b", "b", "h1", 0, Some(25)),
    ];
    let (out, _) = run(&ds, &nodes, &pods, "h1", 30);
    let status = status_of(&out.actions).expect("status");
    assert_eq!(status.number_ready, 2);
    assert_eq!(status.number_available, Some(1), "b is ready for 5s of 10");
    assert_eq!(status.number_unavailable, Some(1));
    assert_eq!(status.updated_number_scheduled, Some(2));
    assert!(
        out.actions
            .contains(&Action::RequeueAfter(Duration::from_secs(10)))
    );
    let mut settled = ds.clone();
    settled.status = Some(status);
    let (out, _) = run(&settled, &nodes, &pods, "h1", 30);
    assert_eq!(status_of(&out.actions), None);
}

#[test]
fn selecting_everything_is_refused_with_an_event() {
    let mut ds = daemon_set("logger:v1");
    if let Some(spec) = ds.spec.as_mut() {
        spec.selector = Default::default();
    }
    let (out, _) = run(&ds, &[node("a", &[], vec![])], &[], "", 0);
    assert_eq!(out.actions.len(), 1);
    assert!(matches!(&out.actions[0], Action::Event(e) if e.reason == "SelectingAll"));
}

#[test]
fn revisions_are_named_after_the_template_hash_and_hold_a_replace_patch() {
    let ds = daemon_set("logger:v1");
    let hash = template_hash(&ds);
    let revision = new_revision(&ds, 1);
    assert_eq!(revision.metadata.name, Some(format!("logger-{hash}")));
    assert_eq!(revision.revision, 1);
    let labels = revision.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("controller-revision-hash"), Some(&hash));
    assert_eq!(labels.get("app").map(String::as_str), Some("logger"));
    let data = revision
        .data
        .as_ref()
        .map(|d| d.0.clone())
        .unwrap_or_default();
    assert_eq!(data["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        data["spec"]["template"]["spec"]["containers"][0]["image"],
        "logger:v1"
    );
    assert_eq!(data, get_patch(&ds));
    // A collision changes the hash.
    let mut collided = ds.clone();
    collided.status = Some(DaemonSetStatus {
        collision_count: Some(1),
        ..Default::default()
    });
    assert_ne!(template_hash(&collided), hash);
    // The current revision is the one whose data matches; the next number follows the old.
    let v2 = daemon_set("logger:v2");
    let history = History::split(&v2, vec![new_revision(&ds, 1), new_revision(&v2, 2)]);
    assert_eq!(history.current.len(), 1);
    assert_eq!(history.current[0].revision, 2);
    assert_eq!(history.next_revision(), 2);
    // After an undo to v1, v1's revision must be raised above v2's.
    let back = History::split(&ds, vec![new_revision(&ds, 1), new_revision(&v2, 2)]);
    assert_eq!((back.current[0].revision, back.next_revision()), (1, 3));
}

#[test]
fn history_is_trimmed_oldest_first_sparing_revisions_pods_still_use() {
    let mut ds = daemon_set("logger:v9");
    if let Some(spec) = ds.spec.as_mut() {
        spec.revision_history_limit = Some(1);
    }
    let old: Vec<ControllerRevision> = (1..=3)
        .map(|i| new_revision(&daemon_set(&format!("logger:v{i}")), i))
        .collect();
    let in_use = old[0]
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .cloned()
        .unwrap_or_default();
    let p = pod("logger-a", "a", &in_use, 0, Some(0));
    let victims: Vec<i64> = revisions_to_delete(&ds, &old, &[&p])
        .iter()
        .map(|r| r.revision)
        .collect();
    assert_eq!(victims, [2, 3], "revision 1 is spared: a pod runs it");
}
