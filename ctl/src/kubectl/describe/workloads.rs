//! Describing Deployments and ReplicaSets (kubectl describe.go's `describeDeployment` and
//! `describeReplicaSet`): replica counts, strategy, the pod template, conditions, and which
//! ReplicaSets a Deployment is rolling between.
//!
//! ```text
//!   Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable
//!   ...
//!   OldReplicaSets:  web-5d4f (1/1 replicas created)
//!   NewReplicaSet:   web-7b9c (3/3 replicas created)
//! ```

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::pod_template::{int_or_string, pod_template, selector_string};
use super::writer::{self, PrefixWriter};
use crate::kubectl::rollout::history::without_hash_label;

/// The Deployment, with the ReplicaSets it owns and its events.
pub fn deployment(
    d: &Deployment,
    replica_sets: &[ReplicaSet],
    events: &[Event],
    now: jiff::Timestamp,
) -> String {
    let mut w = PrefixWriter::new();
    let spec = d.spec.clone().unwrap_or_default();
    let status = d.status.clone().unwrap_or_default();
    header(&mut w, &d.metadata);
    w.field(0, "Selector", selector_string(Some(&spec.selector)));
    w.write(
        0,
        &format!(
            "Replicas:\t{} desired | {} updated | {} total | {} available | {} unavailable\n",
            spec.replicas.unwrap_or(1),
            status.updated_replicas.unwrap_or(0),
            status.replicas.unwrap_or(0),
            status.available_replicas.unwrap_or(0),
            status.unavailable_replicas.unwrap_or(0)
        ),
    );
    let strategy = spec.strategy.clone().unwrap_or_default();
    w.field(
        0,
        "StrategyType",
        strategy.type_.as_deref().unwrap_or("RollingUpdate"),
    );
    w.field(0, "MinReadySeconds", spec.min_ready_seconds.unwrap_or(0));
    if let Some(ru) = &strategy.rolling_update {
        w.write(
            0,
            &format!(
                "RollingUpdateStrategy:\t{} max unavailable, {} max surge\n",
                ru.max_unavailable
                    .as_ref()
                    .map_or("<unset>".to_owned(), int_or_string),
                ru.max_surge
                    .as_ref()
                    .map_or("<unset>".to_owned(), int_or_string)
            ),
        );
    }
    pod_template(&mut w, &spec.template);
    conditions(
        &mut w,
        status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_deref())),
    );
    let owned: Vec<&ReplicaSet> = replica_sets
        .iter()
        .filter(|rs| controlled_by(&rs.metadata, d.metadata.uid.as_deref()))
        .collect();
    if !owned.is_empty() {
        let current = without_hash_label(spec.template.clone());
        let new_rs = owned
            .iter()
            .filter(|rs| {
                rs.spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| without_hash_label(t.clone()) == current)
            })
            .min_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .copied();
        let new_uid = new_rs.and_then(|rs| rs.metadata.uid.clone());
        let old: Vec<&ReplicaSet> = owned
            .iter()
            .filter(|rs| rs.metadata.uid != new_uid)
            .filter(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) != 0)
            .copied()
            .collect();
        w.field(0, "OldReplicaSets", replica_set_list(&old));
        let new: Vec<&ReplicaSet> = new_rs.into_iter().collect();
        w.field(0, "NewReplicaSet", replica_set_list(&new));
    }
    writer::events(&mut w, events, now);
    w.finish()
}

