//! The Deployment controller run step by step over a tiny in-memory world: the API server is
//! a vector of ReplicaSets, and the ReplicaSet controller + kubelets are one function that
//! makes every ReplicaSet's pods exist and be available right away (or never, for a broken
//! image). Invariants are checked after every sync.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::*;
use super::fixtures::*;
use super::util::*;
use super::*;
use crate::action::{Action, Event};
use crate::testing::annotation;

struct World {
    d: Deployment,
    rss: Vec<ReplicaSet>,
    events: Vec<Event>,
    clock: i64,
    /// Images whose pods never become available.
    broken_images: Vec<String>,
    pods_by_rs: BTreeMap<String, Vec<Pod>>,
    last_summary: String,
    summaries: Vec<String>,
}

impl World {
    fn new(d: Deployment) -> World {
        World {
            d,
            rss: Vec::new(),
            events: Vec::new(),
            clock: 0,
            broken_images: Vec::new(),
            pods_by_rs: BTreeMap::new(),
            last_summary: String::new(),
            summaries: Vec::new(),
        }
    }

    /// One sync of the Deployment controller; returns the actions it took.
    fn sync(&mut self) -> Vec<Action> {
        self.clock += 1;
        let out = sync_deployment(DeploymentSyncInput {
            deployment: &self.d,
            replica_sets: &self.rss,
            pods_by_replica_set: &self.pods_by_rs,
            now: at(self.clock),
        });
        assert_eq!(out.error, None, "{}", out.summary);
        self.last_summary = out.summary.clone();
        self.summaries.push(out.summary.clone());
        for action in &out.actions {
            self.apply(action);
        }
        out.actions
    }

    fn apply(&mut self, action: &Action) {
        match action {
            Action::CreateReplicaSet(rs) => {
                let mut rs = (**rs).clone();
                rs.metadata.uid = Some(format!(
                    "uid-{}",
                    rs.metadata.name.clone().unwrap_or_default()
                ));
                rs.metadata.creation_timestamp = Some(Time(at(self.clock)));
                assert!(
                    !self.rss.iter().any(|r| r.metadata.name == rs.metadata.name),
                    "AlreadyExists"
                );
                self.rss.push(rs);
            }
            Action::UpdateReplicaSet(rs) => {
                let slot = self
                    .rss
                    .iter_mut()
                    .find(|r| r.metadata.name == rs.metadata.name)
                    .expect("exists");
                let status = slot.status.clone();
                *slot = (**rs).clone();
                slot.status = status; // PUT ignores status
            }
            Action::UpdateDeploymentStatus(d) => {
                // The status strategy keeps metadata changes (the revision annotation) but not spec.
                self.d.status = d.status.clone();
                self.d.metadata.annotations = d.metadata.annotations.clone();
            }
            Action::UpdateDeployment(d) => {
                self.d.spec = d.spec.clone();
                self.d.metadata.annotations = d.metadata.annotations.clone();
            }
            Action::Delete { target, .. } => self
                .rss
                .retain(|r| r.metadata.name.as_deref() != Some(target.name.as_str())),
            Action::Event(e) => self.events.push(e.clone()),
            Action::RequeueAfter(_) => {}
            other => panic!("unexpected action {other:?}"),
        }
    }

    /// The ReplicaSet controller and kubelets: pods follow `spec.replicas` immediately.
    fn pods_follow(&mut self) {
        for rs in &mut self.rss {
            let replicas = rs_replicas(rs);
            let image = rs_template(rs)
                .spec
                .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
                .unwrap_or_default();
            let available = if self.broken_images.contains(&image) {
                0
            } else {
                replicas
            };
            rs.status = Some(ReplicaSetStatus {
                replicas,
                ready_replicas: Some(available),
                available_replicas: Some(available),
                observed_generation: rs.metadata.generation,
                ..Default::default()
            });
        }
    }

    fn set_image(&mut self, image: &str) {
        if let Some(spec) = self.d.spec.as_mut() {
            spec.template = template(image);
        }
        self.d.metadata.generation = Some(self.d.metadata.generation.unwrap_or(1) + 1);
    }

    fn replicas_of(&self, image: &str) -> i32 {
        self.rss
            .iter()
            .filter(|rs| {
                rs_template(rs)
                    .spec
                    .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
                    .as_deref()
                    == Some(image)
            })
            .map(rs_replicas)
            .sum()
    }

