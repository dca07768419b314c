//! An ephemeral container as a container: `EphemeralContainerCommon` has the fields of a
//! `Container`, and Kubernetes converts one to the other to validate it and to run it
//! (`pkg/apis/core/validation` `validateEphemeralContainers`, the kubelet's
//! `kubecontainer.EphemeralContainer` handling). The API server and the simulated kubelet share
//! it.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer};

/// The `Container` with the ephemeral container's fields (`targetContainerName` has no place
/// there and is dropped).
pub fn as_container(e: &EphemeralContainer) -> Container {
    Container {
        args: e.args.clone(),
        command: e.command.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        image: e.image.clone(),
        image_pull_policy: e.image_pull_policy.clone(),
        lifecycle: e.lifecycle.clone(),
        liveness_probe: e.liveness_probe.clone(),
        name: e.name.clone(),
        ports: e.ports.clone(),
        readiness_probe: e.readiness_probe.clone(),
        resize_policy: e.resize_policy.clone(),
        resources: e.resources.clone(),
        restart_policy: e.restart_policy.clone(),
        security_context: e.security_context.clone(),
        startup_probe: e.startup_probe.clone(),
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        termination_message_path: e.termination_message_path.clone(),
        termination_message_policy: e.termination_message_policy.clone(),
        tty: e.tty,
        volume_devices: e.volume_devices.clone(),
        volume_mounts: e.volume_mounts.clone(),
        working_dir: e.working_dir.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_field_is_carried_over() {
        let e: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "dbg", "image": "busybox", "command": ["sh"], "stdin": true, "tty": true,
            "targetContainerName": "nginx", "env": [{"name": "A", "value": "1"}]
        }))
        .expect("ephemeral container");
        let c = as_container(&e);
        let back = serde_json::to_value(&c).expect("json");
        assert_eq!(
            back,
            serde_json::json!({"name": "dbg", "image": "busybox", "command": ["sh"],
                "stdin": true, "tty": true, "env": [{"name": "A", "value": "1"}]})
        );
    }
}
