//! Tests of server-side apply and managed-fields bookkeeping on Deployments.

use super::*;
use crate::gvk::GroupVersionKind;
use crate::patch::{ApplyConflict, conflict_message};

fn gvk() -> GroupVersionKind {
    GroupVersionKind::new("apps", "v1", "Deployment")
}

fn at(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_790_000_000 + seconds).expect("valid time")
}

fn ssa(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    t: i64,
) -> Result<Value, PatchError> {
    let request = ApplyRequest {
        schema: Schema::builtin(&gvk()),
        manager,
        subresource: None,
        force,
        now: at(t),
    };
    apply(live, applied, request)
}

/// The body of `kubectl apply --server-side -f deploy.yaml` (appendix C, `10-ssa-fresh`).
fn config(image: &str, replicas: i64) -> Value {
    json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"nginx"},"name":"nginx","namespace":"default"},
        "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":"nginx"}},"template":{"metadata":{"labels":{"app":"nginx"}},
        "spec":{"containers":[{"image":image,"name":"nginx","ports":[{"containerPort":80}]}]}}}})
}

fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
}

/// `kubectl apply --server-side` of [`config`] onto `live`, a minute after creation.
fn kubectl_apply(
    live: &Value,
    image: &str,
    replicas: i64,
    force: bool,
) -> Result<Value, PatchError> {
    ssa(Some(live), &config(image, replicas), "kubectl", force, 60)
}

fn created() -> Value {
    ssa(None, &config("nginx:1.14.2", 3), "kubectl", false, 0).expect("created")
}

#[test]
fn create_records_an_apply_entry() {
    let obj = created();
    assert_eq!(obj["spec"]["replicas"], 3);
    let e = entry(&obj, "kubectl").expect("entry");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["time"], "2026-09-21T14:13:20Z");
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        })
    );
}

#[test]
fn reapplying_unchanged_changes_nothing() {
    let live = created();
    let again = kubectl_apply(&live, "nginx:1.14.2", 3, false).expect("applies");
    assert_eq!(again, live, "same object, same managedFields time");
}

#[test]
fn applying_a_changed_owned_field() {
    let live = created();
    let obj = kubectl_apply(&live, "nginx:1.16.1", 3, false).expect("applies");
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.16.1"
    );
    assert_eq!(
        entry(&obj, "kubectl").expect("entry")["time"],
        "2026-09-21T14:14:20Z"
    );
}

/// An object created by `kubectl apply` (client-side): `kubectl-client-side-apply` owns it all.
fn client_side_applied() -> Value {
    let mut obj = config("nginx:1.14.2", 3);
    update_managed(None, &mut obj, "kubectl-client-side-apply", None, 0);
    obj
}

fn update_managed(old: Option<&Value>, new: &mut Value, manager: &str, sub: Option<&str>, t: i64) {
    update(old, new, Schema::builtin(&gvk()), manager, sub, at(t));
}

#[test]
fn conflict_with_another_manager() {
    let live = client_side_applied();
    let err = kubectl_apply(&live, "nginx:1.14.2", 5, false).expect_err("conflicts");
    let want = vec![ApplyConflict {
        manager: "kubectl-client-side-apply".into(),
        field: ".spec.replicas".into(),
        printed_manager: "\"kubectl-client-side-apply\" using apps/v1".into(),
    }];
    assert_eq!(err, PatchError::Conflicts(want.clone()));
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        want[0].cause_message(),
        "conflict with \"kubectl-client-side-apply\" using apps/v1"
    );
}

#[test]
fn force_takes_ownership() {
    let live = client_side_applied();
    let obj = kubectl_apply(&live, "nginx:1.14.2", 5, true).expect("forced");
    assert_eq!(obj["spec"]["replicas"], 5);
    let csa = &entry(&obj, "kubectl-client-side-apply").expect("still owns the rest")["fieldsV1"];
    assert!(csa["f:spec"].get("f:replicas").is_none());
    assert!(
        csa["f:spec"].get("f:selector").is_some(),
        "shared fields stay shared"
    );
    assert!(
        entry(&obj, "kubectl").expect("applier")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_some()
    );
}

/// A config setting only `metadata.labels`.
fn labels_only(labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "labels": labels}})
}

/// The full config plus label `tier: web`.
fn config_with_tier() -> Value {
    let mut with_tier = config("nginx:1.14.2", 3);
    with_tier["metadata"]["labels"]["tier"] = json!("web");
    with_tier
}

