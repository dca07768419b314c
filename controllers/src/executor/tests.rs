//! The executor's `updateReplicaSetStatus` and EndpointSlice writes against a scripted API
//! server.

use super::*;
use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use std::sync::Arc;

/// One request the fake server saw: method, path, and the body's resourceVersion and
/// `status.replicas` (for PUTs).
type Seen = (String, String, Option<String>, Option<i64>);

/// A client whose server answers the first `conflicts` status PUTs with 409, GETs with the
/// ReplicaSet at resourceVersion "7", and other PUTs with their body.
fn scripted_client(conflicts: usize) -> (Client, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let log = seen.clone();
    let remaining = Arc::new(Mutex::new(conflicts));
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let log = log.clone();
        let remaining = remaining.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            log.lock().expect("log").push((
                method.clone(),
                path,
                body["metadata"]["resourceVersion"]
                    .as_str()
                    .map(String::from),
                body["status"]["replicas"].as_i64(),
            ));
            let (code, answer) = if method == "DELETE" {
                let ok = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200
                });
                (200, ok)
            } else if method == "GET" {
                let mut rs = serde_json::json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
                    "status": {"replicas": 1}
                });
                rs["spec"] = serde_json::json!({"selector": {}});
                (200, rs)
            } else {
                let mut left = remaining.lock().expect("remaining");
                if *left > 0 {
                    *left -= 1;
                    (
                        409,
                        serde_json::json!({
                            "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "Conflict", "code": 409,
                            "message": "Operation cannot be fulfilled on replicasets.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
                        }),
                    )
                } else {
                    (200, body)
                }
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&answer).unwrap_or_default(),
                ))
                .expect("response");
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    (Client::new(service, "default"), seen)
}

fn executor(client: Client) -> Executor {
    let sink = Arc::new(client::events::ApiEventSink::new(client.clone()));
    let (recorder, _broadcaster) =
        client::events::new_recorder(sink, "replicaset-controller", client::TokioClock::shared());
    Executor::new(client, recorder)
}

fn stale_replica_set() -> ReplicaSet {
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("web".into());
    rs.metadata.namespace = Some("default".into());
    rs.metadata.resource_version = Some("5".into());
    rs.status = Some(ReplicaSetStatus {
        replicas: 3,
        ..Default::default()
    });
    rs
}

#[tokio::test]
async fn a_conflicting_status_update_is_retried_once_on_the_latest_version() {
    let (client, seen) = scripted_client(1);
    let outcome = executor(client)
        .execute(
            vec![Action::UpdateReplicaSetStatus(
                Box::new(stale_replica_set()),
            )],
            None,
        )
        .await;
    assert!(outcome.is_ok(), "{:?}", outcome.err().map(|f| f.error));
    let seen = seen.lock().expect("seen").clone();
    let path = "/apis/apps/v1/namespaces/default/replicasets/web";
    let status = format!("{path}/status");
    assert_eq!(
        seen,
        vec![
            ("PUT".into(), status.clone(), Some("5".into()), Some(3)),
            ("GET".into(), path.into(), None, None),
            // Our status on the latest version.
            ("PUT".into(), status, Some("7".into()), Some(3)),
        ]
    );
}

#[tokio::test]
async fn a_second_failure_is_returned_for_the_rate_limited_requeue() {
    let (client, seen) = scripted_client(2);
    let failure = executor(client)
        .execute(
            vec![Action::UpdateReplicaSetStatus(
                Box::new(stale_replica_set()),
            )],
            None,
        )
        .await
        .expect_err("two conflicts");
    assert!(failure.error.is_conflict(), "{}", failure.error);
    assert_eq!(
        seen.lock().expect("seen").len(),
        3,
        "PUT, GET, PUT: one retry only"
    );
}

#[tokio::test]
async fn endpoint_slice_writes_are_reported_for_the_tracker() {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let (client, seen) = scripted_client(0);
    let slice = |name: Option<&str>| {
        let mut s = EndpointSlice {
            address_type: "IPv4".into(),
            ..Default::default()
        };
        s.metadata.namespace = Some("default".into());
        s.metadata.generate_name = Some("web-".into());
        s.metadata.name = name.map(String::from);
        s
    };
    let outcome = executor(client)
        .execute(
            vec![
                Action::CreateEndpointSlice(Box::new(slice(None))),
                Action::UpdateEndpointSlice(Box::new(slice(Some("web-abcde")))),
                Action::DeleteEndpointSlice(Box::new(slice(Some("web-fghij")))),
            ],
            None,
        )
        .await
        .unwrap_or_else(|f| panic!("{}", f.error));
    let path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let seen: Vec<(String, String)> = seen
        .lock()
        .expect("seen")
        .iter()
        .map(|(m, p, _, _)| (m.clone(), p.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("POST".into(), path.into()),
            ("PUT".into(), format!("{path}/web-abcde")),
            ("DELETE".into(), format!("{path}/web-fghij")),
        ]
    );
    assert_eq!(outcome.endpoint_slices.len(), 2);
    assert_eq!(outcome.deleted_endpoint_slices.len(), 1);
    assert_eq!(outcome.writes, 3);
}
