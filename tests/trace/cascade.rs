//! A delete's whole story in one trace, and retries folded in `miniplane trace`:
//!
//! * `kubectl delete deploy` (background and foreground propagation) gives one trace holding
//!   the delete, the garbage collector's deletes of the ReplicaSet and of its pods, each with
//!   the reason Kubernetes' garbage collector logs, and the kubelets stopping the pods;
//! * after a scale and a `rollout undo`, `miniplane trace` folds runs of retries into one line
//!   each, and still names every distinct step that `--no-fold` prints.

use std::collections::BTreeSet;

use trace::{Span, Tree};

use super::{Cluster, assert_causal, kubelet_syncs_saying, miniplane_trace, named, trace_of};

/// The garbage collector's syncs of `kind` objects named after `deployment` in `spans`.
fn gc_syncs<'a>(spans: &'a [Span], kind: &str, deployment: &str) -> Vec<&'a Span> {
    named(spans, "sync garbagecollector")
        .into_iter()
        .filter(|s| {
            s.summary
                .starts_with(&format!("{kind} default/{deployment}"))
        })
        .collect()
}

/// Kubelet syncs that stopped a pod's containers and deleted it.
fn kubelet_deletes(spans: &[Span]) -> usize {
    kubelet_syncs_saying(spans, "containers stopped: delete the pod")
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
                kubelet_deletes(spans) >= 2
                    && named(spans, "delete pods").len() >= 4
                    && (cascade == "background"
                        || gc_syncs(spans, "Deployment", name)
                            .iter()
                            .any(|s| s.summary.contains("remove DeleteDependents finalizer")))
            },
        );
        assert_causal(&spans);
        let root = Tree::build(&spans).roots()[0].clone();
        assert_eq!(
            (
                root.name.as_str(),
                root.summary.starts_with(&format!("default/{name} "))
            ),
            ("delete deployments", true),
            "{root:?}"
        );
        let summaries =
            |syncs: &[&Span]| syncs.iter().map(|s| s.summary.clone()).collect::<Vec<_>>();
        // The ReplicaSet: its owner gone (background) or deleting its dependents (foreground),
        // the reason also as the span's attribute.
        let rs: Vec<&Span> = named(&spans, "sync garbagecollector")
            .into_iter()
            .filter(|s| {
                s.summary
                    .contains(&format!("delete ReplicaSet default/{name}-"))
            })
            .collect();
        let why = match cascade {
            "background" => format!("item's owner is not found (Deployment {name}): Deleting item"),
            _ => format!(
                "at least one owner of item has FinalizerDeletingDependents (Deployment {name})"
            ),
        };
        assert!(
            rs.iter().any(|s| s.summary.contains(&why)
                && s.summary
                    .contains(&format!("delete ReplicaSet default/{name}-"))
                && s.attribute(trace::attr::REASON)
                    .is_some_and(|r| r.contains(&why))),
            "{cascade}: {:#?}",
            summaries(&rs)
        );
        assert!(!named(&spans, "delete replicasets").is_empty());
        // Its pods: deleted by the collector (their owner gone; or, in the foreground, as
        // the dependents the ReplicaSet waits for), then stopped and removed by their kubelets.
        let pod_deletes = match cascade {
            "background" => gc_syncs(&spans, "Pod", name)
                .into_iter()
                .filter(|s| s.summary.contains("item's owner is not found (ReplicaSet "))
                .count(),
            _ => gc_syncs(&spans, "ReplicaSet", name)
                .iter()
                .filter(|s| {
                    s.summary.contains("adding dependent to attemptToDelete, because its owner is deletingDependents")
                })
                .map(|s| s.summary.matches("delete Pod ").count())
                .sum(),
        };
        assert!(
            pod_deletes >= 2,
            "{cascade}: {:#?}",
            summaries(&named(&spans, "sync garbagecollector"))
        );
        assert!(kubelet_deletes(&spans) >= 2);
        if cascade == "foreground" {
            // Last, the Deployment's finalizer goes, and with it the Deployment.
            assert!(gc_syncs(&spans, "Deployment", name).iter().any(|s| {
                s.summary
                    .contains("remove DeleteDependents finalizer for item")
            }));
        }
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

