//! The namespace controller: emptying a Terminating namespace, then letting it go.
//!
//! Mirrors `pkg/controller/namespace/deletion/namespaced_resources_deleter.go` (`Delete`,
//! `deleteAllContent`, `finalizeNamespace`, `estimateGracefulTermination`) and
//! `namespace_condition_updater.go`.
//!
//! ```text
//!   kubectl delete ns dev ─▶ API server: deletionTimestamp set, spec.finalizers [kubernetes]
//!   sync_namespace:
//!     phase := Terminating
//!     every object still in it ─▶ DELETE (Background)
//!     some are still there (finalizers, graceful pods) ─▶ conditions
//!         NamespaceContentRemaining / NamespaceFinalizersRemaining, requeue
//!     nothing left ─▶ PUT /finalize without "kubernetes" ─▶ API server removes the namespace
//! ```
//!
//! Unlike Kubernetes, which sends a `DeleteCollection` per resource and then lists what is
//! left, this decides from one snapshot: objects without a `deletionTimestamp` get a DELETE
//! each, and objects that already have one (held by finalizers or a grace period) are what
//! "remains". Discovery failures (`NamespaceDeletionDiscoveryFailure` & co.) cannot happen
//! here, so those conditions are always in their "ok" form.

pub mod controller;

use std::collections::BTreeMap;
use std::time::Duration;

use apimachinery::ObjectRef;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::action::{Action, PropagationPolicy};

/// The finalizer the namespace controller owns (`v1.FinalizerKubernetes`).
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// `finalizerEstimateSeconds`: how long to wait for objects held by finalizers.
pub const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

/// The five deletion conditions, with the reason and message of their "all is well" form
/// (`okReasons`, `okMessages`).
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// One object still in the namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct RemainingObject {
    /// Who it is.
    pub identity: ObjectRef,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// It already has a `deletionTimestamp` (asked to go, still here).
    pub being_deleted: bool,
    /// For pods: `deletionGracePeriodSeconds` or `spec.terminationGracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
}

/// The objects of one resource left in the namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceContent {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// What is left.
    pub objects: Vec<RemainingObject>,
}

/// The outcome of one namespace sync.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSync {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
}

/// `namespacedResourcesDeleter.Delete` for one namespace, given the namespaced objects of
/// every deletable resource that are still in it.
pub fn sync_namespace(
    ns: &Namespace,
    content: &[ResourceContent],
    now: Timestamp,
) -> NamespaceSync {
    let mut actions = Vec::new();
    if ns.metadata.deletion_timestamp.is_none() {
        return NamespaceSync {
            actions,
            summary: "not being deleted".into(),
        };
    }
    let mut ns = ns.clone();
    let status = ns.status.get_or_insert_with(Default::default);
    if status.phase.as_deref() != Some("Terminating") {
        status.phase = Some("Terminating".into());
        actions.push(Action::UpdateNamespaceStatus(Box::new(ns.clone())));
    }
    let finalizers = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    if finalizers.is_empty() {
        return NamespaceSync {
            actions,
            summary: "already finalized".into(),
        };
    }

    // deleteAllContent: ask everything to go; what was asked before and is still here remains.
    let mut remaining_by_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut remaining_by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    let mut estimate: i64 = 0;
    let mut deleted = 0;
    let mut total = 0;
    for rc in content {
        for obj in &rc.objects {
            total += 1;
            if !obj.being_deleted {
                deleted += 1;
                actions.push(Action::Delete {
                    target: obj.identity.clone(),
                    propagation: Some(PropagationPolicy::Background),
                });
                continue;
            }
            *remaining_by_resource
                .entry(format!("{}.{}", rc.resource, rc.group))
                .or_default() += 1;
            for f in &obj.finalizers {
                *remaining_by_finalizer.entry(f.clone()).or_default() += 1;
            }
            estimate = estimate.max(obj.grace_period_seconds.unwrap_or(0));
            if !obj.finalizers.is_empty() {
                estimate = estimate.max(FINALIZER_ESTIMATE_SECONDS);
            }
        }
    }

    // ProcessContentTotals: one True condition per kind of leftover, sorted for stable updates.
    let leftovers = [
        (
            "NamespaceContentRemaining",
            "SomeResourcesRemain",
            "Some resources are remaining",
            "has",
            &remaining_by_resource,
        ),
        (
            "NamespaceFinalizersRemaining",
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining",
            "in",
            &remaining_by_finalizer,
        ),
    ];
    let mut failing: Vec<NamespaceCondition> = Vec::new();
    for (type_, reason, prefix, verb, counts) in leftovers {
        if counts.is_empty() {
            continue;
        }
        let list: Vec<String> = counts
            .iter()
            .map(|(what, n)| format!("{what} {verb} {n} resource instances"))
            .collect();
        failing.push(condition(
            type_,
            reason,
            format!("{prefix}: {}", list.join(", ")),
            now,
        ));
    }
    let status = ns.status.get_or_insert_with(Default::default);
    if update_conditions(status, &failing, now) {
        actions.push(Action::UpdateNamespaceStatus(Box::new(ns.clone())));
    }

    if total > 0 {
        // ResourcesRemainingError: the namespace controller requeues after estimate/2 + 1 s.
        let after = Duration::from_secs((estimate / 2 + 1) as u64);
        actions.push(Action::RequeueAfter(after));
        let summary = format!(
            "{total} objects remain: delete {deleted}, waiting on {}; check again in {}s",
            total - deleted,
            after.as_secs()
        );
        return NamespaceSync { actions, summary };
    }
    if let Some(spec) = ns.spec.as_mut() {
        spec.finalizers = Some(
            finalizers
                .into_iter()
                .filter(|f| f != FINALIZER_KUBERNETES)
                .collect(),
        );
    }
    actions.push(Action::FinalizeNamespace(Box::new(ns)));
    NamespaceSync {
        actions,
        summary: "empty: remove the kubernetes finalizer".into(),
    }
}