    /// Pods that exist right after the sync's writes: scale-ups start pods, scale-downs kill them.
    fn pods(&self) -> i32 {
        self.rss
            .iter()
            .map(|rs| rs_replicas(rs).max(rs_status_counts(rs).0))
            .sum()
    }

    fn available(&self) -> i32 {
        self.rss
            .iter()
            .map(|rs| rs_replicas(rs).min(rs_available(rs)))
            .sum()
    }

    /// Sync and let pods follow until nothing changes; returns `(old, new)` replicas after
    /// every sync that scaled something, checking the rolling-update bounds throughout.
    fn roll(
        &mut self,
        old_image: &str,
        new_image: &str,
        max_pods: i32,
        min_available: i32,
    ) -> Vec<(i32, i32)> {
        let mut steps = Vec::new();
        for _ in 0..50 {
            let actions = self.sync();
            assert!(
                self.pods() <= max_pods,
                "{} pods > {max_pods}: {}",
                self.pods(),
                self.last_summary
            );
            assert!(
                self.available() >= min_available,
                "{} available < {min_available}: {}",
                self.available(),
                self.last_summary
            );
            let scaled = actions
                .iter()
                .any(|a| matches!(a, Action::UpdateReplicaSet(_) | Action::CreateReplicaSet(_)));
            if scaled {
                steps.push((self.replicas_of(old_image), self.replicas_of(new_image)));
            }
            self.pods_follow();
            if !scaled
                && actions
                    .iter()
                    .all(|a| !matches!(a, Action::UpdateDeploymentStatus(_)))
            {
                return steps;
            }
        }
        panic!("rollout did not converge: {steps:?}");
    }

    /// A settled Deployment at revision 1 with `replicas` available pods of `v1`.
    fn settled(d: Deployment) -> World {
        let mut w = World::new(d);
        let replicas = deployment_replicas(&w.d);
        w.roll("none", "v1", replicas + max_surge(&w.d), 0);
        w
    }
}

fn messages(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("{} {}", e.reason, e.message))
        .collect()
}

#[test]
fn first_sync_creates_the_replica_set_with_kubernetes_wording() {
    let mut w = World::new(deployment(3, "25%", "25%"));
    let actions = w.sync();
    let Some(Action::CreateReplicaSet(rs)) = actions.first() else {
        panic!("{actions:?}")
    };
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .cloned()
        .expect("hash label");
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("foo-{hash}").as_str())
    );
    assert_eq!(
        rs.spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .and_then(|l| l.get("pod-template-hash")),
        Some(&hash)
    );
    let owner = crate::owner_ref::get_controller_of(&rs.metadata).expect("owner");
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Deployment", Some(true), Some(true))
    );
    assert_eq!(rs_replicas(rs), 3);
    let a = &rs.metadata;
    assert_eq!(annotation(a, REVISION_ANNOTATION), Some("1"));
    assert_eq!(annotation(a, DESIRED_REPLICAS_ANNOTATION), Some("3"));
    assert_eq!(annotation(a, MAX_REPLICAS_ANNOTATION), Some("4"));
    assert_eq!(
        messages(&w.events),
        [format!(
            "ScalingReplicaSet Scaled up replica set foo-{hash} from 0 to 3"
        )]
    );
    let progressing =
        get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_PROGRESSING).expect("set");
    assert_eq!(progressing.reason.as_deref(), Some(NEW_REPLICA_SET_REASON));
    assert_eq!(
        progressing.message.clone(),
        Some(format!("Created new replica set \"foo-{hash}\""))
    );
    assert!(
        w.last_summary
            .starts_with("desired 3 (surge 1, unavailable 0), have 0"),
        "{}",
        w.last_summary
    );
    assert!(
        w.last_summary
            .contains(&format!("create new replica set foo-{hash} with 3")),
        "{}",
        w.last_summary
    );
}

