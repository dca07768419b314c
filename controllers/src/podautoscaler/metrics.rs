//! Where pod metrics come from: the [`MetricsSource`] trait (a fake in tests,
//! [`KubeMetricsSource`] in the cluster: the `metrics.k8s.io/v1beta1` PodMetrics list) and the
//! per-pod sum of one resource over the pod's containers.
//!
//! Mirrors `pkg/controller/podautoscaler/metrics/client.go` (`resourceMetricsClient.
//! GetResourceMetric`, `getPodMetrics`, `getContainerMetrics`): a pod is left out when one of
//! its containers reports no value for the resource.
//!
//! ```text
//!   GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods?labelSelector={scale's selector}
//!     200 PodMetricsList ─▶ Vec<PodMetrics>
//!     404 (no metrics API served) ─▶ "the server could not find the requested resource
//!                                     (get pods.metrics.k8s.io)", client-go's words
//! ```
//!
//! A metrics-server (or any other provider of the API) plugs in by serving that path; another
//! source implements [`MetricsSource`] and is given to
//! [`super::controller::HorizontalController::new`].

use super::replica_calculator::PodMetric;
use apimachinery::resource::quantity::Quantity;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;

/// One pod's entry of a `PodMetricsList`.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMetrics {
    /// The pod's name.
    pub name: String,
    /// When the sample was taken.
    pub timestamp: Timestamp,
    /// The window the sample averages over.
    pub window: SignedDuration,
    /// Each container's name and usage (resource name → milli-units).
    pub containers: Vec<(String, BTreeMap<String, i64>)>,
}

/// A source of pod metrics: lists the metrics of the pods in `namespace` matching the label
/// selector `selector` (in `labels.Selector` string form).
pub trait MetricsSource: Send + Sync {
    /// The PodMetrics of the selected pods, or the error text.
    fn pod_metrics(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Vec<PodMetrics>, String>> + Send;
}

/// [`MetricsSource`] over the cluster's `metrics.k8s.io/v1beta1` API (the resource metrics
/// client of kube-controller-manager).
#[derive(Clone)]
pub struct KubeMetricsSource {
    client: kube::Client,
}

impl KubeMetricsSource {
    /// A source reading through `client`.
    pub fn new(client: kube::Client) -> Self {
        KubeMetricsSource { client }
    }
}

/// client-go's words for a failed list of `pods.metrics.k8s.io`: a 404 without a `Status`
/// body (no API served at the path) is `the server could not find the requested resource
/// (get pods.metrics.k8s.io)`; otherwise the server's message.
pub fn list_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            "the server could not find the requested resource (get pods.metrics.k8s.io)".into()
        }
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        other => other.to_string(),
    }
}

impl MetricsSource for KubeMetricsSource {
    async fn pod_metrics(
        &self,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<PodMetrics>, String> {
        let mut uri = pod_metrics_path(namespace);
        if !selector.is_empty() {
            uri.push_str("?labelSelector=");
            uri.push_str(&percent_encode(selector));
        }
        let request = http::Request::get(uri)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let body: Value = self
            .client
            .request(request)
            .await
            .map_err(|e| list_error_text(&e))?;
        parse_pod_metrics_list(&body)
    }
}

/// Percent-encodes a label selector for a query string.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The path the cluster source GETs: `/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods`.
pub fn pod_metrics_path(namespace: &str) -> String {
    format!("/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods")
}

/// Reads a `metrics.k8s.io/v1beta1` `PodMetricsList` JSON body.
pub fn parse_pod_metrics_list(body: &Value) -> Result<Vec<PodMetrics>, String> {
    let items = body
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| "PodMetricsList without items".to_string())?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let timestamp = item
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
            .ok_or_else(|| format!("PodMetrics {name}: bad timestamp"))?;
        let window = item
            .get("window")
            .and_then(Value::as_str)
            .and_then(parse_go_seconds)
            .unwrap_or(SignedDuration::from_secs(30));
        let mut containers = Vec::new();
        for c in item
            .get("containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let cname = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut usage = BTreeMap::new();
            for (res, q) in c
                .get("usage")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if let Some(q) = q.as_str().and_then(|q| Quantity::parse(q).ok()) {
                    usage.insert(res.clone(), q.milli_value());
                }
            }
            containers.push((cname, usage));
        }
        out.push(PodMetrics {
            name: name.to_string(),
            timestamp,
            window,
            containers,
        });
    }
    Ok(out)
}

/// A Go duration of whole or fractional seconds (`30s`, `1m0s`, `15.5s`), as metrics-server writes windows.
fn parse_go_seconds(s: &str) -> Option<SignedDuration> {
    let (mins, rest) = match s.split_once('m') {
        Some((m, r)) if !m.contains('.') => (m.parse::<i64>().ok()?, r),
        _ => (0, s),
    };
    let secs = if rest.is_empty() {
        0.0
    } else {
        rest.strip_suffix('s')?.parse::<f64>().ok()?
    };
    Some(SignedDuration::from_secs(mins * 60) + SignedDuration::from_secs_f64(secs))
}

/// `GetResourceMetric`: each pod's usage of `resource` (of `container` only, when given),
/// leaving out pods where a container lacks the value.
pub fn resource_metric(
    pods: &[PodMetrics],
    resource: &str,
    container: Option<&str>,
) -> BTreeMap<String, PodMetric> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut total = 0i64;
        let mut found = false;
        let mut missing = false;
        for (name, usage) in &pod.containers {
            if container.is_some_and(|c| c != name) {
                continue;
            }
            match usage.get(resource) {
                Some(v) => {
                    total += v;
                    found = true;
                }
                None => missing = true,
            }
        }
        if found && !missing {
            out.insert(
                pod.name.clone(),
                PodMetric {
                    value: total,
                    timestamp: pod.timestamp,
                    window: pod.window,
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_pod_metrics_list_and_sums_containers() {
        let body = json!({"kind": "PodMetricsList", "items": [
            {"metadata": {"name": "web-a"}, "timestamp": "2026-01-01T00:00:00Z", "window": "30s",
             "containers": [{"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
                            {"name": "side", "usage": {"cpu": "50m", "memory": "1Mi"}}]},
            {"metadata": {"name": "web-b"}, "timestamp": "2026-01-01T00:00:00Z", "window": "1m0s",
             "containers": [{"name": "app", "usage": {"memory": "64Mi"}}]}
        ]});
        let pods = parse_pod_metrics_list(&body).unwrap();
        assert_eq!(pods[1].window, SignedDuration::from_secs(60));
        let cpu = resource_metric(&pods, "cpu", None);
        assert_eq!(cpu.len(), 1, "web-b reports no cpu and is left out");
        assert_eq!(cpu["web-a"].value, 300);
        assert_eq!(
            resource_metric(&pods, "cpu", Some("side"))["web-a"].value,
            50
        );
        assert_eq!(
            pod_metrics_path("ns1"),
            "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods"
        );
    }

    #[test]
    fn selectors_are_percent_encoded() {
        assert_eq!(
            percent_encode("app=web,tier in (a,b)"),
            "app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
        );
    }

    #[test]
    fn a_missing_metrics_api_is_worded_as_client_go_words_it() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "NotFound")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert_eq!(
            list_error_text(&status(404, "404 page not found")),
            "the server could not find the requested resource (get pods.metrics.k8s.io)"
        );
        assert_eq!(
            list_error_text(&status(503, "service unavailable")),
            "service unavailable"
        );
    }
}
