//! Round trips of the core (`v1`) kinds, `events.k8s.io` events and leases.

use super::fixtures::{condition, object_meta, object_meta_json, pod_spec, pod_spec_json};
use super::{map, micro_time, named, q, round_trip, s, strings, time};
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

#[test]
fn pod() {
    let pod = core::Pod {
        metadata: Some(object_meta("web")),
        spec: Some(pod_spec()),
        status: Some(core::PodStatus {
            phase: s("Running"),
            conditions: vec![core::PodCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_probe_time: Some(meta::Time::default()),
                last_transition_time: time(),
                ..Default::default()
            }],
            host_ip: s("10.0.0.1"),
            pod_ip: s("10.1.0.5"),
            pod_ips: vec![core::PodIp { ip: s("10.1.0.5") }],
            start_time: time(),
            container_statuses: vec![core::ContainerStatus {
                name: s("web"),
                state: Some(core::ContainerState {
                    running: Some(core::ContainerStateRunning { started_at: time() }),
                    ..Default::default()
                }),
                ready: Some(true),
                restart_count: Some(0),
                image: s("nginx:1.25"),
                image_id: Some(String::new()),
                started: Some(true),
                ..Default::default()
            }],
            qos_class: s("Burstable"),
            ..Default::default()
        }),
    };
    round_trip::<k8s_openapi::api::core::v1::Pod>(
        &pod,
        json!({
            "metadata": object_meta_json("web"),
            "spec": pod_spec_json(),
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-06T07:08:09Z"}],
                "hostIP": "10.0.0.1",
                "podIP": "10.1.0.5",
                "podIPs": [{"ip": "10.1.0.5"}],
                "startTime": "2024-05-06T07:08:09Z",
                "containerStatuses": [{
                    "name": "web", "state": {"running": {"startedAt": "2024-05-06T07:08:09Z"}},
                    "ready": true, "restartCount": 0, "image": "nginx:1.25", "imageID": "",
                    "started": true
                }],
                "qosClass": "Burstable"
            }
        }),
    );
}

#[test]
fn namespace_node_configmap_secret() {
    let ns = core::Namespace {
        metadata: Some(object_meta("team")),
        spec: Some(core::NamespaceSpec {
            finalizers: strings(&["kubernetes"]),
        }),
        status: Some(core::NamespaceStatus {
            phase: s("Active"),
            conditions: vec![],
        }),
    };
    round_trip::<k8s_openapi::api::core::v1::Namespace>(
        &ns,
        json!({
            "metadata": object_meta_json("team"),
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"}
        }),
    );

    let node = core::Node {
        metadata: Some(object_meta("node-1")),
        spec: Some(core::NodeSpec {
            pod_cidr: s("10.1.0.0/24"),
            pod_cid_rs: strings(&["10.1.0.0/24"]),
            unschedulable: Some(false),
            taints: vec![core::Taint {
                key: s("dedicated"),
                value: s("gpu"),
                effect: s("NoSchedule"),
                time_added: None,
            }],
            ..Default::default()
        }),
        status: Some(core::NodeStatus {
            capacity: [("cpu".to_string(), q("4")), ("pods".to_string(), q("110"))]
                .into_iter()
                .collect(),
            allocatable: [("memory".to_string(), q("8Gi"))].into_iter().collect(),
            conditions: vec![core::NodeCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_heartbeat_time: time(),
                last_transition_time: time(),
                reason: s("KubeletReady"),
                message: s("kubelet is posting ready status"),
            }],
            addresses: vec![core::NodeAddress {
                r#type: s("InternalIP"),
                address: s("10.0.0.1"),
            }],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            // Go writes every field of NodeSystemInfo (none is a pointer or omitempty).
            node_info: Some(core::NodeSystemInfo {
                machine_id: Some(String::new()),
                system_uuid: Some(String::new()),
                boot_id: Some(String::new()),
                kernel_version: Some(String::new()),
                os_image: Some(String::new()),
                container_runtime_version: Some(String::new()),
                kubelet_version: s("v1.33.0"),
                kube_proxy_version: Some(String::new()),
                operating_system: Some(String::new()),
                architecture: s("amd64"),
                swap: None,
            }),
            ..Default::default()
        }),
    };
    round_trip::<k8s_openapi::api::core::v1::Node>(
        &node,
        json!({
            "metadata": object_meta_json("node-1"),
            "spec": {
                "podCIDR": "10.1.0.0/24", "podCIDRs": ["10.1.0.0/24"],
                "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
            },
            "status": {
                "capacity": {"cpu": "4", "pods": "110"},
                "allocatable": {"memory": "8Gi"},
                "conditions": [{
                    "type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2024-05-06T07:08:09Z",
                    "lastTransitionTime": "2024-05-06T07:08:09Z",
                    "reason": "KubeletReady", "message": "kubelet is posting ready status"
                }],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                    "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "v1.33.0",
                    "kubeProxyVersion": "", "operatingSystem": "", "architecture": "amd64"
                }
            }
        }),
    );

    let cm = core::ConfigMap {
        metadata: Some(object_meta("settings")),
        immutable: Some(false),
        data: map(&[("a", "1"), ("b", "")]),
        binary_data: [("bin".to_string(), vec![0u8, 1, 2, 255])]
            .into_iter()
            .collect(),
    };
    round_trip::<k8s_openapi::api::core::v1::ConfigMap>(
        &cm,
        json!({
            "metadata": object_meta_json("settings"),
            "immutable": false,
            "data": {"a": "1", "b": ""},
            "binaryData": {"bin": "AAEC/w=="}
        }),
    );

    let secret = core::Secret {
        metadata: Some(object_meta("token")),
        immutable: None,
        data: [("key".to_string(), b"s3cr3t".to_vec())]
            .into_iter()
            .collect(),
        string_data: map(&[("plain", "text")]),
        r#type: s("Opaque"),
    };
    round_trip::<k8s_openapi::api::core::v1::Secret>(
        &secret,
        json!({
            "metadata": object_meta_json("token"),
            "data": {"key": "czNjcjN0"},
            "stringData": {"plain": "text"},
            "type": "Opaque"
        }),
    );
}

