//! API aggregation against a stand-in aggregated server on a loopback socket: an APIService
//! whose Service and EndpointSlice name it turns Available, its group shows in discovery,
//! requests reach it with the user in `X-Remote-*` headers (never the client's credentials),
//! and when it is gone its group answers 503 and the APIService says why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::common::Harness;

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

/// What the stand-in saw: each request's path with query and its headers.
type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

/// A stand-in aggregated server for `widgets.example.com/v1`: its resource list, and any
/// other path answered with the path and the `X-Remote-User` it got.
async fn backend(stop: CancellationToken) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let log = log.clone();
        async move {
            let path = uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((path.clone(), headers.clone()));
            let body = if uri.path() == "/apis/widgets.example.com/v1" {
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "widgets.example.com/v1",
                       "resources": [{"name": "widgets", "singularName": "", "namespaced": true, "kind": "Widget", "verbs": ["get", "list"]}]})
            } else {
                json!({"path": path, "user": headers.get("x-remote-user").and_then(|v| v.to_str().ok())})
            };
            axum::Json(body)
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    });
    (port, seen)
}

async fn register(h: &Harness, port: u16) {
    let svc = h
        .post(
            "/api/v1/namespaces/kube-system/services",
            &json!({"metadata": {"name": "widgets"},
                    "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
        )
        .await;
    assert_eq!(svc.status, StatusCode::CREATED, "{:?}", svc.body);
    let slice = h
        .post(
            "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
            &json!({"metadata": {"name": "widgets", "labels": {"kubernetes.io/service-name": "widgets"}},
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": ["192.0.2.9"], "conditions": {"ready": true}}],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
        )
        .await;
    assert_eq!(slice.status, StatusCode::CREATED, "{:?}", slice.body);
    let api = h.post(APISERVICES, &apiservice("widgets")).await;
    assert_eq!(api.status, StatusCode::CREATED, "{:?}", api.body);
}

fn apiservice(service: &str) -> Value {
    json!({"metadata": {"name": "v1.widgets.example.com"},
           "spec": {"group": "widgets.example.com", "version": "v1", "groupPriorityMinimum": 100,
                    "versionPriority": 100, "insecureSkipTLSVerify": true,
                    "service": {"namespace": "kube-system", "name": service}}})
}

/// The APIService's `Available` condition once `ok` accepts it (within 15 s).
async fn condition_when(h: &Harness, name: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..300 {
        let got = h.get(&format!("{APISERVICES}/{name}")).await;
        let c = got.body["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .cloned()
            .unwrap_or_default();
        if ok(&c) {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("APIService {name} never reached the expected condition");
}

#[tokio::test]
async fn an_available_apiservice_is_discovered_and_proxied_with_the_user() {
    let h = Harness::new().await;
    let stop = CancellationToken::new();
    let (port, seen) = backend(stop.clone()).await;
    // The built-in groups are registered as local APIServices.
    let apps = h.get(&format!("{APISERVICES}/v1.apps")).await;
    assert_eq!(apps.status, StatusCode::OK);
    assert_eq!(apps.body["status"]["conditions"][0]["reason"], "Local");
    register(&h, port).await;
    let c = condition_when(&h, "v1.widgets.example.com", |c| c["status"] == "True").await;
    assert_eq!(c["reason"], "Passed");
    assert_eq!(c["message"], "all checks passed");
    // The discovery check came as the aggregator.
    {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        let (path, headers) = seen.first().expect("a discovery check");
        assert_eq!(path, "/apis/widgets.example.com/v1");
        assert_eq!(headers["x-remote-user"], "system:kube-aggregator");
        assert_eq!(headers["x-remote-group"], "system:masters");
    }
    // Discovery: legacy and aggregated.
    let groups = h.get("/apis").await;
    assert!(
        groups.body["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["name"] == "widgets.example.com")),
        "{:?}",
        groups.body
    );
    let group = h.get("/apis/widgets.example.com").await;
    assert_eq!(group.status, StatusCode::OK);
    assert_eq!(
        group.body["preferredVersion"]["groupVersion"],
        "widgets.example.com/v1"
    );
    let aggregated = h
        .get_as(
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )
        .await;
    let item = aggregated.body["items"]
        .as_array()
        .and_then(|i| {
            i.iter()
                .find(|x| x["metadata"]["name"] == "widgets.example.com")
        })
        .cloned()
        .expect("the group in aggregated discovery");
    assert_eq!(item["versions"][0]["resources"][0]["resource"], "widgets");
    assert_eq!(
        item["versions"][0]["resources"][0]["responseKind"]["group"],
        "widgets.example.com"
    );
    // A proxied request: the path and query as sent, the user (after impersonation) in
    // X-Remote-*, no impersonation headers nor a client's own X-Remote-*.
    let resp = h
        .raw(
            axum::http::Method::GET,
            "/apis/widgets.example.com/v1/namespaces/default/widgets?labelSelector=a%3Db",
            &[
                ("impersonate-user", "alice"),
                ("impersonate-group", "devs"),
                ("x-remote-user", "mallory"),
            ],
            Vec::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{:?}", resp.body);
    assert_eq!(
        resp.body["path"],
        "/apis/widgets.example.com/v1/namespaces/default/widgets?labelSelector=a%3Db"
    );
    let (_, headers) = seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .last()
        .cloned()
        .expect("the proxied request");
    assert_eq!(headers["x-remote-user"], "alice");
    let groups: Vec<&str> = headers
        .get_all("x-remote-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(groups.contains(&"devs"), "{groups:?}");
    assert!(headers.get("impersonate-user").is_none());
    assert_eq!(headers["host"], format!("192.0.2.9:{port}").as_str());

    // The backend goes away: its group answers 503, and the next check says why.
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let down = h.get("/apis/widgets.example.com/v1/widgets").await;
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
    let c = condition_when(&h, "v1.widgets.example.com", |c| c["status"] == "False").await;
    assert_eq!(c["reason"], "FailedDiscoveryCheck");
    assert!(
        c["message"].as_str().is_some_and(|m| {
            m.starts_with(&format!(
            "failing or missing response from http://192.0.2.9:{port}/apis/widgets.example.com/v1: "
        )) && m.contains("connection refused")
        }),
        "{c}"
    );
    let unavailable = h.get("/apis/widgets.example.com/v1/widgets").await;
    assert_eq!(unavailable.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(unavailable.body, json!("service unavailable\n"));
    assert_eq!(
        unavailable.headers["content-type"],
        "text/plain; charset=utf-8"
    );
    h.shutdown.cancel();
}

#[tokio::test]
async fn apiservices_are_validated_and_a_missing_service_is_reported() {
    let h = Harness::new().await;
    let mut bad = apiservice("widgets");
    bad["metadata"]["name"] = json!("widgets");
    let refused = h.post(APISERVICES, &bad).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.body["message"],
        "APIService.apiregistration.k8s.io \"widgets\" is invalid: metadata.name: Invalid value: \"widgets\": must be `spec.version+\".\"+spec.group`: \"v1.widgets.example.com\""
    );
    let created = h.post(APISERVICES, &apiservice("nowhere")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let again = h.post(APISERVICES, &apiservice("nowhere")).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let c = condition_when(&h, "v1.widgets.example.com", |c| c["status"] == "False").await;
    assert_eq!(c["reason"], "ServiceNotFound");
    assert_eq!(
        c["message"],
        "service/nowhere in \"kube-system\" is not present"
    );
    let resp = h.get("/apis/widgets.example.com/v1/widgets").await;
    assert_eq!(resp.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.body, json!("service unavailable\n"));
    // Listed, with its reason, in the table kubectl asks for.
    let table = h.get_as(APISERVICES, crate::common::TABLE).await;
    let row = table.body["rows"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["cells"][0] == "v1.widgets.example.com"))
        .cloned()
        .expect("a row");
    assert_eq!(row["cells"][1], "kube-system/nowhere");
    assert_eq!(row["cells"][2], "False (ServiceNotFound)");
    h.shutdown.cancel();
}
