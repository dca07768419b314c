//! Validation of a `PodSpec` and a pod template (`pkg/apis/core/validation/validation.go`
//! `ValidatePodSpec`, `validateContainers`, `validateContainerPorts`, `ValidateEnv`,
//! `ValidateVolumeMounts`, `ValidateVolumes`, `ValidateContainerResourceRequirements`,
//! `validateTolerations`, `ValidatePodTemplateSpec`).
//!
//! The checks are the ones a user meets in practice (names, images, ports, env names,
//! resources, volumes and mounts, policies); rarely used corners (probes' handlers, security
//! contexts, topology spread, DNS config, ...) are accepted as they come.

use crate::strategy::FieldError;
use crate::strategy::field::FieldPath;
use crate::strategy::meta::{validate_labels, validate_labels_and_annotations};
use apimachinery::resource::quantity::Quantity;
use apimachinery::validation::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_env_var_name, is_label_value,
    is_qualified_name, is_valid_port_name, is_valid_port_num,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
    Volume, VolumeMount,
};
use std::collections::BTreeSet;

/// `ValidatePodTemplateSpec`: the template's labels and annotations, then its pod spec. As in
/// Kubernetes, label errors point at `<template>.labels` (not `.metadata.labels`).
pub fn validate_pod_template(template: &PodTemplateSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(meta) = &template.metadata {
        errs.extend(validate_labels_and_annotations(meta, path));
    }
    let spec = template.spec.clone().unwrap_or_default();
    errs.extend(validate_pod_spec(&spec, &path.child("spec")));
    errs
}

/// `ValidatePodSpec` (the commonly used parts).
pub fn validate_pod_spec(spec: &PodSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let volume_names = validate_volumes(volumes, &path.child("volumes"), &mut errs);

    let mut container_names = BTreeSet::new();
    let init = spec.init_containers.as_deref().unwrap_or_default();
    for (i, c) in init.iter().enumerate() {
        let p = path.child("initContainers").index(i);
        errs.extend(validate_container(
            c,
            &p,
            &volume_names,
            &mut container_names,
        ));
        // Only `Always` is allowed: it makes the init container a sidecar.
        if let Some(policy) = c.restart_policy.as_deref()
            && policy != "Always"
        {
            errs.push(FieldError::not_supported(
                &p.child("restartPolicy"),
                policy,
                &["Always"],
            ));
        }
    }
    if spec.containers.is_empty() {
        errs.push(FieldError::required(&path.child("containers"), ""));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let p = path.child("containers").index(i);
        errs.extend(validate_container(
            c,
            &p,
            &volume_names,
            &mut container_names,
        ));
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }

    errs.extend(validate_enum(
        spec.restart_policy.as_deref(),
        &path.child("restartPolicy"),
        &["Always", "OnFailure", "Never"],
    ));
    errs.extend(validate_enum(
        spec.dns_policy.as_deref(),
        &path.child("dnsPolicy"),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    ));
    if let Some(selector) = &spec.node_selector {
        errs.extend(validate_labels(selector, &path.child("nodeSelector")));
    }
    for (field, value) in [
        ("serviceAccountName", &spec.service_account_name),
        ("nodeName", &spec.node_name),
        ("schedulerName", &spec.scheduler_name),
    ] {
        let value = value.as_deref().unwrap_or("");
        if !value.is_empty() {
            for msg in is_dns1123_subdomain(value) {
                errs.push(FieldError::invalid(&path.child(field), value, &msg));
            }
        }
    }
    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        let value = value.as_deref().unwrap_or("");
        if !value.is_empty() {
            for msg in is_dns1123_label(value) {
                errs.push(FieldError::invalid(&path.child(field), value, &msg));
            }
        }
    }
    if let Some(secs) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&secs)
    {
        errs.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            secs,
            &inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        errs.extend(validate_toleration(t, &path.child("tolerations").index(i)));
    }
    errs
}

