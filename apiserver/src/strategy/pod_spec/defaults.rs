//! Defaults of a `PodSpec`, wherever it appears: in a Pod and in every pod template
//! (`pkg/apis/core/v1/defaults.go` `SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Probe`, `SetDefaults_Volume`, ... and the declarative `+default` markers such as
//! a port's `protocol: TCP`).
//!
//! Go's struct fields that are not pointers always appear in Kubernetes' JSON (`resources: {}`,
//! `securityContext: {}`); the `k8s-openapi` types make them `Option`s, so the defaults below
//! fill them in to give the same JSON.

use apimachinery::resource::quantity::canonicalize;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `SetDefaults_PodSpec` and the defaults of everything inside it.
pub fn default_pod_spec(spec: &mut PodSpec) {
    set_if_none(&mut spec.dns_policy, "ClusterFirst");
    set_if_none(&mut spec.restart_policy, "Always");
    spec.security_context.get_or_insert_with(Default::default);
    spec.termination_grace_period_seconds.get_or_insert(30);
    set_if_none(&mut spec.scheduler_name, "default-scheduler");
    for c in &mut spec.containers {
        default_container(c);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
    super::ephemeral::default_ephemeral_containers(spec);
}

/// The defaults of a pod template: its pod spec (a template without `spec` gets one, as Go's
/// non-pointer field always exists).
pub fn default_pod_template(template: &mut PodTemplateSpec) {
    default_pod_spec(template.spec.get_or_insert_with(Default::default));
}

fn set_if_none(field: &mut Option<String>, value: &str) {
    if field.as_deref().unwrap_or("").is_empty() {
        *field = Some(value.to_owned());
    }
}

/// The tag Kubernetes' `parsers.ParseImageName` finds: `latest` when there is neither a tag
/// nor a digest.
pub fn image_tag(image: &str) -> &str {
    let (name, has_digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    match last_segment.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if has_digest => "",
        None => "latest",
    }
}

/// `SetDefaults_Container`, the port protocol, the probes and `resources: {}`.
pub fn default_container(c: &mut Container) {
    if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        let policy = if image_tag(c.image.as_deref().unwrap_or("")) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.image_pull_policy = Some(policy.to_owned());
    }
    set_if_none(&mut c.termination_message_path, "/dev/termination-log");
    set_if_none(&mut c.termination_message_policy, "File");
    let resources = c
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    for list in [&mut resources.limits, &mut resources.requests]
        .into_iter()
        .flatten()
    {
        default_resource_list(list);
    }
    for p in c.ports.iter_mut().flatten() {
        set_if_none(&mut p.protocol, "TCP");
    }
    for probe in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(probe);
    }
    for env in c.env.iter_mut().flatten() {
        default_env_var(env);
    }
}

/// `SetDefaults_ResourceList`: quantities rounded up to milli-units and stored in canonical form
/// (`0.5` → `500m`, `1024Mi` → `1Gi`); malformed ones are left for validation to report.
pub fn default_resource_list(list: &mut std::collections::BTreeMap<String, Quantity>) {
    for q in list.values_mut() {
        if let Some(canonical) = canonicalize(&q.0) {
            q.0 = canonical;
        }
    }
}

/// `SetDefaults_Probe` and `SetDefaults_HTTPGetAction`.
fn default_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    if let Some(http) = &mut p.http_get {
        set_if_none(&mut http.path, "/");
        set_if_none(&mut http.scheme, "HTTP");
    }
}

/// `SetDefaults_ObjectFieldSelector`: a field reference's `apiVersion` is `v1`.
fn default_env_var(env: &mut EnvVar) {
    if let Some(field_ref) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
        set_if_none(&mut field_ref.api_version, "v1");
    }
}

/// `SetDefaults_Volume` and the `defaultMode: 420` (0644) of secret, configMap, downwardAPI and
/// projected volumes.
fn default_volume(v: &mut Volume) {
    let has_source = serde_json::to_value(&*v)
        .ok()
        .and_then(|j| j.as_object().map(|o| o.keys().any(|k| k != "name")))
        .unwrap_or(true);
    if !has_source {
        v.empty_dir = Some(Default::default());
    }
    if let Some(s) = &mut v.secret {
        s.default_mode.get_or_insert(0o644);
    }
    if let Some(s) = &mut v.config_map {
        s.default_mode.get_or_insert(0o644);
    }
    if let Some(s) = &mut v.downward_api {
        s.default_mode.get_or_insert(0o644);
    }
    if let Some(s) = &mut v.projected {
        s.default_mode.get_or_insert(0o644);
    }
    if let Some(h) = &mut v.host_path {
        h.type_.get_or_insert_with(String::new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abcd", "IfNotPresent"),
        ] {
            let mut c = Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            };
            default_container(&mut c);
            assert_eq!(c.image_pull_policy.as_deref(), Some(want), "{image}");
        }
    }

    #[test]
    fn resources_are_canonical() {
        let mut c: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"}, "requests": {"cpu": 1, "memory": "bad"}}
        }))
        .unwrap();
        default_container(&mut c);
        assert_eq!(
            serde_json::to_value(&c.resources).unwrap(),
            serde_json::json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "bad"}})
        );
    }

    #[test]
    fn volumes_default_to_empty_dir_and_mode_0644() {
        let mut spec = PodSpec {
            volumes: Some(vec![
                Volume {
                    name: "scratch".into(),
                    ..Default::default()
                },
                Volume {
                    name: "cfg".into(),
                    config_map: Some(Default::default()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        default_pod_spec(&mut spec);
        let vols = spec.volumes.unwrap_or_default();
        assert!(vols[0].empty_dir.is_some());
        assert_eq!(
            vols[1].config_map.as_ref().and_then(|c| c.default_mode),
            Some(420)
        );
        assert!(vols[1].empty_dir.is_none());
    }
}
