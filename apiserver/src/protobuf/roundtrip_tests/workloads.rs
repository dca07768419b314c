//! Round trips of the workload kinds (`apps`, `batch`), the subresources' kinds (`Eviction`,
//! `Scale`) and `CustomResourceDefinition`.

use super::fixtures::{
    object_meta, object_meta_json, selector, selector_json, template, template_json,
};
use super::{int, map, named, q, round_trip, s, strings, time};
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;
use std::collections::BTreeMap;

#[test]
fn workloads() {
    use k8s_pb::api::apps::v1 as apps;
    let deploy = apps::Deployment {
        metadata: Some(object_meta("web")),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(selector()),
            template: Some(template()),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: named("25%"),
                    max_surge: int(1),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
            paused: Some(false),
            progress_deadline_seconds: Some(600),
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(3),
            replicas: Some(1),
            updated_replicas: Some(1),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(1),
            conditions: vec![apps::DeploymentCondition {
                r#type: s("Progressing"),
                status: s("True"),
                last_update_time: time(),
                last_transition_time: time(),
                reason: s("NewReplicaSetAvailable"),
                message: Some(String::new()),
            }],
            collision_count: None,
            terminating_replicas: None,
        }),
    };
    round_trip::<k8s_openapi::api::apps::v1::Deployment>(
        &deploy,
        json!({
            "metadata": object_meta_json("web"),
            "spec": {
                "replicas": 0,
                "selector": selector_json(),
                "template": template_json(),
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            },
            "status": {
                "observedGeneration": 3, "replicas": 1, "updatedReplicas": 1,
                "unavailableReplicas": 1,
                "conditions": [{
                    "type": "Progressing", "status": "True",
                    "lastUpdateTime": "2024-05-06T07:08:09Z",
                    "lastTransitionTime": "2024-05-06T07:08:09Z",
                    "reason": "NewReplicaSetAvailable"
                }]
            }
        }),
    );

    let rs = apps::ReplicaSet {
        metadata: Some(object_meta("web-1")),
        spec: Some(apps::ReplicaSetSpec {
            replicas: Some(2),
            min_ready_seconds: Some(5),
            selector: Some(selector()),
            template: Some(template()),
        }),
        status: Some(apps::ReplicaSetStatus {
            replicas: Some(0),
            ..Default::default()
        }),
    };
    round_trip::<k8s_openapi::api::apps::v1::ReplicaSet>(
        &rs,
        json!({
            "metadata": object_meta_json("web-1"),
            "spec": {
                "replicas": 2, "minReadySeconds": 5,
                "selector": selector_json(), "template": template_json()
            },
            "status": {"replicas": 0}
        }),
    );

    let ds = apps::DaemonSet {
        metadata: Some(object_meta("agent")),
        spec: Some(apps::DaemonSetSpec {
            selector: Some(selector()),
            template: Some(template()),
            update_strategy: Some(apps::DaemonSetUpdateStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDaemonSet {
                    max_unavailable: int(1),
                    max_surge: int(0),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::apps::v1::DaemonSet>(
        &ds,
        json!({
            "metadata": object_meta_json("agent"),
            "spec": {
                "selector": selector_json(), "template": template_json(),
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10
            }
        }),
    );

    let sts = apps::StatefulSet {
        metadata: Some(object_meta("db")),
        spec: Some(apps::StatefulSetSpec {
            replicas: Some(3),
            selector: Some(selector()),
            template: Some(template()),
            volume_claim_templates: vec![core::PersistentVolumeClaim {
                metadata: Some(meta::ObjectMeta {
                    name: s("data"),
                    ..Default::default()
                }),
                spec: Some(core::PersistentVolumeClaimSpec {
                    access_modes: strings(&["ReadWriteOnce"]),
                    resources: Some(core::VolumeResourceRequirements {
                        requests: [("storage".to_string(), q("1Gi"))].into_iter().collect(),
                        limits: BTreeMap::new(),
                    }),
                    storage_class_name: Some(String::new()),
                    ..Default::default()
                }),
                status: None,
            }],
            service_name: s("db"),
            pod_management_policy: s("Parallel"),
            update_strategy: Some(apps::StatefulSetUpdateStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    max_unavailable: None,
                }),
            }),
            revision_history_limit: Some(10),
            min_ready_seconds: Some(0),
            persistent_volume_claim_retention_policy: Some(
                apps::StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: s("Retain"),
                    when_scaled: s("Delete"),
                },
            ),
            ordinals: Some(apps::StatefulSetOrdinals { start: Some(0) }),
        }),
        status: None,
    };
    round_trip::<k8s_openapi::api::apps::v1::StatefulSet>(
        &sts,
        json!({
            "metadata": object_meta_json("db"),
            "spec": {
                "replicas": 3, "selector": selector_json(), "template": template_json(),
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": ""
                    }
                }],
                "serviceName": "db", "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
                "ordinals": {"start": 0}
            }
        }),
    );
}

