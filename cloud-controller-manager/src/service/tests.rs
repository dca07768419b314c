//! The service controller's decisions against `controller_test.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LoadBalancerStatus as K8sLbStatus, NodeSpec, ServicePort, ServiceSpec, ServiceStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

fn svc(type_: &str, finalizer: bool) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("1234-5678".into()),
            resource_version: Some("42".into()),
            finalizers: finalizer.then(|| vec!["other/keep".into(), FINALIZER.into()]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                node_port: Some(31080),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

fn node(name: &str, label: Option<&str>, taint: Option<&str>, deleting: bool) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: label.map(|l| BTreeMap::from([(l.to_string(), String::new())])),
            deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: taint.map(|t| {
                vec![Taint {
                    key: t.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]
            }),
            provider_id: Some(format!("miniplane:///z/{name}")),
            ..Default::default()
        }),
        status: None,
    })
}

#[test]
fn only_unclaimed_load_balancer_services_want_one() {
    assert!(wants_load_balancer(&svc("LoadBalancer", false)));
    assert!(!wants_load_balancer(&svc("ClusterIP", false)));
    assert!(!wants_load_balancer(&svc("NodePort", false)));
    let mut claimed = svc("LoadBalancer", false);
    if let Some(s) = claimed.spec.as_mut() {
        s.load_balancer_class = Some("example.com/lb".into());
    }
    assert!(!wants_load_balancer(&claimed));
}

#[test]
fn cleanup_needs_deletion_and_the_finalizer() {
    let mut s = svc("LoadBalancer", true);
    assert!(!needs_cleanup(&s));
    s.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(needs_cleanup(&s));
    let mut bare = svc("LoadBalancer", false);
    bare.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(!needs_cleanup(&bare));
}

#[test]
fn the_finalizer_is_added_and_removed_beside_others_with_a_version() {
    assert_eq!(
        finalizer_patch(&svc("LoadBalancer", false), true),
        Some(json!({"metadata": {"finalizers": [FINALIZER], "resourceVersion": "42"}}))
    );
    assert_eq!(finalizer_patch(&svc("LoadBalancer", true), true), None);
    assert_eq!(
        finalizer_patch(&svc("LoadBalancer", true), false),
        Some(json!({"metadata": {"finalizers": ["other/keep"], "resourceVersion": "42"}}))
    );
    assert_eq!(finalizer_patch(&svc("LoadBalancer", false), false), None);
}

#[test]
fn backends_are_the_stable_node_set_sorted() {
    let nodes = [
        node("c", None, None, false),
        node("a", None, None, false),
        node("x", Some(LABEL_EXCLUDE_BALANCERS), None, false),
        node("y", None, Some(TAINT_TO_BE_DELETED), false),
        node("z", None, None, true),
        node("b", None, Some("node.kubernetes.io/not-ready"), false),
    ];
    let got: Vec<String> = stable_nodes(&nodes).into_iter().map(|n| n.name).collect();
    assert_eq!(got, ["a", "b", "c"], "readiness does not matter");
}

#[test]
fn only_an_update_that_moves_a_node_in_or_out_of_the_set_or_changes_it_counts() {
    let ready = node("a", None, None, false);
    let not_ready = node("a", None, Some("node.kubernetes.io/not-ready"), false);
    // A heartbeat or a readiness change leaves the node's entry as it was.
    assert_eq!(stable_node(&ready), stable_node(&not_ready));
    assert!(stable_node(&ready).is_some());
    for gone in [
        node("a", Some(LABEL_EXCLUDE_BALANCERS), None, false),
        node("a", None, Some(TAINT_TO_BE_DELETED), false),
        node("a", None, None, true),
    ] {
        assert_eq!(stable_node(&gone), None);
    }
    let mut provider = (*ready).clone();
    provider.spec.get_or_insert_default().provider_id = Some("sim://a".into());
    assert_ne!(stable_node(&provider), stable_node(&ready));
}

#[test]
fn ports_map_to_node_ports_and_status_is_patched_only_on_change() {
    let s = svc("LoadBalancer", true);
    assert_eq!(
        lb_ports(&s),
        vec![LoadBalancerPort {
            name: Some("http".into()),
            protocol: "TCP".into(),
            port: 80,
            node_port: 31080,
        }]
    );
    let status = LoadBalancerStatus {
        ingress: vec![cloud::LoadBalancerIngress {
            ip: Some("203.0.113.1".into()),
            hostname: None,
            ip_mode: Some("VIP".into()),
        }],
    };
    let new = ingress(&status);
    assert_eq!(
        status_patch(&s, &new),
        Some(
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.1", "ipMode": "VIP"}]}}})
        )
    );
    let mut done = s.clone();
    done.status = Some(ServiceStatus {
        load_balancer: Some(K8sLbStatus {
            ingress: Some(new.clone()),
        }),
        ..Default::default()
    });
    assert_eq!(status_patch(&done, &new), None);
    assert_eq!(
        status_patch(&done, &[]),
        Some(json!({"status": {"loadBalancer": {"ingress": null}}}))
    );
}

#[test]
fn only_relevant_changes_resync() {
    let old = svc("LoadBalancer", true);
    let mut status_only = old.clone();
    status_only.status = Some(ServiceStatus::default());
    assert!(!needs_sync(&old, &status_only));
    let mut retyped = old.clone();
    if let Some(s) = retyped.spec.as_mut() {
        s.type_ = Some("ClusterIP".into());
    }
    assert!(needs_sync(&old, &retyped));
    let mut deleting = old.clone();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(needs_sync(&old, &deleting));
    let fresh = svc("LoadBalancer", false);
    assert!(
        !needs_sync(&fresh, &old),
        "adding its own finalizer does not resync"
    );
    let mut retraced = old.clone();
    retraced.metadata.annotations = Some(
        [(
            client::trace::TRACEPARENT_ANNOTATION.to_owned(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        )]
        .into(),
    );
    assert!(
        !needs_sync(&old, &retraced),
        "the trace annotation every write stamps is not a change"
    );
    let mut annotated = old.clone();
    annotated.metadata.annotations =
        Some([("lb.example/size".to_owned(), "big".to_owned())].into());
    assert!(needs_sync(&old, &annotated), "other annotations are");
}