fn condition(type_: &str, reason: &str, message: String, now: Timestamp) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(Time(now)),
    }
}

/// `namespaceConditionUpdater.Update`: every deletion condition present, `True` as given in
/// `failing` or else `False` with its ok reason; true if anything changed.
fn update_conditions(
    status: &mut NamespaceStatus,
    failing: &[NamespaceCondition],
    now: Timestamp,
) -> bool {
    let mut changed = false;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for (type_, ok_reason, ok_message) in CONDITIONS {
        let wanted = failing
            .iter()
            .find(|c| c.type_ == type_)
            .cloned()
            .unwrap_or_else(|| NamespaceCondition {
                type_: type_.into(),
                status: "False".into(),
                reason: Some(ok_reason.into()),
                message: Some(ok_message.into()),
                last_transition_time: Some(Time(now)),
            });
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conditions.push(wanted);
                changed = true;
            }
            Some(old)
                if old.status != wanted.status
                    || old.reason != wanted.reason
                    || old.message != wanted.message =>
            {
                *old = wanted;
                changed = true;
            }
            Some(_) => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NamespaceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    use crate::testing::at;

    fn terminating() -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("dev".into()),
                deletion_timestamp: Some(Time(at(0))),
                ..Default::default()
            },
            spec: Some(NamespaceSpec {
                finalizers: Some(vec![FINALIZER_KUBERNETES.into()]),
            }),
            status: Some(NamespaceStatus {
                phase: Some("Active".into()),
                ..Default::default()
            }),
        }
    }

    fn obj(
        resource: &str,
        name: &str,
        being_deleted: bool,
        finalizers: &[&str],
        grace: Option<i64>,
    ) -> RemainingObject {
        RemainingObject {
            identity: ObjectRef {
                api_version: "v1".into(),
                kind: resource.into(),
                namespace: Some("dev".into()),
                name: name.into(),
                uid: name.into(),
            },
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
            being_deleted,
            grace_period_seconds: grace,
        }
    }

    fn content(resource: &str, group: &str, objects: Vec<RemainingObject>) -> ResourceContent {
        ResourceContent {
            group: group.into(),
            resource: resource.into(),
            objects,
        }
    }

    fn apply(ns: &mut Namespace, actions: &[Action]) {
        for a in actions {
            if let Action::UpdateNamespaceStatus(n) | Action::FinalizeNamespace(n) = a {
                *ns = (**n).clone();
            }
        }
    }

    #[test]
    fn deletion_steps_until_the_finalizer_goes() {
        let mut ns = terminating();
        // Step 1: phase Terminating, everything asked to go.
        let step1 = sync_namespace(
            &ns,
            &[
                content("pods", "", vec![obj("Pod", "web-1", false, &[], Some(30))]),
                content(
                    "configmaps",
                    "",
                    vec![obj("ConfigMap", "cfg", false, &[], None)],
                ),
            ],
            at(1),
        );
        let deletes = step1
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Delete { .. }))
            .count();
        assert_eq!(deletes, 2);
        apply(&mut ns, &step1.actions);
        assert_eq!(
            ns.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Terminating")
        );
        // Step 2: the pod is terminating gracefully and a CR is held by a finalizer.
        let step2 = sync_namespace(
            &ns,
            &[
                content("pods", "", vec![obj("Pod", "web-1", true, &[], Some(30))]),
                content(
                    "widgets",
                    "example.com",
                    vec![obj("Widget", "w", true, &["example.com/cleanup"], None)],
                ),
            ],
            at(2),
        );
        apply(&mut ns, &step2.actions);
        let conditions = ns
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let get = |t: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == t)
                .and_then(|c| c.message.clone())
                .unwrap_or_default()
        };
        assert_eq!(
            get("NamespaceContentRemaining"),
            "Some resources are remaining: pods. has 1 resource instances, widgets.example.com has 1 resource instances"
        );
        assert_eq!(
            get("NamespaceFinalizersRemaining"),
            "Some content in the namespace has finalizers remaining: example.com/cleanup in 1 resource instances"
        );
        assert_eq!(
            get("NamespaceDeletionDiscoveryFailure"),
            "All resources successfully discovered"
        );
        assert_eq!(
            step2.actions.last(),
            Some(&Action::RequeueAfter(Duration::from_secs(16))),
            "max(30 grace, 15 finalizers) / 2 + 1"
        );
        // Step 3: empty → conditions flip to ok, the kubernetes finalizer is removed.
        let step3 = sync_namespace(&ns, &[], at(3));
        assert!(matches!(
            step3.actions.first(),
            Some(Action::UpdateNamespaceStatus(_))
        ));
        let Some(Action::FinalizeNamespace(done)) = step3.actions.last() else {
            panic!("{:?}", step3.actions)
        };
        assert_eq!(
            done.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec![])
        );
        apply(&mut ns, &step3.actions);
        assert_eq!(sync_namespace(&ns, &[], at(4)).summary, "already finalized");
    }

    #[test]
    fn an_active_namespace_is_left_alone() {
        let mut ns = terminating();
        ns.metadata.deletion_timestamp = None;
        assert_eq!(
            sync_namespace(
                &ns,
                &[content("pods", "", vec![obj("Pod", "p", false, &[], None)])],
                at(0)
            )
            .actions,
            []
        );
    }
}
