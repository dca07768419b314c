//! Ephemeral containers in a Pod: their defaults (those of any container,
//! `SetDefaults_EphemeralContainer`), their validation (`validateEphemeralContainers` in
//! `pkg/apis/core/validation/validation.go`) and the rule of the `ephemeralcontainers`
//! subresource, that existing ones stay as they are (`ValidatePodEphemeralContainersUpdate`).
//!
//! | rule | error |
//! | --- | --- |
//! | the container's own fields (name, image, policies, env, mounts) | as for any container |
//! | a name taken by any container of the pod | `spec.ephemeralContainers[i].name: Duplicate value: "x"` |
//! | `targetContainerName` not a regular or init container | `...targetContainerName: Not found: "x"` |
//! | ports, resources, resizePolicy, restartPolicy, probes, lifecycle | `...ports: Forbidden: cannot be set for an Ephemeral Container` |
//! | a volume mount's `subPath` or `subPathExpr` | `...volumeMounts[j].subPath: Forbidden: cannot be set for an Ephemeral Container` |
//! | an existing one removed | `spec.ephemeralContainers: Forbidden: existing ephemeral containers "x" may not be removed` |
//! | an existing one changed | `spec.ephemeralContainers: Forbidden: existing ephemeral containers "x" may not be changed` and a diff |
//! | a mirror (static) pod | `: Forbidden: static pods do not support ephemeral containers` |
//! | any on create | `spec.ephemeralContainers: Forbidden: cannot be set on create` |
//!
//! Simplification: the diff after "may not be changed" lists the fields that differ, one `-`
//! and one `+` line each, in the shape of Go's `cmp.Diff` but not its exact text.

use super::defaults::default_container;
use super::validation::validate_container;
use crate::strategy::FieldError;
use crate::strategy::field::FieldPath;
use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};
use serde_json::Value;
use std::collections::BTreeSet;

/// The annotation of a mirror pod (a static pod's copy in the API).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What every ephemeral-container field error says.
pub const CANNOT_BE_SET: &str = "cannot be set for an Ephemeral Container";

/// The container an ephemeral container is (`EphemeralContainerCommon` converted to
/// `Container`, as Kubernetes converts it for validation and for the kubelet).
pub fn as_container(e: &EphemeralContainer) -> Container {
    apimachinery::ephemeral_container::as_container(e)
}

/// `c` as an ephemeral container targeting `target`.
pub fn from_container(c: Container, target: Option<String>) -> EphemeralContainer {
    EphemeralContainer {
        args: c.args,
        command: c.command,
        env: c.env,
        env_from: c.env_from,
        image: c.image,
        image_pull_policy: c.image_pull_policy,
        lifecycle: c.lifecycle,
        liveness_probe: c.liveness_probe,
        name: c.name,
        ports: c.ports,
        readiness_probe: c.readiness_probe,
        resize_policy: c.resize_policy,
        resources: c.resources,
        restart_policy: c.restart_policy,
        security_context: c.security_context,
        startup_probe: c.startup_probe,
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        target_container_name: target,
        termination_message_path: c.termination_message_path,
        termination_message_policy: c.termination_message_policy,
        tty: c.tty,
        volume_devices: c.volume_devices,
        volume_mounts: c.volume_mounts,
        working_dir: c.working_dir,
    }
}

/// `SetDefaults_EphemeralContainer`: each one gets the defaults of a container.
pub fn default_ephemeral_containers(spec: &mut PodSpec) {
    for e in spec.ephemeral_containers.iter_mut().flatten() {
        let mut c = as_container(e);
        default_container(&mut c);
        *e = from_container(c, e.target_container_name.take());
    }
}

