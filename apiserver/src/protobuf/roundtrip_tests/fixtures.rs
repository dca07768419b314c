//! The parts most kinds share, each as a `k8s-pb` object and its expected JSON: object
//! metadata, a label selector and a pod template with many of a pod's fields.

use super::{int, map, named, q, s, strings, time};
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Value, json};

pub(super) fn object_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        // Zero values Go writes for non-pointer fields.
        generate_name: Some(String::new()),
        namespace: s("default"),
        self_link: Some(String::new()),
        uid: s("0b6c6c1e-3f0b-4c52-8a4e-1c2d3e4f5a6b"),
        resource_version: s("42"),
        generation: Some(3),
        creation_timestamp: time(),
        deletion_timestamp: None,
        deletion_grace_period_seconds: Some(0),
        labels: map(&[("app", "web"), ("tier", "front")]),
        annotations: map(&[("note", "a b c")]),
        owner_references: vec![meta::OwnerReference {
            kind: s("ReplicaSet"),
            name: s("web-1"),
            uid: s("11111111-2222-3333-4444-555555555555"),
            api_version: s("apps/v1"),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }],
        finalizers: strings(&["example.com/keep"]),
        managed_fields: vec![meta::ManagedFieldsEntry {
            manager: s("kubectl"),
            operation: s("Update"),
            api_version: s("v1"),
            time: time(),
            fields_type: s("FieldsV1"),
            fields_v1: Some(meta::FieldsV1 {
                raw: Some(br#"{"f:metadata":{"f:labels":{".":{}}}}"#.to_vec()),
            }),
            subresource: Some(String::new()),
        }],
    }
}

pub(super) fn object_meta_json(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "default",
        "uid": "0b6c6c1e-3f0b-4c52-8a4e-1c2d3e4f5a6b",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-05-06T07:08:09Z",
        "deletionGracePeriodSeconds": 0,
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "a b c"},
        "ownerReferences": [{
            "kind": "ReplicaSet", "name": "web-1",
            "uid": "11111111-2222-3333-4444-555555555555", "apiVersion": "apps/v1",
            "controller": true, "blockOwnerDeletion": false
        }],
        "finalizers": ["example.com/keep"],
        "managedFields": [{
            "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
            "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}
        }]
    })
}

pub(super) fn selector() -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: map(&[("app", "web")]),
        match_expressions: vec![meta::LabelSelectorRequirement {
            key: s("tier"),
            operator: s("In"),
            values: strings(&["front", "back"]),
        }],
    }
}

pub(super) fn selector_json() -> Value {
    json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]
    })
}

fn container(name: &str) -> core::Container {
    core::Container {
        name: s(name),
        image: s("nginx:1.25"),
        command: strings(&["nginx"]),
        args: strings(&["-g", "daemon off;"]),
        working_dir: Some(String::new()),
        ports: vec![core::ContainerPort {
            name: s("http"),
            host_port: Some(0),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: Some(String::new()),
        }],
        env: vec![
            core::EnvVar {
                name: s("MODE"),
                value: s("prod"),
                value_from: None,
            },
            core::EnvVar {
                name: s("NODE"),
                value: Some(String::new()),
                value_from: Some(core::EnvVarSource {
                    field_ref: Some(core::ObjectFieldSelector {
                        api_version: s("v1"),
                        field_path: s("spec.nodeName"),
                    }),
                    ..Default::default()
                }),
            },
        ],
        resources: Some(core::ResourceRequirements {
            limits: [
                ("cpu".to_string(), q("500m")),
                ("memory".to_string(), q("128Mi")),
            ]
            .into_iter()
            .collect(),
            requests: [("cpu".to_string(), q("250m"))].into_iter().collect(),
            claims: vec![],
        }),
        volume_mounts: vec![core::VolumeMount {
            name: s("host"),
            read_only: Some(true),
            mount_path: s("/host"),
            sub_path: Some(String::new()),
            ..Default::default()
        }],
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/healthz"),
                    port: named("http"),
                    host: Some(String::new()),
                    scheme: s("HTTP"),
                    http_headers: vec![],
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(5),
            timeout_seconds: Some(1),
            period_seconds: Some(10),
            success_threshold: Some(1),
            failure_threshold: Some(3),
            termination_grace_period_seconds: None,
        }),
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                tcp_socket: Some(core::TcpSocketAction {
                    port: int(8080),
                    host: Some(String::new()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        termination_message_path: s("/dev/termination-log"),
        image_pull_policy: s("IfNotPresent"),
        security_context: Some(core::SecurityContext {
            privileged: Some(false),
            run_as_user: Some(0),
            capabilities: Some(core::Capabilities {
                add: strings(&["NET_ADMIN"]),
                drop: vec![],
            }),
            ..Default::default()
        }),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        termination_message_policy: s("File"),
        ..Default::default()
    }
}

fn container_json(name: &str) -> Value {
    json!({
        "name": name,
        "image": "nginx:1.25",
        "command": ["nginx"],
        "args": ["-g", "daemon off;"],
        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
        "env": [
            {"name": "MODE", "value": "prod"},
            {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
        ],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
        "volumeMounts": [{"name": "host", "readOnly": true, "mountPath": "/host"}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
            "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3
        },
        "readinessProbe": {"tcpSocket": {"port": 8080}},
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"privileged": false, "runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"]}},
        "terminationMessagePolicy": "File"
    })
}

