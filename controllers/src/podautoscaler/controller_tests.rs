//! The shell against a scripted API server and a fake [`MetricsSource`]: what it reads,
//! the `/scale` it writes and the status it sends.

use super::*;
use crate::podautoscaler::metrics::PodMetrics;
use kube::Client;
use std::collections::BTreeMap;

/// Requests the scripted server saw: method, path and JSON body.
type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

/// A server holding Deployment `web` at 2 replicas selecting `app=web` (or answering 404 for
/// it when `missing`), accepting every write.
fn scripted_client(missing: bool) -> (Client, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            log.lock()
                .expect("log")
                .push((method.clone(), path.clone(), body.clone()));
            let scale = path == "/apis/apps/v1/namespaces/default/deployments/web/scale";
            let (code, answer) = match (method.as_str(), scale) {
                ("GET", true) if missing => (
                    404,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "NotFound", "code": 404,
                        "message": "deployments.apps \"web\" not found"}),
                ),
                ("GET", true) => (
                    200,
                    serde_json::json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "5"},
                        "spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "app=web"}}),
                ),
                _ => (200, body),
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

/// A metrics source answering from a fixed list (or error), recording what it was asked.
#[derive(Clone)]
struct FakeSource {
    answer: Result<Vec<PodMetrics>, String>,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl MetricsSource for FakeSource {
    async fn pod_metrics(&self, ns: &str, selector: &str) -> Result<Vec<PodMetrics>, String> {
        self.asked
            .lock()
            .expect("asked")
            .push((ns.into(), selector.into()));
        self.answer.clone()
    }
}

fn pod(name: &str, cpu_request: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": cpu_request, "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:05Z"}]}
    }))
    .expect("a pod")
}

fn hpa() -> HorizontalPodAutoscaler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "9"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 50}}}]}
    }))
    .expect("an autoscaler")
}

/// The controller over the scripted server, its caches holding `hpa` and two `web` pods.
fn controller(client: Client, source: FakeSource) -> (HorizontalController<FakeSource>, ObjectKey) {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let sink = Arc::new(client::events::ApiEventSink::new(client.clone()));
    let (recorder, _broadcaster) = client::events::new_recorder(
        sink,
        "horizontal-pod-autoscaler",
        client::TokioClock::shared(),
    );
    let c = HorizontalController::new(
        &factory,
        Executor::new(client, recorder),
        source,
        DEFAULT_SYNC_PERIOD,
    );
    let autoscaler = hpa();
    factory
        .informer::<HorizontalPodAutoscaler>()
        .indexer()
        .add(Arc::new(autoscaler.clone()));
    for name in ["web-0", "web-1"] {
        factory
            .informer::<Pod>()
            .indexer()
            .add(Arc::new(pod(name, "500m")));
    }
    (c, ObjectKey::of(&autoscaler))
}

fn usage(cpu: i64) -> Vec<PodMetrics> {
    ["web-0", "web-1"]
        .iter()
        .map(|name| PodMetrics {
            name: (*name).into(),
            timestamp: jiff::Timestamp::now(),
            window: jiff::SignedDuration::from_secs(30),
            containers: vec![("app".into(), BTreeMap::from([("cpu".to_string(), cpu)]))],
        })
        .collect()
}

fn writes(seen: &Seen, path_suffix: &str) -> Vec<serde_json::Value> {
    seen.lock()
        .expect("seen")
        .iter()
        .filter(|(m, p, _)| m == "PUT" && p.ends_with(path_suffix))
        .map(|(_, _, b)| b.clone())
        .collect()
}

fn condition(status: &serde_json::Value, type_: &str) -> (String, String, String) {
    let c = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or_default();
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"), text("message"))
}

