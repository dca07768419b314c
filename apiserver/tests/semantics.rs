//! Behaviour tests through the router: selectors, pagination, watch, tables, discovery,
//! subresources, deletion, field validation, server-owned metadata.

mod common;

use apiserver::ResourceInfo;
use apiserver::gvk::GroupVersionKind;
use apiserver::registry::Subresource;
use apiserver::strategy::{FieldError, FieldErrorKind, Strategy, TableColumn};
use axum::http::{Method, StatusCode};
use common::{Harness, TABLE};
use serde_json::{Value, json};
use std::sync::Arc;

const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

/// A kind with rules, so registry behaviour that depends on a strategy can be tested before
/// (and independently of) the built-in strategies.
struct WidgetStrategy;

impl Strategy for WidgetStrategy {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new("example.com", "v1", "Widget")
    }
    fn has_status_subresource(&self) -> bool {
        true
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        obj.get("spec")
            .and_then(Value::as_object)
            .map(|s| {
                s.keys()
                    .filter(|k| *k != "size" && *k != "color")
                    .map(|k| format!("spec.{k}"))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn default(&self, obj: &mut Value) -> Result<(), String> {
        if let Some(s) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            s.retain(|k, _| k == "size" || k == "color");
            if s.get("size").is_some_and(|v| !v.is_i64()) {
                return Err("json: cannot unmarshal string into Go struct field WidgetSpec.spec.size of type int32".into());
            }
        }
        Ok(())
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(size) = obj.pointer("/spec/size").and_then(Value::as_i64)
            && size < 0
        {
            errs.push(FieldError {
                kind: FieldErrorKind::Invalid,
                field: "spec.size".into(),
                value: Some(size.to_string()),
                detail: "must be greater than or equal to 0".into(),
            });
        }
        errs
    }
    fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
        vec![(
            "spec.color",
            obj.pointer("/spec/color")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )]
    }
    fn table_columns(&self) -> Vec<TableColumn> {
        vec![TableColumn {
            name: "Color",
            type_: "string",
            format: "",
            description: "c",
            priority: 0,
        }]
    }
    fn table_row(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        vec![obj.pointer("/spec/color").cloned().unwrap_or(Value::Null)]
    }
}

async fn with_widgets() -> Harness {
    let h = Harness::new().await;
    let mut row = ResourceInfo::new("example.com", "v1", "Widget", "widgets", true);
    row.subresources = vec![Subresource::Status, Subresource::Scale];
    row.reset_status_on_create = true;
    row.strategy = Arc::new(WidgetStrategy);
    h.state.registry().add(row);
    h
}