#[test]
fn fields_the_applier_stops_setting_are_removed() {
    let live = ssa(None, &config_with_tier(), "kubectl", false, 0).expect("created");
    let obj = kubectl_apply(&live, "nginx:1.14.2", 3, false).expect("applies");
    assert_eq!(obj["metadata"]["labels"], json!({"app": "nginx"}));
    let labels = &entry(&obj, "kubectl").expect("entry")["fieldsV1"]["f:metadata"]["f:labels"];
    assert!(labels.get("f:tier").is_none());
}

#[test]
fn shared_fields_survive_one_applier_leaving() {
    let live = ssa(None, &config_with_tier(), "a", false, 0).expect("created");
    let live = ssa(
        Some(&live),
        &labels_only(json!({"tier": "web"})),
        "b",
        false,
        10,
    )
    .expect("same value: no conflict");
    let obj = ssa(Some(&live), &config("nginx:1.14.2", 3), "a", false, 20).expect("a drops tier");
    assert_eq!(obj["metadata"]["labels"]["tier"], "web", "b still owns it");
    let b = ssa(
        Some(&obj),
        &labels_only(json!({"tier": "db"})),
        "b",
        false,
        30,
    )
    .expect("b alone owns tier now");
    assert_eq!(b["metadata"]["labels"]["tier"], "db");
}

#[test]
fn two_conflicts_are_grouped_by_manager() {
    let conflicts = vec![
        ApplyConflict {
            manager: "b".into(),
            field: ".spec.x".into(),
            printed_manager: "\"b\"".into(),
        },
        ApplyConflict {
            manager: "a".into(),
            field: ".data.k".into(),
            printed_manager: "\"a\" using v1".into(),
        },
    ];
    assert_eq!(
        conflict_message(&conflicts),
        "Apply failed with 2 conflicts: conflicts with \"a\" using v1:\n- .data.k\nconflicts with \"b\":\n- .spec.x"
    );
}