#[test]
fn rolling_update_3_replicas_25_percent_steps_one_pod_at_a_time() {
    let mut w = World::settled(deployment(3, "25%", "25%"));
    let available =
        get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_AVAILABLE).expect("available");
    assert_eq!(
        available.message.as_deref(),
        Some("Deployment has minimum availability.")
    );
    w.set_image("v2");
    let steps = w.roll("v1", "v2", 4, 3);
    assert_eq!(steps, [(3, 1), (2, 1), (2, 2), (1, 2), (1, 3), (0, 3)]);
    let progressing =
        get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_PROGRESSING).expect("set");
    assert_eq!(progressing.reason.as_deref(), Some(NEW_RS_AVAILABLE_REASON));
    let new_name = w
        .rss
        .iter()
        .find(|rs| rs_replicas(rs) == 3)
        .map(|rs| rs.metadata.name.clone().unwrap_or_default())
        .expect("new");
    assert_eq!(
        progressing.message.clone(),
        Some(format!(
            "ReplicaSet \"{new_name}\" has successfully progressed."
        ))
    );
    assert_eq!(
        w.d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .map(String::as_str),
        Some("2")
    );
    let scaled_down: Vec<String> = messages(&w.events)
        .into_iter()
        .filter(|m| m.contains("Scaled down"))
        .collect();
    assert_eq!(scaled_down.len(), 3);
    assert!(scaled_down[0].ends_with("from 3 to 2"), "{scaled_down:?}");
}

#[test]
fn rolling_update_10_replicas_surge_3_unavailable_2() {
    let mut w = World::settled(deployment(10, "3", "2"));
    w.set_image("v2");
    let steps = w.roll("v1", "v2", 13, 8);
    // Sync 1 creates the new RS at 3 (13 pods) and, counting those 3 as unavailable, takes
    // old down by 13 - 8 - 3 = 2; then new grows into the freed surge, and so on.
    assert_eq!(steps, [(8, 3), (8, 5), (3, 5), (3, 10), (0, 10)]);
}

#[test]
fn a_broken_image_stalls_without_losing_availability_then_times_out() {
    let mut w = World::settled(deployment(4, "1", "1"));
    w.broken_images.push("bad".into());
    w.set_image("bad");
    let steps = w.roll("v1", "bad", 5, 3);
    // Sync 1: one surge pod and one old pod removed (4 - 1 unavailable allowed); sync 2: the
    // freed surge slot; then nothing more while the new pods stay unavailable.
    assert_eq!(steps, [(3, 1), (3, 2)]);
    assert_eq!(w.pods(), 5);
    // Time passes with no progress: first a requeue for the deadline, then the timeout.
    let last_update = get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_PROGRESSING)
        .and_then(|c| c.last_update_time.clone())
        .expect("set")
        .0;
    w.clock = (last_update.as_second() - at(0).as_second()) + 299; // the sync ticks once: now = last update + 300s
    let actions = w.sync();
    assert_eq!(
        actions,
        [Action::RequeueAfter(Duration::from_secs(300 + 1))],
        "{}",
        w.last_summary
    );
    w.clock += 301;
    w.sync();
    let progressing =
        get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_PROGRESSING).expect("set");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_deref()),
        ("False", Some(TIMED_OUT_REASON))
    );
    assert!(
        progressing
            .message
            .as_deref()
            .is_some_and(|m| m.ends_with("has timed out progressing.")),
        "{progressing:?}"
    );
    assert!(
        w.last_summary.contains("progress deadline exceeded"),
        "{}",
        w.last_summary
    );
}

#[test]
fn proportional_scaling_during_a_rollout() {
    let mut w = World::settled(deployment(10, "3", "2"));
    w.broken_images.push("bad".into());
    w.set_image("bad");
    w.roll("v1", "bad", 13, 8);
    let (old, new) = (w.replicas_of("v1"), w.replicas_of("bad"));
    assert_eq!((old, new), (8, 5));
    // Scale 10 → 20 mid-rollout: allowed 20 + 5 (surge 25%... here 3) = 23; +10 split 8:5.
    if let Some(spec) = w.d.spec.as_mut() {
        spec.replicas = Some(20);
    }
    w.sync();
    assert!(
        w.last_summary.contains("scaling event"),
        "{}",
        w.last_summary
    );
    // old: round(8 × 23/13) = 14 (+6), new: round(5 × 23/13) = 9 (+4).
    assert_eq!((w.replicas_of("v1"), w.replicas_of("bad")), (14, 9));
}

