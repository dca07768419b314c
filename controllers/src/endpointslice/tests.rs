//! The EndpointSlice controller's decisions, as `reconciler_test.go` checks them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::testing::{annotation, app_labels as labels, at, object_meta, service_pod as pod};

fn service(target: IntOrString) -> Service {
    Service {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([("tier".to_owned(), "front".to_owned())])),
            creation_timestamp: Some(Time(at(0))),
            ..object_meta("web")
        },
        spec: Some(ServiceSpec {
            selector: Some(labels("web")),
            cluster_ip: Some("10.96.0.10".into()),
            ip_families: Some(vec!["IPv4".into()]),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".into()),
                target_port: Some(target),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node() -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node-1".into()),
            labels: Some(BTreeMap::from([(
                endpoints::LABEL_TOPOLOGY_ZONE.to_owned(),
                "zone-a".to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn sync(svc: &Service, pods: &[Pod], slices: &[EndpointSlice]) -> EndpointSliceSync {
    let pods: Vec<&Pod> = pods.iter().collect();
    let slices: Vec<&EndpointSlice> = slices.iter().collect();
    let node = node();
    sync_endpoint_slices(EndpointSliceSyncInput {
        service: svc,
        pods: &pods,
        slices: &slices,
        nodes: &[&node],
        trigger_time: Some(at(5)),
        max_endpoints_per_slice: DEFAULT_MAX_ENDPOINTS_PER_SLICE,
    })
}

fn created(out: &EndpointSliceSync) -> Vec<&EndpointSlice> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateEndpointSlice(s) => Some(s.as_ref()),
            _ => None,
        })
        .collect()
}

fn updated(out: &EndpointSliceSync) -> Vec<&EndpointSlice> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateEndpointSlice(s) => Some(s.as_ref()),
            _ => None,
        })
        .collect()
}

/// A created slice as the API server stores it: named, with a UID and generation.
fn stored(mut slice: EndpointSlice, name: &str) -> EndpointSlice {
    slice.metadata.name = Some(name.into());
    slice.metadata.uid = Some(format!("uid-{name}"));
    slice.metadata.generation = Some(1);
    slice
}

fn conditions(e: &Endpoint) -> (Option<bool>, Option<bool>, Option<bool>) {
    let c = e.conditions.clone().unwrap_or_default();
    (c.ready, c.serving, c.terminating)
}

#[test]
fn three_ready_pods_make_one_slice_owned_by_the_service() {
    let svc = service(IntOrString::Int(8080));
    let out = sync(&svc, &[pod(0, true), pod(1, true), pod(2, true)], &[]);
    let slices = created(&out);
    assert_eq!(slices.len(), 1, "{}", out.summary);
    let s = slices[0];
    assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(s.address_type, "IPv4");
    let labels = s.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["kubernetes.io/service-name"], "web");
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(labels["tier"], "front", "the Service's labels are copied");
    let owner = &s.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Service", "uid-web")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let ports = s.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (
            ports[0].name.as_deref(),
            ports[0].port,
            ports[0].protocol.as_deref()
        ),
        (Some(""), Some(8080), Some("TCP"))
    );
    assert_eq!(s.endpoints.len(), 3);
    let e = &s.endpoints[0];
    assert_eq!(e.addresses, vec!["10.244.0.1"]);
    assert_eq!(conditions(e), (Some(true), Some(true), Some(false)));
    assert_eq!(e.node_name.as_deref(), Some("node-1"));
    assert_eq!(e.zone.as_deref(), Some("zone-a"));
    let target = e.target_ref.clone().unwrap_or_default();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref()
        ),
        (Some("Pod"), Some("web-0"), Some("uid-web-0"))
    );
    assert_eq!(
        annotation(&s.metadata, LAST_CHANGE_TRIGGER_TIME),
        Some(at(5).to_string().as_str())
    );
    assert!(
        out.summary.contains("3 endpoints (3 ready)"),
        "{}",
        out.summary
    );
}

#[test]
fn more_than_a_hundred_pods_are_split_over_slices() {
    let svc = service(IntOrString::Int(8080));
    let pods: Vec<Pod> = (0..250).map(|i| pod(i, true)).collect();
    let out = sync(&svc, &pods, &[]);
    let sizes: Vec<usize> = created(&out).iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, vec![100, 100, 50]);
    // Once they exist, the same pods need no write.
    let existing: Vec<EndpointSlice> = created(&out)
        .into_iter()
        .enumerate()
        .map(|(i, s)| stored(s.clone(), &format!("web-{i}")))
        .collect();
    let again = sync(&svc, &pods, &existing);
    assert!(again.actions.is_empty(), "{:?}", again.summary);
}

