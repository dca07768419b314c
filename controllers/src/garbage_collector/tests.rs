//! Background, foreground and orphan deletion of a Deployment → ReplicaSet → Pods chain.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::*;

fn owner_ref(kind: &str, uid: &str, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: if kind == "ReplicaSet" || kind == "Deployment" {
            "apps/v1".into()
        } else {
            "v1".into()
        },
        kind: kind.into(),
        name: format!("{}-name", uid),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }
}

fn meta(uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: Some(format!("{uid}-name")),
        namespace: Some("default".into()),
        uid: Some(uid.into()),
        owner_references: (!owners.is_empty()).then_some(owners),
        resource_version: Some("7".into()),
        ..Default::default()
    }
}

fn deleting(mut m: ObjectMeta, finalizer: &str) -> ObjectMeta {
    m.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    m.finalizers = Some(vec![finalizer.to_string()]);
    m
}

/// Deployment d1 → ReplicaSet r1 → pods p1, p2 (all blockOwnerDeletion), with `d1` as given.
fn chain(d1: Option<ObjectMeta>) -> OwnerGraph {
    let mut g = OwnerGraph::new();
    if let Some(d1) = d1 {
        g.observe_meta("apps/v1", "Deployment", &d1);
    }
    g.observe_meta(
        "apps/v1",
        "ReplicaSet",
        &meta("r1", vec![owner_ref("Deployment", "d1", true)]),
    );
    for p in ["p1", "p2"] {
        g.observe_meta(
            "v1",
            "Pod",
            &meta(p, vec![owner_ref("ReplicaSet", "r1", true)]),
        );
    }
    g
}

fn delete(uid: &str, kind: &str, policy: PropagationPolicy) -> Action {
    let api_version = if kind == "Pod" { "v1" } else { "apps/v1" };
    Action::Delete {
        target: ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: format!("{uid}-name"),
            uid: uid.into(),
        },
        propagation: Some(policy),
    }
}

#[test]
fn nothing_to_do_while_owners_exist() {
    assert_eq!(
        garbage_collect(&chain(Some(meta("d1", vec![])))).actions,
        []
    );
}

#[test]
fn background_deletes_dependents_of_a_vanished_owner_after_a_live_check() {
    let gc = garbage_collect(&chain(None));
    let [Action::VerifyOwnersAbsent { owners, then }] = gc.actions.as_slice() else {
        panic!("{:?}", gc.actions)
    };
    assert_eq!(
        owners.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>(),
        ["d1"]
    );
    assert_eq!(
        **then,
        delete("r1", "ReplicaSet", PropagationPolicy::Background)
    );
    // Once r1 is gone too, the pods follow.
    let mut g = chain(None);
    g.forget("r1");
    let gc = garbage_collect(&g);
    assert_eq!(gc.actions.len(), 2);
    assert!(
        gc.summary.iter().all(|l| l.contains("delete Pod")),
        "{:?}",
        gc.summary
    );
}

#[test]
fn foreground_deletes_bottom_up_then_removes_finalizers() {
    let d1 = deleting(meta("d1", vec![]), FINALIZER_DELETE_DEPENDENTS);
    // Step 1: the ReplicaSet (which has dependents) is deleted in the foreground too.
    let g = chain(Some(d1.clone()));
    assert_eq!(
        garbage_collect(&g).actions,
        [delete("r1", "ReplicaSet", PropagationPolicy::Foreground)]
    );
    // Step 2: r1 is now deleting its dependents: the pods are deleted.
    let mut g = chain(Some(d1.clone()));
    g.observe_meta(
        "apps/v1",
        "ReplicaSet",
        &deleting(
            meta("r1", vec![owner_ref("Deployment", "d1", true)]),
            FINALIZER_DELETE_DEPENDENTS,
        ),
    );
    assert_eq!(
        garbage_collect(&g).actions,
        [
            delete("p1", "Pod", PropagationPolicy::Background),
            delete("p2", "Pod", PropagationPolicy::Background)
        ]
    );
    // Step 3: pods gone → r1's finalizer is removed (d1 still blocked by r1).
    g.forget("p1");
    g.forget("p2");
    let actions = garbage_collect(&g).actions;
    let [
        Action::Patch {
            target,
            patch_type: PatchType::Merge,
            body,
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}")
    };
    assert_eq!(target.uid, "r1");
    assert_eq!(
        body,
        &json!({"metadata": {"resourceVersion": "7", "finalizers": []}})
    );
    // Step 4: r1 gone → d1's finalizer goes and the API server deletes it.
    g.forget("r1");
    let actions = garbage_collect(&g).actions;
    assert!(
        matches!(actions.as_slice(), [Action::Patch { target, .. }] if target.uid == "d1"),
        "{actions:?}"
    );
}

#[test]
fn non_blocking_dependents_do_not_hold_up_a_foreground_delete() {
    let mut g = OwnerGraph::new();
    g.observe_meta(
        "apps/v1",
        "Deployment",
        &deleting(meta("d1", vec![]), FINALIZER_DELETE_DEPENDENTS),
    );
    g.observe_meta(
        "apps/v1",
        "ReplicaSet",
        &meta("r1", vec![owner_ref("Deployment", "d1", false)]),
    );
    let actions = garbage_collect(&g).actions;
    assert!(
        actions.contains(&delete("r1", "ReplicaSet", PropagationPolicy::Background)),
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Patch { target, .. } if target.uid == "d1")),
        "finalizer removed at once: {actions:?}"
    );
}