#[test]
fn service_endpoints_serviceaccount_binding() {
    let svc = core::Service {
        metadata: Some(object_meta("web")),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: s("http"),
                protocol: s("TCP"),
                port: Some(80),
                target_port: named("http"),
                node_port: Some(0),
                app_protocol: None,
            }],
            selector: map(&[("app", "web")]),
            cluster_ip: s("10.96.0.10"),
            cluster_ips: strings(&["10.96.0.10"]),
            r#type: s("ClusterIP"),
            session_affinity: s("None"),
            ip_families: strings(&["IPv4"]),
            ip_family_policy: s("SingleStack"),
            internal_traffic_policy: s("Cluster"),
            publish_not_ready_addresses: Some(false),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus {
            load_balancer: Some(core::LoadBalancerStatus { ingress: vec![] }),
            conditions: vec![condition("Ready")],
        }),
    };
    round_trip::<k8s_openapi::api::core::v1::Service>(
        &svc,
        json!({
            "metadata": object_meta_json("web"),
            "spec": {
                "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
                "selector": {"app": "web"},
                "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "type": "ClusterIP", "sessionAffinity": "None",
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster"
            },
            "status": {
                "loadBalancer": {},
                "conditions": [{
                    "type": "Ready", "status": "True",
                    "lastTransitionTime": "2024-05-06T07:08:09Z", "reason": "Done", "message": ""
                }]
            }
        }),
    );

    let ep = core::Endpoints {
        metadata: Some(object_meta("web")),
        subsets: vec![core::EndpointSubset {
            addresses: vec![core::EndpointAddress {
                ip: s("10.1.0.5"),
                hostname: Some(String::new()),
                node_name: s("node-1"),
                target_ref: Some(core::ObjectReference {
                    kind: s("Pod"),
                    namespace: s("default"),
                    name: s("web"),
                    uid: s("u"),
                    ..Default::default()
                }),
            }],
            not_ready_addresses: vec![],
            ports: vec![core::EndpointPort {
                name: s("http"),
                port: Some(80),
                protocol: s("TCP"),
                app_protocol: None,
            }],
        }],
    };
    round_trip::<k8s_openapi::api::core::v1::Endpoints>(
        &ep,
        json!({
            "metadata": object_meta_json("web"),
            "subsets": [{
                "addresses": [{
                    "ip": "10.1.0.5", "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u"}
                }],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
            }]
        }),
    );

    let sa = core::ServiceAccount {
        metadata: Some(object_meta("robot")),
        secrets: vec![core::ObjectReference {
            name: s("robot-token"),
            ..Default::default()
        }],
        image_pull_secrets: vec![core::LocalObjectReference {
            name: s("registry"),
        }],
        automount_service_account_token: Some(false),
    };
    round_trip::<k8s_openapi::api::core::v1::ServiceAccount>(
        &sa,
        json!({
            "metadata": object_meta_json("robot"),
            "secrets": [{"name": "robot-token"}],
            "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": false
        }),
    );

    let binding = core::Binding {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        target: Some(core::ObjectReference {
            kind: s("Node"),
            name: s("node-1"),
            api_version: s("v1"),
            ..Default::default()
        }),
    };
    round_trip::<k8s_openapi::api::core::v1::Binding>(
        &binding,
        json!({
            "metadata": {"name": "web"},
            "target": {"kind": "Node", "name": "node-1", "apiVersion": "v1"}
        }),
    );
}