#[test]
fn readiness_and_termination_as_kubernetes_computes_them() {
    let svc = service(IntOrString::Int(8080));
    let mut terminating = pod(2, true);
    terminating.metadata.deletion_timestamp = Some(Time(at(3)));
    let mut no_ip = pod(3, true);
    no_ip.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    let mut done = pod(4, true);
    if let Some(s) = done.status.as_mut() {
        s.phase = Some("Succeeded".into());
    }
    let pods = [pod(0, true), pod(1, false), terminating, no_ip, done];
    let out = sync(&svc, &pods, &[]);
    let eps = &created(&out)[0].endpoints;
    assert_eq!(eps.len(), 3, "no IP or finished: left out");
    let by_name = |n: &str| {
        eps.iter()
            .find(|e| e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(n))
            .map(conditions)
    };
    assert_eq!(
        by_name("web-0"),
        Some((Some(true), Some(true), Some(false)))
    );
    assert_eq!(
        by_name("web-1"),
        Some((Some(false), Some(false), Some(false)))
    );
    assert_eq!(
        by_name("web-2"),
        Some((Some(false), Some(true), Some(true)))
    );
    // publishNotReadyAddresses: every endpoint is ready.
    let mut publish = svc.clone();
    if let Some(spec) = publish.spec.as_mut() {
        spec.publish_not_ready_addresses = Some(true);
    }
    let out = sync(&publish, &pods, &[]);
    let eps = &created(&out)[0].endpoints;
    assert!(eps.iter().all(|e| conditions(e).0 == Some(true)));
}

#[test]
fn a_named_target_port_is_looked_up_in_each_pod() {
    let svc = service(IntOrString::String("http".into()));
    let mut other = pod(1, true);
    if let Some(spec) = other.spec.as_mut() {
        spec.containers[0].ports = None;
    }
    let out = sync(&svc, &[pod(0, true), other], &[]);
    let slices = created(&out);
    // Pods whose ports differ go to different slices; one without the port has none.
    assert_eq!(slices.len(), 2);
    let ports: Vec<Vec<Option<i32>>> = slices
        .iter()
        .map(|s| s.ports.iter().flatten().map(|p| p.port).collect())
        .collect();
    assert!(ports.contains(&vec![Some(8080)]), "{ports:?}");
    assert!(ports.contains(&vec![]), "{ports:?}");
}

#[test]
fn a_service_without_selector_is_left_alone() {
    let mut svc = service(IntOrString::Int(8080));
    if let Some(spec) = svc.spec.as_mut() {
        spec.selector = None;
    }
    let mut by_hand = new_endpoint_slice(&svc, Vec::new(), "IPv4");
    by_hand.endpoints = Vec::new();
    let out = sync(&svc, &[pod(0, true)], &[stored(by_hand, "web-manual")]);
    assert!(out.actions.is_empty());
    assert!(out.summary.contains("no selector"), "{}", out.summary);
}

#[test]
fn existing_slices_are_updated_in_place() {
    let svc = service(IntOrString::Int(8080));
    let first = sync(&svc, &[pod(0, true), pod(1, true), pod(2, true)], &[]);
    let existing = stored(created(&first)[0].clone(), "web-abcde");
    // web-1 goes, web-3 comes, web-2 turns unready: one update of the same slice.
    let out = sync(
        &svc,
        &[pod(0, true), pod(2, false), pod(3, true)],
        std::slice::from_ref(&existing),
    );
    assert!(created(&out).is_empty(), "{}", out.summary);
    let up = updated(&out);
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].metadata.name.as_deref(), Some("web-abcde"));
    let names: Vec<&str> = up[0]
        .endpoints
        .iter()
        .filter_map(|e| e.target_ref.as_ref()?.name.as_deref())
        .collect();
    assert_eq!(names, vec!["web-0", "web-2", "web-3"]);
    assert_eq!(conditions(&up[0].endpoints[1]).0, Some(false));
    // Nothing changed: nothing written.
    let same = sync(
        &svc,
        &[pod(0, true), pod(1, true), pod(2, true)],
        &[existing],
    );
    assert!(same.actions.is_empty(), "{}", same.summary);
}

#[test]
fn no_pods_leave_one_placeholder_slice() {
    let svc = service(IntOrString::Int(8080));
    let out = sync(&svc, &[], &[]);
    let slices = created(&out);
    assert_eq!(slices.len(), 1);
    assert!(slices[0].endpoints.is_empty());
    assert_eq!(slices[0].ports.as_deref(), Some(&[][..]));
    let placeholder = stored(slices[0].clone(), "web-empty");
    assert!(sync(&svc, &[], &[placeholder]).actions.is_empty());
    // Scaled to zero: the slice with endpoints becomes the placeholder, in place.
    let full = sync(&svc, &[pod(0, true)], &[]);
    let existing = stored(created(&full)[0].clone(), "web-abcde");
    let out = sync(&svc, &[], &[existing]);
    let up = updated(&out);
    assert_eq!(up.len(), 1, "{:?}", out.actions);
    assert_eq!(up[0].metadata.name.as_deref(), Some("web-abcde"));
    assert!(up[0].endpoints.is_empty());
}

