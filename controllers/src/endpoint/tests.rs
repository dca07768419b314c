//! The Endpoints controller's decisions, as `endpoints_controller_test.go` checks them.

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::testing::{app_labels as labels, at, object_meta, service_pod as pod};

fn service() -> Service {
    Service {
        metadata: ObjectMeta {
            labels: Some(labels("web")),
            ..object_meta("web")
        },
        spec: Some(ServiceSpec {
            selector: Some(labels("web")),
            cluster_ip: Some("10.96.0.10".into()),
            ip_families: Some(vec!["IPv4".into()]),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::Int(8080)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn sync(svc: &Service, pods: &[Pod], current: Option<&Endpoints>) -> EndpointsSync {
    let pods: Vec<&Pod> = pods.iter().collect();
    sync_endpoints(EndpointsSyncInput {
        service: svc,
        pods: &pods,
        current,
        trigger_time: Some(at(5)),
    })
}

fn written(out: &EndpointsSync) -> &Endpoints {
    match out.actions.first() {
        Some(Action::CreateEndpoints(e) | Action::UpdateEndpoints(e)) => e,
        other => panic!("no write: {other:?} ({})", out.summary),
    }
}

#[test]
fn ready_and_unready_pods_in_one_subset() {
    let svc = service();
    let mut terminating = pod(3, true);
    terminating.metadata.deletion_timestamp = Some(Time(at(2)));
    let out = sync(
        &svc,
        &[pod(1, true), pod(0, true), pod(2, false), terminating],
        None,
    );
    assert!(matches!(out.actions[0], Action::CreateEndpoints(_)));
    let ep = written(&out);
    assert_eq!(ep.metadata.name.as_deref(), Some("web"));
    assert_eq!(ep.metadata.labels, Some(labels("web")));
    assert_eq!(
        crate::testing::annotation(&ep.metadata, LAST_CHANGE_TRIGGER_TIME),
        Some(at(5).to_string().as_str())
    );
    let subsets = ep.subsets.clone().unwrap_or_default();
    assert_eq!(subsets.len(), 1);
    let ips = |a: &Option<Vec<EndpointAddress>>| -> Vec<String> {
        a.iter().flatten().map(|a| a.ip.clone()).collect()
    };
    assert_eq!(ips(&subsets[0].addresses), vec!["10.244.0.1", "10.244.0.2"]);
    assert_eq!(ips(&subsets[0].not_ready_addresses), vec!["10.244.0.3"]);
    let first = &subsets[0].addresses.clone().unwrap_or_default()[0];
    assert_eq!(first.node_name.as_deref(), Some("node-1"));
    let target = first.target_ref.clone().unwrap_or_default();
    assert_eq!(
        (target.kind.as_deref(), target.name.as_deref()),
        (Some("Pod"), Some("web-0"))
    );
    let port = &subsets[0].ports.clone().unwrap_or_default()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));
    assert_eq!(out.summary, "2 ready, 1 not ready → create Endpoints");
    // Stored as written: nothing to do.
    let mut stored = ep.clone();
    stored.metadata.resource_version = Some("7".into());
    let again = sync(
        &svc,
        &[pod(0, true), pod(1, true), pod(2, false)],
        Some(&stored),
    );
    assert!(again.actions.is_empty(), "{}", again.summary);
    // Scaled to zero: an update with no subsets.
    let gone = sync(&svc, &[], Some(&stored));
    assert!(matches!(gone.actions[0], Action::UpdateEndpoints(_)));
    assert_eq!(written(&gone).subsets, Some(Vec::new()));
}

#[test]
fn services_without_selector_keep_their_endpoints() {
    let mut svc = service();
    if let Some(spec) = svc.spec.as_mut() {
        spec.selector = None;
    }
    let out = sync(&svc, &[pod(0, true)], None);
    assert!(out.actions.is_empty());
}

#[test]
fn over_a_thousand_addresses_are_truncated() {
    let svc = service();
    let pods: Vec<Pod> = (0..1100).map(|i| pod(i, i % 2 == 0)).collect();
    let out = sync(&svc, &pods, None);
    let ep = written(&out);
    let subsets = ep.subsets.clone().unwrap_or_default();
    let ready: usize = subsets
        .iter()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    let not_ready: usize = subsets
        .iter()
        .map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len))
        .sum();
    assert_eq!(
        (ready, not_ready),
        (550, 450),
        "not-ready addresses go first"
    );
    assert_eq!(
        crate::testing::annotation(&ep.metadata, OVER_CAPACITY),
        Some("truncated")
    );
}
