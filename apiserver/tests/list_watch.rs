//! List, watch and table behaviour through the router: selectors, pagination, resourceVersion
//! semantics, watch start points, 410s, bookmarks, server-side printing and discovery.

use crate::common;

use axum::http::StatusCode;
use common::widgets::*;
use common::{Harness, TABLE};
use serde_json::json;

#[tokio::test]
async fn label_selectors_filter_lists() {
    let h = Harness::new().await;
    for (n, l) in [
        ("a", json!({"app": "web", "tier": "fe"})),
        ("b", json!({"app": "db"})),
        ("c", json!({"app": "web"})),
    ] {
        assert_eq!(h.post(PODS, &pod(n, l)).await.status, StatusCode::CREATED);
    }
    let cases = [
        ("app=web", vec!["a", "c"]),
        ("app%3D%3Dweb", vec!["a", "c"]),
        ("app!=web", vec!["b"]),
        ("app%20in%20(db,other)", vec!["b"]),
        ("app%20notin%20(db)", vec!["a", "c"]),
        ("tier", vec!["a"]),
        ("!tier", vec!["b", "c"]),
        ("app=web,!tier", vec!["c"]),
    ];
    for (sel, want) in cases {
        let r = h.get(&format!("{PODS}?labelSelector={sel}")).await;
        assert_eq!(r.status, StatusCode::OK, "{sel}");
        assert_eq!(names(&r.body), want, "{sel}");
    }
    let bad = h.get(&format!("{PODS}?labelSelector=app%20in%20web")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn field_selectors_filter_and_refuse_unknown_fields() {
    let h = with_widgets().await;
    for (n, c) in [("w1", "red"), ("w2", "blue")] {
        assert_eq!(
            h.post(WIDGETS, &widget(n, c, json!({}))).await.status,
            StatusCode::CREATED
        );
    }
    for (sel, want) in [
        ("metadata.name%3Dw2", vec!["w2"]),
        ("spec.color%3D%3Dred", vec!["w1"]),
        ("spec.color!%3Dred", vec!["w2"]),
        ("metadata.namespace%3Ddefault", vec!["w1", "w2"]),
    ] {
        let r = h.get(&format!("{WIDGETS}?fieldSelector={sel}")).await;
        assert_eq!(names(&r.body), want, "{sel}");
    }
    let bad = h
        .get(&format!("{WIDGETS}?fieldSelector=spec.size%3D1"))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["message"], "field label not supported: spec.size");
}

#[tokio::test]
async fn pagination_with_continue_tokens_and_expiry() {
    let h = Harness::new().await;
    for i in 0..5 {
        assert_eq!(
            h.post(PODS, &pod(&format!("p{i}"), json!({}))).await.status,
            StatusCode::CREATED
        );
    }
    let mut seen = Vec::new();
    let mut uri = format!("{PODS}?limit=2");
    let mut pages = 0;
    loop {
        let r = h.get(&uri).await;
        assert_eq!(r.status, StatusCode::OK);
        pages += 1;
        seen.extend(names(&r.body));
        match r.body["metadata"]["continue"].as_str() {
            Some(token) => uri = format!("{PODS}?limit=2&continue={}", urlencode(token)),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, vec!["p0", "p1", "p2", "p3", "p4"]);
    // A token whose revision has been compacted is 410 Expired.
    let first = h.get(&format!("{PODS}?limit=2")).await;
    let token = first.body["metadata"]["continue"]
        .as_str()
        .expect("token")
        .to_string();
    assert_eq!(
        h.post(PODS, &pod("late", json!({}))).await.status,
        StatusCode::CREATED
    );
    {
        use store::Backend;
        h.backend
            .compact(h.backend.current_revision())
            .await
            .expect("compact");
    }
    let expired = h
        .get(&format!("{PODS}?limit=2&continue={}", urlencode(&token)))
        .await;
    assert_eq!(expired.status, StatusCode::GONE);
    assert_eq!(expired.body["reason"], "Expired");
    let garbage = h.get(&format!("{PODS}?limit=2&continue=xyz")).await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
}

fn urlencode(s: &str) -> String {
    s.replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}

#[tokio::test]
async fn list_resource_version_semantics() {
    let h = Harness::new().await;
    let a = h.post(PODS, &pod("a", json!({}))).await;
    let rv_a = a.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    assert_eq!(
        h.post(PODS, &pod("b", json!({}))).await.status,
        StatusCode::CREATED
    );
    let exact = h
        .get(&format!(
            "{PODS}?resourceVersion={rv_a}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(exact.status, StatusCode::OK);
    assert_eq!(names(&exact.body), vec!["a"]);
    assert_eq!(exact.body["metadata"]["resourceVersion"], rv_a.as_str());
    let latest = h.get(&format!("{PODS}?resourceVersion=0")).await;
    assert_eq!(names(&latest.body), vec!["a", "b"]);
    let future = h.get(&format!("{PODS}?resourceVersion=999999")).await;
    assert_eq!(future.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        future.body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    // `ValidateListOptions`: 422 Invalid on the ListOptions, not 400.
    let lonely = h.get(&format!("{PODS}?resourceVersionMatch=Exact")).await;
    assert_eq!(lonely.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(lonely.body["reason"], "Invalid");
    assert_eq!(
        lonely.body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
}

#[tokio::test]
async fn watch_from_now_from_zero_and_on_one_name() {
    let h = Harness::new().await;
    assert_eq!(
        h.post(PODS, &pod("old", json!({}))).await.status,
        StatusCode::CREATED
    );
    // Without a resourceVersion: synthetic ADDED for existing objects first.
    let mut all = h.watch(&format!("{PODS}?watch=true"), None).await;
    let first = all.next_change().await.expect("initial ADDED");
    assert_eq!(
        (
            first["type"].as_str(),
            first["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("old"))
    );
    // One object by field selector; all namespaces.
    let mut one = h
        .watch(
            &format!("{PODS}?watch=1&resourceVersion=1&fieldSelector=metadata.name%3Dtarget"),
            None,
        )
        .await;
    let mut cluster = h
        .watch("/api/v1/pods?watch=1&resourceVersion=1", None)
        .await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    assert_eq!(
        h.post("/api/v1/namespaces", &ns).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        h.post(
            "/api/v1/namespaces/other/pods",
            &pod("elsewhere", json!({}))
        )
        .await
        .status,
        StatusCode::CREATED
    );
    assert_eq!(
        h.post(PODS, &pod("target", json!({}))).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        one.next_change().await.expect("event")["object"]["metadata"]["name"],
        "target"
    );
    let mut cluster_names = Vec::new();
    for _ in 0..3 {
        cluster_names.push(
            cluster.next_change().await.expect("event")["object"]["metadata"]["name"].clone(),
        );
    }
    assert_eq!(
        cluster_names,
        vec![json!("old"), json!("elsewhere"), json!("target")]
    );
    assert_eq!(
        all.next_change().await.expect("event")["object"]["metadata"]["name"],
        "target",
        "namespaced watch saw another namespace"
    );
}

#[tokio::test]
async fn watch_selector_transitions_become_added_and_deleted() {
    let h = Harness::new().await;
    let created = h.post(PODS, &pod("p", json!({"app": "x"}))).await;
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let mut w = h
        .watch(
            &format!("{PODS}?watch=1&resourceVersion={rv}&labelSelector=app%3Dy"),
            None,
        )
        .await;
    let mut obj = created.body.clone();
    obj["metadata"]["labels"]["app"] = json!("y");
    let moved = h.put(&format!("{PODS}/p"), &obj).await;
    assert_eq!(moved.status, StatusCode::OK);
    assert_eq!(w.next_change().await.expect("event")["type"], "ADDED");
    let mut back = moved.body.clone();
    back["metadata"]["labels"]["app"] = json!("x");
    assert_eq!(
        h.put(&format!("{PODS}/p"), &back).await.status,
        StatusCode::OK
    );
    assert_eq!(w.next_change().await.expect("event")["type"], "DELETED");
}

#[tokio::test]
async fn watch_from_a_compacted_revision_gets_an_in_stream_410() {
    let h = Harness::new().await;
    for i in 0..3 {
        assert_eq!(
            h.post(PODS, &pod(&format!("p{i}"), json!({}))).await.status,
            StatusCode::CREATED
        );
    }
    let current = {
        use store::Backend;
        let c = h.backend.current_revision();
        h.backend.compact(c).await.expect("compact");
        c
    };
    let mut w = h
        .watch(&format!("{PODS}?watch=1&resourceVersion=2"), None)
        .await;
    let ev = w.next().await.expect("ERROR event");
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert_eq!(
        ev["object"]["message"],
        format!("too old resource version: 2 ({})", current.0)
    );
    assert!(
        w.next_within(std::time::Duration::from_secs(1))
            .await
            .is_none(),
        "stream must end after the error"
    );
}

/// A watch from a revision the store has not reached waits for it: when the writes get there
/// within 3 s, the events after it arrive; when they do not, the stream carries
/// kube-apiserver's 504 "Too large resource version" and ends, instead of silently starting
/// later and skipping the events up to it.
#[tokio::test]
async fn watch_from_a_future_revision_waits_for_it_or_fails_with_504() {
    use store::Backend;
    let h = Harness::new().await;
    let current = h.backend.current_revision().0;

    let far = current + 1000;
    let mut w = h
        .watch(&format!("{PODS}?watch=1&resourceVersion={far}"), None)
        .await;
    let ev = w.next().await.expect("ERROR event");
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 504);
    assert_eq!(ev["object"]["reason"], "Timeout");
    assert_eq!(
        ev["object"]["message"],
        format!("Timeout: Too large resource version: {far}, current: {current}")
    );
    assert_eq!(
        ev["object"]["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(ev["object"]["details"]["retryAfterSeconds"], 1);
    assert!(
        w.next_within(std::time::Duration::from_secs(1))
            .await
            .is_none(),
        "stream must end after the error"
    );

    // Two revisions ahead, reached by four creates while the watch waits: the watch starts
    // there and sees exactly the creates after it.
    let near = current + 2;
    let writer = {
        let app = h.app.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            for i in 0..4 {
                let body = serde_json::to_vec(&pod(&format!("p{i}"), json!({}))).expect("json");
                let req = axum::http::Request::builder()
                    .method("POST")
                    .uri(PODS)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(body))
                    .expect("request");
                let resp = tower::ServiceExt::oneshot(app.clone(), req)
                    .await
                    .expect("infallible");
                assert_eq!(resp.status(), StatusCode::CREATED);
            }
        })
    };
    let mut w = h
        .watch(&format!("{PODS}?watch=1&resourceVersion={near}"), None)
        .await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = w.next().await.expect("an event");
        assert_eq!(ev["type"], "ADDED", "{ev}");
        seen.push(
            ev["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    writer.await.expect("writer");
    assert_eq!(seen, ["p2", "p3"]);
}

#[tokio::test]
async fn watch_bookmarks_timeout_and_initial_events_end() {
    let h = Harness::new().await;
    let created = h.post(PODS, &pod("p", json!({}))).await;
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let mut w = h
        .watch(
            &format!(
                "{PODS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2"
            ),
            None,
        )
        .await;
    let bm = w.next().await.expect("bookmark");
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(bm["object"]["kind"], "Pod");
    assert_eq!(bm["object"]["apiVersion"], "v1");
    assert_eq!(bm["object"]["metadata"]["resourceVersion"], rv.as_str());
    assert!(bm["object"].get("spec").is_none());
    // timeoutSeconds ends the stream.
    let started = std::time::Instant::now();
    while w
        .next_within(std::time::Duration::from_secs(5))
        .await
        .is_some()
    {}
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    // Streaming list: ADDEDs, then the initial-events-end bookmark.
    let mut s = h.watch(&format!("{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true"), None).await;
    assert_eq!(s.next().await.expect("ADDED")["type"], "ADDED");
    let end = s.next().await.expect("bookmark");
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn tables_for_get_list_and_watch() {
    let h = with_widgets().await;
    let created = h
        .post(WIDGETS, &widget("w1", "red", json!({"a": "b"})))
        .await;
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let list = h.get_as(WIDGETS, TABLE).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["kind"], "Table");
    assert_eq!(list.body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list.body["metadata"]["resourceVersion"], rv.as_str());
    let cols: Vec<_> = list.body["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(cols, vec![json!("Name"), json!("Color")]);
    assert_eq!(list.body["rows"][0]["cells"], json!(["w1", "red"]));
    assert_eq!(
        list.body["rows"][0]["object"]["kind"],
        "PartialObjectMetadata"
    );
    assert_eq!(
        list.body["rows"][0]["object"]["metadata"]["labels"]["a"],
        "b"
    );
    let full = h
        .get_as(&format!("{WIDGETS}?includeObject=Object"), TABLE)
        .await;
    assert_eq!(full.body["rows"][0]["object"]["spec"]["color"], "red");
    let one = h.get_as(&format!("{WIDGETS}/w1"), TABLE).await;
    assert_eq!(one.body["kind"], "Table");
    assert_eq!(one.body["rows"].as_array().map(Vec::len), Some(1));
    // Watch events carry one-row Tables; the first one has the columns.
    let mut w = h
        .watch(
            &format!("{WIDGETS}?watch=true&resourceVersion={rv}"),
            Some(TABLE),
        )
        .await;
    assert_eq!(
        h.post(WIDGETS, &widget("w2", "blue", json!({})))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        h.post(WIDGETS, &widget("w3", "green", json!({})))
            .await
            .status,
        StatusCode::CREATED
    );
    let e1 = w.next_change().await.expect("event");
    assert_eq!(e1["object"]["kind"], "Table");
    assert_eq!(e1["object"]["rows"][0]["cells"], json!(["w2", "blue"]));
    assert_eq!(
        e1["object"]["columnDefinitions"].as_array().map(Vec::len),
        Some(2)
    );
    let e2 = w.next_change().await.expect("event");
    assert_eq!(e2["object"]["rows"][0]["cells"][0], "w3");
    // Kubernetes sets NoHeaders after the first event: later ones carry `null` columns.
    assert!(e2["object"]["columnDefinitions"].is_null());
    // Plain JSON when Table is not asked for.
    assert_eq!(h.get(WIDGETS).await.body["kind"], "WidgetList");
}

#[tokio::test]
async fn discovery_aggregated_only_when_asked() {
    let h = Harness::new().await;
    let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    for path in ["/api", "/apis", "/api/", "/apis/"] {
        let agg = h.get_as(path, v2).await;
        assert_eq!(agg.status, StatusCode::OK, "{path}");
        assert_eq!(
            agg.headers["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "{path}"
        );
        assert_eq!(agg.body["kind"], "APIGroupDiscoveryList", "{path}");
        let plain = h.get_as(path, "application/json, */*").await;
        assert_eq!(plain.headers["content-type"], "application/json", "{path}");
        assert_ne!(plain.body["kind"], "APIGroupDiscoveryList", "{path}");
    }
    let beta = h.get_as("/apis", "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json").await;
    assert_eq!(beta.body["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let agg = h.get_as("/apis", v2).await;
    let apps = agg.body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["metadata"]["name"] == "apps")
        .cloned()
        .expect("apps group");
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["resource"] == "deployments")
        .cloned()
        .expect("deployments");
    assert_eq!(deploy["scope"], "Namespaced");
    assert_eq!(deploy["shortNames"], json!(["deploy"]));
    assert!(deploy["subresources"].as_array().is_some_and(|s| {
        s.iter()
            .any(|x| x["subresource"] == "scale" && x["responseKind"]["kind"] == "Scale")
    }));
    assert_eq!(h.get("/api").await.body["versions"], json!(["v1"]));
    let groups = h.get("/apis").await.body;
    assert!(
        groups["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|x| x["name"] == "coordination.k8s.io"))
    );
    assert_eq!(h.get("/apis/apps").await.body["kind"], "APIGroup");
    let core = h.get("/api/v1/").await.body;
    let res: Vec<_> = core["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["name"].clone())
        .collect();
    for want in [
        "pods",
        "pods/status",
        "pods/binding",
        "pods/eviction",
        "namespaces",
        "nodes/status",
    ] {
        assert!(res.contains(&json!(want)), "{want} missing from /api/v1");
    }
    let version = h.get("/version/").await.body;
    assert_eq!(
        (version["major"].as_str(), version["minor"].as_str()),
        (Some("1"), Some("33"))
    );
    for p in ["/healthz", "/livez", "/readyz", "/readyz/"] {
        let r = h.get(p).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (StatusCode::OK, Some("ok")),
            "{p}"
        );
    }
    // kube-apiserver's verbose listing; an in-memory store has no checkpoints to check.
    let verbose = h.get("/readyz?verbose").await;
    assert_eq!(
        (verbose.status, verbose.body.as_str()),
        (StatusCode::OK, Some("[+]ping ok\nreadyz check passed\n"))
    );
    assert_eq!(h.get("/livez/ping").await.body.as_str(), Some("ok"));
    assert_eq!(h.get("/readyz/nope").await.status, StatusCode::NOT_FOUND);
    // An in-memory store exports no store metrics.
    assert_eq!(h.get("/metrics").await.status, StatusCode::OK);
    assert_eq!(h.get("/openapi/v3").await.status, StatusCode::OK);
    assert_eq!(
        h.get("/openapi/v3/apis/apps/v1").await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.get("/openapi/v3/apis/nope/v1").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn partial_object_metadata_for_metadata_clients() {
    let h = Harness::new().await;
    let created = h.post(PODS, &pod("m", json!({"a": "b"}))).await;
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let accept =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let list = h.get_as(PODS, accept).await;
    assert_eq!(list.body["kind"], "PartialObjectMetadataList");
    assert_eq!(list.body["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list.body["items"][0]["metadata"]["labels"]["a"], "b");
    assert!(list.body["items"][0].get("spec").is_none());
    let one = h
        .get_as(
            &format!("{PODS}/m"),
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await;
    assert_eq!(one.body["kind"], "PartialObjectMetadata");
    let mut w = h
        .watch(
            &format!("{PODS}?watch=1&resourceVersion={rv}"),
            Some(accept),
        )
        .await;
    assert_eq!(
        h.delete(&format!("{PODS}/m"), None).await.status,
        StatusCode::OK
    );
    let ev = w.next_change().await.expect("event");
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
}