#[test]
fn a_pod_on_a_missing_node_is_skipped_and_retried() {
    let svc = service(IntOrString::Int(8080));
    let mut lost = pod(1, true);
    if let Some(spec) = lost.spec.as_mut() {
        spec.node_name = Some("gone".into());
    }
    let out = sync(&svc, &[pod(0, true), lost], &[]);
    assert_eq!(created(&out)[0].endpoints.len(), 1);
    assert_eq!(
        out.actions.last(),
        Some(&Action::RequeueAfter(Duration::ZERO))
    );
}

#[test]
fn the_trigger_time_is_the_earliest_new_change() {
    let svc = service(IntOrString::Int(8080));
    let mut tracker = trackers::TriggerTimeTracker::new();
    let (a, b) = (pod(0, true), pod(1, true));
    assert_eq!(
        tracker.compute(&svc, &[&a]),
        Some(at(0)),
        "new Service: its creation"
    );
    assert_eq!(tracker.compute(&svc, &[&a]), None, "nothing changed");
    assert_eq!(
        tracker.compute(&svc, &[&a, &b]),
        Some(at(1)),
        "b turned ready at 1"
    );
}

#[test]
fn the_tracker_tells_a_stale_cache() {
    let svc = service(IntOrString::Int(8080));
    let out = sync(&svc, &[pod(0, true)], &[]);
    let written = stored(created(&out)[0].clone(), "web-abcde");
    let key = apimachinery::ObjectKey::new(Some("default"), "web");
    let mut tracker = trackers::EndpointSliceTracker::new();
    tracker.update(&written);
    assert!(
        tracker.stale_slices(&key, &[]),
        "our slice is not in the cache yet"
    );
    assert!(!tracker.stale_slices(&key, &[&written]));
    assert!(!tracker.should_sync(&written), "our own write");
    tracker.expect_deletion(&written);
    assert!(
        tracker.stale_slices(&key, &[&written]),
        "deleted but still cached"
    );
    assert!(tracker.handle_deletion(&written));
}

#[test]
fn service_labels_follow_and_foreign_slices_go() {
    let svc = service(IntOrString::Int(8080));
    let first = sync(&svc, &[pod(0, true)], &[]);
    let existing = stored(created(&first)[0].clone(), "web-abcde");
    // The Service's labels changed: the slice is updated for them alone.
    let mut relabelled = svc.clone();
    relabelled.metadata.labels = Some(BTreeMap::from([("tier".to_owned(), "back".to_owned())]));
    let out = sync(
        &relabelled,
        &[pod(0, true)],
        std::slice::from_ref(&existing),
    );
    let up = updated(&out);
    assert_eq!(up.len(), 1, "{}", out.summary);
    let labels = up[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["tier"], "back");
    assert_eq!(labels["kubernetes.io/service-name"], "web");
    // A slice of an earlier Service of the same name (another UID) is deleted.
    let mut foreign = existing.clone();
    foreign.metadata.name = Some("web-old".into());
    foreign.metadata.uid = Some("uid-web-old".into());
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].uid = "uid-earlier".into();
    }
    let out = sync(&svc, &[pod(0, true)], &[existing, foreign]);
    let deleted: Vec<&str> = out
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteEndpointSlice(s) => s.metadata.name.as_deref(),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec!["web-old"], "{}", out.summary);
}

#[test]
fn pod_events_wake_the_services_selecting_the_pod() {
    use std::sync::Arc;
    let indexer = client::Indexer::<Service>::new();
    let web = service(IntOrString::Int(8080));
    let mut api = web.clone();
    api.metadata.name = Some("api".into());
    if let Some(spec) = api.spec.as_mut() {
        spec.selector = Some(labels("api"));
    }
    let mut bare = web.clone();
    bare.metadata.name = Some("bare".into());
    if let Some(spec) = bare.spec.as_mut() {
        spec.selector = None;
    }
    for s in [web, api, bare] {
        indexer.add(Arc::new(s));
    }
    let services = client::Lister::new(indexer);
    let names = |keys: Vec<apimachinery::ObjectKey>| -> Vec<String> {
        keys.into_iter().map(|k| k.name).collect()
    };
    let p = pod(0, true);
    assert_eq!(
        names(controller::services_for_pod_change(&services, None, &p)),
        ["web"]
    );
    // A status write that changes nothing endpoints show: no Service to sync.
    let mut same = p.clone();
    same.metadata.resource_version = Some("2".into());
    assert!(controller::services_for_pod_change(&services, Some(&p), &same).is_empty());
    // Relabelled from web to api: both.
    let mut moved = same.clone();
    moved.metadata.labels = Some(labels("api"));
    moved.metadata.resource_version = Some("3".into());
    assert_eq!(
        names(controller::services_for_pod_change(
            &services,
            Some(&same),
            &moved
        )),
        ["api", "web"]
    );
    // Turned unready: the Services selecting it.
    let mut unready = same.clone();
    unready.metadata.resource_version = Some("4".into());
    if let Some(s) = unready.status.as_mut() {
        s.conditions = None;
    }
    assert_eq!(
        names(controller::services_for_pod_change(
            &services,
            Some(&same),
            &unready
        )),
        ["web"]
    );
}