#[test]
fn scale_write_is_owned_through_the_subresource() {
    let live = created();
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    scaled["metadata"]["resourceVersion"] = json!("7");
    update_managed(Some(&live), &mut scaled, "kubectl", Some("scale"), 60);
    let entries = scaled["metadata"]["managedFields"]
        .as_array()
        .expect("entries");
    let scale = entries
        .iter()
        .find(|e| e["operation"] == "Update")
        .expect("update entry");
    assert_eq!(scale["subresource"], "scale");
    assert_eq!(scale["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let applier = entries
        .iter()
        .find(|e| e["operation"] == "Apply")
        .expect("apply entry");
    assert!(
        applier["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "the applier lost replicas"
    );
    assert_eq!(entries[0]["operation"], "Apply", "Apply entries sort first");
}

#[test]
fn status_write_owns_only_status() {
    let live = created();
    let mut new = live.clone();
    new["status"] = json!({"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]});
    new["spec"]["paused"] = json!(true);
    update_managed(
        Some(&live),
        &mut new,
        "kube-controller-manager",
        Some("status"),
        60,
    );
    let e = entry(&new, "kube-controller-manager").expect("entry");
    assert_eq!(e["subresource"], "status");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:replicas": {}}})
    );
}

#[test]
fn main_resource_update_skips_server_fields_and_noops() {
    let live = client_side_applied();
    let e = entry(&live, "kubectl-client-side-apply").expect("entry");
    assert!(e["fieldsV1"]["f:metadata"].get("f:name").is_none());
    assert!(e["fieldsV1"].get("f:kind").is_none());
    let mut same = live.clone();
    update_managed(Some(&live), &mut same, "kubectl-edit", None, 60);
    assert_eq!(same, live, "a no-op write changes no managed fields");
}

#[test]
fn reordering_a_keyed_list_changes_no_field() {
    // Two containers (a list keyed by name): swapping them changes no field, so (as
    // `Comparison.IsSame` in structured-merge-diff) the write leaves ownership and the
    // writer's timestamp as they were, though the object differs.
    let mut live = config("nginx:1.14.2", 3);
    live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar", "image": "busybox"}));
    update_managed(None, &mut live, "kubectl-edit", None, 0);
    let mut reordered = live.clone();
    reordered["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .reverse();
    update_managed(Some(&live), &mut reordered, "kubectl-edit", None, 60);
    assert_eq!(
        reordered["metadata"]["managedFields"], live["metadata"]["managedFields"],
        "no timestamp bump for a write that changes no field"
    );
    assert_ne!(reordered, live, "the order itself is written");
    // A write that does change a field still bumps it.
    let mut changed = reordered.clone();
    changed["spec"]["replicas"] = json!(4);
    update_managed(Some(&reordered), &mut changed, "kubectl-edit", None, 120);
    let time = |obj: &Value| entry(obj, "kubectl-edit").expect("entry")["time"].clone();
    assert_ne!(time(&changed), time(&reordered));
}

#[test]
fn custom_resources_have_atomic_lists() {
    let crd = GroupVersionKind::new("stable.example.com", "v1", "CronTab");
    let obj = crate::patch::server_side_apply(
        None,
        &json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"},"spec":{"items":[{"a":1}],"cron":"* * * * *"}}),
        &crd,
        "kubectl",
        false,
        at(0),
    )
    .expect("applies");
    assert_eq!(
        obj["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {"f:cron": {}, "f:items": {}}})
    );
}

#[test]
fn malformed_apply_bodies_are_bad_requests() {
    let missing_key = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx"},
        "spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}});
    assert!(
        matches!(ssa(None, &missing_key, "kubectl", false, 0), Err(PatchError::BadRequest(m)) if m.starts_with("failed to create typed patch object (<unknown>/nginx; apps/v1, Kind=Deployment): .spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\""))
    );
    let with_managed = json!({"metadata":{"managedFields":[{}]}});
    assert!(matches!(
        ssa(None, &with_managed, "kubectl", false, 0),
        Err(PatchError::BadRequest(_))
    ));
}

/// `kubectl apply` (client-side) of `image`: the config carries its own last-applied
/// annotation, and `kubectl-client-side-apply` records the write.
fn client_side_apply(live: Option<&Value>, image: &str) -> Value {
    let mut applied = config(image, 3);
    let mut last = applied.clone();
    last["metadata"]["annotations"] = json!({});
    applied["metadata"]["annotations"] = json!({ LAST_APPLIED: format!("{last}\n") });
    let mut new = match live {
        Some(live) => crate::patch::strategic_merge_patch(live, &applied, &gvk()).expect("smp"),
        None => applied,
    };
    update_managed(live, &mut new, "kubectl-client-side-apply", None, 0);
    new
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Appendix C `06-ssa-existing-csa`: `kubectl apply --server-side` after client-side applies.
#[test]
fn server_side_apply_after_client_side_apply_takes_over_own_fields() {
    let live = client_side_apply(None, "nginx:1.14.2");
    let live = client_side_apply(Some(&live), "nginx:1.16.1");
    let obj = kubectl_apply(&live, "nginx:1.14.2", 3, false).expect("no conflict with own values");
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.14.2"
    );
    let annotation = obj["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap_or_default();
    assert!(
        annotation.contains("nginx:1.14.2") && annotation.ends_with('\n'),
        "{annotation}"
    );
    let csa = &entry(&obj, "kubectl-client-side-apply").expect("csa")["fieldsV1"];
    let nginx = &csa["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"];
    assert!(
        nginx.get("f:image").is_none(),
        "kubectl took the image over"
    );
}

#[test]
fn fields_changed_since_the_last_client_side_apply_still_conflict() {
    let live = client_side_apply(None, "nginx:1.14.2");
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    update_managed(Some(&live), &mut scaled, "kubectl", Some("scale"), 30);
    let err = kubectl_apply(&scaled, "nginx:1.14.2", 3, false).expect_err("replicas moved on");
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas"
    );
}

#[test]
fn applied_status_is_ignored_on_the_main_resource() {
    let live = created();
    let mut status_written = live.clone();
    status_written["status"] = json!({"replicas": 3});
    update_managed(
        Some(&live),
        &mut status_written,
        "kube-controller-manager",
        Some("status"),
        30,
    );
    let mut with_status = config("nginx:1.14.2", 3);
    with_status["status"] = json!({"replicas": 0});
    let obj =
        ssa(Some(&status_written), &with_status, "kubectl", false, 60).expect("no status conflict");
    assert_eq!(obj["status"]["replicas"], 3);
}

#[test]
fn update_owns_empty_objects_and_map_entries() {
    let mut obj = config("nginx:1.14.2", 3);
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({});
    update_managed(None, &mut obj, "kubectl-create", None, 0);
    let fields = &entry(&obj, "kubectl-create").expect("entry")["fieldsV1"];
    let nginx = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"];
    assert_eq!(nginx["f:resources"], json!({}));
    assert_eq!(fields["f:metadata"]["f:labels"], json!({"f:app": {}}));
}

#[test]
fn apply_in_another_version_is_refused() {
    let mut v1beta1 = config("nginx", 1);
    v1beta1["apiVersion"] = json!("apps/v1beta1");
    let err = crate::patch::server_side_apply(None, &v1beta1, &gvk(), "kubectl", false, at(0));
    assert_eq!(
        err,
        Err(PatchError::BadRequest(
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1".into()
        ))
    );
}

/// kubectl's `csaupgrade` rewrites `managedFields` with a JSON patch and changes nothing else:
/// the written entries are kept as sent.
#[test]
fn a_write_of_managed_fields_alone_keeps_them() {
    let live = client_side_applied();
    let mut upgraded = live.clone();
    let mut entries = upgraded["metadata"]["managedFields"].clone();
    entries[0]["manager"] = json!("kubectl");
    entries[0]["operation"] = json!("Apply");
    upgraded["metadata"]["managedFields"] = entries.clone();
    update_managed(Some(&live), &mut upgraded, "kubectl", None, 60);
    assert_eq!(upgraded["metadata"]["managedFields"], entries);
}

/// [`update`] as it was written before its comparison became incremental and before it kept
/// stored entries as JSON: both objects copied without managedFields and compared by their
/// whole field sets, and every entry decoded.
fn update_by_sets(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: jiff::Timestamp,
) {
    let schema = Schema::builtin(&gvk());
    let sent = managed_fields_of(new).is_some_and(|m| !m.is_empty());
    let entries = if sent {
        decode(new)
    } else {
        old.map(decode).unwrap_or_default()
    };
    let old_obj = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let new_obj = without_managed_fields(new);
    if old.is_some() && old_obj == new_obj {
        encode(new, entries);
        return;
    }
    let full = apply::compare_by_sets(&old_obj, &new_obj, schema);
    let who = UpdateChanges {
        manager,
        subresource,
        builtin: schema.is_some(),
        now,
    };
    // Every entry decoded, as before stored entries were kept as JSON.
    let entries = entries.into_iter().map(Entry::Decoded).collect();
    record_update(new, entries, full, who);
}

/// Sets the member at a JSON pointer, creating the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut node = obj;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            if let Some(map) = node.as_object_mut() {
                map.insert(part.to_owned(), value);
            }
            return;
        }
        node = match node {
            Value::Array(list) => match part.parse::<usize>().ok().and_then(|i| list.get_mut(i)) {
                Some(item) => item,
                None => return,
            },
            other => {
                if !other.is_object() {
                    *other = json!({});
                }
                other
                    .as_object_mut()
                    .expect("just made an object")
                    .entry(part)
                    .or_insert_with(|| json!({}))
            }
        };
    }
}

/// A chain of writes by several managers (main resource and `/status`, some sending
/// managedFields of their own, some sending none, some changing nothing) gives the same
/// object, managedFields included, with the incremental comparison and the stored entries kept
/// as JSON as with the whole-set comparison and every entry decoded.
#[test]
fn incremental_update_bookkeeping_equals_the_full_recomputation() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(42);
    let managers = ["kubectl", "kube-controller-manager", "kubelet", "helm"];
    for round in 0..60 {
        let mut live: Option<Value> = None;
        for step in 0..12 {
            let mut next = live.clone().unwrap_or_else(|| config("nginx:1", 1));
            let edits: [(&str, Value); 8] = [
                ("/spec/replicas", json!(rng.random_range(1..5))),
                (
                    "/spec/template/spec/containers/0/image",
                    json!(format!("nginx:{}", rng.random_range(1..4))),
                ),
                (
                    "/metadata/labels/tier",
                    json!(["a", "b"][rng.random_range(0..2)]),
                ),
                (
                    "/spec/template/spec/containers/0/ports/0/containerPort",
                    json!(rng.random_range(80..83)),
                ),
                ("/status/replicas", json!(rng.random_range(0..4))),
                ("/spec/paused", Value::Null),
                ("/spec/template/spec/containers/0/resources", json!({})),
                ("/metadata/annotations", json!({"note": step})),
            ];
            for _ in 0..rng.random_range(0..3) {
                let (pointer, value) = &edits[rng.random_range(0..edits.len())];
                set_at(&mut next, pointer, value.clone());
            }
            if rng.random_bool(0.1)
                && let Some(Value::Array(entries)) = next.pointer_mut("/metadata/managedFields")
            {
                entries.truncate(1);
            } else if rng.random_bool(0.5)
                && let Some(Value::Object(metadata)) = next.pointer_mut("/metadata")
            {
                // Most writers send no managedFields: the stored ones are kept (as JSON where
                // the write leaves them alone).
                metadata.remove("managedFields");
            }
            let manager = managers[rng.random_range(0..managers.len())];
            let subresource = rng.random_bool(0.3).then_some("status");
            let now = at(round * 100 + step);
            let mut fast = next.clone();
            update(
                live.as_ref(),
                &mut fast,
                Schema::builtin(&gvk()),
                manager,
                subresource,
                now,
            );
            let mut slow = next;
            update_by_sets(live.as_ref(), &mut slow, manager, subresource, now);
            assert_eq!(
                fast, slow,
                "round {round} step {step}: {manager} {subresource:?}"
            );
            live = Some(fast);
        }
    }
}

#[test]
fn ownable_in_place_agrees_with_the_filter() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "3",
            "labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["x/y"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r",
                "uid": "ru", "controller": true}],
            "managedFields": [], "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}],
            "nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "podIP": "10.0.0.1"}
    });
    let schema = Schema::builtin(&GroupVersionKind::new("", "v1", "Pod"));
    let mut sets = vec![
        apply::field_set_lenient(&pod, schema),
        apply::field_set_lenient(&pod, None),
    ];
    // Paths no object produces but a set can hold: the filter's edge cases.
    let mut odd = Set::new();
    odd.insert(&[PathElement::Field("metadata".into())]);
    odd.insert(&[PathElement::Field("metadata".into()), PathElement::Index(0)]);
    odd.insert(&[PathElement::Index(1)]);
    odd.insert(&[
        PathElement::Field("kind".into()),
        PathElement::Field("x".into()),
    ]);
    odd.insert(&[PathElement::Field("status".into())]);
    sets.push(odd);
    let mut only_metadata = Set::new();
    only_metadata.insert(&[
        PathElement::Field("metadata".into()),
        PathElement::Field("name".into()),
    ]);
    sets.push(only_metadata);
    for set in &sets {
        for sub in [None, Some("status"), Some("scale")] {
            for builtin in [true, false] {
                assert_eq!(
                    into_ownable(set.clone(), sub, builtin),
                    ownable(set, sub, builtin),
                    "{sub:?} builtin={builtin} {:?}",
                    set.to_fields_v1()
                );
            }
        }
    }
    // And it does cut something: not a test that cannot fail.
    let cut = into_ownable(sets[0].clone(), None, true);
    assert!(!cut.has_prefix(&[PathElement::Field("status".into())]));
    assert!(cut.has_prefix(&[
        PathElement::Field("metadata".into()),
        PathElement::Field("labels".into())
    ]));
    assert!(!cut.has(&[
        PathElement::Field("metadata".into()),
        PathElement::Field("uid".into())
    ]));
}