/// The fields an ephemeral container may not set (every field outside Kubernetes'
/// `allowedEphemeralContainerFields`), in the order of the Go struct, as the lower-cased field
/// names the errors carry, with whether `e` sets them.
fn forbidden_fields(e: &EphemeralContainer) -> [(&'static str, bool); 8] {
    let resources = e.resources.as_ref().is_some_and(|r| {
        r.limits.as_ref().is_some_and(|l| !l.is_empty())
            || r.requests.as_ref().is_some_and(|l| !l.is_empty())
            || r.claims.as_ref().is_some_and(|l| !l.is_empty())
    });
    [
        ("ports", e.ports.as_ref().is_some_and(|p| !p.is_empty())),
        ("resources", resources),
        (
            "resizePolicy",
            e.resize_policy.as_ref().is_some_and(|p| !p.is_empty()),
        ),
        ("restartPolicy", e.restart_policy.is_some()),
        ("livenessProbe", e.liveness_probe.is_some()),
        ("readinessProbe", e.readiness_probe.is_some()),
        ("startupProbe", e.startup_probe.is_some()),
        ("lifecycle", e.lifecycle.is_some()),
    ]
}

/// `validateEphemeralContainers`: each ephemeral container of `spec` (under `path`, e.g.
/// `spec.ephemeralContainers`) against the rules of the module table.
pub fn validate_ephemeral_containers(spec: &PodSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(list) = spec.ephemeral_containers.as_ref().filter(|l| !l.is_empty()) else {
        return errs;
    };
    let volumes: BTreeSet<String> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect();
    let others: BTreeSet<&str> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    let mut all: BTreeSet<String> = others.iter().map(|n| (*n).to_owned()).collect();
    for (i, e) in list.iter().enumerate() {
        let p = path.index(i);
        let c = as_container(e);
        // The container's own rules; the uniqueness of its name is checked below, across all
        // containers of the pod.
        errs.extend(validate_container(&c, &p, &volumes, &mut BTreeSet::new()));
        let image = c.image.as_deref().unwrap_or_default();
        if image.len() != image.trim().len() {
            errs.push(FieldError::invalid(
                &p.child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
        if !all.insert(e.name.clone()) {
            errs.push(FieldError::duplicate(&p.child("name"), &e.name));
        }
        if let Some(target) = e.target_container_name.as_deref().filter(|t| !t.is_empty())
            && !others.contains(target)
        {
            errs.push(FieldError::not_found(
                &p.child("targetContainerName"),
                target,
            ));
        }
        for (field, set) in forbidden_fields(e) {
            if set {
                errs.push(FieldError::forbidden(&p.child(field), CANNOT_BE_SET));
            }
        }
        for (j, m) in e.volume_mounts.iter().flatten().enumerate() {
            let mp = p.child("volumeMounts").index(j);
            if m.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(&mp.child("subPath"), CANNOT_BE_SET));
            }
            if m.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(
                    &mp.child("subPathExpr"),
                    CANNOT_BE_SET,
                ));
            }
        }
    }
    errs
}

/// `ValidatePodCreate`'s rule: ephemeral containers are only ever added through the
/// `ephemeralcontainers` subresource.
pub fn validate_none_on_create(spec: &PodSpec) -> Option<FieldError> {
    spec.ephemeral_containers
        .as_ref()
        .filter(|l| !l.is_empty())
        .map(|_| {
            FieldError::forbidden(
                &FieldPath::new("spec").child("ephemeralContainers"),
                "cannot be set on create",
            )
        })
}

