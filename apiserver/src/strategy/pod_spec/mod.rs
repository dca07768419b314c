//! The `PodSpec` shared by Pods and every pod template (Deployment, ReplicaSet, DaemonSet,
//! StatefulSet, Job, CronJob): its defaults ([`defaults`]) and its validation
//! ([`validation`]), written once and called by each kind.
//!
//! ```text
//! Pod.spec ──────────────────────────────┐
//! Deployment.spec.template.spec ─────────┤
//! ReplicaSet / DaemonSet / StatefulSet ──┼──▶ default_pod_spec / validate_pod_spec
//! Job.spec.template.spec ────────────────┤
//! CronJob.spec.jobTemplate.spec.template ┘
//! ```

pub mod defaults;
pub mod ephemeral;
pub mod validation;

pub use defaults::{default_pod_spec, default_pod_template};
pub use validation::{validate_pod_spec, validate_pod_template, validate_protocol};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::field::FieldPath;
    use k8s_openapi::api::core::v1::PodSpec;
    use serde_json::json;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let mut spec: PodSpec = serde_json::from_value(spec).unwrap();
        default_pod_spec(&mut spec);
        crate::strategy::messages(&validate_pod_spec(&spec, &FieldPath::new("spec")))
    }

    #[test]
    fn a_minimal_spec_is_valid() {
        assert_eq!(
            errors(json!({"containers": [{"name": "nginx", "image": "nginx"}]})),
            Vec::<String>::new()
        );
    }

    #[test]
    fn container_rules() {
        let cases: &[(serde_json::Value, &str)] = &[
            (json!({"containers": []}), "spec.containers: Required value"),
            (
                json!({"containers": [{"name": "", "image": "x"}]}),
                "spec.containers[0].name: Required value",
            ),
            (
                json!({"containers": [{"name": "Web", "image": "x"}]}),
                "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]}),
                "spec.containers[1].name: Duplicate value: \"a\"",
            ),
            (
                json!({"containers": [{"name": "a"}]}),
                "spec.containers[0].image: Required value",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 70000}]}]}),
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}),
                "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "imagePullPolicy": "Sometimes"}]}),
                "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "env": [{"name": "A=B"}]}]}),
                "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}),
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"limits": {"memory": "lots"}}}]}),
                "spec.containers[0].resources.limits[memory]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"limits": {"gpu": "1"}}}]}),
                "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}),
                "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}], "restartPolicy": "Sometimes"}),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}], "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}),
                "spec.volumes[1].name: Duplicate value: \"v\"",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}], "volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/"}}]}),
                "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}], "activeDeadlineSeconds": 0}),
                "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}], "tolerations": [{"operator": "Equal", "value": "x"}]}),
                "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(errors(spec.clone()), vec![want.to_string()], "{spec}");
        }
    }

    #[test]
    fn init_container_names_clash_with_containers() {
        let errs = errors(json!({
            "initContainers": [{"name": "a", "image": "x"}],
            "containers": [{"name": "a", "image": "y"}]
        }));
        assert_eq!(
            errs,
            vec!["spec.containers[0].name: Duplicate value: \"a\""]
        );
    }

    #[test]
    fn only_init_containers_restart_and_only_always() {
        let errs = errors(json!({
            "initContainers": [{"name": "log", "image": "x", "restartPolicy": "Always"}, {"name": "i", "image": "x", "restartPolicy": "Never"}],
            "containers": [{"name": "a", "image": "y", "restartPolicy": "Always"}]
        }));
        assert_eq!(
            errs,
            vec![
                "spec.initContainers[1].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
            ]
        );
    }

    #[test]
    fn spec_defaults() {
        let mut spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                            "readinessProbe": {"httpGet": {"port": 80}}}]
        }))
        .unwrap();
        default_pod_spec(&mut spec);
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({
                "containers": [{
                    "name": "nginx", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                }],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30
            })
        );
    }
}