#[test]
fn sending_the_stored_managed_fields_unchanged_is_leaving_them_out() {
    let live = client_side_applied();
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(7);
    edited["metadata"]["labels"]["tier"] = json!("web");
    // As a merge patch leaves them: the stored entries, unchanged.
    let mut sent = edited.clone();
    update_managed(Some(&live), &mut sent, "editor", None, 500);
    let mut left_out = edited.clone();
    left_out["metadata"]
        .as_object_mut()
        .map(|m| m.remove("managedFields"));
    update_managed(Some(&live), &mut left_out, "editor", None, 500);
    assert_eq!(sent, left_out);
    let editor = entry(&sent, "editor").expect("the editor's entry");
    assert_eq!(
        editor["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}, "f:spec": {"f:replicas": {}}})
    );
    let before = &entry(&live, "kubectl-client-side-apply").expect("entry")["fieldsV1"];
    let after = &entry(&sent, "kubectl-client-side-apply").expect("entry")["fieldsV1"];
    assert!(before["f:spec"].get("f:replicas").is_some());
    assert!(after["f:spec"].get("f:replicas").is_none(), "{after}");
    // Entries that differ from the stored ones replace them.
    let mut replaced = edited.clone();
    replaced["metadata"]["managedFields"] = json!([{"manager": "other", "operation": "Update",
        "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:paused": {}}}}]);
    update_managed(Some(&live), &mut replaced, "editor", None, 500);
    assert!(entry(&replaced, "kubectl-client-side-apply").is_none());
    assert!(entry(&replaced, "other").is_some());
}
