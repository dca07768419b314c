//! The check engine on hand-made snapshots: each check passes on the state it describes and
//! says what is missing otherwise.

use serde_json::json;
use trace::{Span, SpanContext, SpanKind};

use super::*;
use crate::lab::spec::CheckSpec;

fn check(yaml: &str) -> Check {
    let value: Value = serde_norway::from_str(yaml).expect("valid YAML");
    let spec: CheckSpec = serde_json::from_value(value).expect("valid check");
    spec.check
}

fn pod(name: &str, owner: Option<&str>, phase: &str) -> Value {
    let mut p = json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                       "status": {"phase": phase}});
    if let Some(kind) = owner {
        p["metadata"]["ownerReferences"] =
            json!([{"kind": kind, "name": "web-1", "controller": true}]);
    }
    p
}

fn write(verb: &str, resource: &str, name: &str, agent: &str, at: u64) -> Span {
    let mut s = Span::start(
        SpanContext::new_root(),
        None,
        "w",
        SpanKind::Server,
        "kube-apiserver",
    )
    .with(attr::VERB, verb)
    .with(attr::RESOURCE, resource)
    .with(attr::NAME, name)
    .with(attr::CODE, 201u16)
    .with("userAgent", format!("{agent}/v1.33.0"));
    s.start_unix_nanos = at;
    s
}

#[test]
fn object_and_count_checks_read_fields_owners_and_labels() {
    let mut s = Snapshot::default();
    s.objects.insert(
        "Deployment".into(),
        vec![json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}})],
    );
    s.objects.insert(
        "Pod".into(),
        vec![
            pod("web-1-a", Some("ReplicaSet"), "Running"),
            pod("web-1-b", Some("ReplicaSet"), "Pending"),
            pod("lonely", None, "Running"),
        ],
    );
    let replicas = check(
        "{name: r, description: d, object: {kind: Deployment, name: web, fields: {spec.replicas: 5}}}",
    );
    assert_eq!(
        evaluate(&replicas, &s),
        Err("deployment default/web: spec.replicas is 3, want 5".into())
    );
    let gone =
        check("{name: r, description: d, object: {kind: Deployment, name: web, exists: false}}");
    assert_eq!(
        evaluate(&gone, &s),
        Err("deployment default/web still exists".into())
    );
    let owned = check(
        "{name: c, description: d, count: {kind: Pod, selector: app=web, owner: ReplicaSet, fields: {status.phase: Running}, equals: 1}}",
    );
    assert_eq!(evaluate(&owned, &s), Ok(()));
    let orphans = check("{name: c, description: d, count: {kind: Pod, owner: none, min: 2}}");
    assert_eq!(
        evaluate(&orphans, &s),
        Err("pods owned by none: 1, want at least 2".into())
    );
}

#[test]
fn writes_and_max_alive_read_the_trace() {
    let s = Snapshot {
        spans: vec![
            write("create", "pods", "web-a", "kube-controller-manager", 1),
            write("create", "pods", "web-b", "kube-controller-manager", 2),
            write("update", "deployments", "web", "kubectl", 3),
            write("create", "pods", "web-c", "kube-controller-manager", 4),
            write("delete", "pods", "web-a", "kube-controller-manager", 5),
            write("create", "pods", "web-d", "kube-controller-manager", 6),
        ],
        ..Snapshot::default()
    };
    let by_rs = check(
        "{name: w, description: d, writes: {resource: pods, verb: create, by: kube-controller-manager, min: 4}}",
    );
    assert_eq!(evaluate(&by_rs, &s), Ok(()));
    let by_me = check(
        "{name: w, description: d, writes: {resource: pods, verb: create, by: kubectl, min: 1}}",
    );
    assert_eq!(
        evaluate(&by_me, &s),
        Err("create pods by kubectl (from the trace): 0, want at least 1".into())
    );
    let surge = check(
        "{name: m, description: d, maxAlive: {resource: pods, namePrefix: web-, max: 2, sinceWrite: deployments/web}}",
    );
    assert_eq!(
        evaluate(&surge, &s),
        Err("at most 3 web-* existed at once (from the trace): 3, want at most 2".into())
    );
    let loose = check(
        "{name: m, description: d, maxAlive: {resource: pods, namePrefix: web-, max: 3, min: 3, sinceWrite: deployments/web}}",
    );
    assert_eq!(evaluate(&loose, &s), Ok(()));
}

