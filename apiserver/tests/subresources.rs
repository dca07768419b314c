//! Subresources and deletion through the router: status, scale, binding, eviction, graceful pod
//! deletion, finalizers, namespaces, deletecollection.

use crate::common;

use axum::http::StatusCode;
use common::Harness;
use common::widgets::*;
use serde_json::json;

#[tokio::test]
async fn status_subresource_splits_spec_and_status_and_generation() {
    let h = with_widgets().await;
    let mut w = widget("w", "red", json!({}));
    w["status"] = json!({"ready": true});
    let created = h.post(WIDGETS, &w).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(
        created.body.get("status").is_none(),
        "status is reset on create"
    );
    // Status write: only status changes, generation stays.
    let mut s = created.body.clone();
    s["status"] = json!({"ready": true});
    s["spec"]["color"] = json!("ignored");
    let st = h.put(&format!("{WIDGETS}/w/status"), &s).await;
    assert_eq!(st.status, StatusCode::OK, "{:?}", st.body);
    assert_eq!(st.body["status"]["ready"], true);
    assert_eq!(st.body["spec"]["color"], "red");
    assert_eq!(st.body["metadata"]["generation"], 1);
    // Main write: status kept, spec change bumps generation, label change does not.
    let mut m = st.body.clone();
    m["status"] = json!({"ready": false});
    m["metadata"]["labels"] = json!({"x": "y"});
    let labelled = h.put(&format!("{WIDGETS}/w"), &m).await;
    assert_eq!(labelled.body["status"]["ready"], true);
    assert_eq!(labelled.body["metadata"]["generation"], 1);
    let mut spec = labelled.body.clone();
    spec["spec"]["size"] = json!(5);
    let bumped = h.put(&format!("{WIDGETS}/w"), &spec).await;
    assert_eq!(bumped.body["metadata"]["generation"], 2);
    assert_eq!(
        h.get(&format!("{WIDGETS}/w/status")).await.body["spec"]["size"],
        5
    );
    // Stale status write conflicts.
    assert_eq!(
        h.put(&format!("{WIDGETS}/w/status"), &s).await.status,
        StatusCode::CONFLICT
    );
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    let h = Harness::new().await;
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "n", "image": "nginx"}]}}}});
    let created = h.post(DEPLOYS, &d).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let scale = h.get(&format!("{DEPLOYS}/nginx/scale")).await;
    assert_eq!(scale.status, StatusCode::OK);
    assert_eq!(scale.body["kind"], "Scale");
    assert_eq!(scale.body["apiVersion"], "autoscaling/v1");
    assert_eq!(scale.body["spec"]["replicas"], 3);
    assert_eq!(scale.body["status"]["replicas"], 0);
    assert_eq!(scale.body["status"]["selector"], "app=nginx");
    assert_eq!(
        scale.body["metadata"]["uid"],
        created.body["metadata"]["uid"]
    );
    let mut s = scale.body.clone();
    s["spec"]["replicas"] = json!(5);
    let put = h.put(&format!("{DEPLOYS}/nginx/scale"), &s).await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    assert_eq!(put.body["spec"]["replicas"], 5);
    let d2 = h.get(&format!("{DEPLOYS}/nginx")).await.body;
    assert_eq!(d2["spec"]["replicas"], 5);
    assert_eq!(d2["metadata"]["generation"], 2);
    // The Scale's resourceVersion is now stale.
    assert_eq!(
        h.put(&format!("{DEPLOYS}/nginx/scale"), &s).await.status,
        StatusCode::CONFLICT
    );
    s["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    s["spec"]["replicas"] = json!(-1);
    assert_eq!(
        h.put(&format!("{DEPLOYS}/nginx/scale"), &s).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        h.get(&format!("{PODS}/x/scale")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let h = Harness::new().await;
    assert_eq!(
        h.post(PODS, &pod("p", json!({}))).await.status,
        StatusCode::CREATED
    );
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let b = h.post(&format!("{PODS}/p/binding"), &binding).await;
    assert_eq!(b.status, StatusCode::CREATED, "{:?}", b.body);
    assert_eq!(b.body["status"], "Success");
    let p = h.get(&format!("{PODS}/p")).await.body;
    assert_eq!(p["spec"]["nodeName"], "node-1");
    let cond = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .expect("PodScheduled");
    assert_eq!(cond["status"], "True");
    let again = h.post(&format!("{PODS}/p/binding"), &binding).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(
        again.body["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\""
    );
    let no_target = h
        .post(
            &format!("{PODS}/p/binding"),
            &json!({"metadata": {"name": "p"}, "target": {}}),
        )
        .await;
    assert_eq!(no_target.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        h.post(&format!("{PODS}/missing/binding"), &binding)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

async fn bound_pod(h: &Harness, name: &str, grace: Option<i64>) {
    let mut p = pod(name, json!({}));
    if let Some(g) = grace {
        p["spec"]["terminationGracePeriodSeconds"] = json!(g);
    }
    assert_eq!(h.post(PODS, &p).await.status, StatusCode::CREATED);
    let binding = json!({"metadata": {"name": name}, "target": {"name": "node-1"}});
    assert_eq!(
        h.post(&format!("{PODS}/{name}/binding"), &binding)
            .await
            .status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn graceful_pod_deletion_waits_for_grace_zero() {
    let h = Harness::new().await;
    bound_pod(&h, "p", Some(20)).await;
    let d = h
        .delete(
            &format!("{PODS}/p"),
            Some(&json!({"propagationPolicy": "Background"})),
        )
        .await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(d.body["kind"], "Pod", "pods answer with the object");
    assert_eq!(d.body["metadata"]["deletionGracePeriodSeconds"], 20);
    assert!(d.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        h.get(&format!("{PODS}/p")).await.status,
        StatusCode::OK,
        "still there during its grace period"
    );
    // The kubelet finishes with grace 0 (as a query parameter, like the Python client).
    let fin = h
        .delete(&format!("{PODS}/p?gracePeriodSeconds=0"), None)
        .await;
    assert_eq!(fin.status, StatusCode::OK);
    assert_eq!(
        h.get(&format!("{PODS}/p")).await.status,
        StatusCode::NOT_FOUND
    );
    // An unbound pod goes at once.
    assert_eq!(
        h.post(PODS, &pod("u", json!({}))).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        h.delete(&format!("{PODS}/u"), None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.get(&format!("{PODS}/u")).await.status,
        StatusCode::NOT_FOUND
    );
    // Eviction deletes honouring the grace period.
    bound_pod(&h, "e", None).await;
    let ev = h
        .post(
            &format!("{PODS}/e/eviction"),
            &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e"}}),
        )
        .await;
    assert_eq!(ev.status, StatusCode::CREATED, "{:?}", ev.body);
    assert_eq!(
        h.get(&format!("{PODS}/e")).await.body["metadata"]["deletionGracePeriodSeconds"],
        30
    );
}

#[tokio::test]
async fn finalizers_keep_objects_until_removed() {
    let h = with_widgets().await;
    let mut w = widget("f", "red", json!({}));
    w["metadata"]["finalizers"] = json!(["example.com/keep"]);
    assert_eq!(h.post(WIDGETS, &w).await.status, StatusCode::CREATED);
    let mut watch = h
        .watch(
            &format!("{WIDGETS}?watch=1&fieldSelector=metadata.name%3Df"),
            None,
        )
        .await;
    assert_eq!(watch.next_change().await.expect("initial")["type"], "ADDED");
    let d = h.delete(&format!("{WIDGETS}/f"), None).await;
    assert_eq!(d.status, StatusCode::OK);
    assert!(d.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(d.body["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(
        watch.next_change().await.expect("marked")["type"],
        "MODIFIED"
    );
    let marked = h.get(&format!("{WIDGETS}/f")).await.body;
    // No new finalizers while deleting.
    let mut more = marked.clone();
    more["metadata"]["finalizers"] = json!(["example.com/keep", "other"]);
    assert_eq!(
        h.put(&format!("{WIDGETS}/f"), &more).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // Emptying the finalizers removes the object.
    let mut done = marked.clone();
    done["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        h.put(&format!("{WIDGETS}/f"), &done).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.get(&format!("{WIDGETS}/f")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(watch.next_change().await.expect("gone")["type"], "DELETED");
    // Propagation policies record the garbage collector's finalizers.
    for (policy, fin) in [("Foreground", "foregroundDeletion"), ("Orphan", "orphan")] {
        assert_eq!(
            h.post(WIDGETS, &widget("g", "red", json!({}))).await.status,
            StatusCode::CREATED
        );
        let d = h
            .delete(&format!("{WIDGETS}/g?propagationPolicy={policy}"), None)
            .await;
        assert_eq!(d.body["metadata"]["finalizers"], json!([fin]), "{policy}");
        let mut o = h.get(&format!("{WIDGETS}/g")).await.body;
        o["metadata"]["finalizers"] = json!([]);
        assert_eq!(
            h.put(&format!("{WIDGETS}/g"), &o).await.status,
            StatusCode::OK
        );
    }
    // Preconditions.
    let created = h.post(WIDGETS, &widget("pc", "red", json!({}))).await;
    let bad = h
        .delete(
            &format!("{WIDGETS}/pc"),
            Some(&json!({"preconditions": {"uid": "nope"}})),
        )
        .await;
    assert_eq!(bad.status, StatusCode::CONFLICT);
    let uid = created.body["metadata"]["uid"].clone();
    let good = h
        .delete(
            &format!("{WIDGETS}/pc"),
            Some(&json!({"preconditions": {"uid": uid}})),
        )
        .await;
    assert_eq!(good.status, StatusCode::OK);
    assert_eq!(good.body["kind"], "Status");
    assert_eq!(good.body["details"]["name"], "pc");
    assert_eq!(good.body["details"]["group"], "example.com");
}

#[tokio::test]
async fn namespaces_must_exist_and_terminate() {
    let h = Harness::new().await;
    let missing = h
        .post("/api/v1/namespaces/nope/pods", &pod("p", json!({})))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["message"], "namespaces \"nope\" not found");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let n = h.get(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(n.status, StatusCode::OK, "{ns}");
        assert_eq!(n.body["spec"]["finalizers"], json!(["kubernetes"]), "{ns}");
        assert_eq!(n.body["status"]["phase"], "Active", "{ns}");
    }
    assert_eq!(
        h.post("/api/v1/namespaces", &json!({"metadata": {"name": "t"}}))
            .await
            .status,
        StatusCode::CREATED
    );
    let d = h.delete("/api/v1/namespaces/t", None).await;
    assert_eq!(d.body["status"]["phase"], "Terminating");
    let refused = h
        .post("/api/v1/namespaces/t/pods", &pod("p", json!({})))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    // The namespace controller's finalize removes the last finalizer: the namespace goes.
    let mut ns = h.get("/api/v1/namespaces/t").await.body;
    ns["spec"]["finalizers"] = json!([]);
    assert_eq!(
        h.put("/api/v1/namespaces/t/finalize", &ns).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.get("/api/v1/namespaces/t").await.status,
        StatusCode::NOT_FOUND
    );
}

/// `NamespaceLifecycle`'s immortal namespaces: a delete (dry run too) answers 403 with
/// Kubernetes' words and leaves the namespace Active; `kube-node-lease` is not among them.
#[tokio::test]
async fn system_namespaces_may_not_be_deleted() {
    let h = Harness::new().await;
    for ns in ["default", "kube-system", "kube-public"] {
        for uri in [
            format!("/api/v1/namespaces/{ns}"),
            format!("/api/v1/namespaces/{ns}?dryRun=All"),
        ] {
            let d = h.delete(&uri, None).await;
            assert_eq!(d.status, StatusCode::FORBIDDEN, "{uri}: {}", d.body);
            assert_eq!(d.body["reason"], "Forbidden");
            assert_eq!(
                d.body["message"],
                format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted")
            );
            assert_eq!(d.body["details"]["name"], ns);
            assert_eq!(d.body["details"]["kind"], "namespaces");
        }
        let n = h.get(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(n.body["status"]["phase"], "Active", "{ns}");
        assert!(n.body["metadata"]["deletionTimestamp"].is_null(), "{ns}");
    }
    // Namespaces have no deletecollection in Kubernetes: `kubectl delete ns --all` deletes
    // them one by one.
    let all = h.delete("/api/v1/namespaces", None).await;
    assert_eq!(all.status, StatusCode::METHOD_NOT_ALLOWED, "{}", all.body);
    let lease = h.delete("/api/v1/namespaces/kube-node-lease", None).await;
    assert_eq!(lease.status, StatusCode::OK, "{}", lease.body);
}

#[tokio::test]
async fn delete_collection_with_selectors() {
    let h = Harness::new().await;
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        assert_eq!(
            h.post(PODS, &pod(n, json!({"app": app}))).await.status,
            StatusCode::CREATED
        );
    }
    let r = h
        .delete(&format!("{PODS}?labelSelector=app%3Dx"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["kind"], "PodList");
    assert_eq!(names(&r.body), vec!["a", "b"]);
    assert_eq!(names(&h.get(PODS).await.body), vec!["c"]);
}

#[tokio::test]
async fn deployment_generation_follows_spec_and_annotations_not_labels() {
    // `pkg/registry/apps/deployment/strategy.go` PrepareForUpdate: spec or annotation changes
    // bump the generation (rollout undo and restart write annotations), labels do not.
    let h = Harness::new().await;
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gen"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gen"}},
                 "template": {"metadata": {"labels": {"app": "gen"}}, "spec": {"containers": [{"name": "n", "image": "nginx"}]}}}});
    let created = h.post(DEPLOYS, &d).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.body["metadata"]["generation"], 1);
    let mut labelled = created.body.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    let labelled = h.put(&format!("{DEPLOYS}/gen"), &labelled).await;
    assert_eq!(labelled.status, StatusCode::OK, "{:?}", labelled.body);
    assert_eq!(labelled.body["metadata"]["generation"], 1);
    let mut annotated = labelled.body.clone();
    annotated["metadata"]["annotations"] = json!({"kubernetes.io/change-cause": "undo"});
    let annotated = h.put(&format!("{DEPLOYS}/gen"), &annotated).await;
    assert_eq!(annotated.status, StatusCode::OK, "{:?}", annotated.body);
    assert_eq!(annotated.body["metadata"]["generation"], 2);
}