/// A required enum field: `Required value` when empty, `Unsupported value` when unknown.
pub fn validate_enum(value: Option<&str>, path: &FieldPath, supported: &[&str]) -> Vec<FieldError> {
    match value.unwrap_or("") {
        "" => vec![FieldError::required(path, "")],
        v if supported.contains(&v) => Vec::new(),
        v => vec![FieldError::not_supported(path, v, supported)],
    }
}

fn validate_volumes(
    volumes: &[Volume],
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = path.index(i);
        let sources: Vec<String> = serde_json::to_value(v)
            .ok()
            .and_then(|j| {
                j.as_object()
                    .map(|o| o.keys().filter(|k| *k != "name").cloned().collect())
            })
            .unwrap_or_default();
        match sources.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a volume type")),
            [_] => {}
            [_, rest @ ..] => {
                for source in rest {
                    errs.push(FieldError::forbidden(
                        &p.child(source),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
        let name_path = p.child("name");
        if v.name.is_empty() {
            errs.push(FieldError::required(&name_path, ""));
        } else {
            for msg in is_dns1123_label(&v.name) {
                errs.push(FieldError::invalid(&name_path, &v.name, &msg));
            }
        }
        if !names.insert(v.name.clone()) {
            errs.push(FieldError::duplicate(&name_path, &v.name));
        }
    }
    names
}

/// One container's own rules (`validateContainerCommon`, the parts in use), its name checked
/// unique among `names` (and added to them).
pub(crate) fn validate_container(
    c: &Container,
    path: &FieldPath,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name_path = path.child("name");
    if c.name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        for msg in is_dns1123_label(&c.name) {
            errs.push(FieldError::invalid(&name_path, &c.name, &msg));
        }
    }
    if !names.insert(c.name.clone()) {
        errs.push(FieldError::duplicate(&name_path, &c.name));
    }
    if c.image.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    }
    match c.termination_message_policy.as_deref().unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            &path.child("terminationMessagePolicy"),
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
        other => errs.push(FieldError::invalid(
            &path.child("terminationMessagePolicy"),
            other,
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
    }
    errs.extend(validate_ports(
        c.ports.as_deref().unwrap_or_default(),
        &path.child("ports"),
    ));
    for (i, env) in c.env.iter().flatten().enumerate() {
        errs.extend(validate_env_var(env, &path.child("env").index(i)));
    }
    errs.extend(validate_volume_mounts(
        c.volume_mounts.as_deref().unwrap_or_default(),
        volumes,
        &path.child("volumeMounts"),
    ));
    if let Some(resources) = &c.resources {
        errs.extend(validate_resources(resources, &path.child("resources")));
    }
    errs.extend(validate_enum(
        c.image_pull_policy.as_deref(),
        &path.child("imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    ));
    errs
}

fn validate_ports(ports: &[ContainerPort], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(&p.child("name"), name, &msg));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            for msg in is_valid_port_num(port.container_port) {
                errs.push(FieldError::invalid(
                    &p.child("containerPort"),
                    port.container_port,
                    &msg,
                ));
            }
        }
        if let Some(host_port) = port.host_port.filter(|h| *h != 0) {
            for msg in is_valid_port_num(host_port) {
                errs.push(FieldError::invalid(&p.child("hostPort"), host_port, &msg));
            }
        }
        errs.extend(validate_protocol(
            port.protocol.as_deref(),
            &p.child("protocol"),
        ));
    }
    errs
}

/// `validateProtocol`: TCP, UDP or SCTP.
pub fn validate_protocol(protocol: Option<&str>, path: &FieldPath) -> Vec<FieldError> {
    validate_enum(protocol, path, &["SCTP", "TCP", "UDP"])
}

fn validate_env_var(env: &EnvVar, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if env.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    for msg in is_env_var_name(&env.name) {
        errs.push(FieldError::invalid(&path.child("name"), &env.name, &msg));
    }
    if let Some(from) = &env.value_from {
        let p = path.child("valueFrom");
        let sources = [
            from.field_ref.is_some(),
            from.resource_field_ref.is_some(),
            from.config_map_key_ref.is_some(),
            from.secret_key_ref.is_some(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if sources == 0 {
            errs.push(FieldError::invalid(
                &p,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &p,
                "",
                "may not have more than one field specified at a time",
            ));
        } else if !env.value.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::invalid(
                &p,
                "",
                "may not be specified when `value` is not empty",
            ));
        }
    }
    errs
}

fn validate_volume_mounts(
    mounts: &[VolumeMount],
    volumes: &BTreeSet<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = BTreeSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let p = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(FieldError::not_found(&p.child("name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(&p.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                &p.child("mountPath"),
                &m.mount_path,
                "must be unique",
            ));
        }
    }
    errs
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// `ValidateContainerResourceRequirements`: known resource names, quantities that parse and are
/// not negative, and requests no larger than limits.
pub fn validate_resources(res: &ResourceRequirements, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let limits_path = path.child("limits");
    let requests_path = path.child("requests");
    let mut parsed_limits = std::collections::BTreeMap::new();
    for (name, q) in res.limits.iter().flatten() {
        let p = limits_path.key(name);
        errs.extend(validate_resource_name(name, &p));
        if let Some(parsed) = parse_quantity(&q.0, &p, &mut errs) {
            parsed_limits.insert(name.as_str(), (parsed, q.0.as_str()));
        }
    }
    for (name, q) in res.requests.iter().flatten() {
        let p = requests_path.key(name);
        errs.extend(validate_resource_name(name, &p));
        let Some(request) = parse_quantity(&q.0, &p, &mut errs) else {
            continue;
        };
        if let Some((limit, limit_text)) = parsed_limits.get(name.as_str()) {
            let overcommit =
                is_standard_container_resource(name) && !name.starts_with("hugepages-");
            if !overcommit && request != *limit {
                errs.push(FieldError::invalid(
                    &requests_path,
                    q.0.as_str(),
                    &format!("must be equal to {name} limit of {limit_text}"),
                ));
            } else if request > *limit {
                errs.push(FieldError::invalid(
                    &requests_path,
                    q.0.as_str(),
                    &format!("must be less than or equal to {name} limit of {limit_text}"),
                ));
            }
        }
    }
    errs
}

fn validate_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|msg| FieldError::invalid(path, name, &msg))
        .collect();
    if !name.contains('/') && !is_standard_container_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource for containers",
        ));
    }
    errs
}

