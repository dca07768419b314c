//! A delete's whole story in one trace, and retries folded in `miniplane trace`:
//!
//! * `kubectl delete deploy` (background and foreground propagation) gives one trace holding
//!   the delete, the garbage collector's deletes of the ReplicaSet and of its pods, each with
//!   the reason Kubernetes' garbage collector logs, and the kubelets stopping the pods;
//! * after a scale and a `rollout undo`, `miniplane trace` folds runs of retries into one line
//!   each, and still names every distinct step that `--no-fold` prints.

use std::collections::BTreeSet;

use trace::{Span, Tree};

use super::{Cluster, assert_causal, miniplane_trace, named, trace_of};

/// The garbage collector's syncs of `kind` objects of `deployment` in `spans`.
fn gc_syncs<'a>(spans: &'a [Span], kind: &str, deployment: &str) -> Vec<&'a Span> {
    named(spans, "sync garbagecollector")
        .into_iter()
        .filter(|s| {
            s.summary
                .starts_with(&format!("{kind} default/{deployment}-"))
        })
        .collect()
}

/// Kubelet syncs that stopped a pod's containers and deleted it.
fn kubelet_deletes(spans: &[Span]) -> usize {
    named(spans, "kubelet sync pod")
        .iter()
        .filter(|s| s.summary.contains("containers stopped: delete the pod"))
        .count()
}

#[test]
fn a_delete_holds_the_garbage_collectors_cascade_and_the_kubelets_stopping_the_pods() {
    let c = Cluster::start(true);
    for (name, cascade) in [("bg", "background"), ("fg", "foreground")] {
        c.apply(name, 2, "nginx");
        c.rollout_status(name);
        c.s.kubectl_ok(&[
            "delete",
            "deploy",
            name,
            &format!("--cascade={cascade}"),
            "--wait=false",
        ]);
        let spans = trace_of(
            &c.s,
            &format!("deploy/{name}"),
            "the delete's trace down to the pods' removal",
            |spans| {
                gc_syncs(spans, "Pod", name).len() >= 2
                    && kubelet_deletes(spans) >= 2
                    && (cascade == "background"
                        || named(spans, "sync garbagecollector")
                            .iter()
                            .any(|s| s.summary.contains("remove DeleteDependents finalizer")))
            },
        );
        assert_causal(&spans);
        let root = Tree::build(&spans).roots()[0].clone();
        assert_eq!(
            (root.name.as_str(), root.summary.starts_with(&format!("default/{name}"))),
            ("delete deployments", true),
            "{root:?}"
        );
        // The ReplicaSet: its owner gone (background) or deleting its dependents (foreground).
        let rs = gc_syncs(&spans, "ReplicaSet", name);
        let why = match cascade {
            "background" => format!("item's owner is not found (Deployment {name})"),
            _ => format!(
                "at least one owner of item has FinalizerDeletingDependents (Deployment {name})"
            ),
        };
        assert!(
            rs.iter().any(|s| s.summary.contains(&why)
                && s.attribute(trace::attr::REASON).is_some_and(|r| r.contains(&why))),
            "{cascade}: {:#?}",
            rs.iter().map(|s| &s.summary).collect::<Vec<_>>()
        );
        assert!(!named(&spans, "delete replicasets").is_empty());
        // Its pods: their owner gone or being deleted, each deleted by the collector, then
        // stopped by its kubelet.
        let pods = gc_syncs(&spans, "Pod", name);
        let pod_why = match cascade {
            "background" => "item's owner is not found (ReplicaSet ",
            _ => "adding dependent to attemptToDelete",
        };
        let mut pods_deleted = BTreeSet::new();
        for s in named(&spans, "delete pods") {
            pods_deleted.insert(s.attribute(trace::attr::NAME));
        }
        assert!(pods_deleted.len() >= 2, "{pods_deleted:?}");
        assert!(
            pods.iter().all(|s| s.summary.contains("Deleting item"))
                || cascade == "foreground",
            "{:#?}",
            pods.iter().map(|s| &s.summary).collect::<Vec<_>>()
        );
        if cascade == "background" {
            assert!(
                pods.iter().all(|s| s.summary.contains(pod_why)),
                "{:#?}",
                pods.iter().map(|s| &s.summary).collect::<Vec<_>>()
            );
        } else {
            assert!(
                named(&spans, "sync garbagecollector")
                    .iter()
                    .any(|s| s.summary.contains(pod_why)),
                "foreground: the ReplicaSet's pods go first"
            );
        }
        assert!(kubelet_deletes(&spans) >= 2);
        // The same story in the terminal.
        let text = miniplane_trace(&c.s, &[&format!("deploy/{name}")]);
        for needle in [
            "delete deployments: default/",
            "sync garbagecollector: ReplicaSet",
            "delete replicasets: default/",
            "sync garbagecollector: Pod",
            "containers stopped: delete the pod",
        ] {
            assert!(text.contains(needle), "{cascade}: no {needle:?} in\n{text}");
        }
    }
}