/// The ReplicaSet, with the phases of the pods it controls and its events.
pub fn replica_set(
    rs: &ReplicaSet,
    pods: &[Pod],
    events: &[Event],
    now: jiff::Timestamp,
) -> String {
    let mut w = PrefixWriter::new();
    let spec = rs.spec.clone().unwrap_or_default();
    let status = rs.status.clone().unwrap_or_default();
    let meta = &rs.metadata;
    writer::name_and_namespace(&mut w, meta);
    w.field(0, "Selector", selector_string(Some(&spec.selector)));
    writer::labels(&mut w, "Labels", meta.labels.as_ref());
    writer::annotations(&mut w, "Annotations", meta.annotations.as_ref());
    if let Some(owner) = controller(meta) {
        w.write(
            0,
            &format!("Controlled By:\t{}/{}\n", owner.kind, owner.name),
        );
    }
    w.write(
        0,
        &format!(
            "Replicas:\t{} current / {} desired\n",
            status.replicas,
            spec.replicas.unwrap_or(1)
        ),
    );
    let owned = pods
        .iter()
        .filter(|p| controlled_by(&p.metadata, meta.uid.as_deref()));
    let mut counts = [0; 4];
    for pod in owned {
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Running") => counts[0] += 1,
            Some("Succeeded") => counts[2] += 1,
            Some("Failed") => counts[3] += 1,
            _ => counts[1] += 1,
        }
    }
    w.write(
        0,
        &format!(
            "Pods Status:\t{} Running / {} Waiting / {} Succeeded / {} Failed\n",
            counts[0], counts[1], counts[2], counts[3]
        ),
    );
    pod_template(&mut w, &spec.template.unwrap_or_default());
    conditions(
        &mut w,
        status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_deref())),
    );
    writer::events(&mut w, events, now);
    w.finish()
}

/// Name, namespace, creation time, labels and annotations, in the Deployment's order.
fn header(w: &mut PrefixWriter, meta: &ObjectMeta) {
    writer::name_and_namespace(w, meta);
    w.field(
        0,
        "CreationTimestamp",
        writer::time(meta.creation_timestamp.as_ref().map(|t| t.0)),
    );
    writer::labels(w, "Labels", meta.labels.as_ref());
    writer::annotations(w, "Annotations", meta.annotations.as_ref());
}

/// The `Conditions:` table (Type, Status, Reason), if there are conditions.
fn conditions<'a>(
    w: &mut PrefixWriter,
    conditions: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>)>,
) {
    let mut first = true;
    for (type_, status, reason) in conditions {
        if first {
            w.write(0, "Conditions:\n  Type\tStatus\tReason\n");
            w.write(1, "----\t------\t------\n");
            first = false;
        }
        w.write(
            1,
            &format!("{type_} \t{status}\t{}\n", reason.unwrap_or_default()),
        );
    }
}

/// The controller owner reference, if any.
pub fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

fn controlled_by(meta: &ObjectMeta, uid: Option<&str>) -> bool {
    controller(meta).is_some_and(|o| Some(o.uid.as_str()) == uid)
}

/// `web-5d4f (3/3 replicas created), ...` or `<none>` (`printReplicaSetsByLabels`).
fn replica_set_list(list: &[&ReplicaSet]) -> String {
    if list.is_empty() {
        return "<none>".to_owned();
    }
    list.iter()
        .map(|rs| {
            format!(
                "{} ({}/{} replicas created)",
                rs.metadata.name.as_deref().unwrap_or_default(),
                rs.status.as_ref().map_or(0, |s| s.replicas),
                rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_as_kubectl() {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "d1",
                         "labels": {"app": "web"},
                         "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
            "status": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
                       "conditions": [{"type": "Available", "status": "True",
                                       "reason": "MinimumReplicasAvailable"}]}
        }))
        .unwrap();
        let rs = |name: &str, image: &str, replicas: i32| -> ReplicaSet {
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": name,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": "web", "uid": "d1", "controller": true}]},
                "spec": {"replicas": replicas, "selector": {},
                         "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": name}},
                                      "spec": {"containers": [{"name": "web", "image": image}]}}},
                "status": {"replicas": replicas}
            }))
            .unwrap()
        };
        let rses = [
            rs("web-old", "nginx:1.25", 0),
            rs("web-new", "nginx:1.27", 3),
        ];
        let text = deployment(&d, &rses, &[], "2024-01-01T00:00:00Z".parse().unwrap());
        let expected_tail = "Conditions:\n  \
             Type           Status  Reason\n  \
             ----           ------  ------\n  \
             Available      True    MinimumReplicasAvailable\n\
             OldReplicaSets:  <none>\n\
             NewReplicaSet:   web-new (3/3 replicas created)\n\
             Events:          <none>\n";
        assert!(text.ends_with(expected_tail), "{text}");
        assert!(
            text.contains(
                "Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("RollingUpdateStrategy:  25% max unavailable, 25% max surge\n"),
            "{text}"
        );
    }
}
