//! The Node object a kubelet registers and the status it keeps posting, and its Lease.
//!
//! Mirrors `pkg/kubelet/kubelet_node_status.go` (`initialNode`, `registerWithAPIServer`,
//! `updateNodeStatus`), the condition setters of `pkg/kubelet/nodestatus/setters.go`
//! (`ReadyCondition`, `MemoryPressureCondition`, ... with their exact reasons and messages)
//! and `pkg/kubelet/nodelease/controller.go` (`newLease`).
//!
//! Node `i` gets the InternalIP `172.16.0.0 + i + 2`. Its pod CIDR is the node IPAM
//! controller's (`spec.podCIDR`, when [`Config::pod_cidr_from_node`]) or else its own,
//! `10.244.i.0/24` (continuing into `10.245.0.0/24` after 255, so thousands of nodes have
//! disjoint ranges), as a kubelet given `--pod-cidr` registers with.
//!
//! With [`Config::cloud_provider_external`] the node registers as a kubelet started with
//! `--cloud-provider=external`: tainted `node.cloudprovider.kubernetes.io/uninitialized`
//! until the cloud-controller-manager initializes it, with its `--node-ip` in the
//! `alpha.kubernetes.io/provided-node-ip` annotation and no instance-type label (the cloud's
//! to set).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use apimachinery::Ipv4Cidr;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};

use crate::config::Config;

/// The namespace node Leases live in.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// `nodeInfo.kubeletVersion` of every simulated node.
pub const KUBELET_VERSION: &str = "v1.33.0-miniplane";
/// `nodeInfo.containerRuntimeVersion`.
pub const RUNTIME_VERSION: &str = "miniplane://sim";
/// `node.kubernetes.io/instance-type` of every simulated node.
pub const INSTANCE_TYPE: &str = "miniplane-sim";

/// The taint of a Node the cloud-controller-manager has not initialized yet
/// (`cloudproviderapi.TaintExternalCloudProvider`).
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The annotation with the kubelet's `--node-ip` for the cloud node controller
/// (`cloudproviderapi.AnnotationAlphaNodeProvidedIPAddr`).
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// Node `index`'s own pod CIDR, `10.244.<index>.0/24`.
pub fn pod_cidr(index: usize) -> Ipv4Cidr {
    let base = u32::from(Ipv4Addr::new(10, 244, 0, 0));
    let offset = u32::try_from(index).unwrap_or(u32::MAX >> 8) << 8;
    Ipv4Cidr::new(Ipv4Addr::from(base.wrapping_add(offset)), 24)
        .unwrap_or_else(|| unreachable!("a /24 is a valid prefix"))
}

/// Node `index`'s InternalIP.
pub fn host_ip(index: usize) -> Ipv4Addr {
    let base = u32::from(Ipv4Addr::new(172, 16, 0, 2));
    Ipv4Addr::from(base.wrapping_add(u32::try_from(index).unwrap_or(0)))
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The conditions a healthy kubelet reports, in Kubernetes' order, with heartbeat `now`.
/// Transition times are kept from `previous` where the status did not change.
pub fn healthy_conditions(previous: &[NodeCondition], now: Timestamp) -> Vec<NodeCondition> {
    let mut conditions = vec![
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            now,
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            now,
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            now,
        ),
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
            now,
        ),
    ];
    for c in &mut conditions {
        if let Some(old) = previous
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time.clone_from(&old.last_transition_time);
        }
    }
    conditions
}

/// Whether `current` (from the API) already says what [`healthy_conditions`] would, apart
/// from heartbeat times: if not, the kubelet posts its status now rather than at the next
/// report period (for example after the node lifecycle controller marked it Unknown).
pub fn conditions_match(current: &[NodeCondition]) -> bool {
    let wanted = healthy_conditions(current, Timestamp::UNIX_EPOCH);
    wanted.iter().all(|w| {
        current
            .iter()
            .any(|c| c.type_ == w.type_ && c.status == w.status && c.reason == w.reason)
    })
}