pub(super) fn pod_spec() -> core::PodSpec {
    core::PodSpec {
        volumes: vec![
            core::Volume {
                name: s("host"),
                volume_source: Some(core::VolumeSource {
                    host_path: Some(core::HostPathVolumeSource {
                        path: s("/"),
                        r#type: Some(String::new()),
                    }),
                    ..Default::default()
                }),
            },
            core::Volume {
                name: s("scratch"),
                volume_source: Some(core::VolumeSource {
                    empty_dir: Some(core::EmptyDirVolumeSource {
                        medium: s("Memory"),
                        size_limit: Some(q("1Gi")),
                    }),
                    ..Default::default()
                }),
            },
            core::Volume {
                name: s("config"),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: s("settings"),
                        }),
                        items: vec![core::KeyToPath {
                            key: s("a"),
                            path: s("a.txt"),
                            mode: Some(0o400),
                        }],
                        default_mode: Some(0o644),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
            },
        ],
        init_containers: vec![container("init")],
        containers: vec![container("web")],
        ephemeral_containers: vec![core::EphemeralContainer {
            ephemeral_container_common: Some(core::EphemeralContainerCommon {
                name: s("debugger"),
                image: s("busybox"),
                stdin: Some(true),
                tty: Some(true),
                termination_message_policy: s("File"),
                ..Default::default()
            }),
            target_container_name: s("web"),
        }],
        restart_policy: s("Always"),
        termination_grace_period_seconds: Some(30),
        active_deadline_seconds: None,
        dns_policy: s("ClusterFirst"),
        node_selector: map(&[("kubernetes.io/os", "linux")]),
        service_account_name: s("robot"),
        automount_service_account_token: Some(false),
        node_name: s("node-1"),
        host_network: Some(true),
        host_pid: Some(false),
        security_context: Some(core::PodSecurityContext {
            run_as_non_root: Some(true),
            fs_group: Some(2000),
            supplemental_groups: vec![1, 2],
            ..Default::default()
        }),
        hostname: Some(String::new()),
        affinity: Some(core::Affinity {
            node_affinity: Some(core::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                    node_selector_terms: vec![core::NodeSelectorTerm {
                        match_expressions: vec![core::NodeSelectorRequirement {
                            key: s("zone"),
                            operator: s("In"),
                            values: strings(&["a"]),
                        }],
                        match_fields: vec![],
                    }],
                }),
                preferred_during_scheduling_ignored_during_execution: vec![],
            }),
            ..Default::default()
        }),
        scheduler_name: s("default-scheduler"),
        tolerations: vec![core::Toleration {
            key: s("node.kubernetes.io/not-ready"),
            operator: s("Exists"),
            value: Some(String::new()),
            effect: s("NoExecute"),
            toleration_seconds: Some(300),
        }],
        priority: Some(0),
        enable_service_links: Some(true),
        topology_spread_constraints: vec![core::TopologySpreadConstraint {
            max_skew: Some(1),
            topology_key: s("zone"),
            when_unsatisfiable: s("DoNotSchedule"),
            label_selector: Some(selector()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub(super) fn pod_spec_json() -> Value {
    json!({
        "volumes": [
            {"name": "host", "hostPath": {"path": "/", "type": ""}},
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "config", "configMap": {
                "name": "settings", "items": [{"key": "a", "path": "a.txt", "mode": 256}],
                "defaultMode": 420, "optional": false
            }}
        ],
        "initContainers": [container_json("init")],
        "containers": [container_json("web")],
        "ephemeralContainers": [{
            "name": "debugger", "image": "busybox", "stdin": true, "tty": true,
            "terminationMessagePolicy": "File", "targetContainerName": "web"
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "robot",
        "automountServiceAccountToken": false,
        "nodeName": "node-1",
        "hostNetwork": true,
        "securityContext": {"runAsNonRoot": true, "fsGroup": 2000, "supplementalGroups": [1, 2]},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }}},
        "schedulerName": "default-scheduler",
        "tolerations": [{
            "key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300
        }],
        "priority": 0,
        "enableServiceLinks": true,
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector_json()
        }]
    })
}

pub(super) fn template() -> core::PodTemplateSpec {
    core::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta {
            labels: map(&[("app", "web")]),
            ..Default::default()
        }),
        spec: Some(pod_spec()),
    }
}

pub(super) fn template_json() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec_json()})
}

pub(super) fn condition(ty: &str) -> meta::Condition {
    meta::Condition {
        r#type: s(ty),
        status: s("True"),
        observed_generation: Some(0),
        last_transition_time: time(),
        reason: s("Done"),
        message: Some(String::new()),
    }
}