#[test]
fn events_and_lease() {
    let ev = core::Event {
        metadata: Some(object_meta("web.1")),
        involved_object: Some(core::ObjectReference {
            kind: s("Pod"),
            name: s("web"),
            field_path: s("spec.containers{web}"),
            ..Default::default()
        }),
        reason: s("Pulled"),
        message: s("pulled"),
        source: Some(core::EventSource {
            component: s("kubelet"),
            host: s("node-1"),
        }),
        first_timestamp: time(),
        last_timestamp: time(),
        count: Some(2),
        r#type: s("Normal"),
        event_time: micro_time(),
        series: Some(core::EventSeries {
            count: Some(2),
            last_observed_time: micro_time(),
        }),
        action: Some(String::new()),
        related: None,
        reporting_component: s("kubelet"),
        reporting_instance: s("node-1"),
    };
    round_trip::<k8s_openapi::api::core::v1::Event>(
        &ev,
        json!({
            "metadata": object_meta_json("web.1"),
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{web}"},
            "reason": "Pulled", "message": "pulled",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-06T07:08:09Z",
            "lastTimestamp": "2024-05-06T07:08:09Z",
            "count": 2, "type": "Normal",
            "eventTime": "2024-05-06T07:08:09.123456Z",
            "series": {"count": 2, "lastObservedTime": "2024-05-06T07:08:09.123456Z"},
            "reportingComponent": "kubelet", "reportingInstance": "node-1"
        }),
    );

    use k8s_pb::api::events::v1 as events;
    let ev = events::Event {
        metadata: Some(object_meta("web.2")),
        event_time: micro_time(),
        series: None,
        reporting_controller: s("kubelet"),
        reporting_instance: s("node-1"),
        action: s("Pulling"),
        reason: s("Pulled"),
        regarding: Some(core::ObjectReference {
            kind: s("Pod"),
            name: s("web"),
            ..Default::default()
        }),
        related: None,
        note: s("pulled"),
        r#type: s("Normal"),
        deprecated_source: Some(core::EventSource::default()),
        deprecated_first_timestamp: Some(meta::Time::default()),
        deprecated_last_timestamp: Some(meta::Time::default()),
        deprecated_count: Some(0),
    };
    round_trip::<k8s_openapi::api::events::v1::Event>(
        &ev,
        json!({
            "metadata": object_meta_json("web.2"),
            "eventTime": "2024-05-06T07:08:09.123456Z",
            "reportingController": "kubelet", "reportingInstance": "node-1",
            "action": "Pulling", "reason": "Pulled",
            "regarding": {"kind": "Pod", "name": "web"},
            "note": "pulled", "type": "Normal",
            "deprecatedSource": {}
        }),
    );

    use k8s_pb::api::coordination::v1 as coordination;
    let lease = coordination::Lease {
        metadata: Some(object_meta("node-1")),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("node-1"),
            lease_duration_seconds: Some(40),
            acquire_time: micro_time(),
            renew_time: micro_time(),
            lease_transitions: Some(0),
            strategy: None,
            preferred_holder: None,
        }),
    };
    round_trip::<k8s_openapi::api::coordination::v1::Lease>(
        &lease,
        json!({
            "metadata": object_meta_json("node-1"),
            "spec": {
                "holderIdentity": "node-1", "leaseDurationSeconds": 40,
                "acquireTime": "2024-05-06T07:08:09.123456Z",
                "renewTime": "2024-05-06T07:08:09.123456Z",
                "leaseTransitions": 0
            }
        }),
    );
}

#[test]
fn endpoint_slice() {
    use k8s_pb::api::discovery::v1 as discovery;
    let slice = discovery::EndpointSlice {
        metadata: Some(object_meta("web-abcde")),
        address_type: s("IPv4"),
        endpoints: vec![discovery::Endpoint {
            addresses: strings(&["10.244.0.5"]),
            conditions: Some(discovery::EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(false),
            }),
            hostname: None,
            target_ref: Some(core::ObjectReference {
                kind: s("Pod"),
                namespace: s("default"),
                name: s("web-1"),
                uid: s("u-1"),
                ..Default::default()
            }),
            deprecated_topology: map(&[("rack", "r1")]),
            node_name: s("node-1"),
            zone: None,
            hints: None,
        }],
        ports: vec![discovery::EndpointPort {
            name: s(""),
            protocol: s("TCP"),
            port: Some(80),
            app_protocol: None,
        }],
    };
    round_trip::<k8s_openapi::api::discovery::v1::EndpointSlice>(
        &slice,
        json!({
            "metadata": object_meta_json("web-abcde"),
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.244.0.5"],
                "conditions": {"ready": false, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1"},
                "deprecatedTopology": {"rack": "r1"},
                "nodeName": "node-1"
            }],
            "ports": [{"name": "", "protocol": "TCP", "port": 80}]
        }),
    );
}