/// The Node that node `index` registers (`initialNode` + the first status).
pub fn node_object(config: &Config, index: usize, now: Timestamp) -> Node {
    let name = config.node_name(index);
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if !config.cloud_provider_external {
        labels.insert(
            "node.kubernetes.io/instance-type".to_owned(),
            INSTANCE_TYPE.to_owned(),
        );
    }
    labels.extend(config.labels.clone());
    let mut annotations =
        BTreeMap::from([("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned())]);
    let mut taints = config.taints.clone();
    if config.cloud_provider_external {
        annotations.insert(
            ANNOTATION_PROVIDED_NODE_IP.to_owned(),
            host_ip(index).to_string(),
        );
        if !taints.iter().any(|t| t.key == TAINT_UNINITIALIZED) {
            taints.push(Taint {
                key: TAINT_UNINITIALIZED.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                time_added: None,
            });
        }
    }
    let resources: BTreeMap<String, Quantity> = [
        ("cpu", config.capacity.cpu.clone()),
        ("memory", config.capacity.memory.clone()),
        ("pods", config.capacity.pods.to_string()),
        ("ephemeral-storage", "100Gi".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), Quantity(v)))
    .collect();
    let cidr = (!config.pod_cidr_from_node).then(|| pod_cidr(index).to_string());
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: cidr.clone(),
            pod_cidrs: cidr.map(|c| vec![c]),
            taints: (!taints.is_empty()).then_some(taints),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: host_ip(index).to_string(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name,
                },
            ]),
            conditions: Some(healthy_conditions(&[], now)),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: i32::from(config.kubelet_port()),
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                operating_system: "linux".into(),
                os_image: "miniplane simulated node".into(),
                kernel_version: "6.8.0-miniplane".into(),
                kubelet_version: KUBELET_VERSION.into(),
                kube_proxy_version: String::new(),
                container_runtime_version: RUNTIME_VERSION.into(),
                machine_id: format!("{:032x}", index),
                system_uuid: format!("{:032x}", index),
                boot_id: format!("{:032x}", index),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

/// The Lease of node `name` (owned by the Node, so deleting the Node collects it), renewed at
/// `now`.
pub fn lease_object(
    name: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
    now: Timestamp,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(LEASE_NAMESPACE.into()),
            owner_references: node_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.into(),
                    uid: uid.into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.into()),
            lease_duration_seconds: Some(duration_seconds),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::ClusterSource;

    fn config() -> Config {
        let mut c = Config::new(ClusterSource::Url("http://127.0.0.1:1".into()), 3);
        c.labels.insert("tier".into(), "sim".into());
        c
    }

    #[test]
    fn external_cloud_and_ipam_leave_their_fields_to_the_controllers() {
        let mut c = config();
        c.pod_cidr_from_node = true;
        c.cloud_provider_external = true;
        let node = node_object(&c, 1, Timestamp::UNIX_EPOCH);
        let spec = node.spec.clone().unwrap_or_default();
        assert_eq!(spec.pod_cidr, None);
        assert_eq!(spec.pod_cidrs, None);
        let taints = spec.taints.unwrap_or_default();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, TAINT_UNINITIALIZED);
        assert_eq!(taints[0].value.as_deref(), Some("true"));
        assert_eq!(taints[0].effect, "NoSchedule");
        let meta = &node.metadata;
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a[ANNOTATION_PROVIDED_NODE_IP].as_str()),
            Some("172.16.0.3")
        );
        assert!(
            !meta
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("node.kubernetes.io/instance-type")),
            "the cloud sets the instance type"
        );
        let plain = node_object(&config(), 1, Timestamp::UNIX_EPOCH);
        assert_eq!(plain.spec.and_then(|s| s.taints), None);
    }

    #[test]
    fn node_shape() {
        let now = Timestamp::UNIX_EPOCH;
        let node = node_object(&config(), 2, now);
        assert_eq!(node.metadata.name.as_deref(), Some("node-2"));
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["kubernetes.io/hostname"], "node-2");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["tier"], "sim");
        let spec = node.spec.clone().unwrap_or_default();
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.2.0/24"));
        let status = node.status.clone().unwrap_or_default();
        let cap = status.capacity.clone().unwrap_or_default();
        assert_eq!(cap["cpu"].0, "4");
        assert_eq!(cap["memory"].0, "16Gi");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(status.allocatable, status.capacity);
        let port = status
            .daemon_endpoints
            .as_ref()
            .and_then(|d| d.kubelet_endpoint.as_ref())
            .map(|e| e.port);
        assert_eq!(port, Some(0), "the configured port (0 until bound)");
        let info = status.node_info.clone().unwrap_or_default();
        assert!(info.kubelet_version.starts_with("v1.33."));
        assert_eq!(info.container_runtime_version, "miniplane://sim");
        let addresses = status.addresses.clone().unwrap_or_default();
        assert_eq!(addresses[0].type_, "InternalIP");
        assert_eq!(addresses[0].address, "172.16.0.4");
        assert_eq!(addresses[1].address, "node-2");
        let conditions = status.conditions.clone().unwrap_or_default();
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        let ready = &conditions[3];
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("kubelet is posting ready status")
        );
    }

    #[test]
    fn nodes_advertise_the_kubelet_api_port() {
        let port = |c: &Config| {
            node_object(c, 0, Timestamp::UNIX_EPOCH)
                .status
                .and_then(|s| s.daemon_endpoints)
                .and_then(|d| d.kubelet_endpoint)
                .map(|e| e.port)
        };
        let mut c = config();
        c.kubelet_listen = Some("127.0.0.1:43210".parse().expect("address"));
        assert_eq!(port(&c), Some(43210));
        c.kubelet_listen = None;
        assert_eq!(port(&c), Some(10250), "no server: the kubelet's default");
    }

    #[test]
    fn pod_cidrs_are_disjoint_past_255() {
        assert_eq!(pod_cidr(0).to_string(), "10.244.0.0/24");
        assert_eq!(pod_cidr(255).to_string(), "10.244.255.0/24");
        assert_eq!(pod_cidr(256).to_string(), "10.245.0.0/24");
    }

    #[test]
    fn conditions_keep_transition_times_and_detect_unknown() {
        let t0 = Timestamp::UNIX_EPOCH;
        let t1 = Timestamp::from_second(100).unwrap_or(t0);
        let first = healthy_conditions(&[], t0);
        let second = healthy_conditions(&first, t1);
        assert_eq!(second[3].last_transition_time, Some(Time(t0)));
        assert_eq!(second[3].last_heartbeat_time, Some(Time(t1)));
        assert!(conditions_match(&second));
        let mut unknown = second.clone();
        unknown[3].status = "Unknown".into();
        unknown[3].reason = Some("NodeStatusUnknown".into());
        assert!(!conditions_match(&unknown));
        let back = healthy_conditions(&unknown, t1);
        assert_eq!(back[3].last_transition_time, Some(Time(t1)));
    }

    #[test]
    fn lease_shape() {
        let lease = lease_object("node-0", Some("u1"), 40, Timestamp::UNIX_EPOCH);
        assert_eq!(lease.metadata.namespace.as_deref(), Some("kube-node-lease"));
        let spec = lease.spec.unwrap_or_default();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-0"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
    }
}