#[test]
fn jobs_and_cronjobs() {
    use k8s_pb::api::batch::v1 as batch;
    let job_spec = || batch::JobSpec {
        parallelism: Some(2),
        completions: Some(4),
        active_deadline_seconds: Some(600),
        selector: Some(selector()),
        manual_selector: Some(false),
        template: Some(template()),
        backoff_limit: Some(0),
        ttl_seconds_after_finished: Some(100),
        completion_mode: s("Indexed"),
        suspend: Some(false),
        pod_failure_policy: Some(batch::PodFailurePolicy {
            rules: vec![batch::PodFailurePolicyRule {
                action: s("FailJob"),
                on_exit_codes: Some(batch::PodFailurePolicyOnExitCodesRequirement {
                    container_name: s("web"),
                    operator: s("In"),
                    values: vec![1, 42],
                }),
                on_pod_conditions: vec![],
            }],
        }),
        ..Default::default()
    };
    let job_spec_json = json!({
        "parallelism": 2, "completions": 4, "activeDeadlineSeconds": 600,
        "selector": selector_json(), "manualSelector": false, "template": template_json(),
        "backoffLimit": 0, "ttlSecondsAfterFinished": 100, "completionMode": "Indexed",
        "suspend": false,
        "podFailurePolicy": {"rules": [{
            "action": "FailJob",
            "onExitCodes": {"containerName": "web", "operator": "In", "values": [1, 42]}
        }]}
    });
    let job = batch::Job {
        metadata: Some(object_meta("once")),
        spec: Some(job_spec()),
        status: Some(batch::JobStatus {
            start_time: time(),
            active: Some(1),
            succeeded: Some(0),
            ready: Some(0),
            completed_indexes: Some(String::new()),
            ..Default::default()
        }),
    };
    round_trip::<k8s_openapi::api::batch::v1::Job>(
        &job,
        json!({
            "metadata": object_meta_json("once"),
            "spec": job_spec_json.clone(),
            "status": {"startTime": "2024-05-06T07:08:09Z", "active": 1, "ready": 0}
        }),
    );

    let cj = batch::CronJob {
        metadata: Some(object_meta("tick")),
        spec: Some(batch::CronJobSpec {
            schedule: s("*/5 * * * *"),
            time_zone: s("Etc/UTC"),
            starting_deadline_seconds: Some(0),
            concurrency_policy: s("Forbid"),
            suspend: Some(false),
            job_template: Some(batch::JobTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: map(&[("app", "tick")]),
                    ..Default::default()
                }),
                spec: Some(job_spec()),
            }),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
        }),
        status: Some(batch::CronJobStatus {
            active: vec![],
            last_schedule_time: time(),
            last_successful_time: None,
        }),
    };
    round_trip::<k8s_openapi::api::batch::v1::CronJob>(
        &cj,
        json!({
            "metadata": object_meta_json("tick"),
            "spec": {
                "schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "startingDeadlineSeconds": 0,
                "concurrencyPolicy": "Forbid", "suspend": false,
                "jobTemplate": {"metadata": {"labels": {"app": "tick"}}, "spec": job_spec_json},
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1
            },
            "status": {"lastScheduleTime": "2024-05-06T07:08:09Z"}
        }),
    );
}

#[test]
fn eviction_and_scale() {
    use k8s_pb::api::autoscaling::v1 as autoscaling;
    use k8s_pb::api::policy::v1 as policy;
    let eviction = policy::Eviction {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("default"),
            ..Default::default()
        }),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(meta::Preconditions {
                uid: s("u"),
                resource_version: None,
            }),
            orphan_dependents: None,
            propagation_policy: s("Foreground"),
            dry_run: strings(&["All"]),
            ignore_store_read_error_with_cluster_breaking_potential: Some(false),
        }),
    };
    round_trip::<k8s_openapi::api::policy::v1::Eviction>(
        &eviction,
        json!({
            "metadata": {"name": "web", "namespace": "default"},
            "deleteOptions": {
                "gracePeriodSeconds": 0, "preconditions": {"uid": "u"},
                "propagationPolicy": "Foreground", "dryRun": ["All"],
                "ignoreStoreReadErrorWithClusterBreakingPotential": false
            }
        }),
    );

    let scale = autoscaling::Scale {
        metadata: Some(object_meta("web")),
        spec: Some(autoscaling::ScaleSpec { replicas: Some(0) }),
        status: Some(autoscaling::ScaleStatus {
            replicas: Some(2),
            selector: s("app=web"),
        }),
    };
    round_trip::<k8s_openapi::api::autoscaling::v1::Scale>(
        &scale,
        json!({
            "metadata": object_meta_json("web"),
            "spec": {},
            "status": {"replicas": 2, "selector": "app=web"}
        }),
    );
}

