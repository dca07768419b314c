//! Unit tests of the aggregation layer: APIService validation and table, endpoint picking,
//! the proxy headers, the discovery conversions and the router's choice.

use super::apiservice::APIServiceRules;
use super::proxy::{pick_endpoint, set_auth_proxy_headers};
use super::*;
use crate::auth::user::UserInfo;
use crate::strategy::Strategy;
use crate::strategy::typed::Typed;
use axum::http::HeaderMap;
use serde_json::json;

fn apiservice(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": name}, "spec": spec})
}

fn metrics_spec() -> Value {
    json!({"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
           "versionPriority": 100, "insecureSkipTLSVerify": true,
           "service": {"namespace": "kube-system", "name": "metrics-server"}})
}

fn admit(obj: &mut Value) -> Vec<String> {
    Typed(APIServiceRules)
        .admit_create(obj)
        .expect("decodes")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_valid_apiservice_is_defaulted_and_a_local_one_starts_available() {
    let mut obj = apiservice("v1beta1.metrics.k8s.io", metrics_spec());
    assert_eq!(admit(&mut obj), Vec::<String>::new());
    assert_eq!(obj["spec"]["service"]["port"], 443);
    assert_eq!(obj["status"], json!({}));
    let mut local = apiservice(
        "v1.apps",
        json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}),
    );
    assert_eq!(admit(&mut local), Vec::<String>::new());
    let condition = &local["status"]["conditions"][0];
    assert_eq!(condition["type"], "Available");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "Local");
    assert_eq!(
        condition["message"],
        "Local APIServices are always available"
    );
}

#[test]
fn validation_words_errors_as_kube_aggregator() {
    let mut bad_name = apiservice("metrics", metrics_spec());
    assert_eq!(
        admit(&mut bad_name),
        [
            "metadata.name: Invalid value: \"metrics\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\""
        ]
    );
    let mut slash = apiservice("a/b", metrics_spec());
    assert_eq!(
        admit(&mut slash),
        ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
    );
    let mut ranges = apiservice(
        "v1.example.com",
        json!({"group": "example.com", "version": "v1", "groupPriorityMinimum": 0,
               "versionPriority": 1001, "service": {"namespace": "", "name": "x"}}),
    );
    assert_eq!(
        admit(&mut ranges),
        [
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
            "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
            "spec.service.namespace: Required value",
        ]
    );
    let mut no_group = apiservice(
        "v2.",
        json!({"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1,
               "insecureSkipTLSVerify": true}),
    );
    assert_eq!(
        admit(&mut no_group),
        [
            "spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
            "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
        ]
    );
    let mut bad_version = apiservice(
        "V1.example.com",
        json!({"group": "example.com", "version": "V1", "groupPriorityMinimum": 1, "versionPriority": 1}),
    );
    let errs = admit(&mut bad_version);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("spec.version: Invalid value: \"V1\": a DNS-1035 label"),
        "{errs:?}"
    );
}

#[test]
fn the_table_shows_service_and_availability() {
    let s = Typed(APIServiceRules);
    let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().expect("time");
    let mut obj = apiservice("v1beta1.metrics.k8s.io", metrics_spec());
    obj["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    obj["status"] = json!({"conditions": [{"type": "Available", "status": "False",
        "reason": "MissingEndpoints", "message": "m"}]});
    let names: Vec<String> = s
        .table_columns()
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(names, ["Service", "Available", "Age"]);
    assert_eq!(
        s.table_row(&obj, now),
        vec![
            json!("kube-system/metrics-server"),
            json!("False (MissingEndpoints)"),
            json!("10m")
        ]
    );
    obj["spec"] = json!({"group": "apps", "version": "v1"});
    obj["status"] = json!({});
    assert_eq!(
        s.table_row(&obj, now)[..2],
        [json!("Local"), json!("Unknown")]
    );
}

fn service_ref() -> ServiceRef {
    ServiceRef {
        namespace: "kube-system".into(),
        name: "metrics-server".into(),
        port: 443,
    }
}

