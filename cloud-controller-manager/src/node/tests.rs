//! The node controller's decisions against `node_controller_test.go` and `address_test.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn address(type_: &str, address: &str) -> cloud::NodeAddress {
    cloud::NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

fn metadata() -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "miniplane:///local-1b/i-0123".into(),
        instance_type: "sim.standard-2".into(),
        node_addresses: vec![
            address("InternalIP", "172.16.0.9"),
            address("InternalIP", "172.16.0.10"),
            address("ExternalIP", "198.51.100.7"),
            address("Hostname", "node-1"),
        ],
        zone: "local-1b".into(),
        region: "local-1".into(),
    }
}

fn node(provided_ip: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node-1".into()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".into(),
                "node-1".into(),
            )])),
            annotations: provided_ip
                .map(|ip| BTreeMap::from([(ANNOTATION_PROVIDED_NODE_IP.into(), ip.into())])),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![
                Taint {
                    key: TAINT_UNINITIALIZED.into(),
                    value: Some("true".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                },
                Taint {
                    key: "dedicated".into(),
                    value: Some("db".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                },
            ]),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: "node-1".into(),
            }]),
            ..Default::default()
        }),
    }
}

#[test]
fn initialization_sets_provider_id_labels_and_drops_only_the_cloud_taint() {
    let n = node(Some("172.16.0.10"));
    assert!(cloud_taint(&n).is_some());
    let new = initialized(&n, &metadata()).expect("initialized");
    let spec = new.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("miniplane:///local-1b/i-0123")
    );
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(taints, ["dedicated"]);
    assert!(cloud_taint(&new).is_none());
    let labels = new.metadata.labels.unwrap_or_default();
    for (key, value) in [
        ("node.kubernetes.io/instance-type", "sim.standard-2"),
        ("beta.kubernetes.io/instance-type", "sim.standard-2"),
        ("topology.kubernetes.io/zone", "local-1b"),
        ("failure-domain.beta.kubernetes.io/zone", "local-1b"),
        ("topology.kubernetes.io/region", "local-1"),
        ("failure-domain.beta.kubernetes.io/region", "local-1"),
        ("kubernetes.io/hostname", "node-1"),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
    }
}

#[test]
fn an_existing_provider_id_is_kept() {
    let mut n = node(None);
    if let Some(spec) = n.spec.as_mut() {
        spec.provider_id = Some("other://x".into());
    }
    let new = initialized(&n, &metadata()).expect("initialized");
    assert_eq!(
        new.spec.and_then(|s| s.provider_id).as_deref(),
        Some("other://x")
    );
}

#[test]
fn the_provided_node_ip_wins_its_type_and_must_be_the_clouds() {
    let got = addresses_from_node_ip(&node(Some("172.16.0.10")), &metadata().node_addresses)
        .expect("matches");
    let got: Vec<(String, String)> = got.into_iter().map(|a| (a.type_, a.address)).collect();
    let want: Vec<(String, String)> = [
        ("InternalIP", "172.16.0.10"),
        ("ExternalIP", "198.51.100.7"),
        ("Hostname", "node-1"),
    ]
    .iter()
    .map(|(t, a)| ((*t).into(), (*a).into()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(
        initialized(&node(Some("10.1.1.1")), &metadata())
            .err()
            .as_deref(),
        Some(
            "provided node ip for node \"node-1\" is not valid: failed to get node address \
             from cloud provider that matches ip: 10.1.1.1"
        )
    );
}

#[test]
fn addresses_are_written_only_when_they_change() {
    let mut n = node(Some("172.16.0.10"));
    let wanted = addresses_to_update(&n, &metadata())
        .expect("valid")
        .expect("they differ");
    assert_eq!(wanted.len(), 3);
    if let Some(status) = n.status.as_mut() {
        let mut reordered = wanted.clone();
        reordered.reverse();
        status.addresses = Some(reordered);
    }
    assert_eq!(addresses_to_update(&n, &metadata()), Ok(None));
    let mut none = metadata();
    none.node_addresses.clear();
    assert_eq!(addresses_to_update(&n, &none), Ok(None));
}