/// `miniplane <args> --master URL`, which must succeed.
fn miniplane(c: &Cluster, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(args)
        .args(["--master", &c.s.url()])
        .output()
        .expect("run miniplane");
    assert!(
        out.status.success(),
        "miniplane {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The distinct steps of a printed tree: span name and component, per line.
fn steps(text: &str) -> BTreeSet<String> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let rest = l.get(20..)?.trim_start();
            let (component, what) = rest.split_once("  ")?;
            let what = what.trim_start_matches([' ', '│', '├', '└', '─']);
            let name = what.split([':', '×']).next()?.trim();
            Some(format!("{component} {name}"))
        })
        .collect()
}

#[test]
fn a_scale_and_an_undo_print_their_retries_folded_and_every_step_still_named() {
    let c = Cluster::start(true);
    c.apply("web", 3, "nginx");
    c.rollout_status("web");
    c.s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.27"]);
    c.rollout_status("web");
    // Half of the controllers' ReplicaSet writes answered 409 Conflict: each is retried.
    let fault = miniplane(
        &c,
        &[
            "fault",
            "fail-writes",
            "--code",
            "409",
            "--fraction",
            "0.5",
            "--resource",
            "replicasets",
            "--component",
            "kube-controller-manager",
        ],
    );
    c.s.kubectl_ok(&["scale", "deploy/web", "--replicas=6"]);
    c.s.kubectl_ok(&["rollout", "undo", "deploy/web"]);
    c.rollout_status("web");
    // `fault/NAME injected: … (undo: miniplane fault clear NAME)`
    let name = fault
        .trim()
        .rsplit(' ')
        .next()
        .map(|n| n.trim_end_matches(')'))
        .expect("the fault's name");
    miniplane(&c, &["fault", "clear", name]);
    let spans = trace_of(&c.s, "deploy/web", "the undo's trace", |spans| {
        !named(spans, "rollout complete").is_empty()
    });
    let id = spans[0].trace_id.to_string();
    // Spans recorded after "rollout complete" (Events, status writes) can still arrive:
    // compare the two views only when both were printed from the same spans.
    let span_count = |out: &str| -> Option<usize> {
        let header = out.lines().next()?;
        let spans = header.split(" spans").next()?;
        spans.rsplit(' ').next()?.parse().ok()
    };
    let (folded, all) = (0..40)
        .find_map(|_| {
            let folded = miniplane_trace(&c.s, &["--id", &id]);
            let all = miniplane_trace(&c.s, &["--id", &id, "--no-fold"]);
            let again = miniplane_trace(&c.s, &["--id", &id]);
            let same = span_count(&folded).is_some()
                && span_count(&folded) == span_count(&all)
                && span_count(&all) == span_count(&again);
            if same {
                Some((folded, all))
            } else {
                std::thread::sleep(std::time::Duration::from_millis(500));
                None
            }
        })
        .expect("the trace stops growing within 20 s");
    // The header says how many spans the folds hide; each fold is one line.
    let header = folded.lines().next().unwrap_or_default();
    let hidden: usize = header
        .split(" in folded retries")
        .next()
        .and_then(|h| h.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no folded count in {header:?}"));
    let folds = folded
        .lines()
        .filter(|l| l.contains(" retries (") || l.contains(" retry ("))
        .count();
    assert!(folds > 0 && hidden > folds, "{folded}");
    assert!(
        folded.contains("409 Conflict)"),
        "the folds say why: {folded}"
    );
    assert_eq!(
        all.lines().count() - folded.lines().count(),
        hidden - folds,
        "every hidden span is a line less, every fold a line more"
    );
    eprintln!(
        "scale + undo: {} lines folded, {} unfolded",
        folded.lines().count(),
        all.lines().count()
    );
    assert!(
        folded.lines().count() * 10 < all.lines().count() * 9,
        "{} lines folded, {} unfolded",
        folded.lines().count(),
        all.lines().count()
    );
    assert!(!all.contains('×'), "--no-fold folds nothing");
    // Every distinct step of the unfolded tree is still named, but the GETs a retried write
    // made of its object (client-go's RetryOnConflict), which are part of the retry.
    let missing: Vec<String> = steps(&all)
        .difference(&steps(&folded))
        .filter(|s| !s.contains(" GET ") && !s.contains(" get "))
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "steps lost in folding: {missing:?}\n{folded}"
    );
    // `--all` is the same as `--no-fold`.
    assert_eq!(
        miniplane_trace(&c.s, &["--id", &id, "--all"])
            .lines()
            .count(),
        all.lines().count()
    );
}