fn widget(name: &str, color: &str, labels: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": labels}, "spec": {"size": 1, "color": color}})
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

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
    assert_eq!(
        names(
            &h.get(&format!("{WIDGETS}?fieldSelector=metadata.name%3Dw2"))
                .await
                .body
        ),
        vec!["w2"]
    );
    assert_eq!(
        names(
            &h.get(&format!("{WIDGETS}?fieldSelector=spec.color%3D%3Dred"))
                .await
                .body
        ),
        vec!["w1"]
    );
    assert_eq!(
        names(
            &h.get(&format!("{WIDGETS}?fieldSelector=spec.color!%3Dred"))
                .await
                .body
        ),
        vec!["w2"]
    );
    assert_eq!(
        names(
            &h.get(&format!(
                "{WIDGETS}?fieldSelector=metadata.namespace%3Ddefault"
            ))
            .await
            .body
        )
        .len(),
        2
    );
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
    let lonely = h.get(&format!("{PODS}?resourceVersionMatch=Exact")).await;
    assert_eq!(lonely.status, StatusCode::BAD_REQUEST);
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
    assert_eq!(
        e2["object"]["columnDefinitions"].as_array().map(Vec::len),
        Some(0)
    );
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

#[tokio::test]
async fn field_validation_strict_warn_ignore() {
    let h = with_widgets().await;
    let mut w = widget("fv", "red", json!({}));
    w["spec"]["foo"] = json!(1);
    let strict = h
        .post(&format!("{WIDGETS}?fieldValidation=Strict"), &w)
        .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.foo\""
    );
    let warn = h.post(&format!("{WIDGETS}?fieldValidation=Warn"), &w).await;
    assert_eq!(warn.status, StatusCode::CREATED);
    assert_eq!(
        warn.headers["warning"],
        "299 - \"unknown field \\\"spec.foo\\\"\""
    );
    assert!(warn.body["spec"].get("foo").is_none());
    w["metadata"]["name"] = json!("fv2");
    let ignore = h
        .post(&format!("{WIDGETS}?fieldValidation=Ignore"), &w)
        .await;
    assert_eq!(ignore.status, StatusCode::CREATED);
    assert!(ignore.headers.get("warning").is_none());
    assert_eq!(
        h.post(&format!("{WIDGETS}?fieldValidation=Bogus"), &w)
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn defaulting_and_validation_errors_are_statuses() {
    let h = with_widgets().await;
    let mut bad_type = widget("t", "red", json!({}));
    bad_type["spec"]["size"] = json!("big");
    let r = h.post(WIDGETS, &bad_type).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["message"].as_str().is_some_and(|m| m.starts_with(
        "Widget in version \"v1\" cannot be handled as a Widget: json: cannot unmarshal"
    )));
    let mut neg = widget("n", "red", json!({}));
    neg["spec"]["size"] = json!(-1);
    let inv = h.post(WIDGETS, &neg).await;
    assert_eq!(inv.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        inv.body["message"],
        "Widget.example.com \"n\" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        inv.body["details"],
        json!({"name": "n", "group": "example.com", "kind": "Widget",
        "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.size"}]})
    );
    let other_ns = h
        .post(
            WIDGETS,
            &json!({"metadata": {"name": "x", "namespace": "kube-system"}, "spec": {}}),
        )
        .await;
    assert_eq!(other_ns.status, StatusCode::BAD_REQUEST);
    let wrong_name = h
        .put(&format!("{WIDGETS}/a"), &widget("b", "red", json!({})))
        .await;
    assert_eq!(wrong_name.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn generate_name_and_server_owned_metadata() {
    let h = Harness::new().await;
    let r = h.post(PODS, &json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let name = r.body["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    // uid and creationTimestamp cannot be changed by an update.
    let mut o = r.body.clone();
    o["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    o["metadata"].as_object_mut().map(|m| m.remove("uid"));
    let u = h.put(&format!("{PODS}/{name}"), &o).await;
    assert_eq!(u.status, StatusCode::OK);
    assert_eq!(
        u.body["metadata"]["creationTimestamp"],
        r.body["metadata"]["creationTimestamp"]
    );
    assert_eq!(u.body["metadata"]["uid"], r.body["metadata"]["uid"]);
    o["metadata"]["uid"] = json!("other");
    o["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    assert_eq!(
        h.put(&format!("{PODS}/{name}"), &o).await.status,
        StatusCode::CONFLICT
    );
    // Missing Content-Type means JSON (Python client); unknown query parameters are ignored.
    let body = serde_json::to_vec(&pod("nocontent", json!({}))).expect("json");
    let r = h
        .raw(
            Method::POST,
            &format!("{PODS}?pretty=true&timeout=32s"),
            &[],
            body,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Protobuf Accept gets JSON.
    let proto = h
        .get_as(
            &format!("{PODS}/nocontent"),
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .await;
    assert_eq!(proto.body["metadata"]["name"], "nocontent");
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
async fn concurrent_updates_from_one_version_let_exactly_one_win() {
    let h = with_widgets().await;
    let created = h.post(WIDGETS, &widget("c", "red", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let app = h.app.clone();
        let mut body = created.body.clone();
        body["spec"]["size"] = json!(i + 10);
        tasks.spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::builder()
                .method(Method::PUT)
                .uri(format!("{WIDGETS}/c"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(
                    serde_json::to_vec(&body).expect("json"),
                ))
                .expect("request");
            app.oneshot(req).await.expect("infallible").status()
        });
    }
    let mut ok = 0;
    let mut conflicts = 0;
    while let Some(status) = tasks.join_next().await {
        match status.expect("task") {
            StatusCode::OK => ok += 1,
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, conflicts), (1, 7));
    assert_eq!(
        h.get(&format!("{WIDGETS}/c")).await.body["metadata"]["generation"],
        2
    );
}

#[tokio::test]
async fn patch_options_are_checked_before_patching() {
    let h = with_widgets().await;
    assert_eq!(
        h.post(WIDGETS, &widget("p", "red", json!({}))).await.status,
        StatusCode::CREATED
    );
    let force = h
        .patch(
            &format!("{WIDGETS}/p?force=true"),
            "application/merge-patch+json",
            &json!({}),
        )
        .await;
    assert_eq!(force.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(force.body["details"]["causes"][0]["field"], "force");
    let no_manager = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p"),
            &[("content-type", "application/apply-patch+yaml")],
            b"metadata: {name: p}".to_vec(),
        )
        .await;
    assert_eq!(no_manager.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        no_manager.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let bad_json = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p"),
            &[("content-type", "application/merge-patch+json")],
            b"{".to_vec(),
        )
        .await;
    assert_eq!(bad_json.status, StatusCode::BAD_REQUEST);
    let bad_yaml = h
        .raw(
            Method::PATCH,
            &format!("{WIDGETS}/p?fieldManager=m"),
            &[("content-type", "application/apply-patch+yaml")],
            b"a: [".to_vec(),
        )
        .await;
    assert_eq!(bad_yaml.status, StatusCode::BAD_REQUEST);
    let missing_ns = h
        .raw(
            Method::PATCH,
            "/apis/example.com/v1/namespaces/nope/widgets/p?fieldManager=m",
            &[("content-type", "application/apply-patch+yaml")],
            b"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: p}\n".to_vec(),
        )
        .await;
    assert_eq!(missing_ns.status, StatusCode::NOT_FOUND);
    assert_eq!(missing_ns.body["message"], "namespaces \"nope\" not found");
}