#[tokio::test]
async fn a_fake_metrics_source_drives_a_scale_up_write() {
    let (client, seen) = scripted_client(false);
    let source = FakeSource {
        answer: Ok(usage(450)),
        asked: Arc::default(),
    };
    let (c, key) = controller(client, source.clone());
    assert_eq!(
        c.sync(&key).await.expect("syncs"),
        Some(DEFAULT_SYNC_PERIOD)
    );
    assert_eq!(
        source.asked.lock().expect("asked").as_slice(),
        [("default".to_string(), "app=web".to_string())]
    );
    // 2 pods at 450m of 500m = 90% against 50%: ceil(2 × 90 / 50) = ceil(3.6) = 4.
    let scales = writes(&seen, "/deployments/web/scale");
    assert_eq!(scales.len(), 1);
    assert_eq!(scales[0]["spec"]["replicas"], 4);
    assert_eq!(scales[0]["metadata"]["resourceVersion"], "5");
    let statuses = writes(&seen, "/horizontalpodautoscalers/web/status");
    assert_eq!(statuses.len(), 1);
    let status = &statuses[0]["status"];
    assert_eq!(
        (
            status["currentReplicas"].clone(),
            status["desiredReplicas"].clone()
        ),
        (2.into(), 4.into())
    );
    assert_eq!(
        condition(status, "AbleToScale"),
        (
            "True".into(),
            "SucceededRescale".into(),
            "the HPA controller was able to update the target scale to 4".into()
        )
    );
    assert_eq!(condition(status, "ScalingActive").1, "ValidMetricFound");
    assert_eq!(
        status["currentMetrics"][0]["resource"]["current"],
        serde_json::json!({"averageUtilization": 90, "averageValue": "450m"})
    );
    assert!(status["lastScaleTime"].is_string());
}

#[tokio::test]
async fn without_a_metrics_api_nothing_is_scaled_and_the_status_says_why() {
    let (client, seen) = scripted_client(false);
    let source = FakeSource {
        answer: Err(
            "the server could not find the requested resource (get pods.metrics.k8s.io)".into(),
        ),
        asked: Arc::default(),
    };
    let (c, key) = controller(client, source);
    assert_eq!(
        c.sync(&key).await.expect("syncs"),
        Some(DEFAULT_SYNC_PERIOD)
    );
    assert!(writes(&seen, "/scale").is_empty());
    let statuses = writes(&seen, "/horizontalpodautoscalers/web/status");
    let status = &statuses[0]["status"];
    assert_eq!(status["currentReplicas"], 2);
    assert_eq!(status["desiredReplicas"], 0);
    assert_eq!(
        condition(status, "ScalingActive"),
        (
            "False".into(),
            "FailedGetResourceMetric".into(),
            "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)".into()
        )
    );
    assert_eq!(condition(status, "AbleToScale").1, "SucceededGetScale");
}

#[tokio::test]
async fn a_missing_target_is_a_failed_get_scale() {
    let (client, seen) = scripted_client(true);
    let source = FakeSource {
        answer: Ok(usage(450)),
        asked: Arc::default(),
    };
    let (c, key) = controller(client, source.clone());
    assert_eq!(
        c.sync(&key).await.expect("syncs"),
        Some(DEFAULT_SYNC_PERIOD)
    );
    assert!(source.asked.lock().expect("asked").is_empty());
    let statuses = writes(&seen, "/horizontalpodautoscalers/web/status");
    assert_eq!(
        condition(&statuses[0]["status"], "AbleToScale"),
        (
            "False".into(),
            "FailedGetScale".into(),
            "the HPA controller was unable to get the target's current scale: deployments.apps \"web\" not found".into()
        )
    );
}

#[test]
fn pod_info_reads_phase_readiness_and_requests() {
    let info = pod_info(&pod("web-0", "250m"));
    assert_eq!(info.phase, "Running");
    assert_eq!(info.ready.as_ref().map(|r| r.0.as_str()), Some("True"));
    assert_eq!(info.requests[0].1["cpu"], 250);
    assert_eq!(info.requests[0].1["memory"], 64 * 1024 * 1024 * 1000);
    assert!(!info.deleting);
}
