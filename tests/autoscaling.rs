//! End to end: HorizontalPodAutoscalers. `kubectl autoscale` against the API server, the
//! controller-manager's horizontal pod autoscaler without a metrics API (no metrics-server):
//! the conditions, Events and status Kubernetes shows then; and both served versions,
//! autoscaling/v2 (stored) and autoscaling/v1 (converted), with Kubernetes' validation texts.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Value;

use crate::support;

use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

/// The first sync comes one sync period (15 s) after the autoscaler is created.
const SETTLE: Duration = Duration::from_secs(90);

/// What the metrics client says on a cluster that serves no `metrics.k8s.io`.
const NO_METRICS: &str = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)";

fn condition(hpa: &Value, type_: &str) -> Option<(String, String, String)> {
    let c = hpa["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), text("message")))
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn kubectl_autoscale_reports_the_missing_metrics_api_as_kubernetes_does() {
    let c = ProcessCluster::start(1);
    let s = &c.s;
    s.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    let out = s.kubectl_ok(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=5",
    ]);
    assert_eq!(
        out.trim(),
        "horizontalpodautoscaler.autoscaling/web autoscaled"
    );

    // Before the first sync: no current value, no replicas seen.
    let table = s.kubectl_ok(&["get", "hpa", "web"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        words(lines[0]),
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(
        words(lines[1])[..7],
        [
            "web",
            "Deployment/web",
            "cpu:",
            "<unknown>/50%",
            "1",
            "5",
            "0"
        ],
        "{table}"
    );

    // The controller finds the target's scale but no metrics API.
    let hpa = eventually("the ScalingActive condition", SETTLE, || {
        let hpa = s.kubectl_json(&["get", "hpa", "web"]);
        condition(&hpa, "ScalingActive").map(|_| hpa)
    });
    assert_eq!(
        condition(&hpa, "ScalingActive"),
        Some((
            "False".into(),
            "FailedGetResourceMetric".into(),
            format!("the HPA was unable to compute the replica count: {NO_METRICS}")
        )),
        "{hpa}"
    );
    assert_eq!(
        condition(&hpa, "AbleToScale"),
        Some((
            "True".into(),
            "SucceededGetScale".into(),
            "the HPA controller was able to get the target's current scale".into()
        )),
        "{hpa}"
    );
    assert_eq!(hpa["status"]["currentReplicas"], 2, "{hpa}");
    assert_eq!(hpa["status"]["desiredReplicas"], 0, "{hpa}");
    assert_eq!(
        hpa["status"]["currentMetrics"],
        serde_json::json!([{"type": ""}]),
        "{hpa}"
    );
    let table = s.kubectl_ok(&["get", "hpa", "web", "--no-headers"]);
    assert_eq!(
        words(&table)[..7],
        [
            "web",
            "Deployment/web",
            "cpu:",
            "<unknown>/50%",
            "1",
            "5",
            "2"
        ],
        "{table}"
    );

    // Its Warning Events, from the horizontal-pod-autoscaler.
    let computed = format!(
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {NO_METRICS}"
    );
    let events = eventually("both Warning Events", SETTLE, || {
        let list = s.kubectl_json(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=web",
        ]);
        let events: Vec<(String, String, String, String)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (
                    text(&e["type"]),
                    text(&e["reason"]),
                    text(&e["message"]),
                    text(&e["source"]["component"]),
                )
            })
            .collect();
        (events.len() >= 2).then_some(events)
    });
    for (reason, message) in [
        ("FailedGetResourceMetric", NO_METRICS.to_owned()),
        ("FailedComputeMetricsReplicas", computed),
    ] {
        assert!(
            events.contains(&(
                "Warning".into(),
                reason.into(),
                message,
                "horizontal-pod-autoscaler".into()
            )),
            "{reason}: {events:?}"
        );
    }
    let described = s.kubectl_ok(&["describe", "hpa", "web"]);
    assert!(described.contains("FailedGetResourceMetric"), "{described}");
    assert!(described.contains("SucceededGetScale"), "{described}");

    // The autoscaling/v1 view of the same object: the cpu target is v1's percentage, the
    // conditions ride in an annotation.
    let v1 = s.kubectl_json(&["get", "horizontalpodautoscalers.v1.autoscaling", "web"]);
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50, "{v1}");
    assert_eq!(v1["spec"]["minReplicas"], 1, "{v1}");
    assert_eq!(v1["spec"]["maxReplicas"], 5, "{v1}");
    assert_eq!(v1["status"]["currentReplicas"], 2, "{v1}");
    let conditions = v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/conditions"]
        .as_str()
        .unwrap_or_default();
    assert!(conditions.contains("FailedGetResourceMetric"), "{v1}");

    // Nothing was scaled; the sync's decision is in the autoscaler's trace.
    let deploy = s.kubectl_json(&["get", "deployment", "web"]);
    assert_eq!(deploy["spec"]["replicas"], 2);
    let decided = eventually("the sync in the autoscaler's trace", SETTLE, || {
        let list = s
            .get("/miniplane/v1/traces?object=horizontalpodautoscalers/default/web&limit=10")
            .json();
        list["traces"].as_array()?.iter().find_map(|t| {
            let id = t["traceId"].as_str()?;
            let trace = s.get(&format!("/miniplane/v1/traces/{id}")).json();
            trace["spans"].as_array()?.iter().find_map(|span| {
                (span["name"] == "sync horizontalpodautoscaler"
                    && span["summary"]
                        .as_str()
                        .is_some_and(|m| m.contains("metrics invalid")))
                .then(|| span.to_string())
            })
        })
    });
    assert!(decided.contains("Deployment/web: keep 2"), "{decided}");
    assert!(decided.contains("no count from the metrics"), "{decided}");
}