#[test]
fn recreate_scales_old_down_waits_for_pods_then_creates_new() {
    let mut w = World::settled(recreate_deployment(3));
    let old_uid = w.rss[0].metadata.uid.clone().unwrap_or_default();
    w.set_image("v2");
    let running = Pod {
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    w.pods_by_rs.insert(old_uid.clone(), vec![running.clone()]);
    let actions = w.sync();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet(_))),
        "never scale up before old pods are gone"
    );
    assert_eq!(w.replicas_of("v1"), 0);
    w.pods_follow(); // status.replicas → 0, but a pod is still terminating
    w.sync();
    assert!(
        w.last_summary.contains("waiting for old pods"),
        "{}",
        w.last_summary
    );
    assert_eq!(w.rss.len(), 1);
    w.pods_by_rs.clear();
    w.sync();
    assert_eq!(
        w.replicas_of("v2"),
        3,
        "Recreate creates the new RS at full size"
    );
    assert!(
        messages(&w.events)
            .last()
            .is_some_and(|m| m.ends_with("from 0 to 3"))
    );
}

#[test]
fn revision_history_is_trimmed_to_the_limit() {
    let mut d = deployment(2, "1", "0");
    if let Some(spec) = d.spec.as_mut() {
        spec.revision_history_limit = Some(2);
    }
    let mut w = World::settled(d);
    for image in ["v2", "v3", "v4", "v5"] {
        w.set_image(image);
        w.roll("x", image, 3, 2);
    }
    let mut revisions: Vec<i64> = w.rss.iter().map(|rs| revision(rs).unwrap_or(0)).collect();
    revisions.sort();
    assert_eq!(revisions, [3, 4, 5], "the current revision plus 2 old ones");
}

#[test]
fn rollback_reuses_the_old_replica_set_with_a_new_revision() {
    let mut w = World::settled(deployment(2, "1", "0"));
    w.set_image("v2");
    w.roll("v1", "v2", 3, 2);
    let undo = rollback::rollout_undo(&w.d, &w.rss, 0).expect("history");
    let rollback::RolloutUndo::Patch {
        revision: to, body, ..
    } = undo
    else {
        panic!("{undo:?}")
    };
    assert_eq!(to, 1);
    assert_eq!(body[0]["path"], "/spec/template");
    assert_eq!(body[0]["value"]["spec"]["containers"][0]["image"], "v1");
    assert!(
        body[0]["value"]["metadata"]["labels"]
            .get("pod-template-hash")
            .is_none()
    );
    w.set_image("v1"); // what the JSON patch does
    let before = w.rss.len();
    w.roll("v2", "v1", 3, 2);
    assert_eq!(
        w.rss.len(),
        before,
        "no new ReplicaSet: the revision-1 one is reused"
    );
    let reused = w
        .rss
        .iter()
        .find(|rs| rs_replicas(rs) == 2)
        .expect("scaled up");
    let a = &reused.metadata;
    assert_eq!(annotation(a, REVISION_ANNOTATION), Some("3"));
    assert_eq!(annotation(a, REVISION_HISTORY_ANNOTATION), Some("1"));
    // Undoing to a revision that does not exist, or of a paused Deployment, is refused.
    assert_eq!(
        rollback::rollout_undo(&w.d, &w.rss, 7),
        Err(crate::Error::RevisionNotFound(7))
    );
    let mut paused = w.d.clone();
    if let Some(spec) = paused.spec.as_mut() {
        spec.paused = Some(true);
    }
    assert_eq!(
        rollback::rollout_undo(&paused, &w.rss, 0),
        Err(crate::Error::RollbackPaused)
    );
    assert!(matches!(
        rollback::rollout_undo(&w.d, &w.rss, 3),
        Ok(rollback::RolloutUndo::Skipped(_))
    ));
}

#[test]
fn rollback_annotation_is_handled_by_the_controller() {
    let mut w = World::settled(deployment(2, "1", "0"));
    w.set_image("v2");
    w.roll("v1", "v2", 3, 2);
    annotate(&mut w.d.metadata, DEPRECATED_ROLLBACK_TO, "0");
    let actions = w.sync();
    let Some(Action::UpdateDeployment(d)) = actions
        .iter()
        .find(|a| matches!(a, Action::UpdateDeployment(_)))
    else {
        panic!("{actions:?}")
    };
    assert_eq!(
        deployment_template(d)
            .spec
            .and_then(|s| s.containers[0].image.clone())
            .as_deref(),
        Some("v1")
    );
    assert!(rollback::get_rollback_to(d).is_none(), "annotation cleared");
    assert!(
        messages(&w.events).contains(
            &"DeploymentRollback Rolled back deployment \"foo\" to revision 1".to_string()
        )
    );
}