fn parse_quantity(text: &str, path: &FieldPath, errs: &mut Vec<FieldError>) -> Option<Quantity> {
    match Quantity::parse(text) {
        Ok(q) if q.nanos() < 0 => {
            errs.push(FieldError::invalid(
                path,
                text,
                "must be greater than or equal to 0",
            ));
            None
        }
        Ok(q) => Some(q),
        Err(e) => {
            errs.push(FieldError::invalid(path, text, &e.to_string()));
            None
        }
    }
}

fn validate_toleration(t: &Toleration, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let key = t.key.as_deref().unwrap_or("");
    let operator = t.operator.as_deref().unwrap_or("");
    let value = t.value.as_deref().unwrap_or("");
    let effect = t.effect.as_deref().unwrap_or("");
    for msg in if key.is_empty() {
        Vec::new()
    } else {
        is_qualified_name(key)
    } {
        errs.push(FieldError::invalid(&path.child("key"), key, &msg));
    }
    if key.is_empty() && operator != "Exists" {
        errs.push(FieldError::invalid(
            &path.child("operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    if t.toleration_seconds.is_some() && effect != "NoExecute" {
        errs.push(FieldError::invalid(
            &path.child("effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
    match operator {
        "Equal" | "" => {
            let msgs = is_label_value(value);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child("operator"),
                    value,
                    &msgs.join(";"),
                ));
            }
        }
        "Exists" => {
            if !value.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child("operator"),
                    value,
                    "value must be empty when `operator` is 'Exists'",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("operator"),
            other,
            &["Equal", "Exists"],
        )),
    }
    if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        errs.push(FieldError::not_supported(
            &path.child("effect"),
            effect,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        ));
    }
    errs
}