#[test]
fn custom_resource_definition() {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let props = |ty: &str| ext::JsonSchemaProps {
        r#type: s(ty),
        ..Default::default()
    };
    let schema = ext::JsonSchemaProps {
        r#type: s("object"),
        description: s("a widget"),
        required: strings(&["spec"]),
        properties: [
            (
                "spec".to_string(),
                ext::JsonSchemaProps {
                    r#type: s("object"),
                    properties: [
                        (
                            "size".to_string(),
                            ext::JsonSchemaProps {
                                r#type: s("integer"),
                                format: s("int32"),
                                minimum: Some(1.0),
                                maximum: Some(10.5),
                                default: Some(ext::Json {
                                    raw: Some(b"3".to_vec()),
                                }),
                                ..Default::default()
                            },
                        ),
                        (
                            "tags".to_string(),
                            ext::JsonSchemaProps {
                                r#type: s("array"),
                                items: Some(Box::new(ext::JsonSchemaPropsOrArray {
                                    schema: Some(Box::new(props("string"))),
                                    j_son_schemas: vec![],
                                })),
                                x_kubernetes_list_type: s("set"),
                                ..Default::default()
                            },
                        ),
                        (
                            "mode".to_string(),
                            ext::JsonSchemaProps {
                                r#type: s("string"),
                                r#enum: vec![
                                    ext::Json {
                                        raw: Some(br#""fast""#.to_vec()),
                                    },
                                    ext::Json {
                                        raw: Some(br#""slow""#.to_vec()),
                                    },
                                ],
                                ..Default::default()
                            },
                        ),
                        (
                            "labels".to_string(),
                            ext::JsonSchemaProps {
                                r#type: s("object"),
                                additional_properties: Some(Box::new(ext::JsonSchemaPropsOrBool {
                                    allows: Some(true),
                                    schema: Some(Box::new(props("string"))),
                                })),
                                ..Default::default()
                            },
                        ),
                        (
                            "blob".to_string(),
                            ext::JsonSchemaProps {
                                x_kubernetes_preserve_unknown_fields: Some(true),
                                x_kubernetes_int_or_string: Some(false),
                                ..Default::default()
                            },
                        ),
                    ]
                    .into_iter()
                    .collect(),
                    ..Default::default()
                },
            ),
            ("status".to_string(), props("object")),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let crd = ext::CustomResourceDefinition {
        metadata: Some(meta::ObjectMeta {
            name: s("widgets.example.com"),
            ..Default::default()
        }),
        spec: Some(ext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(ext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                singular: s("widget"),
                short_names: strings(&["wd"]),
                kind: s("Widget"),
                list_kind: s("WidgetList"),
                categories: strings(&["all"]),
            }),
            scope: s("Namespaced"),
            versions: vec![ext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                deprecated: Some(false),
                deprecation_warning: None,
                schema: Some(ext::CustomResourceValidation {
                    open_apiv3_schema: Some(schema),
                }),
                subresources: Some(ext::CustomResourceSubresources {
                    status: Some(ext::CustomResourceSubresourceStatus {}),
                    scale: Some(ext::CustomResourceSubresourceScale {
                        spec_replicas_path: s(".spec.size"),
                        status_replicas_path: s(".status.size"),
                        label_selector_path: None,
                    }),
                }),
                additional_printer_columns: vec![ext::CustomResourceColumnDefinition {
                    name: s("Size"),
                    r#type: s("integer"),
                    format: Some(String::new()),
                    description: Some(String::new()),
                    priority: Some(0),
                    json_path: s(".spec.size"),
                }],
                selectable_fields: vec![],
            }],
            conversion: Some(ext::CustomResourceConversion {
                strategy: s("None"),
                webhook: None,
            }),
            preserve_unknown_fields: Some(false),
        }),
        status: None,
    };
    round_trip::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
        &crd,
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {
                    "plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                    "kind": "Widget", "listKind": "WidgetList", "categories": ["all"]
                },
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "description": "a widget", "required": ["spec"],
                        "properties": {
                            "spec": {"type": "object", "properties": {
                                "size": {
                                    "type": "integer", "format": "int32",
                                    "minimum": 1.0, "maximum": 10.5, "default": 3
                                },
                                "tags": {
                                    "type": "array", "items": {"type": "string"},
                                    "x-kubernetes-list-type": "set"
                                },
                                "mode": {"type": "string", "enum": ["fast", "slow"]},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "blob": {"x-kubernetes-preserve-unknown-fields": true}
                            }},
                            "status": {"type": "object"}
                        }
                    }},
                    "subresources": {
                        "status": {},
                        "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}
                    },
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
                }],
                "conversion": {"strategy": "None"}
            }
        }),
    );
}
