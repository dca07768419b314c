//! Tests of the node IPAM decisions against `range_allocator_test.go` / `cidr_set_test.go`.

use super::*;
use k8s_openapi::api::core::v1::NodeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn cidr(s: &str) -> Ipv4Cidr {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn node(name: &str, pod_cidr: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: pod_cidr.map(String::from),
            pod_cidrs: pod_cidr.map(|c| vec![c.to_string()]),
            ..Default::default()
        }),
        status: None,
    }
}

fn config(cluster: &str, mask: u8) -> Config {
    Config {
        cluster_cidr: cidr(cluster),
        node_cidr_mask_size: mask,
        service_cidr: None,
    }
}

#[test]
fn allocates_round_robin_and_reuses_released_blocks_after_wrapping() {
    let mut set = new_cidr_set(&config("10.244.0.0/30", 32));
    let got: Vec<String> = (0..4)
        .filter_map(|_| set.allocate_next())
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        got,
        [
            "10.244.0.0/32",
            "10.244.0.1/32",
            "10.244.0.2/32",
            "10.244.0.3/32"
        ]
    );
    assert_eq!(set.allocate_next(), None, "exhausted");
    set.release(&cidr("10.244.0.1/32")).expect("in range");
    assert_eq!(set.allocate_next(), Some(cidr("10.244.0.1/32")));
}

#[test]
fn a_node_without_cidr_gets_the_next_block_by_strategic_patch() {
    let mut set = new_cidr_set(&config("10.244.0.0/16", 24));
    set.occupy(&cidr("10.244.0.0/24")).expect("in range");
    match sync_node(&mut set, &node("node-1", None)) {
        NodeIpamDecision::Assign {
            cidr: got,
            actions,
            summary,
        } => {
            assert_eq!(got, cidr("10.244.1.0/24"));
            assert_eq!(
                summary,
                "node-1: pod CIDR 10.244.1.0/24 from 10.244.0.0/16 (2 of 256 blocks in use)"
            );
            let Action::Patch {
                target,
                patch_type,
                body,
            } = &actions[0]
            else {
                panic!("{actions:?}");
            };
            assert_eq!(target.kind, "Node");
            assert_eq!(*patch_type, PatchType::StrategicMerge);
            assert_eq!(
                body,
                &json!({"spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}})
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn existing_cidrs_are_occupied_and_out_of_range_ones_refused() {
    let mut set = new_cidr_set(&config("10.244.0.0/16", 24));
    let d = sync_node(&mut set, &node("a", Some("10.244.7.0/24")));
    assert!(matches!(d, NodeIpamDecision::Nothing(_)), "{d:?}");
    assert!(set.is_occupied(&cidr("10.244.7.0/24")));
    match sync_node(&mut set, &node("b", Some("10.99.0.0/24"))) {
        NodeIpamDecision::Failed { actions, error } => {
            assert!(actions.is_empty());
            assert_eq!(
                error,
                "failed to mark cidr[10.99.0.0/24] at idx [0] as occupied for node: b: \
                 cidr 10.99.0.0/24 is out the range of cluster cidr 10.244.0.0/16"
            );
        }
        other => panic!("{other:?}"),
    }
    release_node(&mut set, &node("a", Some("10.244.7.0/24"))).expect("release");
    assert!(!set.is_occupied(&cidr("10.244.7.0/24")));
}

#[test]
fn exhaustion_records_cidr_not_available() {
    let mut set = new_cidr_set(&config("10.244.0.0/24", 24));
    assert!(matches!(
        sync_node(&mut set, &node("a", None)),
        NodeIpamDecision::Assign { .. }
    ));
    match sync_node(&mut set, &node("b", None)) {
        NodeIpamDecision::Failed { actions, error } => {
            assert!(error.ends_with(NO_CIDRS_REMAINING), "{error}");
            let Action::Event(e) = &actions[0] else {
                panic!("{actions:?}")
            };
            assert_eq!(e.reason, "CIDRNotAvailable");
            assert_eq!(e.message, "Node b status is now: CIDRNotAvailable");
            assert_eq!(e.regarding.uid, "uid-b");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_service_range_is_filtered_out_where_it_overlaps() {
    let mut c = config("10.0.0.0/8", 16);
    c.service_cidr = Some(cidr("10.96.0.0/12"));
    let set = new_cidr_set(&c);
    assert_eq!(set.usage(), (16, 256), "10.96/12 spans 16 /16 blocks");
    assert!(set.is_occupied(&cidr("10.100.0.0/16")));
    assert!(!set.is_occupied(&cidr("10.95.0.0/16")));
    let mut c = config("10.244.0.0/16", 24);
    c.service_cidr = Some(cidr("10.96.0.0/12"));
    assert_eq!(
        new_cidr_set(&c).usage(),
        (0, 256),
        "disjoint: nothing taken"
    );
}

#[test]
fn flags_are_checked() {
    assert!(config("10.244.0.0/16", 24).validate().is_ok());
    assert!(config("10.244.0.0/16", 8).validate().is_err());
    assert!(config("10.0.0.0/8", 30).validate().is_err(), "2^22 blocks");
}

#[test]
fn deleting_nodes_are_left_alone() {
    let mut set = new_cidr_set(&config("10.244.0.0/16", 24));
    let mut n = node("gone", None);
    n.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    assert!(matches!(
        sync_node(&mut set, &n),
        NodeIpamDecision::Nothing(_)
    ));
    assert_eq!(set.usage().0, 0);
}