/// The second part of `ValidatePodEphemeralContainersUpdate`: a mirror pod takes none, and the
/// ephemeral containers `old` has are all still in `new`, unchanged (matched by name: a patch
/// does not keep the order).
pub fn validate_only_additions(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mirror = old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    if mirror {
        return vec![FieldError::forbidden(
            &FieldPath::new(""),
            "static pods do not support ephemeral containers",
        )];
    }
    let path = FieldPath::new("spec").child("ephemeralContainers");
    let sent = new
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default();
    let stored = old
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default();
    let mut errs = Vec::new();
    for o in stored {
        match sent.iter().find(|n| n.name == o.name) {
            None => errs.push(FieldError::forbidden(
                &path,
                &format!(
                    "existing ephemeral containers {:?} may not be removed\n",
                    o.name
                ),
            )),
            Some(n) if n != o => errs.push(FieldError::forbidden(
                &path,
                &format!(
                    "existing ephemeral containers {:?} may not be changed\n{}",
                    o.name,
                    diff(o, n)
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}

/// The fields of `new` that differ from `old`, in the shape of Go's `cmp.Diff`.
fn diff(old: &EphemeralContainer, new: &EphemeralContainer) -> String {
    let (o, n) = (
        serde_json::to_value(old).unwrap_or_default(),
        serde_json::to_value(new).unwrap_or_default(),
    );
    let keys: BTreeSet<&String> = o
        .as_object()
        .into_iter()
        .chain(n.as_object())
        .flat_map(|m| m.keys())
        .collect();
    let show = |v: Option<&Value>| v.map_or_else(|| "nil".to_owned(), Value::to_string);
    let mut out = String::from("  core.EphemeralContainer{\n");
    for k in keys {
        if o.get(k) != n.get(k) {
            out.push_str(&format!("- \t{k}: {},\n", show(o.get(k))));
            out.push_str(&format!("+ \t{k}: {},\n", show(n.get(k))));
        }
    }
    out.push_str("  }\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::messages;
    use serde_json::json;

    fn spec(ephemeral: Value) -> PodSpec {
        let mut spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "nginx", "image": "nginx"}],
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "ephemeralContainers": ephemeral,
        }))
        .unwrap();
        super::super::default_pod_spec(&mut spec);
        spec
    }

    fn errors(ephemeral: Value) -> Vec<String> {
        messages(&validate_ephemeral_containers(
            &spec(ephemeral),
            &FieldPath::new("spec").child("ephemeralContainers"),
        ))
    }

    #[test]
    fn a_debug_container_as_kubectl_sends_it_is_valid_and_defaulted() {
        let s = spec(
            json!([{"name": "debugger", "image": "busybox", "stdin": true,
            "tty": true, "targetContainerName": "nginx", "terminationMessagePolicy": "File"}]),
        );
        let e = &s.ephemeral_containers.as_ref().unwrap()[0];
        assert_eq!(e.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            e.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(e.target_container_name.as_deref(), Some("nginx"));
        assert!(e.resources.is_some(), "resources: {{}} as Go writes it");
        assert_eq!(
            errors(
                json!([{"name": "debugger", "image": "busybox", "targetContainerName": "setup"}])
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn fields_a_pod_relies_on_are_forbidden_with_kubernetes_texts() {
        let got = errors(json!([{"name": "dbg", "image": "busybox",
            "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "1"}},
            "readinessProbe": {"exec": {"command": ["true"]}},
            "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
            "volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "x"}]}]));
        assert_eq!(
            got,
            [
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
    }

    #[test]
    fn names_are_unique_across_the_pod_and_targets_must_exist() {
        assert_eq!(
            errors(json!([{"name": "nginx", "image": "busybox"},
                {"name": "dbg", "image": "busybox"},
                {"name": "dbg", "image": "busybox", "targetContainerName": "nope"}])),
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"nginx\"",
                "spec.ephemeralContainers[2].name: Duplicate value: \"dbg\"",
                "spec.ephemeralContainers[2].targetContainerName: Not found: \"nope\"",
            ]
        );
        assert_eq!(
            errors(json!([{"name": "dbg"}])),
            ["spec.ephemeralContainers[0].image: Required value"]
        );
    }

    fn pod(ephemeral: Value, annotations: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "annotations": annotations},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}],
                "ephemeralContainers": ephemeral},
        }))
        .unwrap()
    }

    #[test]
    fn existing_ones_may_be_neither_removed_nor_changed() {
        let old = pod(json!([{"name": "a", "image": "busybox"}]), json!({}));
        let added = pod(
            json!([{"name": "b", "image": "busybox"}, {"name": "a", "image": "busybox"}]),
            json!({}),
        );
        assert!(validate_only_additions(&added, &old).is_empty());
        let removed = pod(json!([{"name": "b", "image": "busybox"}]), json!({}));
        assert_eq!(
            messages(&validate_only_additions(&removed, &old)),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"a\" may not be removed\n"
            ]
        );
        let changed = pod(json!([{"name": "a", "image": "alpine"}]), json!({}));
        let msg = messages(&validate_only_additions(&changed, &old)).join("");
        assert!(
            msg.starts_with("spec.ephemeralContainers: Forbidden: existing ephemeral containers \"a\" may not be changed\n"),
            "{msg}"
        );
        assert!(msg.contains("- \timage: \"busybox\""), "{msg}");
        assert!(msg.contains("+ \timage: \"alpine\""), "{msg}");
        let mirror = pod(json!([]), json!({"kubernetes.io/config.mirror": "x"}));
        assert_eq!(
            messages(&validate_only_additions(&added, &mirror)),
            [": Forbidden: static pods do not support ephemeral containers"]
        );
    }

    #[test]
    fn none_on_create() {
        let s = spec(json!([{"name": "dbg", "image": "busybox"}]));
        assert_eq!(
            validate_none_on_create(&s)
                .map(|e| e.to_string())
                .as_deref(),
            Some("spec.ephemeralContainers: Forbidden: cannot be set on create")
        );
        assert!(validate_none_on_create(&spec(json!([]))).is_none());
    }
}