#[test]
fn orphan_strips_references_then_the_finalizer() {
    let g = chain(Some(deleting(
        meta("d1", vec![]),
        FINALIZER_ORPHAN_DEPENDENTS,
    )));
    let actions = garbage_collect(&g).actions;
    assert_eq!(actions.len(), 2, "{actions:?}");
    let Action::Patch {
        target,
        body,
        patch_type: PatchType::StrategicMerge,
    } = &actions[0]
    else {
        panic!()
    };
    assert_eq!(target.uid, "r1");
    assert_eq!(
        body,
        &json!({"metadata": {"uid": "r1", "ownerReferences": [{"$patch": "delete", "uid": "d1"}]}})
    );
    assert!(
        matches!(&actions[1], Action::Patch { target, patch_type: PatchType::Merge, .. } if target.uid == "d1")
    );
}

#[test]
fn a_dangling_reference_beside_a_solid_owner_is_removed_not_the_object() {
    let mut g = OwnerGraph::new();
    g.observe_meta("apps/v1", "Deployment", &meta("d1", vec![]));
    let mut two_owners = owner_ref("Deployment", "gone", false);
    two_owners.controller = Some(false);
    g.observe_meta(
        "apps/v1",
        "ReplicaSet",
        &meta("r1", vec![owner_ref("Deployment", "d1", true), two_owners]),
    );
    let actions = garbage_collect(&g).actions;
    let [Action::VerifyOwnersAbsent { owners, then }] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(owners[0].uid, "gone");
    assert!(
        matches!(&**then, Action::Patch { body, .. } if body["metadata"]["ownerReferences"][0]["uid"] == "gone")
    );
}

#[test]
fn an_object_being_deleted_in_the_background_is_left_alone() {
    let mut g = OwnerGraph::new();
    let mut r1 = meta("r1", vec![owner_ref("Deployment", "d1", true)]);
    r1.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    g.observe_meta("apps/v1", "ReplicaSet", &r1);
    assert_eq!(garbage_collect(&g).actions, []);
}

#[test]
fn a_resource_version_alone_is_recorded_on_an_observed_node_only() {
    let mut g = chain(None);
    let before = g.get("p1").cloned().expect("p1 observed");
    assert!(g.observe_resource_version("p1", Some("9")));
    let after = g.get("p1").expect("p1 still observed");
    assert_eq!(after.resource_version.as_deref(), Some("9"));
    assert_eq!(
        Node {
            resource_version: before.resource_version.clone(),
            ..after.clone()
        },
        before,
        "nothing else changes"
    );
    // A UID the graph has not observed is not made up: the caller records it in full.
    assert!(!g.observe_resource_version("unseen", Some("9")));
    assert!(g.get("unseen").is_none());
}

#[test]
fn an_update_moves_a_dependent_only_when_its_owners_change() {
    let mut g = chain(None);
    let uids = |g: &OwnerGraph, owner: &str| {
        let mut v: Vec<String> = g
            .dependents(owner)
            .iter()
            .map(|n| n.identity.uid.clone())
            .collect();
        v.sort();
        v
    };
    // A status-like update (same owners, new resourceVersion): still r1's, node refreshed.
    let mut p1 = meta("p1", vec![owner_ref("ReplicaSet", "r1", true)]);
    p1.resource_version = Some("8".into());
    g.observe_meta("v1", "Pod", &p1);
    assert_eq!(uids(&g, "r1"), ["p1", "p2"]);
    assert_eq!(
        g.get("p1").and_then(|n| n.resource_version.as_deref()),
        Some("8")
    );
    // Orphaned (owner reference removed), then adopted by r2.
    g.observe_meta("v1", "Pod", &meta("p1", vec![]));
    assert_eq!(uids(&g, "r1"), ["p2"]);
    g.observe_meta(
        "v1",
        "Pod",
        &meta("p1", vec![owner_ref("ReplicaSet", "r2", true)]),
    );
    assert_eq!(uids(&g, "r1"), ["p2"]);
    assert_eq!(uids(&g, "r2"), ["p1"]);
}

#[test]
fn reasons_are_worded_as_kubernetes_logs_them() {
    // Background: the Deployment is gone, so its ReplicaSet's owner is not found.
    let g = chain(None);
    let r1 = g.get("r1").expect("r1");
    assert_eq!(
        reason(&g, r1),
        "item's owner is not found (Deployment d1-name): Deleting item"
    );
    // Foreground: the Deployment deletes its dependents; the ReplicaSet has pods.
    let d1 = deleting(meta("d1", vec![]), FINALIZER_DELETE_DEPENDENTS);
    let mut g = chain(Some(d1));
    let r1 = g.get("r1").expect("r1");
    assert!(
        reason(&g, r1).starts_with(
            "at least one owner of item has FinalizerDeletingDependents (Deployment d1-name)"
        ),
        "{}",
        reason(&g, r1)
    );
    let d1 = g.get("d1").expect("d1");
    assert!(
        reason(&g, d1).starts_with(
            "adding dependent to attemptToDelete, because its owner is deletingDependents (ReplicaSet r1-name): ReplicaSet r1-name: at least one owner of item has FinalizerDeletingDependents (Deployment d1-name)"
        ),
        "{}",
        reason(&g, d1)
    );
    // Every dependent gone: the finalizer goes.
    for uid in ["p1", "p2", "r1"] {
        g.forget(uid);
    }
    let d1 = g.get("d1").expect("d1");
    assert_eq!(reason(&g, d1), "remove DeleteDependents finalizer for item");
    // Owners present: nothing to say.
    let g = chain(Some(meta("d1", vec![])));
    assert_eq!(reason(&g, g.get("r1").expect("r1")), "");
}
