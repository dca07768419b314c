//! Test builders for Deployments and ReplicaSets (the `newDeployment` / `rs` helpers of
//! Kubernetes' `deployment_controller_test.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::owner_ref::new_controller_ref;

pub use crate::testing::at;
use crate::testing::{object_meta, pod_template, selector_for};

/// `"25%"` → String, `"3"` → Int, as `intstr.Parse`.
pub fn intstr(v: &str) -> IntOrString {
    v.parse::<i32>()
        .map(IntOrString::Int)
        .unwrap_or_else(|_| IntOrString::String(v.to_string()))
}

/// A pod template running `image`, labelled `app: foo`.
pub fn template(image: &str) -> PodTemplateSpec {
    pod_template(&labels(), image)
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "foo".to_string())])
}

/// A rolling Deployment `foo` with `replicas`, `maxSurge`, `maxUnavailable`, image `v1`,
/// progress deadline 600 s and history limit 10 (the API server's defaults).
pub fn deployment(replicas: i32, surge: &str, unavailable: &str) -> Deployment {
    Deployment {
        metadata: object_meta("foo"),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: selector_for(&labels()),
            template: template("v1"),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(intstr(surge)),
                    max_unavailable: Some(intstr(unavailable)),
                }),
            }),
            progress_deadline_seconds: Some(600),
            revision_history_limit: Some(10),
            ..Default::default()
        }),
        status: None,
    }
}

/// A Recreate Deployment `foo`.
pub fn recreate_deployment(replicas: i32) -> Deployment {
    let mut d = deployment(replicas, "0", "0");
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
    }
    d
}

/// A ReplicaSet owned by [`deployment`]'s `foo`, created at `at(created)`, with `replicas`
/// of which `available` are available (and ready, and existing).
pub fn rs(name: &str, image: &str, replicas: i32, available: i32, created: i64) -> ReplicaSet {
    let owner = deployment(1, "0", "0");
    ReplicaSet {
        metadata: ObjectMeta {
            creation_timestamp: Some(Time(at(created))),
            owner_references: Some(vec![new_controller_ref(&owner)]),
            ..object_meta(name)
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: selector_for(&labels()),
            template: Some(template(image)),
            min_ready_seconds: None,
        }),
        status: Some(ReplicaSetStatus {
            replicas: available,
            ready_replicas: Some(available),
            available_replicas: Some(available),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

/// Sets an annotation.
pub fn annotate(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}