#[test]
fn endpoints_are_checked_in_the_controllers_order() {
    let svc = service_ref();
    let why = |r: std::result::Result<proxy::Endpoint, proxy::Unresolved>| {
        r.err().map(|u| (u.reason, u.message))
    };
    assert_eq!(
        why(pick_endpoint(&svc, None, &[])),
        Some((
            "ServiceNotFound",
            "service/metrics-server in \"kube-system\" is not present".into()
        ))
    );
    let service = json!({"spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443}]}});
    let other_port =
        json!({"spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 8443}]}});
    assert_eq!(
        why(pick_endpoint(&svc, Some(&other_port), &[])),
        Some((
            "ServicePortError",
            "service/metrics-server in \"kube-system\" is not listening on port 443".into()
        ))
    );
    assert_eq!(
        why(pick_endpoint(&svc, Some(&service), &[])),
        Some((
            "EndpointsNotFound",
            "cannot find endpointslices for service/metrics-server in \"kube-system\"".into()
        ))
    );
    let not_ready = json!({"endpoints": [{"addresses": ["192.0.2.2"], "conditions": {"ready": false}}],
                           "ports": [{"name": "https", "port": 4443}]});
    assert_eq!(
        why(pick_endpoint(&svc, Some(&service), &[not_ready])),
        Some((
            "MissingEndpoints",
            "endpointslices for service/metrics-server in \"kube-system\" have no addresses with port name \"https\"".into()
        ))
    );
    let ready = json!({"endpoints": [{"addresses": ["192.0.2.2"], "conditions": {"ready": true}}],
                       "ports": [{"name": "https", "port": 4443}]});
    let endpoint = pick_endpoint(&svc, Some(&service), &[ready]).expect("resolved");
    assert_eq!(endpoint.host(), "192.0.2.2:4443");
    assert_eq!(endpoint.dial_address().to_string(), "127.0.0.1:4443");
}

#[test]
fn the_user_goes_in_remote_headers_and_stale_ones_go() {
    let mut headers = HeaderMap::new();
    headers.insert("x-remote-user", "mallory".parse().expect("header"));
    headers.insert("x-remote-extra-evil", "1".parse().expect("header"));
    let mut user = UserInfo::new("alice", &["dev", "system:authenticated"]);
    user.extra.insert(
        "scopes.example.com/a b".into(),
        vec!["x".into(), "y".into()],
    );
    set_auth_proxy_headers(&mut headers, &user);
    assert_eq!(headers["x-remote-user"], "alice");
    let groups: Vec<&str> = headers
        .get_all("x-remote-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(groups, ["dev", "system:authenticated"]);
    assert!(headers.get("x-remote-extra-evil").is_none());
    let extra: Vec<&str> = headers
        .get_all("x-remote-extra-scopes.example.com%2Fa%20b")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(extra, ["x", "y"]);
}

#[test]
fn legacy_resource_lists_become_aggregated_entries() {
    let list = vec![
        json!({"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]}),
        json!({"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]}),
        json!({"name": "pods/status", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]}),
    ];
    let out = discovery::aggregated_resources("metrics.k8s.io", "v1beta1", &list);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["resource"], "pods");
    assert_eq!(out[0]["scope"], "Namespaced");
    assert_eq!(
        out[0]["responseKind"],
        json!({"group": "metrics.k8s.io", "version": "v1beta1", "kind": "PodMetrics"})
    );
    assert_eq!(out[0]["subresources"][0]["subresource"], "status");
    assert_eq!(out[1]["scope"], "Cluster");
}

fn registration(name: &str, group: &str, version: &str, remote: bool, vp: i32) -> Registration {
    Registration {
        name: name.into(),
        group: group.into(),
        version: version.into(),
        group_priority: 100,
        version_priority: vp,
        service: remote.then(service_ref),
        available: true,
    }
}

#[test]
fn only_remote_group_versions_the_registry_lacks_are_proxied() {
    let reg = Registry::builtin();
    let agg = Aggregator::default();
    assert!(!proxies(&agg, &reg, "/apis/metrics.k8s.io/v1beta1/nodes"));
    agg.set_registrations(vec![
        registration(
            "v1beta1.metrics.k8s.io",
            "metrics.k8s.io",
            "v1beta1",
            true,
            100,
        ),
        registration(
            "v1alpha1.metrics.k8s.io",
            "metrics.k8s.io",
            "v1alpha1",
            true,
            5,
        ),
        registration("v1.apps", "apps", "v1", false, 15),
        registration("v1.batch", "batch", "v1", true, 15),
    ]);
    assert!(proxies(&agg, &reg, "/apis/metrics.k8s.io/v1beta1/nodes"));
    assert!(proxies(&agg, &reg, "/apis/metrics.k8s.io/v1beta1"));
    assert!(!proxies(&agg, &reg, "/apis/metrics.k8s.io"));
    assert!(!proxies(&agg, &reg, "/apis/apps/v1/deployments"));
    // A built-in group stays local even when an APIService names a service for it.
    assert!(!proxies(&agg, &reg, "/apis/batch/v1/jobs"));
    assert!(!proxies(&agg, &reg, "/api/v1/pods"));
    let groups = agg.discovery_groups(&reg);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, "metrics.k8s.io");
    let versions: Vec<&str> = groups[0]
        .versions
        .iter()
        .map(|v| v.version.as_str())
        .collect();
    assert_eq!(versions, ["v1beta1", "v1alpha1"]);
    assert!(groups[0].versions[0].stale, "never answered");
    agg.set_discovered(
        "v1beta1.metrics.k8s.io",
        Some(vec![
            json!({"name": "nodes", "kind": "NodeMetrics", "verbs": ["get"]}),
        ]),
    );
    let groups = agg.discovery_groups(&reg);
    assert!(!groups[0].versions[0].stale);
    assert_eq!(groups[0].versions[0].resources[0]["resource"], "nodes");
    agg.set_discovered("v1beta1.metrics.k8s.io", None);
    let groups = agg.discovery_groups(&reg);
    assert!(groups[0].versions[0].stale, "failed: stale");
    assert_eq!(groups[0].versions[0].resources.len(), 1, "kept");
}

#[test]
fn discovery_checks_judge_status_codes() {
    let url = "http://192.0.2.2:4443/apis/metrics.k8s.io/v1beta1";
    let ok = available::judge_discovery(
        url,
        Ok((
            axum::http::StatusCode::OK,
            bytes::Bytes::from_static(br#"{"resources":[{"name":"pods"}]}"#),
        )),
    );
    assert_eq!(ok.map(|r| r.len()), Ok(1));
    let bad = available::judge_discovery(
        url,
        Ok((axum::http::StatusCode::NOT_FOUND, bytes::Bytes::new())),
    );
    assert_eq!(
        bad,
        Err(format!(
            "failing or missing response from {url}: bad status from {url}: 404"
        ))
    );
    let refused =
        available::judge_discovery(url, Err("dial tcp x: connect: connection refused".into()));
    assert_eq!(
        refused,
        Err(format!(
            "failing or missing response from {url}: dial tcp x: connect: connection refused"
        ))
    );
}