#[test]
fn conditions_events_faults_and_controllers() {
    let mut s = Snapshot::default();
    s.objects.insert(
        "Node".into(),
        vec![json!({"metadata": {"name": "node-1"},
                    "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})],
    );
    s.objects.insert(
        "Event".into(),
        vec![json!({"reason": "FailedScheduling", "message": "0/3 nodes are available: 3 Insufficient cpu.",
                    "involvedObject": {"kind": "Pod", "name": "big"}})],
    );
    let ready = check(
        "{name: c, description: d, condition: {kind: Node, name: node-1, type: Ready, status: 'True'}}",
    );
    assert_eq!(
        evaluate(&ready, &s),
        Err("node node-1: Ready is Unknown, want True".into())
    );
    let cpu = check(
        "{name: e, description: d, event: {reason: FailedScheduling, kind: Pod, messageContains: Insufficient cpu}}",
    );
    assert_eq!(evaluate(&cpu, &s), Ok(()));
    let paused = check("{name: p, description: d, controller: {name: deployment, paused: true}}");
    assert_eq!(
        evaluate(&paused, &s),
        Err("controller deployment has not reported its queue".into())
    );
    s.controllers = vec![admin::ControllerStatus {
        name: "deployment".into(),
        paused: true,
        depth: 1,
        queued: vec!["default/web".into()],
        ..Default::default()
    }];
    assert_eq!(evaluate(&paused, &s), Ok(()));
    let depth = check("{name: p, description: d, controller: {name: deployment, minDepth: 2}}");
    assert_eq!(
        evaluate(&depth, &s),
        Err("controller deployment: 1 keys queued, want at least 2".into())
    );
    let fault = check("{name: f, description: d, fault: {name: pause-deployment}}");
    assert_eq!(
        evaluate(&fault, &s),
        Err("fault pause-deployment is not in force".into())
    );
}

#[test]
fn custom_kinds_are_named_by_api_version() {
    use crate::lab::snapshot::{KindRef, kind_ref};
    assert_eq!(
        kind_ref("Website", Some("demo.miniplane.dev/v1"), None, None),
        Ok(KindRef {
            group: "demo.miniplane.dev".into(),
            version: "v1".into(),
            plural: "websites".into(),
            namespaced: true
        })
    );
    assert!(kind_ref("Website", None, None, None).is_err());
    let mut s = Snapshot::default();
    s.namespaced.insert("Cluster".into(), false);
    s.objects.insert(
        "Cluster".into(),
        vec![json!({"metadata": {"name": "c1"}, "spec": {"size": 3}})],
    );
    let c = check(
        "{name: c, description: d, object: {kind: Cluster, apiVersion: demo.miniplane.dev/v1, namespaced: false, name: c1, fields: {spec.size: 3}}}",
    );
    assert_eq!(evaluate(&c, &s), Ok(()));
}

#[test]
fn writes_refused_by_authorization_are_counted_by_code_and_user() {
    let refused = |name: &str, user: &str| {
        write("update", "nodes", name, "cloud-controller-manager", 1)
            .with(attr::CODE, 403u16)
            .with("user", user.to_string())
    };
    let s = Snapshot {
        spans: vec![
            write("update", "nodes", "node-1", "cloud-controller-manager", 0)
                .with("user", "system:cloud-controller-manager"),
            refused("node-3", "system:cloud-controller-manager"),
            refused("node-3", "alice"),
        ],
        ..Snapshot::default()
    };
    let served = check(
        "{name: w, description: d, writes: {resource: nodes, verb: update, user: system:cloud-controller-manager, max: 1, min: 1}}",
    );
    assert_eq!(evaluate(&served, &s), Ok(()));
    let forbidden = check(
        "{name: w, description: d, writes: {resource: nodes, verb: update, code: 403, user: system:cloud-controller-manager, namePrefix: node-3, min: 1, max: 1}}",
    );
    assert_eq!(evaluate(&forbidden, &s), Ok(()));
    let by_bob = check(
        "{name: w, description: d, writes: {resource: nodes, verb: update, code: 403, user: bob, min: 1}}",
    );
    assert_eq!(
        evaluate(&by_bob, &s),
        Err("update nodes by user bob answered 403 (from the trace): 0, want at least 1".into())
    );
}

#[test]
fn access_checks_read_the_authorizer_answers() {
    use crate::lab::snapshot::{AccessQuestion, Review};
    let minimal = check(
        "{name: a, description: d, access: {user: alice, allowed: [list pods -n dev], denied: [delete pods -n dev, list pods -n default]}}",
    );
    let Check::Access(spec) = &minimal else {
        panic!("an access check")
    };
    assert_eq!(
        evaluate(&minimal, &Snapshot::default()),
        Err("no answer about alice list pods -n dev".into())
    );
    let answer = |s: &mut Snapshot, what: &str, allowed: bool, reason: &str| {
        let question = AccessQuestion::of(spec)
            .find(|q| q.request.to_string() == what)
            .expect("asked");
        s.reviews.insert(
            question,
            Review {
                allowed,
                reason: reason.into(),
            },
        );
    };
    let mut s = Snapshot::default();
    answer(&mut s, "list pods -n dev", false, "");
    answer(&mut s, "delete pods -n dev", false, "");
    answer(&mut s, "list pods -n default", false, "");
    assert_eq!(
        evaluate(&minimal, &s),
        Err("alice cannot list pods -n dev".into())
    );
    let by = r#"RBAC: allowed by RoleBinding "b/dev" of Role "r" to User "alice""#;
    answer(&mut s, "list pods -n dev", true, by);
    answer(&mut s, "delete pods -n dev", true, by);
    assert_eq!(
        evaluate(&minimal, &s),
        Err(format!(
            "alice can delete pods -n dev ({by}), want it denied"
        ))
    );
    answer(&mut s, "delete pods -n dev", false, "");
    assert_eq!(evaluate(&minimal, &s), Ok(()));
}