const V2_HPA: &str = "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: api
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
  minReplicas: 2
  maxReplicas: 8
  metrics:
  - type: Resource
    resource:
      name: memory
      target: {type: AverageValue, averageValue: 200Mi}
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 60}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 120
";

#[test]
fn both_versions_are_served_converted_and_validated_as_kubernetes_does() {
    let s = Server::start();
    // Discovery: v2 is the preferred version; `hpa`, namespaced, in `all`.
    let resources = s.kubectl_ok(&["api-resources", "--api-group=autoscaling"]);
    let row = resources
        .lines()
        .find(|l| l.starts_with("horizontalpodautoscalers"))
        .unwrap_or_default();
    assert_eq!(
        words(row),
        [
            "horizontalpodautoscalers",
            "hpa",
            "autoscaling/v2",
            "true",
            "HorizontalPodAutoscaler"
        ],
        "{resources}"
    );
    let explained = s.kubectl_ok(&["explain", "hpa"]);
    assert!(
        explained.lines().any(|l| words(l) == ["VERSION:", "v2"]),
        "{explained}"
    );
    let explained_v1 = s.kubectl_ok(&["explain", "hpa.spec", "--api-version=autoscaling/v1"]);
    assert!(
        explained_v1.contains("targetCPUUtilizationPercentage"),
        "{explained_v1}"
    );

    // A v2 object with what v1 cannot say: v1 keeps it in annotations.
    let run = s.create_yaml(V2_HPA);
    assert!(run.ok(), "{run}");
    let v2 = s.kubectl_json(&["get", "hpa", "api"]);
    assert_eq!(
        v2["spec"]["behavior"],
        serde_json::json!({
            "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 120, "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}),
        "{v2}"
    );
    let v1 = s.kubectl_json(&["get", "horizontalpodautoscalers.v1.autoscaling", "api"]);
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60, "{v1}");
    let annotations = &v1["metadata"]["annotations"];
    assert_eq!(
        annotations["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"200Mi"}}]"#,
        "{v1}"
    );
    assert!(
        annotations["autoscaling.alpha.kubernetes.io/behavior"]
            .as_str()
            .is_some_and(|b| b.contains(r#""ScaleDown":{"StabilizationWindowSeconds":120"#)),
        "{v1}"
    );

    // A patch through v1 changes the cpu target and keeps the memory metric it cannot see.
    let patched = s.kubectl_ok(&[
        "patch",
        "horizontalpodautoscalers.v1.autoscaling",
        "api",
        "--type=merge",
        "-p",
        r#"{"spec":{"targetCPUUtilizationPercentage":75}}"#,
    ]);
    assert_eq!(
        patched.trim(),
        "horizontalpodautoscaler.autoscaling/api patched"
    );
    let v2 = s.kubectl_json(&["get", "hpa", "api"]);
    assert_eq!(
        v2["spec"]["metrics"],
        serde_json::json!([
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "200Mi"}}},
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 75}}}]),
        "{v2}"
    );
    assert!(v2["metadata"].get("annotations").is_none_or(|a| {
        a.as_object()
            .is_some_and(|a| !a.keys().any(|k| k.starts_with("autoscaling.alpha")))
    }));
    // The same table through either version.
    let table = s.kubectl_ok(&["get", "hpa", "api", "--no-headers"]);
    let v1_table = s.kubectl_ok(&[
        "get",
        "horizontalpodautoscalers.v1.autoscaling",
        "api",
        "--no-headers",
    ]);
    assert_eq!(words(&table)[..8], words(&v1_table)[..8], "{v1_table}");
    assert_eq!(
        words(&table)[..8],
        [
            "api",
            "Deployment/api",
            "memory:",
            "<unknown>/200Mi,",
            "cpu:",
            "<unknown>/75%",
            "2",
            "8"
        ],
        "{table}"
    );

    // A PUT of the v1 view (what `kubectl replace` sends) keeps what v1 does not show.
    let mut v1 = s.kubectl_json(&["get", "horizontalpodautoscalers.v1.autoscaling", "api"]);
    v1["spec"]["maxReplicas"] = 9.into();
    let run = s.kubectl_run(&["replace", "-f", "-"], Some(&v1.to_string()), &[]);
    assert!(run.ok(), "{run}");
    let v2 = s.kubectl_json(&["get", "hpa", "api"]);
    assert_eq!(v2["spec"]["maxReplicas"], 9, "{v2}");
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["name"], "memory",
        "{v2}"
    );
    let all = s.kubectl_ok(&["get", "all", "-o", "name"]);
    assert!(
        all.lines()
            .any(|l| l == "horizontalpodautoscaler.autoscaling/api"),
        "{all}"
    );

    // A v1 watch sees v1 objects.
    let watch = s
        .get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers?watch=1&timeoutSeconds=1")
        .text();
    let event: Value = serde_json::from_str(watch.lines().next().unwrap_or_default()).unwrap();
    assert_eq!(event["type"], "ADDED", "{watch}");
    assert_eq!(event["object"]["apiVersion"], "autoscaling/v1", "{watch}");
    assert_eq!(
        event["object"]["spec"]["targetCPUUtilizationPercentage"], 75,
        "{watch}"
    );

    // 422s with Kubernetes' texts; v1's are about the v2 fields it converts to.
    let run = s.create_yaml(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 0
",
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("The HorizontalPodAutoscaler \"bad\" is invalid: ")
            && run.stderr.contains("* spec.maxReplicas: Invalid value: 0: must be greater than 0")
            && run.stderr.contains(
                "* spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"
            ),
        "{run}"
    );
    let run = s.create_yaml(
        "apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
  targetCPUUtilizationPercentage: 0
",
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "The HorizontalPodAutoscaler \"bad\" is invalid: spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
        ),
        "{run}"
    );
    let status = s.get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/bad");
    assert_eq!(status.status, 404);
    assert_eq!(
        status.json()["message"],
        "horizontalpodautoscalers.autoscaling \"bad\" not found"
    );
    s.kubectl_ok(&["delete", "horizontalpodautoscalers.v1.autoscaling", "api"]);
    assert_eq!(s.kubectl_ok(&["get", "hpa", "-o", "name"]).trim(), "");
}