#[test]
fn paused_deployment_creates_nothing_and_says_so() {
    let mut w = World::settled(deployment(3, "1", "0"));
    if let Some(spec) = w.d.spec.as_mut() {
        spec.paused = Some(true);
    }
    w.set_image("v2");
    let actions = w.sync();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet(_)))
    );
    let progressing =
        get_deployment_condition(w.d.status.as_ref(), DEPLOYMENT_PROGRESSING).expect("set");
    assert_eq!(
        (
            progressing.status.as_str(),
            progressing.reason.as_deref(),
            progressing.message.as_deref()
        ),
        (
            "Unknown",
            Some(PAUSED_DEPLOY_REASON),
            Some("Deployment is paused")
        )
    );
    if let Some(spec) = w.d.spec.as_mut() {
        spec.paused = Some(false);
    }
    w.sync();
    assert!(
        w.last_summary.contains("deployment is resumed"),
        "{}",
        w.last_summary
    );
    assert_eq!(w.replicas_of("v2"), 1);
}

#[test]
fn a_selector_that_selects_everything_is_refused() {
    let mut d = deployment(3, "1", "0");
    if let Some(spec) = d.spec.as_mut() {
        spec.selector = Default::default();
    }
    d.metadata.generation = Some(4);
    let mut w = World::new(d);
    let actions = w.sync();
    assert_eq!(
        messages(&w.events),
        ["SelectingAll This deployment is selecting all pods. A non-empty selector is required."]
    );
    assert!(actions.iter().any(|a| matches!(a, Action::UpdateDeploymentStatus(d) if d.status.as_ref().and_then(|s| s.observed_generation) == Some(4))));
    assert!(w.rss.is_empty());
}

/// The summaries of a run with each ReplicaSet name `foo-<hash>` shown as `foo-<image>`.
fn narrative(w: &World) -> String {
    let mut text = w.summaries.join("\n");
    for rs in &w.rss {
        let image = rs_template(rs)
            .spec
            .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
            .unwrap_or_default();
        text = text.replace(&sync::name_of(rs), &format!("foo-<{image}>"));
    }
    text
}

#[test]
fn rollout_narrative() {
    let mut w = World::settled(deployment(3, "25%", "25%"));
    w.set_image("v2");
    w.summaries.clear();
    w.roll("v1", "v2", 4, 3);
    // Each line is one sync: the state it saw → what it decided and why.
    let expected = concat!(
        "desired 3 (surge 1, unavailable 0), have 3 (3 available) in 1 RS → create new replica set foo-<v2> with 1 (revision 2); new foo-<v2> stays at 1: 4 pods already at replicas 3 + surge 1; old stay: 4 pods - min available 3 - 1 new unavailable leaves nothing to scale down\n",
        "desired 3 (surge 1, unavailable 0), have 4 (4 available) in 2 RS → new foo-<v2> stays at 1: 4 pods already at replicas 3 + surge 1; unavailable budget 1 = 4 pods - min available 3 - 0 new unavailable: old may shrink; scale down foo-<v1> 3→2\n",
        "desired 3 (surge 1, unavailable 0), have 3 (3 available) in 2 RS → surge room 1 = replicas 3 + surge 1 - 3 pods: new foo-<v2> may grow; scale up foo-<v2> 1→2\n",
        "desired 3 (surge 1, unavailable 0), have 4 (4 available) in 2 RS → new foo-<v2> stays at 2: 4 pods already at replicas 3 + surge 1; unavailable budget 1 = 4 pods - min available 3 - 0 new unavailable: old may shrink; scale down foo-<v1> 2→1\n",
        "desired 3 (surge 1, unavailable 0), have 3 (3 available) in 2 RS → surge room 1 = replicas 3 + surge 1 - 3 pods: new foo-<v2> may grow; scale up foo-<v2> 2→3\n",
        "desired 3 (surge 1, unavailable 0), have 4 (4 available) in 2 RS → unavailable budget 1 = 4 pods - min available 3 - 0 new unavailable: old may shrink; scale down foo-<v1> 1→0\n",
        "desired 3 (surge 1, unavailable 0), have 3 (3 available) in 2 RS → rollout complete: ReplicaSet \"foo-<v2>\" has successfully progressed.\n",
        "desired 3 (surge 1, unavailable 0), have 3 (3 available) in 2 RS → nothing to do",
    );
    assert_eq!(narrative(&w), expected, "\n{}\n", narrative(&w));
}
