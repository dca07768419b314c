//! The admin API through the router (`docs/faults.md`): faults stored in the ConfigMap and
//! reloaded on every write to it, the shorthands for pausing and stepping a controller,
//! controller reports and lab status, and a clear `Status` for every bad request.

use crate::common;

use axum::http::{Method, StatusCode};
use common::Harness;
use serde_json::{Value, json};

const FAULTS: &str = "/miniplane/v1/faults";
const FAULTS_CM: &str = "/api/v1/namespaces/kube-system/configmaps/miniplane-faults";

#[tokio::test]
async fn faults_are_stored_in_the_configmap_listed_and_cleared() {
    let h = Harness::new().await;
    let created = h
        .post(FAULTS, &json!({"kind": "StopHeartbeats", "node": "node-1"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["name"], "stop-heartbeats-node-1");
    assert!(created.body["created"].is_string());
    let cm = h.get(FAULTS_CM).await;
    let stored: Value =
        serde_json::from_str(cm.body["data"]["stop-heartbeats-node-1"].as_str().unwrap()).unwrap();
    assert_eq!(stored["kind"], "StopHeartbeats");
    // The ConfigMap write is in the trace, naming the change.
    let traced = h.get("/miniplane/v1/traces?spans=all").await;
    let spans = traced.body["spans"].as_array().unwrap();
    assert!(
        spans.iter().any(
            |s| s["attributes"]["fault"] == "inject stop-heartbeats-node-1"
                && s["attributes"]["resource"] == "configmaps"
        ),
        "{spans:?}"
    );
    // The same name again: 409 AlreadyExists.
    let again = h
        .post(FAULTS, &json!({"kind": "StopHeartbeats", "node": "node-1"}))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.body["reason"], "AlreadyExists");
    // An edit of the ConfigMap by hand is picked up too.
    let mut edited = cm.body.clone();
    edited["data"]["fail"] =
        json!(r#"{"kind":"FailWrites","code":500,"fraction":1.0,"resource":"secrets"}"#);
    assert_eq!(h.put(FAULTS_CM, &edited).await.status, StatusCode::OK);
    let list = h.get(FAULTS).await;
    let names: Vec<&str> = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fail", "stop-heartbeats-node-1"]);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let failed = h.post("/api/v1/namespaces/default/secrets", &secret).await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(failed.body["reason"], "InternalError");
    let one = h.delete(&format!("{FAULTS}/fail"), None).await;
    assert_eq!(
        (one.status, one.body["name"].as_str()),
        (StatusCode::OK, Some("fail"))
    );
    assert_eq!(
        h.post("/api/v1/namespaces/default/secrets", &secret)
            .await
            .status,
        StatusCode::CREATED
    );
    let all = h.delete(FAULTS, None).await;
    assert_eq!(all.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(h.get(FAULTS).await.body["items"], json!([]));
    let missing = h.delete(&format!("{FAULTS}/fail"), None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["message"], "faults \"fail\" not found");
}

#[tokio::test]
async fn bad_faults_and_bad_requests_get_a_clear_status() {
    let h = Harness::new().await;
    let cases = [
        (
            json!({"kind": "Nope"}),
            "invalid request body: unknown variant `Nope`",
        ),
        (
            json!({"kind": "FailWrites", "code": 418, "fraction": 1}),
            "invalid fault: code: Unsupported value: 418",
        ),
        (
            json!({"kind": "PauseController", "controller": "scheduler"}),
            "invalid fault: controller: Unsupported value: \"scheduler\"",
        ),
        (
            json!({"kind": "WatchEvents", "component": "kubelet", "delayMs": 99999}),
            "invalid fault: delayMs: Invalid value: 99999",
        ),
        (
            json!({"kind": "StopHeartbeats", "node": "node-1", "name": "Bad_Name"}),
            "invalid fault: name: Invalid value: \"Bad_Name\"",
        ),
    ];
    for (body, want) in cases {
        let resp = h.post(FAULTS, &body).await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{body}");
        let message = resp.body["message"].as_str().unwrap();
        assert!(
            message.starts_with(want),
            "{message} should start with {want}"
        );
    }
    let resp = h.raw(Method::POST, FAULTS, &[], b"{".to_vec()).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    let resp = h.raw(Method::PATCH, FAULTS, &[], Vec::new()).await;
    assert_eq!(resp.status, StatusCode::METHOD_NOT_ALLOWED);
    let resp = h.get("/miniplane/v1/nothing").await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    let resp = h
        .raw(
            Method::POST,
            "/miniplane/v1/controllers/scheduler/pause",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    let resp = h
        .raw(
            Method::POST,
            "/miniplane/v1/controllers/deployment/jump",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    let resp = h.get("/miniplane/v1/lab").await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn pause_step_resume_and_controller_reports() {
    let h = Harness::new().await;
    let step = "/miniplane/v1/controllers/deployment/step";
    let not_paused = h.raw(Method::POST, step, &[], Vec::new()).await;
    assert_eq!(not_paused.status, StatusCode::CONFLICT);
    let paused = h
        .raw(
            Method::POST,
            "/miniplane/v1/controllers/deployment/pause",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(paused.status, StatusCode::OK);
    assert_eq!(paused.body["name"], "pause-deployment");
    // Pausing twice is fine: the same fault.
    let twice = h
        .raw(
            Method::POST,
            "/miniplane/v1/controllers/deployment/pause",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(twice.body["name"], "pause-deployment");
    let stepped = h.raw(Method::POST, step, &[], Vec::new()).await;
    assert_eq!(stepped.body["steps"], 1);
    let stepped = h
        .send(Method::POST, step, "application/json", &json!({"count": 3}))
        .await;
    assert_eq!(stepped.body["steps"], 4);
    let too_many = h
        .send(Method::POST, step, "application/json", &json!({"count": 0}))
        .await;
    assert_eq!(too_many.status, StatusCode::BAD_REQUEST);
    // A report from the controller-manager, shown as reported.
    let report = json!({"items": [{"name": "deployment", "component": "", "paused": true,
        "stepsPending": 0, "depth": 2, "inFlight": 1, "waiting": 0, "adds": 5, "retries": 1,
        "syncs": 3, "syncErrors": 0, "queued": ["default/a", "default/b"], "processing": ["default/c"]}]});
    let put = h
        .put(
            "/miniplane/v1/components/kube-controller-manager/controllers",
            &report,
        )
        .await;
    assert_eq!(put.status, StatusCode::OK);
    let list = h.get("/miniplane/v1/controllers").await;
    let c = &list.body["items"][0];
    assert_eq!(c["component"], "kube-controller-manager");
    assert_eq!(
        (c["paused"].as_bool(), c["depth"].as_u64()),
        (Some(true), Some(2))
    );
    assert!(c["reportedAt"].is_string());
    let resumed = h
        .raw(
            Method::POST,
            "/miniplane/v1/controllers/deployment/resume",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(resumed.body["items"][0]["name"], "pause-deployment");
    assert_eq!(h.get(FAULTS).await.body["items"], json!([]));
    // Lab status round trip.
    let lab = json!({"lab": "03-workqueue", "title": "The workqueue", "step": 1, "steps": 4,
        "stepTitle": "Pause", "checks": [], "done": false, "checkedAt": "2026-11-30T15:40:01Z"});
    assert_eq!(
        h.put("/miniplane/v1/lab", &lab).await.status,
        StatusCode::OK
    );
    assert_eq!(h.get("/miniplane/v1/lab").await.body, lab);
}
